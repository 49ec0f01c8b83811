"""The official MCP SDK (``mcp``) as the MCP endpoint uses it, in both of its major versions.

Jupyter AI 3's environment holds ``mcp`` 1.x (its ``jupyter-server-mcp`` needs ``fastmcp``,
whose releases ask ``mcp<2``); elsewhere this package runs on 2.x. What differs between the two,
and the one place that knows it:

- Models: 2.x names fields in snake case (``input_schema``, ``is_error``) and also accepts their
  camel-case wire names; 1.x has only the camel-case ones. Tools and results are built from
  their wire form here, which both validate.
- The low-level ``Server``: 2.x takes its handlers as ``on_list_tools``/``on_call_tool``
  (``(context, params)``); 1.x registers them with decorators (``list_tools()``,
  ``call_tool()``, called with ``(name, arguments)``, the request in ``request_context``) and
  checks arguments against the input schema itself unless told not to (the tools check them,
  with their own messages).
- ``StreamableHTTPSessionManager`` takes ``max_request_body_size`` in later releases only (the
  endpoint bounds the body before the SDK sees it anyway).

Upstream change: the MCP Python SDK's v2 (``modelcontextprotocol/python-sdk``, "Migration
guide: v1 to v2"). When ``mcp`` 1.x is no longer needed beside Jupyter AI, this module goes.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import typing as t

from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

#: The installed SDK's major version (1 or 2).
MCP_MAJOR = int(importlib.metadata.version("mcp").split(".", 1)[0])

#: Lists the tools.
ListTools = t.Callable[[], t.Awaitable[list[types.Tool]]]
#: Answers a tool call: (the request's ASGI scope, tool name, arguments) -> result.
CallTool = t.Callable[
    [t.Mapping[str, t.Any], str, t.Mapping[str, t.Any] | None],
    t.Awaitable[types.CallToolResult],
]


def tool(
    name: str,
    description: str,
    input_schema: dict[str, t.Any],
    output_schema: dict[str, t.Any],
    *,
    read_only: bool,
    destructive: bool,
) -> types.Tool:
    """A tool's description (closed world: it touches only the user's tool instances)."""
    return types.Tool.model_validate(
        {
            "name": name,
            "description": description,
            "inputSchema": input_schema,
            "outputSchema": output_schema,
            "annotations": {
                "readOnlyHint": read_only,
                "destructiveHint": destructive,
                "openWorldHint": False,
            },
        }
    )


def tool_result(
    text: str, *, is_error: bool = False, structured: dict[str, t.Any] | None = None
) -> types.CallToolResult:
    """A tool call's result: ``text`` for the model, ``structured`` as the output schema says."""
    wire: dict[str, t.Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if structured is not None:
        wire["structuredContent"] = structured
    return types.CallToolResult.model_validate(wire)


def result_parts(result: types.CallToolResult) -> tuple[bool, str, dict[str, t.Any] | None]:
    """A tool call's result as (is it an error, its text, its structured content)."""
    wire = result.model_dump(by_alias=True)
    text = "\n".join(part.get("text", "") for part in wire.get("content") or ())
    return bool(wire.get("isError")), text, wire.get("structuredContent")


def low_level_server(
    name: str, *, version: str, instructions: str, list_tools: ListTools, call_tool: CallTool
) -> Server[t.Any]:
    """The SDK's low-level server answering ``tools/list`` and ``tools/call`` with these."""
    # (Typed as the installed SDK has it: each branch is the other major version's error.)
    server_class: t.Any = Server
    if MCP_MAJOR >= 2:

        async def on_list_tools(_context: t.Any, _params: t.Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=await list_tools())

        async def on_call_tool(context: t.Any, params: t.Any) -> types.CallToolResult:
            request = context.request
            scope = request.scope if request is not None else {}
            return await call_tool(scope, params.name, params.arguments)

        modern: Server[t.Any] = server_class(
            name,
            version=version,
            instructions=instructions,
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
        )
        return modern
    server = server_class(name, version=version, instructions=instructions)

    async def legacy_call_tool(
        tool_name: str, arguments: dict[str, t.Any] | None
    ) -> types.CallToolResult:
        request = server.request_context.request
        scope = request.scope if request is not None else {}
        return await call_tool(scope, tool_name, arguments)

    server.list_tools()(list_tools)
    server.call_tool(validate_input=False)(legacy_call_tool)
    legacy: Server[t.Any] = server
    return legacy


def stateless_session_manager(server: Server[t.Any], max_body: int) -> StreamableHTTPSessionManager:
    """The SDK's Streamable HTTP transport for ``server``: stateless, one JSON body per POST."""
    options: dict[str, t.Any] = {
        "json_response": True,
        "stateless": True,
        # The Origin check is the tornado handler's (it knows the server's own host).
        "security_settings": TransportSecuritySettings(enable_dns_rebinding_protection=False),
    }
    if "max_request_body_size" in inspect.signature(StreamableHTTPSessionManager).parameters:
        options["max_request_body_size"] = max_body
    return StreamableHTTPSessionManager(app=server, **options)
