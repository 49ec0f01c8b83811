"""The registry of terminal sessions: ownership, limits, idle culling and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import re
import time
import typing as t
import weakref

from traitlets import Float, Integer
from traitlets.config import LoggingConfigurable

from . import metrics
from .errors import (
    Conflict,
    EngineUnavailable,
    LimitReached,
    NotFound,
    NotPermitted,
    NotRunning,
    RecordingFailed,
    SessionError,
    ShuttingDown,
)
from .events import AuditLog
from .protocol import ClientMessage, Stdin
from .recording import Recorder, RecordingError
from .redaction import secret_variable_names
from .runtime import RuntimeUnavailable, ToolRuntime
from .runtime.base import Instance, ShellChannel, valid_instance_id
from .screen import ScreenModels
from .session import TerminalClient, ToolTerminal
from .slots import ClientKind, ConnectionSlots
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
#: A user name an owner may grant a view to: what Jupyter and JupyterHub user names look like
#: (no whitespace, no control characters, no '/', which could not be revoked by URL).
USER_NAME = re.compile(r"[^\s/\x00-\x1f\x7f]{1,128}")


#: What open terminals are told when the server stops (they close with 1001, going away).
SHUTDOWN_MESSAGE = (
    "The tool-terminal server is stopping (a restart or an upgrade), so this terminal ended and "
    "what ran in it was stopped. Start a new one once the server is back."
)


def valid_session_id(value: t.Any) -> bool:
    """Whether ``value`` is a syntactically valid session id."""
    return isinstance(value, str) and SESSION_ID.fullmatch(value) is not None


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


class UserDirectory(t.Protocol):
    """Something that knows the users of this deployment (JupyterHub does)."""

    async def exists(self, name: str) -> bool | None:
        """Whether a user ``name`` exists; ``None`` if it cannot tell."""


class ToolTerminalManager(LoggingConfigurable):
    """Creates, finds and ends sessions, and enforces who may see which.

    Configurable as ``c.ToolTerminalManager`` (its limits and timers); each of its settings
    can also be set as ``c.ToolTerminalApp.NAME``, deprecated (see ``settings.py``).
    """

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
        user_directory: UserDirectory | None = None,
        **settings: t.Any,
    ) -> None:
        """``settings``: ``parent``, ``log``, ``config`` and any of the traits above."""
        super().__init__(**settings)
        self.runtime = runtime
        self.tool_types = dict(tool_types)
        #: The sessions' screen models: their emulator and shared memory budget.
        self.screens = screens or ScreenModels()
        #: The clients attached now, counted against the limits above.
        self.slots = ConnectionSlots(self)
        self.audit = audit or AuditLog(None, self.log)
        #: (instance, tool type) pairs whose unknown tool type was logged.
        self._unknown_tools_told: set[tuple[str, str]] = set()
        #: Starts the recordings of tool types that record (``None``: recording unavailable).
        self.recorder = recorder
        #: Called with the time of a session's input or output (at most once a second each).
        self.on_activity = on_activity
        #: Who the users are, where something knows (a Hub); shares name existing users only.
        self.user_directory = user_directory
        self.sessions: dict[str, ToolTerminal] = {}
        #: Called with every session that ends (after it left ``sessions``).
        self.ended_listeners: list[t.Callable[[ToolTerminal], None]] = []
        #: Called whenever a person (a WebSocket client that may write) sends input to a
        #: terminal that is not an agent's: agents make way (``agents.pacing``).
        self.typing_listeners: list[t.Callable[[], None]] = []
        # Slots taken by sessions still starting, so that limits hold under concurrency.
        self._starting: dict[str, int] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[t.Any]] = set()
        #: Sessions that ended and may still be finishing (their kill, their recording): the
        #: shutdown waits for them too. (Weak: a finished one is nobody's concern.)
        self._finishing: weakref.WeakSet[ToolTerminal] = weakref.WeakSet()
        self._cull_task: asyncio.Task[None] | None = None
        # Shutdown refuses new sessions and waits for those being created.
        self._stopping = False
        self._handing_over = False
        self._creating = 0
        self._none_creating = asyncio.Event()
        self._none_creating.set()

    # -- helpers ------------------------------------------------------------------------------

    def _spawn_task(self, coroutine: t.Coroutine[t.Any, t.Any, t.Any]) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _count(self, owner: str) -> int:
        owned = sum(1 for session in self.sessions.values() if session.owner == owner)
        return owned + self._starting.get(owner, 0)

    # -- queries ------------------------------------------------------------------------------

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

    # -- observers ----------------------------------------------------------------------------

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
        self._audit("grant", session, username=username, observer=user)

    def revoke(self, session: ToolTerminal, user: str, username: str) -> None:
        """Stop sharing ``session`` with ``user``; its connections close at once."""
        if user not in session.observers:
            msg = f"The terminal is not shared with {user}."
            raise NotFound(msg)
        session.observers.remove(user)
        session.end_observer(user)
        self.log.info("Tool terminal %s no longer shared with %s", session.id[:8], user)
        self._audit("revoke", session, username=username, observer=user)

    async def list_instances(self, owner: str) -> list[dict[str, t.Any]]:
        """The caller's tool instances whose tool type is configured."""
        try:
            instances = await self.runtime.list_instances(owner)
        except RuntimeUnavailable as error:
            raise EngineUnavailable(str(error)) from error
        models = []
        for instance in instances:
            tool = self.tool_types.get(instance.tool)
            if tool is None:
                self._tell_unknown_tool(instance)
            else:
                models.append(
                    {
                        "id": instance.id,
                        "status": instance.status,
                        "runtime": instance.runtime,
                        **({"engine": instance.engine} if instance.engine else {}),
                        **({"node": instance.node} if instance.node else {}),
                        **tool.public_model(),
                    }
                )
        return models

    def _tell_unknown_tool(self, instance: Instance) -> None:
        """Log once per instance that its label names a tool type this server lacks (its
        owner is told by ``GET /tool-terminal/api/status``)."""
        if (instance.id, instance.tool) in self._unknown_tools_told:
            return
        self._unknown_tools_told.add((instance.id, instance.tool))
        self.log.warning(
            "jupyter_tool_terminal: tool instance %s of %s is labelled "
            "jupyter-tool-terminal.tool=%s, a tool type this server does not configure "
            "(configured: %s): it is not shown",
            instance.id,
            instance.owner,
            instance.tool,
            ", ".join(sorted(self.tool_types)) or "none",
        )

    # -- lifecycle ----------------------------------------------------------------------------

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
        if not valid_instance_id(instance_id):
            msg = "No such tool instance for this user."
            raise NotPermitted(msg)
        if self._count(owner) >= self.max_sessions_per_user:
            msg = f"You have {self.max_sessions_per_user} tool terminals open; close one first."
            raise LimitReached(msg)
        if len(self.sessions) + sum(self._starting.values()) >= self.max_sessions:
            msg = "This server has reached its limit of tool terminals; try again later."
            raise LimitReached(msg)
        self._starting[owner] = self._starting.get(owner, 0) + 1
        try:
            try:
                instance = await self.runtime.get_instance(instance_id)
            except RuntimeUnavailable as error:
                raise EngineUnavailable(str(error)) from error
            tool = self.tool_types.get(instance.tool) if instance is not None else None
            if instance is None or tool is None or instance.owner != owner:
                msg = "No such tool instance for this user."
                raise NotPermitted(msg)
            if not instance.running:
                msg = f"The tool instance is not running (it is {instance.status})."
                raise NotRunning(msg)
            withheld: dict[str, str] = {}
            if agent is not None and not tool.agent_secrets:
                tool, withheld = self._withhold_secrets(instance, tool)
            session = self._new_session(owner, username, instance, tool)
            session.agent = agent
            session.withheld = withheld
            if tool.record:
                await self._start_recording(session)
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
            self._arm_timer(session, self.attach_timeout, "never attached")
        self.log.info(
            "Tool terminal %s opened in %s (%s) for %s",
            session.id[:8],
            instance.id,
            tool.name,
            owner,
        )
        opened_in = time.monotonic() - started
        self._audit("open", session, duration=opened_in)
        metrics.OPENS.labels(instance.runtime).inc()
        metrics.SESSIONS.labels(instance.runtime).inc()
        metrics.OPEN_SECONDS.labels(instance.runtime).observe(opened_in)
        return session

    def _withhold_secrets(
        self, instance: Instance, tool: ToolType
    ) -> tuple[ToolType, dict[str, str]]:
        """``tool`` with the secret-named variables of its shell emptied (an agent's terminal:
        what is not in its shell cannot be printed however it is transformed), and the values
        withheld."""
        environment = self.runtime.shell_variables(instance, tool)
        withheld = {name: environment[name] for name in secret_variable_names(environment)}
        if not withheld:
            return tool, {}
        emptied = {**tool.env, **dict.fromkeys(withheld, "")}
        return dataclasses.replace(tool, env=emptied), withheld

    def _new_session(
        self, owner: str, username: str, instance: Instance, tool: ToolType
    ) -> ToolTerminal:
        return ToolTerminal(
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
            log=self.log,
        )

    # -- hand-over (see handover.py) ----------------------------------------------------------

    async def suspend_all(self) -> list[tuple[ToolTerminal, ShellChannel]]:
        """Refuse new sessions and suspend every session for a hand-over; the suspended
        ones, each with its shell. Undo with :meth:`resume_all`."""
        self._handing_over = True
        await self._none_creating.wait()
        suspended = []
        for session in list(self.sessions.values()):
            channel = await session.suspend()
            if channel is not None:
                suspended.append((session, channel))
        return suspended

    def _suspended(self) -> list[ToolTerminal]:
        return [session for session in self.sessions.values() if session.suspended]

    def resume_all(self) -> None:
        """The hand-over failed: every suspended session goes on here."""
        self._handing_over = False
        for session in self._suspended():
            session.resume()
            if not session.owner_attached:
                self._arm_timer(session, self._reconnect_grace, "last client disconnected")

    @property
    def _reconnect_grace(self) -> float:
        return max(self.disconnect_grace, HANDOVER_RECONNECT)

    async def hand_off_all(self) -> None:
        """The successor took the suspended sessions: they end here, their shells do not."""
        self._stopping = True
        for session in self._suspended():
            if self.sessions.pop(session.id, None) is not None:
                metrics.SESSIONS.labels(session.instance.runtime).dec()
            self._disarm_timer(session)
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
        session = self._new_session(state["owner"], state["username"], instance, tool)
        session.agent = state.get("agent")
        if tool.record:
            await self._start_recording(session)
        session.adopt(state, screen, channel)
        self.sessions[session.id] = session
        metrics.SESSIONS.labels(instance.runtime).inc()
        self.start_culling()
        if session.agent is None:  # an agent's terminal waits for nobody (see _client_detached)
            self._arm_timer(session, self._reconnect_grace, "last client disconnected")
        self.log.info("Tool terminal %s taken over from the predecessor", session.id[:8])
        return session

    async def _start_recording(self, session: ToolTerminal) -> None:
        if self.recorder is None:
            msg = "This tool type records its terminals, and recording is not available."
            raise RecordingFailed(msg)
        try:
            session.recording = await asyncio.to_thread(
                self.recorder.start,
                owner=session.owner,
                instance=session.instance.id,
                session_id=session.id,
                title=f"{session.tool.display_name}: {session.instance.id}",
                shell=session.tool.shell[0],
                environment=session.environment,
            )
        except RecordingError as error:
            raise RecordingFailed(str(error)) from error

    def _audit(
        self, action: str, session: ToolTerminal, username: str | None = None, **fields: t.Any
    ) -> None:
        self.audit.emit(
            action,
            session.username if username is None else username,
            owner=session.owner,
            session_id=session.id,
            instance=session.instance.id,
            tool=session.tool.name,
            **fields,
        )

    def _session_ended(self, session: ToolTerminal, reason: str, exit_code: int | None) -> None:
        self._finishing.add(session)
        if self.sessions.pop(session.id, None) is not None:
            metrics.SESSIONS.labels(session.instance.runtime).dec()
        metrics.count_kill(reason)
        self._disarm_timer(session)
        self.log.info("Tool terminal %s closed: %s", session.id[:8], reason)
        lived = time.monotonic() - session.created_monotonic
        self._audit("close", session, reason=reason, exit_code=exit_code, duration=lived)
        for listener in self.ended_listeners:
            listener(session)

    def _arm_timer(self, session: ToolTerminal, delay: float, reason: str) -> None:
        self._disarm_timer(session)
        if delay <= 0:
            self._spawn_task(session.close(reason))
            return
        loop = asyncio.get_running_loop()
        self._timers[session.id] = loop.call_later(
            delay, lambda: self._spawn_task(session.close(reason))
        )

    def _disarm_timer(self, session: ToolTerminal) -> None:
        timer = self._timers.pop(session.id, None)
        if timer is not None:
            timer.cancel()

    # -- connections: the only door of a WebSocket to a session ----------------------------

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
            self._disarm_timer(session)
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

    # -- agents: in-server clients through the same door ---------------------------------------

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

    def add_ended_listener(self, listener: t.Callable[[str], None]) -> None:
        """Call ``listener`` with the id of every session that ends."""
        self.ended_listeners.append(lambda session: listener(session.id))

    def add_typing_listener(self, listener: t.Callable[[], None]) -> None:
        """Call ``listener`` whenever a person types into a terminal that is not an agent's."""
        self.typing_listeners.append(listener)

    def still_admits(self, admission: Admission, principal: str | None) -> bool:
        """Whether ``principal`` (who the connection's credentials name now) may still hold
        ``admission``: the owner, or the same observer while the session is shared with it."""
        session = admission._session
        if admission.observer:
            return principal == admission.principal and principal in session.observers
        return principal == session.owner

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
                self._arm_timer(session, self.disconnect_grace, "last client disconnected")
            else:
                self._arm_timer(session, grace, "access revoked")

    async def reset_session(self, session: ToolTerminal) -> None:
        """Restart the session's shell."""
        started = time.monotonic()
        try:
            await session.reset()
        except RuntimeUnavailable as error:
            await session.close("reset failed")
            raise EngineUnavailable(str(error)) from error
        metrics.RESETS.labels(session.instance.runtime).inc()
        self._audit("reset", session, duration=time.monotonic() - started)

    async def close_session(self, session: ToolTerminal, reason: str) -> None:
        """End a session and kill its processes."""
        await session.close(reason)

    # -- culling and shutdown -----------------------------------------------------------------

    def start_culling(self) -> None:
        """Start the idle check if an idle timeout is set."""
        if self.idle_timeout > 0 and self._cull_task is None:
            self._cull_task = asyncio.create_task(self._cull_loop())

    async def _cull_loop(self) -> None:
        interval = min(max(self.idle_timeout / 4, 0.05), 30.0)
        while True:
            await asyncio.sleep(interval)
            deadline = time.monotonic() - self.idle_timeout
            for session in list(self.sessions.values()):
                if session.last_activity_monotonic < deadline:
                    self._spawn_task(session.close("idle"))

    async def shutdown(self) -> None:
        """End every session, killing their processes; used when the server stops.

        New sessions are refused from now on; those being created are waited for first (each
        is bounded by the engine's own timeouts), so that none is left out of the kill.
        """
        self._stopping = True
        await self._none_creating.wait()
        if self._cull_task is not None:
            self._cull_task.cancel()
            self._cull_task = None
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
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
        for task in list(self._tasks):
            with contextlib.suppress(Exception):
                await task
