"""A scripted ACP agent on the official Python SDK: each prompt runs one command in a terminal
the client hosts (``terminal/create``, ``wait_for_exit``, ``output``, ``release``) and replies
``SCRIPTED-REPLY exit=<code> terminal=<id> output: <output>``. The command is the prompt's line
``run: <shell text>``, else ``echo ACP-$((6*7)); hostname``. A failed terminal call replies
``SCRIPTED-ERROR <message>``."""

from __future__ import annotations

import asyncio
import re
import sys
import typing as t
import uuid

import acp
from acp import helpers, schema

DEFAULT_COMMAND = "echo ACP-$((6*7)); hostname"


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
        found = re.search(r"^run: (.+)$", text, re.MULTILINE)
        command = found.group(1) if found else DEFAULT_COMMAND
        call_id = uuid.uuid4().hex[:8]
        await self._conn.session_update(
            session_id,
            helpers.start_tool_call(
                call_id, command, kind="execute", status="pending", raw_input={"command": command}
            ),
        )
        try:
            created = await self._conn.create_terminal(
                session_id=session_id, command="sh", args=["-c", command], output_byte_limit=4096
            )
            terminal = created.terminal_id
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
        flat = " | ".join(line for line in output.output.splitlines() if line)
        await self._reply(
            session_id,
            f"SCRIPTED-REPLY exit={exited.exit_code} terminal={terminal} output: {flat}",
        )
        return schema.PromptResponse(stop_reason="end_turn")

    async def _reply(self, session_id: str, text: str) -> None:
        await self._conn.session_update(session_id, helpers.update_agent_message_text(text))


def main() -> None:
    print("[scripted-agent] started", file=sys.stderr)
    asyncio.run(acp.run_agent(ScriptedAgent()))


if __name__ == "__main__":
    main()
