"""Churn: echo p99 of one typing session, quiet and then while sessions open and close.

The opening and closing runs in a process of its own (:func:`churn_worker`, started as
``run.py --churn-worker``), so that the churn's client work is not the measuring client's.
``churn`` is the figure (one loop, at most 5 cycles a second); ``churn_max`` saturates (several
loops as fast as the target goes). Beside the echoes: cycles per second, the machine's CPU per
cycle, and how late the server's event loop ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import sys
import typing as t

from accounting import machine_busy_seconds
from client import Client, loop_lag, type_keys
from common import HERE, BenchError, Plan, Target, ms, percentile

#: The entry point, whose ``--churn-worker`` runs :func:`churn_worker` in a process of its own.
ENTRY = HERE / "run.py"


async def measure_churn(
    client: Client, target: Target, plan: Plan, loops: int, period: float
) -> dict[str, t.Any]:
    """Echo p99 of one typing session, quiet and then while a separate process opens and
    closes sessions of the same target (``loops`` loops, each cycle taking at least ``period``
    seconds), so that the churn's client work is not the measuring client's."""
    term, _ = await client.open(target)
    loop = asyncio.get_running_loop()
    pause = (0.01, 0.03)
    count = int(plan.churn_seconds / 0.01) + 1
    worker: asyncio.subprocess.Process | None = None
    try:
        await type_keys(term, [], count=20)
        await loop_lag(client, target)
        quiet: list[float] = []
        quiet_began, quiet_busy = loop.time(), machine_busy_seconds()
        await type_keys(
            term, quiet, count=count, deadline=loop.time() + plan.churn_seconds, pause=pause
        )
        quiet_rate = (machine_busy_seconds() - quiet_busy) / (loop.time() - quiet_began)
        quiet_lag = await loop_lag(client, target)
        spec = {
            "target": dataclasses.asdict(target),
            "seconds": plan.churn_seconds + 1.0,
            "concurrency": loops,
            "period": period,
        }
        worker = await asyncio.create_subprocess_exec(
            sys.executable,
            str(ENTRY),
            "--churn-worker",
            json.dumps(spec),
            stdout=asyncio.subprocess.PIPE,
        )
        assert worker.stdout is not None
        line = await asyncio.wait_for(worker.stdout.readline(), 30)
        if line.strip() != b"started":
            raise BenchError(f"churn worker did not start: {line!r}")
        churn_began, churn_busy = loop.time(), machine_busy_seconds()
        # Let the churn get going before measuring.
        await asyncio.sleep(0.5)
        await loop_lag(client, target)
        profiling = bool(os.environ.get("BENCH_STALL_MS") or os.environ.get("BENCH_CPU_MS"))
        if profiling and target.kind != "raw":
            await client.request(target, "GET", "/bench/stalls")  # from here on
        busy: list[float] = []
        await type_keys(
            term, busy, count=count, deadline=loop.time() + plan.churn_seconds, pause=pause
        )
        busy_lag = await loop_lag(client, target)
        # What the server's loop ran while late, with ``--stalls`` (lagprobe.py).
        stalls = (
            await client.request(target, "GET", "/bench/stalls")
            if profiling and target.kind != "raw"
            else None
        )
        report, _ = await asyncio.wait_for(worker.communicate(), plan.churn_seconds + 60)
        # The machine's CPU over the churn, less what typing alone costs, per cycle.
        churn_cpu = machine_busy_seconds() - churn_busy - quiet_rate * (loop.time() - churn_began)
        summary = json.loads(report.decode().strip().splitlines()[-1])
        worker = None
    finally:
        if worker is not None and worker.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                worker.kill()
            await worker.wait()
        await client.close_term(target, term)
    # A churn open that fails (see ``Client.open`` on lost input) is counted, not fatal: the
    # figure is the typing session's.
    if summary["cycles"] == 0:
        raise BenchError(f"churn: {summary}")
    quiet_p99, busy_p99 = percentile(quiet, 0.99), percentile(busy, 0.99)
    return {
        "quiet_p50_ms": ms(percentile(quiet, 0.5)),
        "quiet_p99_ms": ms(quiet_p99),
        "churn_p50_ms": ms(percentile(busy, 0.5)),
        "churn_p99_ms": ms(busy_p99),
        "churn_max_ms": ms(max(busy)),
        "delta_p99_ms": ms(busy_p99 - quiet_p99),
        "keystrokes": len(busy),
        "cycles": summary["cycles"],
        "cycles_per_s": round(summary["cycles"] / summary["seconds"], 1),
        "machine_cpu_ms_per_cycle": ms(churn_cpu / summary["cycles"]),
        "churn_failures": summary["failure_count"],
        "churn_failure_examples": summary["failures"],
        "loops": loops,
        "period_s": period,
        "quiet_loop_lag": quiet_lag,
        "churn_loop_lag": busy_lag,
        **({"churn_stalls": stalls} if stalls is not None else {}),
    }


async def churn_worker(spec: dict[str, t.Any]) -> dict[str, t.Any]:
    """Open and close sessions of one target until the time is up (run in its own process)."""
    target = Target(**spec["target"])
    client = Client()
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + float(spec["seconds"])
    cycles = 0
    failures: list[str] = []

    async def loop_once() -> None:
        nonlocal cycles
        period = float(spec["period"])
        for _ in range(10_000):
            if loop.time() >= deadline:
                return
            begun = loop.time()
            try:
                term, _ = await client.open(target, timeout=10)
                await client.close_term(target, term)
                cycles += 1
            except Exception as error:  # noqa: BLE001 - counted as a failure
                failures.append(str(error))
                await asyncio.sleep(0.1)
            await asyncio.sleep(max(0.0, begun + period - loop.time()))

    print("started", flush=True)
    try:
        await asyncio.gather(*(loop_once() for _ in range(int(spec["concurrency"]))))
    finally:
        client.close()
    return {
        "cycles": cycles,
        "failure_count": len(failures),
        "failures": failures[:3],
        "seconds": loop.time() - start,
    }
