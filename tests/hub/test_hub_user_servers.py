"""Per-user-server mode behind a real JupyterHub: each user's server loads the extension.

One Hub (with configurable-http-proxy and a local-process spawner) serves the whole module;
alice's and bob's servers run `jupyterhub-singleuser` with this extension and the Docker runtime.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import sys
import time
import typing as t
from pathlib import Path

import pytest
from tornado.httpclient import HTTPClientError

from ..conftest import InstanceFactory
from ..support.hub import ENGINE_VARIABLES, Browser, Hub, keeps_working, running_hub
from ..support.terminal_client import TerminalClient

#: Short enough that a revoked token ends a terminal within seconds.
RECHECK_INTERVAL = 0.5
CACHE_AGE = 1

USER_SERVER_CONFIG = f"""
c = get_config()  # noqa
c.ServerApp.allow_root = True
c.ServerApp.jpserver_extensions = {{"jupyter_tool_terminal": True}}
c.ToolTerminalApp.runtime = "docker"
c.ToolTerminalApp.tool_types = {{"sandbox": {{"display_name": "Sandbox", "shell": ["/bin/sh"]}}}}
c.ToolTerminalApp.auth_recheck_interval = {RECHECK_INTERVAL}
c.HubOAuth.cache_max_age = {CACHE_AGE}
"""


def _spawner_config(directory: Path) -> str:
    config_dir = directory / "user-config"
    config_dir.mkdir()
    (config_dir / "jupyter_server_config.py").write_text(USER_SERVER_CONFIG)
    return f"""
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = "{directory}/home/{{username}}"
c.Spawner.cmd = [{sys.executable!r}, "-m", "jupyterhub.singleuser"]
c.Spawner.http_timeout = 60
c.Spawner.start_timeout = 60
c.Spawner.environment = {{
    "JUPYTER_CONFIG_DIR": "{config_dir}",
    "JUPYTERHUB_ACTIVITY_INTERVAL": "1",
}}
c.Spawner.env_keep = ["PATH", "PYTHONPATH", "LANG", *{list(ENGINE_VARIABLES)!r}]
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> t.Iterator[Hub]:
    """A running Hub with alice's and bob's servers started."""
    directory = tmp_path_factory.mktemp("hub-user-servers")
    with running_hub(directory, _spawner_config(directory)) as hub:
        for name in ("alice", "bob"):
            hub.start_server(name)
        yield hub


@pytest.fixture
def alice(hub: Hub) -> Browser:
    """Alice, logged in at the Hub and at her server (through the Hub's OAuth)."""
    browser = Browser(hub, "alice")
    browser.login()
    page = browser.request("GET", "/user/alice/")
    assert page.status_code == 200, page.text
    return browser


async def test_alice_lists_and_opens_her_instance_under_her_prefix(
    alice: Browser, make_instance: InstanceFactory
) -> None:
    mine = make_instance(owner="alice")
    theirs = make_instance(owner="bob")
    status, instances = await alice.json("GET", "/user/alice/tool-terminal/api/instances")
    assert status == 200, instances
    ids = {instance["id"] for instance in instances}
    assert mine.name in ids
    assert theirs.name not in ids
    model, term = await alice.terminal("/user/alice/", mine.name)
    assert (await term.run("echo $((6*7))")).strip() == "42"
    status, sessions = await alice.json("GET", "/user/alice/tool-terminal/api/sessions")
    assert [session["id"] for session in sessions] == [model["id"]]
    term.ws.close()


async def _refused_everything(bob: Browser, instance: str, session_id: str) -> list[int]:
    prefix = "/user/alice/tool-terminal"
    statuses = [
        (await bob.json("POST", f"{prefix}/api/sessions", data=json.dumps({"instance": instance})))[
            0
        ],
        (await bob.json("GET", f"{prefix}/api/sessions/{session_id}"))[0],
        (await bob.json("POST", f"{prefix}/api/sessions/{session_id}/reset"))[0],
        (await bob.json("DELETE", f"{prefix}/api/sessions/{session_id}"))[0],
    ]
    try:
        ws = await bob.websocket(f"{prefix}/websocket/{session_id}")
    except HTTPClientError as error:
        statuses.append(error.code)
    else:
        ws.close()
        statuses.append(101)
    return statuses


