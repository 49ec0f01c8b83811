"""Service mode behind a real JupyterHub: `jupyter-tool-terminal-service` as a Hub-managed service.

One Hub serves the whole module: the service (the only process with the Docker Engine) at
/services/tool-terminal/, and alice's and bob's own servers, which run with DOCKER_HOST pointing
nowhere and `service_url` set.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import typing as t
from pathlib import Path

import jupyterhub
import pytest
from tornado.httpclient import HTTPClientError

from jupyter_tool_terminal.app import SERVICE_URL_PAGE_CONFIG
from jupyter_tool_terminal.base import ACCESS_CHECK_TIMEOUT

from ..conftest import BASE_PROCESSES, InstanceFactory, wait_for_processes
from ..support.hub import (
    REPO,
    Browser,
    Hub,
    free_port,
    keeps_working,
    running_hub,
    service_mode_config,
    wait_for_service,
)
from ..support.terminal_client import TerminalClient

SERVICE = "tool-terminal"
PREFIX = f"/services/{SERVICE}/"
API = f"{PREFIX}tool-terminal/api"
RECHECK_INTERVAL = 0.5
CACHE_AGE = 1

SERVICE_CONFIG = f"""
c.ToolTerminalApp.tool_types = {{"sandbox": {{"display_name": "Sandbox", "shell": ["/bin/sh"]}}}}
c.ToolTerminalApp.auth_recheck_interval = {RECHECK_INTERVAL}
c.HubOAuth.cache_max_age = {CACHE_AGE}
c.HubActivityReporter.interval = 1
"""


def _hub_config(directory: Path) -> str:
    return service_mode_config(directory, SERVICE, service_config=SERVICE_CONFIG)


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> t.Iterator[Hub]:
    """A running Hub with the tool-terminal service."""
    directory = tmp_path_factory.mktemp("hub-service")
    with running_hub(directory, _hub_config(directory)) as hub:
        wait_for_service(hub, PREFIX)
        yield hub


def _login(hub: Hub, name: str) -> Browser:
    browser = Browser(hub, name)
    browser.login()
    # The service's page sends the browser through the Hub's OAuth and sets its cookie.
    page = browser.request("GET", PREFIX)
    assert page.status_code == 200, page.text
    return browser


@pytest.fixture
def alice(hub: Hub) -> Browser:
    """Alice, logged in at the Hub and at the service."""
    return _login(hub, "alice")


@pytest.fixture
def bob(hub: Hub) -> Browser:
    """Bob, logged in at the Hub and at the service."""
    return _login(hub, "bob")


def test_outside_a_hub_the_service_exits_with_a_clear_message() -> None:
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("JUPYTERHUB_")
    }
    environment["PYTHONPATH"] = str(REPO)
    result = subprocess.run(
        [sys.executable, "-m", "jupyter_tool_terminal.hub.service"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "must be started by JupyterHub as a managed service" in result.stderr
    assert "JUPYTERHUB_API_TOKEN" in result.stderr


def test_the_console_script_is_the_service() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert 'jupyter-tool-terminal-service = "jupyter_tool_terminal.hub.service:main"' in text


def test_the_service_serves_from_an_empty_directory_of_its_own(hub: Hub) -> None:
    log = hub.log_path.read_text(errors="replace")
    roots = re.findall(r"Serving notebooks from local directory: (\S+)", log)
    service_roots = [root for root in roots if "jupyter-tool-terminal-service-" in root]
    # Not the Hub's directory, where it was started: an empty one, made for it.
    assert len(service_roots) == 1, roots
    assert os.listdir(service_roots[0]) == []


async def test_without_a_hub_login_nothing_is_served(
    hub: Hub, make_instance: InstanceFactory
) -> None:
    container = make_instance(owner="alice")
    anonymous = Browser(hub)
    status, _ = await anonymous.json("GET", f"{API}/instances")
    assert status == 403
    status, _ = await anonymous.json(
        "POST", f"{API}/sessions", data=json.dumps({"instance": container.name})
    )
    assert status == 403
    page = await anonymous.fetch("GET", PREFIX + "tool-terminal/", allow_redirects=False)
    assert page.status_code == 302
    assert "/hub/api/oauth2/authorize" in page.headers["Location"]
    assert container.name not in page.text
    # Following the redirects ends at the Hub's login form, not at the service.
    login = await anonymous.visit(PREFIX)
    assert login.url.startswith(f"{hub.url}/hub/login"), login.url
    assert container.name not in login.text


async def test_alice_and_bob_each_reach_only_their_own_instances(
    alice: Browser, bob: Browser, make_instance: InstanceFactory
) -> None:
    hers = make_instance(owner="alice")
    his = make_instance(owner="bob")
    page = await alice.visit(PREFIX)
    assert hers.name in page.text
    assert his.name not in page.text
    for browser, own, other in ((alice, hers, his), (bob, his, hers)):
        status, instances = await browser.json("GET", f"{API}/instances")
        assert status == 200, instances
        # (Other tests on this engine may hold instances of the same names: no exact lists.)
        ids = {instance["id"] for instance in instances}
        assert own.name in ids
        assert other.name not in ids
        _, term = await browser.terminal(PREFIX, own.name)
        assert (await term.run("echo $((6*7))")).strip() == "42"
        term.ws.close()
        status, _ = await browser.json(
            "POST", f"{API}/sessions", data=json.dumps({"instance": other.name})
        )
        assert status == 403

    model, term = await alice.terminal(PREFIX, hers.name)
    session = model["id"]
    assert [
        (await bob.json("GET", f"{API}/sessions/{session}"))[0],
        (await bob.json("POST", f"{API}/sessions/{session}/reset"))[0],
        (await bob.json("DELETE", f"{API}/sessions/{session}"))[0],
    ] == [403, 403, 403]
    with pytest.raises(HTTPClientError) as refused:
        await bob.websocket(f"{PREFIX}tool-terminal/websocket/{session}")
    assert refused.value.code == 403
    assert (await term.run("echo still-hers")).strip() == "still-hers"
    term.ws.close()


#: Every jupyter_server resource but this extension's, as a user would try it.
REFUSED = [
    ("GET", "api/kernels", None),
    ("POST", "api/kernels", {"name": "python3"}),
    ("GET", "api/sessions", None),
    ("POST", "api/sessions", {"path": "x.ipynb", "type": "notebook", "kernel": {}}),
    ("GET", "api/contents", None),
    ("PUT", "api/contents/planted.txt", {"type": "file", "format": "text", "content": "x"}),
    ("GET", "files/service_config.py", None),
    ("GET", "api/kernelspecs", None),
    ("GET", "nbconvert/html/x.ipynb", None),
    ("GET", "api/nbconvert", None),
    ("GET", "api/config/notebook", None),
    ("PATCH", "api/config/notebook", {"x": 1}),
    ("POST", "api/events", {"schema_id": "x", "version": 1, "data": {}}),
    ("GET", "api/status", None),
    ("POST", "api/shutdown", None),
]


def _parent_of(entry: Path) -> int | None:
    try:
        match = re.search(r"^PPid:\s+(\d+)", (entry / "status").read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) if match else None


def _service_children(hub: Hub) -> list[int]:
    """The processes the service started (the service is the one running with our config)."""
    processes = [entry for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    marker = str(hub.directory.parent / "service_config.py").encode()
    services = set()
    for entry in processes:
        with contextlib.suppress(OSError):
            if marker in (entry / "cmdline").read_bytes():
                services.add(int(entry.name))
    assert services, "the service process was not found"
    return [int(entry.name) for entry in processes if _parent_of(entry) in services]


# (Logging in to the service needs its engine: without one it answers 503.)
@pytest.mark.docker
@pytest.mark.parametrize("by_token", [False, True], ids=["cookie", "token"])
async def test_everything_but_tool_terminals_is_refused_and_nothing_starts(
    hub: Hub, alice: Browser, by_token: bool
) -> None:
    if by_token:
        alice = Browser(hub, "alice")
        alice.token, _ = await asyncio.to_thread(hub.new_token, "alice")
    answers = {}
    for method, path, body in REFUSED:
        data = json.dumps(body) if body is not None else (b"" if method != "GET" else None)
        status, reply = await alice.json(method, PREFIX + path, data=data)
        answers[f"{method} {path}"] = status
        assert "alice" not in json.dumps(reply or {}), (path, reply)
    assert answers == {f"{method} {path}": 403 for method, path, _ in REFUSED}
    # Who am I answers with the caller's own identity only, and no permission but ours.
    asked = {
        "kernels": ["read", "execute"],
        "contents": ["read", "write"],
        "terminals": ["execute"],
    }
    status, me = await alice.json(
        "GET", PREFIX + "api/me", params={"permissions": json.dumps(asked)}
    )
    assert status == 200
    assert me["identity"]["username"] == "alice"
    assert {resource: me["permissions"][resource] for resource in asked} == {
        resource: [] for resource in asked
    }
    # General terminals are not even served (no terminal extension is loaded).
    status, _ = await alice.json("POST", PREFIX + "api/terminals", data=b"")
    assert status in (403, 404)
    assert await asyncio.to_thread(_service_children, hub) == []
    assert not list(hub.directory.parent.rglob("planted.txt"))


async def test_logout_ends_access_and_closes_open_terminals_others_unaffected(
    hub: Hub, alice: Browser, bob: Browser, make_instance: InstanceFactory
) -> None:
    hers = make_instance(owner="alice")
    his = make_instance(owner="bob")
    _, alice_term = await alice.terminal(PREFIX, hers.name)
    _, bob_term = await bob.terminal(PREFIX, his.name)
    assert (await alice_term.run("echo $((6*7))")).strip() == "42"
    old_cookies = alice.http.cookies.copy()

    await alice.fetch("GET", "/hub/logout")
    started = time.monotonic()
    await alice_term.wait_closed(timeout=RECHECK_INTERVAL + CACHE_AGE + 10)
    assert alice_term.ws.close_code == 1008
    assert time.monotonic() - started < RECHECK_INTERVAL + CACHE_AGE + 5
    processes = await wait_for_processes(hers, BASE_PROCESSES, timeout=10)
    assert set(processes) <= BASE_PROCESSES, processes

    replay = Browser(hub, "alice")
    replay.http.cookies.update(old_cookies)
    status, _ = await replay.json("GET", f"{API}/instances")
    assert status == 403
    for _ in range(3):
        assert (await bob_term.run("echo $((6*7))")).strip() == "42"
    assert not bob_term.closed
    bob_term.ws.close()


async def test_a_terminal_on_the_service_cookie_outlives_several_rechecks(
    alice: Browser, make_instance: InstanceFactory
) -> None:
    _, term = await alice.terminal(PREFIX, make_instance(owner="alice").name)
    await keeps_working(term, 5 * RECHECK_INTERVAL + CACHE_AGE, RECHECK_INTERVAL / 2)
    term.ws.close()


async def test_users_servers_have_no_engine_and_their_lab_logs_in_at_the_service_itself(
    hub: Hub, make_instance: InstanceFactory
) -> None:
    hers = make_instance(owner="alice")
    await asyncio.to_thread(hub.start_server, "alice")
    alice = Browser(hub, "alice")
    await asyncio.to_thread(alice.login)
    lab = await alice.visit("/user/alice/lab")
    assert lab.status_code == 200
    page_config = json.loads(
        re.search(r'id="jupyter-config-data"[^>]*>(.*?)</script>', lab.text, re.S).group(1)  # type: ignore[union-attr]
    )
    assert page_config[SERVICE_URL_PAGE_CONFIG] == PREFIX
    # Alice's own server has no engine to reach, and with service_url set serves no tool
    # terminals itself: it says where they are.
    status, own = await alice.json("GET", "/user/alice/tool-terminal/api/instances")
    assert status == 503
    assert PREFIX in own["message"]
    # The token her JupyterLab holds belongs to her server: the service refuses it, and it
    # cannot become the service's login cookie either.
    lab_client = Browser(hub, "alice")
    lab_client.token = page_config["token"]
    status, _ = await lab_client.json("GET", f"{API}/instances")
    assert status == 403
    status, _ = await lab_client.json("POST", f"{API}/hub-login", data=b"")
    assert status in (400, 403)

    # As the JupyterLab extension does: the service's own login (OAuth with the Hub, on the
    # Hub's cookie alone) sets the service's cookie and gives its XSRF token; REST calls
    # carry both, and the terminal's WebSocket authenticates with the cookie alone.
    login = await alice.fetch("GET", f"{PREFIX}tool-terminal/login")
    assert login.status_code == 200, login.text
    assert login.headers["Cache-Control"] == "no-store"
    answer = login.json()
    assert answer["user"] == "alice"
    status, model = await alice.json(
        "POST",
        f"{API}/sessions",
        data=json.dumps({"instance": hers.name}),
        headers={"X-XSRFToken": answer["xsrf"]},
    )
    assert status == 201, model
    socket_only = await alice.websocket(f"{PREFIX}tool-terminal/websocket/{model['id']}")
    cookie_client = TerminalClient(socket_only)
    assert await cookie_client.next_frame() == ["setup", {}]
    assert (await cookie_client.run("echo $((6*7))")).strip() == "42"
    socket_only.close()
    # Without the service's XSRF token, a cookie-authenticated write is refused.
    status, _ = await alice.json(
        "POST",
        f"{API}/sessions",
        data=json.dumps({"instance": hers.name}),
        headers={"X-XSRFToken": "not-the-token"},
    )
    assert status == 403


def _activity(hub: Hub, name: str) -> tuple[datetime.datetime, datetime.datetime | None]:
    """A user's last activity on the Hub, and their default server's (if they have one)."""
    model = hub.user_model(name)
    server = model["servers"].get("")

    def parse(stamp: str) -> datetime.datetime:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))

    return parse(model["last_activity"]), parse(server["last_activity"]) if server else None


async def test_typing_only_in_the_service_keeps_the_user_and_their_server_active(
    hub: Hub, alice: Browser, bob: Browser, make_instance: InstanceFactory
) -> None:
    # Alice's own server is the one idle culling would stop; bob has none (never started).
    await asyncio.to_thread(hub.start_server, "alice")
    since = datetime.datetime.now(datetime.timezone.utc)
    for user, name in ((alice, "alice"), (bob, "bob")):
        _, term = await user.terminal(PREFIX, make_instance(owner=name).name)
        # From here on they only type: nothing their own servers would count.
        deadline = time.monotonic() + 30
        typed = 0
        while True:
            person, server = await asyncio.to_thread(_activity, hub, name)
            if person > since and (name == "bob" or (server is not None and server > since)):
                break
            assert time.monotonic() < deadline, f"the Hub never heard of {name}'s typing"
            typed += 1
            assert (await term.run(f"echo $(({typed}*6))")).strip() == str(typed * 6)
        term.ws.close()
    assert "" not in hub.user_model("bob")["servers"]


async def test_a_terminal_is_shared_only_with_users_the_hub_knows(
    hub: Hub, alice: Browser, bob: Browser, make_instance: InstanceFactory
) -> None:
    model, term = await alice.terminal(PREFIX, make_instance(owner="alice").name)
    observers = f"{API}/sessions/{model['id']}/observers"
    status, body = await alice.json("POST", observers, data=json.dumps({"user": "bobb"}))
    assert (status, body["message"]) == (400, "There is no user named bobb.")
    assert await alice.json("GET", observers) == (200, [])
    status, body = await alice.json("POST", observers, data=json.dumps({"user": "bob"}))
    assert (status, body) == (201, ["bob"])
    # Bob watches: he sees what alice's shell prints.
    watching = await bob.websocket(f"{PREFIX}tool-terminal/websocket/{model['id']}")
    observer = TerminalClient(watching)
    assert await observer.next_frame() == ["setup", {}]
    assert (await term.run("echo $((6*7))")).strip() == "42"
    await observer.expect("42")
    watching.close()
    term.ws.close()


async def test_with_the_hub_unreachable_nothing_is_served_and_access_returns_with_it(
    hub: Hub, alice: Browser, make_instance: InstanceFactory
) -> None:
    # Last in this module: it freezes the module's Hub for a while.
    hers = make_instance(owner="alice")
    _, term = await alice.terminal(PREFIX, hers.name)
    assert hub.process is not None
    hub.process.send_signal(signal.SIGSTOP)  # the Hub stops answering (its sockets stay open)
    try:
        # Once the service's cached answer is older than its cache age, it must ask the Hub
        # (a time-based cache: there is no event to wait for).
        await asyncio.sleep(CACHE_AGE + 0.5)
        started = time.monotonic()
        # A request is refused within the identity check's time limit (JupyterHub's own
        # client would wait five minutes), and the open terminal's access check cannot get an
        # answer either: closed, not kept.
        refused, _ = await asyncio.gather(
            alice.json(
                "POST",
                f"{API}/sessions",
                data=json.dumps({"instance": hers.name}),
                timeout=ACCESS_CHECK_TIMEOUT + 10,
            ),
            term.wait_closed(timeout=ACCESS_CHECK_TIMEOUT + 20),
        )
        assert refused[0] == 503, refused
        assert "did not answer" in refused[1]["message"]
        assert term.ws.close_code == 1008
        assert time.monotonic() - started < ACCESS_CHECK_TIMEOUT + 10
        # Nothing was started, and the closed terminal's shell is gone.
        processes = await wait_for_processes(hers, BASE_PROCESSES, timeout=10)
        assert set(processes) <= BASE_PROCESSES, processes
    finally:
        hub.process.send_signal(signal.SIGCONT)
    _, again = await alice.terminal(PREFIX, hers.name)
    assert (await again.run("echo $((6*7))")).strip() == "42"
    again.ws.close()


class _HubVersionHandler(http.server.BaseHTTPRequestHandler):
    """Answers the Hub API's version request, as far as a starting server asks the Hub."""

    def do_GET(self) -> None:
        body = json.dumps({"version": jupyterhub.__version__}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: t.Any) -> None:
        """Quiet."""


