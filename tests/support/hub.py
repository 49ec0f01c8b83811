"""A real JupyterHub with configurable-http-proxy for tests, and a browser-like client of it.

The Hub runs in its own process (with the proxy it starts) on free 127.0.0.1 ports, with the
dummy authenticator (users alice and bob, one password), a temporary sqlite database and an
admin service token for what a test does as the operator (tokens, shares, servers). Stopping
it stops the user servers and services it started and the proxy (by its pid file).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import typing as t
import urllib.parse
from pathlib import Path

import psutil
import requests
from tornado.httpclient import HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

from .terminal_client import TerminalClient

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "correct horse battery staple"
ADMIN_TOKEN = "jtt-test-operator-token-0123456789abcdef"
PROXY_TOKEN = "jtt-test-proxy-token-0123456789abcdef"
HUB_DEPS = Path(os.environ.get("JTT_HUB_DEPS", REPO / ".hub-deps"))
PROXY_COMMAND = HUB_DEPS / "node_modules" / ".bin" / "configurable-http-proxy"


#: What names the engine the tests use (docker.from_env reads them): a Hub passes its services
#: and its users' servers only the environment it is given, so these are passed on, and a
#: Hub test runs against the engine of its tests (a second engine's, rootless Docker's...).
ENGINE_VARIABLES = ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH")


def engine_environment() -> dict[str, str]:
    """The variables of :data:`ENGINE_VARIABLES` that are set here."""
    return {name: os.environ[name] for name in ENGINE_VARIABLES if name in os.environ}


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def proxy_command() -> Path:
    """The project-local configurable-http-proxy, installed by scripts/hub-deps.sh if missing."""
    if not PROXY_COMMAND.exists():
        subprocess.run(["bash", str(REPO / "scripts" / "hub-deps.sh")], check=True)
    return PROXY_COMMAND


def _processes_mentioning(text: str) -> list[int]:
    """Processes whose command line or environment contains ``text``, other than this one
    and the ones it started itself (a test's own service is the test's to stop)."""
    own = os.getpid()
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if own in (process.pid, process.ppid()):
                continue
            environment = (f"{name}={value}" for name, value in process.environ().items())
            if any(text in part for part in (*process.cmdline(), *environment)):
                found.append(process.pid)
    return found


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def running_hub(directory: Path, extra_config: str = "", attempts: int = 2) -> t.Iterator[Hub]:
    """A started :class:`Hub`, stopped on exit.

    Free ports are only free when probed: on a busy machine another process may take one
    before the Hub or the proxy binds it, so a failed start is tried again on new ports.
    """
    for attempt in range(attempts):
        hub = Hub(directory / f"attempt-{attempt}", extra_config)
        try:
            hub.start()
        except RuntimeError:
            if attempt == attempts - 1:
                raise
            continue
        try:
            yield hub
        finally:
            hub.stop()
        return


def service_roles(service: str) -> str:
    """Hub config: users may use the tool-terminal service ``service``, which reports their
    activity to the Hub (their work there keeps them alive) and checks the user names that
    terminals are shared with."""
    return f"""
