"""The MCP endpoint, ``{base_url}tool-terminal/mcp``: MCP's Streamable HTTP transport in tornado.

The protocol itself (JSON-RPC, the ``initialize`` handshake and the 2026 per-request envelope,
protocol version negotiation, tools/list, tools/call, notifications) is the official ``mcp``
SDK's: its low-level :class:`mcp.server.lowlevel.Server` behind its
:class:`~mcp.server.streamable_http_manager.StreamableHTTPSessionManager`, in stateless JSON
response mode (every POST answered with one JSON body, no SSE stream, no session to keep). That
manager is an ASGI application; :class:`MCPBridge` runs it on the server's own event loop and
hands it each tornado request as an ASGI one.

What stays in tornado, before the SDK sees anything: whether agents are enabled, the ``Origin``
check (MCP's DNS-rebinding rule: an ``Origin`` other than this server's is refused, none is
accepted), the agent's bearer token (only agent tokens authenticate here: a Jupyter token is
refused), and the request body's size (read in pieces, at most :data:`MAX_BODY` kept).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import typing as t
import urllib.parse

from jupyter_server.extension.handler import ExtensionHandlerMixin
from mcp import types
from tornado import web

from .mcp_compat import low_level_server, stateless_session_manager, tool_result
from .tools import TOOLS, AgentTools

if t.TYPE_CHECKING:
    from .pacing import AgentPacer, Place
from .store import Agent, AgentStore

#: Largest request body accepted (bytes); a larger one is read to its end and dropped, then
#: refused with 413 (memory stays bounded whatever a client sends).
MAX_BODY = 1024 * 1024
#: The ASGI scope key that carries the authenticated agent to the tool handlers.
AGENT_SCOPE_KEY = "jupyter_tool_terminal.agent"
#: This package's version, as the server names itself to MCP clients.
VERSION = str(getattr(importlib.import_module("jupyter_tool_terminal"), "__version__", "0.0.0"))
#: What the server tells an MCP client about itself when it connects.
INSTRUCTIONS = (
    "Terminals in your user's tool containers, which your user watches live in JupyterLab. "
    "You start read-only: list_instances, list_terminals and read_screen work at once; to open "
    "terminals and run commands call request_control with your reason, and your user decides "
    "in JupyterLab (control lasts minutes and ends by itself). run_command returns the exit "
    "code and the output (bounded, secrets redacted)."
)


class MCPBridge:
    """The SDK's MCP server for agents, running on the server's event loop."""

    def __init__(self, tools: AgentTools) -> None:
        self.tools = tools
        self.server = low_level_server(
            "jupyter-tool-terminal",
            version=VERSION,
            instructions=INSTRUCTIONS,
            list_tools=self._list_tools,
            call_tool=self._call_tool,
        )
        self.session_manager = stateless_session_manager(self.server, MAX_BODY)
        self._task: asyncio.Task[None] | None = None
        self._running = asyncio.Event()
        self._stopping = asyncio.Event()
        self._start_lock = asyncio.Lock()

    async def _list_tools(self) -> list[types.Tool]:
        return TOOLS

    async def _call_tool(
        self, scope: t.Mapping[str, t.Any], name: str, arguments: t.Mapping[str, t.Any] | None
    ) -> types.CallToolResult:
        agent = scope.get(AGENT_SCOPE_KEY)
        if agent is None:  # (every request reaching the SDK was authenticated first)
            return tool_result("Not authenticated.", is_error=True)
        return await self.tools.call(agent, name, arguments)

    async def start(self) -> None:
        """Run the SDK's session manager (once; later calls return at once)."""
        async with self._start_lock:
            if self._task is None:
                self._task = asyncio.create_task(self._run())
        await self._running.wait()

    async def _run(self) -> None:
        async with self.session_manager.run():
            self._running.set()
            await self._stopping.wait()

    async def stop(self) -> None:
        """Stop the session manager (calls in progress are cancelled)."""
        self._stopping.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task

    async def handle(self, handler: MCPHandler, agent: Agent, body: bytes) -> None:
        """Answer ``handler``'s request through the SDK, as the ASGI request it would be."""
        await self.start()
        request = handler.request
        scope: dict[str, t.Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": request.version.removeprefix("HTTP/") or "1.1",
            "method": request.method,
            "scheme": request.protocol,
            "path": request.path,
            "raw_path": request.path.encode("latin-1", "replace"),
            "query_string": request.query.encode("latin-1", "replace"),
            "root_path": "",
            "headers": [
                (name.lower().encode("latin-1"), value.encode("latin-1", "replace"))
                for name, value in request.headers.get_all()
            ],
            "client": (request.remote_ip or "", 0),
            "server": None,
            AGENT_SCOPE_KEY: agent,
        }
        body_sent = False

        async def receive() -> dict[str, t.Any]:
            nonlocal body_sent
            if not body_sent:
                body_sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await handler.disconnected.wait()
            return {"type": "http.disconnect"}

        async def send(message: t.MutableMapping[str, t.Any]) -> None:
            if handler.disconnected.is_set():
                return
            if message["type"] == "http.response.start":
                handler.set_status(int(message["status"]))
                handler.clear_header("Content-Type")
                for name, value in message.get("headers", ()):
                    key = name.decode("latin-1")
                    # tornado sets its own length (the body may be written in pieces).
                    if key.lower() not in ("content-length", "transfer-encoding"):
                        handler.add_header(key, value.decode("latin-1"))
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    handler.write(message["body"])
                if message.get("more_body"):
                    # A stream (SSE): what is written so far goes out now.
                    await handler.flush()

        await self.session_manager.handle_request(scope, receive, send)
        if not handler.finished:
            handler.finish()


