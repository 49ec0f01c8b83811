"""Agents yield to people: a server-wide gate on agents' MCP requests.

Every terminal of the server, a person's and an agent's, is served by one event loop. Twenty
agents that run commands back to back keep it busy all the time, and a person's keystroke then
waits behind their work: measured (``benchmarks/agent_commands.py --agents 20``), a person's
echo went from p50 3 ms / p99 14 ms to p50 174 ms / p99 529 ms. The gate holds new agent
requests in two cases, and lets them in one at a time again as each case ends, or, while it
lasts, one every ``FLOOR_INTERVAL`` (``PERSON_FLOOR_INTERVAL`` while a person types): agents
slow down, they never stop. Requests already let in go on, and nothing of a person's is ever
held.

* The loop is late: a short timer on it fires more than ``LAG_LIMIT`` late (a busy machine
  makes it late too).
* A person typed in one of the server's terminals in the last ``PERSON_WINDOW`` seconds
  (:meth:`AgentPacer.person_typed`). With the loop on time, agents' requests still took 60% of
  it at 160 commands a second, and the machine's two cores were shared by their clients and the
  engine's stream copying: each keystroke waited behind some of it (her echo p99 7.7-11 ms beside
  the agents against 2.8-3.4 ms alone). Any agent request that runs while she types delays the
  keystrokes it meets, so only few may: at one every 50 ms her echo p99 was still 6.1-6.6 ms (22
  commands a second), at one every 250 ms 2.5-4.8 ms against 2.0-9.8 ms alone (7-8 a second).
  Her keystrokes in an agent's terminal (taking it over) do not count: the agent waits for its
  terminal anyway.

What waits is bounded and served fairly. An MCP request takes a :class:`Place` as soon as its
agent is authenticated, before its body is read, and holds it until it is let in: an agent may
hold ``max_waiting_per_agent`` places, a user's agents ``max_waiting_per_user`` places and
``max_waiting_bytes_per_user`` bytes of declared bodies, and a request beyond is refused (429).
The requests waiting are queued per user and let in round the users in turn: one user's queue
never delays another user's request by more than one turn. A request whose client went away
leaves the queue (:meth:`AgentPacer.admit` cancelled).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib

#: How late the loop may be (seconds) for an agent's request to be let in at once.
LAG_LIMIT = 0.001
#: How often the lag is measured while agents are at work (seconds).
PROBE_INTERVAL = 0.005
#: While the loop stays late, one agent request is still let in every so many seconds.
FLOOR_INTERVAL = 0.05
#: Seconds without agent requests after which the measuring stops.
IDLE_AFTER = 2.0
#: For so many seconds after a person's keystroke, agents' requests are held.
PERSON_WINDOW = 1.0
#: While a person types, one agent request is still let in every so many seconds.
PERSON_FLOOR_INTERVAL = 0.25
#: Requests that may wait (from authentication until let in), per agent and per user, and the
#: bytes of their bodies a user's requests may declare while they wait: an agent's requests at
#: once (its SDK client keeps 30 calls going in the tests) fit, a flood of 1 MiB bodies holds at
#: most this much of the server's memory.
MAX_WAITING_PER_AGENT = 32
MAX_WAITING_PER_USER = 64
MAX_WAITING_BYTES_PER_USER = 8 * 1024 * 1024
#: What a request counts in the byte bound at least (its headers and bookkeeping).
MIN_REQUEST_BYTES = 4096


class Place:
    """A request's place among those waiting (from :meth:`AgentPacer.reserve`); given up with
    :meth:`release` once it was let in or went away (releasing twice is harmless)."""

    def __init__(self, pacer: AgentPacer, user: str, agent: str, size: int) -> None:
        self._pacer = pacer
        self.user = user
        self.agent = agent
        self.size = size
        self.released = False

    def release(self) -> None:
        """Give the place up."""
        if not self.released:
            self.released = True
            self._pacer._release(self)


class AgentPacer:
    """Lets agents' requests in while the event loop is on time and no person is typing (see
    the module docstring)."""

    def __init__(
        self,
        *,
        lag_limit: float = LAG_LIMIT,
        probe_interval: float = PROBE_INTERVAL,
        floor_interval: float = FLOOR_INTERVAL,
        person_window: float = PERSON_WINDOW,
        person_floor_interval: float = PERSON_FLOOR_INTERVAL,
        max_waiting_per_agent: int = MAX_WAITING_PER_AGENT,
        max_waiting_per_user: int = MAX_WAITING_PER_USER,
        max_waiting_bytes_per_user: int = MAX_WAITING_BYTES_PER_USER,
    ) -> None:
        self.lag_limit = lag_limit
        self.probe_interval = probe_interval
        self.floor_interval = floor_interval
        self.person_window = person_window
        self.person_floor_interval = person_floor_interval
        self.max_waiting_per_agent = max_waiting_per_agent
        self.max_waiting_per_user = max_waiting_per_user
        self.max_waiting_bytes_per_user = max_waiting_bytes_per_user
        #: The loop's lag at the last measurement (seconds).
        self.lag = 0.0
        #: How many requests had to wait, and how often the lag was measured, since the
        #: server started.
        self.held = 0
        self.measurements = 0
        #: The requests waiting for their turn, per user, in the order the users are served.
        self._queues: dict[str, collections.deque[asyncio.Future[None]]] = {}
        #: Places held, per agent and per user, and the bytes the user's places declared.
        self._places_of_agent: collections.Counter[str] = collections.Counter()
        self._places_of_user: collections.Counter[str] = collections.Counter()
        self._bytes_of_user: collections.Counter[str] = collections.Counter()
        self._probe: asyncio.Task[None] | None = None
        self._last_request = 0.0
        self._last_let_in = 0.0
        self._person_until = 0.0

    def person_typed(self) -> None:
        """A person sent input to one of the server's terminals: agents go slow for
        ``person_window`` seconds."""
        self._person_until = asyncio.get_running_loop().time() + self.person_window

    def _clear(self, now: float) -> bool:
        """Whether the loop is on time and no person is typing."""
        return self.lag <= self.lag_limit and now >= self._person_until

    def reserve(self, user: str, agent: str, size: int) -> Place | str:
        """A place for a request of ``agent`` (of ``user``) whose body declares ``size`` bytes,
        or, beyond the bounds, a sentence saying which one it went beyond."""
        size = max(size, MIN_REQUEST_BYTES)
        if self._places_of_agent[agent] >= self.max_waiting_per_agent:
            return (
                f"This agent has {self.max_waiting_per_agent} requests waiting already; wait "
                "for their answers."
            )
        if (
            self._places_of_user[user] >= self.max_waiting_per_user
            or self._bytes_of_user[user] + size > self.max_waiting_bytes_per_user
        ):
            return "Your user's agents have too many requests waiting; wait for their answers."
        self._places_of_agent[agent] += 1
        self._places_of_user[user] += 1
        self._bytes_of_user[user] += size
        return Place(self, user, agent, size)

    def _release(self, place: Place) -> None:
        for counter, key, amount in (
            (self._places_of_agent, place.agent, 1),
            (self._places_of_user, place.user, 1),
            (self._bytes_of_user, place.user, place.size),
        ):
            counter[key] -= amount
            if counter[key] <= 0:
                del counter[key]

    @property
    def waiting(self) -> int:
        """How many requests wait for their turn now."""
        return sum(len(queue) for queue in self._queues.values())

    async def admit(self, user: str = "") -> None:
        """Return when a request of ``user``'s agents may be served: at once while the loop is
        on time, no person is typing and no other request waits, else in turn, the users in
        rotation (see the module docstring). Cancelled, the request leaves the queue."""
        loop = asyncio.get_running_loop()
        now = self._last_request = loop.time()
        if self._probe is None or self._probe.done():
            self._probe = loop.create_task(self._measure())
        if self._clear(now) and not self._queues:
            return
        self.held += 1
        if not self._queues:  # (the floor's interval starts with the first one waiting)
            self._last_let_in = loop.time()
        turn = loop.create_future()
        self._queues.setdefault(user, collections.deque()).append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                # (let in as it went away: its turn passes to the next one)
                self._let_one_in()
            else:
                self._forget(user, turn)
            raise

    def _forget(self, user: str, turn: asyncio.Future[None]) -> None:
        queue = self._queues.get(user)
        if queue is None:
            return
        with contextlib.suppress(ValueError):
            queue.remove(turn)
        if not queue:
            del self._queues[user]

    def close(self) -> None:
        """Stop measuring and let every waiting request in (the server stops)."""
        if self._probe is not None:
            self._probe.cancel()
            self._probe = None
        while self._queues:
            self._let_one_in()

    def _let_one_in(self) -> None:
        """Let in the first request of the user whose turn it is; that user goes to the end of
        the rotation."""
        while self._queues:
            user = next(iter(self._queues))
            queue = self._queues.pop(user)
            turn = queue.popleft()
            if queue:
                self._queues[user] = queue
            if not turn.done():
                turn.set_result(None)
                self._last_let_in = turn.get_loop().time()
                return

    async def _measure(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._queues or loop.time() - self._last_request < IDLE_AFTER:
                due = loop.time() + self.probe_interval
                await asyncio.sleep(self.probe_interval)
                self.lag = max(loop.time() - due, 0.0)
                self.measurements += 1
                now = loop.time()
                typing = now < self._person_until
                floor = self.person_floor_interval if typing else self.floor_interval
                if self._clear(now) or now - self._last_let_in >= floor:
                    self._let_one_in()
        finally:
            self.lag = 0.0
