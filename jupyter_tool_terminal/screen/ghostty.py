"""The screen model on libghostty-vt (Ghostty's terminal emulator, through pyghostty).

libghostty-vt parses output at some 100 MB/s (pyte: a few), and its formatter writes a
terminal's whole state back as VT: cells, styles, scrollback, modes, charsets, scroll region,
tab stops, cursor and a pending wrap. What it leaves out is added here: the window title, the
saved cursor (``ESC 7``: tracked as output is fed), the main screen under the alternate one
(written first, then the alternate screen over it, as the program left them), and the rows
below the last written one (it trims them, which would shift the screen up by as many rows).
The palette is never written back, so the browser terminal keeps its theme's colours.

Its calls take the GIL off, and one of them can take milliseconds (a resize reflowing the
scrollback, a snapshot of the largest screen, a page of new styles): all of them run in one
worker thread, never on the event loop; the scheduler still bounds each model's CPU time (the
worker's, charged to the model).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import re
import time
import typing as t
import unicodedata

from wcwidth import wcwidth

from ._ghostty_ffi import Terminal
from .base import SCROLLBACK_CHARS, ScreenModel
from .scheduler import Job

log = logging.getLogger(__name__)

#: Bytes of output (UTF-8) fed in one unit of work (libghostty-vt: about 0.1 ms, at worst a
#: few ms when it makes room for new styles; in the worker thread either way).
SLICE_BYTES = 16 * 1024
#: Estimated bytes per cell of a screen or of a scrollback row, at worst (a cell is 8 bytes in
#: libghostty-vt's pages; a style and four marks of its own each, the rest); measured by
#: tests/screen/test_screen.py's worst case (28.5-34.5 MiB resident for 423 rows of 400 cells; this
#: estimates it at 38.7 MiB).
GHOSTTY_CELL_BYTES = 240
#: Output the tracker must see at once: saving the cursor (DECSC, SCOSC), a reset, entering
#: the alternate screen (which saves the main screen's cursor), and erasing to the end of the
#: line (EL 0), which differs between the two terminals when a wrap is pending.
_TRACKED = re.compile(rb"(\x1b7|\x1b\[s|\x1bc|\x1b\[\?1049h|\x1b\[0?K)")
_ERASE_RIGHT = (b"\x1b[K", b"\x1b[0K")
_ALT_MODES = re.compile(r"\x1b\[\?(?:47|1047|1049)h")
#: Where the formatter's state after the cells begins (scroll region, cursor position).
_TRAILER = re.compile(r"\x1b\[\d+;\d+[rH]")
_REGION = re.compile(r"\x1b\[(\d+);\d+r")
_POSITION = re.compile(r"\x1b\[(\d+);(\d+)H")
#: DEC origin mode: cursor positions count from the scroll region's top.
_ORIGIN_MODE = 6
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: The longest title written back.
MAX_TITLE = 1024

#: Marks one cell keeps (combining marks, joiners, variation selectors after a base): more
#: cost libghostty-vt memory per cell (30 a cell: 66 MiB a model), and no terminal shows them.
MAX_CELL_MARKS = 4
#: Hyperlinks (OSC 8) are not fed: a hyperlink of its own on every cell, with its own style,
#: made libghostty-vt 0.1.3 abort the process ("increaseCapacity OutOfSpace"). A reattached
#: screen shows the linked text without the link.
_HYPERLINK = re.compile(r"\x1b\]8;[^\x07\x1b]*(?:\x07|\x1b\\)")
_HYPERLINK_START = "\x1b]8;"
#: The planes with combining marks (the rest has none).
_MARK_PLANES = (range(0x300, 0x30000), range(0xE0000, 0xE1000))

_T = t.TypeVar("_T")


@functools.cache
def _marks() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """Runs of more than ``MAX_CELL_MARKS`` marks, marks at the start, marks at the end
    (computed once, in the worker: 0.3 s)."""
    ranges: list[tuple[int, int]] = []
    for plane in _MARK_PLANES:
        for code in plane:
            char = chr(code)
            if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
                if ranges and ranges[-1][1] == code - 1:
                    ranges[-1] = (ranges[-1][0], code)
                else:
                    ranges.append((code, code))
    marks = "[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges) + "]"
    return (
        re.compile(f"({marks}{{{MAX_CELL_MARKS}}}){marks}+"),
        re.compile(f"^{marks}+"),
        re.compile(f"{marks}+$"),
    )


class _Sanitiser:
    """What of the output libghostty-vt is not fed, across pieces: hyperlinks, and marks past
    ``MAX_CELL_MARKS`` on one cell."""

    def __init__(self) -> None:
        self._carry = ""
        self._in_link = False
        #: Marks at the end of the text last returned (the next text's first ones add to them).
        self._marks = 0

    def __call__(self, text: str) -> str:
        if self._in_link:  # the rest of an abandoned (overlong) hyperlink
            end = re.search("\x07|\x1b\\\\", text)
            if end is None:
                return ""
            text, self._in_link = text[end.end() :], False
        text = self._carry + text
        self._carry = ""
        if "\x1b]" in text or text.endswith(("\x1b", "\x1b]", "\x1b]8")):
            text = _HYPERLINK.sub("", text)
            start = text.rfind(_HYPERLINK_START)
            if start < 0:
                for prefix in ("\x1b]8", "\x1b]", "\x1b"):
                    if text.endswith(prefix):
                        start = len(text) - len(prefix)
                        break
            if start >= 0:
                tail = text[start:]
                if len(tail) > MAX_TITLE * 4:
                    self._in_link = True
                else:
                    self._carry = tail
                text = text[:start]
        if text.isascii():
            self._marks = 0
            return text
        runs, leading, trailing = _marks()
        text = runs.sub(r"\1", text)
        first = leading.match(text)
        if first is not None:
            keep = max(MAX_CELL_MARKS - self._marks, 0)
            text = text[: first.start() + keep] + text[first.end() :]
            if len(text) <= keep:  # (marks only)
                self._marks += len(text)
                return text
        last = trailing.search(text)
        self._marks = len(last.group()) if last else 0
        return text


_executor: concurrent.futures.ThreadPoolExecutor | None = None


def _origin_relative(trailer: str) -> str:
    """The formatter's trailer (scroll region, cursor position) with the cursor's row counted
    from the scroll region's top: the formatter writes the row on the screen, but after the
    modes, and with origin mode on a terminal counts it from the region's top."""
    region = _REGION.search(trailer)
    if region is None:
        return trailer  # (no region: the whole screen, rows count from its top)
    top = int(region.group(1))

    def relative(position: re.Match[str]) -> str:
        return f"\x1b[{max(int(position.group(1)) - top + 1, 1)};{position.group(2)}H"

    return trailer[: region.end()] + _POSITION.sub(relative, trailer[region.end() :], count=1)