c.JupyterHub.load_roles.append(
    {{"name": "user", "scopes": ["self", "access:services!service={service}"]}}
)
c.JupyterHub.load_roles.append(
    {{
        "name": "tool-terminal-service",
        "scopes": ["users:activity", "read:users:name"],
        "services": [{service!r}],
    }}
)
"""


def service_mode_config(
    directory: Path,
    service: str,
    *,
    service_config: str,
    user_config: str = "",
    user_environment: dict[str, str] | None = None,
    lease_linger: float | None = 0,
) -> str:
    """Hub config for service mode: the tool-terminal service and users' servers without engine.

    ``service_config`` and ``user_config`` are Python appended to the service's and to the
    users' servers' jupyter config; the users' servers point their JupyterLab at the service.
    The service's ``DockerRuntime.lease_linger`` is ``lease_linger`` (default 0: nothing of
    the service is left once a session ends, as conftest's docker_runtime_config; ``None``:
    the product default, as the benchmark measures it).
    """
    prefix = f"/services/{service}/"
    (directory / "service_config.py").write_text(
        'c = get_config()  # noqa\nc.ToolTerminalApp.runtime = "docker"\n'
        + ("" if lease_linger is None else f"c.DockerRuntime.lease_linger = {lease_linger!r}\n")
        + service_config
    )
    config_dir = directory / "user-config"
    config_dir.mkdir(exist_ok=True)
    (config_dir / "jupyter_server_config.py").write_text(
        "c = get_config()  # noqa\n"
        "c.ServerApp.allow_root = True\n"
        'c.ServerApp.jpserver_extensions = {"jupyter_tool_terminal": True}\n'
        f"c.ToolTerminalApp.service_url = {prefix!r}\n" + user_config
    )
    service_command = [
        sys.executable,
        "-m",
        "jupyter_tool_terminal.hub.service",
        "--ServerApp.allow_root=True",
        f"--config={directory / 'service_config.py'}",
    ]
    environment = {
        "JUPYTER_CONFIG_DIR": str(config_dir),
        # The users' servers have no container engine.
        "DOCKER_HOST": f"unix://{directory}/no-engine-here.sock",
        **(user_environment or {}),
    }
    # Its data (the agents file) in this Hub's directory: agents of earlier runs would count
    # against a user's cap (the Jupyter data directory of the test's user outlives the test).
    service_environment = {
        **engine_environment(),
        "PYTHONPATH": str(REPO),
        "JUPYTER_RUNTIME_DIR": f"{directory}/runtime",
        "JUPYTER_DATA_DIR": f"{directory}/data",
    }
    return f"""
