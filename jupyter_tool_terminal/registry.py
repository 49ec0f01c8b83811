"""The registry of terminal sessions: opening them (within the limits of a user and of the
server), finding them, ending them on time, and, at the end, stopping or handing them over.

:class:`.ToolTerminalManager` builds the door to the sessions on it (admitting, attaching and
feeding their clients; sharing), as jupyter_server's ``MappingKernelManager`` builds on
jupyter_client's ``MultiKernelManager``. Its settings are set as ``c.ToolTerminalManager.NAME``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import re
import time
import typing as t
import weakref

from traitlets import Float, Integer
from traitlets.config import LoggingConfigurable

from . import metrics
from .culling import SessionTimers
from .errors import EngineUnavailable, LimitReached, NotPermitted, NotRunning, ShuttingDown
from .events import AuditLog
from .instances import ToolInstances
from .recording import Recorder
from .runtime import RuntimeUnavailable, ToolRuntime
from .runtime.base import Instance, ShellChannel
from .screen import ScreenModels
from .session import ToolTerminal
from .tooltypes import ToolType

#: What a request for a new session is told while the server stops.
SHUTTING_DOWN = "The server is shutting down; it opens no new tool terminals."
#: What a request for a new session is told while the server hands its sessions over.
HANDING_OVER = (
    "The tool-terminal server is handing its terminals over to its successor; try again in a "
    "moment."
)
#: Seconds a session whose clients a hand-over closed waits for them to reconnect, at least
#: (whatever `disconnect_grace` says: the closing was the server's doing, not theirs).
HANDOVER_RECONNECT = 30.0
#: Session ids are ``secrets.token_urlsafe(24)``. Every id pattern is used with ``fullmatch``:
#: ``$`` would also match before a final newline.
SESSION_ID = re.compile(r"[A-Za-z0-9_-]{32}")
#: What open terminals are told when the server stops (they close with 1001, going away).
SHUTDOWN_MESSAGE = (
    "The tool-terminal server is stopping (a restart or an upgrade), so this terminal ended and "
    "what ran in it was stopped. Start a new one once the server is back."
)


def valid_session_id(value: t.Any) -> bool:
    """Whether ``value`` is a syntactically valid session id."""
    return isinstance(value, str) and SESSION_ID.fullmatch(value) is not None


@dataclasses.dataclass(frozen=True)
class SessionExport:
    """A session suspended for a hand-over, as its successor needs it."""

    #: Its state (JSON-ready; see :meth:`.ToolTerminal.handover_state`).
    state: dict[str, t.Any]
    #: What its terminal shows, as output that draws it again.
    screen: str
    #: Its shell, which the successor takes over.
    channel: ShellChannel


class SessionRegistry(LoggingConfigurable):
    """Opens, finds and ends sessions; the sessions' limits and timers."""

    max_sessions_per_user = Integer(
        8,
        min=1,
        help="How many tool terminals one user may have open at once; more are refused (429).",
    ).tag(config=True)

    max_sessions = Integer(
        64,
        min=1,
        help="How many tool terminals the whole server holds at once; more are refused (429).",
    ).tag(config=True)

    idle_timeout = Float(
        0,
        min=0,
        help="""Seconds without input or output after which a tool terminal is closed and its
        processes killed. 0 turns idle culling off. WebSocket pings do not count as activity.""",
    ).tag(config=True)

    disconnect_grace = Float(
        60,
        min=0,
        help="""Seconds a session survives after its last client disconnected, so that a page
        reload (or a dropped network) can reconnect to it and find its shell and programs
        still running. 0 closes it at once.""",
    ).tag(config=True)

    attach_timeout = Float(
        60,
        min=0,
        help="""Seconds a session created over REST waits for its first WebSocket client
        before it is closed. 0 turns this off: such a session then lasts until it is deleted,
        its shell exits, it goes idle (`idle_timeout`) or the server stops.""",
    ).tag(config=True)

    max_input_backlog = Integer(
        1024 * 1024,
        min=1024,
        help="""Bytes of input (keystrokes, pastes) a tool terminal queues for a program that
        does not read them yet. Input beyond it is refused with an `error` message; the
        connection itself is never held up by it.""",
    ).tag(config=True)

    replay_buffer_size = Integer(
        64 * 1024,
        min=1024,
        help="""Characters of recent output each session keeps for its screen model (the
        server-side picture of the terminal that a connecting client receives). Of a flood of
        output only this much of the end is fed to the model: enough for the final screen and
        its scrollback.""",
    ).tag(config=True)

    scrollback_lines = Integer(
        500,
        min=0,
        help="""Lines of scrollback each session's screen model keeps; a connecting client
        receives them (at most 32 Ki characters of them) above the current screen.""",
    ).tag(config=True)

    def __init__(
        self,
        *,
        runtime: ToolRuntime,
        tool_types: t.Mapping[str, ToolType],
        screens: ScreenModels | None = None,
        audit: AuditLog | None = None,
        recorder: Recorder | None = None,
        on_activity: t.Callable[[str, datetime.datetime], None] | None = None,
        **settings: t.Any,
    ) -> None:
        """``settings``: ``parent``, ``log``, ``config`` and any of the traits above."""
        super().__init__(**settings)
        self.runtime = runtime
        self.tool_types = dict(tool_types)
        #: The sessions' screen models: their emulator and shared memory budget.
        self.screens = screens or ScreenModels()
        #: The instances sessions may be opened in.
        self.instances = ToolInstances(runtime, self.tool_types, self.log)
        self.audit = audit or AuditLog(None, self.log)
        #: Starts the recordings of tool types that record (``None``: recording unavailable).
        self.recorder = recorder
        #: Called with the time of a session's input or output (at most once a second each).
        self.on_activity = on_activity
        self.sessions: dict[str, ToolTerminal] = {}
        #: Called with every session that ends (after it left ``sessions``).
        self.ended_listeners: list[t.Callable[[ToolTerminal], None]] = []
        # Slots taken by sessions still starting, so that limits hold under concurrency.
        self._starting: dict[str, int] = {}
        #: Closes sessions when their time is up (grace, attach and idle timeouts).
        self.timers = SessionTimers()
        #: Sessions that ended and may still be finishing (their kill, their recording): the
        #: shutdown waits for them too. (Weak: a finished one is nobody's concern.)
        self._finishing: weakref.WeakSet[ToolTerminal] = weakref.WeakSet()
        # Shutdown refuses new sessions and waits for those being created.
        self._stopping = False
        self._handing_over = False
        self._creating = 0
        self._none_creating = asyncio.Event()
        self._none_creating.set()

    # -- queries ----------------------------------------------------------------------------

    def _count(self, owner: str) -> int:
        owned = sum(1 for session in self.sessions.values() if session.owner == owner)
        return owned + self._starting.get(owner, 0)

    def session_count(self) -> int:
        """How many sessions are open."""
        return len(self.sessions)

    def owner_of(self, session_id: str) -> str | None:
        """Whose open session ``session_id`` is (``None``: there is none), for a log line."""
        session = self.sessions.get(session_id)
        return None if session is None else session.owner

    def list_sessions(self, owner: str) -> list[ToolTerminal]:
        """The caller's sessions, oldest first."""
        return [session for session in self.sessions.values() if session.owner == owner]

    def get_session(self, owner: str, session_id: t.Any) -> ToolTerminal:
        """The caller's session ``session_id``; :class:`NotPermitted` for anything else."""
        session = self.sessions.get(session_id) if valid_session_id(session_id) else None
        if session is None or session.owner != owner or session.ended:
            msg = "No such session for this user."
            raise NotPermitted(msg)
        return session

    async def list_instances(self, owner: str) -> list[tuple[Instance, ToolType]]:
        """The caller's tool instances whose tool type is configured, with their tool type.

        Where the runtime starts shells ahead, the running ones get theirs now: a list is
        what comes before a click on a tile.
        """
        found = await self.instances.list(owner)
        if not (self._stopping or self._handing_over):
            for instance, tool in found:
                if instance.running:
                    self.runtime.prestart(instance, tool)
        return found

    # -- lifecycle --------------------------------------------------------------------------

    async def create_session(
        self,
        owner: str,
        instance_id: t.Any,
        username: str,
        agent: dict[str, str] | None = None,
        size: tuple[int, int] | None = None,
    ) -> ToolTerminal:
        """Start a session in the caller's instance ``instance_id``.

        ``owner`` is the owner label the caller acts as; ``username`` their Jupyter username;
        ``agent`` (``{"id", "name"}``) the agent opening it, if one does: its terminal needs no
        WebSocket client to stay open; ``size`` (rows, cols) the size its shell starts at.
        While the server shuts down, :class:`ShuttingDown` refuses it; a session whose start
        the shutdown overtook is killed and refused the same way.
        """
        self._refuse_if_stopping()
        self._creating += 1
        self._none_creating.clear()
        try:
            session = await self._create_session(owner, instance_id, username, agent, size)
            try:
                self._refuse_if_stopping()
            except ShuttingDown:
                await session.close("server shutdown")
                raise
            return session
        finally:
            self._creating -= 1
            if not self._creating:
                self._none_creating.set()

    def _refuse_if_stopping(self) -> None:
        if self._stopping:
            raise ShuttingDown(SHUTTING_DOWN)
        if self._handing_over:
            raise ShuttingDown(HANDING_OVER)

    async def _create_session(
        self,
        owner: str,
        instance_id: t.Any,
        username: str,
        agent: dict[str, str] | None,
        size: tuple[int, int] | None,
    ) -> ToolTerminal:
        started = time.monotonic()
        if self._count(owner) >= self.max_sessions_per_user:
            msg = f"You have {self.max_sessions_per_user} tool terminals open; close one first."
            raise LimitReached(msg)
        if len(self.sessions) + sum(self._starting.values()) >= self.max_sessions:
            msg = "This server has reached its limit of tool terminals; try again later."
            raise LimitReached(msg)
        self._starting[owner] = self._starting.get(owner, 0) + 1
        try:
            instance, tool = await self.instances.find(owner, instance_id)
            if not instance.running:
                msg = f"The tool instance is not running (it is {instance.status})."
                raise NotRunning(msg)
            withheld: dict[str, str] = {}
            if agent is not None and not tool.agent_secrets:
                tool, withheld = self.instances.without_secrets(instance, tool)
            session = self._new_session(owner, username, instance, tool)
            session.agent = agent
            session.withheld = withheld
            await session.start_recording()
            if size is not None:
                session.start_at(*size)
            try:
                await session.start()
            except BaseException as error:
                # Whatever failed, a shell may have started: the session ends it (a runtime
                # that failed half-way through starting one has already ended it itself).
                await session.close("failed to start")
                if isinstance(error, RuntimeUnavailable):
                    raise EngineUnavailable(str(error)) from error
                raise
        finally:
            self._starting[owner] -= 1
            if not self._starting[owner]:
                del self._starting[owner]
        self.sessions[session.id] = session
        self.start_culling()
        # An agent's terminal is driven without a WebSocket: it waits for nobody.
        if self.attach_timeout > 0 and agent is None:  # 0 is off, as for the idle timeout
            self.timers.arm(session, self.attach_timeout, "never attached")
        self.log.info(
            "Tool terminal %s opened in %s (%s) for %s",
            session.id[:8],
            instance.id,
            tool.name,
            owner,
        )
        opened_in = time.monotonic() - started
        self.audit.session_event("open", session, duration=opened_in)
        metrics.OPENS.labels(instance.runtime).inc()
        metrics.SESSIONS.labels(instance.runtime).inc()
        metrics.OPEN_SECONDS.labels(instance.runtime).observe(opened_in)
        return session

    def _new_session(
        self,
        owner: str,
        username: str,
        instance: Instance,
        tool: ToolType,
        session_id: str | None = None,
    ) -> ToolTerminal:
        return ToolTerminal(
            session_id=session_id,
            owner=owner,
            username=username,
            instance=instance,
            tool=tool,
            runtime=self.runtime,
            replay_buffer_size=self.replay_buffer_size,
            max_input_backlog=self.max_input_backlog,
            scrollback_lines=self.scrollback_lines,
            screens=self.screens,
            on_ended=self._session_ended,
            on_activity=self.on_activity,
            recorder=self.recorder,
            log=self.log,
        )

    def _session_ended(self, session: ToolTerminal, reason: str, exit_code: int | None) -> None:
        self._finishing.add(session)
        if self.sessions.pop(session.id, None) is not None:
            metrics.SESSIONS.labels(session.instance.runtime).dec()
        metrics.count_kill(reason)
        self.timers.disarm(session)
        self.log.info("Tool terminal %s closed: %s", session.id[:8], reason)
        lived = time.monotonic() - session.created_monotonic
        self.audit.session_event(
            "close", session, reason=reason, exit_code=exit_code, duration=lived
        )
        for listener in self.ended_listeners:
            listener(session)

    def add_ended_listener(self, listener: t.Callable[[str], None]) -> None:
        """Call ``listener`` with the id of every session that ends."""
        self.ended_listeners.append(lambda session: listener(session.id))

    async def reset_session(self, session: ToolTerminal) -> None:
        """Restart the session's shell."""
        started = time.monotonic()
        try:
            await session.reset()
        except RuntimeUnavailable as error:
            await session.close("reset failed")
            raise EngineUnavailable(str(error)) from error
        metrics.RESETS.labels(session.instance.runtime).inc()
        self.audit.session_event("reset", session, duration=time.monotonic() - started)

    async def close_session(self, session: ToolTerminal, reason: str) -> None:
        """End a session and kill its processes."""
        await session.close(reason)

    # -- hand-over (see handover/): a session interface of its own --------------------------

    async def suspend_all(self) -> list[SessionExport]:
        """Refuse new sessions and suspend every session for a hand-over; what a successor
        needs of each suspended one. Undo with :meth:`resume_all`."""
        self._handing_over = True
        await self._none_creating.wait()
        # The successor takes over this server's id: a shell started ahead and left behind
        # would be neither its nor an orphan of a dead server's, and never end.
        await self.runtime.end_prestarted()
        suspended = []
        for session in list(self.sessions.values()):
            channel = await session.suspend()
            if channel is not None:
                screen = await session.screen.snapshot()
                suspended.append(SessionExport(session.handover_state(), screen, channel))
        return suspended

    def _suspended(self) -> list[ToolTerminal]:
        return [session for session in self.sessions.values() if session.suspended]

    def resume_all(self) -> None:
        """The hand-over failed: every suspended session goes on here."""
        self._handing_over = False
        self.runtime.resume_prestarting()
        for session in self._suspended():
            session.resume()
            if not session.owner_attached:
                self.timers.arm(session, self._reconnect_grace, "last client disconnected")

    @property
    def _reconnect_grace(self) -> float:
        return max(self.disconnect_grace, HANDOVER_RECONNECT)

    async def hand_off_all(self) -> None:
        """The successor took the suspended sessions: they end here, their shells do not."""
        self._stopping = True
        for session in self._suspended():
            if self.sessions.pop(session.id, None) is not None:
                metrics.SESSIONS.labels(session.instance.runtime).dec()
            self.timers.disarm(session)
            await session.hand_off()
            self.log.info("Tool terminal %s handed over to the successor", session.id[:8])

    async def adopt_session(
        self,
        state: t.Mapping[str, t.Any],
        screen: str,
        instance: Instance,
        tool: ToolType,
        channel: ShellChannel,
    ) -> ToolTerminal:
        """Go on with a predecessor's session (see :meth:`ToolTerminal.adopt`); it waits for its
        clients to reconnect (:data:`HANDOVER_RECONNECT` or ``disconnect_grace``)."""
        # Made with its id, so that its recording (started before it goes on) is named by it.
        session = self._new_session(
            state["owner"], state["username"], instance, tool, session_id=state["id"]
        )
        session.agent = state.get("agent")
        await session.start_recording()
        session.adopt(state, screen, channel)
        self.sessions[session.id] = session
        metrics.SESSIONS.labels(instance.runtime).inc()
        self.start_culling()
        if session.agent is None:  # an agent's terminal waits for nobody (see _client_detached)
            self.timers.arm(session, self._reconnect_grace, "last client disconnected")
        self.log.info("Tool terminal %s taken over from the predecessor", session.id[:8])
        return session

    # -- culling and shutdown ---------------------------------------------------------------

    def start_culling(self) -> None:
        """Start the idle check if an idle timeout is set."""
        self.timers.cull_idle(self.idle_timeout, self.sessions.values)

    async def shutdown(self) -> None:
        """End every session, killing their processes; used when the server stops.

        New sessions are refused from now on; those being created are waited for first (each
        is bounded by the engine's own timeouts), so that none is left out of the kill.
        """
        self._stopping = True
        await self._none_creating.wait()
        self.timers.cancel()
        await self.runtime.end_prestarted()
        sessions = list(self.sessions.values())
        await asyncio.gather(
            *(
                session.close("server shutdown", message=SHUTDOWN_MESSAGE, code=1001)
                for session in sessions
            ),
            return_exceptions=True,
        )
        # Those that ended by themselves just before may still be killing their processes.
        await asyncio.gather(
            *(session.finished() for session in list(self._finishing)), return_exceptions=True
        )
        await self.timers.stop()
