"""Jupyter AI's agents on one server: which installed personas get tool terminals, and the
instance each owner chose for them.

Jupyter AI's personas are ACP agents; :mod:`jupyter_tool_terminal.acp` makes their terminals
tool terminals. This module needs nothing of Jupyter AI: the personas are changed only when
``jupyter-ai-acp-client`` is installed (:meth:`JupyterAiAgents.start`).
"""

from __future__ import annotations

import importlib.util
import typing as t

from traitlets import List, Unicode
from traitlets.config import LoggingConfigurable

#: Gives personas (by entry-point name) the tool-terminal client; returns what undoes it.
GiveToolTerminals = t.Callable[[list[str], t.Any], t.Callable[[], None]]

#: ``personas`` entry that stands for every ACP persona.
EVERY_PERSONA = "*"


class JupyterAiAgents(LoggingConfigurable):
    """Jupyter AI's agents in tool terminals (``ToolTerminalApp.agents.jupyter_ai``).

    Configurable as ``c.JupyterAiAgents`` (created with ``parent=`` the extension application).
    """

    personas = List(
        Unicode(),
        default_value=[],
        help="""Installed Jupyter AI personas whose ACP terminals are tool terminals, by the
        name of their `jupyter_ai.personas` entry point (`claude-acp`, `codex-acp`, ...), or
        `["*"]`: every ACP persona, those of `.jupyter/personas` included. Each gets
        `jupyter_tool_terminal.acp.ToolTerminalAcpClient` as its ACP client while this server
        runs; nothing of Jupyter AI is edited. A persona whose own class names this client needs
        no entry here.""",
    ).tag(config=True)

    def __init__(self, **settings: t.Any) -> None:
        """``settings``: ``parent``, ``log``, ``config`` and the traits above."""
        super().__init__(**settings)
        #: The instance each owner chose for Jupyter AI's agents (JupyterLab sends it).
        self._chosen: dict[str, str] = {}
        self._undo: t.Callable[[], None] | None = None

    def chosen_instance(self, owner: str) -> str | None:
        """The instance ``owner`` chose for Jupyter AI's agents, if any."""
        return self._chosen.get(owner)

    def choose_instance(self, owner: str, instance: str | None) -> None:
        """Record ``owner``'s choice (``None``: no choice, their only running instance)."""
        if instance is None:
            self._chosen.pop(owner, None)
        else:
            self._chosen[owner] = instance

    @property
    def wanted(self) -> bool:
        """Whether personas are to get the tool-terminal client: some are configured and
        Jupyter AI's ACP client is installed."""
        return bool(self.personas) and importlib.util.find_spec("jupyter_ai_acp_client") is not None

    def start(self, give: GiveToolTerminals) -> None:
        """Give the configured personas the tool-terminal client with ``give``
        (:func:`jupyter_tool_terminal.acp.personas.give_tool_terminals`: the application
        passes it, as the layer above both, so that this module needs nothing of Jupyter AI)."""
        self._undo = give(list(self.personas), self.log)

    def stop(self) -> None:
        """Give the personas their own clients back."""
        undo, self._undo = self._undo, None
        if undo is not None:
            undo()
