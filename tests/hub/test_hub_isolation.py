"""Service mode as docs/source/howto/jupyterhub-service.md lays it out for real Unix users:
an isolation test.

The Hub runs as root and spawns each user's server as that user's own Unix account
(JupyterHub's LocalProcessSpawner, The Littlest JupyterHub's model), outside the ``docker``
group; the tool-terminal service runs as a system user of its own, the only one in the
``docker`` group; the Hub's files are readable by root alone. Then code running as a student
(what her notebook's kernel or her JupyterLab terminal runs) cannot reach the Docker socket,
the service's environment (its Hub token) or the Hub's secrets, while her tool tiles and
terminals still work through the service.

The test creates its Unix users (``useradd``) and removes them afterwards, so it needs root:
CI runs as root.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import textwrap
import typing as t
from pathlib import Path

import pytest

from ..conftest import InstanceFactory
from ..support.hub import (
    REPO,
    Browser,
    Hub,
    free_port,
    running_hub,
    service_roles,
    wait_for_service,
)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="creates Unix users and runs a Hub as root (CI runs as root)"
)

SERVICE = "tool-terminal"
PREFIX = f"/services/{SERVICE}/"
STUDENTS = ("jttstudenta", "jttstudentb")
SERVICE_USER = "jtt-tool-terminal"
USERS_ENV = Path(os.environ.get("JTT_HUB_USERS_ENV", "/opt/jupyter-tool-terminal/hub-users-env"))

#: What a student's code tries; each attempt reports the errno name it got, or "OPEN".
PROBE = textwrap.dedent(
    """
    import errno, json, socket, sys

    def attempt(action):
        try:
            action()
        except OSError as error:
            return errno.errorcode.get(error.errno, str(error.errno))
        return "OPEN"

    def engine():
        with socket.socket(socket.AF_UNIX) as engine_socket:
            engine_socket.connect("/var/run/docker.sock")

    def read(path):
        return lambda: open(path, "rb").read()

    print(json.dumps({
        "docker socket": attempt(engine),
        "service environment": attempt(read(sys.argv[1])),
        "hub cookie secret": attempt(read(sys.argv[2])),
        "hub database": attempt(read(sys.argv[3])),
    }))
    """
)


def _users_env() -> Path:
    """The Python environment every Unix user may run (scripts/hub-users-env.sh)."""
    if not (USERS_ENV / ".installed").exists():
        subprocess.run(
            ["bash", str(REPO / "scripts" / "hub-users-env.sh"), str(USERS_ENV)], check=True
        )
    return USERS_ENV


def _remove_user(name: str) -> None:
    with contextlib.suppress(KeyError):
        pwd.getpwnam(name)
        subprocess.run(["pkill", "-KILL", "-u", name], check=False)
        subprocess.run(["userdel", "-r", name], check=False, capture_output=True)


@pytest.fixture(scope="module")
def unix_users() -> t.Iterator[None]:
    """The students' accounts and the service's system account (in the ``docker`` group)."""
    if shutil.which("useradd") is None:
        pytest.fail("useradd is missing (Debian's passwd package)")
    docker_group = grp.getgrgid(os.stat("/var/run/docker.sock").st_gid).gr_name
    names = (*STUDENTS, SERVICE_USER)
    for name in names:
        _remove_user(name)  # left by a run that was killed
    try:
        for name in STUDENTS:
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", name], check=True)
        subprocess.run(
            [
                "useradd",
                "--system",
                "--create-home",
                "--home-dir",
                f"/var/lib/{SERVICE_USER}",
                "--groups",
                docker_group,
                "--shell",
                "/usr/sbin/nologin",
                SERVICE_USER,
            ],
            check=True,
        )
        yield
    finally:
        for name in names:
            _remove_user(name)


def _hub_config(shared: Path, users_env: Path) -> str:
    """The Hub's configuration: the layout of docs/source/howto/jupyterhub-service.md for real
    Unix users."""
    (shared / "service_config.py").write_text(
        "c = get_config()  # noqa\n"
        'c.ToolTerminalApp.runtime = "docker"\n'
        'c.ToolTerminalApp.tool_types = {"sandbox": {"shell": ["/bin/sh"]}}\n'
    )
    user_config = shared / "user-config"
    user_config.mkdir()
    (user_config / "jupyter_server_config.py").write_text(
        "c = get_config()  # noqa\n"
        'c.ServerApp.jpserver_extensions = {"jupyter_tool_terminal": True}\n'
        f"c.ToolTerminalApp.service_url = {PREFIX!r}\n"
    )
    for path in (shared, user_config):
        path.chmod(0o755)
    for path in (shared / "service_config.py", user_config / "jupyter_server_config.py"):
        path.chmod(0o644)
    service_command = [
        str(users_env / "bin" / "python"),
        "-m",
        "jupyter_tool_terminal.hub.service",
        f"--config={shared / 'service_config.py'}",
    ]
    return f"""
