"""The documentation stays true to the code: the README keeps the sections the server links to,
and the generated reference pages name everything the code has (docs/source/_ext/jtt_reference.py,
which the Sphinx build of scripts/docs.sh runs; here without Sphinx)."""

from __future__ import annotations

import importlib.util
import re
import types
import typing as t

import pytest
import yaml
from traitlets.config import Configurable

from jupyter_tool_terminal import metrics, setup_status
from jupyter_tool_terminal.agents.tools import TOOLS

from ..conftest import REPO


@pytest.fixture(scope="module")
def reference() -> types.ModuleType:
    path = REPO / "docs" / "source" / "_ext" / "jtt_reference.py"
    spec = importlib.util.spec_from_file_location("jtt_reference", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_the_readme_has_the_sections_the_setup_notes_link_to() -> None:
    headings = re.findall(r"^#+ (.+)$", (REPO / "README.md").read_text(), flags=re.MULTILINE)
    anchors = {_github_anchor(heading) for heading in headings}
    for section in (
        setup_status.TOOL_TYPES_SECTION,
        setup_status.LOCAL_SECTION,
        setup_status.QUICK_START_SECTION,
    ):
        assert section in anchors, (section, sorted(anchors))


def test_the_readme_stays_short() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) <= 150


def test_the_config_reference_has_every_configurable_class(reference: types.ModuleType) -> None:
    page = reference.generate("config")
    classes = reference.configurable_classes()
    names = {cls.__name__ for cls in classes}
    assert {"ToolTerminalApp", "ToolTerminalManager", "DockerRuntime", "LocalRuntime"} <= names
    for cls in classes:
        assert issubclass(cls, Configurable)
        assert f".. autoconfigurable:: {cls.__module__}.{cls.__name__}" in page


def test_the_rest_reference_has_every_route(reference: types.ModuleType) -> None:
    page = reference.generate("rest-api")
    spec = yaml.safe_load((REPO / "jupyter_tool_terminal" / "rest-api.yml").read_text())
    for path, item in spec["paths"].items():
        for method in item:
            if method != "parameters":
                assert f"### {method.upper()} `{path}`" in page


def test_the_metrics_reference_has_every_metric(reference: types.ModuleType) -> None:
    page = reference.generate("metrics")
    for name in ("SESSIONS", "OPENS", "KILLS", "AGENT_CALLS", "ENGINE_UP"):
        metric: t.Any = getattr(metrics, name)
        assert f"`{metric._name}" in page


def test_the_mcp_reference_has_every_tool(reference: types.ModuleType) -> None:
    page = reference.generate("mcp-tools")
    for tool in TOOLS:
        assert f"## `{tool.name}`" in page


def test_the_event_reference_has_every_schema(reference: types.ModuleType) -> None:
    page = reference.generate("events")
    for path in (REPO / "jupyter_tool_terminal" / "event_schemas").glob("*/v*.yaml"):
        assert yaml.safe_load(path.read_text())["$id"] in page


def test_the_frontend_reference_has_the_command_ids(reference: types.ModuleType) -> None:
    page = reference.generate("frontend")
    for command in ("tool-terminal:open", "tool-terminal:reset", "tool-terminal:close"):
        assert f"`{command}`" in page


def test_the_websocket_reference_has_every_frame(reference: types.ModuleType) -> None:
    page = reference.generate("websocket")
    for frame in ("setup", "stdout", "exit", "error", "disconnect", "stdin", "set_size"):
        assert f'`["{frame}"' in page


def test_an_unknown_part_fails(reference: types.ModuleType) -> None:
    with pytest.raises(LookupError, match="unknown generated part"):
        reference.generate("nonsense")
