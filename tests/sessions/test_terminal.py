"""A terminal end to end: open, type, resize, startup command, reset, two sessions."""

from __future__ import annotations

import typing as t

from ..conftest import (
    BASE_PROCESSES,
    CONTAINERS_ENGINE,
    LEASE_PROCESS,
    Api,
    InstanceFactory,
    both_runtimes,
    instance_path,
    wait_for_processes,
)


@both_runtimes
async def test_type_and_see_output(alice: Api, make_instance: InstanceFactory) -> None:
    container = make_instance()
    model, term = await alice.terminal(container.name)
    assert model["instance"] == container.name
    assert model["tool"] == "sandbox"
    assert model["clients"] == 0
    assert await term.run("echo $((6*7))") == "42\r\n"


async def test_statuses_are_the_real_ones(alice: Api, make_instance: InstanceFactory) -> None:
    container = make_instance()
    status, model = await alice.status("POST", "sessions", body={"instance": container.name})
    assert status == 201
    assert await alice.status("GET", "sessions", model["id"]) == (200, model)
    assert (await alice.status("POST", "sessions", model["id"], "reset"))[0] == 200
    assert await alice.status("DELETE", "sessions", model["id"]) == (204, None)


@both_runtimes
async def test_set_size_changes_stty_size(alice: Api, make_instance: InstanceFactory) -> None:
    container = make_instance()
    _, term = await alice.terminal(container.name)
    term.send("set_size", 33, 101, 600, 800)
    assert await term.size_becomes("33 101") == "33 101"
    term.send("set_size", 12, 40)
    assert await term.size_becomes("12 40") == "12 40"


@both_runtimes
async def test_two_sessions_are_independent(alice: Api, make_instance: InstanceFactory) -> None:
    container = make_instance()
    _, first = await alice.terminal(container.name)
    _, second = await alice.terminal(container.name)
    first_pid = await first.run("echo $$")
    second_pid = await second.run("echo $$")
    assert first_pid.strip().isdigit()
    assert first_pid != second_pid
    first.send("stdin", "export ONLY_IN_FIRST=yes\r")
    assert await second.run("echo x${ONLY_IN_FIRST}x") == "xx\r\n"


@both_runtimes
async def test_startup_command_runs_first_and_carries_cwd_and_exports(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance(tool="course")
    _, term = await alice.terminal(container.name)
    await term.expect("STARTUP-BANNER")
    assert await term.run("pwd") == instance_path(container, "data") + "\r\n"
    assert await term.run("echo $COURSE_VAR") == "from-startup\r\n"


@both_runtimes
async def test_failing_startup_command_still_leaves_a_shell(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance(tool="broken")
    _, term = await alice.terminal(container.name)
    await term.expect("before-failure")
    await term.expect("startup command failed with exit code 1")
    assert await term.run("echo still-here") == "still-here\r\n"


@both_runtimes
async def test_reset_runs_the_startup_command_again_for_attached_clients(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance(tool="course")
    model, term = await alice.terminal(container.name)
    await term.expect("STARTUP-BANNER")
    old_pid = await term.run("echo $$")
    term.send("stdin", "sleep 4242 &\r")
    await term.run("true")
    term.output = ""
    reset = await alice.call("POST", "sessions", model["id"], "reset")
    assert reset["id"] == model["id"]
    await term.expect("STARTUP-BANNER")
    new_pid = await term.run("echo $$")
    assert new_pid != old_pid
    assert await term.run("pwd") == instance_path(container, "data") + "\r\n"
    processes = await wait_for_processes(container, BASE_PROCESSES | {"/bin/sh", LEASE_PROCESS})
    assert not [p for p in processes if "4242" in p], processes


@both_runtimes
async def test_replay_for_a_second_client(alice: Api, make_instance: InstanceFactory) -> None:
    container = make_instance()
    model, first = await alice.terminal(container.name)
    await first.run("echo remembered-output")
    second = await alice.connect(model["id"])
    await second.expect("remembered-output")
    session = await alice.call("GET", "sessions", model["id"])
    assert session["clients"] == 2
    # Input from either client reaches the same shell.
    assert await second.run("echo from-second") == "from-second\r\n"


async def test_lists_show_the_callers_instances_and_sessions(
    alice: Api, make_instance: InstanceFactory
) -> None:
    mine = make_instance(tool="course")
    make_instance(owner="bob")
    make_instance(tool="not-configured")
    instances = await alice.call("GET", "instances")
    ours = [i for i in instances if i["id"] == mine.name]
    assert ours == [
        {
            "id": mine.name,
            "tool": "course",
            "display_name": "Course",
            "status": "running",
            "runtime": "docker",
            # Only with several engines (see conftest.SEVERAL_ENGINES).
            **({"engine": CONTAINERS_ENGINE} if CONTAINERS_ENGINE else {}),
            "has_startup_command": True,
            "icon": None,
            "user": None,
        }
    ]
    assert all(i["tool"] in {"sandbox", "course", "broken"} for i in instances)
    model = await alice.open_session(mine.name)
    sessions: list[dict[str, t.Any]] = await alice.call("GET", "sessions")
    assert [s["id"] for s in sessions] == [model["id"]]
    assert set(model) == {"id", "instance", "tool", "created", "last_activity", "clients"}
    assert len(model["id"]) >= 22
