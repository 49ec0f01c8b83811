"""Agents' settings live on the objects that use them (``c.AgentStore``, ``c.AgentTools``); the
old names on ``ToolTerminalApp`` still work, with a warning once at start-up (settings.py, the
one mechanism of every moved setting)."""

from __future__ import annotations

import typing as t

import pytest
from traitlets.config import Config

from jupyter_tool_terminal.agents.store import AgentStore
from jupyter_tool_terminal.agents.tools import AgentTools
from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.files import FileTransfers
from jupyter_tool_terminal.manager import ToolTerminalManager
from jupyter_tool_terminal.settings import forward_moved, moves


class TestNewNames:
    @pytest.fixture
    def jp_server_config(self, jp_server_config: Config) -> Config:
        jp_server_config.AgentStore.max_agents_per_user = 3
        jp_server_config.AgentStore.path = ""
        jp_server_config.AgentTools.max_terminals_per_agent = 2
        jp_server_config.AgentTools.output_limit = 2048
        return jp_server_config

    def test_the_store_and_the_tools_take_their_own_settings(
        self, tool_app: ToolTerminalApp
    ) -> None:
        agents = tool_app.agents
        assert agents is not None
        assert agents.store.max_agents_per_user == 3
        assert agents.store.path is None  # (empty: in memory only)
        assert agents.tools.max_terminals_per_agent == 2
        assert agents.tools.output_limit == 2048
        assert agents.store.parent is tool_app
        assert agents.tools.parent is tool_app


class TestOldNames:
    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"max_terminals_per_agent": 2, "agent_token_lifetime": 120, "agents_file": ""}

    def test_old_names_still_work_and_warn_once(
        self, jp_serverapp: t.Any, tool_app: ToolTerminalApp, caplog: pytest.LogCaptureFixture
    ) -> None:
        agents = tool_app.agents
        assert agents is not None
        assert agents.tools.max_terminals_per_agent == 2
        assert agents.store.token_lifetime == 120
        assert agents.store.path is None
        # Start-up already logged the warnings: hand the moved settings on once more to see
        # them (the suite's own old name, `disconnect_grace`, warns too: not counted here).
        caplog.clear()
        forward_moved(tool_app)
        warned = [
            r.getMessage()
            for r in caplog.records
            if "deprecated" in r.getMessage() and ": set Agent" in r.getMessage()
        ]
        assert len(warned) == 3
        assert any("AgentTools.max_terminals_per_agent" in message for message in warned)

    def test_every_moved_name_names_a_setting_of_its_new_owner(self) -> None:
        owners: dict[str, type[AgentStore | AgentTools | ToolTerminalManager | FileTransfers]] = {
            "AgentStore": AgentStore,
            "AgentTools": AgentTools,
            "ToolTerminalManager": ToolTerminalManager,
            "FileTransfers": FileTransfers,
        }
        for old, moved_to in moves(ToolTerminalApp).items():
            owner, _, new = moved_to.partition(".")
            assert old in ToolTerminalApp.class_trait_names(config=True)
            assert new in owners[owner].class_trait_names(config=True), (old, owner, new)
