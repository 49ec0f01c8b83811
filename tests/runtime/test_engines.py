"""Several Docker engines behind one server (``c.DockerRuntime.engines``), on real engines.

Three ``dockerd`` of the test's own (see ``engines.py``): ``a`` and ``b`` on local sockets,
``tls`` in a network namespace of its own, over TCP with TLS. One of them is frozen (SIGSTOP)
or killed (SIGKILL) while sessions run on all three; the others must not notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import typing as t
import uuid

import docker
import docker.errors
import pytest
from traitlets.config import Config

from jupyter_tool_terminal import metrics

from .. import conftest
from ..conftest import REPO, TEST_IMAGE, Api, wait_until
from ..support.engines import Dockerd, Namespace, SshHost, needs_root_and_tools
from ..support.terminal_client import TerminalClient

#: Three dockerd of its own and a contract run with them configured: minutes.
pytestmark = pytest.mark.slow

NAMES = ("a", "b", "tls")
#: What runs again with several engines configured (containers on the machine's engine).
CONTRACT_TESTS = ["tests/sessions/test_terminal.py"]
#: A background job a session leaves behind: its kill must find it, however late.
BACKGROUND = "sleep 4242"


@pytest.fixture(scope="module")
def engine_hosts(docker_client: docker.DockerClient) -> t.Iterator[dict[str, Dockerd]]:
    """Three engines of the tests' own, each with the test image (started once for this
    module, and gone after it: a later test that restarts the machine's dockerd must find
    no other)."""
    del docker_client  # the machine's engine has the test image now
    needs_root_and_tools()
    namespace = Namespace()
    daemons = {"a": Dockerd("a"), "b": Dockerd("b"), "tls": Dockerd("tls", namespace)}
    try:
        for daemon in daemons.values():
            daemon.start()
            daemon.load_image()
        yield daemons
    finally:
        for daemon in daemons.values():
            daemon.remove()
        namespace.close()


@pytest.fixture(scope="module")
def ssh_host(
    engine_hosts: dict[str, Dockerd], tmp_path_factory: pytest.TempPathFactory
) -> t.Iterator[SshHost]:
    """Engine b behind an sshd in the namespace (``ssh://``)."""
    for program in ("/usr/sbin/sshd", "ssh-keygen", "ssh"):
        if shutil.which(program) is None:
            pytest.skip(f"{program} is not installed (Debian: openssh-server, openssh-client)")
    namespace = engine_hosts["tls"].namespace
    assert namespace is not None
    host = SshHost(tmp_path_factory.mktemp("ssh"), namespace, engine_hosts["b"])
    yield host
    host.close()


@pytest.fixture
def over_ssh() -> bool:
    """Whether the server reaches engine b over ssh:// (a test parametrizes this)."""
    return False


@pytest.fixture
def jp_server_config(
    jp_server_config: Config,
    engine_hosts: dict[str, Dockerd],
    over_ssh: bool,
    request: pytest.FixtureRequest,
) -> Config:
    config = Config(jp_server_config)
    engines = {name: host.config for name, host in engine_hosts.items()}
    if over_ssh:
        # Engine b only as "ssh" (else its instances would be listed twice).
        del engines["b"]
        ssh: SshHost = request.getfixturevalue("ssh_host")
        engines["ssh"] = ssh.config
        # The SDK runs the `ssh` on PATH: the wrapper with the test's key and known_hosts.
        monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
        monkeypatch.setenv("PATH", f"{ssh.bin}{os.pathsep}{os.environ['PATH']}")
    config.DockerRuntime.engines = engines
    # Every connection over ssh:// is an ssh process and a `docker system dial-stdio` on the
    # other side, which takes seconds to start on a loaded machine.
    config.DockerRuntime.engine_timeout = 10.0 if over_ssh else 2.0
    config.DockerRuntime.engine_check_interval = 0.5
    # A frozen engine's calls wait this long at most (its threads are its own).
    config.DockerRuntime.call_timeout = 10.0
    return config


class Containers:
    """Labelled containers on the test engines, removed after the test."""

    def __init__(self, hosts: dict[str, Dockerd]) -> None:
        self.hosts = hosts
        self.created: list[tuple[str, t.Any]] = []

    def make(self, engine: str, owner: str = "alice") -> t.Any:
        conftest._SDK_ON_LOOP_ALLOWED.value = True
        try:
            client = self.hosts[engine].client()
            container = client.containers.run(
                TEST_IMAGE,
                name=f"jtt-test-{uuid.uuid4().hex[:10]}",
                detach=True,
                init=True,
                network_mode="none",
                labels={
                    "jupyter-tool-terminal.owner": owner,
                    "jupyter-tool-terminal.tool": "sandbox",
                },
            )
        finally:
            conftest._SDK_ON_LOOP_ALLOWED.value = False
        self.created.append((engine, container))
        return container

    def remove(self) -> None:
        for _, container in self.created:
            with contextlib.suppress(docker.errors.DockerException):
                container.remove(force=True)
            container.client.close()


@pytest.fixture
def containers(engine_hosts: dict[str, Dockerd]) -> t.Iterator[Containers]:
    made = Containers(engine_hosts)
    yield made
    for host in engine_hosts.values():  # whatever a test froze or killed is back
        with contextlib.suppress(ProcessLookupError):
            host.signal(signal.SIGCONT)
        host.start()  # nothing if it runs
    made.remove()


def _processes(container: t.Any) -> list[str]:
    return [" ".join(row[-1:]) for row in container.top()["Processes"]]


async def _background_gone(container: t.Any) -> bool:
    return not any(BACKGROUND in line for line in await asyncio.to_thread(_processes, container))


async def _echo_p99(term: TerminalClient, rounds: int = 20) -> float:
    times = []
    for index in range(rounds):
        started = time.monotonic()
        assert await term.run(f"echo e{index}") == f"e{index}\r\n"
        times.append(time.monotonic() - started)
    return statistics.quantiles(times, n=100)[98]


async def _list_ids(alice: Api) -> tuple[float, list[str]]:
    started = time.monotonic()
    items = await alice.call("GET", "instances")
    return time.monotonic() - started, [item["id"] for item in items]


async def _terminals(
    alice: Api, made: dict[str, t.Any]
) -> dict[str, tuple[dict[str, t.Any], TerminalClient]]:
    terms = {}
    for engine, container in made.items():
        terms[engine] = await alice.terminal(f"{engine}/{container.name}")
        # A job the shell leaves behind (the kill must find it when the engine is back).
        terms[engine][1].send("stdin", f"{BACKGROUND} &\r")
        assert await terms[engine][1].run("echo ready") == "ready\r\n"
    return terms


def _up(engine: str) -> float:
    return float(metrics.ENGINE_UP.labels(engine)._value.get())


async def test_lists_and_sessions_on_every_engine(
    alice: Api, bob: Api, containers: Containers
) -> None:
    made = {engine: containers.make(engine) for engine in NAMES}
    containers.make("a", owner="bob")
    items = await alice.call("GET", "instances")
    assert sorted((item["id"], item["engine"]) for item in items) == sorted(
        (f"{engine}/{container.name}", engine) for engine, container in made.items()
    )
    assert {item["runtime"] for item in items} == {"docker"}
    for engine, container in made.items():
        model, term = await alice.terminal(f"{engine}/{container.name}")
        assert model["instance"] == f"{engine}/{container.name}"
        assert await term.run(f"echo on-$((1+1))-{engine}") == f"on-2-{engine}\r\n"
    # An id without its engine, or on an engine that is not configured, is nobody's.
    for wrong in (made["a"].name, f"zz/{made['a'].name}", f"b/{made['a'].name}"):
        status, body = await alice.status("POST", "sessions", body={"instance": wrong})
        assert status == 403, (wrong, status, body)
    # Bob's instance on engine a is bob's only.
    assert [item["engine"] for item in await bob.call("GET", "instances")] == ["a"]


async def test_a_frozen_engine_takes_nothing_else_down(
    alice: Api, containers: Containers, engine_hosts: dict[str, Dockerd]
) -> None:
    made = {engine: containers.make(engine) for engine in NAMES}
    terms = await _terminals(alice, made)
    before = {engine: await _echo_p99(terms[engine][1]) for engine in ("a", "tls")}

    engine_hosts["b"].signal(signal.SIGSTOP)
    # Its session ends with a message that names it.
    frame = await terms["b"][1].expect_frame("error", timeout=15)
    assert "'b'" in frame[1]
    assert "not reachable" in frame[1]
    assert _up("b") == 0
    # Lists answer in time, without its instance; new sessions on it are refused, naming it.
    took, ids = await _list_ids(alice)
    assert took < 5
    assert ids == sorted(f"{engine}/{made[engine].name}" for engine in ("a", "tls"))
    started = time.monotonic()
    status, body = await alice.status("POST", "sessions", body={"instance": f"b/{made['b'].name}"})
    assert (status, body["message"]) == (503, "the container engine 'b' is not reachable")
    assert time.monotonic() - started < 5
    # The others' echo holds.
    for engine, p99 in before.items():
        after = await _echo_p99(terms[engine][1])
        assert after <= max(2 * p99, p99 + 0.05), (engine, p99, after)

    engine_hosts["b"].signal(signal.SIGCONT)
    # Its instances come back, and the kill its ended session left runs.
    await wait_until(lambda: _is_listed(alice, f"b/{made['b'].name}"), timeout=15)
    assert _up("b") == 1
    await wait_until(lambda: _background_gone(made["b"]), timeout=15)
    assert await terms["a"][1].run("echo still") == "still\r\n"


async def _is_listed(alice: Api, instance: str) -> bool:
    return instance in (await _list_ids(alice))[1]


async def test_a_killed_engine_ends_its_sessions_and_kills_when_back(
    alice: Api, containers: Containers, engine_hosts: dict[str, Dockerd]
) -> None:
    made = {engine: containers.make(engine) for engine in NAMES}
    terms = await _terminals(alice, made)
    engine_hosts["a"].kill()
    frame = await terms["a"][1].expect_frame("error", timeout=15)
    assert frame[1] == "The container engine 'a' is not reachable; the terminal has ended."
    took, ids = await _list_ids(alice)
    assert took < 5
    assert f"a/{made['a'].name}" not in ids
    assert await terms["tls"][1].run("echo over-tls") == "over-tls\r\n"
    assert await terms["b"][1].run("echo on-b") == "on-b\r\n"
    # The container outlived its engine (live restore), and so did the session's job, until
    # the engine is back: then the kill that waited for it runs.
    await asyncio.to_thread(engine_hosts["a"].start)
    await wait_until(lambda: _background_gone(made["a"]), timeout=20)
    await wait_until(lambda: _is_listed(alice, f"a/{made['a'].name}"), timeout=15)
    _, term = await alice.terminal(f"a/{made['a'].name}")
    assert await term.run("echo back") == "back\r\n"


@pytest.fixture
def b_down_at_start(engine_hosts: dict[str, Dockerd]) -> t.Iterator[None]:
    engine_hosts["b"].kill()
    yield
    engine_hosts["b"].start()


async def test_start_up_with_one_engine_down(
    b_down_at_start: None,
    alice: Api,
    containers: Containers,
    engine_hosts: dict[str, Dockerd],
) -> None:
    del b_down_at_start
    made = containers.make("a")
    _, term = await alice.terminal(f"a/{made.name}")
    assert await term.run("echo served") == "served\r\n"
    assert _up("b") == 0
    await asyncio.to_thread(engine_hosts["b"].start)
    await wait_until(lambda: _up_async("b"), timeout=15)
    later = containers.make("b")
    await wait_until(lambda: _is_listed(alice, f"b/{later.name}"), timeout=10)


async def _up_async(engine: str) -> bool:
    return _up(engine) == 1


@pytest.mark.timeout(600)  # a contract run of its own
def test_the_contract_holds_with_several_engines(engine_hosts: dict[str, Dockerd]) -> None:
    machine = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    engines = {"main": {"url": machine}, **{n: engine_hosts[n].config for n in ("a", "tls")}}
    environment = {
        **os.environ,
        "JTT_TEST_ENGINES": json.dumps(engines),
        "JTT_TEST_ENGINE": "main",
        "PYTHONPATH": str(REPO),
    }
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
            *("-k", "not local", *CONTRACT_TESTS),
        ],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    summary = result.stdout.strip().splitlines()[-1:] or [result.stderr[-2000:]]
    assert result.returncode == 0, result.stdout[-6000:]
    assert " skipped" not in summary[0], summary
    assert " passed" in summary[0], summary


@pytest.mark.parametrize("over_ssh", [True])
async def test_an_engine_over_ssh(
    over_ssh: bool,
    alice: Api,
    containers: Containers,
    ssh_host: SshHost,
) -> None:
    del over_ssh
    made = containers.make("b")
    # Each of the SDK's connections is an ssh process of its own: the first calls take a while.
    await wait_until(lambda: _is_listed(alice, f"ssh/{made.name}"), timeout=20)
    items = await alice.call("GET", "instances")
    assert {(item["id"], item["engine"]) for item in items} == {(f"ssh/{made.name}", "ssh")}
    _, term = await alice.terminal(f"ssh/{made.name}")
    assert await term.run("echo over-$((2*3))-ssh") == "over-6-ssh\r\n"
    term.send("set_size", 31, 97)
    assert await term.size_becomes("31 97") == "31 97"
    term.send("stdin", f"{BACKGROUND} &\r")
    assert await term.run("echo started") == "started\r\n"
    sessions = await alice.call("GET", "sessions")
    await alice.call("DELETE", "sessions", sessions[0]["id"])
    # The kill went over ssh too: nothing of the session is left.
    await wait_until(lambda: _background_gone(made), timeout=15)
