"""Agents in tests: create one over REST, and connect to the MCP endpoint with the official SDK.

The tests are written against the SDK's 2.x client (``mcp.Client``, snake-case results). Where
``mcp`` 1.x is installed (beside Jupyter AI: scripts/test-acp.sh) :func:`connect` gives a 1.x
``ClientSession`` seen through the same names, and :data:`MCPError` is 1.x's ``McpError``.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
import traceback
import typing as t

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from jupyter_tool_terminal.agents.mcp_compat import MCP_MAJOR

from ..conftest import Api

if t.TYPE_CHECKING:
    from mcp import Client

#: The error the SDK's client raises for a JSON-RPC error answer.
MCPError: type[Exception] = getattr(
    importlib.import_module("mcp.shared.exceptions"), "MCPError" if MCP_MAJOR >= 2 else "McpError"
)
#: Whether the installed SDK speaks the 2026 protocol era (``mode="auto"``); 1.x does not.
MODERN_ERA = MCP_MAJOR >= 2


def mcp_url(port: int, base_url: str) -> str:
    """The MCP endpoint of the server under test."""
    return f"http://127.0.0.1:{port}{base_url}tool-terminal/mcp"


async def new_agent(owner: Api, name: str = "test agent", *, control: bool = False) -> Agent:
    """A new agent of ``owner`` (with control for 10 minutes if ``control``)."""
    model = await owner.call("POST", "agents", body={"name": name})
    if control:
        await owner.call("POST", "agents", model["id"], "control", body={"minutes": 10})
    return Agent(model["id"], model["token"], owner)


class Agent:
    """An agent credential and its owner's REST access."""

    def __init__(self, agent_id: str, token: str, owner: Api) -> None:
        self.id = agent_id
        self.token = token
        self.owner = owner

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def grant(self, minutes: int = 10) -> None:
        await self.owner.call("POST", "agents", self.id, "control", body={"minutes": minutes})

    async def end_control(self) -> None:
        await self.owner.status("DELETE", "agents", self.id, "control")


@contextlib.contextmanager
def refused_over_http(status: int) -> t.Iterator[None]:
    """The endpoint refuses the SDK client's request with HTTP ``status``: 2.x's client raises
    :data:`MCPError` for the call; 1.x's transport ends the whole connection with the HTTP
    error (wrap the ``connect`` block then)."""
    with pytest.raises(Exception) as caught:  # which one: checked below
        yield
    if MODERN_ERA:
        assert any(isinstance(error, MCPError) for error in _flatten(caught.value)), caught.value
    else:
        assert f"'{status} " in "".join(traceback.format_exception(caught.value))


def _flatten(error: BaseException) -> t.Iterator[BaseException]:
    """``error`` and, if it is an exception group (from leaving a task group), what it holds."""
    yield error
    for inner in getattr(error, "exceptions", ()):
        yield from _flatten(inner)


@contextlib.asynccontextmanager
async def connect(
    url: str, token: str, *, mode: t.Literal["auto", "legacy"] = "legacy"
) -> t.AsyncIterator[Client]:
    """An official MCP SDK client connected to ``url`` as the agent of ``token``."""
    streamable_http = importlib.import_module("mcp.client.streamable_http")
    if not MODERN_ERA:
        async with _legacy_connect(url, token, streamable_http) as client:
            yield client
        return
    import httpx2  # noqa: PLC0415 - the 2.x SDK's HTTP client (1.x uses httpx)
    from mcp import Client  # noqa: PLC0415

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(60.0)
    )
    transport = streamable_http.streamable_http_client(url, http_client=http)
    async with http, Client(transport, mode=mode) as client:
        yield client


@contextlib.asynccontextmanager
async def _legacy_connect(url: str, token: str, streamable_http: t.Any) -> t.AsyncIterator[Client]:
    """``mcp`` 1.x: its ``ClientSession``, answering with 2.x's attribute names."""
    import httpx  # noqa: PLC0415

    mcp: t.Any = importlib.import_module("mcp")
    http = httpx.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx.Timeout(60.0)
    )
    async with (
        http,
        streamable_http.streamable_http_client(url, http_client=http) as (read, write, _),
        mcp.ClientSession(read, write) as session,
    ):
        initialized = await session.initialize()
        yield t.cast("Client", _LegacyClient(session, initialized.protocolVersion))


def _camel(name: str) -> str:
    return re.sub(r"_([a-z])", lambda match: match.group(1).upper(), name)


class _SnakeCase:
    """A 1.x model (camel-case fields) read through 2.x's snake-case names."""

    def __init__(self, model: t.Any) -> None:
        self._model = model

    def __getattr__(self, name: str) -> t.Any:
        value = getattr(self._model, _camel(name))
        if isinstance(value, list):
            return [_snake_case(item) for item in value]
        return _snake_case(value)


def _snake_case(value: t.Any) -> t.Any:
    return _SnakeCase(value) if hasattr(type(value), "model_fields") else value


class _LegacyClient:
    """The part of 2.x's ``mcp.Client`` the tests use, over a 1.x ``ClientSession``."""

    def __init__(self, session: t.Any, protocol_version: str) -> None:
        self.session = _LegacySession(protocol_version)
        self._session = session

    async def list_tools(self) -> t.Any:
        return _SnakeCase(await self._session.list_tools())

    async def call_tool(self, name: str, arguments: dict[str, t.Any]) -> t.Any:
        return _SnakeCase(await self._session.call_tool(name, arguments))


class _LegacySession:
    def __init__(self, protocol_version: str) -> None:
        self.protocol_version = protocol_version


async def raw_post(
    url: str, body: bytes | str, headers: dict[str, str] | None = None, method: str = "POST"
) -> tuple[int, dict[str, t.Any] | None, dict[str, str]]:
    """(status, JSON body or None, headers) of one raw request to the MCP endpoint."""
    all_headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
        **(headers or {}),
    }
    try:
        response = await AsyncHTTPClient().fetch(
            url,
            method=method,
            body=body if method == "POST" else None,
            headers=all_headers,
            request_timeout=60,
        )
    except HTTPClientError as error:
        if error.response is None:
            raise
        response = error.response
    text = response.body or b""
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = {"text": text.decode(errors="replace")}
    return response.code, parsed, dict(response.headers)
