"""Installed Jupyter AI personas given the tool-terminal client, by a setting
(``c.JupyterAiAgents.personas``), without editing Jupyter AI.

A persona chooses its ACP client by its class attribute ``acp_client_class``
(jupyter-ai-acp-client 0.3.3: "Subclasses override this to inject a custom client"), read when
its agent starts. Jupyter AI has no setting that chooses the client of personas another package
installed, so the attribute is set here on the installed classes themselves, while the server
runs, and put back when it stops. Kept to this module: it goes once Jupyter AI can be told the
client for installed personas (a configurable ``acp_client_class``).

Why a setting rather than personas of this project wrapping the installed ones: a wrapper is
one more entry in the chat's persona picker per installed persona (Claude and Claude in tool
terminals), each starting its own agent, and only for the personas this project knows of when
it is released; the setting works for every persona installed now or later, those of
``.jupyter/personas`` included, and leaves one Claude whose commands run where the operator
said.
"""

from __future__ import annotations

import importlib.metadata
import typing as t

from jupyter_ai_acp_client.base_acp_persona import BaseAcpPersona
from jupyter_ai_acp_client.default_acp_client import JaiAcpClient

from ..agents.jupyter_ai import EVERY_PERSONA
from .client import ToolTerminalAcpClient

if t.TYPE_CHECKING:
    import logging

#: Jupyter AI's entry point group of personas.
PERSONAS_GROUP = "jupyter_ai.personas"
#: A class attribute a class did not have of its own.
_ABSENT = object()


def tool_terminal_client(client: type[JaiAcpClient]) -> type[JaiAcpClient]:
    """``client`` with its terminals tool terminals: this project's client, or, for a persona
    with a client of its own (Kiro's), that client under this one's terminal methods."""
    if issubclass(client, ToolTerminalAcpClient):
        return client
    if client is JaiAcpClient:
        return ToolTerminalAcpClient
    return type(f"ToolTerminal{client.__name__}", (ToolTerminalAcpClient, client), {})


def give_tool_terminals(names: t.Sequence[str], log: logging.Logger) -> t.Callable[[], None]:
    """Give the ACP personas of the entry points ``names`` (``"*"``: all, and every ACP persona
    without a client of its own) the tool-terminal client; the function that undoes it."""
    every = EVERY_PERSONA in names
    changed: list[tuple[type[BaseAcpPersona], object]] = []

    def give(persona: type[BaseAcpPersona]) -> None:
        changed.append((persona, persona.__dict__.get("acp_client_class", _ABSENT)))
        persona.acp_client_class = tool_terminal_client(persona.acp_client_class)

    found: set[str] = set()
    for entry_point in importlib.metadata.entry_points(group=PERSONAS_GROUP):
        if not every and entry_point.name not in names:
            continue
        try:
            persona = entry_point.load()
        except Exception as error:  # noqa: BLE001 - Jupyter AI reports its personas' errors
            # (a persona whose program is missing refuses to load: Jupyter AI skips it too)
            log.info("Jupyter AI persona %s not given tool terminals: %s", entry_point.name, error)
            continue
        found.add(entry_point.name)
        if isinstance(persona, type) and issubclass(persona, BaseAcpPersona):
            give(persona)
            log.info("Jupyter AI persona %s: its terminals are tool terminals", entry_point.name)
        elif not every:
            log.warning(
                "c.JupyterAiAgents.personas names %s, which is not an ACP persona",
                entry_point.name,
            )
    if every:
        # Personas loaded later (from .jupyter/personas) inherit it.
        give(BaseAcpPersona)
    for name in sorted(set(names) - found - {EVERY_PERSONA}):
        log.warning(
            "c.JupyterAiAgents.personas names %s, which is no loadable entry point of %s",
            name,
            PERSONAS_GROUP,
        )

    def undo() -> None:
        for persona, own in reversed(changed):
            if own is _ABSENT:
                del persona.acp_client_class
            else:
                persona.acp_client_class = own

    return undo
