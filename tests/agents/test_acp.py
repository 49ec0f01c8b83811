"""Jupyter AI's agents in tool terminals, end to end with real parts: jupyter-ai 3.2.0 and
jupyter-ai-acp-client as released, a scripted ACP agent on the official Python SDK registered as
a persona (tests/support/acp-persona, installed by scripts/test-acp.sh), the chat driven through
jupyterlab-chat's WebSocket, the command run in a real container. Skipped where Jupyter AI is not
installed."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import typing as t
import uuid

import pytest

pytest.importorskip("jupyter_ai_acp_client")
pytest.importorskip("jtt_acp_persona")

from jtt_acp_persona.persona import InstalledScriptedAcpPersona
from jupyter_ai_acp_client.default_acp_client import JaiAcpClient
from traitlets.config import Config

from jupyter_tool_terminal.acp import ToolTerminalAcpClient
from jupyter_tool_terminal.acp.client import _tail
from jupyter_tool_terminal.acp.personas import give_tool_terminals, tool_terminal_client

from ..conftest import ALICE, Api, InstanceFactory, wait_until

PERSONA_ID = "jupyter-ai-personas::jtt_acp_persona::ScriptedAcpPersona"
#: The same agent with Jupyter AI's own client, as an installed persona (Claude, ...) has it:
#: the server's setting gives it tool terminals.
INSTALLED_PERSONA_ID = "jupyter-ai-personas::jtt_acp_persona::InstalledScriptedAcpPersona"
INSTALLED_ENTRY_POINT = "jtt-scripted-installed"
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
    jp_server_config.JupyterAiAgents.personas = [INSTALLED_ENTRY_POINT]
    return jp_server_config


class Chat:
    """A chat file driven over jupyterlab-chat's WebSocket as its user."""

    def __init__(self, ws: t.Any) -> None:
        self.ws = ws
        #: Every tool call title the persona's messages showed.
        self.tool_call_titles: list[str] = []
        #: The replies taken, by message id and text: a later update of the same message with
        #: the same text (tool-call notes come after the text) is not the next reply.
        self._replied: set[tuple[str, str]] = set()

    def send(self, body: str, persona: str = PERSONA_ID) -> None:
        self.ws.write_message(
            json.dumps(
                {
                    "type": "client",
                    "action": "send",
                    "id": str(uuid.uuid4()),
                    "body": body,
                    "metadata": {"to_persona": persona},
                }
            )
        )

    async def answer(self, body: str, persona: str = PERSONA_ID) -> str:
        """Send ``body``; the persona's reply (``SCRIPTED-REPLY ...`` or ``SCRIPTED-ERROR ...``)."""
        self.send(body, persona)
        return await self.reply("SCRIPTED-REPLY", "SCRIPTED-ERROR", persona=persona)

    async def reply(self, *words: str, persona: str = PERSONA_ID) -> str:
        """The persona's next message holding one of ``words`` (its last update), from the
        first of them on."""
        while True:
            frame = await self.ws.read_message()
            assert frame is not None, "the chat's WebSocket closed"
            data = json.loads(frame)
            message = data.get("message") or {}
            body = message.get("body") or ""
            for call in (message.get("metadata") or {}).get("tool_calls") or ():
                self.tool_call_titles.append(str(call.get("title")))
            if message.get("sender") == persona:
                found = [body.index(word) for word in words if word in body]
                reply = (str(message.get("id")), str(body[min(found) :])) if found else None
                if reply is not None and reply not in self._replied:
                    self._replied.add(reply)
                    return reply[1]


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


async def acp_agent(alice: Api, name: str = "ScriptedAgent") -> dict[str, t.Any] | None:
    agents = await alice.call("GET", "agents")
    return next((a for a in agents if a.get("kind") == "acp" and a["name"] == name), None)


async def answer_once_allowed(chat: Chat, alice: Api, body: str) -> str:
    """Send ``body`` to a persona without control yet: allow it when it asks; its reply."""
    chat.send(body)
    await allow_when_asked(alice)
    return await chat.reply("SCRIPTED-REPLY", "SCRIPTED-ERROR")


