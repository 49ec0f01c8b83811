"""The eight MCP tools an agent calls: their schemas, the control rule, and what they do.

A call is checked in this order: the tool exists; if it needs control, the agent holds it ("a
call that needs control is refused for lack of control before anything else is checked"); the
agent has a free call slot; the arguments have the right names and types and sizes; the session
is its own (or, for ``read_screen``, shared with it). Every refusal is a tool result with
``isError`` and a message saying why and what to do, never an exception or a traceback; every
call, allowed or not, is an audit event.
"""

from __future__ import annotations

import asyncio
import collections
import json
import typing as t

from mcp import types
from traitlets import Integer
from traitlets.config import LoggingConfigurable

from ..errors import NotPermitted, SessionError
from ..manager import Admission, ToolTerminalManager, valid_session_id
from ..models import instance_models
from ..redaction import Redactor
from ..runtime.base import valid_instance_id
from .audit import AgentAudit
from .mcp_compat import tool, tool_result
from .shell import AgentShell, AgentShellError
from .store import AgentError, AgentStore, isoformat

if t.TYPE_CHECKING:
    from .store import Agent

#: Longest ``command`` or ``keys`` an agent may send (characters).
MAX_INPUT = 65536
#: ``run_command``'s timeout: default and largest (seconds).
DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 600.0
#: Longest text an audit event keeps of a command.
AUDIT_COMMAND_CHARS = 1000
#: Tools an agent may call without control: it can look, not touch.
READ_ONLY_TOOLS = frozenset({"list_instances", "list_terminals", "read_screen", "request_control"})

#: Session close reasons of agents' terminals.
CLOSED_BY_AGENT = "closed by agent"
AGENT_REVOKED = "agent revoked"


#: Why a call was refused (the audit's ``reason`` and the metrics' ``result``).
UNKNOWN_TOOL = "unknown_tool"
NO_CONTROL = "no_control"
LIMIT = "limit"
BAD_ARGUMENTS = "bad_arguments"
NOT_FOUND = "not_found"
#: The terminal's shell refused it (a command still running, input not taken, the shell gone).
SHELL_REFUSED = "shell_refused"
#: The tool ran and failed (counted as ``error``, not ``refused``).
FAILED = "failed"
#: The agent was revoked, or its token expired, after the call was sent.
REVOKED = "revoked"

#: What an agent is told when it lost its power to act while its call waited or ran.
_LOST_CONTROL = (
    "Your control ended before this call acted, so it did nothing. Call request_control to ask "
    "your user again."
)
_REVOKED = "This agent was revoked, or its token expired, before this call acted; it did nothing."