c.Authenticator.allowed_users = {set(STUDENTS)!r}
c.JupyterHub.services.append(
    {{
        "name": {SERVICE!r},
        "url": "http://127.0.0.1:{free_port()}",
        "command": {service_command!r},
        "user": {SERVICE_USER!r},
        "cwd": "/var/lib/{SERVICE_USER}",
        "oauth_no_confirm": True,
        "environment": {{"PYTHONPATH": {str(REPO)!r}}},
    }}
)
{service_roles(SERVICE)}c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [{str(users_env / "bin" / "jupyterhub-singleuser")!r}]
c.Spawner.environment = {{
    "JUPYTER_CONFIG_DIR": {str(user_config)!r},
    "PYTHONPATH": {str(REPO)!r},
}}
c.Spawner.http_timeout = 60
c.Spawner.start_timeout = 60
"""


def _processes_of(user: str, needle: str) -> list[int]:
    """Processes of Unix user ``user`` whose command line contains ``needle``."""
    uid = pwd.getpwnam(user).pw_uid
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if entry.stat().st_uid == uid and needle.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def _groups(pid: int) -> set[int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Groups:"):
            return {int(group) for group in line.split()[1:]}
    return set()


@pytest.fixture(scope="module")
def hub(unix_users: None, tmp_path_factory: pytest.TempPathFactory) -> t.Iterator[Hub]:
    """The Hub (as root, its files root's alone), the service and the students' servers."""
    users_env = _users_env()
    directory = tmp_path_factory.mktemp("hub-isolation")
    directory.chmod(0o700)
    shared = Path(tempfile.mkdtemp(prefix="jtt-hub-shared-"))
    try:
        with running_hub(directory, _hub_config(shared, users_env)) as hub:
            wait_for_service(hub, PREFIX)
            hub.start_server(STUDENTS[0])
            yield hub
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.timeout(300)  # (a Hub started and stopped: 110-120 s on a busy machine)
async def test_a_students_code_reaches_no_engine_no_service_secret_no_hub_file(
    hub: Hub, make_instance: InstanceFactory
) -> None:
    student = STUDENTS[0]
    servers = _processes_of(student, "jupyterhub-singleuser")
    assert servers, "the student's server does not run as the student"
    docker_gid = os.stat("/var/run/docker.sock").st_gid
    assert all(docker_gid not in _groups(pid) for pid in servers)
    (service,) = _processes_of(SERVICE_USER, "jupyter_tool_terminal.hub.service")
    assert docker_gid in _groups(service)

    # What her notebook's kernel could run: code as her own Unix user.
    probe = await asyncio.to_thread(
        subprocess.run,
        [
            "runuser",
            "-u",
            student,
            "--",
            str(USERS_ENV / "bin" / "python"),
            "-c",
            PROBE,
            f"/proc/{service}/environ",
            str(hub.directory / "cookie_secret"),
            str(hub.directory / "jupyterhub.sqlite"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(probe.stdout) == {
        "docker socket": "EACCES",
        "service environment": "EACCES",
        "hub cookie secret": "EACCES",
        "hub database": "EACCES",
    }

    # Her tool instance still works, through the service.
    mine = make_instance(owner=student)
    theirs = make_instance(owner=STUDENTS[1])
    browser = Browser(hub, student)
    await browser.service_login(PREFIX)
    status, instances = await browser.json("GET", f"{PREFIX}tool-terminal/api/instances")
    assert status == 200, instances
    assert {item["id"] for item in instances} == {mine.name}
    assert theirs.name not in json.dumps(instances)
    _, term = await browser.terminal(PREFIX, mine.name)
    assert (await term.run("echo $((6*7))")).strip() == "42"
    term.ws.close()
