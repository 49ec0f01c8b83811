"""What the screen model costs a session: flood throughput and echo latency, with and without it.

A small focused measurement (the full benchmark is ``benchmarks/run.py``): one real Docker
shell per round, driven through :class:`ToolTerminal` itself (the model sits in its output pump), by
a client that takes every frame at once, so the model's share is not hidden behind WebSocket
costs. Rounds alternate with and without the model (its ``feed`` replaced by a no-op), and
each figure is the median of the rounds.

    python benchmarks/screen_cost.py [--rounds 3] [--megabytes 50] [--echoes 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import time
import typing as t
import uuid

import docker

from jupyter_tool_terminal.runtime.docker import DockerRuntime
from jupyter_tool_terminal.runtime.docker_engine import OWNER_LABEL, TOOL_LABEL
from jupyter_tool_terminal.session import ToolTerminal
from jupyter_tool_terminal.tooltypes import ToolType

IMAGE = "jupyter-tool-terminal-test:latest"
TOOL = ToolType(name="bench", display_name="Bench")


class Client:
    """Takes every frame at once and wakes whoever waits for a text to appear in the output."""

    size: tuple[int, int] | None = (24, 80)
    principal = "bench"
    observer = False

    def __init__(self) -> None:
        self._needle = ""
        self._tail = ""
        self._found = asyncio.Event()

    def send_frame(self, frame: str | bytes) -> None:
        message = json.loads(frame)
        if message[0] == "stdout" and self._needle:
            text = self._tail + message[1]
            if self._needle in text:
                self._needle = ""
                self._found.set()
            self._tail = text[-len(self._needle) :] if self._needle else ""

    def end(self, code: int | None = None, reason: str | None = None) -> None:
        """Nothing to close."""

    def expect(self, needle: str) -> asyncio.Event:
        """An event set once ``needle`` appears in output that arrives from now on."""
        self._needle, self._tail = needle, ""
        self._found = asyncio.Event()
        return self._found


async def one_round(
    runtime: DockerRuntime, instance: t.Any, *, model: bool, megabytes: int, echoes: int
) -> dict[str, float]:
    session = ToolTerminal(
        owner="bench",
        username="bench",
        instance=instance,
        tool=TOOL,
        runtime=runtime,
        replay_buffer_size=64 * 1024,
        on_ended=lambda *_: None,
        log=logging.getLogger("bench"),
    )
    if not model:
        session.screen.feed = lambda text: None  # type: ignore[method-assign]
    await session.start()
    client = Client()
    await session.attach(client)
    try:
        session.resize_requested()
        ready = client.expect("READY\r\n")
        session.write("stty -echoctl; echo REA''DY\r")
        await ready.wait()
        # Echo: one keystroke, then wait for it to come back.
        latencies = []
        for index in range(echoes):
            echoed = client.expect("x")
            started = time.perf_counter()
            session.write("x")
            await echoed.wait()
            latencies.append(time.perf_counter() - started)
            if index % 50 == 49:
                session.write("\x15")  # kill the line
        session.write("\x15")
        # Flood: megabytes of output, timed until its end marker.
        done = client.expect("\nDONE")
        started = time.perf_counter()
        session.write(
            f"head -c {megabytes * 1000000} /dev/zero | tr '\\000' a; echo; echo DO''NE\r"
        )
        await done.wait()
        seconds = time.perf_counter() - started
        return {
            "throughput_mb_s": megabytes / seconds,
            "echo_p50_ms": statistics.median(latencies) * 1000,
        }
    finally:
        await session.close("bench over")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--megabytes", type=int, default=50)
    parser.add_argument("--echoes", type=int, default=300)
    options = parser.parse_args()
    engine = docker.from_env()
    container = engine.containers.run(
        IMAGE,
        name=f"jtt-screen-cost-{uuid.uuid4().hex[:8]}",
        detach=True,
        init=True,
        network_mode="none",
        labels={OWNER_LABEL: "bench", TOOL_LABEL: "bench"},
    )
    runtime = DockerRuntime()
    try:
        instance = await runtime.get_instance(container.name)
        results: dict[bool, list[dict[str, float]]] = {True: [], False: []}
        for index in range(options.rounds):
            # Alternate which goes first: a round's first session pays for warming up.
            for model in (True, False) if index % 2 else (False, True):
                results[model].append(
                    await one_round(
                        runtime,
                        instance,
                        model=model,
                        megabytes=options.megabytes,
                        echoes=options.echoes,
                    )
                )
        summary = {
            ("with" if model else "without"): {
                key: round(statistics.median(r[key] for r in rounds), 4)
                for key in ("throughput_mb_s", "echo_p50_ms")
            }
            for model, rounds in results.items()
        }
        summary["cost"] = {
            "throughput": round(
                1 - summary["with"]["throughput_mb_s"] / summary["without"]["throughput_mb_s"], 4
            ),
            "echo_p50_ms": round(
                summary["with"]["echo_p50_ms"] - summary["without"]["echo_p50_ms"], 4
            ),
        }
        print(json.dumps(summary, indent=2))
    finally:
        runtime.close()
        container.remove(force=True)
        engine.close()


if __name__ == "__main__":
    asyncio.run(main())
