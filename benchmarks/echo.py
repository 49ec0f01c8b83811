"""Keystroke echo of one session: each key timed from sending it to its echo.

Every target types ``plan.keystrokes`` keys on one terminal, a line each in turn. Beside it, on
every server, the WebSocket hop alone (lagprobe's ``/bench/echo``), and the floor that gives:
hop + C's echo, and what a path adds above it (``echo p50 - hop - C``).

``over_C`` is what the guard checks (``guard.py``): every path's keystrokes paired one by one
with C's, each key timed on the path and then at once on C, and the median of the pairs'
ratios. A line of each in turn is not enough on a loaded machine (the load of one line is not
the next one's: the ratio of the p50s moved 0.5-9x over ten runs); a pair shares its moment.
"""

from __future__ import annotations

import contextlib
import time
import typing as t
import urllib.parse

from client import Client, Term, WsTerm, type_keys
from common import KEYS, LINE, PROMPT, Plan, Target, ms, percentile


async def measure_echoes(
    client: Client, targets: list[Target], plan: Plan
) -> dict[str, dict[str, t.Any]]:
    """``plan.keystrokes`` keystrokes on one terminal of every target, a line of each in turn
    (so that whatever else the machine does hits all alike), one key at a time. On every
    server, as many again into ``/bench/echo`` (``lagprobe.py``): the WebSocket hop alone."""
    terms: dict[str, Term] = {}
    hops: dict[str, Term] = {}
    samples: dict[str, list[float]] = {target.key: [] for target in targets}
    hop_samples: dict[str, list[float]] = {}
    paired: dict[str, list[float]] = {}
    try:
        for target in targets:
            terms[target.key], _ = await client.open(target)
            await type_keys(terms[target.key], [], count=min(20, plan.keystrokes))
            if target.kind != "raw" and target.hop:
                path = "/bench/echo?" + urllib.parse.urlencode({"prompt": PROMPT})
                hops[target.key] = WsTerm("hop", await client.websocket(target, path))
                hop_samples[target.key] = []
        while any(len(values) < plan.keystrokes for values in samples.values()):
            for target in targets:
                left = plan.keystrokes - len(samples[target.key])
                if left > 0:
                    await type_keys(terms[target.key], samples[target.key], count=min(LINE, left))
                    if target.key in hops:
                        await type_keys(
                            hops[target.key], hop_samples[target.key], count=min(LINE, left)
                        )
        reference = next((target for target in targets if target.kind == "raw"), None)
        if reference is not None:
            for target in targets:
                if target is not reference:
                    paired[target.key] = await paired_ratios(
                        terms[target.key], terms[reference.key], plan.keystrokes
                    )
    finally:
        for target in targets:
            if target.key in terms:
                with contextlib.suppress(Exception):
                    await client.close_term(target, terms[target.key])
            if target.key in hops:
                await hops[target.key].close()
    figures: dict[str, dict[str, t.Any]] = {}
    for key, values in samples.items():
        figures[key] = {
            "p50_ms": ms(percentile(values, 0.5)),
            "p99_ms": ms(percentile(values, 0.99)),
            "max_ms": ms(max(values)),
            "n": len(values),
        }
        if paired.get(key):
            figures[key]["over_C"] = round(percentile(paired[key], 0.5), 3)
        if hop_samples.get(key):
            figures[key]["hop_p50_ms"] = ms(percentile(hop_samples[key], 0.5))
            figures[key]["hop_p99_ms"] = ms(percentile(hop_samples[key], 0.99))
    # A server's echo cannot beat its floor: the WebSocket hop alone (same server, no shell)
    # plus the raw exec round trip (C). What lies above that floor is the path's own cost.
    raw = next((target.key for target in targets if target.kind == "raw"), None)
    for key, found in figures.items():
        if raw is not None and key != raw and "hop_p50_ms" in found:
            floor = found["hop_p50_ms"] + figures[raw]["p50_ms"]
            found["floor_p50_ms"] = round(floor, 3)
            found["above_floor_p50_ms"] = round(found["p50_ms"] - floor, 3)
    return figures


async def paired_ratios(term: Term, raw: Term, count: int) -> list[float]:
    """``count`` keystrokes on ``term``, each followed at once by one on ``raw``; the ratio of
    each pair's echo times. Lines are comments, submitted every ``LINE`` keys on both."""
    ratios: list[float] = []
    while len(ratios) < count:
        for both in (term, raw):
            both.buf = ""
            await both.send("#")
            await both.expect("#")
        for index in range(min(LINE, count - len(ratios))):
            key = KEYS[index % len(KEYS)]
            times = []
            for both in (term, raw):
                both.buf = ""
                start = time.perf_counter()
                await both.send(key)
                await both.expect(key)
                times.append(time.perf_counter() - start)
            ratios.append(times[0] / times[1])
        for both in (term, raw):
            await both.send("\r")
            await both.expect(PROMPT)
    return ratios
