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
import ctypes
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

from .runtime import access as engine_access
from .runtime.docker_engine import OWNER_LABEL, TOOL_LABEL

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


def create_demo_instances(
    client: docker.DockerClient, image: str, owner: str, containers: list[t.Any]
) -> None:
    """Create (or re-create) one running, labelled container per demo tool type, appending each
    to ``containers`` as soon as it exists (so that a stop half-way removes it too)."""
    safe_owner = re.sub(r"[^a-zA-Z0-9_.-]", "-", owner).strip("-.") or "user"
    for tool in DEMO_TOOL_TYPES:
        name = f"demo-{tool}-{safe_owner}"
        with contextlib.suppress(docker.errors.NotFound):
            client.containers.get(name).remove(force=True)
        containers.append(
            client.containers.create(
                image,
                name=name,
                init=True,
                network_mode="none",
                labels={OWNER_LABEL: owner, TOOL_LABEL: tool},
            )
        )
        containers[-1].start()


def docker_engine() -> docker.DockerClient | None:
    """A client of the Docker Engine, or ``None`` (having said why) if none answers."""
    try:
        client = docker.from_env(timeout=5)
        client.ping()
    except docker.errors.DockerException as error:
        access = engine_access.diagnose()
        if access.permission_denied:
            say(f"demo: {access.message}.")
            say(
                "demo: meanwhile it runs two LOCAL tool instances: working directories whose "
                "shells run as you on this machine (not isolated)."
            )
        else:
            print(
                f"demo: no Docker Engine answers at {access.where} ({type(error).__name__}), so "
                "the demo runs two LOCAL tool instances: working directories whose shells run "
                "as you on this machine (not isolated). For containers, start Docker (bash "
                "scripts/engine.sh) or point DOCKER_HOST at an engine.",
                flush=True,
            )
        return None
    return client


def local_demo_instances(folder: Path) -> dict[str, dict[str, str]]:
    """The demo's local instances (``ToolTerminalApp.local_instances``), one per tool type."""
    return {f"demo-{tool}": {"tool": tool, "root": str(folder / tool)} for tool in DEMO_TOOL_TYPES}


#: The signals that end the demo as Ctrl-C does: ``kill``, and the terminal going away (a closed
#: window, ``tmux kill-session``, the parent shell dying: see :func:`_hang_up_with_parent`).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def say(*words: object) -> None:
    """Print a line to stderr, if anything still reads it.

    Once the reader of a pipe is gone (``demo.sh | tee log``, then Ctrl-C) a print fails with
    ``BrokenPipeError``: that must not stop the demo from cleaning up after itself.
    """
    with contextlib.suppress(OSError, ValueError):
        print(*words, file=sys.stderr, flush=True)


def _prctl_death_signal(number: int) -> bool:
    """Ask the kernel to send this process ``number`` when its parent dies (Linux ``prctl``);
    ``False`` where that is not available."""
    try:
        return bool(
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, number, 0, 0, 0) == 0
        )
    except (OSError, AttributeError):
        return False


_PR_SET_PDEATHSIG = 1


def _hang_up_with_parent() -> None:
    """Have the kernel send this process SIGHUP when its parent (the user's shell) dies.

    A shell killed outright sends no SIGHUP to its jobs: without this, the demo would live on,
    re-parented to init, and JupyterLab with it.
    """
    parent = os.getppid()
    if _prctl_death_signal(signal.SIGHUP) and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGHUP)  # the parent died before the request was in place


def _lab_child_setup() -> None:
    """In JupyterLab's process, before it runs: stop it if the demo dies without cleaning up
    (SIGKILL leaves the demo no time to)."""
    _prctl_death_signal(signal.SIGTERM)


