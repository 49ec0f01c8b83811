"""One terminal session: a shell in a tool instance, the clients watching it, and its lifecycle."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import datetime
import logging
import math
import secrets
import time
import typing as t

from .errors import RecordingFailed
from .protocol import (
    ClientMessage,
    SetSize,
    Stdin,
    Unknown,
    clamp_size,
    disconnect_frame,
    error_frame,
    exit_frame,
    setup_frame,
    stdout_frame,
)
from .recording import Recorder, Recording, RecordingError
from .runtime import Instance, ShellChannel, ToolRuntime
from .runtime.base import EngineUnreachable, InstanceMoved
from .screen import ScreenModel, ScreenModels
from .tooltypes import ToolType

#: How much is read from the engine's socket at once; larger reads mean fewer, larger frames.
READ_CHUNK = 64 * 1024
#: Output floods are sent as at most one frame per ``FRAME_INTERVAL`` seconds (one JSON encode,
#: one WebSocket frame for everything that arrived meanwhile) instead of one frame per piece of
#: about 1 KiB the engine delivers; per-frame costs, on the server and in the browser, are what
#: limit throughput. A flood is a read of at least ``COALESCE_BYTES``, or output that comes
#: within ``FRAME_INTERVAL`` of a frame of that size, or the ``LINE_STREAK``-th read in a row of at
#: least ``LINE_BYTES`` each within ``FRAME_INTERVAL`` of the frame before (a flood of short
#: lines, which the engine hands over a few hundred bytes at a time); anything else goes out at
#: once, so the echo of a fast typist's keystrokes (frames of a few bytes in quick succession)
#: is never held back, nor an agent's command (the echo of the typed line, then its markers).
COALESCE_BYTES = 1024
LINE_BYTES = 64
LINE_STREAK = 2
FRAME_INTERVAL = 0.002
#: Seconds between two reports of a session's activity to the server (its idle-culling clock):
#: a flood of output costs one report per interval, not one per frame.
ACTIVITY_REPORT_INTERVAL = 1.0


class TerminalClient(t.Protocol):
    """What a session needs of an attached client (a WebSocket connection)."""

    #: The client's last requested terminal size (rows, cols), if it sent one.
    size: tuple[int, int] | None
    #: Who connected (the owner label value, or an observer's name).
    principal: str
    #: Whether it only watches (an observer: no input, no resize).
    observer: bool

    def send_frame(self, frame: str | bytes) -> t.Awaitable[None] | None:
        """Send one JSON text frame (``bytes``: already UTF-8 encoded); the awaitable resolves
        once it left the server."""

    def end(self, code: int | None = None, reason: str | None = None) -> None:
        """Close the connection."""


#: What an observer's ``stdin`` and ``set_size`` frames are told.
READ_ONLY = "This terminal is shared with you read-only: you cannot type or resize."


def floods(size: int, since_last: float, last_size: int, streak: int) -> bool:
    """Whether a read of ``size`` bytes, ``since_last`` seconds after a frame of ``last_size``
    bytes, is part of a flood: its frame then waits for ``FRAME_INTERVAL`` and takes what comes
    meanwhile (see ``COALESCE_BYTES``). ``streak``: how many reads in a row, this one
    included, were of ``LINE_BYTES`` or more, each within ``FRAME_INTERVAL`` of the frame
    before."""
    if size >= COALESCE_BYTES:
        return True
    if since_last >= FRAME_INTERVAL:
        return False
    return last_size >= COALESCE_BYTES or streak >= LINE_STREAK


#: Called with each piece of a session's output as it arrives (after the screen model got it),
#: and once with ``None`` when the session ended. It must return quickly: it runs in the pump.
OutputListener = t.Callable[[str | None], None]


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _isoformat(moment: datetime.datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


class ToolTerminal:
    """A terminal session: one shell at a time (reset replaces it), any number of clients.

    The session owns the shell's whole process tree: whenever it ends (close, reset, the shell's
    own exit, the server stopping) it has its runtime terminate the shell and everything it
    started, because closing the terminal's stream alone leaves them running.
    """

    def __init__(
        self,
        *,
        owner: str,
        username: str,
        instance: Instance,
        tool: ToolType,
        runtime: ToolRuntime,
        replay_buffer_size: int,
        max_input_backlog: int = 1024 * 1024,
        scrollback_lines: int = 500,
        screens: ScreenModels | None = None,
        on_ended: t.Callable[[ToolTerminal, str, int | None], None],
        log: logging.Logger,
        on_activity: t.Callable[[str, datetime.datetime], None] | None = None,
        recorder: Recorder | None = None,
        session_id: str | None = None,
    ) -> None:
        """``session_id``: the id of a session taken over from a predecessor (see
        :meth:`adopt`), which its recording is named by too; a new session gets a new one."""
        self.id = session_id or secrets.token_urlsafe(24)
        self.owner = owner
        #: The Jupyter username that opened the session (for the audit log).
        self.username = username
        self.instance = instance
        self.tool = tool
        self.created = _now()
        self.last_activity = self.created
        #: Monotonic time of the last input or output, for the idle timeout.
        self.created_monotonic = self.last_activity_monotonic = time.monotonic()
        self.clients: list[TerminalClient] = []
        #: Users the owner granted a read-only view, in the order granted.
        self.observers: list[str] = []
        #: The agent that opened it (``{"id", "name"}``), for an agent's terminal.
        self.agent: dict[str, str] | None = None
        #: Clients waiting for their screen snapshot (they get live output after it).
        self._attaching: list[TerminalClient] = []
        self.ended = False
        self._runtime = runtime
        #: The session's recording, if its tool type records (see :meth:`start_recording`).
        self.recording: Recording | None = None
        self._recorder = recorder
        #: What the terminal shows, for clients that attach later (a reload, an observer).
        self.screen: ScreenModel = (screens or ScreenModels()).new(
            scrollback_lines=scrollback_lines, replay_buffer_size=replay_buffer_size
        )
        #: The size (rows, cols) a new shell starts at, once one is known: the size the
        #: session was opened with, then the last one applied (a reset's shell keeps it).
        self.shell_size: tuple[int, int] | None = None
        self._on_ended = on_ended
        self._on_activity = on_activity
        self._activity_reported = -math.inf
        self._log = log
        self._channel: ShellChannel | None = None
        self._pump_task: asyncio.Task[None] | None = None
        # Keystrokes waiting for the shell: queued so that a connection never waits for a
        # program that does not read (its frames, pongs included, must keep being read), and
        # bounded: beyond ``max_input_backlog`` bytes input is refused.
        self._input: list[bytes] = []
        self._input_size = 0
        #: Bytes of input queued for the shell beyond which more is refused.
        self.max_input_backlog = max_input_backlog
        self._input_task: asyncio.Task[None] | None = None
        self._lifecycle = asyncio.Lock()
        self._resize_task: asyncio.Task[None] | None = None
        self._end_task: asyncio.Task[None] | None = None
        # Decodes the shell's output; kept with the session so that a hand-over takes the
        # bytes of a character that is only partly read.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # Set while the session is suspended for a hand-over (see ``handover.py``): the pump
        # stops before its next read and input is queued, not written.
        self._suspended = False
        self._pump_reading = False
        #: In-server readers of the output (an AI agent's shell), beside the clients.
        self.output_listeners: list[OutputListener] = []
        #: Variables emptied in the shell (an agent's terminal gets no secret values), with
        #: their real values: still secrets to redact wherever they show up.
        self.withheld: dict[str, str] = {}

    # -- model --------------------------------------------------------------------------------

    def model(self) -> dict[str, t.Any]:
        """The session as the REST API shows it."""
        model = {
            "id": self.id,
            "instance": self.instance.id,
            "tool": self.tool.name,
            "created": _isoformat(self.created),
            "last_activity": _isoformat(self.last_activity),
            "clients": len(self.clients) + len(self._attaching),
        }
        if self.agent is not None:
            model["agent"] = dict(self.agent)
        return model

    def observed_model(self) -> dict[str, t.Any]:
        """The session as an observer sees it listed: whose it is, and that it is read-only."""
        return {**self.model(), "owner": self.owner, "role": "observer"}

    @property
    def environment(self) -> dict[str, str]:
        """The variables the session's shell starts with, as far as its runtime knows them
        (the instance's own and the tool type's ``env``): what redaction treats as the shell's
        secrets, for its recording and for AI agents alike; withheld ones with their values)."""
        return {**self._runtime.shell_variables(self.instance, self.tool), **self.withheld}

    async def working_directory(self) -> str | None:
        """The shell's current working directory, or ``None`` if it cannot be known (no
        shell now, or a runtime that cannot tell): where a file dropped on it lands."""
        channel = self._channel
        return None if channel is None else await channel.working_directory()

    def _touch(self) -> None:
        self.last_activity = _now()
        self.last_activity_monotonic = now = time.monotonic()
        if (
            self._on_activity is not None
            and now - self._activity_reported >= ACTIVITY_REPORT_INTERVAL
        ):
            self._activity_reported = now
            self._on_activity(self.username, self.last_activity)

    # -- starting and stopping the shell ------------------------------------------------------

    async def start(self) -> None:
        """Start the shell (and its startup command)."""
        async with self._lifecycle:
            await self._spawn()

    def start_at(self, rows: int, cols: int) -> None:
        """Start the shell at this size (before :meth:`start`: the size the panel that opens
        the session has), rather than at the engine's 24x80 until a client's first resize; a
        session taken over (:meth:`adopt`) goes on at its size."""
        self.shell_size = clamp_size(rows, cols)
        self.screen.resize(*self.shell_size)
        if self.recording is not None:
            self.recording.resize(*self.shell_size)

    async def _spawn(self) -> None:
        self._channel = await self._runtime.start_shell(self.instance, self.tool, self.shell_size)
        self._touch()
        self._decoder.reset()
        self._pump_task = asyncio.create_task(self._pump(self._channel))

    async def _stop_shell(self) -> None:
        """Stop reading and have the runtime end the shell and everything it started."""
        for task in (self._pump_task, self._input_task):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._pump_task = self._input_task = None
        # Input typed for this shell is not the next one's.
        self._input.clear()
        self._input_size = 0
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.terminate()

    async def reset(self) -> None:
        """Kill the shell and everything it started, and start a new one for the same clients."""
        async with self._lifecycle:
            if self.ended:
                return
            await self._stop_shell()
            # The screen model stays: attached clients keep their screen and see the new
            # shell's output on it, and a client attaching later sees the same.
            await self._spawn()
            if self.clients:
                self._schedule_resize()

    async def finished(self) -> None:
        """Return once an end in progress (the shell's own, or :meth:`close`) is done: its
        processes killed, its clients told, its recording closed."""
        async with self._lifecycle:
            return

    async def close(
        self, reason: str, *, message: str | None = None, code: int | None = None
    ) -> None:
        """End the session: kill its processes and disconnect its clients.

        ``message`` (an ``error`` frame before ``disconnect``) tells the clients why, when it is
        not their own doing; ``code`` is the WebSocket close code (default: a normal close).
        """
        async with self._lifecycle:
            if self.ended:
                return
            self.ended = True
            self._on_ended(self, reason, None)
            self._tell_listeners_ended()
            await self._stop_shell()
            if message is not None:
                self._broadcast(error_frame(message))
            self._disconnect_clients(code)
            await self._end_recording()

    @property
    def owner_attached(self) -> bool:
        """Whether a client of the owner (not only observers) is connected."""
        return any(not client.observer for client in self.clients + self._attaching)

    def end_observer(self, principal: str) -> None:
        """Close every connection of observer ``principal`` at once (its grant was revoked)."""
        for client in [*self.clients, *self._attaching]:
            if client.observer and client.principal == principal:
                self.detach(client)
                client.send_frame(error_frame("The owner stopped sharing this terminal."))
                client.end(1008, "No longer shared")

    def _disconnect_clients(self, code: int | None = None, reason: str | None = None) -> None:
        self._broadcast(disconnect_frame())
        self.screen.close()
        clients, self.clients = self.clients + self._attaching, []
        self._attaching = []
        for client in clients:
            client.end(code, reason)

    # -- output -------------------------------------------------------------------------------

    def _broadcast(self, frame: str) -> list[t.Awaitable[None]]:
        # Encoded once for every client.
        encoded = frame.encode("utf-8")
        pending = []
        for client in list(self.clients):
            future = client.send_frame(encoded)
            if future is not None:
                pending.append(future)
        return pending

    async def _pump(self, channel: ShellChannel) -> None:
        decoder = self._decoder
        loop = asyncio.get_running_loop()
        last_frame = 0.0
        last_size = streak = 0
        in_flight: list[t.Awaitable[None]] = []
        try:
            while True:
                if self._suspended:
                    return  # handed over, or back once the hand-over failed (resume)
                # Only a read may be cancelled by a suspension: it has taken nothing yet.
                self._pump_reading = True
                try:
                    data = await channel.read(READ_CHUNK)
                finally:
                    self._pump_reading = False
                since_last = loop.time() - last_frame
                quick_line = len(data) >= LINE_BYTES and since_last < FRAME_INTERVAL
                streak = streak + 1 if quick_line else 0
                if (
                    data
                    and len(data) < READ_CHUNK
                    and floods(len(data), since_last, last_size, streak)
                ):
                    # What the engine sends meanwhile waits in the kernel, to be read at once
                    # and sent as the next frame. (A full read means more is already waiting:
                    # waiting for it would cap a flood at READ_CHUNK per FRAME_INTERVAL.)
                    channel.hold_output(True)
                    try:
                        await asyncio.sleep(max(FRAME_INTERVAL - since_last, 0.0005))
                    finally:
                        channel.hold_output(False)
                # Backpressure: a frame goes out only once every client took the previous one,
                # so a slow client holds at most one frame and one read in the server, and the
                # engine's socket is not read further. Waiting after the read (not before it)
                # lets the engine's next output arrive while the previous frame is being sent.
                if in_flight:
                    await asyncio.gather(*in_flight, return_exceptions=True)
                last_frame = loop.time()
                last_size = len(data)
                text = decoder.decode(data, final=not data)
                in_flight = []
                if text:
                    in_flight = self._output(text)
                if not data:
                    break
        except (ConnectionError, OSError) as error:
            self._log.debug("Tool terminal stream ended: %s", type(error).__name__)
        # The shell ended by itself (or the container went away).
        self._end_task = asyncio.create_task(self._shell_ended(channel))

    def _output(self, text: str) -> list[t.Awaitable[None]]:
        """Show the shell's output: the screen model, the recording, the in-server
        listeners, every client."""
        self._touch()
        self.screen.feed(text)
        if self.recording is not None:
            self.recording.output(text)
        if self.output_listeners:
            self._tell_listeners(text)
        return self._broadcast(stdout_frame(text))

    async def _shell_ended(self, channel: ShellChannel) -> None:
        async with self._lifecycle:
            if self.ended or channel is not self._channel:
                return  # reset or close got here first
            self.ended = True
            reason, message = "instance stopped", "The tool instance stopped"
            try:
                code = await channel.exit_code()
            except EngineUnreachable as error:
                code, reason, message = None, "engine unreachable", str(error)
            except InstanceMoved as error:
                code, reason, message = None, "instance moved", str(error)
            except Exception:  # noqa: BLE001 - the engine may be gone; the code is then unknown
                code = None
            self._pump_task = None
            self._on_ended(self, "exit" if code is not None else reason, code)
            self._tell_listeners_ended()
            if code is None:
                ended = f"{message[:1].upper()}{message[1:]}; the terminal has ended."
                self._broadcast(error_frame(ended))
            else:
                self._broadcast(exit_frame(code))
            await self._stop_shell()
            self._disconnect_clients()
            await self._end_recording()

    def _tell_listeners(self, text: str | None) -> None:
        for listener in list(self.output_listeners):
            try:
                listener(text)
            except Exception:  # noqa: BLE001 - whatever it is, it is logged
                # A listener's bug must not stop the terminal's output for everyone.
                self._log.exception("A tool terminal output listener failed; removed")
                with contextlib.suppress(ValueError):
                    self.output_listeners.remove(listener)

    def _tell_listeners_ended(self) -> None:
        self._tell_listeners(None)
        self.output_listeners.clear()

    async def start_recording(self) -> None:
        """Start the session's recording if its tool type records (before its shell starts,
        or before it goes on with a predecessor's); :class:`RecordingFailed` if it cannot: such
        a session must not run unrecorded."""
        if not self.tool.record:
            return
        if self._recorder is None:
            msg = "This tool type records its terminals, and recording is not available."
            raise RecordingFailed(msg)
        try:
            self.recording = await asyncio.to_thread(
                self._recorder.start,
                owner=self.owner,
                instance=self.instance.id,
                session_id=self.id,
                title=f"{self.tool.display_name}: {self.instance.id}",
                shell=self.tool.shell[0],
                environment=self.environment,
            )
        except RecordingError as error:
            raise RecordingFailed(str(error)) from error

    async def _end_recording(self) -> None:
        recording, self.recording = self.recording, None
        if recording is not None:
            await asyncio.wrap_future(recording.close())

    # -- clients ------------------------------------------------------------------------------

    async def attach(self, client: TerminalClient) -> None:
        """Add a client: it gets ``setup`` and the current screen, then everything live."""
        self._attaching.append(client)
        client.send_frame(setup_frame())
        screen = await self.screen.snapshot()
        # No await from here on: output that came after the snapshot goes to this client live.
        if client not in self._attaching:
            return  # it left (or the session ended) meanwhile
        self._attaching.remove(client)
        if screen:
            client.send_frame(stdout_frame(screen))
        self.clients.append(client)
        if client.size is not None:
            self._schedule_resize()

    def detach(self, client: TerminalClient) -> None:
        """Remove a client (its connection closed)."""
        with contextlib.suppress(ValueError):
            self._attaching.remove(client)
        with contextlib.suppress(ValueError):
            self.clients.remove(client)
        if client.size is not None and self.clients:
            self._schedule_resize()

    async def foreground_program(self) -> str | None:
        """The program holding the terminal's foreground when it is not the shell (``None``:
        the shell, or the runtime cannot tell)."""
        channel = self._channel
        return None if channel is None else await channel.foreground_program()

    @property
    def input_backlog(self) -> int:
        """Bytes of input queued for the shell and not yet taken by its terminal."""
        return self._input_size

    def write(self, text: str) -> bool:
        """Queue keystrokes for the shell, in order; ``False`` (nothing queued) if the
        backlog of input the shell has not taken yet is already at its limit."""
        channel = self._channel
        if channel is None or self.ended or not text:
            return True
        if self._input_size >= self.max_input_backlog:
            return False
        data = text.encode("utf-8", errors="replace")
        self._touch()
        if self.recording is not None:
            self.recording.input(text)
        if self._suspended:  # kept for whoever runs the shell next
            self._input.append(data)
            self._input_size += len(data)
            return True
        if not self._input and (self._input_task is None or self._input_task.done()):
            # Nothing is queued before it: what the terminal takes now goes at once.
            try:
                data = data[channel.write_nowait(data) :]
            except (ConnectionError, OSError):
                self._log.debug("Tool terminal input dropped: the stream is closed")
                return True
            if not data:
                return True
        self._input.append(data)
        self._input_size += len(data)
        if self._input_task is None or self._input_task.done():
            self._input_task = asyncio.create_task(self._feed_input(channel))
        return True

    async def _feed_input(self, channel: ShellChannel) -> None:
        while self._input and channel is self._channel:
            # Everything queued meanwhile goes in one write.
            data = b"".join(self._input)
            self._input.clear()
            try:
                await channel.write(data)
            except (ConnectionError, OSError):
                self._log.debug("Tool terminal input dropped: the stream is closed")
                self._input.clear()
                self._input_size = 0
                return
            finally:
                self._input_size = max(self._input_size - len(data), 0)

    def receive(self, client: TerminalClient, message: ClientMessage) -> str | None:
        """Act on a message from ``client``; what its ``error`` frame says if it is refused."""
        if self.ended or isinstance(message, Unknown):
            return None
        if client.observer:
            return READ_ONLY
        if isinstance(message, Stdin):
            if not self.write(message.text):
                return (
                    "Input not sent: the program in the terminal is not reading its input "
                    f"and {self.input_backlog // 1024} KiB are already waiting for it. "
                    "Wait for it, or reset the terminal."
                )
        elif isinstance(message, SetSize):
            client.size = (message.rows, message.cols)
            self.resize_requested()
        return None

    def resize_requested(self) -> None:
        """A client changed its size: the terminal takes the smallest size of all clients."""
        self._schedule_resize()

    def _schedule_resize(self) -> None:
        if self._resize_task is None or self._resize_task.done():
            self._resize_task = asyncio.create_task(self._apply_sizes())

    async def _apply_sizes(self) -> None:
        # Coalesces bursts: while one resize is on its way to the engine, later requests only
        # update the wanted size, and one more call applies the latest of them.
        applied: tuple[int, int] | None = None
        while True:
            sizes = [client.size for client in self.clients if client.size is not None]
            if not sizes:
                return
            wanted = (min(rows for rows, _ in sizes), min(cols for _, cols in sizes))
            channel = self._channel
            if wanted == applied or channel is None or self.ended:
                return
            try:
                await channel.resize(*wanted)
            except Exception as error:  # noqa: BLE001 - a shell that just ended cannot be resized
                self._log.debug("Resize failed: %s", type(error).__name__)
                return
            self.screen.resize(*wanted)
            if self.recording is not None:
                self.recording.resize(*wanted)
            applied = self.shell_size = wanted

    # -- hand-over (see handover.py) ----------------------------------------------------------

    async def suspend(self) -> ShellChannel | None:
        """Stop reading the shell for a hand-over and close the clients (they reconnect).

        What was read from the shell is on the screen; what was not stays in the kernel's
        buffer for the successor. Holds the session's lifecycle (a close, a reset wait) until
        :meth:`resume` or :meth:`hand_off`. ``None`` (nothing held) if the session has ended.
        """
        await self._lifecycle.acquire()
        channel = self._channel
        if self.ended or channel is None:
            self._lifecycle.release()
            return None
        self._suspended = True
        pump, self._pump_task = self._pump_task, None
        if pump is not None:
            if self._pump_reading:
                pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
        feeding, self._input_task = self._input_task, None
        if feeding is not None:
            # Input given to the stream before the suspension goes out first.
            await asyncio.wait({feeding}, timeout=1.0)
            feeding.cancel()
        channel.hold_output(True)
        rest = self._decoder.decode(channel.take_buffered())
        if rest:
            self._output(rest)
        self._end_clients_for_handover()
        return channel

    def _end_clients_for_handover(self) -> None:
        # Closed without a `disconnect` frame: the browsers reconnect (to whichever server
        # then serves the session).
        for client in [*self.clients, *self._attaching]:
            client.end(1012, "The tool-terminal service is restarting")

    @property
    def suspended(self) -> bool:
        """Whether the session is suspended for a hand-over."""
        return self._suspended

    def handover_state(self) -> dict[str, t.Any]:
        """What a successor needs to go on with the suspended session (JSON-ready)."""
        return {
            "id": self.id,
            "owner": self.owner,
            "username": self.username,
            "instance": self.instance.id,
            "tool": self.tool.name,
            "created": self.created.timestamp(),
            "last_activity": self.last_activity.timestamp(),
            "observers": list(self.observers),
            "agent": self.agent,
            "size": list(self.screen.size),
            "undecoded": self._decoder.getstate()[0].hex(),
            "input": b"".join(self._input).hex(),
        }

    def resume(self) -> None:
        """Go on after a hand-over failed: read the shell again, write what was typed."""
        channel = self._channel
        self._suspended = False
        if channel is not None:
            channel.hold_output(False)
            self._pump_task = asyncio.create_task(self._pump(channel))
            if self._input:
                self._input_task = asyncio.create_task(self._feed_input(channel))
        self._lifecycle.release()

    async def hand_off(self) -> None:
        """The successor took the session: end it here without ending its shell."""
        self.ended = True
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.release()
        self._end_clients_for_handover()  # any that connected while it was suspended
        self.clients, self._attaching = [], []
        self.screen.close()
        await self._end_recording()
        self._lifecycle.release()

    def adopt(self, state: t.Mapping[str, t.Any], screen: str, channel: ShellChannel) -> None:
        """Go on with a predecessor's session (``state`` from :meth:`handover_state`) whose
        shell is ``channel`` and whose screen was ``screen``; the session was made with its id
        (``session_id``), and its recording, if any, started."""
        self.created = datetime.datetime.fromtimestamp(state["created"], datetime.timezone.utc)
        self.last_activity = datetime.datetime.fromtimestamp(
            state["last_activity"], datetime.timezone.utc
        )
        # The idle timeout goes on counting from the last activity, not from the hand-over.
        self.last_activity_monotonic -= max(time.time() - state["last_activity"], 0.0)
        self.observers = list(state["observers"])
        # The screen, the recording (a new file, started at 24x80) and a reset's shell go on
        # at the session's size.
        self.start_at(*state["size"])
        self.screen.feed(screen)
        self._decoder.decode(bytes.fromhex(state["undecoded"]))
        self._channel = channel
        self._pump_task = asyncio.create_task(self._pump(channel))
        typed = bytes.fromhex(state["input"])
        if typed:
            self._input.append(typed)
            self._input_size = len(typed)
            self._input_task = asyncio.create_task(self._feed_input(channel))
