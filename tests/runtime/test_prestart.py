"""Shells started ahead (``c.DockerRuntime.prestart_shells``): the next terminal of an instance
its owner uses takes an exec already running, and is in every way a fresh shell.

What a fresh shell promises and is checked here of one started ahead: its startup command runs
when the terminal opens (not before), in a terminal of the size asked for; its environment is
the tool type's; closing the terminal kills it; none is left behind when the server stops, hands
over or leaves it unused; and a container that lost it still opens terminals.
"""

from __future__ import annotations

import asyncio
import typing as t

import pytest

from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.runtime.docker import DockerRuntime
from jupyter_tool_terminal.runtime.launch import STANDBY_READY

from ..conftest import (
    BASE_PROCESSES,
    LEASE_PROCESS,
    Api,
    InstanceFactory,
    container_processes,
    wait_for_processes,
)

#: The first words of a shell started ahead, as `ps` shows it.
STANDBY_PROCESS = "/bin/sh -c : jupyter-tool-terminal pre-started shell"


@pytest.fixture
def docker_runtime_config() -> dict[str, t.Any]:
    return {"lease_linger": 0, "prestart_shells": True}


@pytest.fixture
def tool_types() -> dict[str, t.Any]:
    return {
        "sandbox": {
            "shell": ["/bin/sh"],
            "env": {"TOOL_GREETING": "hi"},
            "startup_command": "echo started >> /tmp/startups; echo SIZE=$(stty size)",
        },
        "plain": {"shell": ["/bin/sh"]},
        "course": {"shell": ["/bin/sh"], "cleanup": "instance"},
    }


def _standbys(container: t.Any) -> list[str]:
    return [line for line in container_processes(container) if line.startswith(STANDBY_PROCESS)]


async def _wait_for_standbys(container: t.Any, count: int) -> None:
    deadline = asyncio.get_running_loop().time() + 20
    while len(await asyncio.to_thread(_standbys, container)) != count:
        assert asyncio.get_running_loop().time() < deadline, container_processes(container)
        await asyncio.sleep(0.05)


def _in_container(container: t.Any, *command: str) -> str:
    """What ``command`` prints in the container (call it off the event loop)."""
    output: bytes = container.exec_run(list(command)).output
    return output.decode()


def _standby_pid(container: t.Any) -> str:
    """The pid (in the container) of the one shell started ahead there."""
    listing = _in_container(container, "ps", "-o", "pid,args")
    (pid,) = [line.split()[0] for line in listing.splitlines() if "pre-started shell" in line]
    return pid


async def _listed_with_one_ahead(alice: Api, make_container: InstanceFactory) -> t.Any:
    """A container of the plain tool type, listed by alice, with its shell started ahead."""
    container = make_container(tool="plain")
    await alice.call("GET", "instances")
    await _wait_for_standbys(container, 1)
    return container


def _runtime(tool_app: ToolTerminalApp) -> DockerRuntime:
    runtime = tool_app.tool_runtime
    assert isinstance(runtime, DockerRuntime)
    return runtime


async def test_a_listed_instance_s_next_terminal_is_the_shell_started_ahead(
    alice: Api, make_container: InstanceFactory
) -> None:
    container = make_container()
    await alice.call("GET", "instances")
    await _wait_for_standbys(container, 1)
    ahead = await asyncio.to_thread(_standby_pid, container)
    # Nothing of the startup command ran yet: it belongs to the terminal, not to the wait.
    assert "started" not in await asyncio.to_thread(
        _in_container, container, "cat", "/tmp/startups"
    )
    model = await alice.call(
        "POST", "sessions", body={"instance": container.name, "rows": 37, "cols": 131}
    )
    term = await alice.connect(model["id"])
    await term.expect(r"SIZE=37 131\r\n")
    assert await term.run("echo $$") == f"{ahead}\r\n"
    # The gate's line and marker are not the terminal's.
    assert STANDBY_READY.decode() not in term.output
    assert not term.output.startswith("\r\n"), term.output[:40]
    assert await term.run("cat /tmp/startups") == "started\r\n"
    # The tool type's environment, the kill tag and this server's id, as a fresh shell has.
    assert await term.run("echo $TOOL_GREETING $TERM") == "hi xterm-256color\r\n"
    tag = await term.run("echo ${#JUPYTER_TOOL_TERMINAL_SESSION} ${#JUPYTER_TOOL_TERMINAL_SERVER}")
    assert tag == "32 32\r\n"
    # Another is ready for the next open.
    await _wait_for_standbys(container, 1)
    assert await asyncio.to_thread(_standby_pid, container) != ahead


