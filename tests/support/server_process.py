"""A real `jupyter server` with the extension, run as a subprocess that a test can stop or kill."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
import typing as t
from pathlib import Path

from tornado.httpclient import AsyncHTTPClient
from tornado.websocket import websocket_connect

from .terminal_client import TerminalClient

TOKEN = "server-process-test-token"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclasses.dataclass
class ServerProcess:
    """One `jupyter server` subprocess owned by dana, configured in its own folder."""

    process: subprocess.Popen[bytes]
    port: int
    #: The server's base URL (its `ServerApp.base_url`), with its slashes.
    base_url: str = "/"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.base_url.rstrip('/')}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {TOKEN}"}

    async def wait_ready(self) -> None:
        """Wait until the server answers (it fails the test if it exits first)."""
        client = AsyncHTTPClient()
        # A minute: on two busy cores a server was measured to take 13 s, and once over 30.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "jupyter server exited early"
            try:
                await client.fetch(f"{self.base}/api/status", headers=self.headers)
                return
            except OSError:
                await asyncio.sleep(0.1)
        msg = "jupyter server did not start"
        raise AssertionError(msg)

    async def create_session(self, instance: str) -> dict[str, t.Any]:
        response = await AsyncHTTPClient().fetch(
            f"{self.base}/tool-terminal/api/sessions",
            method="POST",
            headers=self.headers,
            body=json.dumps({"instance": instance}),
        )
        session: dict[str, t.Any] = json.loads(response.body)
        return session

    async def sessions(self) -> list[str]:
        """The ids of the caller's sessions."""
        response = await AsyncHTTPClient().fetch(
            f"{self.base}/tool-terminal/api/sessions", headers=self.headers
        )
        return [session["id"] for session in json.loads(response.body)]

    async def delete_session(self, session_id: str) -> int:
        response = await AsyncHTTPClient().fetch(
            f"{self.base}/tool-terminal/api/sessions/{session_id}",
            method="DELETE",
            headers=self.headers,
        )
        return response.code

    async def instances(self) -> list[str]:
        """The ids of the tool instances the server lists for dana."""
        response = await AsyncHTTPClient().fetch(
            f"{self.base}/tool-terminal/api/instances", headers=self.headers
        )
        return [instance["id"] for instance in json.loads(response.body)]

    async def connect(self, session_id: str) -> TerminalClient:
        """A WebSocket client attached to the session ``session_id``."""
        ws = await websocket_connect(
            f"ws://127.0.0.1:{self.port}{self.base_url.rstrip('/')}/tool-terminal/websocket/"
            f"{session_id}?token={TOKEN}"
        )
        return TerminalClient(ws)

    async def terminal(self, instance: str) -> tuple[dict[str, t.Any], TerminalClient]:
        """A new session in ``instance`` and a WebSocket client attached to it."""
        session = await self.create_session(instance)
        return session, await self.connect(session["id"])

    def kill(self) -> None:
        """SIGKILL the server (no clean-up of its own runs) and collect it."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        """End the server if it still runs (SIGTERM, then SIGKILL); for a test's clean-up."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_server(
    folder: Path,
    stderr: t.Any = subprocess.DEVNULL,
    port: int | None = None,
    base_url: str = "/",
    **tool_terminal: t.Any,
) -> ServerProcess:
    """Start a real `jupyter server` with the extension, owned by dana, configured (and with
    its runtime directory) in ``folder``, on ``port`` (default: a free one) at ``base_url``;
    ``tool_terminal`` adds (or replaces) ToolTerminalApp settings."""
    folder.mkdir(parents=True, exist_ok=True)
    port = _free_port() if port is None else port
    config = folder / "jupyter_server_config.json"
    config.write_text(
        json.dumps(
            {
                "ServerApp": {
                    "port": port,
                    "ip": "127.0.0.1",
                    "open_browser": False,
                    "allow_root": True,
                    "base_url": base_url,
                },
                "IdentityProvider": {"token": TOKEN},
                "ToolTerminalApp": {
                    "owner": "dana",
                    "tool_types": {"sandbox": {}},
                    **tool_terminal,
                },
                # Nothing of a server is left once its last session ends (as in conftest's
                # docker_runtime_config): the leases end with the last shell.
                "DockerRuntime": {"lease_linger": 0},
            }
        )
    )
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(folder), "JUPYTER_RUNTIME_DIR": str(folder)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter_server",
            f"--config={config}",
            "--ServerApp.jpserver_extensions={'jupyter_tool_terminal': True}",
            f"--ServerApp.root_dir={folder}",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    return ServerProcess(process, port, base_url)


async def add_server(
    servers: list[ServerProcess], folder: Path, **settings: t.Any
) -> ServerProcess:
    """Start a server as :func:`start_server` does, put it in ``servers`` (for their clean-up)
    and wait until it answers."""
    server = start_server(folder, **settings)
    servers.append(server)
    await server.wait_ready()
    return server


@contextlib.contextmanager
def running_servers() -> t.Iterator[list[ServerProcess]]:
    """A list to put started servers in; every one still running is stopped at the end."""
    servers: list[ServerProcess] = []
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()
