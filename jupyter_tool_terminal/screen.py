"""A server-side picture of a session's terminal, so that a reattaching client sees its screen.

A client that connects to a running session (a page reload, an observer) must see what the
terminal shows now: the screen of a full-screen program (``top``, ``vi``), the colours, where the
cursor is, and the recent scrollback of a shell. Replaying raw recent output cannot do that (it
starts in the middle of a redraw, or shows a screen the program has since cleared), so each
session feeds its output into a terminal emulator, `pyte <https://github.com/selectel/pyte>`_,
and a new client receives the emulator's current state rendered as ANSI that rebuilds it.

pyte is pure Python and much slower than the terminal stream (a flood runs at tens of MB/s), so
output is never fed on the hot path: :meth:`ScreenModel.feed` only queues it (a bounded queue: of a
flood only the last ``replay_buffer_size`` characters matter for the final screen). All the models
of a process are worked off by one scheduler, in steps of at most ``STEP_TIME``, that together take
at most ``MODELS_DUTY`` of the event loop's time, each model within its own CPU budget
(``MODEL_CPU_SHARE``): one session's output cannot take another session's latency, however expensive
it is to emulate. Every unit of work is small (a slice of output, a few dozen cells of a line
rendered), so that no step overruns: lines that scroll off the screen are kept as they are and
rendered later, newest first, only as far as the scrollback's character budget reaches. Nothing the
program writes can make the model grow without bound either: parameters and unterminated escape
sequences are bounded, the scrollback is bounded in rendered characters, and the operations of pyte
that touch every cell of the screen for a few bytes of input are replaced by ones that cost one step
per line."""

from __future__ import annotations

import asyncio
import collections
import copy
import functools
import logging
import re
import time
import typing as t
import weakref

import pyte
from pyte import graphics, modes

#: The largest screen the model keeps; a larger terminal is modelled in its top-left part.
MAX_MODEL_ROWS = 150
MAX_MODEL_COLS = 400
#: Characters fed to pyte in one unit of work (the deadline is checked between units).
SLICE = 128
#: Cells rendered in one unit of work.
RENDER_CHUNK = 32
#: The longest step (seconds) the scheduler gives one model before the event loop runs again.
STEP_TIME = 0.001
#: The share of the event loop's time all the models of a process take together, at most;
#: more while a client waits for a screen (a reload, an observer).
MODELS_DUTY = 0.3
URGENT_DUTY = 1.0
#: The CPU time (seconds per second) one model may take, and how much of it it may save up
#: (so that a session that was quiet gets a client's screen ready at once).
MODEL_CPU_SHARE = 0.25
MODEL_CPU_BURST = 0.5
#: Output must pause this long (seconds) before queued output is fed to the model.
QUIET_TIME = 0.05
#: How long (seconds) a snapshot may spend catching up with queued output; what is left then is
#: sent raw after the snapshot (it is the most recent output, so the terminal ends up the same).
CATCH_UP_TIME = 1.0
#: An escape sequence longer than this (an endless title, a million parameters) is abandoned.
MAX_SEQUENCE = 4096
#: The scrollback keeps (and a snapshot sends) at most this many rendered characters of lines,
#: the newest ones: a bound in characters, as a line of cells that each change colour renders
#: to some 60 characters per cell.
SCROLLBACK_CHARS = 32 * 1024
#: (The former name of ``SCROLLBACK_CHARS``.)
SNAPSHOT_SCROLLBACK_CHARS = SCROLLBACK_CHARS

#: Estimated bytes of one pyte cell on a screen (its slot in a line, and a cell of its own:
#: a screen whose every cell has other colours shares none), and of one character of rendered
#: scrollback; measured by tests/test_screen.py's worst case.
PYTE_CELL_BYTES = 360
PYTE_SCROLLBACK_CHAR_BYTES = 4

_ALT_SCREEN_MODES = {47, 1047, 1049}
#: Private modes whose pyte implementation rewrites every cell (reverse video) or resizes the
#: screen (132 columns, which xterm.js ignores): tracked as flags only.
_FLAG_ONLY_MODES = {modes.DECSCNM, modes.DECCOLM}
_PRIVATE_MODE = re.compile(r"\x1b\[\?([0-9;]{1,64})([hl])")
#: Modes worth carrying over from output that was dropped unseen (the alternate screen,
#: cursor visibility, autowrap, origin mode, application keys, mouse and paste modes).
_CARRIED_MODES = {1, 6, 7, 25, 47, 1000, 1002, 1003, 1006, 1047, 1049, 2004}

