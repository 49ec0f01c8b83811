"""The agent REST routes: credentials, control, sharing; refusals; expiry; persistence."""

from __future__ import annotations

import datetime
import json
import logging
import os
import stat
import typing as t
from pathlib import Path

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from jupyter_tool_terminal.agents.audit import AGENT_SCHEMA_ID
from jupyter_tool_terminal.agents.store import AgentStore
from jupyter_tool_terminal.app import ToolTerminalApp

from ..conftest import ALICE, Api, InstanceFactory, wait_until

AGENT_FIELDS = {"id", "name", "created", "expires", "control_until", "request", "shared", "kind"}


class AgentEvents(logging.Handler):
    """Collects the agent audit events."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[dict[str, t.Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.msg, dict) and record.msg.get("__schema__") == AGENT_SCHEMA_ID:
            self.events.append(record.msg)


@pytest.fixture
def agent_audit(jp_serverapp: t.Any) -> AgentEvents:
    collect = AgentEvents()
    jp_serverapp.event_logger.register_handler(collect)
    return collect


async def mcp_status(port: int, base_url: str, headers: dict[str, str]) -> int:
    """The HTTP status of an MCP `initialize` POST with ``headers``."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    try:
        response = await AsyncHTTPClient().fetch(
            f"http://127.0.0.1:{port}{base_url}tool-terminal/mcp",
            method="POST",
            body=json.dumps(body),
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                **headers,
            },
        )
    except HTTPClientError as error:
        return error.code
    return response.code


async def test_create_list_show_delete(alice: Api, agent_audit: AgentEvents) -> None:
    status, created = await alice.status("POST", "agents", body={"name": "Claude Code"})
    assert status == 201
    assert set(created) == AGENT_FIELDS | {"token"}
    assert created["name"] == "Claude Code"
    assert created["token"].startswith("jtt_")
    assert created["control_until"] is None
    assert created["request"] is None
    assert created["shared"] == []
    assert created["kind"] == "mcp"
    expires = datetime.datetime.fromisoformat(created["expires"].replace("Z", "+00:00"))
    made = datetime.datetime.fromisoformat(created["created"].replace("Z", "+00:00"))
    assert (expires - made).total_seconds() == 604800

    listed = await alice.call("GET", "agents")
    assert [agent["id"] for agent in listed] == [created["id"]]
    assert "token" not in listed[0]
    assert set(listed[0]) == AGENT_FIELDS
    shown = await alice.call("GET", "agents", created["id"])
    assert shown == listed[0]

    status, _ = await alice.status("DELETE", "agents", created["id"])
    assert status == 204
    assert await alice.call("GET", "agents") == []
    status, body = await alice.status("GET", "agents", created["id"])
    assert status == 403
    assert "No such agent" in body["message"]
    actions = [event["action"] for event in agent_audit.events]
    assert actions == ["create", "delete"]
    assert agent_audit.events[0]["agent_name"] == "Claude Code"
    assert agent_audit.events[0]["username"] == "alice"


async def test_the_token_is_not_stored(alice: Api, tool_app: ToolTerminalApp) -> None:
    created = await alice.call("POST", "agents", body={"name": "a"})
    assert tool_app.agents is not None
    path = tool_app.agents.store.path
    assert path is not None
    text = Path(path).read_text(encoding="utf-8")  # noqa: ASYNC240 - a small file
    secret = created["token"].rsplit("_", 1)[-1]
    assert secret not in text
    assert created["id"] in text
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"[]",
        b"not json",
        json.dumps({"name": 5}).encode(),
        json.dumps({"name": ""}).encode(),
        json.dumps({"name": "x" * 65}).encode(),
        json.dumps({"name": "two\nlines"}).encode(),
    ],
)
async def test_create_refuses_bad_bodies(alice: Api, body: bytes) -> None:
    status, answer = await alice.status("POST", "agents", body=body)
    assert status == 400
    assert answer["message"]
    assert await alice.call("GET", "agents") == []


@pytest.mark.parametrize("extension_config", [{"max_agents_per_user": 2}])
async def test_agents_per_user_are_capped(alice: Api, bob: Api) -> None:
    for name in ("one", "two"):
        await alice.call("POST", "agents", body={"name": name})
    status, body = await alice.status("POST", "agents", body={"name": "three"})
    assert status == 429
    assert "2 agents" in body["message"]
    # Another user's agents are counted apart.
    status, _ = await bob.status("POST", "agents", body={"name": "bob's"})
    assert status == 201


