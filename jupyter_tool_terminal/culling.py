"""Ending sessions on time: a timer per session (its clients' grace, the wait for its first
client) and the idle check over all of them."""

from __future__ import annotations

import asyncio
import contextlib
import time
import typing as t

if t.TYPE_CHECKING:
    from .session import ToolTerminal


class SessionTimers:
    """Closes sessions when their time is up; the tasks it starts are awaited at shutdown."""

    def __init__(self) -> None:
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[t.Any]] = set()
        self._idle_check: asyncio.Task[None] | None = None

    def spawn(self, coroutine: t.Coroutine[t.Any, t.Any, t.Any]) -> None:
        """Run ``coroutine`` as a task of its own (awaited by :meth:`stop`)."""
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def arm(self, session: ToolTerminal, delay: float, reason: str) -> None:
        """Close ``session`` for ``reason`` in ``delay`` seconds (at once for 0), unless
        :meth:`disarm` comes first; replaces the session's earlier timer."""
        self.disarm(session)
        if delay <= 0:
            self.spawn(session.close(reason))
            return
        loop = asyncio.get_running_loop()
        self._timers[session.id] = loop.call_later(delay, lambda: self.spawn(session.close(reason)))

    def disarm(self, session: ToolTerminal) -> None:
        """The session's timer (if any) does not fire."""
        timer = self._timers.pop(session.id, None)
        if timer is not None:
            timer.cancel()

    def cull_idle(
        self, idle_timeout: float, sessions: t.Callable[[], t.Iterable[ToolTerminal]]
    ) -> None:
        """Close the ``sessions()`` without input or output for ``idle_timeout`` seconds (from
        now on, checked a few times within a timeout; 0 is off, and a second call does
        nothing)."""
        if idle_timeout > 0 and self._idle_check is None:
            self._idle_check = asyncio.create_task(self._cull_loop(idle_timeout, sessions))

    async def _cull_loop(
        self, idle_timeout: float, sessions: t.Callable[[], t.Iterable[ToolTerminal]]
    ) -> None:
        interval = min(max(idle_timeout / 4, 0.05), 30.0)
        while True:
            await asyncio.sleep(interval)
            deadline = time.monotonic() - idle_timeout
            for session in list(sessions()):
                if session.last_activity_monotonic < deadline:
                    self.spawn(session.close("idle"))

    def cancel(self) -> None:
        """No timer and no idle check fires any more (the server stops)."""
        if self._idle_check is not None:
            self._idle_check.cancel()
            self._idle_check = None
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    async def stop(self) -> None:
        """Wait for the closes already started."""
        for task in list(self._tasks):
            with contextlib.suppress(Exception):
                await task
