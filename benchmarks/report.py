"""What a run's results say, as text: the machine it ran on, the table of every figure of every
path with this project's ratio to A, B and C, and the Markdown file written beside the JSON.

Which targets a run met is ``checks.py``'s; the plot, ``plot.py``'s.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import typing as t
from importlib.metadata import version
from pathlib import Path

import docker
import psutil

from common import Plan
from references import KEYS_ALL


def machine() -> dict[str, t.Any]:
    """The machine and the versions a run measured on (the results' ``machine``)."""
    cpu = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    info: dict[str, t.Any] = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 1024**3, 1),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }
    with contextlib.suppress(Exception):
        client = docker.from_env()
        info["docker_engine"] = client.version().get("Version")
        client.close()
    for package in ("jupyter_server", "jupyter_server_terminals", "terminado", "tornado", "docker"):
        with contextlib.suppress(Exception):
            info[package] = version(package)
    return info


Row = tuple[str, str, t.Callable[[dict[str, t.Any]], float | None], bool]


def get(path: str) -> t.Callable[[dict[str, t.Any]], float | None]:
    """A getter of a nested figure (``a.b.c``), ``None`` where it is missing."""

    def read(figures: dict[str, t.Any]) -> float | None:
        value: t.Any = figures
        for part in path.split("."):
            if not isinstance(value, dict) or part not in value:
                return None
            value = value[part]
        return float(value) if isinstance(value, int | float) else None

    return read


def rows(plan: Plan) -> list[Row]:
    """(figure, unit, getter, lower is better)."""
    table: list[Row] = [
        ("open p50", "ms", get("open.p50_ms"), True),
        ("open p95", "ms", get("open.p95_ms"), True),
        ("echo p50", "ms", get("echo.p50_ms"), True),
        ("echo p99", "ms", get("echo.p99_ms"), True),
        ("echo p50, WebSocket hop alone", "ms", get("echo.hop_p50_ms"), True),
        ("echo floor: hop + C's echo p50", "ms", get("echo.floor_p50_ms"), True),
        ("echo p50 above its floor (p50 - hop - C)", "ms", get("echo.above_floor_p50_ms"), True),
        ("throughput", "MB/s", get("flood.mb_s"), False),
        (
            "throughput read by the asyncio client",
            "MB/s",
            get("flood.asyncio_client_mb_s"),
            False,
        ),
        ("flood: server CPU per MB", "ms", get("flood.cpu_ms_per_mb.server"), True),
        ("flood: engine CPU per MB", "ms", get("flood.cpu_ms_per_mb.engine"), True),
        ("flood: client CPU per MB", "ms", get("flood.cpu_ms_per_mb.client"), True),
        ("flood: machine CPU per MB (all of it)", "ms", get("flood.cpu_ms_per_mb.machine"), True),
    ]
    for n in plan.scale_ns:
        table += [
            (f"N={n} echo p50", "ms", get(f"scale.{n}.echo_p50_ms"), True),
            (f"N={n} echo p99", "ms", get(f"scale.{n}.echo_p99_ms"), True),
            (f"N={n} failures", "", get(f"scale.{n}.failures"), True),
            (f"N={n} RSS/session", "MiB", get(f"scale.{n}.rss_mib_per_session"), True),
            (f"N={n} PSS/session", "MiB", get(f"scale.{n}.pss_mib_per_session"), True),
            (f"N={n} server CPU", "cores", get(f"scale.{n}.cpu_cores_server"), True),
            (f"N={n} engine CPU", "cores", get(f"scale.{n}.cpu_cores_engine"), True),
            (f"N={n} server loop lag max", "ms", get(f"scale.{n}.server_loop_lag.max_ms"), True),
            (f"N={n} teardown", "s", get(f"scale.{n}.teardown_s"), True),
        ]
    table += [
        ("churn: quiet echo p99", "ms", get("churn.quiet_p99_ms"), True),
        ("churn: echo p99", "ms", get("churn.churn_p99_ms"), True),
        ("churn: p99 increase", "ms", get("churn.delta_p99_ms"), True),
        ("churn: cycles/s", "", get("churn.cycles_per_s"), False),
        ("churn: machine CPU per cycle", "ms", get("churn.machine_cpu_ms_per_cycle"), True),
        ("churn: server loop lag max", "ms", get("churn.churn_loop_lag.max_ms"), True),
        ("churn max: quiet echo p99", "ms", get("churn_max.quiet_p99_ms"), True),
        ("churn max: echo p99", "ms", get("churn_max.churn_p99_ms"), True),
        ("churn max: p99 increase", "ms", get("churn_max.delta_p99_ms"), True),
        ("churn max: cycles/s", "", get("churn_max.cycles_per_s"), False),
        ("churn max: machine CPU per cycle", "ms", get("churn_max.machine_cpu_ms_per_cycle"), True),
        ("churn max: server loop lag max", "ms", get("churn_max.churn_loop_lag.max_ms"), True),
    ]
    return table


