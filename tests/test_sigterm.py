"""`jupyter server` stopped by SIGTERM kills every tool terminal's processes before it exits."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import typing as t
from pathlib import Path

from tornado.httpclient import AsyncHTTPClient
from tornado.websocket import websocket_connect

from .conftest import BASE_PROCESSES, InstanceFactory, wait_for_processes
from .terminal_client import TerminalClient


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _wait_for_server(url: str, headers: dict[str, str], process: t.Any) -> None:
    client = AsyncHTTPClient()
    for _ in range(300):
        assert process.poll() is None, "jupyter server exited early"
        try:
            await client.fetch(url, headers=headers)
            return
        except OSError:
            await asyncio.sleep(0.1)
    msg = "jupyter server did not start"
    raise AssertionError(msg)


async def test_sigterm_with_20_sessions_kills_every_process(
    make_instance: InstanceFactory, tmp_path: Path
) -> None:
    containers = [make_instance(owner="dana"), make_instance(owner="dana")]
    port, token = _free_port(), "sigterm-test-token"
    config = tmp_path / "jupyter_server_config.json"
    config.write_text(
        json.dumps(
            {
                "ServerApp": {
                    "port": port,
                    "ip": "127.0.0.1",
                    "open_browser": False,
                    "allow_root": True,
                },
                "IdentityProvider": {"token": token},
                "ToolTerminalApp": {
                    "owner": "dana",
                    "tool_types": {"sandbox": {}},
                    "max_sessions_per_user": 20,
                },
            }
        )
    )
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path), "JUPYTER_RUNTIME_DIR": str(tmp_path)}
    process = subprocess.Popen(  # noqa: ASYNC220 - Popen returns at once; waits are threaded
        [
            sys.executable,
            "-m",
            "jupyter_server",
            f"--config={config}",
            "--ServerApp.jpserver_extensions={'jupyter_tool_terminal': True}",
            f"--ServerApp.root_dir={tmp_path}",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"token {token}"}
        await _wait_for_server(f"{base}/api/status", headers, process)
        http = AsyncHTTPClient()
        terminals = []
        for container in containers * 10:
            response = await http.fetch(
                f"{base}/tool-terminal/api/sessions",
                method="POST",
                headers=headers,
                body=json.dumps({"instance": container.name}),
            )
            session = json.loads(response.body)
            ws = await websocket_connect(
                f"ws://127.0.0.1:{port}/tool-terminal/websocket/{session['id']}?token={token}"
            )
            term = TerminalClient(ws)
            term.send("stdin", "sleep 3001 &\r")
            await term.run("true")
            terminals.append(term)
        process.send_signal(signal.SIGTERM)
        for term in terminals:
            await term.wait_closed(timeout=10)
        assert await asyncio.to_thread(process.wait, 15) == 0
        for container in containers:
            processes = await wait_for_processes(container, BASE_PROCESSES)
            assert set(processes) <= BASE_PROCESSES, processes
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