_FG_CODES = {name: code for code, name in graphics.FG_ANSI.items()} | {
    name: code for code, name in graphics.FG_AIXTERM.items()
}
_BG_CODES = {name: code for code, name in graphics.BG_ANSI.items()} | {
    name: code for code, name in graphics.BG_AIXTERM.items()
}
#: Zero-width characters that are not combining marks (zero-width space and joiners, variation
#: selectors, the BOM): pyte stops drawing the rest of its input at one of them, so they are
#: left out of what it is fed (the terminal itself still receives them).
_INVISIBLE = dict.fromkeys(
    [
        *range(0x200B, 0x2010),
        *range(0x2028, 0x202F),
        *range(0x2060, 0x2065),
        *range(0xFE00, 0xFE10),
        0xFEFF,
    ]
)
#: Characters one cell keeps (a base and its combining marks); a program writing a million
#: combining marks onto one cell would otherwise grow it, and pyte's normalisation of it,
#: without bound.
MAX_CELL_CHARS = 8
_HEX_COLOUR = re.compile(r"^[0-9a-fA-F]{6}$")
#: The 256-colour palette's colours (16-255) by pyte's hex value: pyte turns ``38;5;n`` into
#: RGB, and a terminal whose palette differs (a theme) must see the index again.
_PALETTE = {value: index for index, value in reversed(list(enumerate(graphics.FG_BG_256)))}
#: Which character set a pyte map is (by identity), for ``ESC ( <code>``.
_CHARSET_CODES = {id(table): code for code, table in pyte.charsets.MAPS.items()}
#: Control characters, left out of a title written back.
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_DEFAULT_ATTRS = pyte.screens.Char(" ")[1:]
#: Entries of the rendering caches (SGR sequences by attributes); past that they start again.
_CACHE_SIZE = 4096
_sgr_cache: dict[tuple[t.Any, ...], str] = {}

Line = pyte.screens.StaticDefaultDict[int, pyte.screens.Char]
#: Work done in units: a generator yields between units (``None``, or a future when the unit
#: runs elsewhere: the model waits for it) and returns its result at the end.
Job = t.Generator["asyncio.Future[t.Any] | None", None, t.Any]


def _colour(value: str, codes: dict[str, int], extended: int) -> str:
    code = codes.get(value)
    if code is not None:
        return str(code)
    index = _PALETTE.get(value)
    if index is not None and index >= 16:
        return f"{extended};5;{index}"
    if _HEX_COLOUR.match(value):
        red, green, blue = (int(value[i : i + 2], 16) for i in (0, 2, 4))
        return f"{extended};2;{red};{green};{blue}"
    return ""


def sgr(attrs: tuple[t.Any, ...]) -> str:
    """The SGR sequence that sets exactly ``attrs`` (a pyte ``Char`` without its data)."""
    cached = _sgr_cache.get(attrs)
    if cached is not None:
        return cached
    fg, bg, bold, italics, underscore, strikethrough, reverse, blink = attrs
    parts = ["0"]
    for flag, code in (
        (bold, "1"),
        (italics, "3"),
        (underscore, "4"),
        (blink, "5"),
        (reverse, "7"),
        (strikethrough, "9"),
    ):
        if flag:
            parts.append(code)
    if fg != "default":
        parts.append(_colour(fg, _FG_CODES, 38))
    if bg != "default":
        parts.append(_colour(bg, _BG_CODES, 48))
    sequence = "\x1b[" + ";".join(part for part in parts if part) + "m"
    if len(_sgr_cache) >= _CACHE_SIZE:
        _sgr_cache.clear()
    _sgr_cache[attrs] = sequence
    return sequence


