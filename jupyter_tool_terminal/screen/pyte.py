"""The screen model on `pyte <https://github.com/selectel/pyte>`_ (pure Python, every platform):
the fallback where pyghostty has no wheel.

pyte is much slower than the terminal stream (a few MB/s; a flood runs at tens), so it is fed in
small units by the scheduler. Every unit of work is small (a slice of output, a few dozen cells of
a line rendered), so that no step overruns: lines that scroll off the screen are kept as they are
and rendered later (:class:`~.sgr.Scrollback`). Nothing the program writes can make the model grow
without bound either: parameters and unterminated escape sequences are bounded, the scrollback is
bounded in rendered characters, and the operations of pyte that touch every cell of the screen for
a few bytes of input are replaced by ones that cost one step per line.
"""

from __future__ import annotations

import collections
import copy
import re
import time
import typing as t

import pyte
from pyte import modes
from wcwidth import wcwidth

from .base import ScreenModel
from .scheduler import Job, run
from .sgr import DEFAULT_ATTRS, Line, Scrollback, render_cells, sgr

#: An escape sequence longer than this (an endless title, a million parameters) is abandoned.
MAX_SEQUENCE = 4096
#: Estimated bytes of one pyte cell on a screen (its slot in a line, and a cell of its own:
#: a screen whose every cell has other colours shares none), and of one character of rendered
#: scrollback; measured by tests/screen/test_screen.py's worst case.
PYTE_CELL_BYTES = 360
PYTE_SCROLLBACK_CHAR_BYTES = 4

_ALT_SCREEN_MODES = {47, 1047, 1049}
#: Private modes whose pyte implementation rewrites every cell (reverse video) or resizes the
#: screen (132 columns, which xterm.js ignores): tracked as flags only.
_FLAG_ONLY_MODES = {modes.DECSCNM, modes.DECCOLM}
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
#: Which character set a pyte map is (by identity), for ``ESC ( <code>``.
_CHARSET_CODES = {id(table): code for code, table in pyte.charsets.MAPS.items()}
#: Control characters, left out of a title written back.
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


#: How many distinct cells (a character and its attributes) are shared at most; past that the
#: table starts again (cells already on screens stay as they are).
MAX_SHARED_CELLS = 16 * 1024
_shared_cells: dict[pyte.screens.Char, pyte.screens.Char] = {}


class ConcealedChar(pyte.screens.Char):
    """A cell drawn concealed (SGR 8): pyte's cell has no such attribute, so the cell's class
    says it (``_replace``, which pyte draws with, keeps the class)."""

    __slots__ = ()


def _concealed_after(attrs: tuple[int, ...], concealed: bool) -> bool:
    """Whether text is drawn concealed after the SGR sequence ``attrs`` (the colour arguments
    of 38, 48 and 58 are skipped: an 8 there is a colour)."""
    if not attrs:
        return False
    index = 0
    while index < len(attrs):
        attr = attrs[index]
        if attr in (38, 48, 58):
            kind = attrs[index + 1] if index + 1 < len(attrs) else None
            index += {5: 3, 2: 5}.get(kind or 0, 2)
            continue
        if attr in (0, 28):
            concealed = False
        elif attr == 8:
            concealed = True
        index += 1
    return concealed


def _share(cell: pyte.screens.Char) -> pyte.screens.Char:
    """The one instance of ``cell``'s value (see :meth:`_ModelScreen.share_cells`)."""
    if type(cell) is ConcealedChar:
        return cell  # (equal to the plain cell of its value: it would be taken for it)
    if len(_shared_cells) >= MAX_SHARED_CELLS:
        _shared_cells.clear()
    return _shared_cells.setdefault(cell, cell)


