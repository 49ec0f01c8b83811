"""The issue's targets, each checked against a run's figures (the ``[met]``/``[MISSED]`` lines
and the results' ``checks``): this project against B and C, the local runtime against A, the
Hub service against the per-user server.
"""

from __future__ import annotations

import math
import typing as t

from common import Plan
from report import get


def check_targets(results: dict[str, t.Any], plan: Plan) -> list[dict[str, t.Any]]:
    """The issue's targets, each with whether this run met it."""
    figures = results["targets"]

    def value(key: str, path: str) -> float:
        found = get(path)(figures.get(key, {}))
        return math.nan if found is None else found

    checks: list[tuple[str, bool, str]] = []
    open_tool, open_b, open_c = (value(k, "open.p50_ms") for k in ("tool", "B", "C"))
    checks.append(
        ("open p50 within 10 ms of C", open_tool <= open_c + 10, f"{open_tool} vs C {open_c}")
    )
    checks.append(("open p50 <= 0.9x B", open_tool <= 0.9 * open_b, f"{open_tool} vs B {open_b}"))
    echo_tool, echo_a, echo_b = (value(k, "echo.p50_ms") for k in ("tool", "A", "B"))
    checks.append(("echo p50 <= 0.6x B", echo_tool <= 0.6 * echo_b, f"{echo_tool} vs B {echo_b}"))
    checks.append(("echo p50 <= 1.5x A", echo_tool <= 1.5 * echo_a, f"{echo_tool} vs A {echo_a}"))
    above = value("tool", "echo.above_floor_p50_ms")
    checks.append(("echo p50 - hop - C <= 0.08 ms", above <= 0.08, f"{above}"))
    p99 = value("tool", "echo.p99_ms")
    checks.append(("echo p99 < 3 ms, one session", p99 < 3, f"{p99}"))
    flood_tool, flood_b, flood_c = (value(k, "flood.mb_s") for k in ("tool", "B", "C"))
    checks.append(
        ("throughput >= 0.85x C", flood_tool >= 0.85 * flood_c, f"{flood_tool} vs C {flood_c}")
    )
    checks.append(
        ("throughput >= 1.5x B", flood_tool >= 1.5 * flood_b, f"{flood_tool} vs B {flood_b}")
    )
    largest = max(plan.scale_ns)
    rss = value("tool", f"scale.{largest}.rss_mib_per_session")
    checks.append((f"RSS/session < 1 MiB (N={largest})", rss < 1, f"{rss}"))
    scale_p99 = value("tool", f"scale.{largest}.echo_p99_ms")
    failures = value("tool", f"scale.{largest}.failures")
    checks.append(
        (
            f"N={largest}: echo p99 < 100 ms, no failure",
            scale_p99 < 100 and failures == 0,
            f"p99 {scale_p99}, failures {failures}",
        )
    )
    delta = value("tool", "churn.delta_p99_ms")
    checks.append(("churn raises echo p99 by <= 5 ms", delta <= 5, f"+{delta}"))
    # The local runtime against terminado on the same machine (both local shells).
    for name, path, lower_is_better in (
        ("open p50", "open.p50_ms", True),
        ("echo p50", "echo.p50_ms", True),
        ("throughput", "flood.mb_s", False),
        (f"RSS/session (N={largest})", f"scale.{largest}.rss_mib_per_session", True),
    ):
        local, a = value("local", path), value("A", path)
        met = local <= a if lower_is_better else local >= a
        relation = "<=" if lower_is_better else ">="
        checks.append((f"local: {name} {relation} A", met, f"{local} vs A {a}"))
    hub = figures.get("hub", {}).get("modes", {}).get("service_over_per_user")
    if hub:
        # The service is one more process, not one more hop: each within 10% of per-user.
        checks.append(
            (
                "Hub service within 10% of the per-user server (open, echo p50, throughput)",
                hub["open_p50"] <= 1.1 and hub["echo_p50"] <= 1.1 and hub["throughput"] >= 0.9,
                ", ".join(f"{name} {value}x" for name, value in hub.items()),
            )
        )
    return [{"target": name, "met": bool(ok), "detail": detail} for name, ok, detail in checks]
