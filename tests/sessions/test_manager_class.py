"""``ToolTerminalApp.manager_class``: an operator's subclass of the registry is the one used;
the registry's settings by their names on the app, and renamed settings, warn once."""

from __future__ import annotations

import logging
import logging.handlers
import typing as t

import pytest
from traitlets.config import Config

from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.files import FileTransfers
from jupyter_tool_terminal.manager import ToolTerminalManager
from jupyter_tool_terminal.runtime.base import Instance
from jupyter_tool_terminal.runtime.docker import DockerRuntime
from jupyter_tool_terminal.runtime.local import LocalRuntime
from jupyter_tool_terminal.settings import forward_moved
from jupyter_tool_terminal.tooltypes import ToolType

from ..conftest import Api


class CountingManager(ToolTerminalManager):
    """A registry that counts the instance listings it answers."""

    listed = 0

    async def list_instances(self, owner: str) -> list[tuple[Instance, ToolType]]:
        """Count, then list as the base class does."""
        CountingManager.listed += 1
        return await super().list_instances(owner)


@pytest.mark.parametrize("extension_config", [{"manager_class": CountingManager}])
async def test_the_configured_manager_class_serves_the_routes(
    alice: Api, tool_app: ToolTerminalApp
) -> None:
    assert isinstance(tool_app.session_manager, CountingManager)
    before = CountingManager.listed
    status, _ = await alice.status("GET", "instances")
    assert status == 200
    assert CountingManager.listed == before + 1


class TestSettings:
    """The registry's settings are ``c.ToolTerminalManager``'s; ``c.ToolTerminalApp``'s names
    (the contract's) set the same ones and win."""

    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"max_clients_per_observer": 3, "max_input_backlog": 4096}

    @pytest.fixture
    def jp_server_config(self, jp_server_config: Config) -> Config:
        jp_server_config.ToolTerminalManager.max_observers = 5
        jp_server_config.ToolTerminalManager.max_clients_per_observer = 7
        return jp_server_config

    def test_either_name_sets_it_the_apps_wins(self, tool_app: ToolTerminalApp) -> None:
        manager = tool_app.session_manager
        assert manager is not None
        assert manager.max_observers == 5
        assert manager.max_clients_per_observer == 3
        assert manager.max_input_backlog == 4096
        assert manager.disconnect_grace == 0  # the suite's c.ToolTerminalApp.disconnect_grace
        assert manager.scrollback_lines == ToolTerminalManager.scrollback_lines.default_value

    def test_the_apps_names_warn_once_each(self, tool_app: ToolTerminalApp) -> None:
        warned = _warnings(tool_app.log, lambda: forward_moved(tool_app))
        for name in ("max_clients_per_observer", "max_input_backlog"):
            expected = (
                f"ToolTerminalApp.{name} is deprecated: set ToolTerminalManager.{name} instead "
                "(the same setting)"
            )
            assert warned.count(expected) == 1, warned
        assert not any("max_observers" in message for message in warned)


@pytest.mark.parametrize("runtime_name", ["local"])
@pytest.mark.parametrize("section", ["ToolTerminalManager", "ToolTerminalApp"])
class TestScreenMemoryLimit:
    """The default ``screen_memory_limit`` is ``max_sessions`` sessions' shares, whichever
    name set ``max_sessions`` (its own, ``c.ToolTerminalManager``, or the app's old one)."""

    @pytest.fixture
    def jp_server_config(self, jp_server_config: Config, section: str) -> Config:
        jp_server_config[section].max_sessions = 3
        return jp_server_config

    def test_its_default_follows_max_sessions(self, tool_app: ToolTerminalApp) -> None:
        manager = tool_app.session_manager
        assert manager is not None
        assert manager.max_sessions == 3
        budget = manager.screens.budget
        assert budget is not None
        share = manager.screens.model_class.session_share_mib
        assert budget.limit == int(3 * share * 2**20)


def _warnings(log: t.Any, action: t.Callable[[], object]) -> list[str]:
    """The warnings ``log`` gets while ``action`` runs (the app's log does not propagate)."""
    handler = logging.handlers.BufferingHandler(1000)
    log.addHandler(handler)
    try:
        action()
    finally:
        log.removeHandler(handler)
    return [record.getMessage() for record in handler.buffer if record.levelno == logging.WARNING]


@pytest.mark.parametrize("extension_config", [{"ping_timeout": 0.5}])
def test_the_old_name_of_the_websocket_pong_timeout_sets_it_and_warns(
    tool_app: ToolTerminalApp,
) -> None:
    assert tool_app.pong_timeout == 0.5  # set by its old name in the configuration
    warned = _warnings(tool_app.log, lambda: setattr(tool_app, "ping_timeout", 0.7))
    assert tool_app.pong_timeout == 0.7
    assert warned == [
        "ToolTerminalApp.ping_timeout is deprecated: set ToolTerminalApp.pong_timeout instead "
        "(the same setting)"
    ]


def test_the_old_name_of_the_engines_start_up_check_timeout_sets_it_and_warns() -> None:
    log = logging.getLogger("test-renamed-setting")
    runtimes = []
    warned = _warnings(log, lambda: runtimes.append(DockerRuntime(log=log, ping_timeout=2)))
    (runtime,) = runtimes
    try:
        assert runtime.startup_check_timeout == 2
    finally:
        runtime.close()
    assert warned == [
        "DockerRuntime.ping_timeout is deprecated: set DockerRuntime.startup_check_timeout "
        "instead (the same setting)"
    ]


def test_every_old_name_on_the_app_works_warns_once_and_wins() -> None:
    """One mechanism for every moved setting: the manager's, the file transfers' (which once
    answered to its old name silently) and the agents' old names each warn once, and win
    over the new name as jupyter_server's moved settings do."""
    app = ToolTerminalApp(
        config=Config(
            {
                "ToolTerminalApp": {
                    "max_file_transfer_bytes": 4096,
                    "idle_timeout": 5.0,
                    "agent_output_limit": 2048,
                },
                "FileTransfers": {"max_file_transfer_bytes": 8192},
                "ToolTerminalManager": {"idle_timeout": 9.0},
            }
        )
    )
    warned = _warnings(app.log, lambda: forward_moved(app))
    assert sorted(warned) == [
        "ToolTerminalApp.agent_output_limit is deprecated: set AgentTools.output_limit instead "
        "(the same setting)",
        "ToolTerminalApp.idle_timeout is deprecated: set ToolTerminalManager.idle_timeout "
        "instead (the same setting)",
        "ToolTerminalApp.max_file_transfer_bytes is deprecated: set "
        "FileTransfers.max_file_transfer_bytes instead (the same setting)",
    ]
    assert FileTransfers(parent=app).max_file_transfer_bytes == 4096
    runtime = LocalRuntime(parent=app, instances={}, owner="alice", tool_types={})
    assert ToolTerminalManager(parent=app, runtime=runtime, tool_types={}).idle_timeout == 5.0