class ServedAgents(t.Protocol):
    """What the endpoint needs of the server's agents (``agents.setup.Agents``)."""

    store: AgentStore
    bridge: MCPBridge
    pacer: AgentPacer


class MCPExtension(t.Protocol):
    """What the endpoint needs of the extension application (naming it rather than the app
    keeps this module from importing the app back)."""

    agents_enabled: bool

    @property
    def agents(self) -> ServedAgents | None:
        """The server's agents, if tool terminals are available."""


@web.stream_request_body
class MCPHandler(ExtensionHandlerMixin, web.RequestHandler):
    """``{base_url}tool-terminal/mcp``: agents' MCP requests (``Authorization: Bearer TOKEN``)."""

    SUPPORTED_METHODS = ("GET", "POST", "DELETE")

    def initialize(self, name: str, *args: t.Any, **kwargs: t.Any) -> None:
        """Per-request state (``name``: the extension's settings key)."""
        super().initialize(name, *args, **kwargs)
        self.disconnected = asyncio.Event()
        self._body: list[bytes] = []
        self._body_size = 0
        self.agent: Agent | None = None
        #: The request's place among agents' waiting requests, until it is let in.
        self._place: Place | None = None

    @property
    def tool_app(self) -> MCPExtension:
        """The extension application."""
        return t.cast("MCPExtension", self.extensionapp)

    @property
    def finished(self) -> bool:
        """Whether the response was finished."""
        return bool(self._finished)

    def check_xsrf_cookie(self) -> None:
        """No XSRF check: this route authenticates by bearer token only, never by a cookie,
        so a cross-site request carries no credential here."""

    def set_default_headers(self) -> None:
        """JSON, never cached."""
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")

    def refuse(self, status: int, message: str, code: int = types.INVALID_REQUEST) -> None:
        """Answer with ``status`` and a JSON-RPC error (no id) saying why."""
        self.set_status(status)
        if status == 401:
            self.set_header("WWW-Authenticate", 'Bearer realm="jupyter-tool-terminal"')
        if status == 429:
            self.set_header("Retry-After", "1")
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
        self.finish(json.dumps(error))

    def _origin_allowed(self) -> bool:
        origin = self.request.headers.get("Origin")
        if origin is None:
            return True  # SDK clients send none; a browser always does
        parsed = urllib.parse.urlsplit(origin)
        return bool(parsed.netloc) and parsed.netloc.lower() == self.request.host.lower()

    async def prepare(self) -> None:
        """Refuse before the body is read: agents off, a foreign Origin, no agent token, too
        many requests of the agent's or its user's waiting already (429)."""
        app = self.tool_app
        agents = app.agents
        if not app.agents_enabled or agents is None:
            self.refuse(
                403,
                "AI agents are turned off on this server (ToolTerminalApp.agents_enabled)"
                if not app.agents_enabled
                else "Tool terminals are not available on this server, so neither are agents.",
            )
            return
        if not self._origin_allowed():
            self.refuse(
                403, "Requests from another origin are refused here (MCP's DNS-rebinding rule)."
            )
            return
        header = self.request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        agent = agents.store.authenticate(token.strip()) if scheme.lower() == "bearer" else None
        if agent is None:
            self.refuse(
                401,
                "An agent token is needed (Authorization: Bearer TOKEN). Create one in "
                "JupyterLab (Connect an Agent...); a revoked or expired one no longer works, "
                "and a Jupyter token is not an agent token.",
            )
            return
        self.agent = agent
        length = self.request.headers.get("Content-Length")
        declared = int(length) if length is not None and length.isdigit() else MAX_BODY
        if declared > MAX_BODY:
            self._body_size = declared
        place = agents.pacer.reserve(agent.owner, agent.id, min(declared, MAX_BODY))
        if isinstance(place, str):
            self.refuse(429, place)
            return
        self._place = place

    def _release_place(self) -> None:
        if self._place is not None:
            self._place.release()
            self._place = None

    def on_finish(self) -> None:
        """The request is answered: its place (if it still held one) is free."""
        self._release_place()

    def data_received(self, chunk: bytes) -> None:
        """Keep at most :data:`MAX_BODY` bytes; count (and drop) the rest."""
        self._body_size += len(chunk)
        if self._body_size <= MAX_BODY:
            self._body.append(chunk)
        else:
            self._body.clear()

    def on_connection_close(self) -> None:
        """The client went away: a waiting request leaves the queue, the SDK's request sees a
        disconnect."""
        self.disconnected.set()
        self._release_place()

    async def _serve(self) -> None:
        if self._body_size > MAX_BODY:
            self.refuse(
                413,
                f"The request is larger than {MAX_BODY} bytes and was not read. A command or "
                "keys can be at most 65536 characters.",
            )
            return
        agents = self.tool_app.agents
        if agents is None or self.agent is None:
            self.refuse(403, "Tool terminals are not available on this server.")
            return
        if not await self._wait_for_turn(agents.pacer, self.agent):
            return
        body = b"".join(self._body)
        self._body.clear()
        await agents.bridge.handle(self, self.agent, body)

    async def _wait_for_turn(self, pacer: AgentPacer, agent: Agent) -> bool:
        """Wait in the pacer's queue until let in (True), or until the client goes away (False:
        the request leaves the queue unserved)."""
        turn = asyncio.ensure_future(pacer.admit(agent.owner))
        gone = asyncio.ensure_future(self.disconnected.wait())
        try:
            await asyncio.wait({turn, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (turn, gone):
                waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await turn
        self._release_place()
        return turn.done() and not turn.cancelled() and not self.disconnected.is_set()

    async def post(self) -> None:
        """A JSON-RPC message (request, notification or response) from the agent."""
        await self._serve()

    async def get(self) -> None:
        """The server-to-client SSE stream: not offered (the spec allows 405); this server sends
        nothing unasked."""
        self._not_offered("This server offers no server-to-client stream (GET); POST requests.")

    async def delete(self) -> None:
        """Ending an MCP session: there are none (the server is stateless)."""
        self._not_offered("This server keeps no MCP sessions, so there is none to end (DELETE).")

    def write_error(self, status_code: int, **kwargs: t.Any) -> None:
        """Tornado's own refusals (a method it does not know: 405 with ``Allow``) as JSON."""
        if status_code == 405:  # the methods of the route, as rest-api.yml declares them
            self.set_header("Allow", ", ".join(self.SUPPORTED_METHODS))
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": self._reason}))

    def _not_offered(self, message: str) -> None:
        self.set_header("Allow", "POST")
        self.refuse(405, message)
