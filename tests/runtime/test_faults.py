"""Faults: the container or the engine failing under a session never hangs or crashes anything."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
import typing as t

import docker
import pytest

from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.runtime.docker_engine import EngineRuntime

from ..conftest import BASE_PROCESSES, Api, InstanceFactory, container_processes, exec_count


@pytest.mark.parametrize("how", ["stop", "remove"])
async def test_container_gone_mid_session_ends_it_cleanly(
    alice: Api, make_instance: InstanceFactory, how: str
) -> None:
    container = make_instance()
    model, term = await alice.terminal(container.name)
    await term.run("true")
    started = time.monotonic()
    if how == "stop":
        await asyncio.to_thread(container.stop, timeout=0)
    else:
        await asyncio.to_thread(container.remove, force=True)
    end = await term.expect_frame("disconnect", timeout=10)
    assert end == ["disconnect", 1]
    assert time.monotonic() - started < 10
    kinds = [frame[0] for frame in term.frames]
    assert "error" in kinds or "exit" in kinds
    assert all("Traceback" not in str(frame) for frame in term.frames)
    await term.wait_closed()
    status, _ = await alice.status("GET", "sessions", model["id"])
    assert status == 403
    # The server keeps serving.
    assert isinstance(await alice.call("GET", "instances"), list)


class TestBrokenShell:
    @pytest.fixture
    def tool_types(self) -> dict[str, t.Any]:
        return {"broken": {"shell": ["/no/such/shell"]}}

    async def test_a_shell_that_cannot_start_reports_and_ends(
        self, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance(tool="broken")
        model, term = await alice.terminal(container.name)
        code = (await term.expect_frame("exit"))[1]
        assert code in (126, 127)
        await term.expect_frame("disconnect")
        assert "Traceback" not in term.output
        status, _ = await alice.status("GET", "sessions", model["id"])
        assert status == 403


async def test_a_paused_instance_is_409_and_spawns_nothing(
    alice: Api,
    make_instance: InstanceFactory,
    runtime_calls: t.Callable[[str], list[tuple[t.Any, ...]]],
) -> None:
    # The engine itself refuses an exec in a paused container, so its exec count alone would
    # not tell: the server must not even ask for a shell.
    asked = runtime_calls("start_shell")
    container = make_instance()
    await asyncio.to_thread(container.pause)
    try:
        status, body = await alice.status("POST", "sessions", body={"instance": container.name})
        assert status == 409
        assert "paused" in body["message"]
        assert asked == []
        assert await asyncio.to_thread(exec_count, container) == 0
        assert await alice.call("GET", "sessions") == []
    finally:
        await asyncio.to_thread(container.unpause)


async def test_exec_refused_by_the_engine_is_503_without_traceback(
    alice: Api,
    make_instance: InstanceFactory,
    tool_app: ToolTerminalApp,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The container stops between the server's check and the exec: the engine refuses it.
    container = make_instance()
    runtime = tool_app.tool_runtime
    assert runtime is not None
    real_get = runtime.get_instance

    async def get_then_stop(instance_id: str) -> t.Any:
        instance = await real_get(instance_id)
        await asyncio.to_thread(container.stop, timeout=0)
        return instance

    monkeypatch.setattr(runtime, "get_instance", get_then_stop)
    status, body = await alice.status("POST", "sessions", body={"instance": container.name})
    assert status == 503
    assert body["message"] == "the container engine refused the operation"
    assert await alice.call("GET", "sessions") == []


async def test_a_failure_after_the_shell_started_kills_it(
    alice: Api, make_instance: InstanceFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The exec is started; then opening its stream fails with an error nobody expected.
    started: list[str] = []

    real_attach = EngineRuntime.attach

    async def broken_attach(runtime: EngineRuntime, exec_id: str, tty: bool) -> t.Any:
        if not tty:  # the reaper's
            return await real_attach(runtime, exec_id, tty)
        started.append(exec_id)
        await runtime.call("exec_start", exec_id, tty=True, socket=True)
        msg = "injected: the exec socket cannot be opened"
        raise OSError(msg)

    monkeypatch.setattr(EngineRuntime, "attach", broken_attach)
    container = make_instance()
    status, body = await alice.status("POST", "sessions", body={"instance": container.name})
    assert status == 503, (status, body)
    assert body["message"] == "the container engine is not reachable"
    assert await alice.call("GET", "sessions") == []
    # The engine had started the shell: it must have been killed, not left to run forever.
    (exec_id,) = started
    api = container.client.api
    deadline = time.monotonic() + 10
    while True:
        info = await asyncio.to_thread(api.exec_inspect, exec_id)
        if not info["Running"] and info["ExitCode"] is not None:
            break
        assert time.monotonic() < deadline, f"a started shell was left running: {info}"
        await asyncio.sleep(0.05)
    processes = await asyncio.to_thread(container_processes, container)
    assert set(processes) <= BASE_PROCESSES, processes


#: Where the machine's dockerd keeps its process id (other dockerd, such as test_engines' own,
#: keep theirs elsewhere and must not be touched).
DOCKERD_PID_FILE = "/var/run/docker.pid"


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (a zombie has exited: a daemon whose
    parent does not reap it stays one, and would look alive to ``pgrep``)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _restart_dockerd() -> None:
    with open(DOCKERD_PID_FILE) as file:
        pid = int(file.read().strip())
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while _running(pid):
        assert time.monotonic() < deadline, "dockerd did not stop"
        time.sleep(0.2)
    with open("/tmp/dockerd.log", "ab") as log:
        subprocess.Popen(["dockerd"], stdout=log, stderr=log, start_new_session=True)
    while True:
        try:
            client = docker.from_env()
            client.ping()
            client.close()
            return
        except docker.errors.DockerException:
            assert time.monotonic() < deadline, "dockerd did not come back"
            time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("JTT_TEST_RESTART_DOCKERD") != "1" or not shutil.which("dockerd"),
    reason="restarts the machine's dockerd: opt in with JTT_TEST_RESTART_DOCKERD=1 (CI does)",
)
async def test_dockerd_restart_mid_session(alice: Api, make_instance: InstanceFactory) -> None:
    container = make_instance()
    model, term = await alice.terminal(container.name)
    await term.run("true")
    await asyncio.to_thread(_restart_dockerd)
    await term.expect_frame("disconnect", timeout=30)
    assert all("Traceback" not in str(frame) for frame in term.frames)
    status, _ = await alice.status("GET", "sessions", model["id"])
    assert status == 403
    # Once the engine is back, new sessions work (in a new container: the old one stopped).
    fresh = make_instance()
    _, again = await alice.terminal(fresh.name)
    assert await again.run("echo back") == "back\r\n"
