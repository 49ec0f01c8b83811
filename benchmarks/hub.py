"""The JupyterHub service against the user's own server: one real Hub, both modes side by side.

Open, echo and flood of the tool-terminal service (``/services/tool-terminal/``) and of alice's
server with the extension, both through the proxy with a Hub token; the service must stay within
10% of the per-user server (``service_over_per_user``).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import tempfile
import time
import typing as t
from pathlib import Path

import docker

from client import Client
from common import IMAGE, REPO, TOOL, Plan, Target
from echo import measure_echoes
from flood import measure_floods
from opens import measure_opens


async def measure_hub_modes(client: Client, plan: Plan) -> dict[str, t.Any]:
    """A terminal through the JupyterHub service against one in the user's own server.

    One real Hub (with configurable-http-proxy) runs both: the tool-terminal service at
    /services/tool-terminal/ and alice's server with the extension and the engine. Both are
    reached the same way, through the proxy with a Hub token, and measured with the same
    open, echo and flood paths; the service must stay within 10% of the per-user server.
    """
    sys.path.insert(0, str(REPO))
    from tests.support.hub import running_hub, service_mode_config  # noqa: PLC0415 - test helpers

    engine = docker.from_env()
    container = await asyncio.to_thread(
        engine.containers.run,
        IMAGE,
        name=f"jtt-bench-hub-{secrets.token_hex(4)}",
        detach=True,
        init=True,
        network_mode="none",
        labels={"jupyter-tool-terminal.owner": "alice", "jupyter-tool-terminal.tool": TOOL},
    )
    tool_types = f"c.ToolTerminalApp.tool_types = {{{TOOL!r}: {{'shell': ['/bin/sh']}}}}\n"
    figures: dict[str, t.Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="jtt-bench-hub-") as directory:
            config = service_mode_config(
                Path(directory),
                "tool-terminal",
                service_config=tool_types,
                # The per-user server holds the engine itself and serves its own terminals.
                user_config=tool_types + "c.ToolTerminalApp.service_url = ''\n",
                user_environment={"DOCKER_HOST": os.environ.get("DOCKER_HOST", "")},
                # Both modes as deployed: the service keeps its leases as the per-user server.
                lease_linger=None,
            )
            running = running_hub(Path(directory), config)
            hub = await asyncio.to_thread(running.__enter__)
            try:
                await asyncio.to_thread(hub.start_server, "alice")
                token, _ = await asyncio.to_thread(hub.new_token, "alice")
                targets = [
                    Target(
                        "per-user",
                        "tool",
                        f"{hub.url}/user/alice",
                        token,
                        container.name,
                        hop=False,
                    ),
                    Target(
                        "service",
                        "tool",
                        f"{hub.url}/services/tool-terminal",
                        token,
                        container.name,
                        hop=False,
                    ),
                ]
                deadline = time.monotonic() + 60
                for target in targets:
                    while True:  # the managed service may still be starting
                        try:
                            term, _ = await client.open(target)
                            await client.close_term(target, term)
                            break
                        except Exception:
                            if time.monotonic() > deadline:
                                raise
                            await asyncio.sleep(0.5)
                for name, measure in (
                    ("open", measure_opens),
                    ("echo", measure_echoes),
                    ("flood", measure_floods),
                ):
                    for key, found in (await measure(client, targets, plan)).items():
                        figures.setdefault(key, {})[name] = found
            finally:
                await asyncio.to_thread(running.__exit__, None, None, None)
    finally:
        await asyncio.to_thread(container.remove, force=True)
        engine.close()
    user, service = figures["per-user"], figures["service"]
    figures["service_over_per_user"] = {
        "open_p50": round(service["open"]["p50_ms"] / user["open"]["p50_ms"], 3),
        "echo_p50": round(service["echo"]["p50_ms"] / user["echo"]["p50_ms"], 3),
        "throughput": round(service["flood"]["mb_s"] / user["flood"]["mb_s"], 3),
    }
    return figures
