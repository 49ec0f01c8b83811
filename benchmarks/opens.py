"""Open time: from the request for a terminal to a shell proven ready (its echoed marker).

Every target opens and closes ``plan.opens`` terminals, taking turns; the figures are the p50
and p95 of those opens (``open.p50_ms``, ``open.p95_ms``), and for a server the p50 of its
steps: the REST answer (``post_p50_ms``) and the WebSocket's upgrade (``websocket_p50_ms``),
each from the request. ``over_C`` is each open's ratio to the raw exec's open of the same turn
(its median), the figure the guard checks (``guard.py``): the same turn shares the machine's
load, so the ratio holds still where the times do not.
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
    steps: dict[str, dict[str, list[float]]] = {target.key: {} for target in targets}
    for _ in range(plan.opens):
        for target in targets:
            term, elapsed = await client.open(target)
            times[target.key].append(elapsed)
            for step, seconds in client.last_steps.items():
                steps[target.key].setdefault(step, []).append(seconds)
            await client.close_term(target, term)
            await asyncio.sleep(0.1)
    figures = {key: open_figures(values, steps[key]) for key, values in times.items()}
    raw = next((target.key for target in targets if target.kind == "raw"), None)
    if raw is not None:
        for key, values in times.items():
            if key != raw:
                ratios = [mine / theirs for mine, theirs in zip(values, times[raw], strict=True)]
                figures[key]["over_C"] = round(percentile(ratios, 0.5), 3)
    return figures


def open_figures(
    times: list[float], steps: dict[str, list[float]] | None = None
) -> dict[str, t.Any]:
    """The figures of some opens: p50 and p95 in ms, how many, and the p50 of each step."""
    figures: dict[str, t.Any] = {
        "p50_ms": ms(percentile(times, 0.5)),
        "p95_ms": ms(percentile(times, 0.95)),
        "n": len(times),
    }
    for step, values in (steps or {}).items():
        figures[f"{step}_p50_ms"] = ms(percentile(values, 0.5))
    return figures
