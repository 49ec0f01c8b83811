"""Agents in tests: create one over REST, and connect to the MCP endpoint with the official SDK."""

from __future__ import annotations

import contextlib
import json
import typing as t

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from .conftest import Api


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


@contextlib.asynccontextmanager
async def connect(
    url: str, token: str, *, mode: t.Literal["auto", "legacy"] = "legacy"
) -> t.AsyncIterator[Client]:
    """An official MCP SDK client connected to ``url`` as the agent of ``token``."""
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(60.0)
    )
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        yield client


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
