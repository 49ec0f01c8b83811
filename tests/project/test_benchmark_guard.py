"""The benchmark's guard (``benchmarks/guard.py``): which figures breach it. No timing here:
the figures are written down, as a run of the regressed code and of today's code gave them."""

from __future__ import annotations

import copy
import sys
import typing as t
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from guard import breached_phases, check_guards

#: A quick run's figures of this project and the references (RESULTS.md, second series, run 1).
TODAY: dict[str, t.Any] = {
    "tool": {
        "open": {"over_C": 1.027},
        "echo": {"over_C": 3.764},
        "scale": {"5": {"rss_mib_per_session": 0.046}},
    },
    "B": {"echo": {"over_C": 4.805}, "scale": {"5": {"rss_mib_per_session": 24.1}}},
    # Shells started ahead (RESULTS.md, "Shells started ahead").
    "ahead": {"open": {"over_C": 0.223}},
}


def _with(path: str, value: float, key: str = "tool") -> dict[str, t.Any]:
    """``TODAY`` with one figure of this project (``key``'s) changed."""
    figures = copy.deepcopy(TODAY)
    *parents, leaf = path.split(".")
    node = figures[key]
    for name in parents:
        node = node[name]
    node[leaf] = value
    return figures


def test_todays_figures_hold_every_guard() -> None:
    checked = check_guards({"targets": TODAY}, 5)
    assert [found["held"] for found in checked] == [True, True, True, True], checked
    assert breached_phases(TODAY, 5) == set()


def test_every_open_waiting_for_a_lease_breaches_the_open_guard() -> None:
    # lease_linger = 0 (the regression of issue 36): 2.10-2.64 over five runs.
    regressed = _with("open.over_C", 2.1)
    assert breached_phases(regressed, 5) == {"open"}


def test_opens_that_wait_for_the_engine_again_breach_the_shells_ahead_guard() -> None:
    # No shell started ahead taken: each open is a fresh exec's, about tool's 1.1.
    assert breached_phases(_with("open.over_C", 1.1, key="ahead"), 5) == {"open"}


def test_an_echo_slower_than_terminados_breaches_the_echo_guard() -> None:
    assert breached_phases(_with("echo.over_C", 2 * 4.805), 5) == {"echo"}


def test_a_megabyte_per_session_breaches_the_memory_guard() -> None:
    assert breached_phases(_with("scale.5.rss_mib_per_session", 1.2), 5) == {"scale"}


def test_a_missing_figure_breaches_nothing() -> None:
    # (A path that failed is an error of the run of its own.)
    assert breached_phases({"tool": {}}, 5) == set()
