"""A profile of one open, step by step: what the Docker runtime's start of a shell waits for.

``python benchmarks/open_steps.py [--opens N] [--lease-linger S]`` starts a labelled busybox
container and a :class:`~jupyter_tool_terminal.runtime.docker.DockerRuntime` in this process,
then opens and closes ``N`` shells one after the other (as the open phase does) and prints
the p50 and min of each step: the instance's look-up, the lease (``register``: starting this
server's reaper and its orphan kill when none runs), the exec's create and start, the shell's
first output, and the kill. ``--lease-linger 0`` shows an open that must start the lease
every time (the regression of issue 36); the default keeps it, as the server's default does.

It times the runtime's own methods by wrapping them, so it measures the code as it is.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import statistics
import time
import typing as t

import docker
import docker.errors

from common import IMAGE, OWNER, TOOL
from jupyter_tool_terminal.runtime.docker import DockerRuntime
from jupyter_tool_terminal.tooltypes import parse_tool_type

#: The container this profile starts (and removes at the end).
NAME = "jtt-bench-open-steps"


def timed(steps: dict[str, list[float]], owner: t.Any, method: str) -> None:
    """Replace ``owner.method`` (a coroutine function) by one that records its time."""
    original = getattr(owner, method)

    @functools.wraps(original)
    async def wrapper(*args: t.Any, **kwargs: t.Any) -> t.Any:
        began = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            steps.setdefault(method, []).append(time.perf_counter() - began)

    setattr(owner, method, wrapper)


async def profile(opens: int, linger: float) -> dict[str, list[float]]:
    """Open and close ``opens`` shells; every step's times (seconds)."""
    runtime = DockerRuntime(log=logging.getLogger("open_steps"), lease_linger=linger)
    steps: dict[str, list[float]] = {}
    engine = runtime.default_engine  # (the one engine docker.from_env() finds)
    assert engine is not None
    kills = engine.kills
    for owner, method in (
        (runtime, "get_instance"),
        (kills, "register"),
        (kills, "_start_reaper"),
        (kills, "_kill_orphans"),
        (engine, "_create_exec"),
        (engine, "attach"),
        (runtime, "start_shell"),
    ):
        timed(steps, owner, method)
    tool = parse_tool_type(TOOL, {"shell": ["/bin/sh"]})
    try:
        for index in range(opens + 1):
            began = time.perf_counter()
            instance = await runtime.get_instance(NAME)
            assert instance is not None
            channel = await runtime.start_shell(instance, tool)
            started = time.perf_counter()
            await channel.read(4096)
            shown = time.perf_counter()
            await channel.terminate()
            ended = time.perf_counter()
            if index == 0:  # a warm-up (imports, connections), not counted
                steps.clear()
                continue
            steps.setdefault("first output after start_shell", []).append(shown - started)
            steps.setdefault("open (look-up to first output)", []).append(shown - began)
            steps.setdefault("terminate (the kill)", []).append(ended - shown)
            await asyncio.sleep(0.1)
    finally:
        runtime.close()
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--opens", type=int, default=15)
    parser.add_argument("--lease-linger", type=float, default=60.0)
    args = parser.parse_args()
    engine = docker.from_env()
    with contextlib.suppress(docker.errors.NotFound):
        engine.containers.get(NAME).remove(force=True)
    container = engine.containers.run(
        IMAGE,
        ["sleep", "infinity"],
        name=NAME,
        detach=True,
        init=True,
        network_mode="none",
        labels={"jupyter-tool-terminal.owner": OWNER, "jupyter-tool-terminal.tool": TOOL},
    )
    try:
        steps = asyncio.run(profile(args.opens, args.lease_linger))
    finally:
        container.remove(force=True)
    print(f"{'step':34} {'n':>3} {'p50 ms':>8} {'min ms':>8}")
    for step, values in steps.items():
        median, least = statistics.median(values) * 1000, min(values) * 1000
        print(f"{step:34} {len(values):3} {median:8.1f} {least:8.1f}")


if __name__ == "__main__":
    main()
