"""Prometheus metrics of the tool terminals, exported beside jupyter_server's own at /metrics.

They live in prometheus_client's default registry, as jupyter_server's do, so its ``/metrics``
handler serves them; the names follow https://prometheus.io/docs/practices/naming/. Label
values are snake_case words or HTTP status codes, and every value known in advance has its
series from the start (at 0), so that a query or an alert finds it before the first event.
"""

from __future__ import annotations

import re

from prometheus_client import Counter, Gauge, Histogram

#: The runtimes a session can run in (`Instance.runtime`).
RUNTIMES = ("docker", "local")
#: Why sessions end (the `close` audit events' reasons); another reason gets its own series
#: when it first happens.
KILL_REASONS = (
    "deleted",
    "exit",
    "idle",
    "instance stopped",
    "last client disconnected",
    "never attached",
    "access revoked",
    "failed to start",
    "reset failed",
    "server shutdown",
    "engine unreachable",
)

SESSIONS = Gauge(
    "jupyter_tool_terminal_sessions",
    "Tool terminal sessions open now",
    ["runtime"],
)
OPENS = Counter(
    "jupyter_tool_terminal_opens",
    "Tool terminal sessions opened",
    ["runtime"],
)
RESETS = Counter(
    "jupyter_tool_terminal_resets",
    "Tool terminal shells restarted by a reset (POST .../reset)",
    ["runtime"],
)
REFUSALS = Counter(
    "jupyter_tool_terminal_refusals",
    "Tool terminal requests refused (status: the HTTP status; reason: its phrase in snake_case, "
    "or access_revoked for an open terminal closed by a failed access check)",
    ["status", "reason"],
)
KILLS = Counter(
    "jupyter_tool_terminal_kills",
    "Tool terminal sessions ended with their processes killed, by reason",
    ["reason"],
)
OPEN_SECONDS = Histogram(
    "jupyter_tool_terminal_open_seconds",
    "Seconds to open a tool terminal session (until its shell started)",
    ["runtime"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)

ENGINE_UP = Gauge(
    "jupyter_tool_terminal_engine_up",
    "Whether each Docker engine of c.DockerRuntime.engines answers (1) or not (0)",
    ["engine"],
)
ENGINE_SESSIONS = Gauge(
    "jupyter_tool_terminal_engine_sessions",
    "Tool terminal shells open now on each Docker engine of c.DockerRuntime.engines",
    ["engine"],
)
ENGINE_OPENS = Counter(
    "jupyter_tool_terminal_engine_opens",
    "Tool terminal shells opened on each Docker engine of c.DockerRuntime.engines",
    ["engine"],
)
ENGINE_KILL_FAILURES = Counter(
    "jupyter_tool_terminal_engine_kill_failures",
    "Kills that could not run when asked (engine unreachable, container paused) and wait, "
    "per Docker engine of c.DockerRuntime.engines",
    ["engine"],
)


def label_value(phrase: str) -> str:
    """``phrase`` as a label value: lower-case words joined by ``_`` ("Too Many Requests" ->
    "too_many_requests")."""
    return "_".join(re.findall(r"[a-z0-9]+", phrase.lower())) or "unknown"


def count_refusal(status: int, reason: str) -> None:
    """Count a request refused with HTTP ``status`` for ``reason`` (the status's phrase, or
    what more precisely refused it)."""
    REFUSALS.labels(str(status), label_value(reason)).inc()


def count_kill(reason: str) -> None:
    """Count a session that ended for ``reason`` (as its `close` audit event says)."""
    KILLS.labels(label_value(reason)).inc()


def _start_known_series() -> None:
    for runtime in RUNTIMES:
        for family in (SESSIONS, OPENS, RESETS, OPEN_SECONDS):
            family.labels(runtime)
    for reason in KILL_REASONS:
        KILLS.labels(label_value(reason))


_start_known_series()