async def allow_when_asked(alice: Api, name: str = "ScriptedAgent") -> dict[str, t.Any]:
    """Wait for the persona's request for control and allow it (as the owner in JupyterLab)."""

    async def asked() -> bool:
        agent = await acp_agent(alice, name)
        return agent is not None and agent["request"] is not None

    await wait_until(asked, timeout=60)
    agent = await acp_agent(alice, name)
    assert agent is not None
    await alice.call("POST", "agents", agent["id"], "control", body={"minutes": 5})
    return agent


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


async def test_the_owner_chooses_the_instance_among_several_running(
    alice: Api, bob: Api, make_instance: InstanceFactory, jp_fetch: t.Any, jp_ws_fetch: t.Any
) -> None:
    first, second = make_instance(owner="alice"), make_instance(owner="alice")
    assert await alice.call("GET", "jupyter-ai") == {"instance": None}
    chat = await open_chat(jp_fetch, jp_ws_fetch, "choice.chat")

    # Two running and none chosen: the call fails naming both, and nothing runs.
    reply = await answer_once_allowed(chat, alice, "run: hostname")
    assert reply.startswith("SCRIPTED-ERROR"), reply
    assert first.name in reply
    assert second.name in reply
    assert "Tool Terminals: Jupyter AI" in reply
    assert await agent_sessions(alice) == []

    # JupyterLab sends the owner's setting; the command runs there.
    chosen = await alice.call("PUT", "jupyter-ai", body={"instance": second.name})
    assert chosen == {"instance": second.name}
    assert await alice.call("GET", "jupyter-ai") == {"instance": second.name}
    assert await bob.call("GET", "jupyter-ai") == {"instance": None}
    reply = await chat.answer("run: hostname")
    assert reply.startswith("SCRIPTED-REPLY exit=0"), reply
    assert reply.endswith(f"output: {second.id[:12]}")

    # A chosen instance that is gone: no other one is taken instead.
    await alice.call("PUT", "jupyter-ai", body={"instance": "not-there"})
    reply = await chat.answer("run: hostname")
    assert reply.startswith("SCRIPTED-ERROR"), reply
    assert "not-there, is gone" in reply
    # Bad choices are refused; "" or null removes the choice.
    for bad in ({"instance": 7}, {"instance": "a b"}, {}):
        status, body = await alice.status("PUT", "jupyter-ai", body=bad)
        assert status == 400
        assert "instance" in body["message"]
    assert await alice.call("PUT", "jupyter-ai", body={"instance": ""}) == {"instance": None}
    chat.ws.close()


async def test_output_so_far_while_the_command_runs(
    alice: Api, make_instance: InstanceFactory, jp_fetch: t.Any, jp_ws_fetch: t.Any
) -> None:
    container = make_instance(owner="alice")
    chat = await open_chat(jp_fetch, jp_ws_fetch, "partial.chat")
    chat.send(
        "run: echo FIRST-$((1+1)); while [ ! -e /tmp/go ]; do sleep 0.05; done; echo SECOND\n"
        "poll: FIRST-2"
    )
    await allow_when_asked(alice)
    partial = await chat.reply("SCRIPTED-PARTIAL")
    # What the command printed so far, no exit status yet: not the screen (no typed command,
    # no prompt), not the rest.
    assert partial.startswith("SCRIPTED-PARTIAL exit_status=none truncated=False output: FIRST-2")
    assert "while" not in partial
    assert "SECOND" not in partial
    assert await in_container(container, "touch", "/tmp/go") == 0
    reply = await chat.reply("SCRIPTED-REPLY")
    assert reply.startswith("SCRIPTED-REPLY exit=0 signal=None truncated=False"), reply
    assert reply.endswith("output: FIRST-2 | SECOND")
    chat.ws.close()


