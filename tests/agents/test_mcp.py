"""The MCP endpoint end to end, with the official Python SDK client, a real server and engine."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import typing as t

import pytest

from jupyter_tool_terminal.agents.audit import AGENT_SCHEMA_ID
from jupyter_tool_terminal.agents.endpoint import MAX_BODY
from jupyter_tool_terminal.agents.tools import MAX_INPUT
from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.metrics import AGENT_CALLS, AGENT_CONTROL_GRANTS

from ..conftest import Api, InstanceFactory, container_processes, wait_until
from ..support.mcp_client import (
    MODERN_ERA,
    connect,
    mcp_url,
    new_agent,
    raw_post,
    refused_over_http,
)

TOOL_NAMES = {
    "list_instances",
    "list_terminals",
    "open_terminal",
    "run_command",
    "send_keys",
    "read_screen",
    "close_terminal",
    "request_control",
}


class AgentEvents(logging.Handler):
    """Collects the agent audit events."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[dict[str, t.Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.msg, dict) and record.msg.get("__schema__") == AGENT_SCHEMA_ID:
            self.events.append(record.msg)

    def calls(self) -> list[dict[str, t.Any]]:
        return [event for event in self.events if event["action"] == "call"]


@pytest.fixture
def agent_audit(jp_serverapp: t.Any) -> AgentEvents:
    collect = AgentEvents()
    jp_serverapp.event_logger.register_handler(collect)
    return collect


@pytest.fixture
def url(jp_http_port: int, jp_base_url: str, alice: Api) -> str:
    """The MCP endpoint (``alice``: the server listens once a fetch fixture is in use)."""
    return mcp_url(jp_http_port, jp_base_url)


def text_of(result: t.Any) -> str:
    return "\n".join(part.text for part in result.content if part.type == "text")


def calls_counted(tool: str, result: str) -> float:
    return float(AGENT_CALLS.labels(tool, result)._value.get())


@pytest.mark.parametrize(
    ("mode", "version"),
    [
        ("legacy", "2025-11-25"),
        pytest.param(
            "auto",
            "2026-07-28",
            marks=pytest.mark.skipif(not MODERN_ERA, reason="mcp 1.x has no 2026 protocol era"),
        ),
    ],
)
async def test_tools_are_listed_with_schemas(url: str, alice: Api, mode: str, version: str) -> None:
    agent = await new_agent(alice)
    async with connect(url, agent.token, mode=t.cast(t.Any, mode)) as client:
        assert client.session.protocol_version == version
        tools = (await client.list_tools()).tools
    assert {tool.name for tool in tools} == TOOL_NAMES
    for tool in tools:
        assert tool.description
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None
        assert tool.output_schema["type"] == "object"
    by_name = {tool.name: tool for tool in tools}
    assert by_name["run_command"].input_schema["required"] == ["session", "command"]
    output_schema = by_name["run_command"].output_schema
    assert output_schema is not None
    assert set(output_schema["properties"]) == {
        "exit_code",
        "output",
        "truncated",
        "timed_out",
    }
    read_screen, run_command = (
        by_name["read_screen"].annotations,
        by_name["run_command"].annotations,
    )
    assert read_screen is not None
    assert run_command is not None
    assert read_screen.read_only_hint is True
    assert run_command.destructive_hint is True


