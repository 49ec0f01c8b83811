"""Prometheus metrics beside jupyter_server's own at /metrics."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import typing as t

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ..conftest import ALICE, Api, InstanceFactory


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
    assert (
        _delta(
            opened, after, "jupyter_tool_terminal_refusals_total", status="403", reason="forbidden"
        )
        == 1
    )
    assert _delta(opened, after, "jupyter_tool_terminal_kills_total", reason="deleted") == 1
    assert _delta(before, after, "jupyter_tool_terminal_sessions", runtime="docker") == 0


#: Label values as Prometheus' naming practice has them: snake_case words, or a status code.
CONVENTIONAL_VALUE = re.compile(r"[a-z0-9]+(_[a-z0-9]+)*")


async def test_label_values_are_conventional_and_known_series_exist_from_the_start(
    alice: Api, bob: Api, jp_fetch: t.Any, make_instance: InstanceFactory
) -> None:
    before = await _samples(jp_fetch)
    # Every reason a session can end for has its series before any session ended for it.
    for reason in ("deleted", "exit", "idle", "last_client_disconnected", "server_shutdown"):
        assert ("jupyter_tool_terminal_kills_total", (("reason", reason),)) in before, reason
    for runtime in ("docker", "local"):
        for name in ("opens_total", "resets_total"):
            key = (f"jupyter_tool_terminal_{name}", (("runtime", runtime),))
            assert key in before, key

    container = make_instance()
    model, term = await alice.terminal(container.name)
    await alice.call("POST", "sessions", model["id"], "reset")
    await bob.status("POST", "sessions", body={"instance": container.name})
    await alice.status("GET", "sessions", "Z" * 32)
    term.send("stdin", "exit 3\r")
    await term.wait_closed()
    after = await _samples(jp_fetch)
    assert _delta(before, after, "jupyter_tool_terminal_resets_total", runtime="docker") == 1
    assert (
        _delta(
            before, after, "jupyter_tool_terminal_refusals_total", status="403", reason="forbidden"
        )
        == 2
    )
    assert _delta(before, after, "jupyter_tool_terminal_kills_total", reason="exit") == 1
    ours = [key for key in after if key[0].startswith("jupyter_tool_terminal_")]
    for name, labels in ours:
        for label, value in labels:
            # (An engine's name is the operator's, or a Swarm node's host name: kept as is.)
            if label not in {"le", "engine"}:
                assert CONVENTIONAL_VALUE.fullmatch(value), (name, label, value)


async def test_a_shell_that_exits_closes_the_websocket_with_1000(
    alice: Api, make_instance: InstanceFactory
) -> None:
    _, term = await alice.terminal(make_instance().name)
    term.send("stdin", "exit 0\r")
    assert await term.expect_frame("disconnect") == ["disconnect", 1]
    await term.wait_closed()
    assert term.ws.close_code == 1000


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian: prometheus) absent")
async def test_promtool_finds_nothing_to_say_about_the_metrics(
    alice: Api, jp_fetch: t.Any, make_instance: InstanceFactory
) -> None:
    await alice.terminal(make_instance().name)
    response = await jp_fetch("metrics", headers=ALICE)
    text = response.body.decode()
    ours = "".join(line + "\n" for line in text.splitlines() if "jupyter_tool_terminal_" in line)
    result = await asyncio.to_thread(
        subprocess.run,
        ["promtool", "check", "metrics"],
        input=ours,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout + result.stderr == ""
