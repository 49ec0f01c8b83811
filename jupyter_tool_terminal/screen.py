"""A server-side picture of a session's terminal, so that a reattaching client sees its screen.

A client that connects to a running session (a page reload, an observer) must see what the
terminal shows now: the screen of a full-screen program (``top``, ``vi``), the colours, where the
cursor is, and the recent scrollback of a shell. Replaying raw recent output cannot do that (it
starts in the middle of a redraw, or shows a screen the program has since cleared), so each
session feeds its output into a terminal emulator, `pyte <https://github.com/selectel/pyte>`_,
and a new client receives the emulator's current state rendered as ANSI that rebuilds it.

pyte is pure Python and much slower than the terminal stream (a flood runs at tens of MB/s), so
output is never fed on the hot path: :meth:`ScreenModel.feed` only queues it (a bounded queue:
of a flood only the last ``lookback`` characters matter for the final screen), and the queue is
worked off in small time-boxed slices once the output pauses, or when a client attaches.
Nothing the program writes can make the model grow without bound or hold the event loop:
slices are short, parameters and unterminated escape sequences are bounded, and the
operations of pyte that touch every cell of the screen for a few bytes of input are replaced
by ones that cost one step per line.
"""

from __future__ import annotations

import asyncio
import collections
import re
import time
import typing as t

import pyte
from pyte import graphics, modes

#: The largest screen the model keeps; a larger terminal is modelled in its top-left part.
MAX_MODEL_ROWS = 150
MAX_MODEL_COLS = 400
#: Characters fed to pyte in one step; the event loop gets control back between batches.
SLICE = 128
#: A batch of slices stops once it took this long (seconds).
BATCH_TIME = 0.003
#: Output must pause this long (seconds) before queued output is fed to the model.
QUIET_TIME = 0.05
#: How long (seconds) a snapshot may spend catching up with queued output; what is left then is
#: sent raw after the snapshot (it is the most recent output, so the terminal ends up the same).
CATCH_UP_TIME = 1.0
#: An escape sequence longer than this (an endless title, a million parameters) is abandoned.
MAX_SEQUENCE = 4096
#: The snapshot's scrollback is cut (oldest lines first) to stay within this many characters.
SNAPSHOT_SCROLLBACK_CHARS = 32 * 1024

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
_DEFAULT_ATTRS = pyte.screens.Char(" ")[1:]


def _colour(value: str, codes: dict[str, int], extended: int) -> str:
    code = codes.get(value)
    if code is not None:
        return str(code)
    if _HEX_COLOUR.match(value):
        red, green, blue = (int(value[i : i + 2], 16) for i in (0, 2, 4))
        return f"{extended};2;{red};{green};{blue}"
    return ""


def sgr(attrs: tuple[t.Any, ...]) -> str:
    """The SGR sequence that sets exactly ``attrs`` (a pyte ``Char`` without its data)."""
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
    return "\x1b[" + ";".join(part for part in parts if part) + "m"


def render_line(line: t.Mapping[int, t.Any], columns: int, default: t.Any) -> str:
    """One screen line as text with SGR sequences; trailing blanks are left out."""
    last = -1
    for x in sorted(line, reverse=True):
        cell = line[x]
        if x < columns and not (cell.data in " " and not cell.reverse and cell.bg == "default"):
            last = x
            break
    blank_default = default[1:] == _DEFAULT_ATTRS
    if last < 0 and blank_default:
        return ""
    if last < 0:
        last = columns - 1
    out: list[str] = []
    current = _DEFAULT_ATTRS
    get = line.get
    for x in range(last + 1):
        cell = get(x, default)
        if not cell.data:
            continue  # the second half of a wide character
        attrs = cell[1:]
        if attrs != current:
            out.append(sgr(attrs))
            current = attrs
        out.append(cell.data)
    if current != _DEFAULT_ATTRS:
        out.append("\x1b[0m")
    return "".join(out)


#: How many distinct cells (a character and its attributes) are shared at most; past that the
#: table starts again (cells already on screens stay as they are).
MAX_SHARED_CELLS = 16 * 1024
_shared_cells: dict[pyte.screens.Char, pyte.screens.Char] = {}