async def test_the_whole_flow(
    url: str,
    alice: Api,
    make_instance: InstanceFactory,
    tool_app: ToolTerminalApp,
    agent_audit: AgentEvents,
) -> None:
    make_instance(owner="alice", name="jtt-mcp-flow")
    agent = await new_agent(alice, "Claude Code")
    grants_before = AGENT_CONTROL_GRANTS._value.get()
    async with connect(url, agent.token) as client:
        # Read-only at first: listing works, opening a terminal is refused for lack of control.
        listed = await client.call_tool("list_instances", {})
        assert not listed.is_error
        instance = next(
            i for i in listed.structured_content["instances"] if i["id"] == "jtt-mcp-flow"
        )
        assert instance == {
            "id": "jtt-mcp-flow",
            "tool": "sandbox",
            "display_name": "Sandbox",
            "status": "running",
            "runtime": "docker",
        }
        assert (await client.call_tool("list_terminals", {})).structured_content == {
            "terminals": []
        }
        refused = await client.call_tool("open_terminal", {"instance": "jtt-mcp-flow"})
        assert refused.is_error
        assert "request_control" in text_of(refused)
        assert not [s for s in await alice.call("GET", "sessions") if "agent" in s]

        # The agent asks; the owner sees the request and grants it over REST.
        asked = await client.call_tool(
            "request_control", {"reason": "run the test suite", "minutes": 15}
        )
        assert asked.structured_content == {"status": "pending", "control_until": None}
        shown = await alice.call("GET", "agents", agent.id)
        assert shown["request"]["reason"] == "run the test suite"
        assert shown["request"]["minutes"] == 15
        granted = await alice.call(
            "POST", "agents", agent.id, "control", body={"minutes": shown["request"]["minutes"]}
        )
        assert granted["request"] is None
        assert AGENT_CONTROL_GRANTS._value.get() == grants_before + 1
        asked = await client.call_tool("request_control", {"reason": "again"})
        assert asked.structured_content == {
            "status": "granted",
            "control_until": granted["control_until"],
        }

        # With control: a terminal of its own, commands with exit codes and output.
        opened = await client.call_tool("open_terminal", {"instance": "jtt-mcp-flow"})
        assert not opened.is_error, text_of(opened)
        session = opened.structured_content["session"]
        ran = await client.call_tool(
            "run_command",
            {"session": session, "command": "echo hello; exit_code() { return 3; }; exit_code"},
        )
        assert ran.structured_content == {
            "exit_code": 3,
            "output": "hello\n",
            "truncated": False,
            "timed_out": False,
        }
        assert "hello" in text_of(ran)
        # The shell's state carries over; the secret variable's value is redacted.
        await client.call_tool(
            "run_command",
            {"session": session, "command": "cd /tmp && export API_TOKEN=s3cr3t-value-123"},
        )
        ran = await client.call_tool(
            "run_command", {"session": session, "command": "pwd; echo $TOOL_GREETING"}
        )
        assert ran.structured_content["output"] == "/tmp\nhi\n"

        terminals = (await client.call_tool("list_terminals", {})).structured_content
        assert terminals["terminals"] == [
            {
                "session": session,
                "instance": "jtt-mcp-flow",
                "tool": "sandbox",
                "created": terminals["terminals"][0]["created"],
                "mine": True,
            }
        ]
        # The owner's sessions list names the agent.
        listed_sessions = {s["id"]: s for s in await alice.call("GET", "sessions")}
        assert listed_sessions[session]["agent"] == {"id": agent.id, "name": "Claude Code"}

        # send_keys types; read_screen shows it.
        sent = await client.call_tool(
            "send_keys", {"session": session, "keys": "echo typed-by-keys\r"}
        )
        assert sent.structured_content == {}

        async def typed() -> bool:
            screen = await client.call_tool("read_screen", {"session": session})
            return (
                "typed-by-keys" in screen.structured_content["text"].split("echo typed-by-keys")[-1]
            )

        await wait_until(typed)
        screen = (await client.call_tool("read_screen", {"session": session})).structured_content
        assert screen["rows"] == 24
        assert screen["cols"] == 80
        assert len(screen["cursor"]) == 2

        # The owner ends control: the next command is refused, the terminal stays open.
        await agent.end_control()
        refused = await client.call_tool("run_command", {"session": session, "command": "true"})
        assert refused.is_error
        assert "control" in text_of(refused)
        assert session in {s["id"] for s in await alice.call("GET", "sessions")}
        assert not (await client.call_tool("read_screen", {"session": session})).is_error

        await agent.grant()
        closed = await client.call_tool("close_terminal", {"session": session})
        assert closed.structured_content == {}
        assert session not in {s["id"] for s in await alice.call("GET", "sessions")}

    calls = agent_audit.calls()
    assert all(event["agent_id"] == agent.id for event in calls)
    assert all(event["agent_name"] == "Claude Code" for event in calls)
    assert all(event["owner"] == "alice" for event in calls)
    refused_open = next(e for e in calls if e["tool"] == "open_terminal")
    assert refused_open["allowed"] is False
    assert refused_open["reason"] == "no_control"
    commands = [e["command"] for e in calls if e["tool"] == "run_command" and e["allowed"]]
    assert "cd /tmp && export API_TOKEN=[REDACTED]" in commands
    assert not any("s3cr3t-value-123" in json.dumps(event) for event in agent_audit.events)
    # Never output.
    assert not any(
        "hello" in json.dumps(event) for event in calls if event["tool"] != "run_command"
    )
    assert all(e.get("command") != "hello\n" for e in calls)
    assert {e["action"] for e in agent_audit.events} >= {
        "create",
        "request",
        "grant",
        "end_control",
    }


