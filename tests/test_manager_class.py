"""``ToolTerminalApp.manager_class``: an operator's subclass of the registry is the one used."""

from __future__ import annotations

import typing as t

import pytest
from traitlets.config import Config

from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.manager import ToolTerminalManager

from .conftest import Api


class CountingManager(ToolTerminalManager):
    """A registry that counts the instance listings it answers."""

    listed = 0

    async def list_instances(self, owner: str) -> list[dict[str, t.Any]]:
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
