"""What a server killed with SIGKILL leaves behind, and what its next start reclaims (issue 19.6).

A SIGKILL runs none of the server's own clean-up: the shells' execs stay in their containers
(closing an exec's connection ends nothing) and a local shell's background jobs outlive their
terminal. The next server to use the container (or, locally, the next server of the same user
and runtime directory) kills what a dead server left, and never what a live one runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import typing as t
from pathlib import Path

from jupyter_tool_terminal.runtime.launch import SERVER_VARIABLE
from jupyter_tool_terminal.runtime.reaper import KILL_ENVIRONMENT, KILL_ONCE_SCRIPT, LEASE_VARIABLE

from ..conftest import (
    BASE_PROCESSES,
    LEASE_PROCESS,
    InstanceFactory,
    container_processes,
    wait_for_processes,
    wait_until,
)
from ..support.server_process import ServerProcess, add_server, running_servers
from ..support.terminal_client import TerminalClient


async def _background(term: TerminalClient, command: str) -> None:
    term.send("stdin", f"{command} &\r")
    await term.run("true")


async def _sessions_with_sleeps(server: ServerProcess, instance: str, seconds: int) -> None:
    """Two sessions in ``instance``, each running ``sleep SECONDS`` in the background."""
    for _ in range(2):
        _, term = await server.terminal(instance)
        await _background(term, f"sleep {seconds}")


async def _open_and_close(server: ServerProcess, instance: str) -> None:
    session, term = await server.terminal(instance)
    await term.run("true")
    assert await server.delete_session(session["id"]) == 204


async def test_a_restarted_server_kills_what_its_killed_instance_left(
    make_instance: InstanceFactory, tmp_path: Path
) -> None:
    container = make_instance(owner="dana")
    with running_servers() as servers:
        first = await add_server(servers, tmp_path / "server")
        await _sessions_with_sleeps(first, container.name, 3101)
        first.kill()
        # What the kill left: both shells and both sleeps still run in the container.
        left = await asyncio.to_thread(container_processes, container)
        assert left.count("sleep 3101") == 2, left
        assert left.count("/bin/sh") == 2, left

        again = await add_server(servers, tmp_path / "server")
        await _open_and_close(again, container.name)
        processes = await wait_for_processes(container, BASE_PROCESSES, timeout=10)
        assert set(processes) <= BASE_PROCESSES, processes


async def test_the_clean_up_spares_the_sessions_of_another_live_server(
    make_instance: InstanceFactory, tmp_path: Path
) -> None:
    container = make_instance(owner="dana")
    with running_servers() as servers:
        other = await add_server(servers, tmp_path / "other")
        first = await add_server(servers, tmp_path / "server")
        others_session, others_term = await other.terminal(container.name)
        await _background(others_term, "sleep 3102")
        await _sessions_with_sleeps(first, container.name, 3103)
        first.kill()

        again = await add_server(servers, tmp_path / "server")
        await _open_and_close(again, container.name)
        # The other server's shell, its job and its lease run on; nothing else does.
        survivors = BASE_PROCESSES | {"/bin/sh", "sleep 3102", LEASE_PROCESS}

        async def settled() -> bool:
            return set(await asyncio.to_thread(container_processes, container)) <= survivors

        await wait_until(settled, timeout=10)
        processes = await asyncio.to_thread(container_processes, container)
        assert sorted(set(processes) - BASE_PROCESSES) == ["/bin/sh", LEASE_PROCESS, "sleep 3102"]
        # Once each: the other server's shell, its sleep and its lease (BASE_PROCESSES names
        # what a container runs of itself, with either engine's init).
        assert len([p for p in processes if p not in BASE_PROCESSES]) == 3, processes
        assert "alive" in await others_term.run("echo alive")
        assert await other.delete_session(others_session["id"]) == 204
        processes = await wait_for_processes(container, BASE_PROCESSES)
        assert set(processes) <= BASE_PROCESSES, processes


def _running_with(argument: str) -> list[int]:
    """The live processes of this machine whose command line is ``sleep ARGUMENT``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                cmdline = file.read()
            with open(f"/proc/{pid}/stat", "rb") as file:
                state = file.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if cmdline == f"sleep\0{argument}\0".encode() and state not in (b"Z", b"X"):
            found.append(int(pid))
    return found


