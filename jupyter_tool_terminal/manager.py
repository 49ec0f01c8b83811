"""The one door to the sessions: every client of a session (a browser's WebSocket, an
observer's, an AI agent's shell) is admitted, attached, fed and detached here, and sharing
decides who may watch; the registry beneath (``SessionRegistry``, ``registry.py``) opens and
ends them."""

from __future__ import annotations

import contextlib
import re
import typing as t

from traitlets import Integer

from .admission import Admission, OutputReader, ScreenText
from .errors import Conflict, LimitReached, NotFound, NotPermitted, SessionError
from .protocol import ClientMessage, Stdin
from .registry import SessionExport, SessionRegistry, valid_session_id
from .session import TerminalClient, ToolTerminal
from .slots import ClientKind, ConnectionSlots

__all__ = [
    "Admission",
    "OutputReader",
    "ScreenText",
    "SessionExport",
    "ToolTerminalManager",
    "UserDirectory",
    "valid_session_id",
]

#: A user name an owner may grant a view to: what Jupyter and JupyterHub user names look like
#: (no whitespace, no control characters, no '/', which could not be revoked by URL).
USER_NAME = re.compile(r"[^\s/\x00-\x1f\x7f]{1,128}")


class UserDirectory(t.Protocol):
    """Something that knows the users of this deployment (JupyterHub does)."""

    async def exists(self, name: str) -> bool | None:
        """Whether a user ``name`` exists; ``None`` if it cannot tell."""


