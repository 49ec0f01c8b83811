"""Jupyter AI's agents in tool terminals, end to end with real parts: jupyter-ai 3.2.0 and
jupyter-ai-acp-client as released, a scripted ACP agent on the official Python SDK registered as
a persona (tests/support/acp-persona, installed by scripts/test-acp.sh), the chat driven through
jupyterlab-chat's WebSocket, the command run in a real container. Skipped where Jupyter AI is not
installed."""

from __future__ import annotations

import asyncio
import json
import os
import typing as t
import uuid

import pytest

pytest.importorskip("jupyter_ai_acp_client")
pytest.importorskip("jtt_acp_persona")

from traitlets.config import Config

from jupyter_tool_terminal.acp.client import _tail

from ..conftest import ALICE, Api, InstanceFactory, wait_until

PERSONA_ID = "jupyter-ai-personas::jtt_acp_persona::ScriptedAcpPersona"
#: Jupyter AI's server extensions (the vendored personas are hidden by the environment variable).
JUPYTER_AI = (
    "jupyterlab_chat",
    "jupyter_ai_router",
    "jupyter_ai_persona_manager",
    "jupyter_ai_acp_client",
)


@pytest.fixture(autouse=True)
def only_the_test_persona(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUPYTER_AI_ACP_CLIENT_E2E_TESTING_ONLY", "1")


@pytest.fixture
def jp_server_config(jp_server_config: Config) -> Config:
    extensions = dict(jp_server_config.ServerApp.jpserver_extensions)
    extensions.update(dict.fromkeys(JUPYTER_AI, True))
    jp_server_config.ServerApp.jpserver_extensions = extensions
    return jp_server_config


class Chat:
    """A chat file driven over jupyterlab-chat's WebSocket as its user."""

    def __init__(self, ws: t.Any) -> None:
        self.ws = ws
        #: Every tool call title the persona's messages showed.
        self.tool_call_titles: list[str] = []

    def send(self, body: str) -> None:
        self.ws.write_message(
            json.dumps(
                {
                    "type": "client",
                    "action": "send",
                    "id": str(uuid.uuid4()),
                    "body": body,
                    "metadata": {"to_persona": PERSONA_ID},
                }
            )
        )

    async def reply(self, *words: str) -> str:
        """The persona's next message holding one of ``words`` (its last update)."""
        while True:
            frame = await self.ws.read_message()
            assert frame is not None, "the chat's WebSocket closed"
            data = json.loads(frame)
            message = data.get("message") or {}
            body = message.get("body") or ""
            for call in (message.get("metadata") or {}).get("tool_calls") or ():
                self.tool_call_titles.append(str(call.get("title")))
            if message.get("sender") == PERSONA_ID and any(word in body for word in words):
                return str(body)


async def open_chat(jp_fetch: t.Any, jp_ws_fetch: t.Any, name: str) -> Chat:
    await jp_fetch(
        "api",
        "contents",
        name,
        method="PUT",
        headers=ALICE,
        body=json.dumps({"type": "file", "format": "text", "content": ""}),
    )
    ws = await jp_ws_fetch("api", "chat", "ws", name, headers=ALICE)
    first = json.loads(await ws.read_message())
    assert first["action"] == "connection"
    return Chat(ws)


async def acp_agent(alice: Api) -> dict[str, t.Any] | None:
    agents = await alice.call("GET", "agents")
    return next((a for a in agents if a.get("kind") == "acp"), None)


async def agent_sessions(alice: Api) -> list[dict[str, t.Any]]:
    return [s for s in await alice.call("GET", "sessions") if s.get("agent")]


async def test_a_persona_runs_its_command_in_the_tool_container_once_the_owner_allows_it(
    alice: Api, make_instance: InstanceFactory, jp_fetch: t.Any, jp_ws_fetch: t.Any
) -> None:
    container = make_instance(owner="alice")
    hostname = container.id[:12]
    chat = await open_chat(jp_fetch, jp_ws_fetch, "acp.chat")
    # The command waits for the test's go, so that the terminal is seen while it runs.
    chat.send(
        "run: while [ ! -e /tmp/go ]; do sleep 0.05; done; touch /tmp/ran; "
        "echo ACP-$((6*7)); hostname"
    )

    # The persona became one of alice's agents and asks her; nothing runs before she allows it.
    async def asked() -> bool:
        agent = await acp_agent(alice)
        return agent is not None and agent["request"] is not None

    await wait_until(asked, timeout=60)
    agent = await acp_agent(alice)
    assert agent is not None
    assert agent["name"] == "ScriptedAgent"
    assert "touch /tmp/ran" in agent["request"]["reason"]
    assert await agent_sessions(alice) == []
    assert await in_container(container, "test", "-e", "/tmp/ran") != 0

    await alice.call("POST", "agents", agent["id"], "control", body={"minutes": 5})

    # While the command runs, its terminal is one of alice's sessions, named for the persona.
    async def listed() -> bool:
        return bool(await agent_sessions(alice))

    await wait_until(listed, timeout=60)
    [session] = await agent_sessions(alice)
    assert session["agent"] == {"id": agent["id"], "name": "ScriptedAgent"}
    assert await in_container(container, "touch", "/tmp/go") == 0

    reply = await chat.reply("SCRIPTED-REPLY", "SCRIPTED-ERROR")
    assert reply.startswith("SCRIPTED-REPLY exit=0"), reply
    assert f"ACP-42 | {hostname}" in reply
    assert f"terminal={session['id']}" in reply
    # The chat pointed to the terminal: first to the approval, then to the terminal itself.
    assert any("waiting for your approval" in title for title in chat.tool_call_titles)
    assert any(f"tool terminal {session['id'][:8]}" in title for title in chat.tool_call_titles)
    assert os.uname().nodename not in reply.split("output:", 1)[1]
    # Released: the terminal ended.
    await wait_until(lambda: _no_agent_sessions(alice), timeout=30)

    # Control ended, a new command, and the owner denies it: the call fails, nothing runs.
    await alice.status("DELETE", "agents", agent["id"], "control")
    chat.send("run: touch /tmp/denied")
    await wait_until(asked, timeout=60)
    await alice.status("DELETE", "agents", agent["id"], "control")
    reply = await chat.reply("SCRIPTED-REPLY", "SCRIPTED-ERROR")
    assert reply.startswith("SCRIPTED-ERROR"), reply
    assert "denied" in reply
    assert await agent_sessions(alice) == []
    assert await in_container(container, "test", "-e", "/tmp/denied") != 0
    chat.ws.close()


async def in_container(container: t.Any, *command: str) -> int:
    """The exit code of ``command`` run in the container (off the event loop)."""
    result = await asyncio.to_thread(container.exec_run, list(command))
    return int(result.exit_code)


async def _no_agent_sessions(alice: Api) -> bool:
    return await agent_sessions(alice) == []


def test_output_is_the_tail_within_the_byte_limit() -> None:
    assert _tail("short", False, 100) == ("short", False)
    # The tools' bounded output (head, a line saying how much was left out, tail): ACP keeps
    # the tail.
    bounded = "HEAD\n[... 900 characters left out ...]\nTAIL-END"
    assert _tail(bounded, True, 100) == ("TAIL-END", True)
    # At most the limit in bytes, whole characters only (no half of a two-byte é).
    output, truncated = _tail("aé" * 10, False, 5)
    assert truncated
    assert len(output.encode()) <= 5
    assert output.endswith("aé")
    assert _tail("abc", False, 0) == ("", True)
