"""A server's sessions handed over to its successor (issue 20.3): an upgrade or a configuration
change without ending a terminal.

The successor is started with ``take_over`` on the same port and runtime directory; it takes
the exec streams (SCM_RIGHTS), the sessions' state and the listening socket from the running
server, which then exits without killing anything. The shell, what runs in it and its screen
are the same afterwards, and a tool type the new configuration adds is listed. A successor
that refuses (its configuration lacks a tool type whose sessions are open) leaves the old
server serving everything.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import typing as t
from pathlib import Path

import docker
import pytest
from tornado.httpclient import AsyncHTTPClient

from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.handover import FAILED, Successor
from jupyter_tool_terminal.runtime.docker import DockerRuntime
from jupyter_tool_terminal.tooltypes import parse_tool_type

from ..conftest import (
    BASE_PROCESSES,
    Api,
    InstanceFactory,
    container_processes,
    wait_for_processes,
    wait_until,
)
from ..support.server_process import ServerProcess, add_server, running_servers, start_server

#: The successor's configuration: the old one's tool type, and one more.
ADDED = "handover-added"
WITH_ADDED_TOOL: dict[str, dict[str, t.Any]] = {"sandbox": {}, ADDED: {}}


def _running_execs(container: t.Any) -> list[str]:
    api = container.client.api
    execs = api.inspect_container(container.id).get("ExecIDs") or []
    return [exec_id for exec_id in execs if api.exec_inspect(exec_id).get("Running")]


async def _successor(
    servers: list[ServerProcess], folder: Path, old: ServerProcess, **settings: t.Any
) -> ServerProcess:
    log = (folder / "successor.log").open("ab")
    new = start_server(folder, stderr=log, port=old.port, take_over=True, **settings)
    log.close()
    servers.append(new)
    return new


async def test_a_take_over_keeps_the_shell_its_programs_and_its_screen(
    make_instance: InstanceFactory, docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    container = make_instance(owner="dana")
    added = make_instance(owner="dana", tool=ADDED)
    folder = tmp_path / "server"
    with running_servers() as servers:
        old = await add_server(servers, folder)
        listed = await old.instances()  # (the engine is shared: others' may be listed too)
        assert container.name in listed
        assert added.name not in listed
        session, term = await old.terminal(container.name)
        shell_pid = (await term.run("echo $$")).strip()
        term.send("stdin", "sleep 1000 &\r")
        assert "before-42" in await term.run("echo before-$((6 * 7))")
        assert "sleep 1000" in await asyncio.to_thread(container_processes, container)

        # Output written around the hand-over is read by one server or the other, once.
        term.send("stdin", "sleep 2; echo after-$((30 + 3))\r")
        new = await _successor(servers, folder, old, tool_types=WITH_ADDED_TOOL)
        # The old server hands over, closes its clients (they reconnect) and exits by itself.
        await term.wait_closed(timeout=60)
        assert await asyncio.to_thread(old.process.wait, 30) == 0
        await new.wait_ready()

        again = await new.connect(session["id"])
        await again.expect("before-42")  # the screen as it was
        await again.expect("after-33")
        assert again.output.count("after-33") == 1, again.output
        assert (await again.run("echo $$")).strip() == shell_pid
        assert "sleep 1000" in await asyncio.to_thread(container_processes, container)
        listed = await new.instances()
        assert container.name in listed
        assert added.name in listed  # the new configuration's tool type

        # Nothing of either server is left once the session ends.
        assert await new.delete_session(session["id"]) == 204
        processes = await wait_for_processes(container, BASE_PROCESSES, timeout=10)
        assert set(processes) <= BASE_PROCESSES, processes
        assert await asyncio.to_thread(_running_execs, container) == []


async def _recordings(server: ServerProcess) -> list[dict[str, t.Any]]:
    """``GET /tool-terminal/api/recordings`` of ``server``: dana's recordings, newest first."""
    response = await AsyncHTTPClient().fetch(
        f"{server.base}/tool-terminal/api/recordings", headers=server.headers
    )
    listed: list[dict[str, t.Any]] = json.loads(response.body)
    return listed


