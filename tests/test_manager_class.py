"""``ToolTerminalApp.manager_class``: an operator's subclass of the registry is the one used."""

from __future__ import annotations

import typing as t

import pytest

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
