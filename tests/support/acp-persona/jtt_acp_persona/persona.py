"""The scripted agent as Jupyter AI personas: one whose ACP terminals are tool terminals by its
own class attribute, and one as Jupyter AI's bundled personas are (Jupyter AI's own client),
which gets tool terminals only by the server's setting (``c.JupyterAiPersonas``)."""

from __future__ import annotations

import sys
import typing as t
from pathlib import Path

from jupyter_ai_acp_client.base_acp_persona import BaseAcpPersona
from jupyter_ai_persona_manager import PersonaDefaults

from jupyter_tool_terminal.acp import ToolTerminalAcpClient

_AGENT = [sys.executable, "-m", "jtt_acp_persona.agent"]
_AVATAR = str(Path(__file__).with_name("avatar.svg"))


class ScriptedAcpPersona(BaseAcpPersona):  # type: ignore[misc]
    """``ScriptedAgent``: runs one command per message through ACP's ``terminal/*``."""

    acp_client_class = ToolTerminalAcpClient

    def __init__(self, *args: t.Any, **kwargs: t.Any) -> None:
        super().__init__(*args, executable=_AGENT, **kwargs)

    @property
    def defaults(self) -> PersonaDefaults:
        return PersonaDefaults(
            name="ScriptedAgent",
            description="A scripted ACP agent (jupyter-tool-terminal's tests).",
            avatar_path=_AVATAR,
            system_prompt="",
        )


class InstalledScriptedAcpPersona(BaseAcpPersona):  # type: ignore[misc]
    """``InstalledAgent``: the same agent with Jupyter AI's own client, as a persona that
    another package installed (Claude, Codex, ...) has it."""

    def __init__(self, *args: t.Any, **kwargs: t.Any) -> None:
        super().__init__(*args, executable=_AGENT, **kwargs)

    @property
    def defaults(self) -> PersonaDefaults:
        return PersonaDefaults(
            name="InstalledAgent",
            description="A scripted ACP agent with Jupyter AI's own client (tests).",
            avatar_path=_AVATAR,
            system_prompt="",
        )