class ToolTerminalManager(SessionRegistry):
    """The registry of sessions (``SessionRegistry``, ``registry.py``) and the door to them:
    admits, attaches, feeds and detaches every client of a session, and enforces who may see
    which.

    Configurable as ``c.ToolTerminalManager`` (its limits and timers, the registry's included);
    each of its settings can also be set as ``c.ToolTerminalApp.NAME``, deprecated (see
    ``settings.py``).
    """

    max_clients_per_session = Integer(
        8,
        min=1,
        help="""How many WebSocket connections of its owner one tool terminal accepts at once
        (tabs showing it; observers' connections are bounded apart and never take these). More
        are refused before the upgrade with 429 (or, if several arrive at once, closed with
        code 1013 after an `error` message).""",
    ).tag(config=True)

    max_observers = Integer(
        16,
        min=1,
        help="""How many users one tool terminal can be shared with read-only at once; a
        further grant is refused (429).""",
    ).tag(config=True)

    max_observer_clients_per_session = Integer(
        8,
        min=1,
        help="""How many WebSocket connections of observers (all of them together) one tool
        terminal accepts at once; more are refused as for `max_clients_per_session`.""",
    ).tag(config=True)

    max_clients_per_observer = Integer(
        2,
        min=1,
        help="""How many WebSocket connections one observer may hold to one tool terminal
        shared with them; more are refused as for `max_clients_per_session`.""",
    ).tag(config=True)

    max_clients_per_user = Integer(
        32,
        min=1,
        help="""How many terminal WebSocket connections one user may hold open at once, over
        all their tool terminals; more are refused as for `max_clients_per_session`.""",
    ).tag(config=True)

    def __init__(self, *, user_directory: UserDirectory | None = None, **kwargs: t.Any) -> None:
        """``kwargs``: those of ``SessionRegistry``, and any of the traits above."""
        super().__init__(**kwargs)
        #: The clients attached now, counted against the limits above.
        self.slots = ConnectionSlots(self)
        #: Who the users are, where something knows (a Hub); shares name existing users only.
        self.user_directory = user_directory
        #: Called whenever a person (a WebSocket client that may write) sends input to a
        #: terminal that is not an agent's: agents make way (``agents.pacing``).
        self.typing_listeners: list[t.Callable[[], None]] = []

    # -- who may see which session ----------------------------------------------------------

    def get_viewable(self, principal: str, session_id: t.Any) -> tuple[ToolTerminal, bool]:
        """The session ``session_id`` if ``principal`` owns or observes it, and whether it
        only observes; :class:`NotPermitted` (as for a session that does not exist) else."""
        session = self.sessions.get(session_id) if valid_session_id(session_id) else None
        if session is not None and not session.ended:
            if session.owner == principal:
                return session, False
            if principal in session.observers:
                return session, True
        msg = "No such session for this user."
        raise NotPermitted(msg)

    def list_observed(self, principal: str) -> list[ToolTerminal]:
        """Sessions of other users that ``principal`` was granted a view of."""
        return [
            session
            for session in self.sessions.values()
            if principal in session.observers and not session.ended
        ]

    async def grant(self, session: ToolTerminal, user: t.Any, username: str) -> None:
        """Let ``user`` watch ``session`` read-only (``username`` is the granting owner's)."""
        if not isinstance(user, str) or not USER_NAME.fullmatch(user):
            msg = "The user must be a user name (1-128 characters, no spaces or '/')."
            raise SessionError(msg)
        if user == session.owner:
            msg = "You cannot share a terminal with yourself."
            raise SessionError(msg)
        if self.user_directory is not None and await self.user_directory.exists(user) is False:
            msg = f"There is no user named {user}."
            raise SessionError(msg)
        if session.ended:  # while the directory was asked
            msg = "The terminal has ended."
            raise NotFound(msg)
        if user in session.observers:
            msg = f"The terminal is already shared with {user}."
            raise Conflict(msg)
        if len(session.observers) >= self.max_observers:
            msg = f"A terminal can be shared with at most {self.max_observers} users."
            raise LimitReached(msg)
        session.observers.append(user)
        self.log.info("Tool terminal %s shared read-only with %s", session.id[:8], user)
        self.audit.session_event("grant", session, username=username, observer=user)

    def revoke(self, session: ToolTerminal, user: str, username: str) -> None:
        """Stop sharing ``session`` with ``user``; its connections close at once."""
        if user not in session.observers:
            msg = f"The terminal is not shared with {user}."
            raise NotFound(msg)
        session.observers.remove(user)
        session.end_observer(user)
        self.log.info("Tool terminal %s no longer shared with %s", session.id[:8], user)
        self.audit.session_event("revoke", session, username=username, observer=user)

    def still_admits(self, admission: Admission, principal: str | None) -> bool:
        """Whether ``principal`` (who the connection's credentials name now) may still hold
        ``admission``: the owner, or the same observer while the session is shared with it."""
        session = admission._session
        if admission.observer:
            return principal == admission.principal and principal in session.observers
        return principal == session.owner

    # -- connections: the only door of a WebSocket to a session -----------------------------

    def admit(self, principal: str, session_id: t.Any) -> Admission:
        """Admit a connection of ``principal`` to ``session_id`` (before the WebSocket upgrade):
        :class:`NotPermitted` unless it owns or observes it, :class:`LimitReached` if it may
        not open another connection to it."""
        session, observer = self.get_viewable(principal, session_id)
        admission = Admission(session, principal, observer)
        self.slots.check(session.id, principal, admission.kind)
        return admission

    async def attach(self, admission: Admission, client: TerminalClient) -> bool:
        """Attach ``client`` (upgraded): it gets ``setup``, the screen, then live output;
        ``False`` if the session ended meanwhile, :class:`LimitReached` if the connections that
        passed :meth:`admit` together do not all fit."""
        session = admission._session
        if session.ended:
            return False
        self.slots.check(session.id, admission.principal, admission.kind)
        self.slots.take(session.id, admission.principal, admission.kind)
        if admission.kind is ClientKind.OWNER:
            # A client of the owner connected: the session no longer waits to be closed.
            # (Observers do not keep a session alive: it belongs to its owner.)
            self.timers.disarm(session)
        admission.attached = True
        await session.attach(client)
        return True

    def receive(
        self, admission: Admission, client: TerminalClient, message: ClientMessage
    ) -> str | None:
        """Hand a client's message to its session; what to tell the client if it is refused."""
        session = admission._session
        if isinstance(message, Stdin) and not admission.observer and session.agent is None:
            for listener in self.typing_listeners:
                listener()
        return session.receive(client, message)

    def detach(
        self,
        admission: Admission,
        client: TerminalClient,
        revoked: bool = False,
        kept: bool = False,
    ) -> None:
        """The connection closed; the owner's last one leaving ends the session after
        ``disconnect_grace``, or at once if its access was ``revoked`` (a logout must not leave
        a shell behind for a minute), or not at all if the client ``kept`` it (its tab closed
        with the session left running: only ``idle_timeout`` and a DELETE end it then)."""
        if not admission.attached:
            return
        admission.attached = False
        session = admission._session
        session.detach(client)
        self.slots.release(session.id, admission.principal, admission.kind)
        self._client_detached(
            session,
            grace=0 if revoked and not admission.observer else None,
            kept=kept and not revoked,
        )

    def _client_detached(
        self, session: ToolTerminal, grace: float | None = None, kept: bool = False
    ) -> None:
        """A client disconnected: the owner's last one leaving ends the session (after the
        grace, ``disconnect_grace`` unless given), whether or not observers still watch."""
        # An agent's terminal stays open when its owner stops watching it.
        if (
            not session.owner_attached
            and not session.ended
            and not session.suspended
            and session.agent is None
            and not kept
        ):
            if grace is None:
                self.timers.arm(session, self.disconnect_grace, "last client disconnected")
            else:
                self.timers.arm(session, grace, "access revoked")

    # -- agents: in-server clients through the same door ------------------------------------

    def agent_terminals(self, owner: str, agent_id: str) -> list[Admission]:
        """The open terminals agent ``agent_id`` of ``owner`` opened, oldest first, each as an
        admission of the agent (not attached)."""
        return [
            Admission(session, agent_id, False, ClientKind.AGENT)
            for session in self.sessions.values()
            if session.owner == owner
            and session.agent is not None
            and session.agent["id"] == agent_id
            and not session.ended
        ]

    def admit_agent(self, owner: str, agent_id: str, session_id: t.Any) -> Admission:
        """Admit agent ``agent_id`` of ``owner`` to ``owner``'s open session ``session_id``:
        :class:`NotPermitted` for anything else (whether the agent may type, or only read a
        session shared with it, is the agent tools' rule: ``Admission.agent_id`` says whose
        terminal it is)."""
        session = self.sessions.get(session_id) if valid_session_id(session_id) else None
        if session is None or session.ended or session.owner != owner:
            msg = "No such session for this user."
            raise NotPermitted(msg)
        return Admission(session, agent_id, False, ClientKind.AGENT)

    def attach_reader(self, admission: Admission, reader: OutputReader) -> bool:
        """Attach an in-server ``reader`` (an agent's shell) admitted by :meth:`admit_agent`:
        it gets the output live from now on; ``False`` if the session ended meanwhile."""
        session = admission._session
        if session.ended:
            return False
        if admission.attached:
            return True
        self.slots.check(session.id, admission.principal, admission.kind)
        self.slots.take(session.id, admission.principal, admission.kind)
        admission.attached = True
        session.output_listeners.append(reader.output)
        return True

    def detach_reader(self, admission: Admission, reader: OutputReader) -> None:
        """The reader is done with the session (which goes on)."""
        if not admission.attached:
            return
        admission.attached = False
        session = admission._session
        with contextlib.suppress(ValueError):
            session.output_listeners.remove(reader.output)
        self.slots.release(session.id, admission.principal, admission.kind)

    def type_input(self, admission: Admission, text: str) -> bool:
        """Type ``text`` into the session for an attached agent; ``False`` (nothing typed) if
        the input the shell has not taken yet is at its limit. An agent's input never counts
        as a person typing."""
        if not admission.attached or admission.observer:
            return True
        return admission._session.write(text)

    async def foreground_program(self, admission: Admission) -> str | None:
        """The program holding the admitted session's terminal when it is not the shell
        (``None``: the shell, or its runtime cannot tell)."""
        return await admission._session.foreground_program()

    def screen_text(self, admission: Admission) -> ScreenText:
        """What the session's terminal shows now, as its screen model has it (concealed text
        blank, as the person sees it)."""
        screen = admission._session.screen
        rows, cols = screen.dimensions
        column, row = screen.cursor
        return ScreenText(screen.visible_display(), rows, cols, (row, column))

    async def screen_caught_up(self, admission: Admission) -> ScreenText:
        """:meth:`screen_text` once the screen model has worked off the output it got so far
        (it works behind the output, off the hot path)."""
        await admission._session.screen.snapshot()
        return self.screen_text(admission)

    async def close_admitted(self, admission: Admission, reason: str) -> None:
        """End the admitted session and kill its processes."""
        await self.close_session(admission._session, reason)

    def add_typing_listener(self, listener: t.Callable[[], None]) -> None:
        """Call ``listener`` whenever a person types into a terminal that is not an agent's."""
        self.typing_listeners.append(listener)
