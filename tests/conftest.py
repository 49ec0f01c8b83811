"""Fixtures: a real Docker Engine, labelled tool instances, and jupyter_server with two users.

Contract tests marked ``@both_runtimes`` run once per runtime: their ``make_instance`` then
creates a labelled container or hands out a local instance, and the server is configured for
that runtime before it starts (local instances are configuration).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import subprocess
import threading
import time
import typing as t
import uuid
from pathlib import Path

import docker
import docker.api.client
import docker.errors
import pytest
from jupyter_server.auth.identity import IdentityProvider, User
from tornado.httpclient import HTTPClientError
from traitlets.config import Config

from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.events import SESSION_SCHEMA_ID
from jupyter_tool_terminal.runtime.docker import DockerRuntime
from jupyter_tool_terminal.runtime.reaper import LEASE_NAME, REAPER_COMMAND

from .support.terminal_client import TerminalClient

pytest_plugins = ["pytest_jupyter.jupyter_server"]

TEST_IMAGE = "jupyter-tool-terminal-test:latest"
#: A Debian-like image (dash, GNU tools) whose PATH starts with a directory the tool user owns.
DEBIAN_IMAGE = "jupyter-tool-terminal-test-debian:latest"
REPO = Path(__file__).resolve().parent.parent
TOKENS = {"alice-secret-token": "alice", "bob-secret-token": "bob"}
#: Tokens a test revoked (as a Hub revokes a token at logout); they authenticate nobody.
REVOKED_TOKENS: set[str] = set()
COOKIE_NAME = "jtt-test-user"
#: Processes of the test containers' own (PID 1 is docker-init, or Podman's catatonit, then
#: `sleep infinity`).
BASE_PROCESSES = {
    "/sbin/docker-init -- /bin/sleep infinity",
    "/run/podman-init -- /bin/sleep infinity",
    "/bin/sleep infinity",
}
#: A server's lease (the reaper it keeps in a container where its shells run), as
#: :func:`container_processes` shows it: `docker top`'s line without the server's id.
LEASE_PROCESS = " ".join([*REAPER_COMMAND, LEASE_NAME])
_REAPER_PROCESS = " ".join(REAPER_COMMAND)

TOOL_TYPES: dict[str, t.Any] = {
    "sandbox": {"display_name": "Sandbox", "shell": ["/bin/sh"], "env": {"TOOL_GREETING": "hi"}},
    "course": {
        "display_name": "Course",
        "shell": ["/bin/sh"],
        # Relative to the working directory: /data in the container, ROOT/data locally.
        "startup_command": "echo STARTUP-BANNER; cd data && export COURSE_VAR=from-startup",
        "workdir": "/",
    },
    "broken": {
        "display_name": "Broken",
        "shell": ["/bin/sh"],
        "startup_command": "echo before-failure; false",
    },
}


class TwoUserIdentityProvider(IdentityProvider):
    """Maps the test tokens to two users, alice and bob; anything else is anonymous."""

    def get_user(self, handler: t.Any) -> User | None:
        header = handler.request.headers.get("Authorization", "")
        token = header.removeprefix("token ").strip() or handler.get_argument("token", "")
        name = None if token in REVOKED_TOKENS else TOKENS.get(token)
        if not name:
            # A stand-in for a login cookie: cookie-authenticated requests get Jupyter's origin
            # and XSRF checks, as a browser's would.
            cookie = handler.request.headers.get("Cookie", "")
            user = dict(
                part.strip().split("=", 1) for part in cookie.split(";") if "=" in part
            ).get(COOKIE_NAME)
            return User(username=user) if user is not None and user in TOKENS.values() else None
        # Token-authenticated requests skip XSRF and origin checks, as with Jupyter's own tokens.
        handler._token_authenticated = True
        return User(username=name)

    @property
    def auth_enabled(self) -> bool:
        return True


@pytest.fixture(scope="session")
def docker_client() -> t.Iterator[docker.DockerClient]:
    """The real Docker Engine (the test run fails, not skips, without one)."""
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as error:
        pytest.fail(f"these tests need a Docker Engine: {error}")
    try:
        client.images.get(TEST_IMAGE)
    except docker.errors.ImageNotFound:
        subprocess.run(["bash", str(REPO / "scripts/build-test-image.sh"), TEST_IMAGE], check=True)
    yield client
    client.close()


@pytest.fixture(scope="session")
def debian_image(docker_client: docker.DockerClient) -> str:
    """The Debian-like test image, built from the host's binaries on first use."""
    try:
        docker_client.images.get(DEBIAN_IMAGE)
    except docker.errors.ImageNotFound:
        script = REPO / "scripts/build-debian-test-image.sh"
        subprocess.run(["bash", str(script), DEBIAN_IMAGE], check=True)
    return DEBIAN_IMAGE


