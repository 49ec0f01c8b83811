"""Jupyter AI's agents in tool terminals: an ACP client whose ``terminal/*`` are tool terminals.

Jupyter AI 3 runs each persona's agent over the Agent Client Protocol; the agent asks its client
for terminals (``terminal/create``, ``terminal/output``, ``terminal/wait_for_exit``,
``terminal/kill``, ``terminal/release``). :class:`ToolTerminalAcpClient` is Jupyter AI's own
client (``jupyter_ai_acp_client``'s ``JaiAcpClient``) with those five answered here instead of
by pipes on the Jupyter host:

- The persona is one of its owner's agents (``"kind": "acp"``, named as the persona), and every
  terminal call goes through the same tools an MCP agent calls (:meth:`AgentTools.call`): the
  same control rule, limits, redaction and audit. The owner is the user whose chat message the
  agent answers.
- ``terminal/create`` without control asks the owner (the agent's ``request``, which JupyterLab
  shows as for MCP agents) and waits up to :data:`CONTROL_WAIT` seconds; a deny, a revocation
  or no answer fails the call with a message the chat shows, and nothing runs.
- Each ACP terminal is a tool terminal of its own, opened in the instance the owner chose for
  Jupyter AI's agents (JupyterLab's setting, :class:`~jupyter_tool_terminal.agents.jupyter_ai.
  JupyterAiAgents`), else in the owner's only running one; listed among the owner's sessions
  with ``"agent"`` and watchable live; the command is typed into its shell, prefixed with a
  no-op that names the persona and the chat.
- ``terminal/output`` gives what the command printed so far while it runs, and all of it (within
  the limit, the tail kept) once it ended; a command that a signal ended (the shell's status
  128 + N) reports the signal, ``terminal/kill`` ends it and everything it started.
- The chat shows a tool call's title and status only: the title of the agent's latest
  unfinished tool call gets a note saying where its command runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shlex
import signal
import typing as t

from acp import RequestError
from acp.schema import (
    CreateTerminalResponse,
    EnvVariable,
    KillTerminalResponse,
    ReleaseTerminalResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    ToolCallProgress,
    ToolCallStart,
    WaitForTerminalExitResponse,
)
from jupyter_ai_acp_client.default_acp_client import JaiAcpClient
from jupyter_server.auth import User

from ..agents.mcp_compat import result_parts
from ..agents.store import AgentError

if t.TYPE_CHECKING:
    from ..agents.setup import Agents
    from ..agents.store import Agent

#: How long ``terminal/create`` waits for the owner to grant control (seconds).
CONTROL_WAIT = 120.0
#: How often the wait looks at the agent's control (the store has no change events).
CONTROL_POLL = 0.25
#: Minutes of control asked for.
CONTROL_MINUTES = 10
#: Longest a command is waited for at once (the tools' own ``run_command`` maximum).
COMMAND_TIMEOUT = 600.0
#: How long ``terminal/kill`` waits for the command's end after its terminal's (seconds).
KILL_WAIT = 10.0
#: ``outputByteLimit`` when the agent gives none.
DEFAULT_OUTPUT_BYTES = 1024 * 1024
#: The prefix of a persona's id: Jupyter AI's personas' senders in a chat.
PERSONA_SENDER = "jupyter-ai-personas::"
#: What the tools' bounded output puts between its head and its tail.
_LEFT_OUT = " characters left out ...]\n"
#: The extension's name in the server's extension manager.
_EXTENSION = "jupyter_tool_terminal"
#: Tool call states after which a call is not given notes any more.
_FINISHED = frozenset({"completed", "failed"})
#: Where the owner chooses the instance in JupyterLab.
_SETTING = "JupyterLab's Settings, Tool Terminals: Jupyter AI, Instance"


def _error(message: str) -> RequestError:
    """An ACP error whose message is what the chat shows."""
    return RequestError(-32000, message)


@dataclasses.dataclass
class _Terminal:
    """One ACP terminal: a tool terminal and the command typed into it."""

    acp_session: str
    agent: Agent
    agents: Agents
    output_limit: int
    run: asyncio.Task[tuple[bool, str, dict[str, t.Any] | None]]
    killed: bool = False
    released: bool = False


class ToolTerminalAcpClient(JaiAcpClient):  # type: ignore[misc]
    """Jupyter AI's ACP client, its agents' terminals tool terminals (see the module)."""

    def __init__(self, *args: t.Any, **kwargs: t.Any) -> None:
        super().__init__(*args, **kwargs)
        #: The ACP terminals, by terminal id (the tool terminal's session id).
        self._tool_terminals: dict[str, _Terminal] = {}
        #: Each ACP session's tool calls, as the agent titled them, while unfinished.
        self._open_calls: dict[str, dict[str, str]] = {}

    async def session_update(self, session_id: str, update: t.Any, **kwargs: t.Any) -> None:
        """Jupyter AI's handling of the agent's updates; the tool calls' titles are kept too,
        for the notes of :meth:`_note_on_tool_call`."""
        if isinstance(update, ToolCallStart | ToolCallProgress):
            calls = self._open_calls.setdefault(session_id, {})
            if update.status in _FINISHED:
                calls.pop(update.tool_call_id, None)
            elif isinstance(update, ToolCallStart) or update.title is not None:
                calls[update.tool_call_id] = update.title or calls.get(update.tool_call_id, "")
        await super().session_update(session_id, update, **kwargs)

    async def _note_on_tool_call(self, session_id: str, note: str) -> None:
        """Add ``note`` to the title of the session's latest unfinished tool call: the chat
        shows a tool call's title and status only, not a terminal's output. (ACP's
        ``terminal/create`` does not say which tool call it serves: the latest is the one.)

        The note is an update of the tool call as the agent's own would be, handled by Jupyter
        AI's client as those are."""
        calls = self._open_calls.get(session_id)
        if not calls:
            return
        call_id, title = next(reversed(calls.items()))
        update = ToolCallProgress(
            session_update="tool_call_update",
            tool_call_id=call_id,
            title=f"{title} — {note}" if title else note,
        )
        await super().session_update(session_id, update)

    # -- who and where ------------------------------------------------------------------------

    def _persona(self, session_id: str) -> t.Any:
        persona = self._personas_by_session.get(session_id)
        if persona is None:
            msg = "No such ACP session on this client."
            raise _error(msg)
        return persona

    @staticmethod
    def _agents(persona: t.Any) -> tuple[Agents, t.Any]:
        """The server's agents and its ``ToolTerminalApp``."""
        serverapp = persona.parent.parent.serverapp
        apps = serverapp.extension_manager.extension_apps.get(_EXTENSION) or set()
        for app in apps:
            agents = getattr(app, "agents", None)
            if agents is not None and app.agents_enabled:
                return agents, app
        msg = (
            "Tool terminals are not available to agents on this server (jupyter-tool-terminal "
            "with ToolTerminalApp.agents_enabled and a local session manager is needed)."
        )
        raise _error(msg)

    @staticmethod
    def _sender(persona: t.Any) -> str:
        """The user whose message the persona answers: the chat's latest message of a person."""
        for message in reversed(persona.chat.get_messages()):
            sender = getattr(message, "sender", "")
            if sender and not sender.startswith(PERSONA_SENDER):
                return str(sender)
        msg = "No user's message to answer in this chat."
        raise _error(msg)

    def _agent(self, agents: Agents, owner: str, username: str, name: str) -> Agent:
        """The owner's agent for this persona (made on its first terminal)."""
        for agent in agents.store.of(owner):
            if agent.kind == "acp" and agent.name == name:
                return agent
        try:
            # The token is never shown: the persona reaches its terminals through this client.
            agent, _token = agents.store.create(owner, username, name, kind="acp")
        except AgentError as error:
            msg = f"{name} cannot become one of your agents: {error.message}"
            raise _error(msg) from None
        agents.audit.emit("create", agent, username=username)
        return agent

    async def _await_control(self, agents: Agents, agent: Agent, command: str) -> None:
        """Ask the owner for control unless the agent holds it, and wait for the answer."""
        if agent.has_control():
            return
        agents.store.request_control(agent, f"Run in a tool terminal: {command}", CONTROL_MINUTES)
        agents.audit.emit("request", agent, minutes=CONTROL_MINUTES)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONTROL_WAIT
        while loop.time() < deadline:
            await asyncio.sleep(CONTROL_POLL)
            current = agents.store.agents.get(agent.id)
            if current is None:
                msg = f"{agent.name} was removed from your agents; nothing ran."
                raise _error(msg)
            if current.has_control():
                return
            if current.request is None:
                msg = f"You denied {agent.name} control of your terminals; nothing ran."
                raise _error(msg)
        with contextlib.suppress(AgentError):
            agents.store.end_control(agent)
        msg = (
            f"{agent.name} got no answer within {CONTROL_WAIT:g} s; nothing ran. Allow it in "
            "JupyterLab (Agents) and ask again."
        )
        raise _error(msg)

    @staticmethod
    async def _instance(agents: Agents, agent: Agent) -> str:
        """The instance the owner chose for Jupyter AI's agents, else their only running one."""
        is_error, text, structured = result_parts(
            await agents.tools.call(agent, "list_instances", {})
        )
        if is_error or structured is None:
            raise _error(text)
        instances = structured["instances"]
        named = ", ".join(f"{i['id']} ({i['status']})" for i in instances) or "none"
        running = [str(i["id"]) for i in instances if i["status"] == "running"]
        chosen = agents.jupyter_ai.chosen_instance(agent.owner)
        if chosen is not None:
            if chosen in running:
                return chosen
            state = "is not running" if chosen in {i["id"] for i in instances} else "is gone"
            msg = (
                f"The tool instance you chose for Jupyter AI's agents, {chosen}, {state}; "
                f"nothing ran. Start it, or choose another in {_SETTING}. Your instances: "
                f"{named}."
            )
            raise _error(msg)
        if len(running) == 1:
            return running[0]
        if running:
            msg = (
                f"You have {len(running)} running tool instances ({', '.join(running)}); nothing "
                f"ran. Choose the one for Jupyter AI's agents in {_SETTING}."
            )
        else:
            msg = (
                "None of your tool instances is running, so Jupyter AI's agents have nowhere to "
                f"run commands; nothing ran. Your instances: {named}."
            )
        raise _error(msg)

    # -- ACP's terminal methods ---------------------------------------------------------------

    async def create_terminal(  # noqa: PLR0917 - ACP's own signature
        self,
        command: str,
        session_id: str,
        args: list[str] | None = None,
        cwd: str | None = None,
        env: list[EnvVariable] | None = None,
        output_byte_limit: int | None = None,
        **kwargs: t.Any,
    ) -> CreateTerminalResponse:
        """Open a tool terminal and type the command into it (after the owner's grant)."""
        persona = self._persona(session_id)
        agents, app = self._agents(persona)
        username = self._sender(persona)
        owner = app.principal_for(User(username=username), app.serverapp.identity_provider)
        agent = self._agent(agents, owner, username, str(persona.name))
        shell_text = shlex.join([command, *(args or [])]) if args else command
        if env:
            exports = " ".join(shlex.quote(f"{v.name}={v.value}") for v in env)
            shell_text = f"export {exports}; {shell_text}"
        if not agent.has_control():
            await self._note_on_tool_call(
                session_id, "waiting for your approval in JupyterLab (Agents)"
            )
        await self._await_control(agents, agent, shell_text)
        instance = await self._instance(agents, agent)
        is_error, text, structured = result_parts(
            await agents.tools.call(agent, "open_terminal", {"instance": instance})
        )
        if is_error or structured is None:
            raise _error(text)
        terminal_id = str(structured["session"])
        chat = getattr(persona.parent, "chat_path", None) or "a chat"
        # A no-op first, so that the owner watching sees whom the command is for.
        label = shlex.quote(f"Jupyter AI: {persona.name}, {chat}")
        typed = f": {label}; {shell_text}"
        run = asyncio.ensure_future(
            _parts(
                agents.tools.call(
                    agent,
                    "run_command",
                    {"session": terminal_id, "command": typed, "timeout": COMMAND_TIMEOUT},
                )
            )
        )
        self._tool_terminals[terminal_id] = _Terminal(
            acp_session=session_id,
            agent=agent,
            agents=agents,
            output_limit=DEFAULT_OUTPUT_BYTES if output_byte_limit is None else output_byte_limit,
            run=run,
        )
        await self._note_on_tool_call(
            session_id, f"runs in tool terminal {terminal_id[:8]} ({instance})"
        )
        persona.log.info("ACP terminal %s: %s in %s", terminal_id, persona.name, instance)
        return CreateTerminalResponse(terminal_id=terminal_id)

    def _terminal(self, session_id: str, terminal_id: str) -> _Terminal:
        terminal = self._tool_terminals.get(terminal_id)
        if terminal is None or terminal.acp_session != session_id or terminal.released:
            raise RequestError.resource_not_found(terminal_id)
        return terminal

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: t.Any
    ) -> TerminalOutputResponse:
        """What the command printed so far (no exit status while it runs), the tail within the
        limit."""
        terminal = self._terminal(session_id, terminal_id)
        if not terminal.run.done():
            # (None before the command is typed: nothing printed yet.)
            so_far = terminal.agents.tools.output_so_far(terminal.agent, terminal_id)
            output, truncated = _tail(*(so_far or ("", False)), terminal.output_limit)
            return TerminalOutputResponse(output=output, truncated=truncated)
        output, truncated, status = self._finished(terminal)
        return TerminalOutputResponse(output=output, truncated=truncated, exit_status=status)

    def _finished(self, terminal: _Terminal) -> tuple[str, bool, TerminalExitStatus]:
        is_error, text, structured = terminal.run.result()
        if is_error or structured is None:
            output, truncated = _tail(text, False, terminal.output_limit)
            return output, truncated, TerminalExitStatus(exit_code=None, signal="SIGKILL")
        output, truncated = _tail(
            str(structured["output"]), bool(structured["truncated"]), terminal.output_limit
        )
        code = structured["exit_code"]
        if terminal.killed or code is None:
            return output, truncated, TerminalExitStatus(exit_code=None, signal="SIGKILL")
        return output, truncated, _exit_status(int(code))

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: t.Any
    ) -> WaitForTerminalExitResponse:
        """Wait for the command's end: its exit code, or the signal that ended it."""
        terminal = self._terminal(session_id, terminal_id)
        await asyncio.shield(terminal.run)
        _, _, status = self._finished(terminal)
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: t.Any
    ) -> KillTerminalResponse | None:
        """End the command and everything it started (the tool terminal closes); its output
        stays readable until release."""
        terminal = self._terminal(session_id, terminal_id)
        if not terminal.run.done():
            terminal.killed = True
            await self._close(terminal, terminal_id)
            # The command's end follows the terminal's at once: wait for it, so that the
            # output read next is the whole of it, with the exit status.
            await asyncio.wait({terminal.run}, timeout=KILL_WAIT)
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: t.Any
    ) -> ReleaseTerminalResponse | None:
        """End the terminal (killing what still runs) and forget it."""
        terminal = self._terminal(session_id, terminal_id)
        terminal.released = True
        if not terminal.run.done():
            terminal.killed = True
        await self._close(terminal, terminal_id)
        self._tool_terminals.pop(terminal_id, None)
        return ReleaseTerminalResponse()

    @staticmethod
    async def _close(terminal: _Terminal, terminal_id: str) -> None:
        await terminal.agents.tools.call(terminal.agent, "close_terminal", {"session": terminal_id})

    async def end_session(self, session_id: str) -> None:
        """The chat's ACP session ended: its terminals end too."""
        for terminal_id, terminal in list(self._tool_terminals.items()):
            if terminal.acp_session == session_id:
                with contextlib.suppress(Exception):
                    await self.release_terminal(session_id, terminal_id)
        self._open_calls.pop(session_id, None)
        await super().end_session(session_id)


async def _parts(
    call: t.Awaitable[t.Any],
) -> tuple[bool, str, dict[str, t.Any] | None]:
    return result_parts(await call)


def _exit_status(code: int) -> TerminalExitStatus:
    """The exit status of a command whose shell reported ``code``: a shell reports a command
    that signal N ended as 128 + N, which is given as that signal."""
    if code > 128:
        with contextlib.suppress(ValueError):
            return TerminalExitStatus(exit_code=None, signal=signal.Signals(code - 128).name)
    return TerminalExitStatus(exit_code=code, signal=None)


def _tail(output: str, truncated: bool, limit: int) -> tuple[str, bool]:
    """The last ``limit`` bytes of ``output`` (whole characters), and whether any was left out.

    The tools' bounded output is its head, a line saying how much was left out, and its tail:
    ACP keeps the tail only."""
    if truncated and _LEFT_OUT in output:
        output = output.split(_LEFT_OUT, 1)[1]
    data = output.encode("utf-8")
    if len(data) <= limit:
        return output, truncated
    return data[len(data) - limit :].decode("utf-8", errors="ignore"), True
