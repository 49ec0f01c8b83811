"""How the screen models of a process share its time and memory.

A model's work (feeding output to its emulator, resizing, rendering a snapshot) is done in small
units, off the hot path: :class:`_Scheduler` steps the models of an event loop one at a time, each
step at most ``STEP_TIME``, all of them together at most ``MODELS_DUTY`` of the loop's time, each
within its own CPU budget (``MODEL_CPU_SHARE``), so that one session's output cannot take another
session's latency, however expensive it is to emulate. :class:`ScreenBudget` bounds the memory of
all the models of a server.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import time
import typing as t
import weakref

#: The longest step (seconds) the scheduler gives one model before the event loop runs again.
STEP_TIME = 0.001
#: The share of the event loop's time all the models of a process take together, at most;
#: more while a client waits for a screen (a reload, an observer).
MODELS_DUTY = 0.3
URGENT_DUTY = 1.0
#: The CPU time (seconds per second) one model may take, and how much of it it may save up
#: (so that a session that was quiet gets a client's screen ready at once).
MODEL_CPU_SHARE = 0.25
MODEL_CPU_BURST = 0.5
#: Output must pause this long (seconds) before queued output is fed to the model.
QUIET_TIME = 0.05
#: With at least ``BUSY_QUEUE`` characters queued, output must pause ``BUSY_QUIET_TIME``: a
#: build log or a flood that pauses briefly (a compiler between two files) is then worked off
#: once it ends, and of a long one only the last ``replay_buffer_size`` characters are emulated
#: (the rest could only have scrolled out of the scrollback). Emulating every burst of a paced
#: log cost the server more CPU per MB than all the rest of the output path.
BUSY_QUEUE = 32 * 1024
BUSY_QUIET_TIME = 0.5

#: Work done in units: a generator yields between units (``None``, or a future when the unit
#: runs elsewhere: the model waits for it) and returns its result at the end.
Job = t.Generator["asyncio.Future[t.Any] | None", None, t.Any]


def run(job: Job) -> t.Any:
    """Do all of ``job`` at once; its result."""
    while True:
        try:
            next(job)
        except StopIteration as done:
            return done.value


class Scheduled(t.Protocol):
    """What the scheduler and the budget need of a screen model
    (:class:`~jupyter_tool_terminal.screen.base.ScreenModel`)."""

    #: When output last arrived (``time.monotonic()``).
    last_output: float

    def credit_wait(self) -> float:
        """Seconds until the model has CPU budget again (0: it has some now)."""

    def charge(self, seconds: float) -> None:
        """Count CPU time spent on the model against its budget."""

    def step(self, deadline: float) -> bool:
        """Work until ``deadline`` (``time.perf_counter()``); whether work is left right now."""

    def drop_scrollback(self) -> bool:
        """Forget the scrollback and keep none from now on; whether there was any to drop."""

    def memory_estimate(self) -> int:
        """Bytes the model holds, estimated."""


class _Scheduler:
    """Works off the screen models of one event loop: one model at a time, for at most
    ``STEP_TIME``, round robin, then a pause that keeps all the models together within
    ``MODELS_DUTY`` of the loop's time; a model that used up its own CPU budget waits for it."""

    def __init__(self) -> None:
        self._ready: collections.deque[Scheduled] = collections.deque()
        self._urgent: collections.deque[Scheduled] = collections.deque()
        self._task: asyncio.Task[None] | None = None

    def want(self, model: Scheduled, *, urgent: bool = False) -> None:
        """``model`` has work (a client waits for it, if ``urgent``)."""
        if urgent:
            if model not in self._urgent:
                self._urgent.append(model)
        elif model not in self._ready and model not in self._urgent:
            self._ready.append(model)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        """Step the models that have work; ends when none has (``want`` starts it again)."""
        loop = asyncio.get_running_loop()
        while self._urgent or self._ready:
            queue = self._urgent if self._urgent else self._ready
            model = queue.popleft()
            wait = model.credit_wait()
            if wait > 0:
                # Out of budget: it comes back when it has some again.
                loop.call_later(
                    wait, functools.partial(self.want, model, urgent=queue is self._urgent)
                )
                continue
            started, cpu = time.perf_counter(), time.thread_time()
            more = model.step(started + STEP_TIME)
            # CPU time, not wall time: on a busy machine the step may have waited for a core,
            # which took nothing from this loop's other tasks.
            spent = time.thread_time() - cpu
            model.charge(spent)
            if more:
                queue.append(model)
            duty = URGENT_DUTY if queue is self._urgent else MODELS_DUTY
            await asyncio.sleep(spent * (1 - duty) / duty)


_schedulers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Scheduler] = (
    weakref.WeakKeyDictionary()
)


def _scheduler() -> _Scheduler:
    loop = asyncio.get_running_loop()
    scheduler = _schedulers.get(loop)
    if scheduler is None:
        scheduler = _schedulers[loop] = _Scheduler()
    return scheduler


class ScreenBudget:
    """A bound on the memory of all the screen models of a server (``screen_memory_limit``).

    Each model reports its estimated size as it changes (:meth:`update`, cheap: a running
    total). Past the limit, models give up their scrollback, the largest of those with no
    recent output first, until the total is under the limit again; such a model keeps no
    scrollback from then on (a client attaching to it gets only the visible screen). What is
    left is the models' visible screens and queues, bounded per model (``MAX_MODEL_ROWS`` x
    ``MAX_MODEL_COLS``, ``replay_buffer_size``).
    """

    def __init__(self, limit: int, log: logging.Logger | None = None) -> None:
        #: The limit, in bytes of estimated model memory.
        self.limit = limit
        self.total = 0
        self._sizes: weakref.WeakKeyDictionary[Scheduled, int] = weakref.WeakKeyDictionary()
        self._log = log
        self._warned = False

    def update(self, model: Scheduled, size: int) -> None:
        """``model`` is now estimated at ``size`` bytes (0: it is gone)."""
        self.total += size - self._sizes.pop(model, 0)
        if size:
            self._sizes[model] = size
        if self.total > self.limit:
            self._trim()

    def _trim(self) -> None:
        now = time.monotonic()
        # Idle models first (no output for a while), then the largest.
        order = sorted(
            self._sizes.items(),
            key=lambda item: (now - item[0].last_output < QUIET_TIME, -item[1]),
        )
        for model, size in order:
            if self.total <= self.limit:
                break
            dropped = model.drop_scrollback()
            smaller = model.memory_estimate()
            self.total += smaller - size
            self._sizes[model] = smaller
            if dropped and not self._warned:
                self._warned = True
                if self._log is not None:
                    self._log.warning(
                        "Screen models use more than screen_memory_limit (%.0f MiB): sessions "
                        "drop their scrollback (a reattaching client sees only the screen)",
                        self.limit / 2**20,
                    )
