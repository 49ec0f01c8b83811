"""Opening a terminal: what an open waits for, and what it leaves running.

A server's lease (the reaper it keeps in a container where its shells run) must answer before
a shell starts there; starting one costs an open an exec of its own, as long again as the
shell's. The lease stays for ``DockerRuntime.lease_linger`` seconds after the container's last
shell, so the next open (a reset, a reload, another terminal) goes straight to its shell.
"""

from __future__ import annotations

import asyncio
import typing as t

import pytest

from jupyter_tool_terminal.app import ToolTerminalApp

from ..conftest import (
    BASE_PROCESSES,
    LEASE_PROCESS,
    Api,
    InstanceFactory,
    container_processes,
    exec_count,
    wait_for_processes,
)

LINGER = 30.0


@pytest.fixture
def docker_runtime_config() -> dict[str, t.Any]:
    """The lease stays after the last shell (as the product default does)."""
    return {"lease_linger": LINGER}


async def _open_and_close(alice: Api, container: t.Any) -> None:
    model, term = await alice.terminal(container.name)
    assert "ran-42" in await term.run("echo ran-$((6*7))")
    await alice.call("DELETE", "sessions", model["id"])
    await term.expect_frame("disconnect")


async def test_an_open_after_the_last_close_starts_only_its_shell(
    alice: Api, make_container: InstanceFactory
) -> None:
    container = make_container()
    await _open_and_close(alice, container)
    # The shell is gone; the lease stays, and nothing else.
    processes = await wait_for_processes(container, BASE_PROCESSES | {LEASE_PROCESS})
    assert sorted(set(processes) - BASE_PROCESSES) == [LEASE_PROCESS], processes
    before = await asyncio.to_thread(exec_count, container)
    model, term = await alice.terminal(container.name)
    assert "again-42" in await term.run("echo again-$((6*7))")
    # One exec: the shell's. (A new lease would be one more, and an orphan kill through it.)
    assert await asyncio.to_thread(exec_count, container) == before + 1
    processes = await asyncio.to_thread(container_processes, container)
    assert processes.count(LEASE_PROCESS) == 1, processes
    await alice.call("DELETE", "sessions", model["id"])


async def test_a_kept_lease_kills_a_closed_shells_jobs(
    alice: Api, make_container: InstanceFactory
) -> None:
    container = make_container()
    await _open_and_close(alice, container)
    model, term = await alice.terminal(container.name)
    term.send("stdin", "sleep 1041 & setsid sleep 1042 &\r")
    await term.run("true")
    await alice.call("DELETE", "sessions", model["id"])
    await term.expect_frame("disconnect")
    processes = await wait_for_processes(container, BASE_PROCESSES | {LEASE_PROCESS})
    assert set(processes) <= BASE_PROCESSES | {LEASE_PROCESS}, processes


@pytest.mark.parametrize("docker_runtime_config", [{"lease_linger": 0.5}])
async def test_a_lease_ends_once_it_lingered(alice: Api, make_container: InstanceFactory) -> None:
    container = make_container()
    await _open_and_close(alice, container)
    processes = await wait_for_processes(container, BASE_PROCESSES, timeout=10)
    assert set(processes) <= BASE_PROCESSES, processes


async def test_a_kept_lease_ends_with_the_server(
    tool_app: ToolTerminalApp, alice: Api, make_container: InstanceFactory
) -> None:
    container = make_container()
    await _open_and_close(alice, container)
    assert LEASE_PROCESS in await asyncio.to_thread(container_processes, container)
    await tool_app.stop_extension()
    processes = await wait_for_processes(container, BASE_PROCESSES, timeout=10)
    assert set(processes) <= BASE_PROCESSES, processes


async def test_a_lease_lost_with_a_restart_is_started_again(
    alice: Api, make_container: InstanceFactory
) -> None:
    container = make_container()
    await _open_and_close(alice, container)
    # The container restarts while no shell runs: the kept lease's exec ended with it.
    await asyncio.to_thread(container.restart, timeout=0)
    model, term = await alice.terminal(container.name)
    assert "back-42" in await term.run("echo back-$((6*7))")
    # The shell runs beside a lease again (it carries this server's id: a lease must run).
    processes = await asyncio.to_thread(container_processes, container)
    assert processes.count(LEASE_PROCESS) == 1, processes
    await alice.call("DELETE", "sessions", model["id"])