async def test_kill_ends_the_command_and_everything_it_started(
    alice: Api, make_instance: InstanceFactory, jp_fetch: t.Any, jp_ws_fetch: t.Any
) -> None:
    container = make_instance(owner="alice")
    chat = await open_chat(jp_fetch, jp_ws_fetch, "kill.chat")
    reply = await answer_once_allowed(
        chat, alice, "run: sleep 1000 & sleep 1001 & echo STARTED; wait\npoll: STARTED\nkill"
    )
    assert reply.startswith("SCRIPTED-REPLY exit=None signal=SIGKILL"), reply
    # Its output stays readable after the kill.
    assert reply.endswith("output: STARTED")

    async def no_sleeps() -> bool:
        result = await asyncio.to_thread(container.exec_run, ["ps"])
        return b"sleep 100" not in result.output

    await wait_until(no_sleeps, timeout=30)
    chat.ws.close()


async def test_exit_codes_signals_and_the_output_byte_limit(
    alice: Api, make_instance: InstanceFactory, jp_fetch: t.Any, jp_ws_fetch: t.Any
) -> None:
    make_instance(owner="alice")
    chat = await open_chat(jp_fetch, jp_ws_fetch, "results.chat")
    reply = await answer_once_allowed(chat, alice, "run: echo out; exit 3")
    assert reply.startswith("SCRIPTED-REPLY exit=3 signal=None"), reply
    assert reply.endswith("output: out")

    # A command a signal ended: the signal, no exit code.
    reply = await chat.answer("run: kill -TERM $$")
    assert reply.startswith("SCRIPTED-REPLY exit=None signal=SIGTERM"), reply

    # At most outputByteLimit bytes, the tail kept, truncated.
    reply = await chat.answer(
        "run: i=0; while [ $i -lt 2000 ]; do i=$((i+1)); echo line-$i; done\nlimit: 64"
    )
    assert reply.startswith("SCRIPTED-REPLY exit=0 signal=None truncated=True"), reply
    lines = reply.split("output: ", 1)[1].split(" | ")
    assert lines[-1] == "line-2000"
    assert len("\n".join(lines).encode()) <= 64
    assert lines[-2] == "line-1999"
    chat.ws.close()


async def test_an_installed_persona_gets_tool_terminals_by_the_setting(
    alice: Api, make_instance: InstanceFactory, jp_fetch: t.Any, jp_ws_fetch: t.Any
) -> None:
    # The persona's class names Jupyter AI's own client; c.JupyterAiAgents.personas names its
    # entry point (jp_server_config).
    container = make_instance(owner="alice")
    chat = await open_chat(jp_fetch, jp_ws_fetch, "installed.chat")
    chat.send("run: hostname", persona=INSTALLED_PERSONA_ID)
    await allow_when_asked(alice, "InstalledAgent")
    reply = await chat.reply("SCRIPTED-REPLY", "SCRIPTED-ERROR", persona=INSTALLED_PERSONA_ID)
    assert reply.startswith("SCRIPTED-REPLY exit=0"), reply
    assert reply.endswith(f"output: {container.id[:12]}")
    chat.ws.close()


def test_the_setting_gives_installed_personas_the_client_and_takes_it_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = logging.getLogger("test_acp")
    undo = give_tool_terminals([INSTALLED_ENTRY_POINT, "no-such-persona"], log)
    try:
        assert InstalledScriptedAcpPersona.acp_client_class is ToolTerminalAcpClient
    finally:
        undo()
    assert InstalledScriptedAcpPersona.acp_client_class is JaiAcpClient
    assert "acp_client_class" not in vars(InstalledScriptedAcpPersona)
    assert "no-such-persona" in caplog.text


def test_a_persona_s_own_client_keeps_its_ways_under_tool_terminals() -> None:
    class OwnClient(JaiAcpClient):  # type: ignore[misc]
        """As Kiro's persona has."""

    mixed = tool_terminal_client(OwnClient)
    assert issubclass(mixed, ToolTerminalAcpClient)
    assert issubclass(mixed, OwnClient)
    assert tool_terminal_client(mixed) is mixed
    assert tool_terminal_client(JaiAcpClient) is ToolTerminalAcpClient
