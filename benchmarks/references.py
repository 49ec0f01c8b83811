"""The paths every phase measures, and how each is set up for a run.

* ``tool``: jupyter_server + this extension, real Docker Engine, a busybox tool instance;
* ``local``: jupyter_server + this extension with its local runtime (a local instance, /bin/sh);
* ``A``: jupyter_server + ``jupyter_server_terminals`` with a local ``/bin/sh``;
* ``B``: the same with ``shell_command=["docker", "exec", "-it", CONTAINER, "/bin/sh"]``;
* ``C``: no server, no WebSocket: the ``docker`` SDK's raw exec TTY socket on the same container;
* ``ahead``: ``tool`` with ``c.DockerRuntime.prestart_shells`` (each open takes a shell started
  ahead): measured in the open phase only (once open, its terminal is ``tool``'s).

How a terminal of each is opened, typed into and closed is ``client.py``'s; what the servers
run in, ``lab.py``'s.
"""

from __future__ import annotations

import asyncio
import typing as t

from common import LOCAL_INSTANCE, OWNER, TOOL, Plan, Target
from lab import Lab, Server

#: Every target, in the order of the table.
KEYS_ALL = ("tool", "local", "A", "B", "C")
#: Targets measured in the open phase only, after those of the table.
OPEN_ONLY_KEYS = ("ahead",)


def tool_config(plan: Plan) -> str:
    """The configuration of this project's server (Docker runtime) for ``plan``."""
    ns = max(plan.scale_ns + plan.scale_ns_b)
    return (
        f"c.ToolTerminalApp.tool_types = {{{TOOL!r}: {{'shell': ['/bin/sh']}}}}\n"
        f"c.ToolTerminalApp.owner = {OWNER!r}\n"
        f"c.ToolTerminalApp.max_sessions = {ns + 50}\n"
        f"c.ToolTerminalApp.max_sessions_per_user = {ns + 50}\n"
        f"c.ToolTerminalApp.max_clients_per_user = {ns + 50}\n"
        f"c.DockerRuntime.threads = 64\n" + plan.tool_config
    )


async def start_targets(
    lab: Lab, plan: Plan, only: set[str], tool_python_args: t.Sequence[str] = ()
) -> tuple[str, dict[str, Server], dict[str, Target]]:
    """Start the container and the servers of the paths in ``only``, and wait until every
    server answers. Returns the container's name (``""`` without a Docker path), the servers
    and every target (C's too), by key. ``tool_python_args`` go to this project's server's
    interpreter (a profiler)."""
    # The local runtime and A need no engine: without the Docker paths, none is asked for.
    engine_needed = bool(only & {"tool", "ahead", "B", "C", "hub"})
    container = await asyncio.to_thread(lab.container, "main") if engine_needed else ""
    ns = max(plan.scale_ns + plan.scale_ns_b)
    configs: dict[str, t.Callable[[], Server]] = {
        "tool": lambda: lab.start_server(
            "tool", "tool", tool_config(plan), container, tool_python_args
        ),
        "ahead": lambda: lab.start_server(
            "ahead",
            "tool",
            tool_config(plan) + "c.DockerRuntime.prestart_shells = True\n",
            container,
        ),
        "local": lambda: lab.start_server(
            "local",
            "tool",
            "c.ToolTerminalApp.runtime = 'local'\n"
            f"c.ToolTerminalApp.tool_types = {{{TOOL!r}: {{'shell': ['/bin/sh']}}}}\n"
            f"c.ToolTerminalApp.local_instances = {{{LOCAL_INSTANCE!r}: "
            f"{{'tool': {TOOL!r}, 'root': {str(lab.tmp / LOCAL_INSTANCE)!r}}}}}\n"
            f"c.ToolTerminalApp.owner = {OWNER!r}\n"
            f"c.ToolTerminalApp.max_sessions = {ns + 50}\n"
            f"c.ToolTerminalApp.max_sessions_per_user = {ns + 50}\n"
            f"c.ToolTerminalApp.max_clients_per_user = {ns + 50}\n",
            LOCAL_INSTANCE,
        ),
        "A": lambda: lab.start_server(
            "A",
            "terminado",
            "c.ServerApp.terminals_enabled = True\n"
            "c.ServerApp.terminado_settings = {'shell_command': ['/bin/sh']}\n",
        ),
        "B": lambda: lab.start_server(
            "B",
            "terminado",
            "c.ServerApp.terminals_enabled = True\n"
            f"c.ServerApp.terminado_settings = {{'shell_command': "
            f"['docker', 'exec', '-it', {container!r}, '/bin/sh']}}\n",
        ),
    }
    servers = {key: start() for key, start in configs.items() if key in only}
    await asyncio.gather(*(lab.wait_ready(server) for server in servers.values()))
    targets = {key: server.target for key, server in servers.items()}
    if "C" in only:
        targets["C"] = Target("C", "raw", container=container)
    return container, servers, targets