async def test_an_open_without_a_list_readies_the_next_one(
    alice: Api, make_container: InstanceFactory
) -> None:
    container = make_container(tool="plain")
    _, term = await alice.terminal(container.name)
    assert await term.run("echo one-$((6*7))") == "one-42\r\n"
    await _wait_for_standbys(container, 1)
    ahead = await asyncio.to_thread(_standby_pid, container)
    _, second = await alice.terminal(container.name)
    assert await second.run("echo $$") == f"{ahead}\r\n"
    # Without a size, the engine's as for a fresh exec; the panel's resize reaches it.
    second.send("set_size", 29, 101)
    assert await second.run("stty size") == "29 101\r\n"


async def test_closing_the_terminal_kills_the_shell_started_ahead_and_its_jobs(
    alice: Api, make_container: InstanceFactory
) -> None:
    container = await _listed_with_one_ahead(alice, make_container)
    model, term = await alice.terminal(container.name)
    term.send("stdin", "sleep 1041 & setsid sleep 1042 &\r")
    await term.run("true")
    await alice.call("DELETE", "sessions", model["id"])
    await term.expect_frame("disconnect")
    # Only the next open's shell waits (and the lease it needs).
    await _wait_for_standbys(container, 1)
    expected = BASE_PROCESSES | {LEASE_PROCESS}
    processes = await asyncio.to_thread(container_processes, container)
    left = [line for line in processes if not line.startswith(STANDBY_PROCESS)]
    assert set(left) <= expected, left


async def test_none_is_left_when_the_server_stops(
    alice: Api, make_container: InstanceFactory, tool_app: ToolTerminalApp
) -> None:
    container = await _listed_with_one_ahead(alice, make_container)
    manager = tool_app.session_manager
    assert manager is not None
    await manager.shutdown()
    processes = await wait_for_processes(container, BASE_PROCESSES, timeout=10)
    assert set(processes) <= BASE_PROCESSES, processes


async def test_a_hand_over_ends_them_first_and_a_failed_one_starts_them_again(
    alice: Api, make_container: InstanceFactory, tool_app: ToolTerminalApp
) -> None:
    container = await _listed_with_one_ahead(alice, make_container)
    manager = tool_app.session_manager
    assert manager is not None
    # A successor takes over this server's id: one left behind would never end.
    assert await manager.suspend_all() == []
    await _wait_for_standbys(container, 0)
    manager.resume_all()
    await alice.call("GET", "instances")
    await _wait_for_standbys(container, 1)


async def test_one_unused_ends(
    alice: Api, make_container: InstanceFactory, tool_app: ToolTerminalApp
) -> None:
    engine = _runtime(tool_app).default_engine
    assert engine is not None
    assert engine.standby is not None
    engine.standby.idle = 0.5
    container = make_container(tool="plain")
    await alice.call("GET", "instances")
    await _wait_for_standbys(container, 1)
    await _wait_for_standbys(container, 0)
    processes = await wait_for_processes(container, BASE_PROCESSES, timeout=10)
    assert set(processes) <= BASE_PROCESSES, processes


async def test_a_container_that_lost_it_still_opens_terminals(
    alice: Api, make_container: InstanceFactory
) -> None:
    container = await _listed_with_one_ahead(alice, make_container)
    await asyncio.to_thread(container.restart, timeout=0)
    _, term = await alice.terminal(container.name)
    assert await term.run("echo after-$((6*7))") == "after-42\r\n"


async def test_none_for_a_tool_type_that_cleans_its_instance(
    alice: Api, make_container: InstanceFactory
) -> None:
    # A shell waiting there would count as a live one: the last terminal's close would not
    # clean the instance.
    container = make_container(tool="course")
    plain = make_container(tool="plain")
    await alice.call("GET", "instances")
    await _wait_for_standbys(plain, 1)
    _, term = await alice.terminal(container.name)
    await term.run("true")
    assert await asyncio.to_thread(_standbys, container) == []


def test_off_by_default() -> None:
    assert DockerRuntime.prestart_shells.default_value is False