def render_cells(
    line: t.Mapping[int, t.Any], columns: int, default: t.Any, limit: int | None = None
) -> Job:
    """Render one screen line as text with SGR sequences (trailing blanks left out), yielding
    every ``RENDER_CHUNK`` cells; the result is ``None`` once it is longer than ``limit``."""
    last = -1
    for x in sorted(line, reverse=True):
        cell = line[x]
        if x < columns and not (cell.data in " " and not cell.reverse and cell.bg == "default"):
            last = x
            break
    blank_default = default.data == " " and default[1:] == _DEFAULT_ATTRS
    if last < 0 and blank_default:
        return ""
    if last < 0:
        last = columns - 1
    out: list[str] = []
    size = 0
    current = _DEFAULT_ATTRS
    get = line.get
    for start in range(0, last + 1, RENDER_CHUNK):
        for x in range(start, min(start + RENDER_CHUNK, last + 1)):
            cell = get(x, default)
            data = cell.data
            if not data:
                continue  # the second half of a wide character
            attrs = cell[1:]
            if attrs != current:
                code = sgr(attrs)
                out.append(code)
                size += len(code)
                current = attrs
            out.append(data)
            size += len(data)
        if limit is not None and size > limit:
            return None
        yield None
    if current != _DEFAULT_ATTRS:
        out.append("\x1b[0m")
    return "".join(out)


def run(job: Job) -> t.Any:
    """Do all of ``job`` at once; its result."""
    while True:
        try:
            next(job)
        except StopIteration as done:
            return done.value


def render_line(line: t.Mapping[int, t.Any], columns: int, default: t.Any) -> str:
    """One screen line as text with SGR sequences; trailing blanks are left out."""
    text: str = run(render_cells(line, columns, default))
    return text


def parse_line(text: str, columns: int) -> Job:
    """The cells of a rendered line (``render_cells``' text), parsed in slices."""
    scratch = pyte.Screen(columns, 1)
    scratch.reset_mode(modes.DECAWM)  # a line rendered wider than the screen is cut, not wrapped
    stream = pyte.Stream(scratch)
    for start in range(0, len(text), SLICE):
        stream.feed(text[start : start + SLICE])
        yield None
    return scratch.buffer[0]


#: How many distinct cells (a character and its attributes) are shared at most; past that the
#: table starts again (cells already on screens stay as they are).
MAX_SHARED_CELLS = 16 * 1024
_shared_cells: dict[pyte.screens.Char, pyte.screens.Char] = {}


def _share(cell: pyte.screens.Char) -> pyte.screens.Char:
    """The one instance of ``cell``'s value (see :meth:`_ModelScreen.share_cells`)."""
    if len(_shared_cells) >= MAX_SHARED_CELLS:
        _shared_cells.clear()
    return _shared_cells.setdefault(cell, cell)


class Scrollback:
    """Lines scrolled off the top of the main screen, bounded in lines and rendered characters.

    A line that leaves the screen is kept as it is (a reference: no work on the scroll path);
    :meth:`settle` renders such lines later, in units, newest first and only as many as the
    character budget keeps (of lines that each render to 15 K characters, two).
    """

    def __init__(self, max_lines: int, max_chars: int = SCROLLBACK_CHARS) -> None:
        self.max_lines = max(max_lines, 0)
        self.max_chars = max_chars
        #: Rendered lines, oldest first, with their total length (each counted with its CRLF).
        self.lines: collections.deque[str] = collections.deque()
        self.chars = 0
        #: Lines that left the screen since, not yet rendered: (cells, columns), oldest first.
        self.raw: collections.deque[tuple[Line, int]] = collections.deque()

    def push(self, line: Line, columns: int) -> None:
        """A line left the screen (cheap: it is rendered by :meth:`settle`)."""
        if not self.max_lines:
            return
        self.raw.append((line, columns))
        if len(self.raw) > self.max_lines:
            self.raw.popleft()

    def clear(self) -> None:
        """Forget every line (ED 3, a reset)."""
        self.lines.clear()
        self.raw.clear()
        self.chars = 0

    def settle(self) -> Job:
        """Render the raw lines, newest first, until the budget is full; older ones are dropped.

        The caller adds no line meanwhile (it feeds no output while lines are raw).
        """
        fresh: list[str] = []
        room, count = self.max_chars, 0
        while self.raw:
            line, columns = self.raw[-1]
            text = yield from render_cells(line, columns, line.default, limit=room - 2)
            self.raw.pop()
            if text is None:
                break  # this line does not fit: older lines do not either
            fresh.append(text)
            room -= len(text) + 2
            count += 1
            if count >= self.max_lines or room <= 2:
                break
        if self.raw:
            self.raw.clear()
            self.lines.clear()
            self.chars = 0
        for text in reversed(fresh):
            self.lines.append(text)
            self.chars += len(text) + 2
        while self.lines and (len(self.lines) > self.max_lines or self.chars > self.max_chars):
            self.chars -= len(self.lines.popleft()) + 2

    def pull(self, columns: int) -> Job:
        """Take the newest line back (a terminal that grows shows it again): its cells, or
        ``None`` if there is none."""
        if self.raw:
            line, _ = self.raw.pop()
            for x in [x for x in line if x >= columns]:
                del line[x]
            return line
        if not self.lines:
            return None
        text = self.lines.pop()
        self.chars -= len(text) + 2
        return (yield from parse_line(text, columns))


