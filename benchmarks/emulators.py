"""pyte (the screen model's emulator) against pyghostty (libghostty-vt's Python bindings).

Measured on one machine, one process: CPU per MB of output parsed (plain lines; lines whose
colours change every cell), the time of one snapshot of the largest screen (150x400, every
cell truecolor, with scrollback), the memory of that state, and the fidelity of a replayed
screen: each scenario is fed to xterm.js headless directly and, through each emulator's
snapshot, to a fresh xterm.js; the cells that differ are counted.

    python benchmarks/emulators.py          (needs `npm ci --prefix tests/xterm`, pyghostty)
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import time
import typing as t
from pathlib import Path

# (The reference terminal's helper lives with the tests.)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyghostty  # type: ignore[import-untyped]
import pyte
from pyghostty import ffi, lib

from jupyter_tool_terminal import screen as model
from jupyter_tool_terminal.screen import ScreenModel
from tests import reference_terminal
from tests.screen_streams import colour_line

ROWS, COLS = 150, 400


PLAIN = "".join(f"line {n} of some ordinary output, a shell's\r\n" for n in range(40000))
COLOUR = "".join(colour_line(n, COLS) for n in range(ROWS + 20))

SCENARIOS = {
    "DEC line drawing": "\x1b(0lqqk\r\nx  x\r\nmqqj\x1b(B ok\r\n",
    "application keypad": "\x1b=keypad\r\n",
    "saved cursor": "ab\x1b7\x1b[5;5Hx",
    "pending wrap": "\x1b[1;80H" + "Z",
    "origin mode": "\x1b[5;10r\x1b[?6h\x1b[2;1Hin-region",
    "DECALN": "\x1b#8",
    "delete character": "abcdefgh\x1b[1;3H\x1b[2P",
    "ZWJ emoji": "\U0001f468\u200d\U0001f469\u200d\U0001f467 family\r\n",
    "combining": "e\u0301 a\u0308\r\n",
    "256 colours": "\x1b[38;5;208m208\x1b[48;5;17m17\x1b[0m\r\n",
    "soft wrap": "W" * 100 + "\r\n",
    "window title": "\x1b]2;my title\x07text\r\n",
}


def pyte_parse(text: str) -> float:
    pyte_screen = model._ModelScreen(COLS, ROWS, 500)
    stream = pyte.Stream(pyte_screen)
    started = time.process_time()
    for start in range(0, len(text), 4096):
        stream.feed(text[start : start + 4096])
    return time.process_time() - started


def ghostty_parse(text: str) -> float:
    term = pyghostty.Terminal(cols=COLS, rows=ROWS, scrollback=500)
    data = text.encode()
    started = time.process_time()
    for start in range(0, len(data), 4096):
        term.feed(data[start : start + 4096])
    return time.process_time() - started


def ghostty_snapshot(term: t.Any) -> str:
    """libghostty-vt's formatter: the terminal's whole state written back as VT."""
    options = ffi.new("GhosttyFormatterTerminalOptions*")
    options.size = ffi.sizeof("GhosttyFormatterTerminalOptions")
    options.emit = lib.GHOSTTY_FORMATTER_FORMAT_VT
    options.unwrap = False
    options.trim = True
    extra = options.extra
    extra.size = ffi.sizeof("GhosttyFormatterTerminalExtra")
    extra.palette = extra.modes = extra.scrolling_region = extra.tabstops = True
    extra.keyboard = True
    extra.screen.size = ffi.sizeof("GhosttyFormatterScreenExtra")
    extra.screen.cursor = extra.screen.style = extra.screen.charsets = True
    extra.screen.hyperlink = extra.screen.protection = extra.screen.kitty_keyboard = True
    formatter = ffi.new("GhosttyFormatter*")
    assert lib.ghostty_formatter_terminal_new(ffi.NULL, formatter, term._t[0], options[0]) == 0
    out, size = ffi.new("uint8_t**"), ffi.new("size_t*")
    try:
        assert lib.ghostty_formatter_format_alloc(formatter[0], ffi.NULL, out, size) == 0
        text: str = ffi.buffer(out[0], size[0])[:].decode("utf-8", "replace")
        lib.ghostty_free(ffi.NULL, out[0], size[0])
    finally:
        lib.ghostty_formatter_free(formatter[0])
    return text


def rss() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


async def pyte_model(text: str, rows: int = ROWS, cols: int = COLS) -> tuple[str, float]:
    model = ScreenModel(rows, cols, scrollback_lines=500, lookback=len(text) + 1)
    model.feed(text)
    while model.queued:
        await model.snapshot()
    started = time.process_time()
    snapshot = await model.snapshot()
    return snapshot, time.process_time() - started


def differing_cells(direct: dict[str, t.Any], replayed: dict[str, t.Any]) -> int:
    """Cells (and cursor, title, modes) that differ between two xterm.js states."""
    rows_a = direct["lines"][direct["baseY"] :]
    rows_b = replayed["lines"][replayed["baseY"] :]
    count = 0
    for line_a, line_b in zip(rows_a, rows_b, strict=True):
        for cell_a, cell_b in zip(line_a["cells"], line_b["cells"], strict=True):
            blank_a = cell_a[0] in ("", " ") and cell_a[3] == "default"
            blank_b = cell_b[0] in ("", " ") and cell_b[3] == "default"
            if not (blank_a and blank_b) and cell_a != cell_b:
                count += 1
    for key in ("cursor", "title", "modes"):
        if direct[key] != replayed[key]:
            count += 1
    return count


async def main() -> None:
    results: dict[str, t.Any] = {}
    for name, text in (("plain", PLAIN), ("colour every cell", COLOUR)):
        megabytes = len(text.encode()) / 1e6
        results[f"cpu s/MB {name}"] = {
            "pyte": round(pyte_parse(text) / megabytes, 3),
            "pyghostty": round(ghostty_parse(text) / megabytes, 4),
        }
    # The largest state: a screen of truecolor cells, and scrollback.
    gc.collect()
    before = rss()
    snapshot, seconds = await pyte_model(COLOUR)
    pyte_memory = rss() - before
    gc.collect()
    before = rss()
    term = pyghostty.Terminal(cols=COLS, rows=ROWS, scrollback=500)
    term.feed(COLOUR.encode())
    ghostty_memory = rss() - before
    started = time.process_time()
    ghostty_vt = ghostty_snapshot(term)
    results["largest screen"] = {
        "pyte": {"snapshot_s": round(seconds, 3), "rss_mib": round(pyte_memory / 2**20, 1)},
        "pyghostty": {
            "snapshot_s": round(time.process_time() - started, 4),
            "rss_mib": round(ghostty_memory / 2**20, 1),
        },
    }
    del snapshot, ghostty_vt
    # Fidelity: direct, through pyte's snapshot, through ghostty's.
    terminals = []
    for text in SCENARIOS.values():
        pyte_snapshot, _ = await pyte_model(text, 24, 80)
        term = pyghostty.Terminal(cols=80, rows=24, scrollback=500)
        term.feed(text.encode())
        terminals += [
            (24, 80, [("write", text)]),
            (24, 80, [("write", pyte_snapshot)]),
            (24, 80, [("write", ghostty_snapshot(term))]),
        ]
    rendered = await asyncio.to_thread(reference_terminal.render, terminals)
    fidelity = {}
    for index, name in enumerate(SCENARIOS):
        direct, via_pyte, via_ghostty = rendered[3 * index : 3 * index + 3]
        fidelity[name] = {
            "pyte": differing_cells(direct, via_pyte),
            "pyghostty": differing_cells(direct, via_ghostty),
        }
    results["differing cells (and cursor, title, modes) after replay"] = fidelity
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
