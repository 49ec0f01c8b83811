"""Output: floods stay bounded in memory, slow clients apply backpressure, UTF-8 arrives intact."""

from __future__ import annotations

import asyncio
import re
import statistics
import time
import typing as t

from .conftest import Api, InstanceFactory, wait_until


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    msg = "no VmRSS"
    raise AssertionError(msg)


async def test_every_byte_of_a_large_output_arrives(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    _, term = await alice.terminal(container.name)
    rss_before = _rss_mib()
    out = await term.run("head -c 5000000 /dev/zero | tr '\\000' a; echo", timeout=60)
    assert out.count("a") == 5_000_000
    assert set(out) <= {"a", "\r", "\n"}
    assert _rss_mib() - rss_before < 128


async def test_a_client_that_stops_reading_applies_backpressure(
    alice: Api, bob: Api, make_instance: InstanceFactory
) -> None:
    flooded, quiet = make_instance(owner="alice"), make_instance(owner="bob")
    _, flood = await alice.terminal(flooded.name)
    _, other = await bob.terminal(quiet.name)
    await other.run("true")
    rss_before = _rss_mib()
    flood.send("stdin", "yes flood-line-with-some-length\r")
    await flood.expect("flood-line-with-some-length\r\nflood-line")

    # Alice's client reads nothing for a while; meanwhile bob types.
    latencies = []
    states: list[str] = []
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        started = time.monotonic()
        assert await other.run("echo ok") == "ok\r\n"
        latencies.append(time.monotonic() - started)
        top = await asyncio.to_thread(flooded.top, ps_args="-eo pid,stat,args")
        states += [row[1] for row in top["Processes"] if row[2].startswith("yes ")]
    grown = _rss_mib() - rss_before
    assert grown < 64, f"server memory grew by {grown:.0f} MiB"
    # `yes` spends its time blocked on the full terminal: the server stopped reading it.
    assert states.count("S") + states.count("S+") >= len(states) * 0.7, states
    # Bob's every command completed (asserted above); one slow sample on a busy machine is
    # no stall, a median over the flood is.
    assert statistics.median(latencies) < 0.5, latencies

    # Alice reads again: the flood resumes, and Ctrl-C still works.
    flood.output = ""
    flood.send("stdin", "\x03")
    assert await flood.run("echo recovered", timeout=30) == "recovered\r\n"


async def test_utf8_split_at_every_byte_offset_arrives_intact(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    _, term = await alice.terminal(container.name)
    text = "é€😀"
    data = text.encode()
    octal = "".join(f"\\{byte:03o}" for byte in data)
    assert len(data) == 9
    for offset in range(1, len(data)):
        head, tail = octal[: offset * 4], octal[offset * 4 :]
        # Two writes, a pause between: the server reads them as separate chunks.
        command = f"printf '[{head}'; sleep 0.05; printf '{tail}]\\n'"
        out = await term.run(command)
        assert out == f"[{text}]\r\n", (offset, out)
    out = await term.run("printf '<\\377\\200>\\n'")
    assert out == "<\ufffd\ufffd>\r\n"
    # A truncated sequence at the end of the stream becomes U+FFFD too, not an error.
    term.send("stdin", "printf '\\360\\237'; exit 0\r")
    assert await term.expect_frame("exit") == ["exit", 0]
    assert re.search("\ufffd", term.output)


async def test_output_before_a_client_attaches_is_replayed(
    alice: Api, make_instance: InstanceFactory, tool_types: dict[str, t.Any]
) -> None:
    container = make_instance(tool="course")
    model = await alice.open_session(container.name)

    # Connect only once the shell has printed (output moves last_activity), while nobody watched.
    async def printed() -> bool:
        session = await alice.call("GET", "sessions", model["id"])
        return bool(session["last_activity"] != session["created"])

    await wait_until(printed)
    term = await alice.connect(model["id"])
    await term.expect("STARTUP-BANNER")


async def test_replay_to_a_reconnecting_client_is_bounded(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    model, first = await alice.terminal(container.name)
    await first.run("head -c 1000000 /dev/zero | tr '\\000' b; echo", timeout=60)
    second = await alice.connect(model["id"])
    replay = await second.expect_frame("stdout")
    assert 0 < len(replay[1]) <= 64 * 1024
