"""Open time: from the request for a terminal to a shell proven ready (its echoed marker).

Every target opens and closes ``plan.opens`` terminals, taking turns; the figures are the p50
and p95 of those opens (``open.p50_ms``, ``open.p95_ms``).
"""

from __future__ import annotations

import asyncio
import typing as t

from client import Client
from common import Plan, Target, ms, percentile


async def measure_opens(
    client: Client, targets: list[Target], plan: Plan
) -> dict[str, dict[str, t.Any]]:
    """Open (and close) ``plan.opens`` terminals of every target, taking turns so that drift of
    the machine affects all alike, with a pause after each so no close overlaps an open."""
    times: dict[str, list[float]] = {target.key: [] for target in targets}
    for _ in range(plan.opens):
        for target in targets:
            term, elapsed = await client.open(target)
            times[target.key].append(elapsed)
            await client.close_term(target, term)
            await asyncio.sleep(0.1)
    return {key: open_figures(values) for key, values in times.items()}


def open_figures(times: list[float]) -> dict[str, t.Any]:
    """The figures of some opens: p50 and p95 in ms, and how many."""
    return {
        "p50_ms": ms(percentile(times, 0.5)),
        "p95_ms": ms(percentile(times, 0.95)),
        "n": len(times),
    }
