"""An agent of a Hub user, through the JupyterHub service: created at the service's REST, driven
with the official Python MCP SDK client at the same route under the service's prefix."""

from __future__ import annotations

import asyncio
import json
import typing as t
from pathlib import Path

import pytest
import requests

from ..conftest import InstanceFactory
from ..support.hub import Browser, Hub, running_hub, service_mode_config, wait_for_service
from ..support.mcp_client import connect

SERVICE = "tool-terminal"
PREFIX = f"/services/{SERVICE}/"
SERVICE_CONFIG = (
    'c.ToolTerminalApp.tool_types = {"sandbox": {"display_name": "Sandbox", '
    '"shell": ["/bin/sh"]}}\n'
    # This Hub has no per-user subdomains: agents only with the operator's consent (issue 30.6).
    "c.ToolTerminalApp.agents_on_shared_domain = True\n"
)


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> t.Iterator[Hub]:
    directory: Path = tmp_path_factory.mktemp("hub-agents")
    config = service_mode_config(directory, SERVICE, service_config=SERVICE_CONFIG)
    with running_hub(directory, config) as hub:
        wait_for_service(hub, PREFIX)
        yield hub


@pytest.mark.timeout(300)  # (a Hub started and stopped: 110-120 s on a busy machine)
async def test_an_agent_through_the_hub_service(hub: Hub, make_instance: InstanceFactory) -> None:
    container = make_instance(owner="alice")
    alice = Browser(hub, "alice")
    alice.login()
    assert alice.request("GET", PREFIX).status_code == 200
    status, agent = await alice.json(
        "POST", f"{PREFIX}tool-terminal/api/agents", data=json.dumps({"name": "hub agent"})
    )
    assert status == 201, agent
    status, granted = await alice.json(
        "POST",
        f"{PREFIX}tool-terminal/api/agents/{agent['id']}/control",
        data=json.dumps({"minutes": 5}),
    )
    assert status == 200, granted
    url = f"{hub.url}{PREFIX}tool-terminal/mcp"
    async with connect(url, agent["token"]) as client:
        instances = (await client.call_tool("list_instances", {})).structured_content
        assert instances is not None
        assert container.name in {i["id"] for i in instances["instances"]}
        opened = await client.call_tool("open_terminal", {"instance": container.name})
        assert not opened.is_error, opened.content
        assert opened.structured_content is not None
        session = opened.structured_content["session"]
        ran = await client.call_tool("run_command", {"session": session, "command": "echo via-hub"})
        assert ran.structured_content == {
            "exit_code": 0,
            "output": "via-hub\n",
            "truncated": False,
            "timed_out": False,
        }
    status, sessions = await alice.json("GET", f"{PREFIX}tool-terminal/api/sessions")
    assert status == 200
    assert {s["id"]: s for s in sessions}[session]["agent"]["name"] == "hub agent"
    # The agent token is not a Hub token: the Hub's API and the service's REST refuse it.
    bearer = {"Authorization": f"Bearer {agent['token']}"}
    for path in ("/hub/api/user", f"{PREFIX}tool-terminal/api/agents"):
        response = await asyncio.to_thread(
            requests.get, hub.url + path, headers=bearer, allow_redirects=False, timeout=30
        )
        assert response.status_code in (302, 401, 403), (path, response.status_code)
