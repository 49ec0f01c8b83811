"""The door's handles: what a client admitted to a session holds (:class:`Admission`), what an
in-server client reads with (:class:`OutputReader`), and a terminal's screen as text.

Only :class:`~.manager.ToolTerminalManager` issues admissions; the session inside one is
reached through the manager's methods (``attach``, ``receive``, ``type_input``, ...).
"""

from __future__ import annotations

import dataclasses
import typing as t

from .slots import ClientKind

if t.TYPE_CHECKING:
    from .session import ToolTerminal


class Admission:
    """A connection admitted to a session by :meth:`ToolTerminalManager.admit`: its handle on
    the session, through the manager (``attach``, ``receive``, ``detach``)."""

    def __init__(
        self, session: ToolTerminal, principal: str, observer: bool, kind: ClientKind | None = None
    ) -> None:
        self._session = session
        #: Who connected, as the session knows them (owner label value or observer name).
        self.principal = principal
        #: Whether the connection only watches (the session was shared with its user).
        self.observer = observer
        #: What kind of client it is (the kind of connection slot it holds).
        self.kind = kind or (ClientKind.OBSERVER if observer else ClientKind.OWNER)
        #: Whether it is attached (and holds a connection slot).
        self.attached = False

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self._session.id

    @property
    def owner(self) -> str:
        """The session's owner."""
        return self._session.owner

    @property
    def instance_id(self) -> str:
        """The id of the session's tool instance."""
        return self._session.instance.id

    @property
    def ended(self) -> bool:
        """Whether the session has ended."""
        return self._session.ended

    @property
    def agent_id(self) -> str | None:
        """The id of the agent that opened the session, for an agent's terminal."""
        agent = self._session.agent
        return agent["id"] if agent is not None else None

    @property
    def owner_attached(self) -> bool:
        """Whether a client of the owner's (a browser) is attached to the session."""
        return self._session.owner_attached

    @property
    def watched(self) -> bool:
        """Whether a person sees the terminal now or later: a client of the owner's is
        attached, or the session records."""
        return self._session.owner_attached or self._session.recording is not None

    @property
    def input_backlog(self) -> int:
        """Bytes of input queued for the shell and not yet taken by its terminal."""
        return self._session.input_backlog

    @property
    def environment(self) -> dict[str, str]:
        """The variables the session's shell starts with, as far as its runtime knows them."""
        return self._session.environment

    def model(self) -> dict[str, t.Any]:
        """The session as the REST API shows it."""
        return self._session.model()


class OutputReader(t.Protocol):
    """An in-server client of a session (an AI agent's shell): it reads the output as text."""

    def output(self, text: str | None) -> None:
        """A piece of the terminal's output as it arrives; ``None`` once the session ended.
        It must return quickly: it runs in the session's pump."""


@dataclasses.dataclass(frozen=True)
class ScreenText:
    """What a terminal shows now: its visible lines (no scrollback), size and cursor."""

    lines: list[str]
    rows: int
    cols: int
    #: (row, column), 0-based; the column is the width while a wrap is pending.
    cursor: tuple[int, int]
