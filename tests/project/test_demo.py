"""README command 1, with and without Docker: the demo serves two tool instances either way.

Runs the demo as a user would (``python -m jupyter_tool_terminal.demo``, which starts
JupyterLab): once with the test machine's Docker Engine, once with ``DOCKER_HOST`` pointing at
nothing; then speaks the contract to it and stops it.
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
import uuid
from pathlib import Path

import docker
import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from ..conftest import REPO
from ..support.terminal_client import TerminalClient

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


@pytest.fixture(params=[pytest.param("docker", marks=pytest.mark.docker), "local"])
def engine(request: pytest.FixtureRequest) -> str:
    """Whether the demo finds a Docker Engine ("docker") or none ("local")."""
    return t.cast(str, request.param)


@pytest.fixture
def owner() -> str:
    """An owner of the demo's own: its container names cannot meet anyone else's."""
    return f"demo-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def demo(
    tmp_path: Path, engine: str, owner: str
) -> t.Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The demo, started as README command 1 starts it."""
    port = _free_port()
    env = {
        **os.environ,
        **({"DOCKER_HOST": "tcp://127.0.0.1:9"} if engine == "local" else {}),
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
            f"--owner={owner}",
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


async def test_the_demo_serves_two_instances_with_or_without_docker(
    demo: tuple[subprocess.Popen[bytes], int], engine: str, owner: str, tmp_path: Path
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
    suffix = f"-{owner}" if engine == "docker" else ""
    course = f"demo-course{suffix}"
    assert [(i["id"], i["runtime"]) for i in instances] == [
        (course, engine),
        (f"demo-sandbox{suffix}", engine),
    ]
    request = HTTPRequest(
        f"{base}/tool-terminal/api/sessions",
        method="POST",
        headers={"Authorization": f"token {TOKEN}"},
        body=json.dumps({"instance": course}),
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
    data = "/data" if engine == "docker" else (tmp_path / "instances" / "course" / "data").resolve()
    assert await term.run("echo $COURSE; pwd") == f"demo\r\n{data}\r\n"
    shell = int((await term.run("echo $$")).strip())
    # Stop JupyterLab as a service manager would; the demo exits with it.
    for child in _children(demo_process.pid):
        os.kill(child, signal.SIGTERM)
    await term.wait_closed(timeout=30)
    assert await asyncio.to_thread(demo_process.wait, 30) == 0
    if engine == "local":
        assert not await asyncio.to_thread(os.path.exists, f"/proc/{shell}")
    else:
        # The demo removes its containers (and their processes with them) when it exits.
        client = await asyncio.to_thread(docker.from_env)
        try:
            left = await asyncio.to_thread(
                client.containers.list, all=True, filters={"name": f"demo-.*-{owner}"}
            )
        finally:
            client.close()
        assert left == []
