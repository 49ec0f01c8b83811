"""The hand-over's protocol and its two ends: the running server's (:class:`Predecessor`) and its
successor's (:class:`Successor`, then :func:`adopt`).

Every server listens on a Unix socket in its runtime directory (mode 0600, named after its
port: :func:`default_socket_path`). A server started with ``take_over`` (the service's
``--take-over``) connects to it before it binds its port, and the two speak this protocol,
one length-prefixed JSON message at a time, descriptors passed with ``SCM_RIGHTS``:

1. the successor says hello;
2. the predecessor stops accepting connections, refuses new sessions, suspends every session
   (its shell is no longer read: what was read is on its screen, what was not waits in the
   kernel, so no byte is lost or read twice) and closes its clients (code 1012: the browsers
   reconnect, and their connections wait in the listening socket's backlog); it sends each
   session's state, screen and shell, and its server id (which the shells carry: the
   successor becomes that server for the leases, so neither process's leases take the other's
   shells for orphans), with the descriptors of the exec connections and of its listening
   sockets;
3. the successor checks that it can serve every session (its configuration has their tool
   types), adopts them (the same shells, a screen model fed the old screen, its own leases),
   and says it is ready; or it refuses, or dies: then the predecessor resumes everything and
   goes on serving, as if nothing had happened;
4. the predecessor lets go of its sessions without ending their shells, closes its copies of
   the sockets, says goodbye and stops; the successor then accepts on the listening sockets
   it received (the port never closes, so no connection is refused) and listens for its own
   successor.

Passing the listening sockets (rather than binding the port again with ``SO_REUSEPORT``)
needs nothing of the predecessor's start-up options and keeps the backlog: a reconnection
that arrives during the hand-over is accepted by the successor.

What does not move: a remote engine's TLS connections (their state is in the process) and
the local runtime's terminals; a server with such sessions refuses to hand over, and keeps
serving. A recorded session goes on in a new recording file.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import socket
import stat
import struct
import typing as t

from tornado.httpserver import HTTPServer

from ..manager import SessionExport, ToolTerminalManager
from ..runtime import ToolRuntime
from ..tooltypes import ToolType
from .listening import close_listening, pause_accepting, resume_accepting

#: The protocol's version: a successor and a predecessor of different versions do not talk.
PROTOCOL = 1
#: The largest message (the screens of every session are in one).
MAX_MESSAGE = 256 * 1024 * 1024
#: Descriptors per ``sendmsg`` (Linux takes at most 253).
FDS_PER_MESSAGE = 200
#: How long one side waits for the other's next message (seconds): a successor adopting many
#: sessions under load asks the engine a few things for each.
TIMEOUT = 120.0
#: A successor's exit status when the hand-over failed (the predecessor goes on serving).
FAILED = 4


class HandoverError(Exception):
    """The hand-over cannot be done; the message says why."""


def default_socket_path(runtime_dir: str, port: int, unix_socket: str = "") -> str:
    """Where a server listens for its successor: in its runtime directory, named after its
    port (or, for a server on a Unix socket, after that socket's path)."""
    name = hashlib.sha256(unix_socket.encode()).hexdigest()[:16] if unix_socket else str(port)
    return os.path.join(runtime_dir, f"jupyter-tool-terminal-handover-{name}.sock")


#: The longest path a Unix socket address takes (``sun_path`` less its final NUL).
_MAX_ADDRESS = 107


@contextlib.contextmanager
def _address(path: str) -> t.Iterator[str]:
    """An address for ``path`` that fits a Unix socket address: the path itself, or for a
    long one (a deep runtime directory) the name under its directory's descriptor."""
    if len(os.fsencode(path)) <= _MAX_ADDRESS:
        yield path
        return
    directory = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{directory}/{os.path.basename(path)}"
    finally:
        os.close(directory)


def _same_user(conn: socket.socket) -> bool:
    """Whether the other end runs as this process's user (``SO_PEERCRED``: the uid of whoever
    connected, or of whoever listened). Each side checks the other: the socket's mode keeps
    other users from connecting, not from listening at the path first."""
    credentials = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid: int = struct.unpack("3i", credentials)[1]
    return uid == os.geteuid()


def check_directory(path: str) -> None:
    """Refuse (:class:`HandoverError`) a socket path whose directory another user could write
    to, or owns: they could put a socket of their own at the path."""
    directory = os.path.dirname(os.path.abspath(path))
    info = os.stat(directory)
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        msg = f"others can write to the directory of the hand-over socket {path}"
        raise HandoverError(msg)
    if info.st_uid not in (os.geteuid(), 0):
        msg = f"the directory of the hand-over socket {path} belongs to another user"
        raise HandoverError(msg)


# -- messages ---------------------------------------------------------------------------------


def send(sock: socket.socket, message: t.Mapping[str, t.Any], fds: t.Sequence[int] = ()) -> None:
    """Send one message and, after it, the descriptors ``fds`` (in batches)."""
    data = json.dumps({**message, "fds": len(fds)}).encode()
    sock.sendall(struct.pack("!I", len(data)) + data)
    for start in range(0, len(fds), FDS_PER_MESSAGE):
        socket.send_fds(sock, [b"\0"], list(fds[start : start + FDS_PER_MESSAGE]))


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        if not chunk:
            msg = "the other server closed the connection"
            raise ConnectionError(msg)
        data += chunk
    return bytes(data)


def receive(sock: socket.socket) -> tuple[dict[str, t.Any], list[int]]:
    """Receive one message and the descriptors sent with it."""
    (size,) = struct.unpack("!I", _read_exactly(sock, 4))
    if size > MAX_MESSAGE:
        msg = f"a hand-over message of {size} bytes is too large"
        raise HandoverError(msg)
    message = json.loads(_read_exactly(sock, size))
    if not isinstance(message, dict):
        msg = "a hand-over message is not an object"
        raise HandoverError(msg)
    fds: list[int] = []
    while len(fds) < message["fds"]:
        data, received, _, _ = socket.recv_fds(sock, 1, FDS_PER_MESSAGE)
        if not data:
            msg = "the other server closed the connection"
            raise ConnectionError(msg)
        fds += received
    return message, fds


def _check_ready(answer: t.Mapping[str, t.Any]) -> None:
    if not answer.get("ready"):
        raise HandoverError(answer.get("refused") or "the successor is not ready")


# -- the predecessor --------------------------------------------------------------------------


class Predecessor:
    """The running server's end: listens for a successor and hands everything over to it."""

    def __init__(
        self,
        path: str,
        *,
        manager: ToolTerminalManager,
        runtime: ToolRuntime,
        http_server: t.Callable[[], HTTPServer | None],
        on_handed_over: t.Callable[[], None],
        log: logging.Logger,
    ) -> None:
        self.path = path
        self._manager = manager
        self._runtime = runtime
        self._http_server = http_server
        self._on_handed_over = on_handed_over
        self.log = log
        self._sock: socket.socket | None = None
        self._busy = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Listen (owner only) at :attr:`path`, replacing a file a dead server left;
        :class:`HandoverError` if that path is not safe (:func:`check_directory`)."""
        check_directory(self.path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        umask = os.umask(0o177)  # never connectable by others, not even for a moment
        try:
            with _address(self.path) as address:
                sock.bind(address)
        except OSError:
            sock.close()
            raise
        finally:
            os.umask(umask)
        os.chmod(self.path, 0o600)
        sock.listen(1)
        sock.setblocking(False)
        self._sock = sock
        asyncio.get_running_loop().add_reader(sock.fileno(), self._accept)
        self.log.info("jupyter_tool_terminal: a successor can take over at %s", self.path)

    def close(self) -> None:
        """Stop listening for a successor."""
        sock, self._sock = self._sock, None
        if sock is not None:
            asyncio.get_running_loop().remove_reader(sock.fileno())
            sock.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def _accept(self) -> None:
        if self._sock is None:
            return
        try:
            conn, _ = self._sock.accept()
        except (BlockingIOError, InterruptedError):
            return
        if self._busy or not _same_user(conn):
            conn.close()  # one successor at a time, and only of this user
            return
        self._busy = True
        self._task = asyncio.create_task(self._serve(conn))

    async def _serve(self, conn: socket.socket) -> None:
        try:
            conn.setblocking(True)
            conn.settimeout(TIMEOUT)
            hello, _ = await asyncio.to_thread(receive, conn)
            if hello.get("protocol") != PROTOCOL:
                await asyncio.to_thread(send, conn, {"refused": "another protocol version"})
                return
            await self._hand_over(conn)
        except (OSError, ValueError, KeyError, HandoverError) as error:
            self.log.warning("jupyter_tool_terminal: a successor failed to connect: %s", error)
        except Exception:
            self.log.exception("jupyter_tool_terminal: the hand-over failed")
        finally:
            conn.close()
            self._busy = False

    async def _hand_over(self, conn: socket.socket) -> None:
        # (No HTTP server of its own: an embedding that serves it, whose successor binds anew.)
        server = self._http_server()
        listening = [] if server is None else pause_accepting(server)
        handed = False
        try:
            handed = await self._send_all(conn, listening)
        finally:
            if not handed:
                # The successor died or refused: nothing was taken, everything goes on here.
                if server is not None:
                    resume_accepting(server, listening)
                self._manager.resume_all()
        if not handed:
            return
        await self._manager.hand_off_all()
        self.close()
        if server is not None:
            close_listening(server, listening)
        with contextlib.suppress(OSError):
            await asyncio.to_thread(send, conn, {"bye": True})
        self.log.info("jupyter_tool_terminal: handed over; this server stops")
        self._on_handed_over()

    async def _send_all(self, conn: socket.socket, listening: list[socket.socket]) -> bool:
        """Suspend everything and send it; whether the successor took it."""
        suspended = await self._manager.suspend_all()
        try:
            message, fds = self._state(suspended)
        except HandoverError as error:
            self.log.warning("jupyter_tool_terminal: not handing over: %s", error)
            await asyncio.to_thread(send, conn, {"refused": str(error)})
            return False
        self.log.info(
            "jupyter_tool_terminal: handing %d tool terminal(s) over to a successor", len(fds)
        )
        try:
            await asyncio.to_thread(
                send, conn, message, [sock.fileno() for sock in listening] + fds
            )
            answer, _ = await asyncio.to_thread(receive, conn)
            _check_ready(answer)
        except (OSError, ValueError, HandoverError) as error:
            self.log.warning(
                "jupyter_tool_terminal: the hand-over failed, this server goes on serving: %s",
                error,
            )
            return False
        return True

    def _state(self, suspended: list[SessionExport]) -> tuple[dict[str, t.Any], list[int]]:
        sessions, fds = [], []
        for export in suspended:
            try:
                fd, shell = export.channel.handover()
            except ValueError as error:
                raise HandoverError(str(error)) from error
            sessions.append({"state": export.state, "screen": export.screen, "shell": shell})
            fds.append(fd)
        message = {
            "protocol": PROTOCOL,
            "runtime": self._runtime.name,
            "server": self._runtime.handover_state(),
            "sessions": sessions,
        }
        return message, fds


# -- the successor ----------------------------------------------------------------------------


@dataclasses.dataclass
class Inheritance:
    """What a predecessor handed over: its state, listening sockets and exec connections."""

    message: dict[str, t.Any]
    listening: list[socket.socket]
    shells: list[socket.socket]

    @property
    def sessions(self) -> list[tuple[dict[str, t.Any], socket.socket]]:
        """Each session's entry (``state``, ``screen``, ``shell``) with its exec connection."""
        return list(zip(self.message["sessions"], self.shells, strict=True))

    def refusal(self, runtime: ToolRuntime, tool_types: t.Mapping[str, ToolType]) -> str | None:
        """Why this server cannot serve the sessions (``None``: it can)."""
        if not self.shells:
            return None
        if self.message["runtime"] != runtime.name:
            return (
                f"the sessions run in the {self.message['runtime']} runtime and this server's "
                f"is {runtime.name}"
            )
        missing = sorted({entry["state"]["tool"] for entry, _ in self.sessions} - set(tool_types))
        if missing:
            return (
                f"the configuration lacks the tool type(s) {', '.join(missing)} of open "
                "sessions; add them back, or close those sessions first"
            )
        return None


class Successor:
    """The new server's end of the hand-over."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    @classmethod
    def connect(cls, path: str) -> Successor | None:
        """Connect to the predecessor listening at ``path``; ``None`` if none listens;
        :class:`HandoverError` if the path is not safe or another user listens there."""
        check_directory(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(TIMEOUT)
        try:
            with _address(path) as address:
                sock.connect(address)
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            return None
        if not _same_user(sock):
            sock.close()  # before a word: it would answer with sockets of its own
            msg = f"the server listening at {path} runs as another user"
            raise HandoverError(msg)
        return cls(sock)

    def receive(self) -> Inheritance:
        """Ask for the predecessor's sessions (it suspends them) and receive them."""
        send(self._sock, {"protocol": PROTOCOL})
        message, fds = receive(self._sock)
        if message.get("refused"):
            msg = f"the running server refused: {message['refused']}"
            raise HandoverError(msg)
        sockets = [socket.socket(fileno=fd) for fd in fds]
        count = len(sockets) - len(message["sessions"])
        return Inheritance(message, sockets[:count], sockets[count:])

    def refuse(self, reason: str) -> None:
        """Tell the predecessor to go on serving."""
        with contextlib.suppress(OSError):
            send(self._sock, {"refused": reason})
        self._sock.close()

    def close(self) -> None:
        """Hang up, as a successor that dies does: the predecessor goes on serving."""
        self._sock.close()

    async def finish(self) -> None:
        """Say that everything is adopted, and wait until the predecessor let go of it."""
        await asyncio.to_thread(send, self._sock, {"ready": True})
        answer, _ = await asyncio.to_thread(receive, self._sock)
        self._sock.close()
        if not answer.get("bye"):
            msg = "the running server did not let go"
            raise HandoverError(msg)


async def adopt(
    inheritance: Inheritance,
    manager: ToolTerminalManager,
    runtime: ToolRuntime,
    log: logging.Logger,
) -> None:
    """Go on with every session of ``inheritance`` here (its shells were the predecessor's)."""
    for entry, sock in inheritance.sessions:
        state = entry["state"]
        instance = await runtime.get_instance(state["instance"])
        tool = manager.tool_types[state["tool"]]
        if instance is None or not instance.running:
            log.warning(
                "Tool terminal %s is not taken over: its instance %s is gone or stopped",
                state["id"][:8],
                state["instance"],
            )
            sock.close()  # its shell went with the instance
            continue
        channel = await runtime.adopt_shell(entry["shell"], sock)
        if instance.owner != state["owner"]:
            log.warning(
                "Tool terminal %s is ended: its instance %s changed owner",
                state["id"][:8],
                state["instance"],
            )
            await channel.terminate()
            continue
        await manager.adopt_session(state, entry["screen"], instance, tool, channel)