def fmt(value: float | None) -> str:
    """A figure in a table cell: three significant digits or so, ``-`` where there is none."""
    if value is None or math.isnan(value):
        return "-"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def ratio(ours: float | None, theirs: float | None) -> str:
    """``ours / theirs`` in a table cell (``1.23x``), ``-`` where either is missing."""
    if ours is None or theirs is None or math.isnan(ours) or math.isnan(theirs) or theirs == 0:
        return "-"
    return f"{ours / theirs:.2f}x"


def table(results: dict[str, t.Any], plan: Plan) -> str:
    """Every figure of every path as a Markdown table, with this project's ratios to A, B and
    C and the local runtime's to A."""
    targets = results["targets"]
    header = "| figure | this project | local | A | B | C | vs A | vs B | vs C | local vs A |"
    lines = [header, "|" + "---|" * 10]
    for name, unit, read, _ in rows(plan):
        values = {key: read(targets.get(key, {})) for key in KEYS_ALL}
        label = f"{name} ({unit})" if unit else name
        cells = [fmt(values[key]) for key in KEYS_ALL]
        ratios = [ratio(values["tool"], values[key]) for key in ("A", "B", "C")]
        ratios.append(ratio(values["local"], values["A"]))
        lines.append(f"| {label} | " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines)


def ahead_line(results: dict[str, t.Any]) -> str:
    """The open of the shells started ahead (``ahead``, open phase only), if it was measured."""
    opened = results["targets"].get("ahead", {}).get("open")
    if not opened:
        return ""
    c_open = results["targets"].get("C", {}).get("open", {})
    return (
        f"Open with a shell started ahead (`c.DockerRuntime.prestart_shells`): p50 "
        f"{fmt(opened.get('p50_ms'))} ms, p95 {fmt(opened.get('p95_ms'))} ms (REST answer "
        f"{fmt(opened.get('post_p50_ms'))} ms); the raw exec's (C) p50 "
        f"{fmt(c_open.get('p50_ms'))} ms; per turn over C: {fmt(opened.get('over_C'))}."
    )


def markdown(results: dict[str, t.Any], plan: Plan) -> str:
    """The run as Markdown: machine, table, targets."""
    info = results["machine"]
    lines = [
        f"Run of {results['when']} ({results['mode']} mode, {results['seconds']} s).",
        "",
        f"Machine: {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB, "
        f"Linux {info['kernel']}, Python {info['python']}, Docker Engine "
        f"{info.get('docker_engine')}, jupyter_server {info.get('jupyter_server')}, "
        f"jupyter_server_terminals {info.get('jupyter_server_terminals')}, terminado "
        f"{info.get('terminado')}, tornado {info.get('tornado')}.",
        "",
        table(results, plan),
        "",
    ]
    if ahead := ahead_line(results):
        lines += [ahead, ""]
    for check in results.get("checks", []):
        mark = "met" if check["met"] else "**missed**"
        lines.append(f"- {mark}: {check['target']} ({check['detail']})")
    return "\n".join(lines) + "\n"
