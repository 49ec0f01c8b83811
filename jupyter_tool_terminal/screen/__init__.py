"""The screen models: a server-side picture of each session's terminal, so that a reattaching
client sees its screen (:mod:`.base`), on one of two emulators (:mod:`.ghostty`, :mod:`.pyte`).

Here: the emulators (``BACKENDS``), the choice among them (pyghostty where it imports, else
pyte), and :class:`ScreenModels`, what the sessions of one server make their models with (the
chosen class and the memory budget they share). Above both backends' modules, so that neither
imports the other's.
"""

from __future__ import annotations

import logging

from .base import ScreenModel
from .pyte import PyteScreenModel
from .scheduler import ScreenBudget

#: The emulators a screen model can use (the ``screen_model`` setting), best first.
BACKENDS = ("pyghostty", "pyte")


def model_class(backend: str = "auto") -> type[ScreenModel]:
    """The screen model class of ``backend`` (one of ``BACKENDS``); ``"auto"``: pyghostty
    where it imports (its wheels are for Linux x86_64 and aarch64), else pyte."""
    if backend not in (*BACKENDS, "auto"):
        msg = f"unknown screen model {backend!r} (one of auto, {', '.join(BACKENDS)})"
        raise ValueError(msg)
    if backend != "pyte":
        try:
            # (imported when asked for: pyghostty is optional)
            from .ghostty import GhosttyScreenModel  # noqa: PLC0415
        except ImportError:
            if backend == "pyghostty":
                raise
        else:
            return GhosttyScreenModel
    return PyteScreenModel


class ScreenModels:
    """How the sessions of a server get their screen models: the emulator (``backend``, see
    :func:`model_class`) and the memory budget they share (``memory_limit`` bytes; ``None``:
    unbounded but per model)."""

    def __init__(
        self,
        backend: str = "auto",
        memory_limit: int | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        #: The model class (an unknown or missing backend fails here, at start-up).
        self.model_class = model_class(backend)
        self.model_class.prepare()
        self.backend = self.model_class.backend
        self._log = log
        self.budget = ScreenBudget(memory_limit, log) if memory_limit is not None else None

    def limit_memory(self, memory_limit: int) -> None:
        """Bound the memory the models made from now on share to ``memory_limit`` bytes
        (before the first: the server sets it once its registry, whose ``max_sessions`` the
        default follows, exists)."""
        self.budget = ScreenBudget(memory_limit, self._log)

    def new(self, *, scrollback_lines: int, replay_buffer_size: int) -> ScreenModel:
        """A model for a new session's terminal."""
        return self.model_class(
            scrollback_lines=scrollback_lines,
            replay_buffer_size=replay_buffer_size,
            budget=self.budget,
        )


__all__ = [
    "BACKENDS",
    "PyteScreenModel",
    "ScreenBudget",
    "ScreenModel",
    "ScreenModels",
    "model_class",
]
