"""The replayed screen against a real terminal, for each screen model backend: each scenario goes
to xterm.js headless directly, and through the screen model's snapshot to a fresh xterm.js; then
both get the same further output (which shows the state a snapshot must carry: a saved cursor, a
pending wrap, a character set) and the same resizes, and every cell, the cursor, the modes and
the title must be the same.

What a backend cannot do is marked ``xfail`` (strict) with the reason, so that the test output
is the table of what each backend gets right."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import select
import shutil
import struct
import subprocess
import tempfile
import termios
import time
import typing as t
from pathlib import Path

import pytest

from jupyter_tool_terminal.screen import BACKENDS, model_class

from ..support import reference_terminal

#: A scenario: the output before the snapshot, the output after it, and the resizes that
#: follow (rows, cols), if any.
Scenario = tuple[str, str, list[tuple[int, int]]]

SCENARIOS: dict[str, Scenario] = {
    "DEC line drawing": ("\x1b(0lqqk\r\nx  x\r\nmqqj\x1b(B ok\r\n\x1b(0lq", "qk", []),
    "DEC line drawing in G1 (SO)": ("\x1b)0\x0elqqk\x0f ok\r\n\x0elq", "qk", []),
    "application keypad": ("\x1b=keypad on", "", []),
    "saved cursor": ("\x1b[31mab\x1b7\x1b[0m\x1b[5;5Hx", "\x1b8Y", []),
    "saved cursor in the alternate screen": (
        "shell\r\n\x1b[?1049h\x1b[3;3H\x1b[32m\x1b7\x1b[0m\x1b[10;1Hx",
        "\x1b8Y\x1b[?1049lZ",
        [],
    ),
    "pending wrap at the last column": ("\x1b[1;80HZ", "Q", []),
    "origin mode": ("\x1b[5;10r\x1b[?6h\x1b[2;1Hin-region", "\x1b[1;1Hhome", []),
    # (origin mode: rows count from the scroll region's top; the further output writes where
    # the cursor was left)
    "origin mode: the cursor in the scroll region": ("\x1b[5;10r\x1b[?6h\x1b[2;3Hin", "X", []),
    "origin mode: a wrap pending in the scroll region": ("\x1b[5;10r\x1b[?6h\x1b[3;80HZ", "Q", []),
    "origin mode in the alternate screen": (
        "shell\r\n\x1b[?1049h\x1b[5;10r\x1b[?6h\x1b[2;4Hin-alt",
        "X",
        [],
    ),
    "origin mode, resized": ("\x1b[5;10r\x1b[?6h\x1b[2;3Hin", "X", [(20, 60)]),
    "origin mode below scrollback": (
        "".join(f"line {n}\r\n" for n in range(40)) + "\x1b[5;10r\x1b[?6h\x1b[2;5Hin",
        "X",
        [],
    ),
    "saved cursor (CSI s) in origin mode": (
        "\x1b[5;10r\x1b[?6h\x1b[3;4H\x1b[s\x1b[1;1Hab",
        "\x1b[uX",
        [],
    ),
    "the main screen's scroll region under the alternate screen": (
        "\x1b[5;10r\x1b[?6h\x1b[2;1Hmain\x1b[?1049h\x1b[1;1Halt",
        "\x1b[?1049l\x1b[1;1Hback",
        [],
    ),
    "DECALN": ("\x1b#8", "\x1b[3;3Hx", []),
    "delete character": ("abcdefgh\x1b[1;3H\x1b[2P", "", []),
    "insert and erase characters": ("abcdefgh\x1b[1;3H\x1b[2@\x1b[1;7H\x1b[2X", "", []),
    "ZWJ emoji": ("\U0001f468\u200d\U0001f469\u200d\U0001f467 family\r\n", "x", []),
    "combining characters": ("e\u0301 a\u0308 n\u0303\r\n", "x", []),
    "wide characters": ("\u4e2d\u6587 \U0001f600 ok\r\n", "x", []),
    "256-colour indices": ("\x1b[38;5;208m208\x1b[48;5;17m17\x1b[0m\r\n", "", []),
    "truecolor and attributes": (
        "\x1b[1;3;4;9;38;2;1;2;3;48;2;250;251;252mstyled\x1b[0m \x1b[7mreverse\x1b[0m\r\n",
        "",
        [],
    ),
    "window title": ("\x1b]2;my title\x07text\r\n", "", []),
    "scroll region and colours": ("\x1b[2;5r\x1b[5;1H" + "\x1b[32mline\r\n" * 8, "more", []),
    "soft wrap, reflowed on widening": ("W" * 100 + "\r\n$ ", "x", [(24, 120)]),
    "scrollback": ("".join(f"line {n}\r\n" for n in range(60)) + "$ ", "x", []),
    "blank rows below the cursor after scrolling": (
        "".join(f"line {n}\r\n" for n in range(30)) + "\r\n\r\n\x1b[A\x1b[A",
        "x",
        [],
    ),
    "alternate screen over the main one": (
        "shell line\r\n$ vi\r\n\x1b[?1049h\x1b[H\x1b[2Jfull screen\x1b[5;5H",
        "\x1b[?1049lback",
        [],
    ),
    "modes: cursor keys, mouse, paste, hidden cursor": (
        "\x1b[?1h\x1b[?1000h\x1b[?1006h\x1b[?2004h\x1b[?25l",
        "",
        [],
    ),
    "tab stops": ("\x1b[3g\x1b[5G\x1bH\x1b[1G\tA", "\tB", []),
    # (top's inverse header, and its last line: the last column written, then erase right)
    "erase right with a wrap pending": (
        "\x1b[7m" + "H" * 79 + " \x1b[m\x1b[K\r\n" + "L" * 79 + " \x1b[K",
        "",
        [],
    ),
}

#: What each backend cannot do: {backend: {scenario: reason}}.
KNOWN_DIFFERENCES: dict[str, dict[str, str]] = {
    "pyte": {
        "ZWJ emoji": "pyte cannot take a zero-width joiner (the model leaves joiners out)",
        "combining characters": "pyte normalises combining marks to precomposed characters",
        "soft wrap, reflowed on widening": "pyte does not keep soft wraps: no reflow",
        "tab stops": "the pyte model does not write tab stops back",
    },
    "pyghostty": {
        "the main screen's scroll region under the alternate screen": (
            "the formatter writes the active screen's scroll region only (libghostty-vt keeps one)"
        ),
    },
}


def _same_cell(a: list[t.Any], b: list[t.Any]) -> bool:
    """A space written and a cell never written (or erased, in any background) look the same."""
    blank_a = a[0] in ("", " ") and a[3] == "default" and a[4][4] == "0"
    blank_b = b[0] in ("", " ") and b[3] == "default" and b[4][4] == "0"
    if blank_a and blank_b:
        return True
    if a[0] in ("", " ") and b[0] in ("", " ") and a[3:] == b[3:]:
        return True  # (a blank's foreground does not show)
    return a == b


def differences(direct: dict[str, t.Any], replayed: dict[str, t.Any]) -> list[str]:
    """Where two xterm.js states differ: cells of the screen and the scrollback, cursor, modes,
    title."""
    found = []
    if direct["baseY"] != replayed["baseY"]:
        found.append(f"scrollback rows: {direct['baseY']} != {replayed['baseY']}")
    rows_a = direct["lines"][-direct["rows"] :]
    rows_b = replayed["lines"][-replayed["rows"] :]
    history_a = reference_terminal.all_text(direct)[: direct["baseY"]]
    history_b = reference_terminal.all_text(replayed)[: replayed["baseY"]]
    if history_a != history_b:
        found.append(f"scrollback: {history_a[-3:]} != {history_b[-3:]}")
    for y, (line_a, line_b) in enumerate(zip(rows_a, rows_b, strict=True)):
        for x, (a, b) in enumerate(zip(line_a["cells"], line_b["cells"], strict=True)):
            if not _same_cell(a, b):
                found.append(f"cell {y},{x}: {a} != {b}")
    for key in ("cursor", "modes", "title", "type"):
        if direct[key] != replayed[key]:
            found.append(f"{key}: {direct[key]} != {replayed[key]}")
    return found


async def snapshot_of(backend: str, output: str, rows: int = 24, cols: int = 80) -> str:
    """What a client attaching after ``output`` receives from a model on ``backend``."""
    model = model_class(backend)(rows, cols, scrollback_lines=500, replay_buffer_size=256 * 1024)
    model.feed(output)
    snapshot = await model.snapshot()
    while model.queued:
        snapshot = await model.snapshot()
    model.close()
    return snapshot


def _steps(text: str, resizes: list[tuple[int, int]]) -> list[reference_terminal.Step]:
    return [("write", text)] + [("resize", rows, cols) for rows, cols in resizes]


async def compare(
    backend: str, scenarios: t.Mapping[str, Scenario], rows: int = 24, cols: int = 80
) -> dict[str, list[str]]:
    """The differences, per scenario, between xterm.js fed the scenario and xterm.js fed the
    snapshot of ``backend``'s model (each then given the same further output and resizes)."""
    terminals = []
    for output, further, resizes in scenarios.values():
        snapshot = await snapshot_of(backend, output, rows, cols)
        terminals += [
            (rows, cols, [("write", output), *_steps(further, resizes)]),
            (rows, cols, [("write", snapshot), *_steps(further, resizes)]),
        ]
    rendered = await asyncio.to_thread(reference_terminal.render, terminals)
    return {
        name: differences(rendered[2 * index], rendered[2 * index + 1])
        for index, name in enumerate(scenarios)
    }


