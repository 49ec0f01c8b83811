"""The service as an *external* Hub service: a Hub restart leaves its terminals running.

A Hub stops the services it manages when it stops. Run under its own process manager (the
systemd unit in docs/source/howto/jupyterhub-service.md), the service is untouched by a Hub
restart: the terminal's WebSocket drops with the proxy, the session waits for its client
(`disconnect_grace`), and once the Hub is back the browser reattaches to the same shell,
screen and running programs.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import typing as t
from pathlib import Path

import pytest

from jupyter_tool_terminal.hub.service import external_service_environment

from ..conftest import BASE_PROCESSES, InstanceFactory, wait_for_processes
from ..support.hub import (
    REPO,
    Browser,
    Hub,
    engine_environment,
    free_port,
    service_roles,
    wait_for_service,
)
from ..support.terminal_client import TerminalClient

SERVICE = "tool-terminal"
PREFIX = f"/services/{SERVICE}/"
SERVICE_TOKEN = "jtt-test-external-service-token-0123456789"


def _hub_config(service_port: int) -> str:
    return f"""
c.JupyterHub.services.append(
    {{
        "name": {SERVICE!r},
        "url": "http://127.0.0.1:{service_port}",
        "api_token": {SERVICE_TOKEN!r},
        "oauth_no_confirm": True,
    }}
)
{service_roles(SERVICE)}"""


class ExternalService:
    """The service started as its process manager would start it, outside the Hub."""

    def __init__(
        self,
        directory: Path,
        hub: Hub,
        port: int,
        *,
        tool_types: t.Sequence[str] = ("sandbox",),
        arguments: t.Sequence[str] = (),
        name: str = "service",
    ) -> None:
        """Start the service in ``directory`` (its home); ``name`` names its config file and
        log, ``arguments`` are added to its command line."""
        self.directory = directory
        self.port = port
        config = directory / f"{name}_config.py"
        shells = {tool: {"shell": ["/bin/sh"]} for tool in tool_types}
        config.write_text(
            "c = get_config()  # noqa\n"
            'c.ToolTerminalApp.runtime = "docker"\n'
            f"c.ToolTerminalApp.tool_types = {shells!r}\n"
            # Nothing of the service is left once a session ends (conftest's
            # docker_runtime_config).
            "c.DockerRuntime.lease_linger = 0\n"
        )
        environment = external_service_environment(
            name=SERVICE,
            url=f"http://127.0.0.1:{port}",
            api_url=f"http://127.0.0.1:{hub.hub_port}/hub/api",
            api_token=SERVICE_TOKEN,
        )
        self.log = directory / f"{name}.log"
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "jupyter_tool_terminal.hub.service",
                    "--ServerApp.allow_root=True",
                    f"--config={config}",
                    *arguments,
                ],
                cwd=directory,
                env={
                    **engine_environment(),
                    "PATH": os.environ["PATH"],
                    "PYTHONPATH": str(REPO),
                    "HOME": str(directory),
                    **environment,
                },
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def stop(self) -> None:
        """Stop it as its process manager does (SIGTERM)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@pytest.fixture
def external(tmp_path_factory: pytest.TempPathFactory) -> t.Iterator[tuple[Hub, ExternalService]]:
    """A Hub, and the service outside it (in a directory the Hub's clean-up never touches)."""
    service_port = free_port()
    hub = Hub(tmp_path_factory.mktemp("hub-external") / "hub", _hub_config(service_port))
    service = None
    try:
        hub.start()
        service = ExternalService(tmp_path_factory.mktemp("external-service"), hub, service_port)
        wait_for_service(hub, PREFIX)
        yield hub, service
    finally:
        hub.stop()
        if service is not None:
            service.stop()


async def _reattach(browser: Browser, session_id: str) -> TerminalClient:
    socket = await browser.websocket(f"{PREFIX}tool-terminal/websocket/{session_id}")
    client = TerminalClient(socket)
    assert await client.next_frame() == ["setup", {}]
    return client


@pytest.mark.timeout(300)  # the Hub starts twice
async def test_a_hub_restart_leaves_the_external_services_terminals_running(
    external: tuple[Hub, ExternalService], make_instance: InstanceFactory
) -> None:
    hub, service = external
    hers = make_instance(owner="alice")
    alice = Browser(hub, "alice")
    await alice.service_login(PREFIX)
    model, term = await alice.terminal(PREFIX, hers.name)
    shell = (await term.run("sleep 1000 & echo SHELL-$$")).strip().splitlines()[-1]
    assert shell.startswith("SHELL-")

    await asyncio.to_thread(hub.stop)
    # The proxy went with the Hub: the browser's connection drops.
    await term.wait_closed(timeout=30)
    assert service.process.poll() is None, service.log.read_text()[-2000:]
    started = time.monotonic()
    await asyncio.to_thread(hub.start)
    await asyncio.to_thread(wait_for_service, hub, PREFIX)
    assert time.monotonic() - started < 60  # well within disconnect_grace

    # The browser comes back with the cookies it has: the same shell, screen and job.
    again = await _reattach(alice, model["id"])
    await again.expect(shell)
    assert (await again.run("echo SHELL-$$")).strip() == shell
    assert "sleep 1000" in await again.run("ps")
    again.ws.close()
    status, sessions = await alice.json("GET", f"{PREFIX}tool-terminal/api/sessions")
    assert status == 200, sessions
    assert [item["id"] for item in sessions] == [model["id"]], json.dumps(sessions)


@pytest.mark.timeout(300)
async def test_a_take_over_hands_the_services_terminals_to_its_successor(
    external: tuple[Hub, ExternalService], make_instance: InstanceFactory
) -> None:
    """`jupyter-tool-terminal-service --take-over` with a tool type more: the same shell."""
    hub, service = external
    hers = make_instance(owner="alice")
    added = make_instance(owner="alice", tool="handover-added")
    alice = Browser(hub, "alice")
    await alice.service_login(PREFIX)
    model, term = await alice.terminal(PREFIX, hers.name)
    shell = (await term.run("sleep 1000 & echo SHELL-$$")).strip().splitlines()[-1]
    assert shell.startswith("SHELL-")

    successor = ExternalService(
        service.directory,
        hub,
        service.port,
        tool_types=("sandbox", "handover-added"),
        arguments=["--take-over"],
        name="successor",
    )
    try:
        await term.wait_closed(timeout=60)
        assert await asyncio.to_thread(service.process.wait, 60) == 0
        again = await _reattach(alice, model["id"])
        await again.expect(shell)
        assert (await again.run("echo SHELL-$$")).strip() == shell
        assert "sleep 1000" in await again.run("ps")
        status, instances = await alice.json("GET", f"{PREFIX}tool-terminal/api/instances")
        assert status == 200, instances
        assert {hers.name, added.name} <= {item["id"] for item in instances}
        status, _ = await alice.json("DELETE", f"{PREFIX}tool-terminal/api/sessions/{model['id']}")
        assert status == 204
        processes = await wait_for_processes(hers, BASE_PROCESSES, timeout=10)
        assert set(processes) <= BASE_PROCESSES, processes
    finally:
        successor.stop()
