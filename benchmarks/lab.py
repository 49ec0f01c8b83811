"""Everything a run starts, and its removal: labelled busybox containers and jupyter_server
processes (each in a home of its own, with lagprobe loaded), and waits until they are ready or,
for the engine, idle again. It measures nothing itself; what the servers are configured as is
``references.py``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import typing as t
from pathlib import Path

import docker
import psutil
from tornado import httpclient

from common import HERE, IMAGE, OWNER, REPO, RUN_LABEL, TOOL, BenchError, Target


def free_port() -> int:
    """A TCP port free on loopback now, for a server to listen on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclasses.dataclass
class Server:
    """One jupyter_server this run started: its process, its target, its home (and log)."""

    name: str
    process: subprocess.Popen[bytes]
    target: Target
    home: Path

    def log_tail(self) -> str:
        """The end of the server's log, for an error message."""
        with contextlib.suppress(OSError):
            return (self.home / "server.log").read_text(errors="replace")[-3000:]
        return ""


class Lab:
    """Everything the benchmark started; ``cleanup`` removes it all."""

    def __init__(self) -> None:
        self.run_id = secrets.token_hex(4)
        self._engine: t.Any = None
        self.servers: list[Server] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="jtt-bench-"))

    @property
    def docker(self) -> t.Any:
        """The Docker SDK's client, made when first needed: the local runtime and A are
        measured on machines without Docker too."""
        if self._engine is None:
            self._engine = docker.from_env()
        return self._engine

    def container(self, name: str) -> str:
        """Start a labelled busybox tool instance; returns its name."""
        try:
            self.docker.images.get(IMAGE)
        except docker.errors.ImageNotFound:
            subprocess.run(["bash", str(REPO / "scripts/build-test-image.sh"), IMAGE], check=True)
        full = f"jtt-bench-{self.run_id}-{name}"
        self.docker.containers.run(
            IMAGE,
            name=full,
            detach=True,
            init=True,
            network_mode="none",
            labels={
                "jupyter-tool-terminal.owner": OWNER,
                "jupyter-tool-terminal.tool": TOOL,
                RUN_LABEL: self.run_id,
            },
        )
        return full

    def wait_engine_idle(self, container: str, timeout: float = 300.0) -> tuple[float, int]:
        """Wait until ``container``'s process count holds still and the engine answers at once;
        returns the seconds that took and the count. Hundreds of execs ending together keep
        dockerd busy for minutes (it answered nothing for four minutes after 500 raw exec
        sockets closed at once): the next measurement must not pay for the previous one. The
        count need not return to the container's own two processes: B's closes leave their
        shells running in the container (terminado kills only the docker CLI)."""
        start = time.monotonic()
        last = -1
        while time.monotonic() - start < timeout:
            asked = time.monotonic()
            with contextlib.suppress(docker.errors.DockerException, OSError):
                count = len(self.docker.api.top(container).get("Processes") or [])
                if time.monotonic() - asked < 0.5 and count == last:
                    break
                last = count
            time.sleep(1.0)
        return round(time.monotonic() - start, 1), last

    def start_server(
        self,
        name: str,
        kind: str,
        config: str,
        container: str = "",
        python_args: t.Sequence[str] = (),
        code: str = "",
    ) -> Server:
        """Start a jupyter_server with ``config`` (``kind``: ``tool`` or ``terminado`` says which
        extension it loads; lagprobe is always loaded), in a home of its own; not yet ready.
        ``python_args`` go to its interpreter before ``-m jupyter_server`` (a profiler);
        ``code``, a directory holding another version of the package, runs that version."""
        home = self.tmp / name
        (home / "config").mkdir(parents=True)
        (home / "runtime").mkdir()
        port, token = free_port(), secrets.token_hex(16)
        extensions = {
            "jupyter_tool_terminal": kind == "tool",
            "jupyter_server_terminals": kind == "terminado",
            "jupyterlab": False,
            "jupyter_lsp": False,
            "notebook_shim": False,
            "lagprobe": True,
        }
        (home / "jupyter_server_config.py").write_text(
            f"c.ServerApp.ip = '127.0.0.1'\n"
            f"c.ServerApp.port = {port}\n"
            f"c.ServerApp.port_retries = 0\n"
            f"c.ServerApp.open_browser = False\n"
            f"c.ServerApp.allow_root = True\n"
            f"c.ServerApp.root_dir = {str(home)!r}\n"
            f"c.IdentityProvider.token = {token!r}\n"
            f"c.ServerApp.jpserver_extensions = {extensions!r}\n"
            f"c.ServerApp.log_level = 'WARN'\n"
            f"c.Application.log_level = 'WARN'\n" + config
        )
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("JUPYTER", "JPY_")) and key != "SHELL"
        }
        env.update(
            JUPYTER_CONFIG_DIR=str(home / "config"),
            JUPYTER_RUNTIME_DIR=str(home / "runtime"),
            JUPYTER_PLATFORM_DIRS="1",
            SHELL="/bin/sh",
            PYTHONPATH=os.pathsep.join(
                filter(None, [code, os.environ.get("PYTHONPATH"), str(HERE)])
            ),
        )
        log = (home / "server.log").open("wb")
        process = subprocess.Popen(
            [
                sys.executable,
                *python_args,
                "-m",
                "jupyter_server",
                f"--config={home / 'jupyter_server_config.py'}",
            ],
            cwd=home,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        target = Target(
            name, kind, f"http://127.0.0.1:{port}", token, container, server_pid=process.pid
        )
        server = Server(name, process, target, home)
        self.servers.append(server)
        return server

    async def wait_ready(self, server: Server, timeout: float = 90.0) -> None:
        """Wait until ``server`` answers ``/api/status``; fail if it exits or takes too long."""
        http = httpclient.AsyncHTTPClient()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if server.process.poll() is not None:
                raise BenchError(f"server {server.name} exited:\n{server.log_tail()}")
            with contextlib.suppress(Exception):
                response = await http.fetch(
                    server.target.base + "/api/status",
                    headers=server.target.headers(),
                    request_timeout=5,
                    raise_error=False,
                )
                if response.code == 200:
                    return
            await asyncio.sleep(0.2)
        raise BenchError(
            f"server {server.name} did not answer in {timeout} s:\n{server.log_tail()}"
        )

    def cleanup(self) -> None:
        """Stop every server and remove every container of this run, and the temporary files."""
        for server in self.servers:
            self._stop(server)
        if self._engine is not None:
            with contextlib.suppress(Exception):
                for container in self._engine.containers.list(
                    all=True, filters={"label": f"{RUN_LABEL}={self.run_id}"}
                ):
                    with contextlib.suppress(Exception):
                        container.remove(force=True)
            with contextlib.suppress(Exception):
                self._engine.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @staticmethod
    def _stop(server: Server) -> None:
        process = server.process
        if process.poll() is not None:
            return
        try:
            children = psutil.Process(process.pid).children(recursive=True)
        except psutil.Error:
            children = []
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        for child in children:
            with contextlib.suppress(psutil.Error):
                child.kill()
