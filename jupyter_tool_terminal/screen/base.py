"""A server-side picture of a session's terminal, so that a reattaching client sees its screen.

A client that connects to a running session (a page reload, an observer) must see what the
terminal shows now: the screen of a full-screen program (``top``, ``vi``), the colours, where the
cursor is, and the recent scrollback of a shell. Replaying raw recent output cannot do that (it
starts in the middle of a redraw, or shows a screen the program has since cleared), so each
session feeds its output into a terminal emulator, and a new client receives the emulator's
current state rendered as ANSI that rebuilds it.

:class:`ScreenModel` is what the session sees of it; the emulator behind it is a subclass's
(:mod:`.pyte`, :mod:`.ghostty`). Output is never fed on the hot path: :meth:`ScreenModel.feed`
only queues it (a bounded queue: of a flood only the last ``replay_buffer_size`` characters
matter for the final screen), and the scheduler (:mod:`.scheduler`) works the queue off in small
units within a share of the event loop's time and of the CPU.
"""

from __future__ import annotations

import asyncio
import collections
import re
import time
import typing as t

from .scheduler import (
    BUSY_QUEUE,
    BUSY_QUIET_TIME,
    MODEL_CPU_BURST,
    MODEL_CPU_SHARE,
    QUIET_TIME,
    Job,
    ScreenBudget,
    _scheduler,
)

#: The largest screen the model keeps; a larger terminal is modelled in its top-left part.
MAX_MODEL_ROWS = 150
MAX_MODEL_COLS = 400
#: Characters fed to the emulator in one unit of work (the deadline is checked between units).
SLICE = 128
#: How long (seconds) a snapshot may spend catching up with queued output; what is left then is
#: sent raw after the snapshot (it is the most recent output, so the terminal ends up the same).
CATCH_UP_TIME = 1.0
#: The scrollback keeps (and a snapshot sends) at most this many rendered characters of lines,
#: the newest ones: a bound in characters, as a line of cells that each change colour renders
#: to some 60 characters per cell.
SCROLLBACK_CHARS = 32 * 1024
#: (The former name of ``SCROLLBACK_CHARS``.)
SNAPSHOT_SCROLLBACK_CHARS = SCROLLBACK_CHARS

_PRIVATE_MODE = re.compile(r"\x1b\[\?([0-9;]{1,64})([hl])")
#: Modes worth carrying over from output that was dropped unseen (the alternate screen,
#: cursor visibility, autowrap, origin mode, application keys, mouse and paste modes).
_CARRIED_MODES = {1, 6, 7, 25, 47, 1000, 1002, 1003, 1006, 1047, 1049, 2004}