async def test_a_recorded_session_taken_over_is_recorded_on_under_its_own_id(
    make_instance: InstanceFactory, tmp_path: Path
) -> None:
    container = make_instance(owner="dana")
    folder = tmp_path / "server"
    recorded = {
        "tool_types": {"sandbox": {"record": True}},
        "recording_dir": str(tmp_path / "recordings"),
    }
    with running_servers() as servers:
        old = await add_server(servers, folder, **recorded)
        session, term = await old.terminal(container.name)
        assert "before-42" in await term.run("echo before-$((6 * 7))")
        new = await _successor(servers, folder, old, **recorded)
        await term.wait_closed(timeout=60)
        assert await asyncio.to_thread(old.process.wait, 30) == 0
        await new.wait_ready()
        again = await new.connect(session["id"])
        assert "after-33" in await again.run("echo after-$((30 + 3))")
        assert await new.delete_session(session["id"]) == 204

        # Two recordings, the predecessor's and the successor's, both of the session the user
        # knows (in the listing and in the file's name); the successor's goes on after it.
        listed = await _recordings(new)
        assert [item["session"] for item in listed] == [session["id"]] * 2, listed
        assert all(session["id"] in item["id"] for item in listed), listed
        later = tmp_path / "recordings" / f"{listed[0]['id']}.cast"

        async def recorded_on() -> bool:
            return "after-33" in await asyncio.to_thread(later.read_text)

        await wait_until(recorded_on, timeout=30)


async def test_a_refused_take_over_leaves_the_old_server_serving(
    make_instance: InstanceFactory, tmp_path: Path
) -> None:
    container = make_instance(owner="dana")
    folder = tmp_path / "server"
    with running_servers() as servers:
        old = await add_server(servers, folder)
        session, term = await old.terminal(container.name)
        shell_pid = (await term.run("echo $$")).strip()
        await term.run("echo before-refusal")
        # The new configuration lacks the open session's tool type: it cannot serve it.
        new = await _successor(servers, folder, old, tool_types={ADDED: {}})
        assert await asyncio.to_thread(new.process.wait, 60) == FAILED
        assert old.process.poll() is None
        # Its clients were closed when it suspended its sessions; they reconnect to it.
        await term.wait_closed()
        term = await old.connect(session["id"])
        await term.expect("before-refusal")
        assert (await term.run("echo $$")).strip() == shell_pid
        assert "still-here" in await term.run("echo still-here")
        other, other_term = await old.terminal(container.name)
        assert "fresh" in await other_term.run("echo fresh")
        for ended in (session, other):
            assert await old.delete_session(ended["id"]) == 204
        processes = await wait_for_processes(container, BASE_PROCESSES, timeout=10)
        assert set(processes) <= BASE_PROCESSES, processes


async def test_the_successor_of_no_server_starts_on_its_own(
    make_instance: InstanceFactory, tmp_path: Path
) -> None:
    """``take_over`` with no running predecessor is an ordinary start."""
    container = make_instance(owner="dana")
    with running_servers() as servers:
        server = await add_server(servers, tmp_path, take_over=True)
        _, term = await server.terminal(container.name)
        assert "alone" in await term.run("echo alone")


async def test_a_successor_that_dies_midway_leaves_the_server_serving(
    tool_app: ToolTerminalApp, alice: Api, make_instance: InstanceFactory
) -> None:
    """The successor receives everything, then dies: nothing was taken, nothing is lost."""
    container = make_instance(owner="alice")
    model, term = await alice.terminal(container.name)
    shell_pid = (await term.run("echo $$")).strip()
    await term.run("echo before-$((40 + 2))")

    handover = tool_app.handover
    assert handover is not None

    async def listening() -> bool:
        return handover.predecessor is not None

    await wait_until(listening)
    assert handover.predecessor is not None
    # Output the shell writes while it is suspended waits for whoever reads it next.
    term.send("stdin", "sleep 1; echo after-$((20 + 1))\r")
    successor = await asyncio.to_thread(Successor.connect, handover.predecessor.path)
    assert successor is not None
    inheritance = await asyncio.to_thread(successor.receive)
    ((entry, _),) = inheritance.sessions
    assert entry["state"]["id"] == model["id"]
    assert "before-42" in entry["screen"]
    # (The test's server has no HTTP server of its own to pass: pytest-jupyter's serves it.)
    await term.wait_closed()
    for sock in [*inheritance.listening, *inheritance.shells]:
        sock.close()
    successor.close()

    # The client reconnects (suspended, the session did not end though the grace is 0).
    again = await alice.connect(model["id"])
    await again.expect("before-42")
    await again.expect("after-21")
    assert (await again.run("echo $$")).strip() == shell_pid
    _, other = await alice.terminal(container.name)  # new sessions open again
    assert "fresh" in await other.run("echo fresh")