class Refused(Exception):
    """A call the agent may not make; ``reason`` is the audit's and metrics' word for why."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _object(properties: dict[str, t.Any], required: t.Sequence[str] = ()) -> dict[str, t.Any]:
    schema: dict[str, t.Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    return schema


_SESSION = {"type": "string", "description": "A terminal's session id (from list_terminals)."}
_STRING = {"type": "string"}
_NULLABLE_TIME = {"type": ["string", "null"], "description": "ISO 8601, UTC"}

#: Each tool: (description, input schema, output schema, read-only hint, destructive hint).
_TOOL_SPECS: dict[str, tuple[str, dict[str, t.Any], dict[str, t.Any], bool, bool]] = {
    "list_instances": (
        "List your user's tool instances (containers or local working directories) that "
        "terminals can be opened in.",
        _object({}),
        _object(
            {
                "instances": {
                    "type": "array",
                    "items": _object(
                        {
                            "id": _STRING,
                            "tool": _STRING,
                            "display_name": _STRING,
                            "status": _STRING,
                            "runtime": _STRING,
                        },
                        ["id", "tool", "display_name", "status", "runtime"],
                    ),
                }
            },
            ["instances"],
        ),
        True,
        False,
    ),
    "list_terminals": (
        "List the terminals you opened (mine: true) and those your user shared with you to "
        "read (mine: false).",
        _object({}),
        _object(
            {
                "terminals": {
                    "type": "array",
                    "items": _object(
                        {
                            "session": _STRING,
                            "instance": _STRING,
                            "tool": _STRING,
                            "created": _STRING,
                            "mine": {"type": "boolean"},
                        },
                        ["session", "instance", "tool", "created", "mine"],
                    ),
                }
            },
            ["terminals"],
        ),
        True,
        False,
    ),
    "open_terminal": (
        "Open a new terminal (a shell) in one of your user's tool instances. Your user sees it "
        "in JupyterLab and can watch and type in it. Needs control (request_control).",
        _object({"instance": {"type": "string", "description": "An instance id."}}, ["instance"]),
        _object({"session": _STRING}, ["session"]),
        False,
        False,
    ),
    "run_command": (
        "Type a shell command into one of your terminals, wait until it finished at the shell "
        "prompt, and return its exit code and what it printed (bounded, head and tail, "
        "secrets redacted). A command still running at `timeout` keeps running (timed_out: "
        "true); send_keys with Ctrl-C (\\u0003) stops it. Needs control.",
        _object(
            {
                "session": _SESSION,
                "command": {"type": "string", "maxLength": MAX_INPUT},
                "timeout": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "maximum": MAX_TIMEOUT,
                    "default": DEFAULT_TIMEOUT,
                    "description": "Seconds to wait for the command (default 30, at most 600).",
                },
            },
            ["session", "command"],
        ),
        _object(
            {
                "exit_code": {"type": ["integer", "null"]},
                "output": _STRING,
                "truncated": {"type": "boolean"},
                "timed_out": {"type": "boolean"},
            },
            ["exit_code", "output", "truncated", "timed_out"],
        ),
        False,
        True,
    ),
    "send_keys": (
        "Send keystrokes to one of your terminals as typed (text; control characters allowed: "
        "\\u0003 is Ctrl-C, \\r is Enter). For programs that read input, or to interrupt one. "
        "Needs control.",
        _object(
            {"session": _SESSION, "keys": {"type": "string", "maxLength": MAX_INPUT}},
            ["session", "keys"],
        ),
        _object({}),
        False,
        True,
    ),
    "read_screen": (
        "Read what a terminal shows now (the visible screen, no scrollback; secrets redacted): "
        "one of yours or one your user shared with you.",
        _object({"session": _SESSION}, ["session"]),
        _object(
            {
                "text": _STRING,
                "rows": {"type": "integer"},
                "cols": {"type": "integer"},
                "cursor": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "minItems": 2,
                    "maxItems": 2,
                    "description": "[row, col], 0-based",
                },
            },
            ["text", "rows", "cols", "cursor"],
        ),
        True,
        False,
    ),
    "close_terminal": (
        "Close one of your terminals, ending everything that runs in it. Needs control.",
        _object({"session": _SESSION}, ["session"]),
        _object({}),
        False,
        True,
    ),
    "request_control": (
        "Ask your user for control: until they allow it in JupyterLab you can only list and "
        "read. Give the reason they will read. Answers pending (ask again later, or read "
        "list_terminals meanwhile) or granted (with control_until).",
        _object(
            {
                "reason": {"type": "string", "maxLength": 500},
                "minutes": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Minutes of control asked for (default 10; the server "
                    "caps them).",
                },
            },
            ["reason"],
        ),
        _object(
            {"status": {"enum": ["pending", "granted"]}, "control_until": _NULLABLE_TIME},
            ["status", "control_until"],
        ),
        False,
        False,
    ),
}

TOOLS: list[types.Tool] = [
    tool(
        name,
        description,
        input_schema,
        output_schema,
        read_only=read_only,
        destructive=destructive,
    )
    for name, (description, input_schema, output_schema, read_only, destructive) in (
        _TOOL_SPECS.items()
    )
]


def _check_arguments(name: str, arguments: t.Mapping[str, t.Any] | None) -> dict[str, t.Any]:
    """The arguments as the tool's input schema wants them; :class:`Refused` else."""
    schema = _TOOL_SPECS[name][1]
    properties: dict[str, t.Any] = schema["properties"]
    given = dict(arguments or {})
    unknown = sorted(set(given) - set(properties))
    if unknown:
        raise Refused(
            BAD_ARGUMENTS,
            f"{name} takes no argument {', '.join(map(repr, unknown))[:200]}; its arguments are "
            f"{', '.join(properties) or 'none'}.",
        )
    for key in schema.get("required", ()):
        if key not in given:
            raise Refused(BAD_ARGUMENTS, f"{name} needs the argument {key!r}.")
    for key, value in given.items():
        wanted = properties[key]["type"]
        if wanted == "string" and not isinstance(value, str):
            raise Refused(BAD_ARGUMENTS, f"{name}: {key!r} must be a string.")
        if wanted in ("number", "integer") and (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (wanted == "integer" and not float(value).is_integer())
        ):
            raise Refused(BAD_ARGUMENTS, f"{name}: {key!r} must be a number.")
    for key in ("command", "keys"):
        if key in given and len(given[key]) > MAX_INPUT:
            raise Refused(
                BAD_ARGUMENTS,
                f"{name}: {key!r} is {len(given[key])} characters long; at most {MAX_INPUT} "
                "are accepted. Nothing was typed. Write long input to a file in smaller parts.",
            )
    return given