class _ModelScreen(pyte.Screen):
    """A pyte screen with scrollback, an alternate screen, and bounded per-operation cost."""

    def __init__(self, columns: int, lines: int, scrollback_lines: int) -> None:
        self.scrollback = Scrollback(scrollback_lines)
        self.saved_main: tuple[t.Any, pyte.screens.Cursor] | None = None
        super().__init__(columns, lines)

    @property
    def alternate(self) -> bool:
        """Whether the alternate screen (full-screen programs) is shown."""
        return self.saved_main is not None

    def reset(self) -> None:
        """RIS: back to the main screen, everything cleared."""
        super().reset()
        self.saved_main = None

    def share_cells(self, deadline: float) -> None:
        """Make the cells of the lines changed since the last call shared instances, line by
        line until ``deadline`` (``time.perf_counter()``); the rest stays marked.

        pyte makes a new cell (about 120 bytes) for every character it draws, so a screen of
        text held some 1,900 of them per session; shared, a cell costs only its slot in its
        line. Done once the queued output is fed, not per character drawn (that doubled
        pyte's time), over the lines pyte marked dirty (nothing else here reads that mark).
        """
        dirty = self.dirty
        while dirty and time.perf_counter() < deadline:
            line = self.buffer.get(dirty.pop())
            if line:
                for x, cell in line.items():
                    line[x] = _share(cell)

    def _new_buffer(self) -> t.Any:
        return collections.defaultdict(
            lambda: pyte.screens.StaticDefaultDict[int, pyte.screens.Char](self.default_char)
        )

    def _new_line(self) -> Line:
        return pyte.screens.StaticDefaultDict[int, pyte.screens.Char](self.default_char)

    def index(self) -> None:
        """Scroll as pyte does, keeping the line that leaves the main screen (unrendered)."""
        top, bottom = self.margins or pyte.screens.Margins(0, self.lines - 1)
        if self.cursor.y == bottom and top == 0 and not self.alternate:
            self.scrollback.push(self.buffer[0], self.columns)
        super().index()

    def erase_in_display(self, how: int = 0, *args: t.Any, **kwargs: t.Any) -> None:
        """Erase as pyte does, but a whole line at a time (pyte writes every cell)."""
        del args, kwargs
        if how in (2, 3):
            interval = range(self.lines)
        elif how == 1:
            interval = range(self.cursor.y)
        else:
            interval = range(self.cursor.y + 1, self.lines)
        for y in interval:
            self.buffer[y] = pyte.screens.StaticDefaultDict(self.cursor.attrs)
        if how == 3:
            self.scrollback.clear()
        if how in (0, 1):
            self.erase_in_line(how)

    def bound_combining(self) -> None:
        """Cut the cell that combining marks attach to (left of the cursor) to a few characters."""
        x, y = self.cursor.x - 1, self.cursor.y
        if x < 0:
            x, y = self.columns - 1, y - 1
        if y < 0:
            return
        line = self.buffer[y]
        cell = line.get(x)
        if cell is not None and len(cell.data) > MAX_CELL_CHARS:
            line[x] = cell._replace(data=cell.data[:MAX_CELL_CHARS])

    #: The keypad sends application sequences (``ESC =``) rather than digits.
    keypad_application_mode = False

    def keypad_application(self) -> None:
        """DECKPAM."""
        self.keypad_application_mode = True

    def keypad_numeric(self) -> None:
        """DECKPNM."""
        self.keypad_application_mode = False

    def alignment_display(self) -> None:
        """DECALN (a screen of test ``E``\\ s), one line at a time: a line whose every cell,
        written or not, is an ``E`` (pyte writes every cell)."""
        self.margins = None
        self.cursor_position()
        letter = self.default_char._replace(data="E")
        for y in range(self.lines):
            self.buffer[y] = pyte.screens.StaticDefaultDict(letter)

    def save_cursor(self) -> None:
        """DECSC: one saved cursor, as in xterm (pyte keeps a stack of them, without bound)."""
        super().save_cursor()
        del self.savepoints[:-1]

    def restore_cursor(self) -> None:
        """DECRC: the saved cursor stays saved (it can be restored again, as in xterm)."""
        if self.savepoints:
            saved = self.savepoints[-1]
            kept = saved._replace(cursor=copy.copy(saved.cursor))
            super().restore_cursor()
            self.cursor = copy.copy(self.cursor)
            self.savepoints.append(kept)

    def resize(self, lines: int | None = None, columns: int | None = None) -> None:
        """Resize at once (see :meth:`resize_job`)."""
        run(self.resize_job(lines or self.lines, columns or self.columns))

    def resize_job(self, lines: int, columns: int) -> Job:
        """Resize as xterm.js does, in units of work.

        pyte drops lines from the top when a screen shrinks and adds blank ones at the bottom
        when it grows, so that a shell's screen after a window was made smaller and larger
        again showed blank rows where xterm.js (the browser's terminal) brings the lines back.
        Like xterm.js: a shrinking screen first drops rows below the cursor, then moves lines
        from its top into the scrollback; a growing one brings lines back from the scrollback
        while the cursor is on its last row, else adds blank rows below.
        """
        if (lines, columns) == (self.lines, self.columns):
            return
        if self.saved_main is not None:
            buffer, cursor = self.saved_main
            yield from self._resize_buffer(buffer, cursor, lines, columns, scrollback=False)
            yield from self._resize_buffer(
                self.buffer, self.cursor, lines, columns, scrollback=False
            )
        else:
            yield from self._resize_buffer(
                self.buffer, self.cursor, lines, columns, scrollback=True
            )
        if columns < self.columns:
            for buffer in (self.buffer, *(self.saved_main or ())[:1]):
                for line in buffer.values():
                    for x in [x for x in line if x >= columns]:
                        del line[x]
                    yield None
        self.lines, self.columns = lines, columns
        self.dirty.update(range(lines))
        self.set_margins()
        self.cursor.x = min(self.cursor.x, columns - 1)

    def _resize_buffer(
        self,
        buffer: dict[int, Line],
        cursor: pyte.screens.Cursor,
        lines: int,
        columns: int,
        *,
        scrollback: bool,
    ) -> Job:
        rows = [buffer.get(y) for y in range(self.lines)]
        y = min(cursor.y, self.lines - 1)
        while len(rows) > lines:
            if len(rows) - 1 > y:
                rows.pop()  # a row below the cursor
            else:
                top = rows.pop(0)
                if scrollback:
                    self.scrollback.push(top if top is not None else self._new_line(), self.columns)
                y -= 1
        if scrollback and len(rows) < lines and y == len(rows) - 1:
            yield from self.scrollback.settle()
        while len(rows) < lines:
            line = None
            if scrollback and y == len(rows) - 1:
                line = yield from self.scrollback.pull(columns)
            if line is None:
                rows.append(None)
            else:
                rows.insert(0, line)
                y += 1
        buffer.clear()
        for index, row in enumerate(rows):
            if row is not None:
                buffer[index] = row
        cursor.y = max(y, 0)

    def set_mode(self, *modes_: int, **kwargs: t.Any) -> None:
        """Set modes; the alternate screen modes switch buffers (pyte only records them)."""
        self._modes(modes_, kwargs.get("private", False), on=True)

    def reset_mode(self, *modes_: int, **kwargs: t.Any) -> None:
        """Reset modes; leaving the alternate screen restores the main one."""
        self._modes(modes_, kwargs.get("private", False), on=False)

    def _modes(self, numbers: tuple[int, ...], private: bool, *, on: bool) -> None:
        rest = []
        for number in numbers:
            if private and number in _ALT_SCREEN_MODES:
                self._switch_screen(number, on=on)
            elif private and number << 5 in _FLAG_ONLY_MODES:
                if on:
                    self.mode.add(number << 5)
                else:
                    self.mode.discard(number << 5)
            else:
                rest.append(number)
        if rest:
            change = super().set_mode if on else super().reset_mode
            if private:
                change(*rest, private=True)
            else:
                change(*rest)

    def _switch_screen(self, number: int, *, on: bool) -> None:
        if on and self.saved_main is None:
            cursor = pyte.screens.Cursor(self.cursor.x, self.cursor.y, self.cursor.attrs)
            cursor.hidden = self.cursor.hidden
            self.saved_main = (self.buffer, cursor)
            self.buffer = self._new_buffer()
        elif not on and self.saved_main is not None:
            self.buffer, cursor = self.saved_main
            self.saved_main = None
            if number == 1049:
                self.cursor.x = min(cursor.x, self.columns)
                self.cursor.y = min(cursor.y, self.lines - 1)
                self.cursor.attrs = cursor.attrs