def cases(known: dict[str, dict[str, str]], names: t.Iterable[str]) -> list[t.Any]:
    """Every (backend, scenario), the known differences marked as expected failures."""
    params = []
    for backend in BACKENDS:
        for name in names:
            reason = known[backend].get(name)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            params.append(pytest.param(backend, name, marks=marks, id=f"{backend}-{name}"))
    return params


_compared: dict[str, dict[str, list[str]]] = {}


@pytest.mark.parametrize(("backend", "name"), cases(KNOWN_DIFFERENCES, SCENARIOS))
async def test_a_replayed_screen_is_the_terminals_own(backend: str, name: str) -> None:
    if backend not in _compared:  # (one run of the reference terminal for every scenario)
        _compared[backend] = await compare(backend, SCENARIOS)
    found = _compared[backend][name]
    assert found == [], found[:8]


def _top_then_clear(cols: int) -> str:
    """A shell session as busybox ``top`` leaves it: lines longer than a narrower screen in
    the scrollback, ``top``'s full-width rows redrawn in place, then ``clear`` (home, erase
    below: its rows are gone from the screen) and a prompt."""
    history = "".join(f"$ printf 'line {n} %s'{' x' * 40}\r\nline {n}\r\n" for n in range(30))
    frame = "\x1b[H\x1b[J" + "".join(
        f"{n:5d} root  R  {'/usr/bin/program --flag ' * 5}"[:cols] + "\r\n" for n in range(22)
    )
    return history + frame * 2 + "\r\n$ q\r\n$ clear\r\n\x1b[H\x1b[J$ echo after\r\nafter\r\n$ "