class _ModelScreen(pyte.Screen):
    """A pyte screen with scrollback, an alternate screen, and bounded per-operation cost."""

    def __init__(self, columns: int, lines: int, scrollback_lines: int) -> None:
        self.scrollback = Scrollback(scrollback_lines)
        self.saved_main: tuple[t.Any, pyte.screens.Cursor] | None = None
        #: The main screen's scroll region while the alternate screen is shown: each screen
        #: has its own, as in xterm.js (the alternate one starts without).
        self.main_margins: pyte.screens.Margins | None = None
        super().__init__(columns, lines)

    @property
    def alternate(self) -> bool:
        """Whether the alternate screen (full-screen programs) is shown."""
        return self.saved_main is not None

    def reset(self) -> None:
        """RIS: back to the main screen, everything cleared."""
        super().reset()
        self.saved_main = None
        self.main_margins = None

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

    def select_graphic_rendition(self, *attrs: int, **kwargs: t.Any) -> None:
        """Set the pen as pyte does, keeping whether it conceals (SGR 8, 28)."""
        concealed = _concealed_after(attrs, type(self.cursor.attrs) is ConcealedChar)
        super().select_graphic_rendition(*attrs, **kwargs)
        kind = ConcealedChar if concealed else pyte.screens.Char
        if type(self.cursor.attrs) is not kind:
            self.cursor.attrs = kind(*self.cursor.attrs)

    def visible_lines(self) -> list[str]:
        """:attr:`display` with the concealed cells blank (a wide character's two columns)."""
        lines = self.display
        for y in range(self.lines):
            line = self.buffer.get(y)
            if not line or not any(type(cell) is ConcealedChar for cell in line.values()):
                continue
            chars: list[str] = []
            wide = False
            for x in range(self.columns):
                if wide:
                    wide = False
                    continue
                cell = line[x]
                wide = bool(cell.data) and wcwidth(cell.data[0]) == 2
                chars.append(" " * (1 + wide) if type(cell) is ConcealedChar else cell.data)
            lines[y] = "".join(chars)
        return lines

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
        self.main_margins = None
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
            self.main_margins, self.margins = self.margins, None
        elif not on and self.saved_main is not None:
            self.buffer, cursor = self.saved_main
            self.saved_main = None
            self.margins, self.main_margins = self.main_margins, None
            if number == 1049:
                self.cursor.x = min(cursor.x, self.columns)
                self.cursor.y = min(cursor.y, self.lines - 1)
                self.cursor.attrs = cursor.attrs

    def save_cursor_sco(self, *_: int, private: bool = False) -> None:
        """``CSI s``: save the cursor, as ``ESC 7`` (``CSI ? s`` saves modes in xterm:
        ignored, as xterm.js does)."""
        if not private:
            self.save_cursor()

    def restore_cursor_sco(self, *_: int, private: bool = False) -> None:
        """``CSI u``: restore the cursor saved by ``CSI s`` or ``ESC 7``."""
        if not private:
            self.restore_cursor()


class _ModelStream(pyte.Stream):
    """pyte's parser, also dispatching the keypad modes (``ESC =``, ``ESC >``: set by vim, less,
    top, htop and tmux) and the cursor saved by ``CSI s`` (``CSI u`` restores it), which pyte
    ignores."""

    escape = {  # noqa: RUF012 - pyte's interface: the class's table of escapes
        **pyte.Stream.escape,
        "=": "keypad_application",
        ">": "keypad_numeric",
    }
    csi = {  # noqa: RUF012 - as above
        **pyte.Stream.csi,
        "s": "save_cursor_sco",
        "u": "restore_cursor_sco",
    }


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

    def visible_display(self) -> list[str]:
        return self._screen.visible_lines()

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
            if screen.main_margins is not None:  # (before the cursor: DECSTBM moves it)
                out.append(f"\x1b[{screen.main_margins.top + 1};{screen.main_margins.bottom + 1}r")
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
        if screen.cursor.attrs[1:] != DEFAULT_ATTRS:
            out.append(sgr(screen.cursor.attrs[1:]))
        if screen.cursor.hidden or modes.DECTCEM not in screen.mode:
            out.append("\x1b[?25l")
        return "".join(out)

    @property
    def screen(self) -> pyte.Screen:
        """The pyte screen (after :meth:`snapshot` it reflects all output fed so far)."""
        return self._screen
