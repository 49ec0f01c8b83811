"""pyte's cells written back as text with SGR sequences, and the scrollback kept that way.

A line of cells renders to its characters with the SGR sequence of each change of attributes
(colours back to their palette index where they came from one, so that a terminal's theme still
applies). :class:`Scrollback` keeps the lines that scrolled off the screen: as cells at first (no
work on the scroll path), rendered later in units, newest first, as far as its character budget
reaches.
"""

from __future__ import annotations

import collections
import re
import typing as t

import pyte
from pyte import graphics, modes

from .base import SCROLLBACK_CHARS, SLICE
from .scheduler import Job, run

#: Cells rendered in one unit of work.
RENDER_CHUNK = 32

_FG_CODES = {name: code for code, name in graphics.FG_ANSI.items()} | {
    name: code for code, name in graphics.FG_AIXTERM.items()
}
_BG_CODES = {name: code for code, name in graphics.BG_ANSI.items()} | {
    name: code for code, name in graphics.BG_AIXTERM.items()
}
_HEX_COLOUR = re.compile(r"^[0-9a-fA-F]{6}$")
#: The 256-colour palette's colours (16-255) by pyte's hex value: pyte turns ``38;5;n`` into
#: RGB, and a terminal whose palette differs (a theme) must see the index again.
_PALETTE = {value: index for index, value in reversed(list(enumerate(graphics.FG_BG_256)))}
#: The attributes of a blank cell (a pyte ``Char`` without its data).
DEFAULT_ATTRS = pyte.screens.Char(" ")[1:]
#: Entries of the rendering caches (SGR sequences by attributes); past that they start again.
_CACHE_SIZE = 4096
_sgr_cache: dict[tuple[t.Any, ...], str] = {}

Line = pyte.screens.StaticDefaultDict[int, pyte.screens.Char]


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
    blank_default = default.data == " " and default[1:] == DEFAULT_ATTRS
    if last < 0 and blank_default:
        return ""
    if last < 0:
        last = columns - 1
    out: list[str] = []
    size = 0
    current = DEFAULT_ATTRS
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
    if current != DEFAULT_ATTRS:
        out.append("\x1b[0m")
    return "".join(out)


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