#: Screens resized before a client attaches: (output at 24x100, the resizes that follow).
RESIZED: dict[str, tuple[str, list[tuple[int, int]]]] = {
    # (a font size from 13 to 18: some 100 columns to 73)
    "narrower after top and clear": (_top_then_clear(100), [(24, 73)]),
    "narrower and shorter after top and clear": (_top_then_clear(100), [(17, 73)]),
    "narrower, then wider again": (_top_then_clear(100), [(24, 73), (24, 100)]),
    "wider after top and clear": (_top_then_clear(100), [(24, 130)]),
    "narrower with long lines above the cursor": (
        "".join(f"{n:03d} " + "w" * 90 + "\r\n" for n in range(40)) + "\x1b[12;1H\x1b[J$ ",
        [(24, 73)],
    ),
}

KNOWN_RESIZE_DIFFERENCES: dict[str, dict[str, str]] = {
    "pyte": {
        "narrower with long lines above the cursor": "pyte does not keep soft wraps: no reflow"
    },
    "pyghostty": {},
}


@pytest.mark.parametrize(("backend", "name"), cases(KNOWN_RESIZE_DIFFERENCES, RESIZED))
async def test_a_screen_resized_before_a_reattach_is_the_terminals_own(
    backend: str, name: str
) -> None:
    """The terminal resized (a panel, a font size), then a client attaches (a reload): it gets
    the screen the browser's terminal showed, rows and scrollback (issue 32: after ``top``,
    ``clear`` and a narrower panel, rows that ``clear`` had removed came back above the
    prompt)."""
    output, resizes = RESIZED[name]
    model = model_class(backend)(24, 100, scrollback_lines=500, replay_buffer_size=256 * 1024)
    model.feed(output)
    await model.snapshot()  # (the output was seen at the old size)
    for rows, cols in resizes:
        model.resize(rows, cols)
    snapshot = await model.snapshot()
    while model.queued:
        snapshot = await model.snapshot()
    model.close()
    rows, cols = resizes[-1]
    direct, replayed = await asyncio.to_thread(
        reference_terminal.render,
        [(24, 100, _steps(output, resizes)), (rows, cols, [("write", snapshot)])],
    )
    # (the screen and the cursor: where the scrollback's reflow differs, by a row of those as
    # wide as the old screen, a client sees it only by scrolling back)
    found = [f for f in differences(direct, replayed) if not f.startswith("scrollback")]
    assert found == [], found[:8]


