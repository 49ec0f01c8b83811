"""Agents' parts wired together for one server: the store, the tools, the MCP bridge, the audit."""

from __future__ import annotations

import dataclasses
import logging
import typing as t

from ..manager import ToolTerminalManager
from ..redaction import Redactor
from .audit import AgentAudit
from .endpoint import MCPBridge
from .jupyter_ai import JupyterAiAgents
from .pacing import AgentPacer
from .store import Agent, AgentStore
from .tools import AGENT_REVOKED, AgentTools

if t.TYPE_CHECKING:
    from jupyter_events import EventLogger
    from traitlets.config import Configurable


@dataclasses.dataclass
class Agents:
    """Everything agents need on one server (``ToolTerminalApp.agents``)."""

    store: AgentStore
    tools: AgentTools
    bridge: MCPBridge
    audit: AgentAudit
    #: Jupyter AI's agents (ACP personas): which get tool terminals, and where.
    jupyter_ai: JupyterAiAgents
    #: Holds agents' requests while the event loop is late or a person types (people's
    #: terminals come first).
    pacer: AgentPacer = dataclasses.field(default_factory=AgentPacer)

    async def revoke(self, agent: Agent, username: str) -> None:
        """Delete ``agent``: its token stops working at once, then its terminals end."""
        self.store.delete(agent)
        self.audit.emit("delete", agent, username=username)
        await self.tools.end_terminals(agent, AGENT_REVOKED)

    async def expire(self) -> None:
        """Forget agents whose lifetime is over and end their terminals."""
        for agent in self.store.expire():
            self.audit.emit("expire", agent)
            await self.tools.end_terminals(agent, AGENT_REVOKED)

    async def stop(self) -> None:
        """Stop the MCP bridge (the sessions themselves end with the session manager)."""
        self.pacer.close()
        self.jupyter_ai.stop()
        await self.bridge.stop()


def make_agents(
    *,
    manager: ToolTerminalManager,
    redactor: Redactor,
    event_logger: EventLogger | None,
    parent: Configurable,
    log: logging.Logger,
) -> Agents:
    """The agents of a server whose sessions ``manager`` holds; their store, tools and Jupyter
    AI's agents are configured as ``c.AgentStore``, ``c.AgentTools`` and ``c.JupyterAiAgents``
    (``parent``: the extension app)."""
    store = AgentStore(parent=parent, log=log)
    audit = AgentAudit(event_logger, log)
    tools = AgentTools(
        manager=manager, store=store, redactor=redactor, audit=audit, parent=parent, log=log
    )
    agents = Agents(
        store=store,
        tools=tools,
        bridge=MCPBridge(tools),
        audit=audit,
        jupyter_ai=JupyterAiAgents(parent=parent, log=log),
    )
    manager.add_typing_listener(agents.pacer.person_typed)
    return agents
