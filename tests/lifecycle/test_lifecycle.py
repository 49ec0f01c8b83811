"""No orphans: every way a session ends kills the shell and everything it started."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import typing as t

import pytest

from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.runtime import kills

from ..conftest import (
    BASE_PROCESSES,
    LEASE_PROCESS,
    TOOL_TYPES,
    Api,
    InstanceFactory,
    both_runtimes,
    container_processes,
    is_podman,
    wait_for_processes,
    wait_until,
)


@pytest.fixture(params=[None, "nobody"], ids=["root", "nobody"])
def tool_types(request: pytest.FixtureRequest, runtime_name: str) -> dict[str, t.Any]:
    """Every end path, for a shell of the image's user (root) and of a non-root `user`
    (root in the container cannot read another uid's environment, where the kill tag is)."""
    if request.param is None:
        return TOOL_TYPES
    if runtime_name == "local":
        pytest.skip("a local shell runs as the server's user: a tool type's `user` is refused")
    return {**TOOL_TYPES, "sandbox": {**TOOL_TYPES["sandbox"], "user": request.param}}


async def _busy_terminal(alice: Api, container: t.Any) -> tuple[dict[str, t.Any], t.Any]:
    """A session whose shell started background work: two sleeps, one in its own session."""
    model, term = await alice.terminal(container.name)
    term.send("stdin", "sleep 1001 & setsid sleep 1002 & env -i sleep 1003 &\r")
    await term.run("true")
    wanted = ("sleep 1001", "sleep 1002", "sleep 1003")

    async def all_started() -> bool:
        # Background jobs exec their programs a moment after the shell moved on.
        processes = await asyncio.to_thread(container_processes, container)
        return all(any(name in p for p in processes) for name in wanted)

    await wait_until(all_started)
    assert "/bin/sh" in await asyncio.to_thread(container_processes, container)
    return model, term


async def _assert_only_base(container: t.Any) -> None:
    processes = await wait_for_processes(container, BASE_PROCESSES, timeout=2.0)
    assert set(processes) <= BASE_PROCESSES, processes


@both_runtimes
async def test_closing_the_last_websocket_kills_everything(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    model, term = await _busy_terminal(alice, container)
    term.ws.close()
    await _assert_only_base(container)
    status, _ = await alice.status("GET", "sessions", model["id"])
    assert status == 403


@both_runtimes
async def test_delete_kills_everything(alice: Api, make_instance: InstanceFactory) -> None:
    container = make_instance()
    model, term = await _busy_terminal(alice, container)
    await alice.call("DELETE", "sessions", model["id"])
    await term.expect_frame("disconnect")
    await _assert_only_base(container)
    assert await alice.call("GET", "sessions") == []


@both_runtimes
async def test_shell_exit_sends_exit_code_then_disconnect(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    model, term = await _busy_terminal(alice, container)
    term.send("stdin", "exit 7\r")
    assert await term.expect_frame("exit") == ["exit", 7]
    assert await term.expect_frame("disconnect") == ["disconnect", 1]
    await term.wait_closed()
    await _assert_only_base(container)
    status, _ = await alice.status("GET", "sessions", model["id"])
    assert status == 403


@both_runtimes
async def test_server_shutdown_kills_every_session(
    tool_app: ToolTerminalApp, alice: Api, make_instance: InstanceFactory
) -> None:
    first, second = make_instance(), make_instance()
    _, term = await _busy_terminal(alice, first)
    await _busy_terminal(alice, second)
    await alice.open_session(second.name)  # never attached
    app = tool_app
    await app.stop_extension()
    await _assert_only_base(first)
    await _assert_only_base(second)
    # The terminal says why it ended, and closes as a server going away does.
    error = await term.expect_frame("error")
    assert "server is stopping" in error[1]
    await term.wait_closed()
    assert term.ws.close_code == 1001


@both_runtimes
async def test_a_session_never_attached_is_closed(
    alice: Api, make_instance: InstanceFactory, tool_app: ToolTerminalApp
) -> None:
    assert tool_app.session_manager is not None
    tool_app.session_manager.attach_timeout = 1.0
    container = make_instance()
    model = await alice.open_session(container.name)
    assert [s["id"] for s in await alice.call("GET", "sessions")] == [model["id"]]

    async def no_sessions() -> bool:
        return bool(await alice.call("GET", "sessions") == [])

    await wait_until(no_sessions)
    await _assert_only_base(container)


class TestAttachTimeoutOff:
    """``attach_timeout = 0`` means off, as 0 does for ``idle_timeout`` and ``ping_interval``."""

    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"attach_timeout": 0}

    async def test_a_session_waits_for_its_first_client(
        self, alice: Api, make_instance: InstanceFactory, tool_app: ToolTerminalApp
    ) -> None:
        container = make_instance()
        model = await alice.open_session(container.name)
        assert [s["id"] for s in await alice.call("GET", "sessions")] == [model["id"]]
        term = await alice.connect(model["id"])
        assert await term.run("echo attached") == "attached\r\n"


class TestGracePeriod:
    """With ``disconnect_grace`` set, a reload can come back to its session."""

    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"disconnect_grace": 5.0}

    @both_runtimes
    async def test_a_client_can_reconnect(self, alice: Api, make_instance: InstanceFactory) -> None:
        container = make_instance()
        model, term = await alice.terminal(container.name)
        await term.run("export KEPT=yes")
        term.ws.close()
        again = await alice.connect(model["id"])
        assert await again.run("echo $KEPT") == "yes\r\n"


@both_runtimes
async def test_delete_right_after_create_leaves_no_shell(
    alice: Api, make_instance: InstanceFactory
) -> None:
    # The engine answers the start request before the process exists: the kill must wait.
    container = make_instance()
    for _ in range(3):
        model = await alice.open_session(container.name)
        await alice.call("DELETE", "sessions", model["id"])
    await _assert_only_base(container)


async def test_sessions_closing_together_share_kill_execs(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    # (Marked before the shells: a lease may start with the first one, and the engine's
    # exec list has no times to tell.)
    since = await _exec_mark(container)
    models = [await alice.open_session(container.name) for _ in range(8)]
    await asyncio.gather(*(alice.call("DELETE", "sessions", model["id"]) for model in models))
    await _assert_only_base(container)
    execs = await _exec_commands(container, since)
    kills = [c for c in execs if "jupyter-tool-terminal-kill" in c or LEASE_PROCESS in c]
    # One kill runs at a time per container; the others join the next one.
    assert 1 <= len(kills) <= 3, [c[:80] for c in kills]


@dataclasses.dataclass(frozen=True)
class _ExecMark:
    """A moment in a container's life: the time, and the execs it had then."""

    time: float
    exec_ids: frozenset[str]


async def _exec_mark(container: t.Any) -> _ExecMark:
    info = await asyncio.to_thread(container.client.api.inspect_container, container.id)
    return _ExecMark(time.time(), frozenset(info.get("ExecIDs") or ()))


async def _exec_commands(container: t.Any, since: _ExecMark) -> list[str]:
    """The command lines of the execs created in the container since ``since``."""
    return await asyncio.to_thread(_exec_commands_since, container, since)


def _exec_commands_since(container: t.Any, since: _ExecMark) -> list[str]:
    api = container.client.api
    if not is_podman(api.version()):
        events = api.events(
            since=since.time - 1,
            until=time.time() + 1,
            filters={"container": container.id, "event": "exec_create"},
            decode=True,
        )
        return [event["Action"].removeprefix("exec_create: ") for event in events]
    # Podman's events name no command ("exec"); its execs stay listed once they ended.
    new = set(api.inspect_container(container.id).get("ExecIDs") or ()) - since.exec_ids
    configs = [api.exec_inspect(exec_id)["ProcessConfig"] for exec_id in new]
    return [" ".join([config["entrypoint"], *(config["arguments"] or ())]) for config in configs]


async def test_closing_beside_a_live_shell_kills_through_a_reaper(
    alice: Api, make_instance: InstanceFactory
) -> None:
    """While another shell runs in the container, kills go to one long-lived reaper exec
    instead of an exec each; the reaper ends with the container's last shell."""
    container = make_instance()
    since = await _exec_mark(container)
    _, keeper = await alice.terminal(container.name)
    for _ in range(3):
        model, _ = await _busy_terminal(alice, container)
        await alice.call("DELETE", "sessions", model["id"])
        processes = await wait_for_processes(container, BASE_PROCESSES | {"/bin/sh", LEASE_PROCESS})
        assert sorted(set(processes) - BASE_PROCESSES) == ["/bin/sh", LEASE_PROCESS], processes
    execs = await _exec_commands(container, since)
    # Four shells and one reaper; no kill of its own.
    assert sum(LEASE_PROCESS in c for c in execs) == 1, execs
    assert not [c for c in execs if "jupyter-tool-terminal-kill" in c], execs
    assert await keeper.run("echo still here") == "still here\r\n"
    keeper.ws.close()
    await _assert_only_base(container)


async def _reaper_running(container: t.Any) -> bool:
    return LEASE_PROCESS in await asyncio.to_thread(container_processes, container)


async def _start_reaper(alice: Api, container: t.Any) -> None:
    """Open a session that stays, and close one beside it: the container then has a reaper."""
    await alice.terminal(container.name)
    model, _ = await _busy_terminal(alice, container)
    await alice.call("DELETE", "sessions", model["id"])
    await wait_until(lambda: _reaper_running(container))


def _signal_reaper(container: t.Any, signal: str) -> None:
    """Send the reaper a signal from a root shell in the container, as a user of it could."""
    # (The bracket keeps this shell's own command line from matching.)
    script = (
        "n=0; for p in /proc/[0-9]*; do"
        " if grep -q 'TERMINAL_REAP[E]R' $p/cmdline 2>/dev/null; then"
        f" kill -{signal} ${{p#/proc/}} && n=$((n + 1)); fi; done; [ $n -eq 1 ]"
    )
    result = container.exec_run(["/bin/sh", "-c", script], user="0")
    assert result.exit_code == 0, result.output


async def _signal_reaper_async(container: t.Any, signal: str) -> None:
    # A blocking SDK call: off the event loop that the server under test shares.
    await asyncio.to_thread(_signal_reaper, container, signal)


async def _close_busy_session(alice: Api, container: t.Any) -> float:
    """Open a session with background work, close it, and check that all of it is gone;
    returns the seconds the close took."""
    model, _ = await _busy_terminal(alice, container)
    began = time.monotonic()
    await alice.call("DELETE", "sessions", model["id"])
    took = time.monotonic() - began
    processes = await wait_for_processes(container, BASE_PROCESSES | {"/bin/sh", LEASE_PROCESS})
    assert not [p for p in processes if "sleep 100" in p], processes
    return took


async def test_kills_go_on_when_the_reaper_is_killed(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    await _start_reaper(alice, container)
    # A root user of the container may kill it: the next kill must not depend on it.
    await _signal_reaper_async(container, "KILL")
    assert not await _reaper_running(container)
    for _ in range(2):
        await _close_busy_session(alice, container)
    # The kill that found the reaper gone ran as its own exec; the next one has a new reaper.
    assert await _reaper_running(container)


async def test_a_silent_reaper_does_not_hold_up_a_close(
    alice: Api, make_instance: InstanceFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kills, "REAPER_TIMEOUT", 1.0)
    container = make_instance()
    await _start_reaper(alice, container)
    await _signal_reaper_async(container, "STOP")
    # One reaper timeout, then the kill's own exec (not the engine's or the client's timeout).
    assert await _close_busy_session(alice, container) < 5.0
    # Given up on, the reaper's stdin is closed: once it runs again it reads the end and exits.
    await _signal_reaper_async(container, "CONT")

    async def reaper_gone() -> bool:
        return not await _reaper_running(container)

    await wait_until(reaper_gone)


async def test_reset_kills_everything(alice: Api, make_instance: InstanceFactory) -> None:
    container = make_instance()
    model, _ = await _busy_terminal(alice, container)
    await alice.call("POST", "sessions", model["id"], "reset")

    async def only_the_new_shell() -> bool:
        processes = await asyncio.to_thread(container_processes, container)
        # (A container with a live shell holds the server's lease too.)
        return sorted(set(processes) - BASE_PROCESSES) == ["/bin/sh", LEASE_PROCESS]

    await wait_until(only_the_new_shell)


class TestIdle:
    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"idle_timeout": 1.0}

    async def test_an_idle_session_is_killed(
        self, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance()
        _, term = await _busy_terminal(alice, container)
        await term.expect_frame("disconnect", timeout=10)
        await _assert_only_base(container)
