"""A Unix user outside the ``docker`` group is told what is true: the engine's socket exists but
this user may not use it, and what to do about it (not "start Docker").

Run as a real unprivileged user (``useradd``, removed afterwards): root may use any socket, so
only another user sees the engine refuse. The default socket of the test machine's engine is
``root:docker`` with mode ``srw-rw----``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import typing as t
import uuid
from pathlib import Path

import pytest

from ..conftest import REPO

SOCKET = "/var/run/docker.sock"


@pytest.fixture
def outsider() -> t.Iterator[pwd.struct_passwd]:
    """A user of this machine in no group but its own, with a home it may write."""
    if os.geteuid() != 0:
        pytest.fail("this test creates a Unix user: run it as root (as CI does)")
    if not Path(SOCKET).is_socket() or os.stat(SOCKET).st_mode & 0o007:
        pytest.fail(f"{SOCKET} must be the engine's socket, not usable by every user")
    name = f"jtt-{uuid.uuid4().hex[:10]}"
    home = Path(tempfile.mkdtemp(prefix="jtt-outsider-"))
    subprocess.run(
        ["useradd", "--no-create-home", "--home-dir", str(home), "--user-group", name],
        check=True,
    )
    try:
        user = pwd.getpwnam(name)
        os.chown(home, user.pw_uid, user.pw_gid)
        yield user
    finally:
        subprocess.run(["userdel", name], check=False)
        shutil.rmtree(home, ignore_errors=True)


def _run_as(user: pwd.struct_passwd, command: list[str]) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(REPO),
        "HOME": user.pw_dir,
        "USER": user.pw_name,
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    return subprocess.run(
        [
            "setpriv",
            f"--reuid={user.pw_uid}",
            f"--regid={user.pw_gid}",
            "--clear-groups",
            # Only to read this machine's Python, which may sit under root's home (pyenv): it
            # lets the user read and search any file, never write to one or connect a socket.
            "--inh-caps=+dac_read_search",
            "--ambient-caps=+dac_read_search",
            *command,
        ],
        env=env,
        cwd=user.pw_dir,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _says_permission_not_absence(text: str, user: pwd.struct_passwd) -> None:
    assert f"the Docker socket {SOCKET} exists, but this user ({user.pw_name}) may not use it" in (
        text
    )
    assert "usermod -aG docker" in text
    assert "rootless Docker or Podman" in text
    assert "local tool instances" in text
    assert "start Docker" not in text


def test_the_server_says_the_socket_exists_but_this_user_may_not_use_it(
    outsider: pwd.struct_passwd,
) -> None:
    check = (
        "from jupyter_tool_terminal.runtime.docker import DockerRuntime\n"
        "from jupyter_tool_terminal.runtime import RuntimeUnavailable\n"
        "runtime = DockerRuntime(startup_check_timeout=2)\n"
        "try:\n"
        "    runtime.check_available()\n"
        "except RuntimeUnavailable as error:\n"
        "    print(error)\n"
        "finally:\n"
        "    runtime.close()\n"
    )
    result = _run_as(outsider, [sys.executable, "-c", check])
    assert result.returncode == 0, result.stderr
    _says_permission_not_absence(result.stdout, outsider)


def test_the_demo_says_so_and_runs_local_instances(outsider: pwd.struct_passwd) -> None:
    # `--version` goes to jupyter lab, which prints it and exits: the demo's own words remain.
    result = _run_as(outsider, [sys.executable, "-m", "jupyter_tool_terminal.demo", "--version"])
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    _says_permission_not_absence(output, outsider)
    assert "LOCAL tool instances" in output


def test_scripts_engine_sh_says_so_too(outsider: pwd.struct_passwd) -> None:
    # What `scripts/demo.sh` runs first, as that user (not root: it installs nothing).
    result = _run_as(outsider, ["bash", str(REPO / "scripts" / "engine.sh")])
    assert result.returncode == 1
    assert f"the Docker socket {SOCKET} exists, but {outsider.pw_name} may not use it" in (
        result.stderr
    )
    assert "usermod -aG docker" in result.stderr
    assert "start Docker" not in result.stderr
