"""`jupyter server` stopped by SIGTERM kills every tool terminal's processes before it exits."""

from __future__ import annotations

import asyncio
import json
import signal
import typing as t
from pathlib import Path

from tornado.httpclient import AsyncHTTPClient
from tornado.websocket import websocket_connect

from ..conftest import (
    BASE_PROCESSES,
    InstanceFactory,
    container_processes,
    wait_for_processes,
    wait_until,
)
from ..support.server_process import TOKEN, start_server
from ..support.terminal_client import TerminalClient


async def test_sigterm_with_20_sessions_kills_every_process(
    make_instance: InstanceFactory, tmp_path: Path
) -> None:
    containers = [make_instance(owner="dana"), make_instance(owner="dana")]
    token = TOKEN
    server = start_server(tmp_path, max_sessions_per_user=20)
    process, port, base, headers = server.process, server.port, server.base, server.headers
    try:
        await server.wait_ready()
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


async def test_sigterm_while_sessions_are_being_created(
    make_instance: InstanceFactory, tmp_path: Path
) -> None:
    """Creations in flight when SIGTERM arrives are waited for and killed; later ones are
    refused with 503 and a message, never a 500 or a traceback (issue 10.4)."""
    containers = [make_instance(owner="dana"), make_instance(owner="dana")]
    log = tmp_path / "server.log"
    with log.open("wb") as stderr:
        server = start_server(tmp_path, stderr, max_sessions_per_user=40)
    process, base, headers = server.process, server.base, server.headers
    try:
        await server.wait_ready()
        http = AsyncHTTPClient(force_instance=True, max_clients=40)

        async def create(container: t.Any) -> int:
            try:
                response = await http.fetch(
                    f"{base}/tool-terminal/api/sessions",
                    method="POST",
                    headers=headers,
                    body=json.dumps({"instance": container.name}),
                    raise_error=False,
                )
            except OSError:
                return 0  # the server closed the connection while stopping
            if response.code == 503:
                assert "shutting down" in json.loads(response.body)["message"], response.body
            return response.code

        requests = [asyncio.ensure_future(create(c)) for c in containers * 20]

        async def a_shell_started() -> bool:
            processes = await asyncio.to_thread(container_processes, containers[0])
            return "/bin/sh" in processes

        # The first shells run: the others are on their way through the server and engine.
        await wait_until(a_shell_started, timeout=30)
        process.send_signal(signal.SIGTERM)
        codes = await asyncio.gather(*requests)
        assert await asyncio.to_thread(process.wait, 30) == 0
        assert set(codes) <= {0, 201, 503, 599}, codes
        for container in containers:
            processes = await wait_for_processes(container, BASE_PROCESSES)
            assert set(processes) <= BASE_PROCESSES, processes
        text = log.read_text()
        assert "Traceback" not in text
        # Some sessions were opened, and every one of them was closed again.
        assert 0 < text.count(" opened in ") == text.count(" closed: "), text
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