class _Scheduler:
    """Works off the screen models of one event loop: one model at a time, for at most
    ``STEP_TIME``, round robin, then a pause that keeps all the models together within
    ``MODELS_DUTY`` of the loop's time; a model that used up its own CPU budget waits for it."""

    def __init__(self) -> None:
        self._ready: collections.deque[ScreenModel] = collections.deque()
        self._urgent: collections.deque[ScreenModel] = collections.deque()
        self._task: asyncio.Task[None] | None = None

    def want(self, model: ScreenModel, *, urgent: bool = False) -> None:
        """``model`` has work (a client waits for it, if ``urgent``)."""
        if urgent:
            if model not in self._urgent:
                self._urgent.append(model)
        elif model not in self._ready and model not in self._urgent:
            self._ready.append(model)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        """Step the models that have work; ends when none has (``want`` starts it again)."""
        loop = asyncio.get_running_loop()
        while self._urgent or self._ready:
            queue = self._urgent if self._urgent else self._ready
            model = queue.popleft()
            wait = model.credit_wait()
            if wait > 0:
                # Out of budget: it comes back when it has some again.
                loop.call_later(
                    wait, functools.partial(self.want, model, urgent=queue is self._urgent)
                )
                continue
            started, cpu = time.perf_counter(), time.thread_time()
            more = model.step(started + STEP_TIME)
            # CPU time, not wall time: on a busy machine the step may have waited for a core,
            # which took nothing from this loop's other tasks.
            spent = time.thread_time() - cpu
            model.charge(spent)
            if more:
                queue.append(model)
            duty = URGENT_DUTY if queue is self._urgent else MODELS_DUTY
            await asyncio.sleep(spent * (1 - duty) / duty)


