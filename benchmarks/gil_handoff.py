"""How late the event loop wakes while the Docker runtime's threads talk to the engine.

An open or a close runs Docker SDK calls (``inspect``, ``exec_create``, ``exec_start``,
``exec_inspect``, a kill exec) in the runtime's thread pool: pure Python (requests, urllib3,
JSON) that holds the interpreter lock. The event loop, woken by a keystroke, must take the lock
back before it can echo it, and a thread that holds it gives it up only after the interpreter's
switch interval (5 ms by default). This measures that wait in one process: how late a 2 ms timer
on the loop fires, alone and while threads call the engine in a loop, with the default switch
interval and a shorter one (``--interval``), taking turns. (On the shared 2-core machine of
issue 36 the shorter interval changed nothing: the loop's waits were the machine's.)

    python benchmarks/gil_handoff.py [--rounds 3] [--seconds 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import threading
import time
import typing as t

import docker

from common import IMAGE, percentile

#: The timer whose lateness is measured (seconds).
TICK = 0.002


async def lateness(seconds: float) -> list[float]:
    """How late (ms) each of the loop's ``TICK`` timers fired, for ``seconds``."""
    late: list[float] = []
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        started = time.perf_counter()
        await asyncio.sleep(TICK)
        late.append((time.perf_counter() - started - TICK) * 1e3)
    return late


def engine_calls(api: t.Any, container: str, stop: threading.Event, count: list[int]) -> None:
    """What an open and a close ask the engine, over and over, until ``stop``."""
    while not stop.is_set():
        api.inspect_container(container)
        created = api.exec_create(container, ["true"])
        api.exec_inspect(created["Id"])
        count[0] += 1


async def measure(
    api: t.Any, container: str, seconds: float, threads: int, interval: float | None
) -> tuple[list[float], float]:
    """The lateness with ``threads`` threads calling the engine (none: 0) at the switch
    ``interval`` (``None``: Python's default), and the engine calls per second."""
    default = sys.getswitchinterval()
    sys.setswitchinterval(interval or default)
    stop, count = threading.Event(), [0]
    workers = [
        threading.Thread(target=engine_calls, args=(api, container, stop, count))
        for _ in range(threads)
    ]
    try:
        for worker in workers:
            worker.start()
        late = await lateness(seconds)
    finally:
        stop.set()
        for worker in workers:
            worker.join()
        sys.setswitchinterval(default)
    return late, count[0] * 3 / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--interval", type=float, default=0.0005)
    args = parser.parse_args(argv)
    client = docker.from_env()
    container = client.containers.run(IMAGE, detach=True, init=True, network_mode="none")
    cases = {
        "no engine calls": (0, None),
        f"engine calls, switch interval {sys.getswitchinterval() * 1e3:g} ms": (
            args.threads,
            None,
        ),
        f"engine calls, switch interval {args.interval * 1e3:g} ms": (args.threads, args.interval),
    }
    found: dict[str, list[list[float]]] = {case: [] for case in cases}
    rates: dict[str, list[float]] = {case: [] for case in cases}
    try:
        for _ in range(args.rounds):
            for case, (threads, interval) in cases.items():
                late, rate = asyncio.run(
                    measure(client.api, container.id, args.seconds, threads, interval)
                )
                found[case].append(late)
                rates[case].append(rate)
    finally:
        with contextlib.suppress(Exception):
            container.remove(force=True)
        client.close()
    print(f"timer lateness (ms) of a {TICK * 1e3:g} ms timer, {args.rounds} rounds taking turns")
    for case, rounds in found.items():
        p50s = [statistics.median(late) for late in rounds]
        p99s = [percentile(late, 0.99) for late in rounds]
        over = [sum(value > 1.0 for value in late) / len(late) for late in rounds]
        print(
            f"{case}: late by over 1 ms {', '.join(f'{v:.1%}' for v in over)}; "
            f"p50 {', '.join(f'{v:.2f}' for v in p50s)}; p99 "
            f"{', '.join(f'{v:.2f}' for v in p99s)}; engine calls/s "
            f"{', '.join(f'{v:.0f}' for v in rates[case])}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