def test_the_service_refuses_to_serve_with_another_server_extension(tmp_path: Path) -> None:
    # A config file can enable extensions (JupyterLab's handlers ask no authorizer): the
    # service must notice and exit instead of serving them.
    (tmp_path / "config.py").write_text('c.ServerApp.jpserver_extensions = {"jupyterlab": True}\n')
    hub_api = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HubVersionHandler)
    threading.Thread(target=hub_api.serve_forever, daemon=True).start()
    port = free_port()
    environment = {
        **{name: value for name, value in os.environ.items() if not name.startswith("JUPYTER")},
        "PYTHONPATH": str(REPO),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTERHUB_SERVICE_NAME": "tool-terminal",
        "JUPYTERHUB_API_TOKEN": "not-checked-here",
        "JUPYTERHUB_API_URL": f"http://127.0.0.1:{hub_api.server_port}/hub/api",
        "JUPYTERHUB_SERVICE_PREFIX": "/services/tool-terminal/",
        "JUPYTERHUB_SERVICE_URL": f"http://127.0.0.1:{port}",
        "JUPYTERHUB_CLIENT_ID": "service-tool-terminal",
        "JUPYTERHUB_OAUTH_CALLBACK_URL": "/services/tool-terminal/oauth_callback",
    }
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "jupyter_tool_terminal.hub.service",
                "--ServerApp.allow_root=True",
                f"--config={tmp_path / 'config.py'}",
            ],
            env=environment,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    finally:
        hub_api.shutdown()
        hub_api.server_close()
    assert result.returncode == 3, result.stderr[-3000:]
    assert "refusing to serve" in result.stderr
    assert "jupyterlab" in result.stderr


