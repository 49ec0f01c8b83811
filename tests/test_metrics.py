"""Prometheus metrics beside jupyter_server's own at /metrics."""

from __future__ import annotations

import typing as t

from prometheus_client.parser import text_string_to_metric_families

from .conftest import ALICE, Api, InstanceFactory


async def _samples(jp_fetch: t.Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = await jp_fetch("metrics", headers=ALICE)
    samples = {}
    for family in text_string_to_metric_families(response.body.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _delta(
    before: dict[t.Any, float], after: dict[t.Any, float], name: str, **labels: str
) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


async def test_sessions_opens_refusals_kills_and_open_latency_are_exported(
    alice: Api, bob: Api, jp_fetch: t.Any, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    before = await _samples(jp_fetch)
    # jupyter_server's own metrics are served here too.
    assert any(name.startswith("jupyter_server_info") for name, _ in before), sorted(before)[:5]

    model = await alice.open_session(container.name)
    opened = await _samples(jp_fetch)
    assert _delta(before, opened, "jupyter_tool_terminal_opens_total", runtime="docker") == 1
    assert _delta(before, opened, "jupyter_tool_terminal_sessions", runtime="docker") == 1
    assert _delta(before, opened, "jupyter_tool_terminal_open_seconds_count", runtime="docker") == 1
    assert _delta(before, opened, "jupyter_tool_terminal_open_seconds_sum", runtime="docker") > 0

    status, _ = await bob.status("POST", "sessions", body={"instance": container.name})
    assert status == 403
    await alice.call("DELETE", "sessions", model["id"])
    after = await _samples(jp_fetch)
    assert _delta(opened, after, "jupyter_tool_terminal_refusals_total", reason="403") == 1
    assert _delta(opened, after, "jupyter_tool_terminal_kills_total", reason="deleted") == 1
    assert _delta(before, after, "jupyter_tool_terminal_sessions", runtime="docker") == 0
