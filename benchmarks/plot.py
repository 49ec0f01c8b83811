"""The plot of a run (a PNG): open, echo and throughput of every path, echo p99 and memory per
session against the number of sessions, and echo p99 with and without churn.
"""

from __future__ import annotations

import math
import typing as t
from pathlib import Path

import matplotlib

from common import Plan
from references import KEYS_ALL
from report import get

# Before pyplot is imported: no display is needed (CI, ssh).
matplotlib.use("Agg")
import matplotlib.pyplot as plt

LABELS = {
    "tool": "this project",
    "local": "this project,\nlocal runtime",
    "A": "A: terminado\n/bin/sh",
    "B": "B: terminado\ndocker exec CLI",
    "C": "C: raw exec\nsocket (SDK)",
}


def log_scale(ax: t.Any) -> None:
    """A logarithmic y axis, where there is something positive to plot (a partial run may have
    nothing there)."""
    if ax.has_data() and ax.dataLim.ymax > 0:
        ax.set_yscale("log")


def plot(results: dict[str, t.Any], plan: Plan, path: Path) -> None:
    """Draw the run's figures into a PNG at ``path``."""
    figures = results["targets"]
    keys = [key for key in KEYS_ALL if key in figures]
    colors = {"tool": "#2a7ab0", "local": "#7b4fa8", "A": "#9a9a9a", "B": "#d9822b", "C": "#4c9a4c"}
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))

    def bars(ax: t.Any, title: str, unit: str, paths: list[tuple[str, str]]) -> None:
        width = 0.8 / len(paths)
        for offset, (label, path) in enumerate(paths):
            xs, ys, cs = [], [], []
            for index, key in enumerate(keys):
                found = get(path)(figures[key])
                if found is not None and not math.isnan(found):
                    xs.append(index + offset * width)
                    ys.append(found)
                    cs.append(colors[key])
            drawn = ax.bar(xs, ys, width, color=cs, alpha=1.0 - 0.4 * offset, label=label)
            ax.bar_label(drawn, fmt="%.3g", fontsize=7)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(keys))])
        ax.set_xticklabels([LABELS[key] for key in keys], fontsize=7)
        ax.set_title(title)
        ax.set_ylabel(unit)
        if len(paths) > 1:
            ax.legend(fontsize=7)

    bars(
        axes[0][0],
        "open (to an echoed marker)",
        "ms",
        [("p50", "open.p50_ms"), ("p95", "open.p95_ms")],
    )
    bars(
        axes[0][1],
        "keystroke echo, one session",
        "ms",
        [("p50", "echo.p50_ms"), ("p99", "echo.p99_ms")],
    )
    bars(
        axes[0][2], f"throughput ({plan.flood_bytes / 1e6:g} MB)", "MB/s", [("MB/s", "flood.mb_s")]
    )

    def lines(ax: t.Any, title: str, unit: str, field: str) -> None:
        """One line per path: a figure of the scale phase against the number of sessions."""
        for key in keys:
            scale = figures[key].get("scale", {})
            # Only where the path has the figure: memory is missing for C (no server).
            ns = sorted(int(n) for n in scale if field in scale[n])
            if ns:
                ax.plot(
                    ns,
                    [scale[str(n)][field] for n in ns],
                    "o-",
                    color=colors[key],
                    label=LABELS[key],
                )
        ax.set_title(title)
        ax.set_xlabel("concurrent sessions")
        ax.set_ylabel(unit)
        ax.legend(fontsize=7)

    lines(axes[1][0], "echo p99 with N sessions typing", "ms", "echo_p99_ms")
    log_scale(axes[1][0])
    lines(axes[1][1], "server RSS per session (all its processes)", "MiB", "rss_mib_per_session")
    bars(
        axes[1][2],
        "echo p99 of one typing session",
        "ms",
        [("quiet", "churn.quiet_p99_ms"), ("with churn", "churn.churn_p99_ms")],
    )
    log_scale(axes[1][2])
    fig.suptitle(
        f"jupyter-tool-terminal benchmark "
        f"({results['machine']['cores']} cores, {results['machine']['cpu']})",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
