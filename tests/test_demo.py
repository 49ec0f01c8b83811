"""README command 1 without Docker: the demo serves two local tool instances.

Runs the demo as a user would (``python -m jupyter_tool_terminal.demo``, which starts
JupyterLab) with ``DOCKER_HOST`` pointing at nothing, then speaks the contract to it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import typing as t
from pathlib import Path

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from .conftest import REPO
from .terminal_client import TerminalClient

TOKEN = "demo-test-token"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as file:
            found += [int(child) for child in file.read().split()]
    return found


async def _get(url: str) -> t.Any:
    request = HTTPRequest(url, headers={"Authorization": f"token {TOKEN}"}, request_timeout=5)
    response = await AsyncHTTPClient().fetch(request)
    return json.loads(response.body)


@pytest.fixture
def demo(tmp_path: Path) -> t.Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The demo, started as README command 1 starts it, on a machine without Docker."""
    port = _free_port()
    env = {
        **os.environ,
        "DOCKER_HOST": "tcp://127.0.0.1:9",
        "PYTHONPATH": str(REPO),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter_tool_terminal.demo",
            f"--local-root={tmp_path / 'instances'}",
            "--no-browser",
            f"--port={port}",
            "--ip=127.0.0.1",
            f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={tmp_path}",
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        yield process, port
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


async def test_the_demo_runs_local_instances_without_docker(
    demo: tuple[subprocess.Popen[bytes], int], tmp_path: Path
) -> None:
    demo_process, port = demo
    base = f"http://127.0.0.1:{port}"
    # Wait for the server to answer (a process outside the test: nothing to await but it).
    deadline = time.monotonic() + 90
    while True:
        assert demo_process.poll() is None, (
            demo_process.stdout.read().decode() if demo_process.stdout else ""
        )
        try:
            instances = await _get(f"{base}/tool-terminal/api/instances")
            break
        except (HTTPClientError, OSError):
            assert time.monotonic() < deadline, "the demo did not start"
            await asyncio.sleep(0.2)
    assert [(i["id"], i["runtime"]) for i in instances] == [
        ("demo-course", "local"),
        ("demo-sandbox", "local"),
    ]
    request = HTTPRequest(
        f"{base}/tool-terminal/api/sessions",
        method="POST",
        headers={"Authorization": f"token {TOKEN}"},
        body=json.dumps({"instance": "demo-course"}),
    )
    model = json.loads((await AsyncHTTPClient().fetch(request)).body)
    ws = await websocket_connect(
        HTTPRequest(
            f"ws://127.0.0.1:{port}/tool-terminal/websocket/{model['id']}",
            headers={"Authorization": f"token {TOKEN}"},
        )
    )
    term = TerminalClient(ws)
    assert await term.next_frame() == ["setup", {}]
    await term.expect("Welcome to the course sandbox")
    assert await term.run("echo $COURSE; pwd") == (
        f"demo\r\n{(tmp_path / 'instances' / 'course' / 'data').resolve()}\r\n"
    )
    shell = int((await term.run("echo $$")).strip())
    # Stop JupyterLab as a service manager would; the demo exits with it.
    for child in _children(demo_process.pid):
        os.kill(child, signal.SIGTERM)
    await term.wait_closed(timeout=30)
    assert await asyncio.to_thread(demo_process.wait, 30) == 0
    assert not await asyncio.to_thread(os.path.exists, f"/proc/{shell}")