def _run_in_terminal(argv: list[str], keys: list[str], cleanup: list[str] | None = None) -> str:
    """What ``argv`` writes to a 24x80 terminal until it pauses, then after each of ``keys``
    (the program is killed at the end, then ``cleanup`` runs)."""
    rows, cols = 24, 80
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {"TERM": "xterm-256color", "PATH": os.environ["PATH"], "HOME": tempfile.gettempdir()}

    def controlling_terminal() -> None:  # (vttest talks to /dev/tty)
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    process = subprocess.Popen(
        argv,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        preexec_fn=controlling_terminal,  # noqa: PLW1509 - (the test's threads take no locks)
    )
    os.close(follower)
    out = bytearray()

    def read_until_quiet() -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if not ready:
                return
            try:
                out.extend(os.read(leader, 65536))
            except OSError:
                return

    try:
        read_until_quiet()
        for key in keys:
            os.write(leader, key.encode())
            read_until_quiet()
    finally:
        process.kill()
        process.wait()
        os.close(leader)
        if cleanup:
            subprocess.run(cleanup, check=False, capture_output=True)
    return out.decode("utf-8", "replace")


def _text_file() -> str:
    path = Path(tempfile.gettempdir()) / "jtt-fidelity.txt"
    path.write_text("".join(f"{n:04d} some text of a file, and more of it\n" for n in range(200)))
    return str(path)


#: Full-screen programs: (argv, keys sent after the first screen).
PROGRAMS: dict[str, tuple[list[str], list[str]]] = {
    "vim": (["vim", "-u", "NONE", "-N", "-c", "syntax on", _text_file()], ["50Gdd", ":set nu\r"]),
    "less": (["less", _text_file()], [" ", "/0150\r"]),
    "top": (["top", "-d", "60"], []),
    "htop": (["htop", "-d", "600"], []),
    "tmux": (["tmux", "-f", "/dev/null", "-L", f"jtt-fidelity-{os.getpid()}"], ["ls /\r"]),
    "vttest": (["vttest"], ["1\r"]),
}


#: What each backend gets wrong of the programs' screens.
KNOWN_PROGRAM_DIFFERENCES: dict[str, dict[str, str]] = {
    "pyte": {"htop": "pyte loses part of htop's meters (its bars come back blank)"},
    "pyghostty": {
        "the main screen's scroll region under the alternate screen": (
            "the formatter writes the active screen's scroll region only (libghostty-vt keeps one)"
        ),
    },
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("backend", "program"), cases(KNOWN_PROGRAM_DIFFERENCES, PROGRAMS))
async def test_a_full_screen_programs_screen_is_the_terminals_own(
    backend: str, program: str
) -> None:
    argv, keys = PROGRAMS[program]
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed (Debian: apt-get install {argv[0]})")
    cleanup = [*argv[:4], "kill-server"] if program == "tmux" else None
    output = await asyncio.to_thread(_run_in_terminal, argv, keys, cleanup)
    assert len(output) > 200, output
    found = (await compare(backend, {program: (output, "", [])}))[program]
    assert found == [], found[:8]