c.JupyterHub.services.append(
    {{
        "name": {service!r},
        "url": "http://127.0.0.1:{free_port()}",
        "command": {service_command!r},
        "oauth_no_confirm": True,
        "environment": {service_environment!r},
    }}
)
{service_roles(service)}c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = "{directory}/home/{{username}}"
c.Spawner.cmd = [{sys.executable!r}, "-m", "jupyterhub.singleuser"]
c.Spawner.http_timeout = 60
c.Spawner.start_timeout = 60
c.Spawner.environment = {environment!r}
"""


def wait_for_service(hub: Hub, prefix: str, timeout: float = 60) -> None:
    """Wait until the Hub's managed service below ``prefix`` answers (403 without a login): the
    Hub answers before its services do."""
    deadline = time.monotonic() + timeout
    while Browser(hub).request("GET", f"{prefix}tool-terminal/api/instances").status_code != 403:
        assert time.monotonic() < deadline, hub.log_tail()
        time.sleep(0.2)


class Hub:
    """One JupyterHub process and everything it starts.

    ``extra_config`` is Python appended to the generated ``jupyterhub_config.py``.
    """

    def __init__(self, directory: Path, extra_config: str = "") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.port = free_port()
        self.hub_port = free_port()
        self.proxy_api_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_url = f"{self.url}/hub/api"
        self.log_path = directory / "jupyterhub.log"
        self.proxy_pid_file = directory / "proxy.pid"
        self.config_path = directory / "jupyterhub_config.py"
        self.config_path.write_text(self._config() + textwrap.dedent(extra_config))
        self.process: subprocess.Popen[bytes] | None = None

    def _config(self) -> str:
        return textwrap.dedent(
            f"""
            c = get_config()  # noqa
            c.JupyterHub.ip = "127.0.0.1"
            c.JupyterHub.port = {self.port}
            c.JupyterHub.hub_ip = "127.0.0.1"
            c.JupyterHub.hub_port = {self.hub_port}
            c.JupyterHub.db_url = "sqlite:///{self.directory}/jupyterhub.sqlite"
            c.JupyterHub.cookie_secret_file = "{self.directory}/cookie_secret"
            c.JupyterHub.pid_file = "{self.directory}/jupyterhub.pid"
            c.JupyterHub.log_level = "DEBUG"
            # Activity comes from the servers' own reports only, not from the proxy's traffic.
            c.JupyterHub.last_activity_interval = 3600
            c.ConfigurableHTTPProxy.command = ["{proxy_command()}"]
            c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{self.proxy_api_port}"
            c.ConfigurableHTTPProxy.auth_token = "{PROXY_TOKEN}"
            c.ConfigurableHTTPProxy.pid_file = "{self.proxy_pid_file}"
            c.JupyterHub.authenticator_class = "dummy"
            c.DummyAuthenticator.password = {PASSWORD!r}
            c.Authenticator.allowed_users = {{"alice", "bob"}}
            c.JupyterHub.services = [{{"name": "test-operator", "api_token": "{ADMIN_TOKEN}"}}]
            c.JupyterHub.load_roles = [
                {{
                    "name": "test-operator",
                    "scopes": ["admin:users", "admin:servers", "tokens", "shares"],
                    "services": ["test-operator"],
                }},
            ]
            """
        )

    def start(self, timeout: float = 90.0) -> None:
        """Start the Hub and wait until its API answers through the proxy."""
        log = self.log_path.open("ab")
        # JupyterHub's own processes (proxy, services, servers) inherit this environment.
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", str(self.config_path)],
            cwd=self.directory,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                msg = f"JupyterHub exited with {self.process.returncode}:\n{self.log_tail()}"
                self.stop()  # the proxy it started may have outlived it
                raise RuntimeError(msg)
            with contextlib.suppress(requests.RequestException):
                if requests.get(self.api_url, timeout=2).status_code == 200:
                    return
            if time.monotonic() > deadline:
                self.stop()
                msg = f"JupyterHub did not answer in {timeout} s:\n{self.log_tail()}"
                raise RuntimeError(msg)
            time.sleep(0.2)

    def log_tail(self, lines: int = 60) -> str:
        """The end of the Hub's log (for failure messages)."""
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        """Stop the Hub (it stops its servers and services), then make sure the proxy is gone."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
        proxy_pid = None
        with contextlib.suppress(OSError, ValueError):
            proxy_pid = int(self.proxy_pid_file.read_text().strip())
        if proxy_pid is not None and _pid_alive(proxy_pid):
            os.kill(proxy_pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while _pid_alive(proxy_pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        if process is not None:
            # Anything the Hub started and left behind (it runs in its own process group).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        # Services and servers run in sessions of their own; a Hub that died (or was killed by
        # a test timeout) leaves them. They all carry this Hub's directory in their command
        # line or environment, or its API's URL (a service's environment has little else:
        # the idle culler outlived its Hub without this).
        left = {
            *_processes_mentioning(str(self.directory.parent)),
            *_processes_mentioning(f"127.0.0.1:{self.hub_port}/"),
        }
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    # -- the operator's API -------------------------------------------------------------------

    def api(self, method: str, path: str, **kwargs: t.Any) -> requests.Response:
        """Call the Hub's REST API as the test operator."""
        headers = {"Authorization": f"token {ADMIN_TOKEN}"}
        return requests.request(
            method, f"{self.api_url}/{path.lstrip('/')}", headers=headers, timeout=30, **kwargs
        )

    def user_model(self, name: str) -> dict[str, t.Any]:
        """The Hub's model of a user (with their servers)."""
        response = self.api("GET", f"users/{name}")
        response.raise_for_status()
        return t.cast(dict[str, t.Any], response.json())

    def start_server(self, name: str, timeout: float = 90.0) -> None:
        """Start a user's default server and wait until the Hub says it is ready."""
        response = self.api("POST", f"users/{name}/server")
        assert response.status_code in (201, 202, 400), response.text  # 400: already running
        deadline = time.monotonic() + timeout
        while not self.user_model(name)["servers"].get("", {}).get("ready"):
            if time.monotonic() > deadline:
                msg = f"{name}'s server did not start:\n{self.log_tail()}"
                raise RuntimeError(msg)
            time.sleep(0.2)

    def new_token(self, name: str, **body: t.Any) -> tuple[str, str]:
        """A new API token of a user: (token, token id)."""
        response = self.api("POST", f"users/{name}/tokens", json=body)
        assert response.status_code == 201, response.text
        model = response.json()
        return model["token"], model["id"]


