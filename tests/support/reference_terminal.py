"""xterm.js headless as the reference terminal: what a browser's terminal shows for a stream.

``tests/support/xterm`` holds the node package
(install it with ``npm ci --prefix tests/support/xterm``);
``render`` runs its script once for any number of terminals.
"""

from __future__ import annotations

import json
import subprocess
import typing as t
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "xterm"

#: One step of a terminal's life: ("write", text) or ("resize", rows, cols).
Step = tuple[t.Any, ...]


def render(terminals: list[tuple[int, int, list[Step]]]) -> list[dict[str, t.Any]]:
    """What each terminal, of (rows, cols) and fed its steps, shows: its lines (scrollback
    first) as text and as cells ``[chars, width, fg, bg, flags]``, cursor, modes and title."""
    if not (FOLDER / "node_modules" / "@xterm" / "headless").is_dir():
        msg = f"the reference terminal is not installed: run `npm ci --prefix {FOLDER}`"
        raise AssertionError(msg)
    specs = [{"rows": rows, "cols": cols, "steps": steps} for rows, cols, steps in terminals]
    done = subprocess.run(
        ["node", str(FOLDER / "render.mjs")],
        input=json.dumps(specs),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    results: list[dict[str, t.Any]] = json.loads(done.stdout)
    return results


def screen_text(state: dict[str, t.Any]) -> list[str]:
    """The rows of the screen (the viewport at the bottom), as text (trailing blanks left out:
    a space written and a cell never written look the same)."""
    return [line["text"].rstrip(" ") for line in state["lines"][state["baseY"] :]]


def all_text(state: dict[str, t.Any]) -> list[str]:
    """Scrollback and screen, as text, without the blank rows below the last written one."""
    lines = [line["text"].rstrip(" ") for line in state["lines"]]
    while lines and not lines[-1]:
        lines.pop()
    return lines