def _share(cell: pyte.screens.Char) -> pyte.screens.Char:
    """The one instance of ``cell``'s value (see :meth:`_ModelScreen.share_cells`)."""
    if len(_shared_cells) >= MAX_SHARED_CELLS:
        _shared_cells.clear()
    return _shared_cells.setdefault(cell, cell)


class _ModelScreen(pyte.Screen):
    """A pyte screen with scrollback, an alternate screen, and bounded per-operation cost."""

    def __init__(self, columns: int, lines: int, scrollback_lines: int) -> None:
        #: Lines scrolled off the top of the main screen, already rendered (compact).
        self.scrollback: collections.deque[str] = collections.deque(maxlen=scrollback_lines)
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

    def index(self) -> None:
        """Scroll as pyte does, keeping the line that leaves the main screen."""
        top, bottom = self.margins or pyte.screens.Margins(0, self.lines - 1)
        if self.cursor.y == bottom and top == 0 and not self.alternate:
            line = self.buffer[0]
            self.scrollback.append(render_line(line, self.columns, line.default))
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

    def alignment_display(self) -> None:
        """Ignore DECALN (a screen of test ``E``\\ s): a stream of them costs a screen each."""

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


class ScreenModel:
    """What one terminal shows: fed its output cheaply, rendered for a client that attaches.

    ``feed`` and ``resize`` only queue; pyte works the queue off the hot path (see the module
    docstring). The queue holds at most ``lookback`` characters: older output that was never
    fed is dropped, except the modes it switched (alternate screen, cursor visibility...).
    """

    def __init__(
        self, rows: int = 24, cols: int = 80, *, scrollback_lines: int, lookback: int
    ) -> None:
        self._screen = _ModelScreen(
            min(cols, MAX_MODEL_COLS), min(rows, MAX_MODEL_ROWS), scrollback_lines
        )
        self._stream = pyte.Stream(self._screen)
        self._lookback = max(lookback, 1)
        self._queue: collections.deque[str | tuple[int, int]] = collections.deque()
        self._queued = 0
        self._in_sequence = 0
        self._last_feed = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._worker: asyncio.Task[None] | None = None
        self._busy = asyncio.Lock()
        self.closed = False

    # -- input ----------------------------------------------------------------------------

    def feed(self, text: str) -> None:
        """Queue output for the model (cheap: called for every piece of output)."""
        self._queue.append(text)
        self._queued += len(text)
        if self._queued > self._lookback:
            self._drop_oldest()
        self._last_feed = time.monotonic()
        if self._timer is None and not self.closed:
            self._timer = asyncio.get_running_loop().call_later(QUIET_TIME, self._quiet_check)

    def resize(self, rows: int, cols: int) -> None:
        """The terminal's size changed (queued: output before it was for the old size)."""
        self._queue.append((min(rows, MAX_MODEL_ROWS), min(cols, MAX_MODEL_COLS)))

    def close(self) -> None:
        """Stop working: the session ended."""
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._worker is not None:
            self._worker.cancel()
        self._queue.clear()
        self._queued = 0

    def _drop_oldest(self) -> None:
        """Drop queued output beyond ``lookback``; keep the modes it switched."""
        carried: dict[int, str] = {}
        size: tuple[int, int] | None = None
        while self._queued > self._lookback:
            item = self._queue.popleft()
            if isinstance(item, tuple):
                size = item
                continue
            excess = self._queued - self._lookback
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
        elif self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work_off())

    async def _work_off(self) -> None:
        async with self._busy:
            while (self._queue or self._screen.dirty) and not self.closed:
                if time.monotonic() - self._last_feed < QUIET_TIME:
                    # Output resumed: wait for the next pause (feed armed the timer).
                    return
                self._process(BATCH_TIME)
                await asyncio.sleep(0)

    def _process(self, budget: float) -> None:
        """Feed queued output to pyte for about ``budget`` seconds."""
        deadline = time.perf_counter() + budget
        queue = self._queue
        while queue and time.perf_counter() < deadline:
            item = queue[0]
            if isinstance(item, tuple):
                queue.popleft()
                self._screen.resize(*item)
                continue
            piece = item[:SLICE]
            if len(item) > SLICE:
                queue[0] = item[SLICE:]
            else:
                queue.popleft()
            self._queued -= len(piece)
            self._feed_pyte(piece)
        if not queue:
            self._screen.share_cells(deadline)

    def _feed_pyte(self, text: str) -> None:
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

    # -- output ---------------------------------------------------------------------------

    async def snapshot(self) -> str:
        """ANSI text that turns a blank terminal into the current one.

        Catches up with queued output (in slices, for at most ``CATCH_UP_TIME``); whatever is
        still queued after that follows the rendered screen raw. The caller must attach the
        client before awaiting anything else, so that no output falls between the two.
        """
        async with self._busy:
            deadline = time.monotonic() + CATCH_UP_TIME
            while self._queue and time.monotonic() < deadline and not self.closed:
                self._process(BATCH_TIME)
                await asyncio.sleep(0)
            rendered = await self._render()
            rest = "".join(item for item in self._queue if isinstance(item, str))
        return rendered + rest

    async def _render(self) -> str:
        screen = self._screen
        out = ["\x1b[0m"]
        history: list[str] = []
        budget = SNAPSHOT_SCROLLBACK_CHARS
        for line in reversed(screen.scrollback):
            budget -= len(line) + 2
            if budget < 0:
                break
            history.append(line)
        history.reverse()
        out.extend(line + "\r\n" for line in history)
        if screen.saved_main is not None:
            main, main_cursor = screen.saved_main
            out.append(await self._render_lines(main, whole=bool(history)))
            out.append(f"\x1b[{main_cursor.y + 1};{main_cursor.x + 1}H\x1b[?1049h\x1b[H\x1b[2J")
            out.append(await self._render_lines(screen.buffer, whole=False))
        else:
            out.append(await self._render_lines(screen.buffer, whole=bool(history)))
        out.append(self._render_state())
        return "".join(out)

    async def _render_lines(self, buffer: t.Mapping[int, t.Any], *, whole: bool) -> str:
        """The lines of a screen buffer; a large screen is rendered in several steps."""
        screen = self._screen
        lines = []
        deadline = time.perf_counter() + BATCH_TIME
        for y in range(screen.lines):
            lines.append(
                render_line(buffer[y], screen.columns, buffer[y].default) if y in buffer else ""
            )
            if time.perf_counter() > deadline:
                await asyncio.sleep(0)  # the lock holds the screen still meanwhile
                deadline = time.perf_counter() + BATCH_TIME
        if not whole:
            while lines and not lines[-1]:
                lines.pop()
        return "\r\n".join(lines)

    def _render_state(self) -> str:
        screen = self._screen
        out = []
        if screen.margins is not None:
            out.append(f"\x1b[{screen.margins.top + 1};{screen.margins.bottom + 1}r")
        for mode in sorted(screen.mode):
            if mode >= 32 and mode % 32 == 0 and mode not in (modes.DECTCEM, modes.DECAWM):
                out.append(f"\x1b[?{mode >> 5}h")
            elif mode in (modes.IRM, modes.LNM):
                out.append(f"\x1b[{mode}h")
        if modes.DECAWM not in screen.mode:
            out.append("\x1b[?7l")
        out.append(f"\x1b[{screen.cursor.y + 1};{min(screen.cursor.x, screen.columns - 1) + 1}H")
        if screen.cursor.attrs[1:] != _DEFAULT_ATTRS:
            out.append(sgr(screen.cursor.attrs[1:]))
        if screen.cursor.hidden or modes.DECTCEM not in screen.mode:
            out.append("\x1b[?25l")
        return "".join(out)

    # -- inspection (tests, memory reports) ---------------------------------------------------

    @property
    def screen(self) -> pyte.Screen:
        """The pyte screen (after :meth:`snapshot` it reflects all output fed so far)."""
        return self._screen

    @property
    def queued(self) -> int:
        """Characters of output queued and not yet fed to the model."""
        return self._queued