_schedulers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Scheduler] = (
    weakref.WeakKeyDictionary()
)


def _scheduler() -> _Scheduler:
    loop = asyncio.get_running_loop()
    scheduler = _schedulers.get(loop)
    if scheduler is None:
        scheduler = _schedulers[loop] = _Scheduler()
    return scheduler


class _ModelStream(pyte.Stream):
    """pyte's parser, also dispatching the keypad modes (``ESC =``, ``ESC >``: set by vim, less,
    top, htop and tmux), which pyte ignores."""

    escape = {  # noqa: RUF012 - pyte's interface: the class's table of escapes
        **pyte.Stream.escape,
        "=": "keypad_application",
        ">": "keypad_numeric",
    }


class ScreenBudget:
    """A bound on the memory of all the screen models of a server (``screen_memory_limit``).

    Each model reports its estimated size as it changes (:meth:`update`, cheap: a running
    total). Past the limit, models give up their scrollback, the largest of those with no
    recent output first, until the total is under the limit again; such a model keeps no
    scrollback from then on (a client attaching to it gets only the visible screen). What is
    left is the models' visible screens and queues, bounded per model (``MAX_MODEL_ROWS`` x
    ``MAX_MODEL_COLS``, ``replay_buffer_size``).
    """

    def __init__(self, limit: int, log: logging.Logger | None = None) -> None:
        #: The limit, in bytes of estimated model memory.
        self.limit = limit
        self.total = 0
        self._sizes: weakref.WeakKeyDictionary[ScreenModel, int] = weakref.WeakKeyDictionary()
        self._log = log
        self._warned = False

    def update(self, model: ScreenModel, size: int) -> None:
        """``model`` is now estimated at ``size`` bytes (0: it is gone)."""
        self.total += size - self._sizes.pop(model, 0)
        if size:
            self._sizes[model] = size
        if self.total > self.limit:
            self._trim()

    def _trim(self) -> None:
        now = time.monotonic()
        # Idle models first (no output for a while), then the largest.
        order = sorted(
            self._sizes.items(),
            key=lambda item: (now - item[0].last_output < QUIET_TIME, -item[1]),
        )
        for model, size in order:
            if self.total <= self.limit:
                break
            dropped = model.drop_scrollback()
            smaller = model.memory_estimate()
            self.total += smaller - size
            self._sizes[model] = smaller
            if dropped and not self._warned:
                self._warned = True
                if self._log is not None:
                    self._log.warning(
                        "Screen models use more than screen_memory_limit (%.0f MiB): sessions "
                        "drop their scrollback (a reattaching client sees only the screen)",
                        self.limit / 2**20,
                    )