@contextlib.contextmanager
def stopped_by_signals() -> t.Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise ``KeyboardInterrupt`` as Ctrl-C does.

    So every way a demo ends runs the same clean-up. A signal the demo was started with ignored
    stays ignored: ``nohup`` (SIGHUP) asks for a demo that outlives its terminal, and a shell
    makes its background jobs ignore SIGINT (the Ctrl-C meant for the foreground job).
    """
    previous = {
        number: signal.signal(number, signal.default_int_handler)
        for number in STOP_SIGNALS
        if signal.getsignal(number) != signal.SIG_IGN
    }
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def signals_held() -> t.Iterator[None]:
    """Within the block, the stop signals wait: a second Ctrl-C, or the SIGHUP that follows a
    SIGTERM when a terminal closes, cannot interrupt the clean-up half-way."""
    held = {signal.SIGINT, *STOP_SIGNALS}
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        # Delivered now, a held signal would interrupt the caller: let it be forgotten.
        for number in held:
            with contextlib.suppress(OSError, ValueError):
                signal.sigtimedwait([number], 0)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def stop_jupyterlab(process: subprocess.Popen[bytes]) -> None:
    """Ask JupyterLab to stop (SIGTERM: it removes its runtime files), kill it after 30 s."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def start_jupyterlab(command: list[str]) -> subprocess.Popen[bytes]:
    """Start JupyterLab in its own process group, so that a Ctrl-C in the terminal reaches only
    the demo, which then asks JupyterLab to stop with SIGTERM: no "Shut down this Jupyter
    server (y/[n])?" prompt, and JupyterLab removes its runtime files as it stops."""
    # The demo runs no thread of its own (the Docker SDK's calls are synchronous), so a
    # preexec_fn cannot deadlock on a lock another thread held at the fork.
    return subprocess.Popen(command, start_new_session=True, preexec_fn=_lab_child_setup)  # noqa: PLW1509


def remove_containers(containers: list[t.Any]) -> None:
    """Remove the demo's containers, whatever state they are in."""
    for container in containers:
        with contextlib.suppress(docker.errors.DockerException):
            container.remove(force=True)


def _forget_broken_stdout() -> None:
    """Point stdout at /dev/null if nothing reads it any more, so that the interpreter's last
    flush does not end the demo with a traceback-like "Exception ignored" message."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


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

    _hang_up_with_parent()
    # Everything the demo makes is undone by `cleanup`, in reverse order, however it ends.
    cleanup = contextlib.ExitStack()
    with stopped_by_signals():
        try:
            return _run(options, lab_args, cleanup)
        except KeyboardInterrupt:
            say("\ndemo: stopping JupyterLab and removing the demo instances...")
            return 0
        finally:
            with signals_held():
                cleanup.close()
                _forget_broken_stdout()


def _run(options: argparse.Namespace, lab_args: list[str], cleanup: contextlib.ExitStack) -> int:
    """Create the demo instances and the configuration, and run JupyterLab until it exits."""
    client = docker_engine()
    runtime: dict[str, t.Any] = {"runtime": "docker"}
    if client is None:
        runtime = {"runtime": "local", "local_instances": local_demo_instances(options.local_root)}
        print("Demo tool instances:", ", ".join(runtime["local_instances"]), flush=True)
    else:
        cleanup.callback(client.close)
        containers: list[t.Any] = []
        cleanup.callback(remove_containers, containers)
        create_demo_instances(client, options.image, options.owner, containers)
        print("Demo tool instances:", ", ".join(c.name for c in containers), flush=True)
    folder = cleanup.enter_context(
        tempfile.TemporaryDirectory(prefix="jupyter-tool-terminal-demo-")
    )
    config = Path(folder) / "jupyter_demo_config.json"
    config.write_text(
        json.dumps(
            {"ToolTerminalApp": {"tool_types": DEMO_TOOL_TYPES, "owner": options.owner, **runtime}}
        )
    )
    command = [sys.executable, "-m", "jupyterlab", f"--config={config}", *lab_args]
    if os.geteuid() == 0 and "--allow-root" not in lab_args:
        command.append("--allow-root")
    process = start_jupyterlab(command)
    cleanup.callback(stop_jupyterlab, process)
    return process.wait()


if __name__ == "__main__":
    sys.exit(main())
