"""Choosing the runtime: an explicit "docker" without an engine is a clear start-up error."""

from __future__ import annotations

import typing as t

import pytest

from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.runtime import RuntimeUnavailable
from jupyter_tool_terminal.runtime.docker import DockerRuntime

from .conftest import Api

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
    runtime = DockerRuntime(ping_timeout=1)
    with pytest.raises(RuntimeUnavailable) as raised:
        runtime.check_available()
    runtime.close()
    assert str(raised.value) == (
        f"no Docker Engine answers at {NOWHERE}; start Docker or set DOCKER_HOST"
    )
