"""Why no Docker Engine answers, in words that say what is true and what to do.

"Docker is not running" is wrong for the commonest case on a shared machine: the engine runs,
its socket exists, but this Unix user may not use it (not in the ``docker`` group). The demo,
the server's log, the launcher and *Open Tool Terminal* all say what this module finds.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
import typing as t

#: Where the Docker SDK (``docker.from_env()``) looks when ``DOCKER_HOST`` is not set.
DEFAULT_SOCKET = "/var/run/docker.sock"


class EngineAccess(t.NamedTuple):
    """What is known about reaching the engine: where, and why it does not answer."""

    #: Where the engine was looked for (``DOCKER_HOST``, or the default socket's URL).
    where: str
    #: Whether the socket exists but this user may not read and write it.
    permission_denied: bool
    #: One sentence for the user: what is wrong and what to do.
    message: str


def _owner_and_group(info: os.stat_result) -> str:
    try:
        owner = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        owner = str(info.st_uid)
    try:
        group = grp.getgrgid(info.st_gid).gr_name
    except KeyError:
        group = str(info.st_gid)
    return f"{owner}:{group}"


def _user_name() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def diagnose(environ: t.Mapping[str, str] | None = None) -> EngineAccess:
    """Say why no engine answers where the Docker SDK looks for one.

    Called once an attempt failed. A Unix socket that exists but that this process may not read
    and write (``os.access``, which honours the groups of the process, so a ``docker`` group
    joined after login does not count until the next login) is named as such, with the ways
    out; anything else (no socket, a remote engine that does not answer) says where it looked.
    """
    environ = os.environ if environ is None else environ
    host = environ.get("DOCKER_HOST", "")
    where = host or f"unix://{DEFAULT_SOCKET}"
    path = where.removeprefix("unix://") if where.startswith("unix://") else None
    if path is not None:
        try:
            info = os.stat(path)
        except OSError:
            info = None
        if (
            info is not None
            and stat.S_ISSOCK(info.st_mode)
            and not os.access(path, os.R_OK | os.W_OK)
        ):
            return EngineAccess(
                where,
                True,
                f"the Docker socket {path} exists, but this user ({_user_name()}) may not use it "
                f"(owner {_owner_and_group(info)}, mode {stat.filemode(info.st_mode)}): join its "
                f"group (sudo usermod -aG {_owner_and_group(info).split(':')[1]} "
                f"{_user_name()}, then log in again), or use rootless Docker or Podman (set "
                "DOCKER_HOST to its socket), or use local tool instances "
                "(ToolTerminalApp.local_instances)",
            )
    looked = host or f"the default socket {DEFAULT_SOCKET}"
    return EngineAccess(
        where, False, f"no Docker Engine answers at {looked}; start Docker or set DOCKER_HOST"
    )