class AgentTools(LoggingConfigurable):
    """Runs agents' tool calls against the owner's sessions (one instance per server).

    Configurable as ``c.AgentTools`` (created with ``parent=`` the extension application).
    """

    output_limit = Integer(
        32768,
        min=1024,
        help="""Characters of a command's output an agent receives from run_command at most
        (head and tail, with a marker between, when there is more).""",
    ).tag(config=True)

    max_calls_in_flight = Integer(
        4,
        min=1,
        help="""How many MCP tool calls one agent may have running at once; more are refused
        (an isError result) until one answers.""",
    ).tag(config=True)

    max_terminals_per_agent = Integer(
        4,
        min=1,
        help="""How many terminals one agent may have open at once (they also count against
        the user's `max_sessions_per_user`).""",
    ).tag(config=True)

    def __init__(
        self,
        *,
        manager: ToolTerminalManager,
        store: AgentStore,
        redactor: Redactor,
        audit: AgentAudit,
        **settings: t.Any,
    ) -> None:
        """``settings``: ``parent``, ``log``, ``config`` and any of the traits above."""
        super().__init__(**settings)
        self.manager = manager
        self.store = store
        self.redactor = redactor
        self.audit = audit
        #: Each agent terminal's shell integration, by session id.
        self.shells: dict[str, AgentShell] = {}
        #: Each agent terminal's redactor (with its environment's secrets), by session id.
        self.redactors: dict[str, Redactor] = {}
        self._in_flight: collections.Counter[str] = collections.Counter()
        manager.add_ended_listener(self._session_ended)

    # -- the agent's terminals ----------------------------------------------------------------

    def terminals_of(self, agent: Agent) -> list[Admission]:
        """The agent's own open terminals, oldest first."""
        return self.manager.agent_terminals(agent.owner, agent.id)

    async def end_terminals(self, agent: Agent, reason: str = AGENT_REVOKED) -> None:
        """Close every terminal of ``agent`` (killing what runs in them, as DELETE does)."""
        await asyncio.gather(
            *(self.manager.close_admitted(a, reason) for a in self.terminals_of(agent)),
            return_exceptions=True,
        )

    def _session_ended(self, session_id: str) -> None:
        self.store.session_ended(session_id)
        self.redactors.pop(session_id, None)
        shell = self.shells.pop(session_id, None)
        if shell is not None:
            shell.close()

    def _shell_for(self, admission: Admission, redactor: Redactor) -> AgentShell:
        return AgentShell(
            self.manager, admission, redactor=redactor, output_limit=self.output_limit, log=self.log
        )

    def session_redactor(self, admission: Admission) -> Redactor:
        """The redactor of the admitted session: the server's, plus its shell's secret
        variables (the same as its recording's)."""
        cached = self.redactors.get(admission.session_id)
        if cached is not None:
            return cached
        redactor = self.redactor.for_environment(admission.environment)
        if not admission.ended:
            self.redactors[admission.session_id] = redactor
        return redactor

    def _admit(self, agent: Agent, session_id: str) -> Admission | None:
        try:
            return self.manager.admit_agent(agent.owner, agent.id, session_id)
        except NotPermitted:
            return None

    def _own_session(self, agent: Agent, session_id: str) -> Admission:
        admission = self._admit(agent, session_id)
        if admission is None:
            raise Refused(
                NOT_FOUND, "No such terminal. list_terminals shows the terminals you can use."
            )
        if admission.agent_id != agent.id:
            raise Refused(
                NOT_FOUND,
                "This terminal is not one you opened: you may only read it if your user shared "
                "it with you (read_screen), never type into it. Open your own with "
                "open_terminal.",
            )
        return admission

    def _readable_session(self, agent: Agent, session_id: str) -> Admission:
        admission = self._admit(agent, session_id)
        if admission is not None and (session_id in agent.shared or admission.agent_id == agent.id):
            return admission
        raise Refused(
            NOT_FOUND,
            "No such terminal for you: you can read your own terminals and those your user "
            "shared with you (list_terminals shows them).",
        )

    def output_so_far(self, agent: Agent, session_id: str) -> tuple[str, bool] | None:
        """What the command ``agent``'s ``run_command`` waits for in its terminal
        ``session_id`` printed so far, and whether it was truncated (:meth:`AgentShell.
        output_so_far`); ``None`` when none runs there or the terminal is not the agent's.
        Read-only, as ``read_screen``: no control needed, not audited."""
        try:
            shell = self._shell(agent, session_id)
        except Refused:
            return None
        return shell.output_so_far()

    # -- calls --------------------------------------------------------------------------------

    def may_act(self, agent: Agent) -> bool:
        """Whether ``agent`` may still act with control now: it was not revoked, its token did
        not expire and its control did not end (checked again after every wait)."""
        return self.store.holds(agent) and agent.has_control()

    def _refuse_unless_may_act(self, agent: Agent) -> None:
        if not self.store.holds(agent):
            raise Refused(REVOKED, _REVOKED)
        if not agent.has_control():
            raise Refused(NO_CONTROL, _LOST_CONTROL)

    def _admit_call(self, agent: Agent, name: str) -> None:
        """Refuse the call if the tool is unknown, needs control the agent lacks (checked
        before anything else), or the agent has too many calls running."""
        if not self.store.holds(agent):
            # (authenticated before it was revoked or expired: the call waited meanwhile)
            raise Refused(REVOKED, _REVOKED)
        if name not in _TOOL_SPECS:
            raise Refused(
                UNKNOWN_TOOL,
                f"There is no tool {name[:100]!r}; the tools are {', '.join(_TOOL_SPECS)}.",
            )
        if name not in READ_ONLY_TOOLS and not agent.has_control():
            raise Refused(
                NO_CONTROL,
                f"{name} needs control of your user's terminals, which you do not hold now "
                "(never granted, or it ended). Call request_control with your reason; your "
                "user decides in JupyterLab. Until then you can list and read.",
            )
        if self._in_flight[agent.id] >= self.max_calls_in_flight:
            raise Refused(
                LIMIT,
                f"You have {self.max_calls_in_flight} calls running already; wait for one "
                "to answer.",
            )

    async def call(
        self, agent: Agent, name: str, arguments: t.Mapping[str, t.Any] | None
    ) -> types.CallToolResult:
        """Run one tool call of ``agent`` and answer it (refusals as ``isError`` results)."""
        session_id: str | None = None
        command: str | None = None
        if isinstance(arguments, t.Mapping):
            session_value = arguments.get("session")
            session_id = session_value if valid_session_id(session_value) else None
            for key in ("command", "keys"):
                if isinstance(arguments.get(key), str):
                    command = arguments[key][:AUDIT_COMMAND_CHARS]
        try:
            self._admit_call(agent, name)
            given = _check_arguments(name, arguments)
            self._in_flight[agent.id] += 1
            try:
                structured, summary = await getattr(self, f"_{name}")(agent, given)
            finally:
                self._in_flight[agent.id] -= 1
                if self._in_flight[agent.id] <= 0:
                    del self._in_flight[agent.id]
        except Refused as refusal:
            self.audit.call(
                agent,
                name[:100],
                result="error" if refusal.reason == FAILED else "refused",
                reason=refusal.reason,
                session_id=session_id,
                command=self.redactor.redact(command) if command is not None else None,
            )
            return tool_result(refusal.message, is_error=True)
        redactor = self.redactors.get(session_id or "", self.redactor)
        self.audit.call(
            agent,
            name,
            result="ok",
            session_id=session_id or structured.get("session"),
            command=redactor.redact(command) if command is not None else None,
        )
        return tool_result(summary, structured=structured)

    async def _list_instances(
        self, agent: Agent, _arguments: dict[str, t.Any]
    ) -> tuple[dict[str, t.Any], str]:
        try:
            models = instance_models(await self.manager.list_instances(agent.owner))
        except SessionError as error:
            raise Refused(FAILED, error.message) from None
        keys = ("id", "tool", "display_name", "status", "runtime")
        instances = [{key: model[key] for key in keys} for model in models]
        lines = [f"{i['id']} ({i['display_name']}, {i['status']})" for i in instances]
        return {"instances": instances}, "\n".join(lines) or "No tool instances."

    async def _list_terminals(
        self, agent: Agent, _arguments: dict[str, t.Any]
    ) -> tuple[dict[str, t.Any], str]:
        terminals = [
            _terminal_model(admission, mine=True) for admission in self.terminals_of(agent)
        ] + [
            _terminal_model(admission, mine=False)
            for session_id in agent.shared
            if (admission := self._admit(agent, session_id)) is not None
        ]
        return {"terminals": terminals}, json.dumps(terminals) if terminals else "No terminals."

    async def _open_terminal(
        self, agent: Agent, arguments: dict[str, t.Any]
    ) -> tuple[dict[str, t.Any], str]:
        instance = arguments["instance"]
        if not valid_instance_id(instance):
            raise Refused(NOT_FOUND, "No such tool instance; list_instances shows them.")
        if len(self.terminals_of(agent)) >= self.max_terminals_per_agent:
            raise Refused(
                LIMIT,
                f"You have {self.max_terminals_per_agent} terminals open; close one first "
                "(close_terminal).",
            )
        try:
            session = await self.manager.create_session(
                agent.owner, instance, agent.username, agent={"id": agent.id, "name": agent.name}
            )
        except SessionError as error:
            reason = LIMIT if error.status == 429 else NOT_FOUND if error.status == 403 else FAILED
            message = (
                "No such tool instance; list_instances shows them."
                if error.status == 403
                else error.message
            )
            raise Refused(reason, message) from None
        try:
            admission = self.manager.admit_agent(agent.owner, agent.id, session.id)
            shell = self._shell_for(admission, self.session_redactor(admission))
            await shell.start()
        except Exception as error:  # noqa: BLE001 - whatever failed, the session must end
            self.log.warning("Agent terminal %s failed to start: %s", session.id[:8], error)
            await self.manager.close_session(session, "failed to start")
            raise Refused(
                FAILED, f"The terminal opened but its shell could not be set up: {error}"
            ) from None
        if admission.ended:
            raise Refused(FAILED, "The terminal ended as soon as it opened.")
        if not self.may_act(agent):
            # Revoked, expired or out of control while the terminal started: the revocation's
            # own sweep did not see it yet, so it is closed here, at once.
            shell.close()
            await self.manager.close_admitted(admission, AGENT_REVOKED)
            self._refuse_unless_may_act(agent)
        self.shells[session.id] = shell
        return {"session": session.id}, f"Opened terminal {session.id} in {instance}."

    def _shell(self, agent: Agent, session_id: str) -> AgentShell:
        admission = self._own_session(agent, session_id)
        shell = self.shells.get(admission.session_id)
        if shell is None:
            raise Refused(FAILED, "This terminal is still starting; try again.")
        return shell

    async def _run_command(
        self, agent: Agent, arguments: dict[str, t.Any]
    ) -> tuple[dict[str, t.Any], str]:
        shell = self._shell(agent, arguments["session"])
        timeout = float(arguments.get("timeout", DEFAULT_TIMEOUT))
        if not 0 < timeout <= MAX_TIMEOUT:
            raise Refused(
                BAD_ARGUMENTS,
                f"run_command: timeout must be more than 0 and at most {MAX_TIMEOUT:g} seconds.",
            )
        try:
            result = await shell.run_command(
                arguments["command"], timeout, may_type=lambda: self.may_act(agent)
            )
        except AgentShellError as error:
            raise Refused(SHELL_REFUSED, str(error)) from None
        structured = {
            "exit_code": result.exit_code,
            "output": result.output,
            "truncated": bool(result.truncated),
            "timed_out": bool(result.timed_out),
        }
        head = result.note or f"Exit code {result.exit_code}."
        if result.truncated:
            head += " Output truncated (head and tail)."
        return structured, f"{head}\n{result.output}"

    async def _send_keys(
        self, agent: Agent, arguments: dict[str, t.Any]
    ) -> tuple[dict[str, t.Any], str]:
        shell = self._shell(agent, arguments["session"])
        try:
            shell.send_keys(arguments["keys"])
        except AgentShellError as error:
            raise Refused(SHELL_REFUSED, str(error)) from None
        return {}, "Keys sent."

    async def _read_screen(
        self, agent: Agent, arguments: dict[str, t.Any]
    ) -> tuple[dict[str, t.Any], str]:
        admission = self._readable_session(agent, arguments["session"])
        # A shared session is read through a shell of its own that is never started: it
        # types nothing.
        shell = self.shells.get(admission.session_id) or self._shell_for(
            admission, self.session_redactor(admission)
        )
        screen = await shell.read_screen()
        structured = {
            "text": screen["text"],
            "rows": screen["rows"],
            "cols": screen["cols"],
            "cursor": list(screen["cursor"]),
        }
        return structured, structured["text"]

    async def _close_terminal(
        self, agent: Agent, arguments: dict[str, t.Any]
    ) -> tuple[dict[str, t.Any], str]:
        admission = self._own_session(agent, arguments["session"])
        await self.manager.close_admitted(admission, CLOSED_BY_AGENT)
        return {}, "Terminal closed."

    async def _request_control(
        self, agent: Agent, arguments: dict[str, t.Any]
    ) -> tuple[dict[str, t.Any], str]:
        try:
            minutes = self.store.clamp_minutes(arguments.get("minutes"))
        except AgentError as error:
            raise Refused(BAD_ARGUMENTS, f"request_control: {error.message}") from None
        if agent.has_control():
            until = isoformat(agent.control_until)
            return {"status": "granted", "control_until": until}, f"You have control until {until}."
        self.store.request_control(agent, arguments["reason"], minutes)
        self.audit.emit("request", agent, minutes=agent.request.minutes if agent.request else None)
        return {"status": "pending", "control_until": None}, (
            "Your user was asked in JupyterLab. Until they allow it you can list and read; call "
            "request_control again to see whether it was granted."
        )


def _terminal_model(admission: Admission, *, mine: bool) -> dict[str, t.Any]:
    model = admission.model()
    return {
        "session": admission.session_id,
        "instance": model["instance"],
        "tool": model["tool"],
        "created": model["created"],
        "mine": mine,
    }
