"""A scripted ACP agent on the official Python SDK: each prompt runs one command in a terminal
the client hosts (``terminal/create``, ``wait_for_exit``, ``output``, ``release``) and replies
``SCRIPTED-REPLY exit=<code> signal=<signal> truncated=<bool> terminal=<id> output: <output>``.

The prompt's lines say what to do:

- ``run: <shell text>``: the command (else ``echo ACP-$((6*7)); hostname``);
- ``limit: <bytes>``: its ``outputByteLimit`` (else 4096);
- ``poll: <text>``: read ``terminal/output`` while the command runs until it shows ``<text>``,
  and say so first: ``SCRIPTED-PARTIAL exit_status=<status> output: <output so far>``;
- ``kill``: then ``terminal/kill`` it (before waiting for its exit).

A failed terminal call replies ``SCRIPTED-ERROR <message>``."""

from __future__ import annotations

import asyncio
import re
import sys
import typing as t
import uuid

import acp
from acp import helpers, schema

DEFAULT_COMMAND = "echo ACP-$((6*7)); hostname"
DEFAULT_LIMIT = 4096
#: How often ``poll:`` reads the output (seconds), and for how long at most.
POLL_EVERY = 0.05
POLL_FOR = 120.0


def _line(text: str, key: str) -> str | None:
    found = re.search(rf"^{key}: (.+)$", text, re.MULTILINE)
    return found.group(1) if found else None


def _flat(output: str) -> str:
    return " | ".join(line for line in output.splitlines() if line)


class ScriptedAgent:
    """The agent side of one ACP connection."""

    def __init__(self) -> None:
        self._conn: t.Any = None

    def on_connect(self, conn: t.Any) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, **_: t.Any) -> schema.InitializeResponse:
        return schema.InitializeResponse(protocol_version=protocol_version)

    async def new_session(self, cwd: str, **_: t.Any) -> schema.NewSessionResponse:
        return schema.NewSessionResponse(session_id=uuid.uuid4().hex)

    async def load_session(self, **_: t.Any) -> None:
        return None

    async def cancel(self, **_: t.Any) -> None:
        return None

    async def authenticate(self, **_: t.Any) -> None:
        return None

    async def prompt(
        self, session_id: str, prompt: list[t.Any], **_: t.Any
    ) -> schema.PromptResponse:
        text = "\n".join(getattr(block, "text", "") for block in prompt)
        command = _line(text, "run") or DEFAULT_COMMAND
        limit = int(_line(text, "limit") or DEFAULT_LIMIT)
        poll = _line(text, "poll")
        kill = re.search(r"^kill$", text, re.MULTILINE) is not None
        call_id = uuid.uuid4().hex[:8]
        await self._conn.session_update(
            session_id,
            helpers.start_tool_call(
                call_id, command, kind="execute", status="pending", raw_input={"command": command}
            ),
        )
        try:
            created = await self._conn.create_terminal(
                session_id=session_id, command="sh", args=["-c", command], output_byte_limit=limit
            )
            terminal = created.terminal_id
            if poll is not None:
                await self._poll(session_id, terminal, poll)
            if kill:
                await self._conn.kill_terminal(session_id=session_id, terminal_id=terminal)
            exited = await self._conn.wait_for_terminal_exit(
                session_id=session_id, terminal_id=terminal
            )
            output = await self._conn.terminal_output(session_id=session_id, terminal_id=terminal)
            await self._conn.release_terminal(session_id=session_id, terminal_id=terminal)
        except Exception as error:  # noqa: BLE001 - the chat shows what failed
            await self._conn.session_update(
                session_id, helpers.update_tool_call(call_id, status="failed")
            )
            await self._reply(session_id, f"SCRIPTED-ERROR {error}")
            return schema.PromptResponse(stop_reason="end_turn")
        await self._conn.session_update(
            session_id,
            helpers.update_tool_call(call_id, status="completed", raw_output=output.output),
        )
        await self._reply(
            session_id,
            f"SCRIPTED-REPLY exit={exited.exit_code} signal={exited.signal} "
            f"truncated={output.truncated} terminal={terminal} output: {_flat(output.output)}",
        )
        return schema.PromptResponse(stop_reason="end_turn")

    async def _poll(self, session_id: str, terminal: str, wanted: str) -> None:
        """Read the output while the command runs (as an agent watching a long command
        does) until it shows ``wanted``; say what it showed then."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + POLL_FOR
        while True:
            output = await self._conn.terminal_output(session_id=session_id, terminal_id=terminal)
            if wanted in output.output or loop.time() > deadline:
                break
            await asyncio.sleep(POLL_EVERY)
        status = output.exit_status
        await self._reply(
            session_id,
            f"SCRIPTED-PARTIAL exit_status={'none' if status is None else status.exit_code} "
            f"truncated={output.truncated} output: {_flat(output.output)}\n",
        )

    async def _reply(self, session_id: str, text: str) -> None:
        await self._conn.session_update(session_id, helpers.update_agent_message_text(text))


def main() -> None:
    print("[scripted-agent] started", file=sys.stderr)
    asyncio.run(acp.run_agent(ScriptedAgent()))


if __name__ == "__main__":
    main()
