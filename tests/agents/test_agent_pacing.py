"""Agents yield to people: agents' requests wait while the event loop is late (AgentPacer).

The loop is made late the way twenty busy agents make it: work that holds it for 20 ms at a
time; the benchmark (``benchmarks/agent_commands.py --agents 20``) measures what it gives a
person's echo.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import typing as t

from jupyter_tool_terminal.agents.pacing import AgentPacer


async def measured(pacer: AgentPacer, until: t.Callable[[], bool]) -> None:
    """Return once the pacer's measurements made ``until`` true (they are all there is to
    wait for: each is a timer on this loop)."""
    while not until():  # noqa: ASYNC110 - (a measurement is a timer, not an event)
        await asyncio.sleep(0)


@contextlib.asynccontextmanager
async def late_loop(pacer: AgentPacer) -> t.AsyncIterator[None]:
    """The loop held 20 ms at a time until the block ends; entered once the pacer saw it."""
    stop = asyncio.Event()

    async def hold() -> None:
        while not stop.is_set():
            time.sleep(0.02)  # noqa: ASYNC251 - holding the loop is the point
            await asyncio.sleep(0)

    holder = asyncio.create_task(hold())
    try:
        await measured(pacer, until=lambda: pacer.lag > pacer.lag_limit)
        yield
    finally:
        stop.set()
        await holder


async def test_a_request_is_let_in_at_once_while_the_loop_is_on_time() -> None:
    pacer = AgentPacer()
    try:
        started = time.perf_counter()
        for _ in range(10):
            await pacer.admit()
        assert time.perf_counter() - started < pacer.probe_interval
        assert pacer.held == 0
    finally:
        pacer.close()


async def test_requests_wait_while_the_loop_is_late_and_go_in_one_at_a_time() -> None:
    pacer = AgentPacer()
    await pacer.admit()  # (starts the measuring)
    admitted: list[tuple[int, float]] = []

    async def request(number: int) -> None:
        await pacer.admit()
        admitted.append((number, time.perf_counter()))

    try:
        async with late_loop(pacer):
            asked = time.perf_counter()
            requests = [asyncio.create_task(request(number)) for number in range(3)]
            # The loop stays late: they go in, in turn, one every floor interval at the most.
            await asyncio.gather(*requests)
        assert [number for number, _ in admitted] == [0, 1, 2]
        times = [asked] + [when for _, when in admitted]
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        assert min(gaps) >= pacer.floor_interval * 0.9, gaps
        assert pacer.held == 3
    finally:
        pacer.close()


async def test_a_request_waits_no_longer_than_the_loop_is_late() -> None:
    pacer = AgentPacer(floor_interval=60)
    await pacer.admit()
    try:
        async with late_loop(pacer):
            waiting = asyncio.create_task(pacer.admit())
            start = pacer.measurements
            await measured(pacer, until=lambda: pacer.measurements >= start + 5)
            assert not waiting.done()  # (five late measurements, and no floor within a minute)
        await asyncio.wait_for(waiting, 5)  # on time again: in
    finally:
        pacer.close()


async def test_a_waiting_request_that_is_cancelled_does_not_hold_up_the_next() -> None:
    pacer = AgentPacer()
    await pacer.admit()
    try:
        async with late_loop(pacer):
            first = asyncio.create_task(pacer.admit())
            second = asyncio.create_task(pacer.admit())
            await asyncio.sleep(0)
            first.cancel()
        await asyncio.wait_for(second, 5)
        assert first.cancelled()
    finally:
        pacer.close()


async def test_closing_lets_every_waiting_request_in() -> None:
    pacer = AgentPacer()
    await pacer.admit()
    async with late_loop(pacer):
        waiting = [asyncio.create_task(pacer.admit()) for _ in range(3)]
        await asyncio.sleep(0)
        pacer.close()
        await asyncio.wait_for(asyncio.gather(*waiting), 5)


async def test_while_a_person_types_requests_go_in_at_the_persons_floor_then_at_once() -> None:
    # (a lag limit of a second: only the person's typing holds requests here, however busy the
    # machine running the test is)
    pacer = AgentPacer(lag_limit=1.0, person_window=0.35, person_floor_interval=0.1)
    await pacer.admit()
    admitted: list[float] = []

    async def request() -> None:
        await pacer.admit()
        admitted.append(time.perf_counter())

    try:
        pacer.person_typed()
        asked = time.perf_counter()
        await asyncio.gather(*(request() for _ in range(4)))
        gaps = [later - earlier for earlier, later in itertools.pairwise([asked, *admitted])]
        # Three in, one every floor interval; the fourth as the window ends (not a whole
        # interval after the third, unless the machine is slow), and then at once.
        assert min(gaps[:3]) >= pacer.person_floor_interval * 0.9, gaps
        assert admitted[3] - asked >= pacer.person_window
        assert pacer.held == 4
        await pacer.admit()
        assert pacer.held == 4
    finally:
        pacer.close()


async def test_users_are_served_in_turn_whatever_one_of_them_queued() -> None:
    """One user's queue delays another user's request by one turn at the most."""
    pacer = AgentPacer(lag_limit=1.0, person_window=60, person_floor_interval=0.02)
    await pacer.admit()
    admitted: list[str] = []

    async def request(user: str) -> None:
        await pacer.admit(user)
        admitted.append(user)

    try:
        pacer.person_typed()
        floods = [asyncio.create_task(request("alice")) for _ in range(10)]
        await asyncio.sleep(0)
        bobs = asyncio.create_task(request("bob"))
        await asyncio.wait_for(bobs, 5)
        assert admitted.count("alice") <= 1, admitted
        await asyncio.wait_for(asyncio.gather(*floods), 5)
    finally:
        pacer.close()


async def test_what_waits_is_bounded_per_agent_per_user_and_in_bytes() -> None:
    pacer = AgentPacer(
        max_waiting_per_agent=2, max_waiting_per_user=3, max_waiting_bytes_per_user=1 << 20
    )
    first, second = pacer.reserve("alice", "a1", 10), pacer.reserve("alice", "a1", 10)
    assert not isinstance(first, str)
    assert not isinstance(second, str)
    assert "This agent" in str(pacer.reserve("alice", "a1", 10))
    third = pacer.reserve("alice", "a2", 10)
    assert not isinstance(third, str)
    assert "Your user's agents" in str(pacer.reserve("alice", "a3", 10))
    # Another user is not counted against her bounds.
    assert not isinstance(pacer.reserve("bob", "b1", 10), str)
    first.release()
    first.release()  # (harmless)
    assert not isinstance(pacer.reserve("alice", "a3", 10), str)
    # Bytes: a user's waiting bodies are bounded too.
    assert "Your user's agents" in str(pacer.reserve("carol", "c1", (1 << 20) + 1))


async def test_a_request_that_goes_away_leaves_the_queue() -> None:
    pacer = AgentPacer(lag_limit=1.0, person_window=60, person_floor_interval=60)
    await pacer.admit()
    try:
        pacer.person_typed()
        waiting = [asyncio.create_task(pacer.admit("alice")) for _ in range(3)]
        await asyncio.sleep(0)
        assert pacer.waiting == 3
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        assert pacer.waiting == 0
    finally:
        pacer.close()
