"""What a server killed with SIGKILL leaves behind, and what its next start reclaims (issue 19.6).

A SIGKILL runs none of the server's own clean-up: the shells' execs stay in their containers
(closing an exec's connection ends nothing) and a local shell's background jobs outlive their
terminal. The next server to use the container (or, locally, the next server of the same user
and runtime directory) kills what a dead server left, and never what a live one runs.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from .conftest import BASE_PROCESSES, InstanceFactory, container_processes, wait_for_processes
from .server_process import ServerProcess, running_servers, start_server
from .terminal_client import TerminalClient


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
        first = start_server(tmp_path / "server")
        servers.append(first)
        await first.wait_ready()
        await _sessions_with_sleeps(first, container.name, 3101)
        first.kill()
        # What the kill left: both shells and both sleeps still run in the container.
        left = await asyncio.to_thread(container_processes, container)
        assert left.count("sleep 3101") == 2, left
        assert left.count("/bin/sh") == 2, left

        again = start_server(tmp_path / "server")
        servers.append(again)
        await again.wait_ready()
        await _open_and_close(again, container.name)
        processes = await wait_for_processes(container, BASE_PROCESSES, timeout=10)
        assert set(processes) <= BASE_PROCESSES, processes


async def test_the_clean_up_spares_the_sessions_of_another_live_server(
    make_instance: InstanceFactory, tmp_path: Path
) -> None:
    container = make_instance(owner="dana")
    with running_servers() as servers:
        other = start_server(tmp_path / "other")
        first = start_server(tmp_path / "server")
        servers += [other, first]
        await other.wait_ready()
        await first.wait_ready()
        others_session, others_term = await other.terminal(container.name)
        await _background(others_term, "sleep 3102")
        await _sessions_with_sleeps(first, container.name, 3103)
        first.kill()

        again = start_server(tmp_path / "server")
        servers.append(again)
        await again.wait_ready()
        await _open_and_close(again, container.name)
        survivors = BASE_PROCESSES | {"/bin/sh", "sleep 3102"}
        processes = await wait_for_processes(container, survivors, timeout=10)
        assert set(processes) <= survivors, processes
        # The other server's shell and its job run on, and its terminal still works.
        assert processes.count("sleep 3102") == 1, processes
        assert processes.count("/bin/sh") == 1, processes
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


async def test_local_shells_of_a_killed_server_are_reclaimed_at_its_next_start(
    tmp_path: Path,
) -> None:
    local = {
        "runtime": "local",
        "local_instances": {"here": {"tool": "sandbox", "root": str(tmp_path / "here")}},
    }
    with running_servers() as servers:
        first = start_server(tmp_path / "server", **local)
        servers.append(first)
        await first.wait_ready()
        _, term = await first.terminal("here")
        await _background(term, "sleep 3104")
        # A job that left the shell's session and process group, as a daemon does.
        await _background(term, "setsid sleep 3105")
        first.kill()
        # The shell itself ends with its terminal (the kernel hangs it up); its jobs do not.
        assert len(await asyncio.to_thread(_running_with, "3104")) == 1
        assert len(await asyncio.to_thread(_running_with, "3105")) == 1

        again = start_server(tmp_path / "server", **local)
        servers.append(again)
        await again.wait_ready()
        assert await asyncio.to_thread(_running_with, "3104") == []
        assert await asyncio.to_thread(_running_with, "3105") == []