class Browser:
    """A user's HTTP client with cookies, logged in at the Hub like a browser's form login.

    Blocking calls run in a thread, so that an async test's event loop keeps running.
    """

    def __init__(self, hub: Hub, name: str | None = None) -> None:
        self.hub = hub
        self.name = name
        self.http = requests.Session()
        self.token: str | None = None

    def login(self) -> None:
        """Log in through the Hub's login form (as the dummy authenticator's user)."""
        assert self.name is not None
        self.http.get(f"{self.hub.url}/hub/login", timeout=30).raise_for_status()
        xsrf = self.http.cookies.get("_xsrf", path="/hub/")
        response = self.http.post(
            f"{self.hub.url}/hub/login",
            data={"_xsrf": xsrf, "username": self.name, "password": PASSWORD},
            timeout=30,
            allow_redirects=False,
        )
        assert response.status_code == 302, response.text

    async def service_login(self, prefix: str) -> dict[str, t.Any]:
        """Log in at the Hub, then at the service below ``prefix`` as the JupyterLab extension
        does (its ``tool-terminal/login``, through the service's own OAuth); its answer."""
        await asyncio.to_thread(self.login)
        response = await self.fetch("GET", f"{prefix}tool-terminal/login")
        assert response.status_code == 200, response.text
        return t.cast(dict[str, t.Any], response.json())

    def _headers(self, path: str, headers: dict[str, str] | None) -> dict[str, str]:
        all_headers = {"Referer": self.hub.url + path}
        if self.token:
            all_headers["Authorization"] = f"token {self.token}"
        else:
            # Cookie-authenticated writes need jupyter_server's XSRF token of that path.
            prefix = "/".join(path.split("/")[:3]) + "/"
            xsrf = self._cookie("_xsrf", prefix)
            if xsrf:
                all_headers["X-XSRFToken"] = xsrf
        all_headers.update(headers or {})
        return all_headers

    def _cookie(self, name: str, path: str) -> str | None:
        for cookie in self.http.cookies:
            if cookie.name == name and path.startswith(cookie.path):
                return cookie.value
        return None

    def request(self, method: str, path: str, **kwargs: t.Any) -> requests.Response:
        """A blocking request to a path through the proxy (following redirects unless told)."""
        headers = self._headers(path, kwargs.pop("headers", None))
        kwargs.setdefault("timeout", 30)
        return self.http.request(method, self.hub.url + path, headers=headers, **kwargs)

    async def fetch(self, method: str, path: str, **kwargs: t.Any) -> requests.Response:
        """:meth:`request` in a thread."""
        return await asyncio.to_thread(self.request, method, path, **kwargs)

    async def json(self, method: str, path: str, **kwargs: t.Any) -> tuple[int, t.Any]:
        """(status, JSON body or None) of a request."""
        response = await self.fetch(method, path, allow_redirects=False, **kwargs)
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, None

    async def visit(self, path: str) -> requests.Response:
        """Open a page as a browser does, following the Hub's OAuth redirects."""
        return await self.fetch("GET", path, allow_redirects=True)

    async def websocket(
        self, path: str, headers: dict[str, str] | None = None
    ) -> WebSocketClientConnection:
        """Open a WebSocket through the proxy with this client's credentials (and ``headers``)."""
        parsed = urllib.parse.urlparse(self.hub.url)
        headers = self._headers(
            path, {"Origin": f"{parsed.scheme}://{parsed.netloc}", **(headers or {})}
        )
        headers.pop("Referer", None)
        cookies = "; ".join(
            f"{cookie.name}={cookie.value}"
            for cookie in self.http.cookies
            if path.startswith(cookie.path)
        )
        if cookies:
            headers["Cookie"] = cookies
        request = HTTPRequest(f"ws://{parsed.netloc}{path}", headers=headers)
        return await websocket_connect(request)

    async def terminal(self, prefix: str, instance: str) -> tuple[dict[str, t.Any], TerminalClient]:
        """Open a session in ``instance`` below ``prefix`` and connect to it."""
        status, model = await self.json(
            "POST", f"{prefix}tool-terminal/api/sessions", data=json.dumps({"instance": instance})
        )
        assert status == 201, (status, model)
        ws = await self.websocket(f"{prefix}tool-terminal/websocket/{model['id']}")
        client = TerminalClient(ws)
        assert await client.next_frame() == ["setup", {}]
        return model, client


async def keeps_working(term: TerminalClient, seconds: float, pause: float) -> None:
    """Run commands in ``term`` for ``seconds`` (``pause`` between them); each must answer.

    A server in another process cannot be watched re-checking its connections: a test that a
    connection outlives several checks waits for the time they take, using it meanwhile.
    """
    started = time.monotonic()
    rounds = 0
    while time.monotonic() - started < seconds:
        rounds += 1
        assert (await term.run(f"echo $(({rounds}*7))")).strip() == str(rounds * 7)
        await asyncio.sleep(pause)
    assert not term.closed
