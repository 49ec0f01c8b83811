"""The screen model's two emulators: pyte against pyghostty (libghostty-vt's Python bindings).

Measured on one machine, one process: CPU per MB of output parsed by each emulator alone
(plain lines; lines whose colours change every cell) and by each screen model (what a
session pays: pyghostty's sanitising and worker thread included), the longest event-loop step
while a model works off such a flood, the time of one snapshot of the largest screen (150x400,
every cell truecolor, with scrollback), the memory of that state, and the fidelity of a
replayed screen (tests/screen/test_screen_fidelity.py's scenarios: cells that differ from xterm.js).

    python benchmarks/emulators.py          (needs `npm ci --prefix tests/support/xterm`, pyghostty)
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

import pyte

from jupyter_tool_terminal.screen import BACKENDS, model_class
from jupyter_tool_terminal.screen import pyte as model
from jupyter_tool_terminal.screen._ghostty_ffi import Terminal
from tests.conftest import wait_until
from tests.screen.test_screen import LoopWatch
from tests.screen.test_screen_fidelity import SCENARIOS as FIDELITY_SCENARIOS
from tests.screen.test_screen_fidelity import compare
from tests.support.screen_streams import colour_line

ROWS, COLS = 150, 400


PLAIN = "".join(f"line {n} of some ordinary output, a shell's\r\n" for n in range(40000))
COLOUR = "".join(colour_line(n, COLS) for n in range(ROWS + 20))


def pyte_parse(text: str) -> float:
    pyte_screen = model._ModelScreen(COLS, ROWS, 500)
    stream = pyte.Stream(pyte_screen)
    started = time.process_time()
    for start in range(0, len(text), 4096):
        stream.feed(text[start : start + 4096])
    return time.process_time() - started


def ghostty_parse(text: str) -> float:
    term = Terminal(ROWS, COLS, 500)
    data = text.encode()
    started = time.process_time()
    for start in range(0, len(data), 4096):
        term.feed(data[start : start + 4096])
    return time.process_time() - started


def rss() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


async def model_flood(backend: str, text: str) -> dict[str, float]:
    """CPU per MB (the event loop's and the worker's) and the longest step of a model working
    off ``text``, fed as a session feeds it."""
    screen = model_class(backend)(ROWS, COLS, scrollback_lines=500, replay_buffer_size=64 * 1024)
    screen.charge = lambda seconds: None  # type: ignore[method-assign]  # (no CPU budget: it would measure itself)

    async def worked_off() -> bool:
        return not screen.queued

    started = time.process_time()
    with LoopWatch() as watch:
        for start in range(0, len(text), 64 * 1024):
            screen.feed(text[start : start + 64 * 1024])
            await wait_until(worked_off, timeout=60)
        await screen.snapshot()
    seconds = time.process_time() - started
    screen.close()
    return {
        "cpu_s_per_mb": round(seconds / (len(text.encode()) / 1e6), 4),
        "longest_step_ms": round(watch.longest * 1000, 2),
    }


async def pyte_model(text: str, rows: int = ROWS, cols: int = COLS) -> tuple[str, float]:
    model = model_class("pyte")(rows, cols, scrollback_lines=500, replay_buffer_size=len(text) + 1)
    model.feed(text)
    while model.queued:
        await model.snapshot()
    started = time.process_time()
    snapshot = await model.snapshot()
    return snapshot, time.process_time() - started


async def main() -> None:
    results: dict[str, t.Any] = {}
    for name, text in (("plain", PLAIN), ("colour every cell", COLOUR)):
        megabytes = len(text.encode()) / 1e6
        results[f"cpu s/MB {name}"] = {
            "pyte": round(pyte_parse(text) / megabytes, 3),
            "pyghostty": round(ghostty_parse(text) / megabytes, 4),
        }
    for name, text in (("plain", PLAIN[:2_000_000]), ("colour every cell", COLOUR)):
        results[f"screen model, {name}"] = {
            backend: await model_flood(backend, text) for backend in BACKENDS
        }
    # The largest state: a screen of truecolor cells, and scrollback.
    gc.collect()
    before = rss()
    snapshot, seconds = await pyte_model(COLOUR)
    pyte_memory = rss() - before
    gc.collect()
    before = rss()
    term = Terminal(ROWS, COLS, 500)
    term.feed(COLOUR.encode())
    ghostty_memory = rss() - before
    started = time.process_time()
    ghostty_vt = term.format(term.selection(None))
    results["largest screen"] = {
        "pyte": {"snapshot_s": round(seconds, 3), "rss_mib": round(pyte_memory / 2**20, 1)},
        "pyghostty": {
            "snapshot_s": round(time.process_time() - started, 4),
            "rss_mib": round(ghostty_memory / 2**20, 1),
        },
    }
    del snapshot, ghostty_vt
    # Fidelity: the test's scenarios, direct and through each model's snapshot.
    fidelity: dict[str, dict[str, int]] = {}
    for backend in BACKENDS:
        for name, found in (await compare(backend, FIDELITY_SCENARIOS)).items():
            fidelity.setdefault(name, {})[backend] = len(found)
    results["differences from xterm.js after replay"] = fidelity
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