async def test_a_person_typing_makes_agents_wait_their_turn(
    url: str, alice: Api, make_instance: InstanceFactory, tool_app: ToolTerminalApp
) -> None:
    """People come first: a keystroke in a terminal of the owner's own holds agents' next
    requests for a while (they go in at the pacer's rate for people); her keystrokes in the
    agent's terminal, taking it over, do not."""
    make_instance(owner="alice", name="jtt-mcp-typing")
    agents, manager = tool_app.agents, tool_app.session_manager
    assert agents is not None
    assert manager is not None
    # (only a person's typing holds requests here, however late the test machine's loop is)
    agents.pacer.lag_limit = 1.0
    typed: list[None] = []
    manager.typing_listeners.append(lambda: typed.append(None))
    agent = await new_agent(alice, "Typist's agent", control=True)
    async with connect(url, agent.token) as client:
        opened = await client.call_tool("open_terminal", {"instance": "jtt-mcp-typing"})
        session = opened.structured_content["session"]
        taking_over = await alice.connect(session)
        taking_over.send("stdin", "echo taking-over\r")
        await taking_over.expect("taking-over")
        assert typed == []
        held = agents.pacer.held
        assert not (await client.call_tool("list_terminals", {})).is_error
        assert agents.pacer.held == held

        _, own = await alice.terminal("jtt-mcp-typing")
        own.send("stdin", "echo her-own\r")
        await own.expect("her-own")
        assert typed
        started = time.perf_counter()
        assert not (await client.call_tool("list_terminals", {})).is_error
        assert agents.pacer.held == held + 1
        assert time.perf_counter() - started >= agents.pacer.person_floor_interval * 0.9
        taking_over.ws.close()
        own.ws.close()


async def test_a_call_needing_control_is_refused_first(url: str, alice: Api) -> None:
    agent = await new_agent(alice)
    async with connect(url, agent.token) as client:
        calls: list[tuple[str, dict[str, t.Any]]] = [
            ("open_terminal", {}),
            ("run_command", {"session": 5, "command": ["x"]}),
            ("send_keys", {"session": "nosuch", "keys": "x" * (MAX_INPUT + 1)}),
            ("close_terminal", {"bogus": 1}),
        ]
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            assert result.is_error
            assert "needs control" in text_of(result), name