class ScreenModel:
    """What one terminal shows: fed its output cheaply, rendered for a client that attaches.

    ``feed`` and ``resize`` only queue; the scheduler works the queue off the hot path (see
    the module docstring). The queue holds at most ``replay_buffer_size`` characters: older
    output that was never fed is dropped, except the modes it switched (alternate screen,
    cursor visibility...). The emulator behind it is a subclass's (:class:`PyteScreenModel`,
    :class:`~jupyter_tool_terminal.screen_ghostty.GhosttyScreenModel`;
    :func:`~jupyter_tool_terminal.screens.new_model`
    chooses).
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

    def _quiet_check(self) -> None:
        self._timer = None
        if self.closed:
            return
        waited = time.monotonic() - self._last_feed
        if waited < QUIET_TIME:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(QUIET_TIME - waited, self._quiet_check)
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
                    if not self._waiting and time.monotonic() - self._last_feed < QUIET_TIME:
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
        item = queue[0]
        if isinstance(item, tuple):
            queue.popleft()
            self._job = self._resize_job(*item)
            return
        size = self.slice_chars
        piece = item[:size]
        if len(item) > size:
            queue[0] = item[size:]
        else:
            queue.popleft()
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


class PyteScreenModel(ScreenModel):
    """The screen model on `pyte <https://github.com/selectel/pyte>`_ (pure Python, every
    platform): the fallback where pyghostty has no wheel."""

    backend = "pyte"

    def _open_emulator(self, rows: int, cols: int) -> None:
        self._screen = _ModelScreen(cols, rows, self.scrollback_lines)
        self._stream = _ModelStream(self._screen)
        # pyte honours the character set designations (DEC line drawing: ``ESC ( 0``) only
        # outside its UTF-8 mode; the text it is fed is decoded already, so that mode only
        # decides this.
        self._stream.use_utf8 = False
        self._in_sequence = 0

    def _feed_text(self, text: str) -> None:
        stream = self._stream
        try:
            stream.feed(text.translate(_INVISIBLE))
        except Exception:  # noqa: BLE001 - a sequence pyte cannot take must not end the model
            # (pyte resets its parser itself; the sequence is lost, as in a real terminal)
            self._in_sequence = 0
            return
        if stream._taking_plain_text:
            self._in_sequence = 0
        else:
            # Inside an escape sequence: an endless one (a title without its end, a million
            # parameters) would grow pyte's parser state without bound.
            start = text.rfind("\x1b")
            self._in_sequence = len(text) - start if start >= 0 else self._in_sequence + len(text)
            if self._in_sequence > MAX_SEQUENCE:
                stream._initialize_parser()
                self._in_sequence = 0
        self._screen.bound_combining()

    def _resize_job(self, rows: int, cols: int) -> Job:
        return self._screen.resize_job(rows, cols)

    def _settle(self) -> Job | None:
        # Lines that scrolled off are rendered before more output can push others.
        return self._screen.scrollback.settle() if self._screen.scrollback.raw else None

    def _tidy(self, deadline: float) -> bool:
        if not self._screen.dirty:
            return False
        self._screen.share_cells(deadline)
        return True

    def memory_estimate(self) -> int:
        screen = self._screen
        buffers = [screen.buffer] + ([screen.saved_main[0]] if screen.saved_main else [])
        cells = sum(len(line) for buffer in buffers for line in buffer.values())
        cells += sum(len(line) for line, _ in screen.scrollback.raw)
        scrollback = screen.scrollback.chars * PYTE_SCROLLBACK_CHAR_BYTES
        return super().memory_estimate() + cells * PYTE_CELL_BYTES + scrollback

    def drop_scrollback(self) -> bool:
        scrollback = self._screen.scrollback
        had = bool(scrollback.lines or scrollback.raw)
        scrollback.clear()
        scrollback.max_lines = 0
        super().drop_scrollback()
        return had

    @property
    def alternate(self) -> bool:
        return self._screen.alternate

    @property
    def dimensions(self) -> tuple[int, int]:
        return self._screen.lines, self._screen.columns

    def display(self) -> list[str]:
        return list(self._screen.display)

    @property
    def cursor(self) -> tuple[int, int]:
        return self._screen.cursor.x, self._screen.cursor.y

    def _render(self) -> Job:
        screen = self._screen
        out = ["\x1b[0m"]
        history = list(screen.scrollback.lines)
        out.extend(line + "\r\n" for line in history)
        if screen.saved_main is not None:
            main, main_cursor = screen.saved_main
            out.append((yield from self._render_lines(main, whole=bool(history))))
            out.append(f"\x1b[{main_cursor.y + 1};{main_cursor.x + 1}H\x1b[?1049h\x1b[H\x1b[2J")
            out.append((yield from self._render_lines(screen.buffer, whole=False)))
        else:
            out.append((yield from self._render_lines(screen.buffer, whole=bool(history))))
        out.append(self._render_state())
        return "".join(out)

    def _render_lines(self, buffer: t.Mapping[int, t.Any], *, whole: bool) -> Job:
        """The lines of a screen buffer, in units."""
        screen = self._screen
        lines = []
        for y in range(screen.lines):
            if y in buffer:
                lines.append(
                    (yield from render_cells(buffer[y], screen.columns, buffer[y].default))
                )
            else:
                lines.append("")
        if not whole:
            while lines and not lines[-1]:
                lines.pop()
        return "\r\n".join(lines)

    def _render_state(self) -> str:
        screen = self._screen
        columns = screen.columns
        out = []
        if screen.savepoints:
            # The saved cursor (DECSC) and its pen, saved again where it was.
            saved = screen.savepoints[-1].cursor
            out.append(f"\x1b[{saved.y + 1};{min(saved.x, columns - 1) + 1}H")
            out.append(f"{sgr(saved.attrs[1:])}\x1b7\x1b[0m")
        title = _CONTROLS.sub("", screen.title)
        if title:
            out.append(f"\x1b]2;{title}\x07")
        for designate, charset in (("(", screen.g0_charset), (")", screen.g1_charset)):
            code = _CHARSET_CODES.get(id(charset), "B")
            if code != "B":
                out.append(f"\x1b{designate}{code}")
        if screen.charset:
            out.append("\x0e")  # SO: G1 is in use
        if screen.keypad_application_mode:
            out.append("\x1b=")
        if screen.margins is not None:
            out.append(f"\x1b[{screen.margins.top + 1};{screen.margins.bottom + 1}r")
        for mode in sorted(screen.mode):
            if mode >= 32 and mode % 32 == 0 and mode not in (modes.DECTCEM, modes.DECAWM):
                out.append(f"\x1b[?{mode >> 5}h")
            elif mode in (modes.IRM, modes.LNM):
                out.append(f"\x1b[{mode}h")
        if modes.DECAWM not in screen.mode:
            out.append("\x1b[?7l")
        # With origin mode on, rows count from the scroll region's top.
        top = screen.margins.top if screen.margins and modes.DECOM in screen.mode else 0
        row = screen.cursor.y - top + 1
        if screen.cursor.x >= columns and modes.DECAWM in screen.mode:
            # Pending wrap (a character was written in the last column): written again, the
            # last cell leaves the terminal in the same state, so the next character wraps.
            line = screen.buffer[screen.cursor.y]
            x = columns - 1
            if not line[x].data and x > 0:
                x -= 1  # the second half of a wide character
            cell = line[x]
            out.append(f"\x1b[{row};{x + 1}H{sgr(cell[1:])}{cell.data or ' '}\x1b[0m")
        else:
            out.append(f"\x1b[{row};{min(screen.cursor.x, columns - 1) + 1}H")
        if screen.cursor.attrs[1:] != _DEFAULT_ATTRS:
            out.append(sgr(screen.cursor.attrs[1:]))
        if screen.cursor.hidden or modes.DECTCEM not in screen.mode:
            out.append("\x1b[?25l")
        return "".join(out)

    @property
    def screen(self) -> pyte.Screen:
        """The pyte screen (after :meth:`snapshot` it reflects all output fed so far)."""
        return self._screen
