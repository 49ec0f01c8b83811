"""Audit events: sessions opened, reset, closed, shared, files transferred and requests refused
(jupyter_events)."""

from __future__ import annotations

import logging
import typing as t
from pathlib import Path

if t.TYPE_CHECKING:
    from jupyter_events import EventLogger

    from .session import ToolTerminal

SESSION_SCHEMA_ID = "https://events.jupyter.org/jupyter_tool_terminal/session/v1"
SESSION_SCHEMA_PATH = Path(__file__).parent / "event_schemas" / "session" / "v1.yaml"

_FIELDS = (
    "owner",
    "session_id",
    "instance",
    "tool",
    "reason",
    "exit_code",
    "status",
    "duration",
    "observer",
    "path",
    "size",
)


class AuditLog:
    """Emits the session schema's events on the server's event logger (if it has one)."""

    def __init__(self, event_logger: EventLogger | None, log: logging.Logger) -> None:
        self._event_logger = event_logger
        self._log = log
        if event_logger is not None:
            event_logger.register_event_schema(SESSION_SCHEMA_PATH)

    def emit(self, action: str, username: str, **fields: t.Any) -> None:
        """Record one event; ``fields`` are the schema's optional properties."""
        if self._event_logger is None:
            return
        data: dict[str, t.Any] = {"action": action, "username": username}
        data.update({key: fields.get(key) for key in _FIELDS})
        if isinstance(data["duration"], float):
            data["duration"] = round(data["duration"], 4)
        try:
            self._event_logger.emit(schema_id=SESSION_SCHEMA_ID, data=data)
        except Exception:  # noqa: BLE001 - an audit sink's failure must not break a terminal
            self._log.exception("Could not emit a tool terminal audit event")

    def session_event(
        self, action: str, session: ToolTerminal, username: str | None = None, **fields: t.Any
    ) -> None:
        """Record one event of ``session`` (done by ``username``, by default the user who
        opened it), naming its owner, id, instance and tool type."""
        self.emit(
            action,
            session.username if username is None else username,
            owner=session.owner,
            session_id=session.id,
            instance=session.instance.id,
            tool=session.tool.name,
            **fields,
        )