async def test_bob_is_refused_alices_terminals_also_once_she_shares_her_server(
    hub: Hub, alice: Browser, make_instance: InstanceFactory
) -> None:
    container = make_instance(owner="alice")
    bobs_own = make_instance(owner="bob")
    model, term = await alice.terminal("/user/alice/", container.name)
    bob = Browser(hub, "bob")
    bob.token, _ = await asyncio.to_thread(hub.new_token, "bob")

    status, _ = await bob.json("GET", "/user/alice/tool-terminal/api/instances")
    assert status == 403
    assert await _refused_everything(bob, container.name, model["id"]) == [403] * 5

    shared = await asyncio.to_thread(hub.api, "POST", "shares/alice/", json={"user": "bob"})
    assert shared.status_code == 200, shared.text
    try:
        # Bob reaches alice's server now (once her server's cache of his token expired), as
        # himself: he sees his own instances, never hers.
        deadline = time.monotonic() + CACHE_AGE + 10
        while True:
            status, instances = await bob.json("GET", "/user/alice/tool-terminal/api/instances")
            if status != 403 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert status == 200, instances
        ids = {instance["id"] for instance in instances}
        assert bobs_own.name in ids
        assert container.name not in ids
        status, sessions = await bob.json("GET", "/user/alice/tool-terminal/api/sessions")
        assert model["id"] not in {session["id"] for session in sessions}
        assert await _refused_everything(bob, container.name, model["id"]) == [403] * 5
    finally:
        await asyncio.to_thread(hub.api, "DELETE", "shares/alice/", json={"user": "bob"})
    # Alice's terminal never noticed.
    assert (await term.run("echo $((6*7))")).strip() == "42"
    term.ws.close()


async def test_a_revoked_hub_token_closes_its_open_terminal_with_1008(
    hub: Hub, make_instance: InstanceFactory
) -> None:
    container = make_instance(owner="alice")
    alice = Browser(hub, "alice")
    alice.token, token_id = await asyncio.to_thread(hub.new_token, "alice")
    _, term = await alice.terminal("/user/alice/", container.name)
    assert (await term.run("echo $((6*7))")).strip() == "42"

    revoked = await asyncio.to_thread(hub.api, "DELETE", f"users/alice/tokens/{token_id}")
    assert revoked.status_code == 204, revoked.text
    started = time.monotonic()
    await term.wait_closed(timeout=RECHECK_INTERVAL + CACHE_AGE + 10)
    assert term.ws.close_code == 1008
    # Within the recheck interval plus the Hub client's cache age (and slack for a busy machine).
    assert time.monotonic() - started < RECHECK_INTERVAL + CACHE_AGE + 5
    status, _ = await alice.json("GET", "/user/alice/tool-terminal/api/sessions")
    assert status == 403


@pytest.mark.parametrize(
    "credential", ["hub cookie", "hub token in the header", "hub token in the URL"]
)
async def test_every_hub_credential_keeps_its_terminal_past_several_rechecks(
    credential: str, hub: Hub, alice: Browser, make_instance: InstanceFactory
) -> None:
    container = make_instance(owner="alice")
    model, term = await alice.terminal("/user/alice/", container.name)
    path = f"/user/alice/tool-terminal/websocket/{model['id']}"
    client = Browser(hub, "alice")
    if credential == "hub cookie":
        client = alice
    else:
        client.token, _ = await asyncio.to_thread(hub.new_token, "alice")
        if credential == "hub token in the URL":
            path += f"?token={client.token}"
            client.token = None
    # (JupyterHub takes a token from the URL of a WebSocket only, as browsers mark them.)
    socket = TerminalClient(await client.websocket(path, {"Sec-Fetch-Mode": "websocket"}))
    assert await socket.next_frame() == ["setup", {}]
    await keeps_working(socket, 5 * RECHECK_INTERVAL + CACHE_AGE, RECHECK_INTERVAL / 2)
    assert not term.closed
    socket.ws.close()
    term.ws.close()


def _server_activity(hub: Hub, name: str) -> datetime.datetime:
    stamp = hub.user_model(name)["servers"][""]["last_activity"]
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


async def test_typing_only_in_a_tool_terminal_advances_the_hubs_last_activity(
    hub: Hub, alice: Browser, make_instance: InstanceFactory
) -> None:
    container = make_instance(owner="alice")
    _, term = await alice.terminal("/user/alice/", container.name)
    # From here on alice only types: no REST call her server would count as activity.
    since = datetime.datetime.now(datetime.timezone.utc)
    deadline = time.monotonic() + 30
    typed = 0
    while await asyncio.to_thread(_server_activity, hub, "alice") <= since:
        assert time.monotonic() < deadline, "the Hub never heard of alice's typing"
        typed += 1
        assert (await term.run(f"echo $(({typed}*6))")).strip() == str(typed * 6)
    term.ws.close()