async def test_bad_arguments_are_tool_errors(
    url: str, alice: Api, make_instance: InstanceFactory
) -> None:
    make_instance(owner="alice", name="jtt-mcp-args")
    agent = await new_agent(alice, control=True)
    async with connect(url, agent.token) as client:
        session = (
            await client.call_tool("open_terminal", {"instance": "jtt-mcp-args"})
        ).structured_content["session"]
        for name, arguments, says in [
            ("no_such_tool", {}, "There is no tool"),
            ("run_command", {"session": session}, "needs the argument 'command'"),
            ("run_command", {"session": session, "command": 5}, "must be a string"),
            ("run_command", {"session": session, "command": "true", "timeout": "5"}, "number"),
            ("run_command", {"session": session, "command": "true", "timeout": 601}, "at most"),
            ("run_command", {"session": session, "command": "true", "timeout": 0}, "more than 0"),
            ("run_command", {"session": session, "command": "true", "x": 1}, "no argument 'x'"),
            ("send_keys", {"session": session, "keys": None}, "must be a string"),
            ("request_control", {"reason": ["x"]}, "must be a string"),
            ("request_control", {"reason": "x", "minutes": 0}, "minutes"),
            ("open_terminal", {"instance": 7}, "must be a string"),
            (
                "run_command",
                {"session": session, "command": "echo " + "x" * MAX_INPUT},
                f"at most {MAX_INPUT}",
            ),
            ("send_keys", {"session": session, "keys": "x" * (MAX_INPUT + 1)}, "Nothing was typed"),
        ]:
            result = await client.call_tool(name, arguments)
            assert result.is_error, (name, arguments)
            assert says in text_of(result), (name, text_of(result))
            assert "Traceback" not in text_of(result)
        # Nothing was typed: the terminal still answers at once.
        ran = await client.call_tool("run_command", {"session": session, "command": "echo ok"})
        assert ran.structured_content["output"] == "ok\n"


async def test_a_10_mb_command_is_a_protocol_error(
    url: str, alice: Api, make_instance: InstanceFactory
) -> None:
    agent = await new_agent(alice, control=True)
    status, body, _ = await raw_post(
        url,
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {
                    "name": "run_command",
                    "arguments": {"session": "x", "command": "y" * 10_000_000},
                },
            }
        ),
        agent.headers,
    )
    assert status == 413
    assert body is not None
    assert str(MAX_BODY) in body["error"]["message"]
    # And through the SDK: the call fails with an error, the connection still works (mcp 1.x's
    # client ends its connection on the refusal instead).
    if not MODERN_ERA:
        with refused_over_http(413):
            async with connect(url, agent.token) as client:
                await client.call_tool("run_command", {"session": "x", "command": "y" * 10_000_000})
        return
    async with connect(url, agent.token) as client:
        with refused_over_http(413):
            await client.call_tool("run_command", {"session": "x", "command": "y" * 10_000_000})
        assert not (await client.call_tool("list_terminals", {})).is_error


async def test_sessions_that_are_not_its_own(
    url: str, alice: Api, bob: Api, make_instance: InstanceFactory
) -> None:
    make_instance(owner="alice", name="jtt-mcp-alices")
    make_instance(owner="bob", name="jtt-mcp-bobs")
    agent = await new_agent(alice, control=True)
    owners = await alice.open_session("jtt-mcp-alices")
    bobs = await bob.open_session("jtt-mcp-bobs")
    bobs_agent = await new_agent(bob, control=True)
    async with connect(url, agent.token) as client:
        # Another user's instance, session; the owner's own unshared session; unknown ids.
        result = await client.call_tool("open_terminal", {"instance": "jtt-mcp-bobs"})
        assert result.is_error
        assert "No such tool instance" in text_of(result)
        for session in (bobs["id"], "z" * 32, "short", owners["id"]):
            for name, arguments in [
                ("run_command", {"session": session, "command": "touch /tmp/typed"}),
                ("send_keys", {"session": session, "keys": "touch /tmp/typed\r"}),
                ("read_screen", {"session": session}),
                ("close_terminal", {"session": session}),
            ]:
                result = await client.call_tool(name, arguments)
                assert result.is_error, (name, session)
                assert "No such terminal" in text_of(result) or "not one you opened" in text_of(
                    result
                )
        # Shared with it: readable, never typed into.
        await alice.call("POST", "agents", agent.id, "shared", body={"session": owners["id"]})
        screen = await client.call_tool("read_screen", {"session": owners["id"]})
        assert not screen.is_error
        assert set(screen.structured_content) == {"text", "rows", "cols", "cursor"}
        listed = (await client.call_tool("list_terminals", {})).structured_content["terminals"]
        assert [(t["session"], t["mine"]) for t in listed] == [(owners["id"], False)]
        for name, arguments in [
            ("run_command", {"session": owners["id"], "command": "touch /tmp/typed"}),
            ("send_keys", {"session": owners["id"], "keys": "touch /tmp/typed\r"}),
            ("close_terminal", {"session": owners["id"]}),
        ]:
            result = await client.call_tool(name, arguments)
            assert result.is_error
            assert "not one you opened" in text_of(result)
    # Bob's agent cannot see alice's terminals even when alice shared it with her own agent.
    async with connect(url, bobs_agent.token) as client:
        result = await client.call_tool("read_screen", {"session": owners["id"]})
        assert result.is_error
        instances = (await client.call_tool("list_instances", {})).structured_content["instances"]
        assert "jtt-mcp-alices" not in {i["id"] for i in instances}
    # Nothing was typed anywhere.
    assert owners["id"] in {s["id"] for s in await alice.call("GET", "sessions")}
    assert bobs["id"] in {s["id"] for s in await bob.call("GET", "sessions")}


