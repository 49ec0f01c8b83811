"""Start JupyterLab with two demo tool instances: containers, or local ones without Docker.

``python -m jupyter_tool_terminal.demo [--image IMAGE] [--owner NAME] [--local-root DIR]
[jupyter lab options]`` creates two labelled containers for the current user when a Docker
Engine answers (and removes them when JupyterLab exits); without one it declares two local
tool instances (working directories under ``--local-root``, shells run as you) instead. Either
way it starts ``jupyter lab`` configured with their tool types.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import typing as t
from pathlib import Path

import docker
import docker.errors

from .runtime.docker import OWNER_LABEL, TOOL_LABEL

DEFAULT_IMAGE = "jupyter-tool-terminal-test:latest"

_SANDBOX_ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><rect x="2" y="4" width="20"'
    ' height="16" rx="2" fill="#2e7d32"/><path d="M6 9l3 3-3 3M11 15h6" stroke="#fff"'
    ' stroke-width="2" fill="none"/></svg>'
)
_COURSE_ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><path d="M12 3L1 9l11 6 9-4.9'
    'V17h2V9z" fill="#1565c0"/><path d="M5 13.2v4L12 21l7-3.8v-4L12 17z" fill="#1565c0"/></svg>'
)

#: The demo's tool types, as an operator would write them in ``jupyter_server_config.py``.
DEMO_TOOL_TYPES: dict[str, dict[str, t.Any]] = {
    "sandbox": {
        "display_name": "Sandbox",
        "shell": ["/bin/sh", "-l"],
        "env": {"PS1": "sandbox:\\w\\$ "},
        "icon": _SANDBOX_ICON,
    },
    "course": {
        "display_name": "Course",
        "shell": ["/bin/sh", "-l"],
        # In a container /data; in a local instance ROOT/data (workdir is relative to it there).
        "workdir": "/data",
        "startup_command": (
            "echo 'Welcome to the course sandbox: your files are here, in' \"$PWD\"; "
            "export COURSE=demo"
        ),
        "env": {"PS1": "course:\\w\\$ "},
        "icon": _COURSE_ICON,
    },
}


def default_owner() -> str:
    """The owner name the server uses by default (see ``ToolTerminalApp.owner``)."""
    return os.environ.get("JUPYTERHUB_USER") or getpass.getuser()


def create_demo_instances(client: docker.DockerClient, image: str, owner: str) -> list[t.Any]:
    """Create (or re-create) one running, labelled container per demo tool type."""
    safe_owner = re.sub(r"[^a-zA-Z0-9_.-]", "-", owner).strip("-.") or "user"
    containers = []
    for tool in DEMO_TOOL_TYPES:
        name = f"demo-{tool}-{safe_owner}"
        with contextlib.suppress(docker.errors.NotFound):
            client.containers.get(name).remove(force=True)
        containers.append(
            client.containers.run(
                image,
                name=name,
                detach=True,
                init=True,
                network_mode="none",
                labels={OWNER_LABEL: owner, TOOL_LABEL: tool},
            )
        )
    return containers


def docker_engine() -> docker.DockerClient | None:
    """A client of the Docker Engine, or ``None`` (having said why) if none answers."""
    try:
        client = docker.from_env(timeout=5)
        client.ping()
    except docker.errors.DockerException as error:
        where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        print(
            f"demo: no Docker Engine answers at {where} ({type(error).__name__}), so the demo "
            "runs two LOCAL tool instances: working directories whose shells run as you on "
            "this machine (not isolated). For containers, start Docker (bash scripts/engine.sh)"
            " or point DOCKER_HOST at an engine.",
            flush=True,
        )
        return None
    return client


def local_demo_instances(folder: Path) -> dict[str, dict[str, str]]:
    """The demo's local instances (``ToolTerminalApp.local_instances``), one per tool type."""
    return {f"demo-{tool}": {"tool": tool, "root": str(folder / tool)} for tool in DEMO_TOOL_TYPES}


def run_jupyterlab(command: list[str]) -> int:
    """Run JupyterLab until it exits; Ctrl-C (or SIGTERM) shuts it down cleanly.

    JupyterLab runs in its own process group, so a Ctrl-C in the terminal reaches only the
    demo, which then asks JupyterLab to stop with SIGTERM: no "Shut down this Jupyter server
    (y/[n])?" prompt, and JupyterLab removes its runtime files as it stops.
    """
    process = subprocess.Popen(command, start_new_session=True)
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return process.wait()
    except KeyboardInterrupt:
        print("\ndemo: stopping JupyterLab...", file=sys.stderr, flush=True)
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    """Create the demo instances, run JupyterLab, and clean up when it exits."""
    parser = argparse.ArgumentParser(
        prog="python -m jupyter_tool_terminal.demo",
        description=(
            "Start JupyterLab with two demo tool instances on the local Docker Engine. A"
            " single-user laptop demo: it serves the current directory, with JupyterLab's own"
            " terminals and kernels, to whoever holds the token it prints."
        ),
        epilog=(
            "Every other argument goes to `jupyter lab` (for example --port=9999 or"
            " --no-browser). The demo containers are removed when JupyterLab stops (Ctrl-C)."
        ),
    )
    parser.add_argument(
        "--image",
        default=os.environ.get("JTT_DEMO_IMAGE", DEFAULT_IMAGE),
        help="image of the demo tool instances (needs /bin/sh)",
    )
    parser.add_argument(
        "--owner",
        default=default_owner(),
        help="owner label of the demo instances (default: the server's owner)",
    )
    parser.add_argument(
        "--local-root",
        type=Path,
        default=Path("~/tool-instances").expanduser(),
        help="where the local demo instances' folders go when there is no Docker Engine",
    )
    options, lab_args = parser.parse_known_args(argv)

    client = docker_engine()
    containers = create_demo_instances(client, options.image, options.owner) if client else []
    runtime: dict[str, t.Any] = {"runtime": "docker"}
    if client is None:
        runtime = {"runtime": "local", "local_instances": local_demo_instances(options.local_root)}
        print("Demo tool instances:", ", ".join(runtime["local_instances"]), flush=True)
    else:
        print("Demo tool instances:", ", ".join(c.name for c in containers), flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix="jupyter-tool-terminal-demo-") as folder:
            config = Path(folder) / "jupyter_demo_config.json"
            config.write_text(
                json.dumps(
                    {
                        "ToolTerminalApp": {
                            "tool_types": DEMO_TOOL_TYPES,
                            "owner": options.owner,
                            **runtime,
                        }
                    }
                )
            )
            command = [sys.executable, "-m", "jupyterlab", f"--config={config}", *lab_args]
            if os.geteuid() == 0 and "--allow-root" not in lab_args:
                command.append("--allow-root")
            return run_jupyterlab(command)
    finally:
        for container in containers:
            with contextlib.suppress(docker.errors.DockerException):
                container.remove(force=True)
        if client is not None:
            client.close()


if __name__ == "__main__":
    sys.exit(main())
