"""Start JupyterLab with two demo tool instances on the local Docker Engine.

``python -m jupyter_tool_terminal.demo [--image IMAGE] [--owner NAME] [jupyter lab options]``
creates two labelled containers for the current user, starts ``jupyter lab`` configured with
their tool types, and removes the containers when JupyterLab exits.
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
        "startup_command": (
            "echo 'Welcome to the course sandbox: your files are in /data.'; "
            "cd /data && export COURSE=demo"
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


def engine_address() -> str:
    """Where the Docker SDK looks for the engine: ``DOCKER_HOST``, else the default socket."""
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def connect_engine() -> docker.DockerClient | None:
    """A client of an engine that answers, or ``None`` after one line saying what to do."""
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as error:
        # The SDK's messages nest the whole chain of causes: a short one helps, a long one hides
        # the line that matters.
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        detail = f" ({reason})" if len(reason) <= 80 else ""
        print(
            f"demo: no Docker Engine answers at {engine_address()}{detail}. Start one"
            " (bash scripts/engine.sh, or Docker Desktop), or point DOCKER_HOST at one.",
            file=sys.stderr,
        )
        return None
    return client


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
    options, lab_args = parser.parse_known_args(argv)

    client = connect_engine()
    if client is None:
        return 1
    try:
        # Looked up first: a missing image would otherwise be pulled (slow, or failing offline).
        client.images.get(options.image)
        containers = create_demo_instances(client, options.image, options.owner)
    except docker.errors.ImageNotFound:
        print(
            f"demo: the image {options.image} is not there; build it with"
            " bash scripts/build-test-image.sh, or name another with --image.",
            file=sys.stderr,
        )
        client.close()
        return 1
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
        client.close()


if __name__ == "__main__":
    sys.exit(main())
