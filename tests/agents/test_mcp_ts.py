"""The MCP endpoint with the official TypeScript SDK's client (node, tests/support/mcp-ts)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from ..conftest import Api, InstanceFactory
from ..support.mcp_client import mcp_url, new_agent
from .test_mcp import TOOL_NAMES

CLIENT = Path(__file__).resolve().parent.parent / "support" / "mcp-ts"


@pytest.fixture
def node() -> str:
    """node, and the SDK installed from the lockfile (`npm ci --prefix tests/support/mcp-ts`)."""
    path = shutil.which("node")
    if path is None or not (CLIENT / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail(
            "needs node and `npm ci --prefix tests/support/mcp-ts` (scripts/test.sh runs it)"
        )
    return path


async def test_the_typescript_sdk_client(
    node: str, alice: Api, jp_http_port: int, jp_base_url: str, make_instance: InstanceFactory
) -> None:
    make_instance(owner="alice", name="jtt-mcp-ts")
    agent = await new_agent(alice, "TypeScript", control=True)
    process = await asyncio.create_subprocess_exec(
        node,
        str(CLIENT / "client.mjs"),
        mcp_url(jp_http_port, jp_base_url),
        agent.token,
        "jtt-mcp-ts",
        "echo from-typescript; exit_with() { return 4; }; exit_with",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    result = json.loads(out)
    assert result["protocolVersion"] in ("2025-11-25", "2025-06-18")
    assert result["server"]["name"] == "jupyter-tool-terminal"
    assert set(result["tools"]) == TOOL_NAMES
    assert "jtt-mcp-ts" in {i["id"] for i in result["instances"]["instances"]}
    session = result["opened"]["session"]
    assert result["ran"] == {
        "exit_code": 4,
        "output": "from-typescript\n",
        "truncated": False,
        "timed_out": False,
    }
    assert "from-typescript" in result["ranText"]
    assert result["unknown"]["isError"] is True
    assert "There is no tool" in result["unknown"]["text"]
    listed = {s["id"]: s for s in await alice.call("GET", "sessions")}
    assert listed[session]["agent"] == {"id": agent.id, "name": "TypeScript"}
