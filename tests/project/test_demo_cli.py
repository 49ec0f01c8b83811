"""The demo (``python -m jupyter_tool_terminal.demo``) as a person runs it: its errors, its help
and every way it ends (Ctrl-C, kill, a closed terminal, a dead pipe, its shell dying)."""

from __future__ import annotations

import contextlib
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
import docker.errors
import pytest

from ..conftest import TEST_IMAGE

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


def _default_signals() -> None:
    """In a demo's process, before it runs: the signals it is stopped with act by default.

    A process inherits ignored signals, and the test run may have been started with SIGINT (a
    background job of a script) or SIGHUP (``nohup``) ignored: the demo must then still see
    what a person's terminal would send it.
    """
    for number in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped by init, does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


class _Demo:
    """A demo started as a person starts it, on a free port, with its own Jupyter directories."""

    def __init__(self, tmp_path: Path, owner: str, *, under_shell: bool, output: t.Any) -> None:
        self.runtime = tmp_path / "runtime"
        env = {
            **os.environ,
            "JUPYTER_RUNTIME_DIR": str(self.runtime),
            "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
            "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
            "JUPYTER_PLATFORM_DIRS": "1",
        }
        command = [
            *DEMO,
            "--image",
            TEST_IMAGE,
            "--owner",
            owner,
            "--no-browser",
            f"--port={_free_port()}",
            "--ServerApp.port_retries=0",
            "--ip=127.0.0.1",
        ]
        if under_shell:
            # The user's shell, which will die: the demo is its job, not this test's child.
            command = ["bash", "-c", '"$@" & wait', "shell", *command]
        # Its own process group, as a shell runs a foreground job: Ctrl-C signals the whole group.
        self.process = subprocess.Popen(
            command,
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_default_signals,  # noqa: PLW1509 - only signal.signal runs in the child
        )
        self.under_shell = under_shell

    def wait_started(self) -> None:
        """Wait until JupyterLab serves; note its pid and its configuration file."""
        deadline = time.monotonic() + 90
        while not list(self.runtime.glob("jpserver-*.json")):
            assert self.process.poll() is None, "the demo ended before JupyterLab started"
            assert time.monotonic() < deadline, "JupyterLab did not start"
            time.sleep(0.2)
        info = json.loads(next(self.runtime.glob("jpserver-*.json")).read_text())
        self.lab_pid = int(info["pid"])
        arguments = Path(f"/proc/{self.lab_pid}/cmdline").read_bytes().decode().split("\0")
        self.config = Path(next(a for a in arguments if a.startswith("--config=")).split("=", 1)[1])
        assert self.config.exists()
        self.demo_pid = self.process.pid
        if self.under_shell:
            children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
            (self.demo_pid,) = (int(pid) for pid in children.read_text().split())

    def kill(self) -> None:
        """Whatever the test did, leave no process behind."""
        for pid in (self.process.pid, getattr(self, "demo_pid", 0), getattr(self, "lab_pid", 0)):
            if pid and _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.process.wait()


def _ctrl_c(demo: _Demo) -> None:
    os.killpg(demo.process.pid, signal.SIGINT)


def _sigterm(demo: _Demo) -> None:
    os.kill(demo.demo_pid, signal.SIGTERM)


def _terminal_closed(demo: _Demo) -> None:
    # What a closed window or `tmux kill-session` sends the terminal's foreground job.
    os.killpg(demo.process.pid, signal.SIGHUP)


def _parent_shell_killed(demo: _Demo) -> None:
    os.kill(demo.process.pid, signal.SIGKILL)


ENDINGS = {
    "ctrl-c": _ctrl_c,
    "sigterm": _sigterm,
    "terminal closed (sighup)": _terminal_closed,
    "parent shell killed": _parent_shell_killed,
    "dead pipe, then ctrl-c": _ctrl_c,
}


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_every_way_a_demo_ends_stops_jupyterlab_and_removes_what_it_made(
    ending: str, tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    owner = f"jtt-demo-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "demo.log"
    reader = None
    if ending.startswith("dead pipe"):
        # `demo.sh 2>&1 | tee log`: the demo writes into a pipe whose reader Ctrl-C ends too.
        reader = subprocess.Popen(
            ["tee", str(log)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
        )
        output: t.Any = reader.stdin
    else:
        output = log.open("wb")
    demo = _Demo(tmp_path, owner, under_shell=ending == "parent shell killed", output=output)
    output.close()
    try:
        demo.wait_started()
        if reader is not None:
            reader.kill()
            reader.wait()
        ENDINGS[ending](demo)
        assert _wait_gone(demo.demo_pid, 60), "the demo did not end"
        jupyterlab_stopped = _wait_gone(demo.lab_pid, 10)
        left = [container.name for container in _containers_of(docker_client, owner)]
    finally:
        demo.kill()
        for container in _containers_of(docker_client, owner):
            container.remove(force=True)
    output_text = log.read_text(errors="replace")
    assert jupyterlab_stopped, output_text
    assert left == [], output_text
    assert not demo.config.parent.exists(), output_text
    assert not list(demo.runtime.glob("jpserver-*")), output_text
    if ending == "ctrl-c":
        assert demo.process.returncode == 0, output_text
        assert "Shut down this Jupyter server" not in output_text
    assert "Traceback" not in output_text


def _containers_of(client: docker.DockerClient, owner: str) -> list[t.Any]:
    return t.cast(
        "list[t.Any]",
        client.containers.list(all=True, filters={"label": f"jupyter-tool-terminal.owner={owner}"}),
    )