async def test_another_users_agent_is_403(alice: Api, bob: Api) -> None:
    created = await alice.call("POST", "agents", body={"name": "alice's"})
    agent_id = created["id"]
    assert await bob.call("GET", "agents") == []
    for method, path, body in [
        ("GET", ("agents", agent_id), None),
        ("DELETE", ("agents", agent_id), None),
        ("POST", ("agents", agent_id, "control"), {"minutes": 5}),
        ("DELETE", ("agents", agent_id, "control"), None),
        ("GET", ("agents", agent_id, "shared"), None),
        ("POST", ("agents", agent_id, "shared"), {"session": "x" * 32}),
        ("DELETE", ("agents", agent_id, "shared", "x" * 32), None),
    ]:
        status, answer = await bob.status(method, *path, body=body)
        assert status == 403, (method, path)
        assert "No such agent" in answer["message"]
    # Alice's agent is untouched.
    assert (await alice.call("GET", "agents", agent_id))["control_until"] is None


async def test_unknown_and_malformed_agent_ids_are_403(alice: Api) -> None:
    for agent_id in ("nosuchagent1", "x", "%2E%2E"):
        status, _ = await alice.status("GET", "agents", agent_id)
        assert status == 403


async def test_grant_and_end_control(
    alice: Api, tool_app: ToolTerminalApp, agent_audit: AgentEvents
) -> None:
    created = await alice.call("POST", "agents", body={"name": "a"})
    agent_id = created["id"]
    granted = await alice.call("POST", "agents", agent_id, "control", body={"minutes": 5})
    until = datetime.datetime.fromisoformat(granted["control_until"].replace("Z", "+00:00"))
    left = (until - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    assert 4 * 60 < left <= 5 * 60
    assert (await alice.call("GET", "agents", agent_id))["control_until"] == granted[
        "control_until"
    ]
    status, _ = await alice.status("DELETE", "agents", agent_id, "control")
    assert status == 204
    assert (await alice.call("GET", "agents", agent_id))["control_until"] is None
    # Default 10 minutes (an empty body), and at most agent_control_max_minutes (60).
    granted = await alice.call("POST", "agents", agent_id, "control")
    until = datetime.datetime.fromisoformat(granted["control_until"].replace("Z", "+00:00"))
    left = (until - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    assert 9 * 60 < left <= 10 * 60
    granted = await alice.call("POST", "agents", agent_id, "control", body={"minutes": 1000})
    until = datetime.datetime.fromisoformat(granted["control_until"].replace("Z", "+00:00"))
    left = (until - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    assert 59 * 60 < left <= 60 * 60
    grants = [e for e in agent_audit.events if e["action"] == "grant"]
    assert [e["minutes"] for e in grants] == [5, 10, 60]


@pytest.mark.parametrize(
    "body", [{"minutes": 0}, {"minutes": -3}, {"minutes": "5"}, {"minutes": True}, [5], "x"]
)
async def test_grant_refuses_bad_minutes(alice: Api, body: t.Any) -> None:
    created = await alice.call("POST", "agents", body={"name": "a"})
    payload = body if isinstance(body, str) else json.dumps(body)
    status, answer = await alice.status("POST", "agents", created["id"], "control", body=payload)
    assert status == 400
    assert answer["message"]
    assert (await alice.call("GET", "agents", created["id"]))["control_until"] is None


async def test_control_ends_by_itself(alice: Api, tool_app: ToolTerminalApp) -> None:
    created = await alice.call("POST", "agents", body={"name": "a"})
    await alice.call("POST", "agents", created["id"], "control", body={"minutes": 1})
    assert tool_app.agents is not None
    agent = tool_app.agents.store.agents[created["id"]]
    assert agent.has_control()
    # The grant's minute passes.
    assert agent.control_until is not None
    agent.control_until -= datetime.timedelta(minutes=1)
    assert not agent.has_control()
    assert (await alice.call("GET", "agents", created["id"]))["control_until"] is None


async def test_a_grant_or_deny_clears_the_request(alice: Api, tool_app: ToolTerminalApp) -> None:
    created = await alice.call("POST", "agents", body={"name": "a"})
    assert tool_app.agents is not None
    store = tool_app.agents.store
    agent = store.agents[created["id"]]
    store.request_control(agent, "run the tests", 15)
    shown = await alice.call("GET", "agents", created["id"])
    assert shown["request"]["reason"] == "run the tests"
    assert shown["request"]["minutes"] == 15
    assert shown["request"]["created"].endswith("Z")
    # Deny.
    await alice.status("DELETE", "agents", created["id"], "control")
    assert (await alice.call("GET", "agents", created["id"]))["request"] is None
    # Grant.
    store.request_control(agent, "again", None)
    assert (await alice.call("GET", "agents", created["id"]))["request"]["minutes"] == 10
    granted = await alice.call("POST", "agents", created["id"], "control", body={"minutes": 3})
    assert granted["request"] is None
    assert granted["control_until"] is not None


async def test_share_and_unshare(
    alice: Api, bob: Api, make_instance: InstanceFactory, agent_audit: AgentEvents
) -> None:
    created = await alice.call("POST", "agents", body={"name": "a"})
    agent_id = created["id"]
    make_instance(owner="alice", name="jtt-agent-share-a")
    session = await alice.open_session("jtt-agent-share-a")
    status, shared = await alice.status(
        "POST", "agents", agent_id, "shared", body={"session": session["id"]}
    )
    assert status == 201
    assert shared["shared"] == [session["id"]]
    assert await alice.call("GET", "agents", agent_id, "shared") == [session["id"]]
    # Twice: refused.
    status, _ = await alice.status(
        "POST", "agents", agent_id, "shared", body={"session": session["id"]}
    )
    assert status == 400
    status, _ = await alice.status("DELETE", "agents", agent_id, "shared", session["id"])
    assert status == 204
    assert await alice.call("GET", "agents", agent_id, "shared") == []
    status, _ = await alice.status("DELETE", "agents", agent_id, "shared", session["id"])
    assert status == 404
    actions = [event["action"] for event in agent_audit.events]
    assert actions == ["create", "share", "unshare"]


async def test_only_the_owners_sessions_can_be_shared(
    alice: Api, bob: Api, make_instance: InstanceFactory
) -> None:
    created = await alice.call("POST", "agents", body={"name": "a"})
    make_instance(owner="bob", name="jtt-agent-share-b")
    bobs = await bob.open_session("jtt-agent-share-b")
    for session in (bobs["id"], "y" * 32, "short"):
        status, _ = await alice.status(
            "POST", "agents", created["id"], "shared", body={"session": session}
        )
        assert status == 403
    status, _ = await alice.status("POST", "agents", created["id"], "shared", body={"x": 1})
    assert status == 400
    assert await alice.call("GET", "agents", created["id"], "shared") == []


async def test_a_shared_session_that_ends_is_unshared(
    alice: Api, make_instance: InstanceFactory
) -> None:
    created = await alice.call("POST", "agents", body={"name": "a"})
    make_instance(owner="alice", name="jtt-agent-share-end")
    session = await alice.open_session("jtt-agent-share-end")
    await alice.call("POST", "agents", created["id"], "shared", body={"session": session["id"]})
    await alice.status("DELETE", "sessions", session["id"])
    assert (await alice.call("GET", "agents", created["id"]))["shared"] == []


@pytest.mark.parametrize("extension_config", [{"agents_enabled": False}])
async def test_agents_off(alice: Api, jp_http_port: int, jp_base_url: str) -> None:
    for method, path in [("GET", ("agents",)), ("POST", ("agents",))]:
        status, body = await alice.status(
            method, *path, body={"name": "a"} if method == "POST" else None
        )
        assert status == 404
        assert "agents_enabled" in body["message"]
    assert await mcp_status(jp_http_port, jp_base_url, {}) == 403


async def test_an_expired_agent_is_gone(
    alice: Api, tool_app: ToolTerminalApp, jp_http_port: int, jp_base_url: str
) -> None:
    created = await alice.call("POST", "agents", body={"name": "a"})
    bearer = {"Authorization": f"Bearer {created['token']}"}
    assert await mcp_status(jp_http_port, jp_base_url, bearer) == 200
    assert tool_app.agents is not None
    agent = tool_app.agents.store.agents[created["id"]]
    agent.expires = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=1)
    assert await mcp_status(jp_http_port, jp_base_url, bearer) == 401
    assert await alice.call("GET", "agents") == []
    status, _ = await alice.status("GET", "agents", created["id"])
    assert status == 403


async def test_agents_survive_a_restart(tmp_path: t.Any) -> None:
    path = str(tmp_path / "agents" / "agents.json")
    log = logging.getLogger("test")

    def store() -> AgentStore:
        return AgentStore(
            path=path,
            token_lifetime=3600,
            max_agents_per_user=8,
            control_max_minutes=60,
            log=log,
        )

    first = store()
    agent, token = first.create("alice", "alice", "persisted")
    first.grant(agent, 5)
    first.request_control(agent, "why", 7)
    other, other_token = first.create("bob", "bob", "revoked")
    first.delete(other)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600

    second = store()
    again = second.authenticate(token)
    assert again is not None
    assert again.model() == agent.model()
    assert second.authenticate(other_token) is None
    assert second.authenticate(token + "x") is None
    assert second.authenticate("jtt_" + agent.id + "_") is None
    assert second.authenticate("not a token") is None


async def test_an_unreadable_agents_file_is_kept(tmp_path: t.Any) -> None:
    path = tmp_path / "agents.json"
    path.write_text("{not json")
    store = AgentStore(
        path=str(path),
        token_lifetime=3600,
        max_agents_per_user=8,
        control_max_minutes=60,
        log=logging.getLogger("test"),
    )
    store.create("alice", "alice", "in memory")
    assert path.read_text() == "{not json"


async def test_revoking_ends_the_agents_terminals(
    alice: Api, tool_app: ToolTerminalApp, make_instance: InstanceFactory
) -> None:
    created = await alice.call("POST", "agents", body={"name": "a"})
    make_instance(owner="alice", name="jtt-agent-revoke")
    manager = tool_app.session_manager
    assert manager is not None
    session = await manager.create_session(
        "alice", "jtt-agent-revoke", "alice", agent={"id": created["id"], "name": "a"}
    )
    own = await alice.open_session("jtt-agent-revoke")
    listed = await alice.call("GET", "sessions")
    by_id = {model["id"]: model for model in listed}
    assert by_id[session.id]["agent"] == {"id": created["id"], "name": "a"}
    assert "agent" not in by_id[own["id"]]
    await alice.status("DELETE", "agents", created["id"])
    assert session.ended

    async def gone() -> bool:
        return session.id not in {m["id"] for m in await alice.call("GET", "sessions")}

    await wait_until(gone)
    # The owner's own session is untouched.
    assert own["id"] in {m["id"] for m in await alice.call("GET", "sessions")}


async def test_an_agent_token_is_refused_everywhere_else(
    alice: Api, jp_http_port: int, jp_base_url: str, make_instance: InstanceFactory
) -> None:
    created = await alice.call("POST", "agents", body={"name": "a"})
    make_instance(owner="alice", name="jtt-agent-token-else")
    session = await alice.open_session("jtt-agent-token-else")
    client = AsyncHTTPClient()
    base = f"http://127.0.0.1:{jp_http_port}{jp_base_url}"
    for scheme in ("Bearer", "token"):
        headers = {"Authorization": f"{scheme} {created['token']}"}
        for method, path in [
            ("GET", "tool-terminal/api/instances"),
            ("GET", "tool-terminal/api/sessions"),
            ("POST", "tool-terminal/api/sessions"),
            ("GET", "tool-terminal/api/agents"),
            ("POST", "tool-terminal/api/agents"),
            ("DELETE", f"tool-terminal/api/agents/{created['id']}"),
            ("POST", f"tool-terminal/api/agents/{created['id']}/control"),
            ("GET", "api/kernels"),
            ("POST", "api/kernels"),
            ("GET", "api/contents"),
            ("GET", "api/sessions"),
        ]:
            try:
                response = await client.fetch(
                    base + path,
                    method=method,
                    headers=headers,
                    body=b"{}" if method == "POST" else None,
                    follow_redirects=False,
                )
                code = response.code
            except HTTPClientError as error:
                code = error.code
            assert code in (401, 403), (scheme, method, path, code)
        url = f"ws://127.0.0.1:{jp_http_port}{jp_base_url}tool-terminal/websocket/{session['id']}"
        with pytest.raises(HTTPClientError) as refused:
            await websocket_connect(HTTPRequest(url, headers=headers))
        assert refused.value.code in (401, 403)
    # The agent still exists and has no control: nothing was done with its token.
    shown = await alice.call("GET", "agents", created["id"])
    assert shown["control_until"] is None


async def test_a_jupyter_token_is_refused_at_the_mcp_endpoint(
    alice: Api, jp_http_port: int, jp_base_url: str
) -> None:
    for header in (
        ALICE,
        {"Authorization": "Bearer alice-secret-token"},
        {},
        {"Authorization": "Bearer jtt_nosuchagent_secret"},
    ):
        assert await mcp_status(jp_http_port, jp_base_url, header) == 401, header