#: A process posing as the running server: it listens at the hand-over socket's path as
#: another user (SO_PEERCRED gives the uid of whoever called listen()) and prints the bytes a
#: successor sends it.
_IMPOSTOR = """
import os, socket, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o666)
os.setgid(65534)
os.setuid(65534)
sock.listen(1)
print("listening", flush=True)
sock.settimeout(120)
conn, _ = sock.accept()
conn.settimeout(10)
received = b""
try:
    while chunk := conn.recv(4096):
        received += chunk
except OSError:
    pass
print(received.hex(), flush=True)
"""


def _impostor(path: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _IMPOSTOR, path], stdout=subprocess.PIPE, text=True
    )


async def test_a_successor_refuses_a_running_server_of_another_user(tmp_path: Path) -> None:
    """Issue 30.4: whoever listens at the hand-over socket's path as another user is not the
    running server; the successor hangs up before saying anything and takes nothing."""
    folder = tmp_path / "server"
    folder.mkdir()
    path = str(folder / "handover.sock")
    impostor = _impostor(path)
    try:
        assert impostor.stdout is not None
        assert await asyncio.to_thread(impostor.stdout.readline) == "listening\n"
        with running_servers() as servers:
            log = (folder / "successor.log").open("ab")
            new = start_server(folder, stderr=log, take_over=True, handover_socket=path)
            log.close()
            servers.append(new)
            assert await asyncio.to_thread(new.process.wait, 60) == FAILED
        said = await asyncio.to_thread(impostor.communicate, timeout=30)
        assert said[0].splitlines()[-1] == ""  # not even the successor's hello
        assert "runs as another user" in (folder / "successor.log").read_text()
    finally:
        impostor.kill()
        impostor.wait()


async def test_a_hand_over_socket_in_a_directory_others_can_write_is_refused(
    tmp_path: Path,
) -> None:
    """Another user could put a socket of their own there: neither a successor nor a running
    server uses such a path."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    socket_path = shared / "handover.sock"
    path = str(socket_path)
    folder = tmp_path / "server"
    with running_servers() as servers:
        log = (tmp_path / "server.log").open("ab")
        servers.append(start_server(folder, stderr=log, handover_socket=path))
        await servers[0].wait_ready()
        log.close()
        assert not socket_path.exists()  # the running server does not listen there
        assert "others can write" in (tmp_path / "server.log").read_text()
        log = (tmp_path / "successor.log").open("ab")
        new = start_server(
            folder, stderr=log, port=servers[0].port, take_over=True, handover_socket=path
        )
        log.close()
        servers.append(new)
        assert await asyncio.to_thread(new.process.wait, 60) == FAILED
        assert "others can write" in (tmp_path / "successor.log").read_text()
        assert servers[0].process.poll() is None


async def test_with_several_engines_an_adopted_shell_is_killed_on_its_own_engine(
    make_container: InstanceFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handed-over shell names its engine: the successor's kill reaches it there, not on the
    engine ``docker.from_env()`` finds (here none)."""
    container = make_container(owner="dana")
    engines = {"a": {"url": os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"}}
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    tool = parse_tool_type("sandbox", {})
    old, new = DockerRuntime(engines=engines), DockerRuntime(engines=engines)

    async def sleeping() -> bool:
        processes = await asyncio.to_thread(container_processes, container)
        return any("sleep 4711" in process for process in processes)

    async def not_sleeping() -> bool:
        return not await sleeping()

    try:
        instance = await old.get_instance(f"a/{container.name}")
        assert instance is not None
        channel = await old.start_shell(instance, tool)
        await channel.write(b"sleep 4711 &\n")
        await wait_until(sleeping)
        # What the hand-over sends: the exec connection (a duplicate here), the shell's
        # names, and the runtime's state.
        descriptor, shell = channel.handover()
        connection = socket.socket(fileno=os.dup(descriptor))
        new.take_over(old.handover_state())
        channel.release()
        adopted = await new.adopt_shell(shell, connection)
        await adopted.write(b"echo adopted-$((2+3))\n")
        seen = b""
        while b"adopted-5" not in seen:
            seen += await asyncio.wait_for(adopted.read(4096), 10)
        await adopted.terminate()
        await wait_until(not_sleeping, timeout=10)
    finally:
        old.close()
        new.close()
