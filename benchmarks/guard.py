"""The guard: ratios of this project's figures to the references of the same run, each with a
bound that noise never crosses but a regression does. ``run.py`` exits non-zero when one is
crossed, so CI's quick run fails on a regression instead of printing a line nobody reads.

Only ratios are guarded: the references run interleaved with this project, on the same
machine at the same moment, so load moves both sides of a ratio alike, where it moves an
absolute time by several times. Each bound was set from the spread of the ratio over many
quick runs on a loaded machine (``RESULTS.md``, "The guard"), with room above the largest
value seen, and below what the regression it is meant for gives (the lease that made every
open wait for an exec of its own: open over C 2.1-2.6 against 0.75-1.55).
"""

from __future__ import annotations

import dataclasses
import math
import typing as t

from report import get


@dataclasses.dataclass(frozen=True)
class Guard:
    """One guarded ratio: ``numerator / denominator`` (figure paths of ``key``s) at most
    ``bound``."""

    name: str
    numerator: tuple[str, str]
    denominator: tuple[str, str] | None
    bound: float

    @property
    def phase(self) -> str:
        """The phase that measures it (``open``, ``echo``, ``scale``...)."""
        return self.numerator[1].split(".", 1)[0]

    def ratio(self, figures: dict[str, t.Any]) -> float:
        """The ratio in a run's figures (``nan`` if a figure is missing)."""

        def value(key: str, path: str) -> float:
            found = get(path)(figures.get(key, {}))
            return math.nan if found is None else float(found)

        top = value(*self.numerator)
        if self.denominator is None:
            return top
        bottom = value(*self.denominator)
        return top / bottom if bottom > 0 else math.nan


def guards(largest_scale: int) -> list[Guard]:
    """The guarded ratios of a run whose largest scale phase had ``largest_scale`` sessions."""
    return [
        # Each open's time over the raw exec's open of the same turn (their median): what the
        # server adds to the engine's own exec start.
        Guard("open / raw exec (C), per turn", ("tool", "open.over_C"), None, 1.6),
        # The same with a shell started ahead (``ahead``): the open no longer waits for the
        # engine's exec start; one that does again (the standby not taken) is about 1.1.
        Guard(
            "open with a shell started ahead / raw exec (C), per turn",
            ("ahead", "open.over_C"),
            None,
            0.7,
        ),
        # Each keystroke's echo over the raw exec socket's keystroke right after it (their
        # median), against the same ratio of terminado + docker exec (B): a loaded machine
        # inflates every wake-up, and a path through a server has more of them than the raw
        # socket (this project's own ratio moved 3.4-8.4 over 20 runs; against B's 0.7-1.2).
        Guard(
            "echo / raw exec (C) per keystroke, against terminado's (B)",
            ("tool", "echo.over_C"),
            ("B", "echo.over_C"),
            1.6,
        ),
        # Server memory per open session over terminado + docker exec -it's (B).
        Guard(
            f"memory per session / terminado (B), N={largest_scale}",
            ("tool", f"scale.{largest_scale}.rss_mib_per_session"),
            ("B", f"scale.{largest_scale}.rss_mib_per_session"),
            0.04,
        ),
    ]


def breached_phases(figures: dict[str, t.Any], largest_scale: int) -> set[str]:
    """The phases whose guarded ratio crossed its bound in these figures (``targets``)."""
    checked = check_guards({"targets": figures}, largest_scale)
    return {found["phase"] for found in checked if found["ratio"] is not None and not found["held"]}


def check_guards(results: dict[str, t.Any], largest_scale: int) -> list[dict[str, t.Any]]:
    """Every guard against a run's figures: its ratio, bound, and whether it held (a missing
    figure does not hold: a path that failed is an error of its own, and so is this)."""
    checked = []
    for guard in guards(largest_scale):
        ratio = guard.ratio(results["targets"])
        checked.append(
            {
                "guard": guard.name,
                "ratio": None if math.isnan(ratio) else round(ratio, 3),
                "bound": guard.bound,
                "held": bool(ratio <= guard.bound),
                "phase": guard.phase,
            }
        )
    return checked