async def test_a_revoked_or_expired_token_cannot_connect(
    url: str, alice: Api, make_instance: InstanceFactory, tool_app: ToolTerminalApp
) -> None:
    make_instance(owner="alice", name="jtt-mcp-revoke")
    agent = await new_agent(alice, control=True)
    session = ""
    # The very next call of the connected client is refused.
    with refused_over_http(401):
        async with connect(url, agent.token) as client:
            session = (
                await client.call_tool("open_terminal", {"instance": "jtt-mcp-revoke"})
            ).structured_content["session"]
            await alice.status("DELETE", "agents", agent.id)
            await client.call_tool("list_terminals", {})
    assert session
    assert session not in {s["id"] for s in await alice.call("GET", "sessions")}
    with pytest.raises(Exception):  # noqa: B017 - the SDK raises its transport's error
        async with connect(url, agent.token) as client:
            await client.list_tools()
    status, body, headers = await raw_post(
        url, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}), agent.headers
    )
    assert status == 401
    assert body is not None
    assert "agent token" in body["error"]["message"]
    assert headers["Www-Authenticate"].startswith("Bearer")


async def test_origin_is_checked(url: str, alice: Api, jp_http_port: int) -> None:
    agent = await new_agent(alice)
    message = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    for origin, allowed in [
        (None, True),
        (f"http://127.0.0.1:{jp_http_port}", True),
        ("http://evil.example", False),
        (f"http://127.0.0.1:{jp_http_port + 1}", False),
        ("null", False),
    ]:
        headers = dict(agent.headers)
        if origin is not None:
            headers["Origin"] = origin
        status, body, _ = await raw_post(url, message, headers)
        assert (status == 200) is allowed, (origin, status, body)
        if not allowed:
            assert status == 403
            assert body is not None
            assert "origin" in body["error"]["message"]


async def test_malformed_json_rpc_gets_protocol_errors(url: str, alice: Api) -> None:
    agent = await new_agent(alice)
    for body in [
        b"not json",
        b"[1, 2",
        json.dumps({"jsonrpc": "2.0", "id": 1}).encode(),
        json.dumps({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}).encode(),
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "x"}).encode(),
    ]:
        status, answer, _ = await raw_post(url, body, agent.headers)
        assert 400 <= status < 500 or (answer is not None and "error" in answer), (body, status)
        assert answer is not None
        assert "error" in answer, (body, answer)
        assert "Traceback" not in json.dumps(answer)
    status, answer, _ = await raw_post(
        url, json.dumps({"jsonrpc": "2.0", "id": 7, "method": "no/such/method"}), agent.headers
    )
    assert answer is not None
    # Method not found (mcp 1.x's server answers it as invalid params).
    assert answer["error"]["code"] in ((-32601,) if MODERN_ERA else (-32601, -32602))
    # GET (the server-to-client stream) and DELETE: not offered by this stateless server.
    for method in ("GET", "DELETE"):
        status, _, _ = await raw_post(url, b"", agent.headers, method=method)
        assert status == 405, method