#: Set while a test's own fixture code may block the event loop (creating its containers before
#: the server is used); any other Docker SDK call on the loop's thread fails the test.
_SDK_ON_LOOP_ALLOWED = threading.local()


@pytest.fixture(autouse=True)
def no_blocking_sdk_calls_on_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail a test that calls the Docker SDK on the event loop the server under test shares:
    the server stalls meanwhile, which hides or fakes timing results (asyncio.to_thread)."""
    real_send = docker.api.client.APIClient.send

    def send(self: t.Any, request: t.Any, **kwargs: t.Any) -> t.Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # a worker thread, or a synchronous test
        else:
            if not getattr(_SDK_ON_LOOP_ALLOWED, "value", False):
                msg = f"blocking Docker SDK call on the event loop: {request.method} {request.url}"
                raise AssertionError(msg)
        return real_send(self, request, **kwargs)

    monkeypatch.setattr(docker.api.client.APIClient, "send", send)

    # The runtime's one start-up check of the engine may block: the server does not serve yet.
    real_check = DockerRuntime.check_available

    def check_available(self: DockerRuntime) -> None:
        _SDK_ON_LOOP_ALLOWED.value = True
        try:
            real_check(self)
        finally:
            _SDK_ON_LOOP_ALLOWED.value = False

    monkeypatch.setattr(DockerRuntime, "check_available", check_available)


InstanceFactory = t.Callable[..., t.Any]

#: With several engines (``tests/runtime/test_engines.py`` runs the contract tests so): the server's
#: ``c.DockerRuntime.engines``, and the name of the one the tests' containers are created on
#: (the engine ``docker.from_env()`` finds); instance ids are then ``ENGINE/NAME``.
SEVERAL_ENGINES: dict[str, t.Any] | None = json.loads(os.environ.get("JTT_TEST_ENGINES", "null"))
CONTAINERS_ENGINE = os.environ.get("JTT_TEST_ENGINE", "")


class OnEngine:
    """A test container as the tests see it with several engines: its instance id (``name``)
    is ``ENGINE/NAME``; everything else is the container's."""

    def __init__(self, container: t.Any, engine: str) -> None:
        self.container = container
        self.name = f"{engine}/{container.name}"

    def __getattr__(self, attribute: str) -> t.Any:
        return getattr(self.container, attribute)


#: The runtimes that keep the same contract.
RUNTIMES = ("docker", "local")
#: Marks a contract test that runs once with each runtime.
both_runtimes = pytest.mark.parametrize("runtime_name", RUNTIMES)
#: Every local instance belongs to the server's owner; the tests' server is alice's.
LOCAL_OWNER = "alice"


