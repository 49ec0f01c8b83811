"""Choosing the runtime: an explicit "docker" without an engine is a clear start-up error."""

from __future__ import annotations

import logging
import typing as t

import pytest

from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.runtime import RuntimeUnavailable
from jupyter_tool_terminal.runtime.docker import DockerRuntime

from ..conftest import Api

#: An engine address where nothing answers.
NOWHERE = "tcp://127.0.0.1:9"


@pytest.fixture
def extension_config(monkeypatch: pytest.MonkeyPatch) -> dict[str, t.Any]:
    # Set before the server (and its check of the engine) starts.
    monkeypatch.setenv("DOCKER_HOST", NOWHERE)
    return {"runtime": "docker"}


async def test_docker_without_an_engine_disables_the_extension(
    alice: Api, tool_app: ToolTerminalApp
) -> None:
    assert tool_app.session_manager is None
    status, body = await alice.status("GET", "instances")
    assert status == 503
    assert body["message"] == "Tool terminals are not available on this server."


def test_the_engine_check_says_where_it_looked_and_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", NOWHERE)
    runtime = DockerRuntime(startup_check_timeout=1)
    with pytest.raises(RuntimeUnavailable) as raised:
        runtime.check_available()
    runtime.close()
    assert str(raised.value) == (
        f"no Docker Engine answers at {NOWHERE}; start Docker or set DOCKER_HOST"
    )


class TestServiceUrl:
    """A user's server pointed at the Hub service serves no tool terminals and says only that."""

    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"service_url": "/services/tool-terminal/", "tool_types": {}}

    @pytest.fixture
    def startup_log(self, monkeypatch: pytest.MonkeyPatch) -> list[str]:
        """What the extension logs while it starts (request it before the server)."""
        lines: list[str] = []
        real = ToolTerminalApp.initialize_settings

        def initialize_settings(app: ToolTerminalApp) -> None:
            collect = logging.Handler()
            collect.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
            app.log.addHandler(collect)
            try:
                real(app)
            finally:
                app.log.removeHandler(collect)

        monkeypatch.setattr(ToolTerminalApp, "initialize_settings", initialize_settings)
        return lines

    async def test_it_says_it_uses_the_service_and_nothing_else(
        self, startup_log: list[str], alice: Api, tool_app: ToolTerminalApp
    ) -> None:
        assert startup_log == [
            "jupyter_tool_terminal: tool terminals are served by the JupyterHub service at "
            "/services/tool-terminal/ (service_url); this server runs none"
        ]
        assert tool_app.session_manager is None
        status, body = await alice.status("GET", "instances")
        assert status == 503
        assert body["message"] == (
            "Tool terminals are served by the JupyterHub service at /services/tool-terminal/, "
            "not by this server."
        )
