"""Connection slots: how many clients may be attached, per session and per user, by kind.

The manager admits every client of a session (a browser, an observer, an agent) and asks its
:class:`ConnectionSlots` first: the owner's connections and observers' are bounded apart
(watching never takes the owner's slots, so that the owner can always come back), every
connection of a user counts against the user's bound, and an agent's in-server attachment
holds a slot of its own kind (one per agent and session), apart from people's.
"""

from __future__ import annotations

import collections
import enum
import typing as t

from .errors import LimitReached


class ClientKind(enum.Enum):
    """What kind of client a connection is."""

    #: The owner's WebSocket (a browser tab, a reload).
    OWNER = "owner"
    #: A WebSocket of a user the session is shared with, read-only.
    OBSERVER = "observer"
    #: An AI agent's in-server hold on its terminal (``agents.shell``).
    AGENT = "agent"


class SlotLimits(t.Protocol):
    """The bounds (the manager's settings: ``c.ToolTerminalManager.*``)."""

    max_clients_per_session: int
    max_observer_clients_per_session: int
    max_clients_per_observer: int
    max_clients_per_user: int


def _release(counts: collections.Counter[str], key: str) -> None:
    """One connection of ``key`` fewer (a key at 0 is removed: nothing grows per past user)."""
    counts[key] -= 1
    if counts[key] <= 0:
        del counts[key]


class ConnectionSlots:
    """The connections attached now, counted against ``limits``."""

    def __init__(self, limits: SlotLimits) -> None:
        self.limits = limits
        # Open people's connections per user (the owner name or observer name they act as).
        self._by_user: collections.Counter[str] = collections.Counter()
        # Open connections per session: the owner's, and each observer's.
        self._owner: collections.Counter[str] = collections.Counter()
        self._observers: dict[str, collections.Counter[str]] = {}
        # Agents attached per session, by agent (principal).
        self._agents: dict[str, collections.Counter[str]] = {}

    def check(self, session_id: str, principal: str, kind: ClientKind) -> None:
        """Raise :class:`LimitReached` if ``principal`` may not attach another client of
        ``kind`` to session ``session_id`` (checked before a WebSocket upgrade, and again when
        it attaches)."""
        limits = self.limits
        if kind is ClientKind.AGENT:
            if self._agents.get(session_id, collections.Counter())[principal]:
                msg = "This agent is attached to this terminal already."
                raise LimitReached(msg)
            return  # (agents' terminals are bounded by max_terminals_per_agent)
        if kind is ClientKind.OBSERVER:
            watching = self._observers.get(session_id, collections.Counter())
            if watching.total() >= limits.max_observer_clients_per_session:
                msg = (
                    f"This terminal already has {limits.max_observer_clients_per_session} "
                    "watching connections; try again later."
                )
                raise LimitReached(msg)
            if watching[principal] >= limits.max_clients_per_observer:
                msg = (
                    "You are already watching this terminal in "
                    f"{limits.max_clients_per_observer} connections; close one first."
                )
                raise LimitReached(msg)
        elif self._owner[session_id] >= limits.max_clients_per_session:
            msg = (
                f"This terminal already has {limits.max_clients_per_session} connections; "
                "close one first."
            )
            raise LimitReached(msg)
        if self._by_user[principal] >= limits.max_clients_per_user:
            msg = (
                f"You have {limits.max_clients_per_user} terminal connections open; close one "
                "first."
            )
            raise LimitReached(msg)

    def take(self, session_id: str, principal: str, kind: ClientKind) -> None:
        """Count a client that attached (its slot checked)."""
        if kind is ClientKind.AGENT:
            self._agents.setdefault(session_id, collections.Counter())[principal] += 1
            return
        self._by_user[principal] += 1
        if kind is ClientKind.OBSERVER:
            self._observers.setdefault(session_id, collections.Counter())[principal] += 1
        else:
            self._owner[session_id] += 1

    def release(self, session_id: str, principal: str, kind: ClientKind) -> None:
        """A client detached: its slot is free."""
        if kind is ClientKind.AGENT:
            agents = self._agents.get(session_id, collections.Counter())
            _release(agents, principal)
            if not agents:
                self._agents.pop(session_id, None)
            return
        _release(self._by_user, principal)
        if kind is ClientKind.OBSERVER:
            watching = self._observers.get(session_id, collections.Counter())
            _release(watching, principal)
            if not watching:
                self._observers.pop(session_id, None)
        else:
            _release(self._owner, session_id)
