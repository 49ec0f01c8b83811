"""The demo (``python -m jupyter_tool_terminal.demo``) as a person runs it: its errors, its help
and its Ctrl-C."""

from __future__ import annotations

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
import docker.errors

from .conftest import TEST_IMAGE

DEMO = [sys.executable, "-m", "jupyter_tool_terminal.demo"]


def _run_demo(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DEMO, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_without_an_engine_the_demo_says_so_in_one_line(tmp_path: Path) -> None:
    # `--version` goes to jupyter lab, which prints it and exits: the demo's own words remain.
    missing = f"unix://{tmp_path}/no-engine.sock"
    result = _run_demo(
        ["--local-root", str(tmp_path / "instances"), "--version"],
        {**os.environ, "DOCKER_HOST": missing},
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if "Docker Engine" in line]
    assert len(lines) == 1, result.stdout
    assert missing in lines[0]
    assert "DOCKER_HOST" in lines[0]


def test_the_demo_help_names_itself_and_where_other_arguments_go() -> None:
    result = _run_demo(["--help"], dict(os.environ))
    assert result.returncode == 0
    assert result.stdout.startswith("usage: python -m jupyter_tool_terminal.demo")
    assert "demo.py" not in result.stdout
    assert "jupyter lab" in " ".join(result.stdout.split())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_ctrl_c_shuts_jupyterlab_down_cleanly(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    owner = f"jtt-demo-{uuid.uuid4().hex[:8]}"
    runtime = tmp_path / "runtime"
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    port = _free_port()
    # Its own process group, as a shell runs a foreground job: Ctrl-C signals the whole group.
    demo = subprocess.Popen(
        [
            *DEMO,
            "--image",
            TEST_IMAGE,
            "--owner",
            owner,
            "--no-browser",
            f"--port={port}",
            "--ServerApp.port_retries=0",
            "--ip=127.0.0.1",
        ],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while not list(runtime.glob("jpserver-*.json")):
            assert demo.poll() is None, demo.communicate()[0]
            assert time.monotonic() < deadline, "JupyterLab did not start"
            time.sleep(0.2)
        os.killpg(demo.pid, signal.SIGINT)
        output, _ = demo.communicate(timeout=60)
        left = [container.name for container in _containers_of(docker_client, owner)]
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
        for container in _containers_of(docker_client, owner):
            container.remove(force=True)
    assert demo.returncode == 0, output
    assert "Shut down this Jupyter server" not in output
    assert not list(runtime.glob("jpserver-*")), output
    assert left == [], output


def _containers_of(client: docker.DockerClient, owner: str) -> list[t.Any]:
    return t.cast(
        "list[t.Any]",
        client.containers.list(all=True, filters={"label": f"jupyter-tool-terminal.owner={owner}"}),
    )