def _worker() -> concurrent.futures.ThreadPoolExecutor:
    global _executor  # noqa: PLW0603 - one worker thread per process, made when first needed
    if _executor is None:
        _executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="screen-model")
    return _executor


class GhosttyScreenModel(ScreenModel):
    """The screen model on libghostty-vt (see the module docstring). Its inspection methods
    (``display``, ``alternate``, ``dimensions``) read the terminal: call them when the model
    is idle (after :meth:`snapshot`)."""

    backend = "pyghostty"
    slice_chars = SLICE_BYTES // 4
    session_share_mib = 40  # (its measured worst case, 28.5-34.5 MiB, fits)
    _prepared: t.ClassVar[bool] = False

    @classmethod
    def prepare(cls) -> None:
        """Make and use a terminal once: cffi parses the C declarations of what a terminal
        uses when it is first used (180 ms here for its construction, the event loop held, and
        more for the first render, in the worker thread but holding the interpreter lock),
        which would otherwise be the first session's open and its first reattach, with every
        other user's echo waiting."""
        if cls._prepared:
            return
        term = Terminal(24, 80, 1)
        try:
            term.feed(b"\x1b[1mx\r\n")
            _ = (term.cursor, term.pending_wrap, term.alternate, term.scrollback_rows)
            _ = (term.mode(_ORIGIN_MODE), term.title, term.text(), term.pen())
            term.format(term.selection(None, active_only=True), modes=True)
            term.format(term.selection(0), modes=False, cursor=False, unwrap=False)
            term.resize(term.rows + 1, term.cols + 1)
            term.set_scrollback(0)
        finally:
            term.close()
        cls._prepared = True

    def _open_emulator(self, rows: int, cols: int) -> None:
        self._term = Terminal(rows, cols, self.scrollback_lines)
        #: What the worker last saw: (rows, cols, scrollback rows), for the memory estimate.
        self._extent = (self._term.rows, self._term.cols, 0)
        #: The saved cursor of each screen (main: False, alternate: True) as the VT that saves
        #: it again; the main screen's cursor as the alternate screen was entered.
        self._saved: dict[bool, str] = {}
        self._main_cursor = ""
        self._drop_pending = False
        self._sanitise = _Sanitiser()

    # -- the worker thread ---------------------------------------------------------------------

    def _in_worker(self, work: t.Callable[[], _T], fallback: _T) -> Job:
        """Do ``work`` in the worker thread (the model holds still meanwhile); its result, or
        ``fallback`` if it failed."""

        def measured() -> tuple[_T, float]:
            started = time.thread_time()
            try:
                result = work()
            except Exception:
                log.exception("The screen model failed (%s)", getattr(work, "__name__", work))
                result = fallback
            if self._drop_pending:
                self._apply_drop()
            term = self._term
            # (the alternate screen has no scrollback: the main one's is still there)
            history = self._extent[2] if term.alternate else term.scrollback_rows
            self._extent = (term.rows, term.cols, history)
            return result, time.thread_time() - started

        future = asyncio.get_running_loop().run_in_executor(_worker(), measured)
        while not future.done():
            yield future
        result, spent = future.result()
        self.charge(spent)
        self._report_memory()  # (what the worker saw of the terminal is new)
        return result

    def _feed_text(self, text: str) -> Job:
        return self._in_worker(functools.partial(self._feed_now, text), None)

    def _feed_now(self, text: str) -> None:
        data = self._sanitise(text).encode("utf-8", "replace")
        term = self._term
        if b"\x1b" not in data or not _TRACKED.search(data):
            term.feed(data)
            return
        for index, part in enumerate(_TRACKED.split(data)):
            if index % 2 == 0:
                term.feed(part)
            elif part == b"\x1bc":
                term.feed(part)
                self._saved.clear()
            elif part == b"\x1b[?1049h":
                if not term.alternate:
                    self._main_cursor = self._cursor_vt()
                term.feed(part)
            elif part in _ERASE_RIGHT:
                # Just after the last column (a wrap pending), xterm.js erases nothing and
                # keeps the wrap pending; libghostty-vt erases the last cell. The browser's is
                # the screen to match: top's inverse header row ends so, and its last line.
                if not term.pending_wrap:
                    term.feed(part)
            else:
                term.feed(part)
                self._saved[term.alternate] = self._cursor_vt() + "\x1b7"

    def _cursor_vt(self) -> str:
        """VT that puts the cursor where it is now, with the pen it has."""
        x, y = self._term.cursor
        return f"\x1b[{y + 1};{x + 1}H\x1b[0m{self._term.pen()}"

    def _resize_job(self, rows: int, cols: int) -> Job:
        return self._in_worker(functools.partial(self._resize_now, rows, cols), None)

    def _resize_now(self, rows: int, cols: int) -> None:
        """Resize as xterm.js does: the rows first, then the columns, reflowing.

        A new width reflows the lines onto more rows (or fewer). With scrollback, xterm.js
        keeps the cursor on its row (the rows added push older ones into the scrollback, the
        rows removed take some back); libghostty-vt instead moves the cursor down over the
        blank rows below it, so that rows of the scrollback (lines ``top`` drew before a
        ``clear``) came back onto the screen above the prompt. Those rows are scrolled off
        again here."""
        term = self._term
        if rows != term.rows:
            term.resize(rows, term.cols)
        _, row = term.cursor
        settled = not term.scrollback_rows or cols == term.cols
        term.resize(rows, cols)
        if settled or term.alternate or term.pending_wrap or term.mode(_ORIGIN_MODE):
            return
        x, moved = term.cursor
        if moved > row:
            pen = term.pen()
            scroll = f"\x1b[0m\x1b[{rows};1H" + "\n" * (moved - row)
            term.feed(f"{scroll}\x1b[{row + 1};{x + 1}H{pen}".encode())

    def _render(self) -> Job:
        return self._in_worker(self._render_now, "")

    def _render_now(self) -> str:
        term = self._term
        out = ["\x1b[0m"]
        title = _CONTROLS.sub("", term.title)[:MAX_TITLE]
        if title:
            out.append(f"\x1b]2;{title}\x07")
        if term.alternate:
            # The main screen first (without the modes: they are the alternate screen's to
            # set), its cursor as the program left it, then the alternate screen over it.
            term.feed(b"\x1b[?47l")  # (shows the main screen without clearing the other)
            try:
                out.append(self._screen_vt(modes=False, scrollback=True))
            finally:
                term.feed(b"\x1b[?47h")
            out.append(self._main_cursor)
            out.append("\x1b[?1049h\x1b[H\x1b[2J")
            out.append(self._saved.get(True, ""))
            out.append(_ALT_MODES.sub("", self._screen_vt(modes=True, scrollback=False)))
        else:
            out.append(self._saved.get(False, ""))
            out.append(self._screen_vt(modes=True, scrollback=True))
        return "".join(out)

    def _screen_vt(self, *, modes: bool, scrollback: bool) -> str:
        """The active screen as VT (and as much of its scrollback as ``SCROLLBACK_CHARS``
        holds), followed by as many line feeds as the formatter trimmed blank rows."""
        term = self._term
        rows, history = term.rows, term.scrollback_rows if scrollback else 0
        active = term.selection(None, active_only=True)
        # The rows the cells reach (counted unwrapped, as the screen shows them).
        used = term.format(active, modes=False, cursor=False, unwrap=False).count("\r\n") + 1
        screen = text = term.format(active, modes=modes)
        # As much scrollback as fits: first as many rows as the screen's would, then fewer
        # while what they render to is too long.
        per_row = len(screen) / used
        start = max(0, history - self.scrollback_lines, history - int(SCROLLBACK_CHARS / per_row))
        while history > start:
            text = term.format(term.selection(start), modes=modes)
            extra = len(text) - len(screen)
            if extra <= SCROLLBACK_CHARS:
                break
            per_row = extra / (history - start)
            start = max(start + 1, history - int(SCROLLBACK_CHARS / per_row * 0.9))
            text = screen
        trailer = _TRAILER.search(text)
        cut = trailer.start() if trailer else len(text)
        tail = text[cut:]
        if modes and term.mode(_ORIGIN_MODE):
            tail = _origin_relative(tail)
        return text[:cut] + "\r\n" * max(rows - used, 0) + tail

    # -- the memory budget ---------------------------------------------------------------------

    def memory_estimate(self) -> int:
        rows, cols, history = self._extent
        if not self.scrollback_lines:
            history = 0  # (dropped, or about to be: the worker is busy with it)
        cells = (2 * rows + history) * cols
        return super().memory_estimate() + cells * GHOSTTY_CELL_BYTES

    def drop_scrollback(self) -> bool:
        had = self._extent[2] > 0 and self.scrollback_lines > 0
        super().drop_scrollback()
        self._drop_pending = True
        if self._awaited is None or self._awaited.done():
            self._apply_drop()
        return had

    def _apply_drop(self) -> None:
        self._drop_pending = False
        if self.closed:
            return
        self._term.set_scrollback(0)
        self._term.feed(b"\x1b[3J")
        rows, cols, _ = self._extent
        self._extent = (rows, cols, 0)

    def _close_emulator(self) -> None:
        self._term.close()

    # -- inspection (tests) --------------------------------------------------------------------

    @property
    def alternate(self) -> bool:
        return self._term.alternate

    @property
    def dimensions(self) -> tuple[int, int]:
        return self._term.rows, self._term.cols

    def display(self) -> list[str]:
        return self._term.text()

    def visible_display(self) -> list[str]:
        """:meth:`display` with the concealed cells blank (each cell asked: a read, not a hot
        path)."""
        lines = self._term.text()
        for y, line in enumerate(lines):
            chars: list[str] = []
            x = 0
            hidden = False
            for char in line:
                width = wcwidth(char)
                if width == 0 and chars:  # (a combining mark: its cell's)
                    chars.append("" if hidden else char)
                    continue
                width = max(width, 1)
                hidden = self._term.invisible(x, y)
                chars.append(" " * width if hidden else char)
                x += width
            lines[y] = "".join(chars)
        return lines

    @property
    def cursor(self) -> tuple[int, int]:
        x, y = self._term.cursor
        return x + self._term.pending_wrap, y
