"""What every part of the benchmark (``run.py`` and the modules beside it) shares.

Where things are, the conventions every measured shell follows (its prompt, the ready marker,
the keys typed), how much a run measures (:class:`Plan`), what a measured path is
(:class:`Target`), the error a failed path raises, and the percentile every figure is cut with.
It measures nothing itself.
"""

from __future__ import annotations

import dataclasses
import math
import typing as t
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
IMAGE = "jupyter-tool-terminal-test:latest"
OWNER = "bench"
TOOL = "bench"
#: The id of the local runtime's tool instance.
LOCAL_INSTANCE = "bench-local"
RUN_LABEL = "jupyter-tool-terminal-bench.run"
#: The prompt every shell gets; typed as ``'@@''P> '`` so the echo of the command never matches.
PROMPT = "@@P> "
READY_COMMAND = "PS1='@@''P> '; echo READY_$((6*7))\r"
READY = "READY_42"
#: Keystrokes cycle through letters that no escape sequence of busybox ash ends with.
KEYS = "abcdefgijkopqrsuvwxyz"
#: Keystrokes per line before the line is submitted (keeps lines shorter than 80 columns).
LINE = 40
MIB = 1024 * 1024
#: The environment of the raw exec (reference C), as the project's exec gets.
RAW_ENV = {"TERM": "xterm-256color", "LANG": "C.UTF-8"}


class BenchError(Exception):
    """A measurement path failed."""


@dataclasses.dataclass
class Plan:
    """How much of everything is measured."""

    quick: bool
    opens: int
    keystrokes: int
    flood_bytes: int
    scale_ns: list[int]
    scale_ns_b: list[int]
    scale_seconds: float
    churn_seconds: float
    churners: int
    flood_rounds: int
    #: Lines of configuration added to this project's server (``--tool-config``): to measure
    #: a setting, or a regression the guard must catch.
    tool_config: str = ""

    @classmethod
    def make(cls, quick: bool) -> Plan:
        """The sizes of ``--quick`` (every path tiny, except the opens and keystrokes the guard
        checks: enough of them for a median that holds still) or of a full run."""
        if quick:
            return cls(True, 10, 100, 1_000_000, [5], [5], 2.0, 2.0, 2, 1)
        return cls(False, 30, 300, 50_000_000, [50, 200, 500], [50, 200], 10.0, 10.0, 4, 5)


@dataclasses.dataclass
class Target:
    """Something that opens terminals: ``kind`` is ``tool``, ``terminado`` or ``raw``."""

    key: str
    kind: str
    base: str = ""
    token: str = ""
    container: str = ""
    #: Whether the server has lagprobe's ``/bench/echo`` (the WebSocket hop alone).
    hop: bool = True
    #: The server's process id (for its CPU time), if this run started it.
    server_pid: int | None = None

    def ws_base(self) -> str:
        """The server's base URL for WebSockets."""
        return self.base.replace("http://", "ws://", 1)

    def headers(self) -> dict[str, str]:
        """The headers that authenticate a request to the server."""
        return {"Authorization": f"token {self.token}"}


def percentile(values: t.Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``nan`` for no values)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def ms(seconds: float) -> float:
    """Seconds as milliseconds, rounded to the microsecond (the unit of every time figure)."""
    return round(seconds * 1000, 3)