async def test_a_flood_of_calls_is_bounded(
    url: str, alice: Api, make_instance: InstanceFactory, tool_app: ToolTerminalApp
) -> None:
    make_instance(owner="alice", name="jtt-mcp-flood")
    agent = await new_agent(alice, control=True)
    assert tool_app.agents is not None
    tools = tool_app.agents.tools
    async with connect(url, agent.token) as client:
        session = (
            await client.call_tool("open_terminal", {"instance": "jtt-mcp-flood"})
        ).structured_content["session"]
        # Many commands at once into one terminal: one runs, the others are refused at once.
        results = await asyncio.gather(
            *(
                client.call_tool("run_command", {"session": session, "command": "sleep 0.3"})
                for _ in range(30)
            )
        )
        refusals = [r for r in results if r.is_error]
        assert len(results) - len(refusals) >= 1
        assert all(
            "calls running" in text_of(r) or "Another command" in text_of(r) for r in refusals
        )
        ran = await client.call_tool("run_command", {"session": session, "command": "echo after"})
        assert ran.structured_content["output"] == "after\n"

        # Terminals per agent are capped.
        sessions = [session]
        for _ in range(tool_app.max_terminals_per_agent - 1):
            opened = await client.call_tool("open_terminal", {"instance": "jtt-mcp-flood"})
            sessions.append(opened.structured_content["session"])
        opened = await client.call_tool("open_terminal", {"instance": "jtt-mcp-flood"})
        assert opened.is_error
        assert "terminals open" in text_of(opened)

        # Calls in flight per agent are capped: one more while all run is refused.
        refused_before = calls_counted("list_terminals", "refused")
        running = [
            asyncio.ensure_future(
                client.call_tool("run_command", {"session": s, "command": "sleep 2"})
            )
            for s in sessions
        ]

        async def all_running() -> bool:
            return tools._in_flight[agent.id] == tool_app.max_agent_calls_in_flight

        await wait_until(all_running)
        refused = await client.call_tool("list_terminals", {})
        assert refused.is_error
        assert "calls running" in text_of(refused)
        assert calls_counted("list_terminals", "refused") == refused_before + 1
        for result in await asyncio.gather(*running):
            assert result.structured_content["exit_code"] == 0
        assert not (await client.call_tool("list_terminals", {})).is_error


async def test_a_command_that_does_not_end_times_out_and_ctrl_c_recovers(
    url: str, alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance(owner="alice", name="jtt-mcp-timeout")
    agent = await new_agent(alice, control=True)
    async with connect(url, agent.token) as client:
        session = (
            await client.call_tool("open_terminal", {"instance": "jtt-mcp-timeout"})
        ).structured_content["session"]
        result = await client.call_tool(
            "run_command", {"session": session, "command": "sleep 1000", "timeout": 0.5}
        )
        assert result.structured_content["timed_out"] is True
        assert result.structured_content["exit_code"] is None
        assert any(
            "sleep 1000" in line for line in await asyncio.to_thread(container_processes, container)
        )
        await client.call_tool("send_keys", {"session": session, "keys": "\x03"})
        ran = await client.call_tool("run_command", {"session": session, "command": "echo back"})
        assert ran.structured_content["output"] == "back\n"
        assert ran.structured_content["exit_code"] == 0


@pytest.mark.parametrize("extension_config", [{"agent_output_limit": 2000}])
async def test_output_is_bounded(url: str, alice: Api, make_instance: InstanceFactory) -> None:
    make_instance(owner="alice", name="jtt-mcp-bounded")
    agent = await new_agent(alice, control=True)
    async with connect(url, agent.token) as client:
        session = (
            await client.call_tool("open_terminal", {"instance": "jtt-mcp-bounded"})
        ).structured_content["session"]
        result = await client.call_tool(
            "run_command", {"session": session, "command": "seq 1 100000", "timeout": 60}
        )
        content = result.structured_content
        assert content["truncated"] is True
        assert content["exit_code"] == 0
        assert len(content["output"]) <= 2000
        assert content["output"].startswith("1\n2\n")
        assert content["output"].endswith("100000\n")
