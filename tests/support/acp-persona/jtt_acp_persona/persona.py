"""The scripted agent as a Jupyter AI persona whose ACP terminals are tool terminals."""

from __future__ import annotations

import sys
import typing as t
from pathlib import Path

from jupyter_ai_acp_client.base_acp_persona import BaseAcpPersona
from jupyter_ai_persona_manager import PersonaDefaults

from jupyter_tool_terminal.acp import ToolTerminalAcpClient


class ScriptedAcpPersona(BaseAcpPersona):  # type: ignore[misc]
    """``ScriptedAgent``: runs one command per message through ACP's ``terminal/*``."""

    acp_client_class = ToolTerminalAcpClient

    def __init__(self, *args: t.Any, **kwargs: t.Any) -> None:
        super().__init__(
            *args, executable=[sys.executable, "-m", "jtt_acp_persona.agent"], **kwargs
        )

    @property
    def defaults(self) -> PersonaDefaults:
        return PersonaDefaults(
            name="ScriptedAgent",
            description="A scripted ACP agent (jupyter-tool-terminal's tests).",
            avatar_path=str(Path(__file__).with_name("avatar.svg")),
            system_prompt="",
        )
