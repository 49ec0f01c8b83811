"""Agents yield to people: a server-wide gate on agents' MCP requests, by the event loop's lag.

Every terminal of the server, a person's and an agent's, is served by one event loop. Twenty
agents that run commands back to back keep it busy all the time, and a person's keystroke then
waits behind their work: measured (``benchmarks/agent_commands.py --agents 20``), a person's
echo went from p50 3 ms / p99 14 ms to p50 174 ms / p99 529 ms. The gate measures how late a
short timer fires on the loop (its lag): while the loop is late, new agent requests wait, and
they are let in one at a time, each when the loop was on time again, or, while it stays late
(a busy machine makes it late too), one every ``FLOOR_INTERVAL``: agents slow down, they never
stop. Requests already let in go on, and nothing of a person's is ever held.
"""

from __future__ import annotations

import asyncio
import collections

#: How late the loop may be (seconds) for an agent's request to be let in at once.
LAG_LIMIT = 0.001
#: How often the lag is measured while agents are at work (seconds).
PROBE_INTERVAL = 0.005
#: While the loop stays late, one agent request is still let in every so many seconds.
FLOOR_INTERVAL = 0.05
#: Seconds without agent requests after which the measuring stops.
IDLE_AFTER = 2.0


class AgentPacer:
    """Lets agents' requests in while the event loop is on time (see the module docstring)."""

    def __init__(
        self,
        *,
        lag_limit: float = LAG_LIMIT,
        probe_interval: float = PROBE_INTERVAL,
        floor_interval: float = FLOOR_INTERVAL,
    ) -> None:
        self.lag_limit = lag_limit
        self.probe_interval = probe_interval
        self.floor_interval = floor_interval
        #: The loop's lag at the last measurement (seconds).
        self.lag = 0.0
        #: How many requests had to wait, and how often the lag was measured, since the
        #: server started.
        self.held = 0
        self.measurements = 0
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()
        self._probe: asyncio.Task[None] | None = None
        self._last_request = 0.0
        self._last_let_in = 0.0

    async def admit(self) -> None:
        """Return when an agent's request may be served: at once while the loop is on time and
        no other request waits, else in turn (see the module docstring)."""
        loop = asyncio.get_running_loop()
        self._last_request = loop.time()
        if self._probe is None or self._probe.done():
            self._probe = loop.create_task(self._measure())
        if self.lag <= self.lag_limit and not self._waiting:
            return
        self.held += 1
        if not self._waiting:  # (the floor's interval starts with the first one waiting)
            self._last_let_in = loop.time()
        turn = loop.create_future()
        self._waiting.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            # (the client went away while waiting: its turn passes to the next one)
            if turn.done() and not turn.cancelled():
                self._let_one_in()
            raise

    def close(self) -> None:
        """Stop measuring and let every waiting request in (the server stops)."""
        if self._probe is not None:
            self._probe.cancel()
            self._probe = None
        while self._waiting:
            self._let_one_in()

    def _let_one_in(self) -> None:
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                self._last_let_in = turn.get_loop().time()
                return

    async def _measure(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._waiting or loop.time() - self._last_request < IDLE_AFTER:
                due = loop.time() + self.probe_interval
                await asyncio.sleep(self.probe_interval)
                self.lag = max(loop.time() - due, 0.0)
                self.measurements += 1
                floor_due = loop.time() - self._last_let_in >= self.floor_interval
                if self.lag <= self.lag_limit or floor_due:
                    self._let_one_in()
        finally:
            self.lag = 0.0