#: The JupyterHub tests' folder: every test in it is marked ``hub``.
HUB_TESTS = Path(__file__).resolve().parent / "hub"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``docker`` every test that needs a Docker Engine: ``pytest -m "not docker"`` is the
    tier a machine without one runs (the local runtime's half of the contract, the screen
    models, the frontend's server parts...); CI runs both. Mark ``hub`` every test under
    ``tests/hub/`` (they start a real JupyterHub with its proxy, about a minute a module).
    ``slow`` is set by the modules themselves."""
    for item in items:
        if _needs_an_engine(item):
            item.add_marker(pytest.mark.docker)
        if HUB_TESTS in item.path.parents:
            item.add_marker(pytest.mark.hub)


def _needs_an_engine(item: pytest.Item) -> bool:
    if item.get_closest_marker("docker"):
        return True
    fixtures = getattr(item, "fixturenames", ())
    if "docker_client" in fixtures:  # (containers, images, the engine's own API)
        return True
    if "runtime_name" in fixtures:  # a server under test: on Docker unless made local
        callspec = getattr(item, "callspec", None)
        return callspec is None or callspec.params.get("runtime_name") != "local"
    return False


@pytest.fixture
def runtime_name() -> str:
    """The runtime of the server under test: Docker, unless a test is ``@both_runtimes``."""
    return "docker"


@dataclasses.dataclass(frozen=True)
class LocalInstanceHandle:
    """A local tool instance as tests see it (what a container object is for Docker)."""

    name: str
    root: Path


class LocalInstancePool:
    """Local instances are configuration, fixed before the server starts: the pool declares a
    few per tool type, and ``make_instance`` hands them out one by one."""

    PER_TOOL = 3

    def __init__(self, folder: Path, tool_types: t.Iterable[str]) -> None:
        self.free = {
            tool: [
                LocalInstanceHandle(f"local-{tool}-{i}", folder / f"{tool}-{i}")
                for i in range(self.PER_TOOL)
            ]
            for tool in tool_types
        }
        self.config = {
            handle.name: {"tool": tool, "root": str(handle.root)}
            for tool, handles in self.free.items()
            for handle in handles
        }
        for handles in self.free.values():
            for handle in handles:
                (handle.root / "data").mkdir(parents=True)

    def take(self, owner: str = LOCAL_OWNER, tool: str = "sandbox") -> LocalInstanceHandle:
        assert owner == LOCAL_OWNER, "local instances all belong to the server's owner"
        return self.free[tool].pop(0)


@pytest.fixture
def local_instance_pool(tmp_path: Path, tool_types: dict[str, t.Any]) -> LocalInstancePool:
    return LocalInstancePool(tmp_path / "instances", tool_types)


@pytest.fixture
def runtime_config(runtime_name: str, request: pytest.FixtureRequest) -> dict[str, t.Any]:
    """The ToolTerminalApp settings that choose (and, for local, declare) the runtime."""
    if runtime_name == "local":
        pool: LocalInstancePool = request.getfixturevalue("local_instance_pool")
        return {"runtime": "local", "owner": LOCAL_OWNER, "local_instances": pool.config}
    return {"runtime": "docker"}


@pytest.fixture
def make_instance(runtime_name: str, request: pytest.FixtureRequest) -> InstanceFactory:
    """Tool instances of the runtime under test: ``make_instance(owner=, tool=)``."""
    if runtime_name == "local":
        pool: LocalInstancePool = request.getfixturevalue("local_instance_pool")
        return pool.take
    factory: InstanceFactory = request.getfixturevalue("make_container")
    return factory


def instance_path(instance: t.Any, relative: str) -> str:
    """Where ``relative`` (to a tool type's working directory "/") is, in the instance."""
    if isinstance(instance, LocalInstanceHandle):
        return str(instance.root.resolve() / relative)
    return f"/{relative}"


@pytest.fixture
def make_container(docker_client: docker.DockerClient) -> t.Iterator[InstanceFactory]:
    """Create labelled tool instances; every one is removed after the test."""
    created: list[t.Any] = []

    def make(
        owner: str = "alice",
        tool: str = "sandbox",
        name: str | None = None,
        labels: dict[str, str | None] | None = None,
        image: str = TEST_IMAGE,
    ) -> t.Any:
        all_labels: dict[str, str | None] = {
            "jupyter-tool-terminal.owner": owner,
            "jupyter-tool-terminal.tool": tool,
        }
        all_labels.update(labels or {})
        _SDK_ON_LOOP_ALLOWED.value = True
        try:
            container = docker_client.containers.create(
                image,
                name=name or f"jtt-test-{uuid.uuid4().hex[:10]}",
                init=True,
                network_mode="none",
                labels={k: v for k, v in all_labels.items() if v is not None},
            )
            # Removed after the test even when it does not start (an engine refusing to start
            # it left it behind, "Created").
            created.append(container)
            container.start()
            container.reload()
        finally:
            _SDK_ON_LOOP_ALLOWED.value = False
        return OnEngine(container, CONTAINERS_ENGINE) if CONTAINERS_ENGINE else container

    yield make
    for container in created:
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)


def is_podman(version: t.Mapping[str, t.Any]) -> bool:
    """Whether an engine's `GET /version` answer is Podman's (its Docker-compatible service)."""
    return any(item.get("Name") == "Podman Engine" for item in version.get("Components") or [])


def exec_count(container: t.Any) -> int:
    """How many execs the engine has recorded for a container."""
    return len(container.client.api.inspect_container(container.id).get("ExecIDs") or [])


def container_processes(container: t.Any) -> list[str]:
    """The command lines running in a tool instance: in a container, as `docker top` shows
    them (a server's lease as :data:`LEASE_PROCESS`, without the server's id); for a local
    instance, of the live processes whose working directory is in its root."""
    if isinstance(container, LocalInstanceHandle):
        return _local_processes(container.root.resolve())
    top = container.top(ps_args="-eo pid,args")
    titles, rows = top["Titles"], top["Processes"]
    if len(titles) == 1 and " " in titles[0]:
        # Podman 4 answers each row as one string, under one title ("PID   COMMAND").
        titles = titles[0].split()
        rows = [row[0].split(None, len(titles) - 1) for row in rows]
    index = titles.index("COMMAND") if "COMMAND" in titles else -1
    # (`ps` cuts long lines at its width, 80 columns where the engine runs it without a
    # terminal: a lease's line may end anywhere, even inside the reaper's title.)
    return [LEASE_PROCESS if _is_lease_line(row[index]) else row[index] for row in rows]


def _is_lease_line(line: str) -> bool:
    """Whether a line of `ps` is a lease's, whole or cut at any point after its first words."""
    reaper = f"{_REAPER_PROCESS} "
    return line.startswith(reaper) or (
        len(line) >= len("/bin/sh -c : ") + 20 and reaper.startswith(line)
    )


def _local_processes(root: Path) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                cmdline = file.read()
        except OSError:
            continue
        # (A zombie has no command line left.)
        if cmdline and (cwd == root or root in cwd.parents):
            found.append(cmdline.rstrip(b"\0").replace(b"\0", b" ").decode())
    return found


async def wait_for_processes(container: t.Any, only: set[str], timeout: float = 2.0) -> list[str]:
    """Poll `docker top` until only ``only`` runs; return the last listing.

    The server under test shares this event loop, so the wait must never block it.
    """
    deadline = time.monotonic() + timeout
    while True:
        processes = await asyncio.to_thread(container_processes, container)
        if set(processes) <= only or time.monotonic() > deadline:
            return processes
        await asyncio.sleep(0.05)


def rss_mib() -> float:
    """This process's resident memory (the server under test shares it), in MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    msg = "no VmRSS"
    raise AssertionError(msg)


async def wait_until(predicate: t.Callable[[], t.Awaitable[bool]], timeout: float = 5.0) -> None:
    """Poll an async predicate (without blocking the shared event loop) until it holds."""
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


@pytest.fixture
def tool_app(jp_serverapp: t.Any) -> ToolTerminalApp:
    """The running extension application of the server under test."""
    (app,) = jp_serverapp.extension_manager.extension_apps["jupyter_tool_terminal"]
    assert isinstance(app, ToolTerminalApp)
    return app


@pytest.fixture
def runtime_calls(
    tool_app: ToolTerminalApp, monkeypatch: pytest.MonkeyPatch
) -> t.Callable[[str], list[tuple[t.Any, ...]]]:
    """Record the calls of one of the runtime's async methods (they still run): returns the
    list the arguments of each call go to. A method the runtime does not have is recorded on
    its one engine's runtime (``DockerRuntime.default_engine``: the engine API's ``call``)."""

    def record(method: str) -> list[tuple[t.Any, ...]]:
        runtime: t.Any = tool_app.tool_runtime
        assert runtime is not None
        if not hasattr(runtime, method):
            runtime = runtime.default_engine
        calls: list[tuple[t.Any, ...]] = []
        real = getattr(runtime, method)

        async def recording(*args: t.Any, **kwargs: t.Any) -> t.Any:
            calls.append(args)
            return await real(*args, **kwargs)

        monkeypatch.setattr(runtime, method, recording)
        return calls

    return record


@pytest.fixture
def tool_types() -> dict[str, t.Any]:
    """The tool types the server is configured with (tests may override)."""
    return TOOL_TYPES


@pytest.fixture
def extension_config() -> dict[str, t.Any]:
    """Extra ToolTerminalApp settings (tests may override)."""
    return {}


@pytest.fixture
def suite_defaults() -> dict[str, t.Any]:
    """ToolTerminalApp settings of the whole suite, under each test's ``extension_config``.

    A session ends as soon as its last client leaves (``disconnect_grace = 0``), which most
    lifecycle tests are about; the product default (60 s) has its own tests, which override
    this fixture.
    """
    return {"disconnect_grace": 0}


@pytest.fixture
def docker_runtime_config() -> dict[str, t.Any]:
    """DockerRuntime settings of the whole suite (tests may override).

    A server's lease ends with its container's last shell (``lease_linger = 0``), so that
    "nothing is left once the session ends" holds at once, which many tests check; the product
    default (the lease stays a while for the next open) has its own tests, which override this.
    """
    return {"lease_linger": 0}


@pytest.fixture
def jp_server_config(
    tool_types: dict[str, t.Any],
    suite_defaults: dict[str, t.Any],
    runtime_config: dict[str, t.Any],
    extension_config: dict[str, t.Any],
    docker_runtime_config: dict[str, t.Any],
) -> Config:
    return Config(
        {
            "ServerApp": {
                "jpserver_extensions": {"jupyter_tool_terminal": True},
                "identity_provider_class": TwoUserIdentityProvider,
            },
            "ToolTerminalApp": {
                "tool_types": tool_types,
                **suite_defaults,
                **runtime_config,
                **extension_config,
            },
            "DockerRuntime": {
                **docker_runtime_config,
                **({"engines": SEVERAL_ENGINES} if SEVERAL_ENGINES else {}),
            },
        }
    )


@pytest.fixture
def jp_auth_header() -> dict[str, str]:
    return {"Authorization": "token alice-secret-token"}


BOB = {"Authorization": "token bob-secret-token"}
ALICE = {"Authorization": "token alice-secret-token"}


class Api:
    """REST and WebSocket calls as one user."""

    def __init__(self, fetch: t.Any, ws_fetch: t.Any, headers: dict[str, str]) -> None:
        self._fetch = fetch
        self._ws_fetch = ws_fetch
        self.headers = headers

    async def _request(
        self, method: str, *path: str, body: t.Any = None, params: dict[str, str] | None = None
    ) -> t.Any:
        kwargs: dict[str, t.Any] = {"method": method, "headers": self.headers}
        if body is not None:
            kwargs["body"] = body if isinstance(body, str | bytes) else json.dumps(body)
        elif method in ("POST", "PUT", "PATCH"):
            kwargs["body"] = b""
        if params:
            kwargs["params"] = params
        return await self._fetch("tool-terminal", "api", *path, **kwargs)

    async def call(
        self, method: str, *path: str, body: t.Any = None, params: dict[str, str] | None = None
    ) -> t.Any:
        """The JSON body of a successful request (raises on 4xx/5xx)."""
        response = await self._request(method, *path, body=body, params=params)
        return json.loads(response.body) if response.body else None

    async def status(
        self, method: str, *path: str, body: t.Any = None, params: dict[str, str] | None = None
    ) -> tuple[int, t.Any]:
        """(status, JSON body) without raising on 4xx: the real status, 201 and 204 included."""
        try:
            response = await self._request(method, *path, body=body, params=params)
            return response.code, json.loads(response.body) if response.body else None
        except HTTPClientError as error:
            text = (error.response.body if error.response else None) or b"{}"
            try:
                return error.code, json.loads(text)
            except ValueError:  # an HTML page (404 for routes that do not exist)
                return error.code, {"html": text.decode()}

    async def open_session(self, instance: str) -> dict[str, t.Any]:
        model = await self.call("POST", "sessions", body={"instance": instance})
        assert isinstance(model, dict)
        return model

    async def connect(self, session_id: str) -> TerminalClient:
        ws = await self._ws_fetch("tool-terminal", "websocket", session_id, headers=self.headers)
        client = TerminalClient(ws)
        assert await client.next_frame() == ["setup", {}]
        return client

    async def terminal(self, instance: str) -> tuple[dict[str, t.Any], TerminalClient]:
        """Open a session and connect to it; returns (model, client)."""
        model = await self.open_session(instance)
        return model, await self.connect(model["id"])


@pytest.fixture
def alice(jp_fetch: t.Any, jp_ws_fetch: t.Any) -> Api:
    return Api(jp_fetch, jp_ws_fetch, ALICE)


@pytest.fixture
def bob(jp_fetch: t.Any, jp_ws_fetch: t.Any) -> Api:
    return Api(jp_fetch, jp_ws_fetch, BOB)


class AuditEvents(logging.Handler):
    """Collects the extension's audit events."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[dict[str, t.Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.msg, dict) and record.msg.get("__schema__") == SESSION_SCHEMA_ID:
            self.events.append(record.msg)


@pytest.fixture
def audit(jp_serverapp: t.Any) -> AuditEvents:
    collect = AuditEvents()
    jp_serverapp.event_logger.register_handler(collect)
    return collect
