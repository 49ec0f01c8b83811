"""Audit events of agents: credentials created and revoked, control, sharing and every MCP call."""

from __future__ import annotations

import logging
import typing as t
from pathlib import Path

from .. import metrics

if t.TYPE_CHECKING:
    from jupyter_events import EventLogger

    from .store import Agent

AGENT_SCHEMA_ID = "https://events.jupyter.org/jupyter_tool_terminal/agent/v1"
AGENT_SCHEMA_PATH = Path(__file__).parent.parent / "event_schemas" / "agent" / "v1.yaml"

_FIELDS = ("tool", "session_id", "allowed", "reason", "command", "minutes")


class AgentAudit:
    """Emits the agent schema's events on the server's event logger (if it has one)."""

    def __init__(self, event_logger: EventLogger | None, log: logging.Logger) -> None:
        self._event_logger = event_logger
        self._log = log
        if event_logger is not None:
            event_logger.register_event_schema(AGENT_SCHEMA_PATH)

    def emit(self, action: str, agent: Agent, username: str | None = None, **fields: t.Any) -> None:
        """Record one event about ``agent``; ``username``: who acted (default its owner's
        Jupyter username); ``fields`` are the schema's optional properties."""
        if self._event_logger is None:
            return
        data: dict[str, t.Any] = {
            "action": action,
            "username": agent.username if username is None else username,
            "owner": agent.owner,
            "agent_id": agent.id,
            "agent_name": agent.name,
        }
        data.update({key: fields.get(key) for key in _FIELDS})
        try:
            self._event_logger.emit(schema_id=AGENT_SCHEMA_ID, data=data)
        except Exception:  # noqa: BLE001 - an audit sink's failure must not break an agent
            self._log.exception("Could not emit a tool terminal agent audit event")

    def call(
        self,
        agent: Agent,
        tool: str,
        *,
        result: str,
        reason: str | None = None,
        session_id: str | None = None,
        command: str | None = None,
    ) -> None:
        """Record (and count) one MCP tool call: ``result`` is ``ok``, ``error`` (the tool ran
        and failed) or ``refused`` (``reason`` says why)."""
        metrics.count_agent_call(tool, result)
        self.emit(
            "call",
            agent,
            tool=tool,
            session_id=session_id,
            allowed=result != "refused",
            reason=reason,
            command=command,
        )