class ScreenModel:
    """What one terminal shows: fed its output cheaply, rendered for a client that attaches.

    ``feed`` and ``resize`` only queue; the scheduler works the queue off the hot path (see
    the module docstring). The queue holds at most ``replay_buffer_size`` characters: older
    output that was never fed is dropped, except the modes it switched (alternate screen,
    cursor visibility...). The emulator behind it is a subclass's
    (:class:`~jupyter_tool_terminal.screen.pyte.PyteScreenModel`,
    :class:`~jupyter_tool_terminal.screen.ghostty.GhosttyScreenModel`;
    :func:`~jupyter_tool_terminal.screen.model_class` chooses).
    """

    #: The emulator's name (the ``screen_model`` setting).
    backend: t.ClassVar[str] = ""
    #: Characters of output fed to the emulator in one unit of work.
    slice_chars: t.ClassVar[int] = SLICE
    #: What one session gets of the default ``screen_memory_limit`` (MiB): the measured worst
    #: case of one model where that is small enough to grant every session.
    session_share_mib: t.ClassVar[float] = 8

    def __init__(
        self,
        rows: int = 24,
        cols: int = 80,
        *,
        scrollback_lines: int,
        replay_buffer_size: int,
        budget: ScreenBudget | None = None,
    ) -> None:
        #: The terminal's size as last told (the model's own is at most the largest model).
        self.size = (rows, cols)
        self.scrollback_lines = max(scrollback_lines, 0)
        self._replay_buffer_size = max(replay_buffer_size, 1)
        self._queue: collections.deque[str | tuple[int, int]] = collections.deque()
        self._queued = 0
        self._last_feed = 0.0
        #: When output last arrived (``time.monotonic()``), for the memory budget.
        self.last_output = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None
        #: The unit-by-unit work in progress (a resize, settling the scrollback, a render).
        self._job: Job | None = None
        #: Work the job waits for (done elsewhere: a thread), if any.
        self._awaited: asyncio.Future[t.Any] | None = None
        #: Snapshots waiting for a render; the render they get, and how many still take it
        #: (the model is held still until they all did, so that the raw rest is exact).
        self._waiting: list[asyncio.Future[str]] = []
        self._catch_up_until = 0.0
        self._rendering = False
        self._held = 0
        #: CPU budget (seconds) and when it was last topped up.
        self._credit = MODEL_CPU_BURST
        self._credited = time.monotonic()
        self._budget = budget
        self.closed = False
        self._open_emulator(min(rows, MAX_MODEL_ROWS), min(cols, MAX_MODEL_COLS))

    @classmethod
    def prepare(cls) -> None:
        """Do, once per process, what the first model would otherwise do when its session
        opens (called when the server starts)."""

    # -- what a backend provides ------------------------------------------------------------

    def _open_emulator(self, rows: int, cols: int) -> None:
        """Make the emulator, of ``rows`` x ``cols`` (at most the largest model) and
        ``scrollback_lines``: the backend's own state starts here."""
        raise NotImplementedError

    def _feed_text(self, text: str) -> Job | None:
        """Feed ``text`` to the emulator (at most ``slice_chars``): at once, or as a job."""
        raise NotImplementedError

    def _resize_job(self, rows: int, cols: int) -> Job:
        """Resize the emulator, in units."""
        raise NotImplementedError

    def _render(self) -> Job:
        """The ANSI text that rebuilds the emulator's state in a blank terminal, in units."""
        raise NotImplementedError

    def _settle(self) -> Job | None:
        """Background work to do before more output is fed, if any."""
        return None

    def _tidy(self, deadline: float) -> bool:
        """Work to do once the queue is empty (until ``deadline``); whether there was some."""
        del deadline
        return False

    def _close_emulator(self) -> None:
        """Free what the emulator holds."""

    def memory_estimate(self) -> int:
        """Bytes this model holds, estimated (for the server's :class:`ScreenBudget`)."""
        return self._queued * 4

    def drop_scrollback(self) -> bool:
        """Forget the scrollback and keep none from now on; whether there was any to drop."""
        had = self.scrollback_lines > 0
        self.scrollback_lines = 0
        return had

    @property
    def alternate(self) -> bool:
        """Whether the alternate screen (full-screen programs) is shown."""
        raise NotImplementedError

    @property
    def dimensions(self) -> tuple[int, int]:
        """The model's own screen size, (rows, columns) (at most the largest model)."""
        raise NotImplementedError

    def display(self) -> list[str]:
        """The screen's rows as text (after :meth:`snapshot` it reflects all output so far)."""
        raise NotImplementedError

    def visible_display(self) -> list[str]:
        """:meth:`display` as the person sees it: text drawn concealed (SGR 8) is blank (what
        an agent reads, ``read_screen``: nothing the person cannot see)."""
        return self.display()

    @property
    def cursor(self) -> tuple[int, int]:
        """The cursor, (column, row) from 0; the column is the screen's width while a wrap is
        pending (a character was written in the last column)."""
        raise NotImplementedError

    def _report_memory(self) -> None:
        if self._budget is not None:
            self._budget.update(self, 0 if self.closed else self.memory_estimate())

    # -- input ----------------------------------------------------------------------------

    def feed(self, text: str) -> None:
        """Queue output for the model (cheap: called for every piece of output)."""
        self._queue.append(text)
        self._queued += len(text)
        if self._queued > self._replay_buffer_size and not self._held:
            self._drop_oldest()
        self._last_feed = self.last_output = time.monotonic()
        if self._timer is None and not self.closed:
            self._timer = asyncio.get_running_loop().call_later(QUIET_TIME, self._quiet_check)

    def resize(self, rows: int, cols: int) -> None:
        """The terminal's size changed (queued: output before it was for the old size)."""
        self.size = (rows, cols)
        self._queue.append((min(rows, MAX_MODEL_ROWS), min(cols, MAX_MODEL_COLS)))
        if not self.closed:
            _scheduler().want(self)

    def close(self) -> None:
        """Stop working: the session ended."""
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._queue.clear()
        self._queued = 0
        self._job = None
        for waiter in self._waiting:
            if not waiter.done():
                waiter.set_result("")
        self._waiting.clear()
        self._report_memory()
        if self._awaited is None or self._awaited.done():
            self._close_emulator()
        else:  # (a thread still works on it: freed when it is done)
            self._awaited.add_done_callback(lambda _: self._close_emulator())

    def _drop_oldest(self) -> None:
        """Drop queued output beyond ``replay_buffer_size``; keep the modes it switched."""
        carried: dict[int, str] = {}
        size: tuple[int, int] | None = None
        while self._queued > self._replay_buffer_size:
            item = self._queue.popleft()
            if isinstance(item, tuple):
                size = item
                continue
            excess = self._queued - self._replay_buffer_size
            if len(item) > excess:
                # Keep the end of this piece, starting at a line (not inside a sequence).
                newline = item.find("\n", excess, excess + 4096)
                cut = newline + 1 if newline >= 0 else excess
                dropped, item = item[:cut], item[cut:]
                self._queue.appendleft(item)
            else:
                dropped = item
            self._queued -= len(dropped)
            if "\x1b[?" in dropped:
                for match in _PRIVATE_MODE.finditer(dropped):
                    for number in match.group(1).split(";"):
                        if number.isdigit() and int(number) in _CARRIED_MODES:
                            carried[int(number)] = match.group(2)
        prefix = "".join(f"\x1b[?{number}{how}" for number, how in carried.items())
        if prefix:
            self._queue.appendleft(prefix)
            self._queued += len(prefix)
        if size is not None:
            self._queue.appendleft(size)

    # -- working the queue off ---------------------------------------------------------------

    @property
    def quiet_time(self) -> float:
        """How long (seconds) output must pause before what is queued is fed to the emulator:
        longer while much is queued (see ``BUSY_QUIET_TIME``)."""
        return BUSY_QUIET_TIME if self._queued >= BUSY_QUEUE else QUIET_TIME

    def _quiet_check(self) -> None:
        self._timer = None
        if self.closed:
            return
        waited = time.monotonic() - self._last_feed
        quiet = self.quiet_time
        if waited < quiet:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(quiet - waited, self._quiet_check)
        else:
            _scheduler().want(self)

    def credit_wait(self) -> float:
        """Seconds until this model has CPU budget again (0: it has some now)."""
        now = time.monotonic()
        self._credit = min(MODEL_CPU_BURST, self._credit + (now - self._credited) * MODEL_CPU_SHARE)
        self._credited = now
        return 0.0 if self._credit > 0 else -self._credit / MODEL_CPU_SHARE + 0.001

    def charge(self, seconds: float) -> None:
        """Count CPU time spent on this model against its budget."""
        self._credit -= seconds

    def step(self, deadline: float) -> bool:
        """Work until ``deadline`` (``time.perf_counter()``); whether work is left right now."""
        if self.closed or self._held:
            return False
        fed = False
        try:
            while time.perf_counter() < deadline:
                if self._job is not None:
                    try:
                        awaited = next(self._job)
                    except StopIteration as done:
                        self._job = None
                        if self._rendering:
                            self._rendered(done.value)
                            return False
                        continue
                    if awaited is not None:
                        # Work done elsewhere (a thread): stepped again once it is done.
                        self._await(awaited)
                        return False
                    continue
                job = self._settle()
                if job is not None:
                    self._job = job
                    continue
                catching_up = time.monotonic() < self._catch_up_until
                if self._queue and (catching_up or not self._waiting):
                    if not self._waiting and time.monotonic() - self._last_feed < self.quiet_time:
                        return False  # output resumed: wait for the next pause (feed set a timer)
                    self._feed_one()
                    fed = True
                    continue
                if self._waiting:
                    self._rendering = True
                    self._job = self._render()
                    continue
                if self._tidy(deadline):
                    continue
                return False
            return True
        finally:
            if fed or self._job is None:  # (what it fed, or work it finished, changed its size)
                self._report_memory()

    def _await(self, awaited: asyncio.Future[t.Any]) -> None:
        if awaited is self._awaited:
            return
        self._awaited = awaited

        def resume(_: object) -> None:
            if not self.closed:
                _scheduler().want(self, urgent=bool(self._waiting))

        awaited.add_done_callback(resume)

    def _feed_one(self) -> None:
        """Feed the next slice of queued output (or apply the next resize)."""
        queue = self._queue
        size = queue[0]
        if isinstance(size, tuple):
            queue.popleft()
            self._job = self._resize_job(*size)
            return
        # One unit takes as many queued pieces as fit (a paced log comes a line per read:
        # a unit per piece cost more than the emulating).
        room = self.slice_chars
        pieces = []
        while room > 0 and queue and isinstance(queue[0], str):
            item = queue[0]
            if len(item) > room:
                pieces.append(item[:room])
                queue[0] = item[room:]
                break
            queue.popleft()
            pieces.append(item)
            room -= len(item)
        piece = "".join(pieces)
        self._queued -= len(piece)
        self._job = self._feed_text(piece)

    # -- output ---------------------------------------------------------------------------

    async def snapshot(self) -> str:
        """ANSI text that turns a blank terminal into the current one.

        Catches up with queued output (for at most ``CATCH_UP_TIME``); whatever is still
        queued after that follows the rendered screen raw. The caller must attach the client
        before awaiting anything else, so that no output falls between the two.
        """
        if self.closed:
            return ""
        waiter: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        if not self._waiting:
            self._catch_up_until = time.monotonic() + CATCH_UP_TIME
        self._waiting.append(waiter)
        _scheduler().want(self, urgent=True)
        try:
            rendered = await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()
            elif waiter in self._waiting:
                self._waiting.remove(waiter)
            raise
        # Held still since the render: what is queued now is exactly what it has not seen.
        rest = "".join(item for item in self._queue if isinstance(item, str))
        self._release()
        return rendered + rest

    def _rendered(self, text: str) -> None:
        self._rendering = False
        waiting, self._waiting = self._waiting, []
        for waiter in waiting:
            if not waiter.done():
                self._held += 1
                waiter.set_result(text)
        if not self._held:
            _scheduler().want(self)  # every client left meanwhile: carry on with the queue

    def _release(self) -> None:
        if self.closed:
            return  # (close answered the waiters itself and cleared the queue)
        self._held -= 1
        if not self._held:
            if self._queued > self._replay_buffer_size:
                self._drop_oldest()
            _scheduler().want(self)

    # -- inspection (tests, memory reports) ---------------------------------------------------

    @property
    def queued(self) -> int:
        """Characters of output queued and not yet fed to the model."""
        return self._queued
