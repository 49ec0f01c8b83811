"""The real `jupyterhub-idle-culler` stops an idle user's server; her tool terminal stays.

A tool terminal belongs to the tool container and its user, not to her Jupyter server: in
service mode it lives in the service, so culling her idle server must not end it. Here the
culler runs as a Hub service with a short timeout, alice's server is culled while she does
nothing, and the terminal she left open (with a job in it) still answers afterwards.
"""

from __future__ import annotations

import asyncio
import sys
import time
import typing as t

import pytest

from ..conftest import InstanceFactory
from ..support.hub import Browser, Hub, running_hub, service_mode_config, wait_for_service

SERVICE = "tool-terminal"
PREFIX = f"/services/{SERVICE}/"
API = f"{PREFIX}tool-terminal/api"
#: Seconds of inactivity after which the culler stops a server, and how often it looks.
CULL_TIMEOUT = 4
CULL_EVERY = 1

SERVICE_CONFIG = """
c.ToolTerminalApp.tool_types = {"sandbox": {"shell": ["/bin/sh"]}}
c.ToolTerminalApp.auth_recheck_interval = 0.5
c.HubOAuth.cache_max_age = 1
c.HubActivityReporter.interval = 1
"""

CULLER = f"""
c.JupyterHub.services.append(
    {{
        "name": "idle-culler",
        "command": [
            {sys.executable!r}, "-m", "jupyterhub_idle_culler",
            "--timeout={CULL_TIMEOUT}", "--cull-every={CULL_EVERY}",
        ],
    }}
)
c.JupyterHub.load_roles.append(
    {{
        "name": "idle-culler",
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        "services": ["idle-culler"],
    }}
)
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> t.Iterator[Hub]:
    """A Hub with the tool-terminal service and the idle culler."""
    directory = tmp_path_factory.mktemp("hub-culling")
    config = service_mode_config(directory, SERVICE, service_config=SERVICE_CONFIG) + CULLER
    with running_hub(directory, config) as hub:
        wait_for_service(hub, PREFIX)
        yield hub


@pytest.mark.timeout(300)  # (a Hub started and stopped: 110-120 s on a busy machine)
async def test_culling_an_idle_server_leaves_the_users_tool_terminal(
    hub: Hub, make_instance: InstanceFactory
) -> None:
    hers = make_instance(owner="alice")
    await asyncio.to_thread(hub.start_server, "alice")
    alice = Browser(hub, "alice")
    await alice.service_login(PREFIX)
    _, term = await alice.terminal(PREFIX, hers.name)
    assert (await term.run("sleep 1000 & echo STARTED")).strip().endswith("STARTED")

    # Alice does nothing: the culler stops her server.
    deadline = time.monotonic() + 60
    while (await asyncio.to_thread(hub.user_model, "alice"))["servers"]:
        assert time.monotonic() < deadline, hub.log_tail()
        await asyncio.sleep(0.5)
    # It was the culler that stopped it.
    assert "Culling server alice" in hub.log_path.read_text()
    # Her terminal outlives it, across access re-checks, with the job it started.
    await asyncio.sleep(3)
    assert not term.closed
    assert "sleep 1000" in await term.run("ps")
    term.ws.close()
