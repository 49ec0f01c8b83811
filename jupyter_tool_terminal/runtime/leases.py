"""Which servers of this machine are alive: a lock file per server, held for its whole life.

The local runtime's shells outlive a server that is killed with SIGKILL (the kernel hangs up
their terminal, which ends the shell, but not the jobs it started in the background). Nothing
of the dead server can kill them; the next server of the same user does, at its start. To
know which servers are dead, every server holds an exclusive ``flock`` on a file named by its
id in a directory the servers of one user share. The kernel drops the lock when its holder
dies, however it dies, so a file whose lock can be taken belongs to a dead server; a live one
(two servers may well run at once) keeps its lock and is never taken for dead.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import typing as t

#: Lease files are named by their server's id (a random token of 32 hex digits).
_SERVER_ID = re.compile(r"[0-9a-f]{32}")


class ServerLease:
    """This server's lease file in ``directory``, and the reclaiming of dead servers' ones."""

    def __init__(self, directory: str, server_id: str) -> None:
        self.directory = directory
        self.server_id = server_id
        self._fd = -1

    @property
    def held(self) -> bool:
        """Whether this server holds its lease (its shells may then carry its id)."""
        return self._fd >= 0

    def acquire(self) -> None:
        """Create and lock this server's lease file; ``OSError`` if that cannot be done."""
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        path = os.path.join(self.directory, self.server_id)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise
        self._fd = fd

    def reclaim(self, kill: t.Callable[[str], None]) -> list[str]:
        """Call ``kill`` with the id of every server whose lease file is no longer locked,
        then remove that file; the ids of those servers."""
        dead = []
        for name in sorted(os.listdir(self.directory)):
            if name == self.server_id or not _SERVER_ID.fullmatch(name):
                continue
            path = os.path.join(self.directory, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            except OSError:
                continue  # reclaimed by another server meanwhile
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # its server is alive
                kill(name)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                dead.append(name)
            finally:
                os.close(fd)
        return dead

    def close(self) -> None:
        """Give up the lease (the server stops, and has killed its shells)."""
        if self._fd >= 0:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.directory, self.server_id))
            os.close(self._fd)
            self._fd = -1
