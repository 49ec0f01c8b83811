"""Prometheus metrics of the tool terminals, exported beside jupyter_server's own at /metrics.

They live in prometheus_client's default registry, as jupyter_server's do, so its ``/metrics``
handler serves them; the names follow https://prometheus.io/docs/practices/naming/.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

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
REFUSALS = Counter(
    "jupyter_tool_terminal_refusals",
    "Tool terminal requests refused (reason: the HTTP status, or 'access revoked' for an open "
    "terminal closed by a failed access check)",
    ["reason"],
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