async def test_stopping_the_users_server_leaves_her_tool_terminal_open(
    hub: Hub, make_instance: InstanceFactory
) -> None:
    hers = make_instance(owner="alice")
    await asyncio.to_thread(hub.start_server, "alice")
    alice = Browser(hub, "alice")
    # Logged in as her JupyterLab logs in: at the service itself.
    await alice.service_login(PREFIX)
    _, term = await alice.terminal(PREFIX, hers.name)
    assert (await term.run("sleep 1000 & echo STARTED")).strip().endswith("STARTED")

    # The admin panel's Stop Server (the culler calls the same API).
    stopped = await asyncio.to_thread(hub.api, "DELETE", "users/alice/server")
    assert stopped.status_code in (202, 204), stopped.text
    deadline = time.monotonic() + 60
    while (await asyncio.to_thread(hub.user_model, "alice"))["servers"]:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)
    # Several access re-checks later (each asks the Hub again: the cache is shorter), the
    # terminal is still hers, with the job it started.
    await asyncio.sleep(4 * (RECHECK_INTERVAL + CACHE_AGE))
    assert not term.closed
    assert "sleep 1000" in await term.run("ps")
    term.ws.close()


@pytest.mark.docker  # (logs in to the service, which needs its engine)
@pytest.mark.timeout(300)
async def test_on_a_hub_without_subdomains_no_page_of_the_origin_makes_agents(hub: Hub) -> None:
    """Issue 30.6. This Hub gives users no subdomains: every user's server is served at the
    service's origin, so a page Mallory's server serves runs its scripts in that origin. Such a
    script has what a browser gives any script of the origin: Alice's cookies go with its
    requests to the service, and it reads the service's ``_xsrf`` cookie (in a frame of a service
    page, or from ``document.cookie``). Those requests are modelled here: Alice's cookies, her
    XSRF token, a Referer on Mallory's server. They must not create an agent or grant control."""
    alice = _login(hub, "alice")
    await alice.service_login(PREFIX)
    on_mallorys_page = {"Referer": f"{hub.url}/user/mallory/page.html"}
    status, body = await alice.json(
        "POST",
        f"{PREFIX}tool-terminal/api/agents",
        data=json.dumps({"name": "planted"}),
        headers=on_mallorys_page,
    )
    assert status == 404, body
    assert "turned off" in body["message"]
    status, listed = await alice.json("GET", f"{PREFIX}tool-terminal/api/agents")
    assert status == 404, listed
