"""Fixtures: a real Docker Engine, labelled tool instances, and jupyter_server with two users."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import subprocess
import time
import typing as t
import uuid
from pathlib import Path

import docker
import docker.errors
import pytest
from jupyter_server.auth.identity import IdentityProvider, User
from tornado.httpclient import HTTPClientError
from traitlets.config import Config

from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.events import SESSION_SCHEMA_ID

from .terminal_client import TerminalClient

pytest_plugins = ["pytest_jupyter.jupyter_server"]

TEST_IMAGE = "jupyter-tool-terminal-test:latest"
REPO = Path(__file__).resolve().parent.parent
TOKENS = {"alice-secret-token": "alice", "bob-secret-token": "bob"}
#: Tokens a test revoked (as a Hub revokes a token at logout); they authenticate nobody.
REVOKED_TOKENS: set[str] = set()
COOKIE_NAME = "jtt-test-user"
#: Processes of the test containers' own (PID 1 is docker-init, then `sleep infinity`).
BASE_PROCESSES = {"/sbin/docker-init -- /bin/sleep infinity", "/bin/sleep infinity"}

TOOL_TYPES: dict[str, t.Any] = {
    "sandbox": {"display_name": "Sandbox", "shell": ["/bin/sh"], "env": {"TOOL_GREETING": "hi"}},
    "course": {
        "display_name": "Course",
        "shell": ["/bin/sh"],
        "startup_command": "echo STARTUP-BANNER; cd /data && export COURSE_VAR=from-startup",
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


InstanceFactory = t.Callable[..., t.Any]


@pytest.fixture
def make_instance(docker_client: docker.DockerClient) -> t.Iterator[InstanceFactory]:
    """Create labelled tool instances; every one is removed after the test."""
    created: list[t.Any] = []

    def make(
        owner: str = "alice",
        tool: str = "sandbox",
        name: str | None = None,
        labels: dict[str, str | None] | None = None,
    ) -> t.Any:
        all_labels: dict[str, str | None] = {
            "jupyter-tool-terminal.owner": owner,
            "jupyter-tool-terminal.tool": tool,
        }
        all_labels.update(labels or {})
        container = docker_client.containers.run(
            TEST_IMAGE,
            name=name or f"jtt-test-{uuid.uuid4().hex[:10]}",
            detach=True,
            init=True,
            network_mode="none",
            labels={k: v for k, v in all_labels.items() if v is not None},
        )
        created.append(container)
        return container

    yield make
    for container in created:
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)


def exec_count(container: t.Any) -> int:
    """How many execs the engine has recorded for a container."""
    return len(container.client.api.inspect_container(container.id).get("ExecIDs") or [])


def container_processes(container: t.Any) -> list[str]:
    """The command lines running in a container, as `docker top` shows them."""
    top = container.top(ps_args="-eo pid,args")
    index = top["Titles"].index("COMMAND") if "COMMAND" in top["Titles"] else -1
    return [row[index] for row in top["Processes"]]


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
def jp_server_config(
    tool_types: dict[str, t.Any],
    suite_defaults: dict[str, t.Any],
    extension_config: dict[str, t.Any],
) -> Config:
    return Config(
        {
            "ServerApp": {
                "jpserver_extensions": {"jupyter_tool_terminal": True},
                "identity_provider_class": TwoUserIdentityProvider,
            },
            "ToolTerminalApp": {"tool_types": tool_types, **suite_defaults, **extension_config},
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
        elif method == "POST":
            kwargs["body"] = b""
        if params:
            kwargs["params"] = params
        return await self._fetch("tool-terminal", "api", *path, **kwargs)

    async def call(
        self, method: str, *path: str, body: t.Any = None, params: dict[str, str] | None = None
    ) -> t.Any:
        response = await self._request(method, *path, body=body, params=params)
        return json.loads(response.body) if response.body else None

    async def status(
        self, method: str, *path: str, body: t.Any = None, params: dict[str, str] | None = None
    ) -> tuple[int, t.Any]:
        """(status, JSON body) without raising on 4xx; any success counts as 200."""
        code, reply = await self.exact_status(method, *path, body=body, params=params)
        return (200 if code < 300 else code), reply

    async def exact_status(
        self, method: str, *path: str, body: t.Any = None, params: dict[str, str] | None = None
    ) -> tuple[int, t.Any]:
        """(status, JSON body) without raising on 4xx, with the success code as sent."""
        try:
            response = await self._request(method, *path, body=body, params=params)
        except HTTPClientError as error:
            text = (error.response.body if error.response else None) or b"{}"
            try:
                return error.code, json.loads(text)
            except ValueError:  # an HTML page (404 for routes that do not exist)
                return error.code, {"html": text.decode()}
        return response.code, json.loads(response.body) if response.body else None

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
