"""A typed wrapper of what the screen model uses of `pyghostty <https://pypi.org/project/pyghostty/>`_
(the Python bindings of Ghostty's ``libghostty-vt``; wheels for Linux x86_64 and aarch64).

pyghostty has no type annotations: it is imported here, once, and nothing else touches it.
Importing this module raises ``ImportError`` where pyghostty is not installed.
"""

from __future__ import annotations

import re
import typing as t

import pyghostty  # type: ignore[import-untyped]
from pyghostty import ffi, lib
from pyghostty.core import init_sized  # type: ignore[import-untyped]

#: The SGR sequences at the end of a formatted cell: the pen (the style new text gets).
#: Rows of scrollback kept beyond the bound asked for (a page of rows, about).
SCROLLBACK_PAGE = 512
_PEN = re.compile(r"(?:\x1b\[[0-9;:]*m)*\Z")


class Terminal:
    """A headless Ghostty terminal: fed VT bytes, written back as VT by its formatter."""

    def __init__(
        self, rows: int, cols: int, scrollback_lines: int, scrollback_bytes: int = 8 * 2**20
    ) -> None:
        """A terminal keeping at least ``scrollback_lines`` of scrollback (0: none) within
        ``scrollback_bytes``: libghostty-vt keeps whole pages of rows within both bounds, so
        that a bound of 500 lines kept 325 of 80 columns; it is given a page more."""
        lines = scrollback_lines + SCROLLBACK_PAGE if scrollback_lines else 0
        self._term: t.Any = pyghostty.Terminal(cols=cols, rows=rows, scrollback=lines)
        # (its bound in bytes is otherwise a few pages: some 240 lines of 80 columns)
        self._set(lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_BYTES, scrollback_bytes)
        # No images (kitty graphics): they are not replayed, and would be kept (by default up
        # to hundreds of MB).
        self._set(lib.GHOSTTY_TERMINAL_OPT_KITTY_IMAGE_STORAGE_LIMIT, 0)

    def _set(self, option: int, value: int) -> None:
        lib.ghostty_terminal_set(self._term._t[0], option, ffi.new("size_t*", value))

    def feed(self, data: bytes) -> None:
        """Parse ``data`` (output of the program)."""
        self._term.feed(data)

    def resize(self, rows: int, cols: int) -> None:
        """Resize, reflowing soft-wrapped lines (as xterm.js does)."""
        self._term.resize(cols, rows)

    def close(self) -> None:
        """Free the native terminal."""
        self._term.close()

    def set_scrollback(self, lines: int) -> None:
        """Keep at most ``lines`` lines of scrollback (0: none, and what there was is freed)."""
        self._set(lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_LINES, lines)

    @property
    def rows(self) -> int:
        """Rows of the screen."""
        return int(self._term.get("rows"))

    @property
    def cols(self) -> int:
        """Columns of the screen."""
        return int(self._term.get("cols"))

    @property
    def cursor(self) -> tuple[int, int]:
        """The cursor, (column, row) from 0."""
        x, y = self._term.cursor
        return int(x), int(y)

    @property
    def pending_wrap(self) -> bool:
        """Whether a character was written in the last column (the next one wraps)."""
        return bool(self._term.get("cursor_pending_wrap", "bool"))

    @property
    def scrollback_rows(self) -> int:
        """Rows in the scrollback now."""
        return int(self._term.get("scrollback_rows", "size_t"))

    @property
    def alternate(self) -> bool:
        """Whether the alternate screen is the active one."""
        return int(self._term.get("active_screen", "int")) != 0

    def mode(self, number: int) -> bool:
        """Whether DEC private mode ``number`` is set."""
        return bool(self._term.mode(number))

    @property
    def title(self) -> str:
        """The window title (OSC 0 or 2)."""
        value = ffi.new("GhosttyString*")
        lib.ghostty_terminal_get(self._term._t[0], lib.GHOSTTY_TERMINAL_DATA_TITLE, value)
        if not value.len:
            return ""
        return bytes(ffi.buffer(value.ptr, value.len)).decode("utf-8", "replace")

    def text(self) -> list[str]:
        """The screen's rows as plain text (trailing blanks left out)."""
        lines: list[str] = self._term.text().split("\n")
        return lines + [""] * (self.rows - len(lines))

    def invisible(self, x: int, y: int) -> bool:
        """Whether the cell at column ``x`` of screen row ``y`` is drawn concealed (SGR 8)."""
        style = init_sized("GhosttyStyle")
        if lib.ghostty_grid_ref_style(self._term.ref(x, y), style):
            return False  # (no such cell)
        return bool(style.invisible)

    def pen(self) -> str:
        """The SGR sequences that set the style new text gets now."""
        sel = init_sized("GhosttySelection")
        sel.start = self._term.ref(0, 0)[0]
        sel.end = self._term.ref(0, 0)[0]
        text = self.format(sel, modes=False, cursor=False, unwrap=False)
        tail = text.rsplit("\x1b[0m", 1)[-1]
        match = _PEN.search(tail)
        return match.group(0) if match else ""

    def selection(self, history_from: int | None, *, active_only: bool = False) -> t.Any:
        """A selection from history row ``history_from`` (``None``: the oldest) or the top of
        the screen (``active_only``) to the screen's last cell."""
        sel = init_sized("GhosttySelection")
        if active_only or not self.scrollback_rows:
            sel.start = self._term.ref(0, 0, "active")[0]
        else:
            sel.start = self._term.ref(0, history_from or 0, "screen")[0]
        sel.end = self._term.ref(self.cols - 1, self.rows - 1, "active")[0]
        return sel

    def format(
        self,
        selection: t.Any | None = None,
        *,
        modes: bool = True,
        cursor: bool = True,
        unwrap: bool = True,
    ) -> str:
        """The formatter's VT for the active screen (and the selected scrollback): cells and
        styles, and, if asked, the modes, scroll region, tab stops, charsets and cursor. The
        palette is never written (it would override the browser terminal's theme)."""
        options = init_sized("GhosttyFormatterTerminalOptions")
        options.emit = lib.GHOSTTY_FORMATTER_FORMAT_VT
        options.unwrap = unwrap
        options.trim = True
        extra = options.extra
        extra.palette = False
        extra.modes = extra.scrolling_region = extra.tabstops = extra.keyboard = modes
        extra.screen.cursor = extra.screen.charsets = cursor
        extra.screen.style = extra.screen.hyperlink = extra.screen.protection = True
        extra.screen.kitty_keyboard = modes
        if selection is not None:
            options.selection = selection
        formatter = ffi.new("GhosttyFormatter*")
        if lib.ghostty_formatter_terminal_new(ffi.NULL, formatter, self._term._t[0], options[0]):
            msg = "libghostty-vt: cannot make a formatter"
            raise RuntimeError(msg)
        out, size = ffi.new("uint8_t**"), ffi.new("size_t*")
        try:
            if lib.ghostty_formatter_format_alloc(formatter[0], ffi.NULL, out, size):
                msg = "libghostty-vt: cannot format the terminal"
                raise RuntimeError(msg)
            text = bytes(ffi.buffer(out[0], size[0])).decode("utf-8", "replace")
            lib.ghostty_free(ffi.NULL, out[0], size[0])
        finally:
            lib.ghostty_formatter_free(formatter[0])
        return text
