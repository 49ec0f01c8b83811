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
    "instance moved",
    "closed by agent",
    "agent revoked",
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
#: The MCP tools an agent can call (`agents/tools.py`), and how a call can end.
AGENT_TOOLS = (
    "list_instances",
    "list_terminals",
    "open_terminal",
    "run_command",
    "send_keys",
    "read_screen",
    "close_terminal",
    "request_control",
)
AGENT_CALL_RESULTS = ("ok", "error", "refused")
AGENT_CALLS = Counter(
    "jupyter_tool_terminal_agent_calls",
    "MCP tool calls of agents, by tool and result (ok; error: the tool ran and failed; refused: "
    "no control, not its terminal, an unknown id, a limit or bad arguments); an unknown tool "
    "counts as tool=unknown",
    ["tool", "result"],
)
AGENT_CONTROL_GRANTS = Counter(
    "jupyter_tool_terminal_agent_control_grants",
    "Times an owner gave an agent control of its terminals",
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


def count_agent_call(tool: str, result: str) -> None:
    """Count one MCP tool call of an agent (an unknown tool's name is not a label value)."""
    AGENT_CALLS.labels(tool if tool in AGENT_TOOLS else "unknown", result).inc()


def _start_known_series() -> None:
    for runtime in RUNTIMES:
        for family in (SESSIONS, OPENS, RESETS, OPEN_SECONDS):
            family.labels(runtime)
    for reason in KILL_REASONS:
        KILLS.labels(label_value(reason))
    for tool in (*AGENT_TOOLS, "unknown"):
        for result in AGENT_CALL_RESULTS:
            AGENT_CALLS.labels(tool, result)


_start_known_series()