@contextlib.contextmanager
def _killed_at_the_end(*arguments: str) -> t.Iterator[None]:
    """Whatever the test did, no ``sleep ARGUMENT`` it started outlives it (a failed reclaim
    would leave them to the next run, where they would be counted)."""
    try:
        yield
    finally:
        for argument in arguments:
            for pid in _running_with(argument):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


async def test_local_shells_of_a_killed_server_are_reclaimed_at_its_next_start(
    tmp_path: Path,
) -> None:
    local = {
        "runtime": "local",
        "local_instances": {"here": {"tool": "sandbox", "root": str(tmp_path / "here")}},
    }
    with running_servers() as servers, _killed_at_the_end("3104", "3105"):
        first = await add_server(servers, tmp_path / "server", **local)
        _, term = await first.terminal("here")
        await _background(term, "sleep 3104")
        # A job that left the shell's session and process group, as a daemon does.
        await _background(term, "setsid sleep 3105")
        first.kill()
        # The shell itself ends with its terminal (the kernel hangs it up); its jobs do not.
        assert len(await asyncio.to_thread(_running_with, "3104")) == 1
        assert len(await asyncio.to_thread(_running_with, "3105")) == 1

        await add_server(servers, tmp_path / "server", **local)
        assert await asyncio.to_thread(_running_with, "3104") == []
        assert await asyncio.to_thread(_running_with, "3105") == []


def _orphan_kill(container: t.Any, *live: str) -> bytes:
    """Run the kill script's orphan kill in the container, as its own exec; its answer."""
    result = container.exec_run(
        ["/bin/sh", "-c", KILL_ONCE_SCRIPT, "jupyter-tool-terminal-kill", "orphans", *live],
        environment=KILL_ENVIRONMENT,
    )
    assert result.exit_code == 0, result.output
    return bytes(result.output.strip())


def _run_detached(container: t.Any, command: str, **environment: str) -> None:
    container.exec_run(["/bin/sh", "-c", f"exec {command}"], environment=environment, detach=True)


async def test_an_orphan_kill_spares_the_shells_of_a_server_it_was_not_told_of(
    make_instance: InstanceFactory,
) -> None:
    """A server whose lease came up after the live ones were listed is seen by the kill itself."""
    container = make_instance(owner="dana")
    me, other, dead = (secrets.token_hex(16) for _ in range(3))
    for command, variables in (
        ("sleep 3201", {SERVER_VARIABLE: other}),
        ("sleep 3202", {SERVER_VARIABLE: dead}),
        ("sleep 3203", {LEASE_VARIABLE: other}),
    ):
        await asyncio.to_thread(_run_detached, container, command, **variables)

    async def running() -> list[str]:
        return sorted(
            p for p in await asyncio.to_thread(container_processes, container) if "sleep 32" in p
        )

    everything = ["sleep 3201", "sleep 3202", "sleep 3203"]
    await wait_until(lambda: _equals(running(), everything))
    # The other server's lease runs but the caller did not name it: nothing is killed.
    assert await asyncio.to_thread(_orphan_kill, container, me) == b"0 done 3"
    assert await running() == everything
    # Named, it is spared, and the dead server's process is killed.
    assert await asyncio.to_thread(_orphan_kill, container, me, other) == b"0 done 0"
    assert await running() == ["sleep 3201", "sleep 3203"]
    # Once its lease is gone, that server's processes are orphans too.
    # (The bracket keeps this shell's own command line from matching.)
    end_lease = "for p in /proc/[0-9]*; do grep -q '320[3]' $p/cmdline && kill ${p#/proc/}; done"
    await asyncio.to_thread(container.exec_run, ["/bin/sh", "-c", end_lease])
    await wait_until(lambda: _equals(running(), ["sleep 3201"]))
    assert await asyncio.to_thread(_orphan_kill, container, me) == b"0 done 0"
    assert await running() == []


async def _equals(value: t.Awaitable[list[str]], expected: list[str]) -> bool:
    return await value == expected
