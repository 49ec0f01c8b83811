"""Many sessions: ``n`` concurrent terminals of one target, all typing, for each ``n`` of the plan.

For each ``n``: echo p50/p99 while every session types (a key every 0.1-0.3 s), failures, the
cores the server, the Docker Engine and this client used meanwhile, the server's memory per
session, how late the server's and this client's event loops ran, and how long the teardown
took; then how long the engine took to be idle again.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import time
import typing as t

from accounting import cpu_seconds, engine_processes, server_processes, tree_memory
from client import Client, Term, loop_lag, type_keys, wait_no_sessions
from common import MIB, Plan, Target, ms, percentile
from lab import Lab


async def measure_scale(
    client: Client, target: Target, n: int, plan: Plan, server_pid: int | None
) -> dict[str, t.Any]:
    """``n`` concurrent sessions, all typing (a key every 0.1-0.3 s) for ``scale_seconds``.
    Also the CPU the server, the Docker Engine and this client used while they typed."""
    before = await asyncio.to_thread(tree_memory, server_pid) if server_pid else None
    gate = asyncio.Semaphore(16)
    failures: list[str] = []

    async def open_one() -> Term | None:
        async with gate:
            try:
                term, _ = await client.open(target, timeout=60, resend_after=5)
                return term
            except Exception as error:  # noqa: BLE001 - counted as a failure
                failures.append(f"open: {error}")
                return None

    opened = [term for term in await asyncio.gather(*(open_one() for _ in range(n))) if term]
    samples: list[float] = []
    loop = asyncio.get_running_loop()

    async def typist(term: Term, deadline: float) -> None:
        await asyncio.sleep(random.uniform(0, 0.3))
        try:
            await type_keys(
                term,
                samples,
                count=int(plan.scale_seconds / 0.1) + 1,
                deadline=deadline,
                pause=(0.1, 0.3),
                timeout=10,
            )
        except Exception as error:  # noqa: BLE001 - recorded, the run goes on
            failures.append(f"typing: {error}")

    try:
        servers = await asyncio.to_thread(server_processes, server_pid)
        engine = await asyncio.to_thread(engine_processes)
        # The client holds hundreds of connections: a full garbage collection of its heap would
        # stall every echo it is timing, whichever target it measures. Everything allocated so
        # far is left out of collections while they type.
        gc.collect()
        gc.freeze()
        cpu_before = [cpu_seconds(servers), cpu_seconds(engine), time.process_time()]
        await loop_lag(client, target)
        begun = loop.time()
        deadline = begun + plan.scale_seconds
        client_lag = asyncio.create_task(client_loop_lag(deadline))
        await asyncio.gather(*(typist(term, deadline) for term in opened))
        typing = loop.time() - begun
        cpu_after = [cpu_seconds(servers), cpu_seconds(engine), time.process_time()]
        server_lag = await loop_lag(client, target)
        own_lag = await client_lag
        after = await asyncio.to_thread(tree_memory, server_pid) if server_pid else None
    finally:
        gc.unfreeze()

        async def close_one(term: Term) -> None:
            async with gate:
                with contextlib.suppress(Exception):
                    await client.close_term(target, term)

        closing = loop.time()
        await asyncio.gather(*(close_one(term) for term in opened))
        # A close the client gave up waiting for may still be running in the server: wait
        # (bounded) until the server holds no session, so the next measurement starts clean.
        left = await wait_no_sessions(client, target, 180)
        teardown = loop.time() - closing
    sessions = max(len(opened), 1)
    cores = [round((b - a) / typing, 2) for a, b in zip(cpu_before, cpu_after, strict=True)]
    found: dict[str, t.Any] = {
        "n": n,
        "opened": len(opened),
        "failures": len(failures),
        "failure_examples": failures[:3],
        "keystrokes": len(samples),
        "keystrokes_per_s": round(len(samples) / typing, 1),
        "echo_p50_ms": ms(percentile(samples, 0.5)),
        "echo_p99_ms": ms(percentile(samples, 0.99)),
        "cpu_cores_server": cores[0] if server_pid else None,
        "cpu_cores_engine": cores[1],
        "cpu_cores_client": cores[2],
        "teardown_s": round(teardown, 1),
        "sessions_left_after_teardown": left,
        # Where the worst echoes waited: the server's event loop, or this client's own.
        "server_loop_lag": server_lag,
        "client_loop_lag": own_lag,
    }
    if before is not None and after is not None:
        found.update(
            rss_mib_per_session=round((after["rss"] - before["rss"]) / sessions / MIB, 3),
            pss_mib_per_session=round((after["pss"] - before["pss"]) / sessions / MIB, 3),
            server_processes=after["processes"],
            server_rss_mib=round(after["rss"] / MIB, 1),
        )
    return found


async def client_loop_lag(deadline: float, tick: float = 0.01) -> dict[str, t.Any]:
    """How late this client's own event loop ran a timer until ``deadline``: a client that
    stalls (a garbage collection among hundreds of connections) delays the echoes it times."""
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    collected = gc.get_stats()
    while loop.time() < deadline:
        start = time.perf_counter()
        await asyncio.sleep(tick)
        lags.append(time.perf_counter() - start - tick)
    full = gc.get_stats()[2]["collections"] - collected[2]["collections"]
    return {
        "p99_ms": ms(percentile(lags, 0.99)),
        "max_ms": ms(max(lags, default=0.0)),
        "over_20ms": sum(1 for lag in lags if lag > 0.02),
        "gc_full": full,
    }


async def measure_scales(
    client: Client,
    lab: Lab,
    target: Target,
    ns: list[int],
    plan: Plan,
    server_pid: int | None,
    container: str,
    errors: list[str],
) -> dict[str, t.Any]:
    """:func:`measure_scale` of one target for every ``n`` of ``ns`` in turn, printed as it
    goes, each followed by a wait until the engine is idle again (when there is a ``container``:
    see :meth:`~lab.Lab.wait_engine_idle`). A failure is recorded in ``errors``, not fatal."""
    loop = asyncio.get_running_loop()
    key = target.key
    scale: dict[str, t.Any] = {}
    for n in ns:
        begun = loop.time()
        try:
            scale[str(n)] = await measure_scale(
                client,
                target,
                n,
                plan,
                server_pid,
            )
            print(
                f"  {key:4} scale N={n:<4} {scale[str(n)]}  ({loop.time() - begun:.1f} s)",
                flush=True,
            )
            if scale[str(n)]["failures"]:
                errors.append(f"{key} scale N={n}: {scale[str(n)]['failure_examples']}")
            if container:
                settled, processes = await asyncio.to_thread(lab.wait_engine_idle, container)
                scale[str(n)]["engine_settle_s"] = settled
                scale[str(n)]["container_processes_after"] = processes
                print(
                    f"  (engine idle again after {settled} s; {processes} processes"
                    " left in the container)",
                    flush=True,
                )
        except Exception as error:  # noqa: BLE001 - counted as a failure
            errors.append(f"{key} scale N={n}: {type(error).__name__}: {error}")
            print(f"  {key:4} scale N={n} FAILED: {error}", flush=True)
    return scale
