"""Keep what the server's start-up made out of the garbage collector's full passes.

A server process holds some 300,000 objects from its start-up alone (jupyter_server, tornado,
the extensions, the screen emulator's declarations) that live as long as it does. Python's
full collection walks all of them each time it runs: with 500 sessions it ran every few
seconds and held the event loop 234 ms, every user's echo with it. ``gc.freeze()`` moves
them to a generation no collection walks (what the Python docs advise for long-lived
start-up state); what sessions make later is collected as before.

Done once per process, after a collection, so that no garbage of the start-up is kept for
ever (a test process that starts many servers pays that collection once).
"""

from __future__ import annotations

import gc
import logging
import time
import typing as t

_frozen = False


def freeze_start_up(log: logging.Logger | logging.LoggerAdapter[t.Any]) -> None:
    """Collect, then freeze every object alive (once per process; later calls do nothing)."""
    global _frozen  # noqa: PLW0603 - once per process, as the interpreter's own state is
    if _frozen:
        return
    _frozen = True
    began = time.perf_counter()
    gc.collect()
    gc.freeze()
    log.debug(
        "Froze %d start-up objects out of full collections (%.0f ms)",
        gc.get_freeze_count(),
        (time.perf_counter() - began) * 1000,
    )
