"""The screen model inside a running server: what one session's output costs other users, and
what a client that attaches after resizes sees."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import math
import tarfile
import time
import typing as t

from jupyter_tool_terminal.app import ToolTerminalApp

from ..conftest import Api, InstanceFactory, wait_until
from ..support import reference_terminal
from ..support.screen_streams import colour_line
from ..support.terminal_client import TerminalClient

#: The largest model (rows, columns).
LARGE = (150, 400)


def _put_file(container: t.Any, path: str, data: bytes) -> None:
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        info = tarfile.TarInfo(path.rsplit("/", 1)[-1])
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    container.put_archive(path.rsplit("/", 1)[0] or "/", archive.getvalue())


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


async def _echoes(term: TerminalClient, count: int) -> list[float]:
    """Latencies of ``count`` single keystrokes, each timed until its echo arrives."""
    latencies = []
    for index in range(count):
        term.output = ""
        started = time.perf_counter()
        term.send("stdin", "x")
        await term.expect("x", timeout=10)
        latencies.append(time.perf_counter() - started)
        if index % 40 == 39:
            term.send("stdin", "\x15")  # kill the line: the echo stays one character
            await asyncio.sleep(0.01)
    return latencies


async def _drain(term: TerminalClient) -> None:
    """Read (and forget) everything a flooding terminal sends, as a browser would."""
    while await term.ws.read_message() is not None:
        pass


async def test_four_colour_floods_leave_another_users_echo_alone(
    alice: Api, bob: Api, make_instance: InstanceFactory
) -> None:
    """Alice's four sessions at the largest model print lines whose colour changes every cell
    (about 90 KB/s each, in 48 KB pieces with 0.4 s pauses: each pause lets the screen model
    work); bob's echo in his own terminal must not notice (p99 under 4x its quiet value and
    under 50 ms)."""
    hers, his = make_instance(owner="alice"), make_instance(owner="bob")
    piece = "".join(colour_line(index, LARGE[1]) for index in range(4)).encode()
    assert 40_000 < len(piece) < 56_000, len(piece)
    screenful = "".join(colour_line(index, LARGE[1]) for index in range(LARGE[0])).encode()
    await asyncio.to_thread(_put_file, hers, "/tmp/piece", piece)
    await asyncio.to_thread(_put_file, hers, "/tmp/screenful", screenful)

    _, term = await bob.terminal(his.name)
    await term.run("stty -echoctl; true")
    # The server runs in the test process, which holds everything the suite's earlier tests
    # left: its full garbage collections (tens of ms) would be measured as echo latency. A
    # server of its own has no such heap; freeze it out of the collector while measuring.
    gc.collect()
    gc.freeze()
    await _echoes(term, 20)  # warm up
    quiet = await _echoes(term, 200)

    floods: list[TerminalClient] = []
    drains: list[asyncio.Task[None]] = []
    try:
        for _ in range(4):
            _, flood = await alice.terminal(hers.name)
            flood.send("set_size", *LARGE)
            await flood.size_becomes(f"{LARGE[0]} {LARGE[1]}")
            flood.send("stdin", "cat /tmp/screenful; while :; do cat /tmp/piece; sleep 0.4; done\r")
            await flood.expect(r"\x1b\[38;2;")
            floods.append(flood)
            drains.append(asyncio.create_task(_drain(flood)))
        await asyncio.sleep(1)  # every flood is in its rhythm
        loaded = await _echoes(term, 200)
    finally:
        for flood in floods:
            flood.send("stdin", "\x03")
            flood.ws.close()
        for drain in drains:
            drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await drain
        gc.unfreeze()
    quiet_p99, loaded_p99 = _percentile(quiet, 0.99), _percentile(loaded, 0.99)
    summary = (
        f"quiet p50 {_percentile(quiet, 0.5) * 1000:.1f} p99 {quiet_p99 * 1000:.1f} ms, "
        f"loaded p50 {_percentile(loaded, 0.5) * 1000:.1f} p99 {loaded_p99 * 1000:.1f} ms"
    )
    print(summary)
    assert loaded_p99 < 0.050, summary
    assert loaded_p99 < 4 * max(quiet_p99, 0.002), summary


def _stdout(term: TerminalClient, start: int = 0, end: int | None = None) -> str:
    return "".join(frame[1] for frame in term.frames[start:end] if frame[0] == "stdout")


async def test_a_client_attaching_after_resizes_sees_what_the_terminal_shows(
    alice: Api, make_instance: InstanceFactory, tool_app: ToolTerminalApp
) -> None:
    """`seq 1 60`, the window made smaller and larger again, a command, a reload: the screen
    and scrollback that come back are those of the browser's terminal (xterm.js) that saw the
    same output and the same resizes. (pyte dropped the lines that a shrinking screen moves
    into the scrollback, and showed blank rows where a growing one brings them back.)"""
    container = make_instance()
    model, term = await alice.terminal(container.name)
    assert tool_app.session_manager is not None
    session = tool_app.session_manager.sessions[model["id"]]
    term.send("set_size", 24, 80)
    await term.size_becomes("24 80")
    await term.run("seq 1 60")
    steps: list[reference_terminal.Step] = []
    mark = 0
    for rows, cols in ((10, 60), (24, 80)):
        steps.append(("write", _stdout(term, mark)))
        mark = len(term.frames)
        steps.append(("resize", rows, cols))
        term.send("set_size", rows, cols)

        async def resized(size: tuple[int, int] = (rows, cols)) -> bool:
            return session.screen.size == size

        # The terminal is resized before anything is typed (the shell is idle meanwhile), so
        # the reference resizes at this point of the stream.
        await wait_until(resized)
        await term.size_becomes(f"{rows} {cols}")
    await term.run("echo typed after the resizes")
    await term.expect(r"/ # ")  # the prompt after it
    steps.append(("write", _stdout(term, mark)))

    again = await alice.connect(model["id"])
    (_, snapshot) = await again.expect_frame("stdout")
    reference, replayed = await asyncio.to_thread(
        reference_terminal.render, [(24, 80, steps), (24, 80, [("write", snapshot)])]
    )
    assert reference_terminal.screen_text(replayed) == reference_terminal.screen_text(reference)
    assert replayed["cursor"] == reference["cursor"]
    history = reference_terminal.all_text(reference)
    assert (
        reference_terminal.all_text(replayed)
        == history[-len(reference_terminal.all_text(replayed)) :]
    )
    assert [str(n) for n in range(1, 61)] == [line for line in history if line.isdigit()]
    assert [str(n) for n in range(1, 61)] == [
        line for line in reference_terminal.all_text(replayed) if line.isdigit()
    ]
