"""The Docker runtime: shells are ``docker exec`` PTYs created over the Engine API.

Every blocking call of the ``docker`` SDK runs in a thread pool; the terminal's byte stream is
the exec's hijacked socket, read and written by the event loop itself, so a session costs no
thread and no process on the Jupyter host.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import socket
import ssl
import threading
import typing as t

import docker
import docker.errors

from ..tooltypes import ToolType
from .base import SESSION_TAG_VARIABLE, Instance, RuntimeUnavailable, ShellChannel, ToolRuntime

OWNER_LABEL = "jupyter-tool-terminal.owner"
TOOL_LABEL = "jupyter-tool-terminal.tool"

# Runs the startup command inside the PTY, in this very shell process, so that `cd` and
# `export` carry over into the interactive shell that replaces it with `exec`. The command is
# evaluated inside a function so that `set --` or `shift` in it cannot disturb the shell's argv.
# A failure is reported in the terminal and the shell starts all the same.
STARTUP_WRAPPER = r"""
jupyter_tool_terminal_startup() { eval "$1"; }
jupyter_tool_terminal_startup "$1"
status=$?
if [ "$status" -ne 0 ]; then
  printf '\r\n[jupyter-tool-terminal] the startup command failed with exit code %s\r\n' \
    "$status" >&2
fi
unset status
shift
exec "$@"
"""

# Kills every process of the shells tagged with "$@": the processes that carry a tag in their
# environment, and every process in their terminal sessions (which catches children that
# cleared their environment). Processes are stopped before they are killed, in rounds, so a
# loop that forks cannot outrun it. The container's own init session is never touched.
# Each round is two `grep`s over /proc, not a shell loop over every process: a container with
# hundreds of sessions has thousands of processes, and sessions closing together wait for it.
# In /proc/PID/stat the session id is the 6th field, after "(comm)", which may itself contain
# ") ": the greedy `.*\)` ends at the last parenthesis, where the numeric fields begin.
KILL_SCRIPT = r"""
me=$$
set -- $(for tag in "$@"; do printf -- "-e %s=%s " "$VAR" "$tag"; done)
sid_of() {
  _sid=
  { read -r _stat < "/proc/$1/stat"; } 2>/dev/null || return 1
  _stat=${_stat##*) }
  set -- $_stat
  _sid=$4
}
sid_of 1; init_sid=$_sid
round=0
while [ "$round" -lt 6 ]; do
  round=$((round + 1))
  sids=
  for file in $(grep -l "$@" /proc/[0-9]*/environ 2>/dev/null); do
    pid=${file#/proc/}; pid=${pid%/environ}
    [ "$pid" = "$me" ] && continue
    sid_of "$pid" || continue
    case "$_sid" in 0|"$init_sid") ;; *) sids="$sids|$_sid" ;; esac
    victims="$victims $pid"
  done
  if [ -n "$sids" ]; then
    for file in $(grep -l -E "^[0-9]+ \(.*\) . -?[0-9]+ -?[0-9]+ (${sids#|}) " \
        /proc/[0-9]*/stat 2>/dev/null); do
      pid=${file#/proc/}; pid=${pid%/stat}
      case "$pid" in "$me"|1) ;; *) victims="$victims $pid" ;; esac
    done
  fi
  [ -z "$victims" ] && exit 0
  kill -STOP $victims 2>/dev/null
  kill -KILL $victims 2>/dev/null
  victims=
done
exit 1
"""

_READ_LIMIT = 1 << 20


class _SocketShellChannel(ShellChannel):
    """A shell whose hijacked exec socket is a plain socket, driven by the event loop."""

    def __init__(
        self,
        runtime: DockerRuntime,
        exec_id: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self._runtime = runtime
        self.exec_id = exec_id
        self.reader = reader
        self._writer = writer
        self._started = False

    async def write(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    def hold_output(self, held: bool) -> None:
        # A socket's transport reads and writes; StreamWriter only types it as writing.
        transport = t.cast(asyncio.Transport, self._writer.transport)
        if transport.is_closing():
            return
        if held:
            transport.pause_reading()
        else:
            transport.resume_reading()

    async def resize(self, rows: int, cols: int) -> None:
        await self._runtime.call("exec_resize", self.exec_id, height=rows, width=cols)

    async def wait_started(self, timeout: float) -> None:
        if self._started:
            return
        deadline = asyncio.get_running_loop().time() + timeout
        delay = 0.005
        while True:
            try:
                info = await self._runtime.call("exec_inspect", self.exec_id)
            except Exception:  # noqa: BLE001 - exec or engine gone: nothing left to wait for
                return
            if info.get("Running") or info.get("ExitCode") is not None:
                self._started = True
                return
            if asyncio.get_running_loop().time() > deadline:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)

    async def is_running(self) -> bool:
        try:
            info = await self._runtime.call("exec_inspect", self.exec_id)
        except Exception:  # noqa: BLE001 - exec or engine gone
            return False
        return bool(info.get("Running"))

    async def exit_code(self) -> int | None:
        info = await self._runtime.call("exec_inspect", self.exec_id)
        code = info.get("ExitCode")
        return code if isinstance(code, int) and not info.get("Running") else None

    def close(self) -> None:
        self._writer.close()


class _ThreadShellChannel(_SocketShellChannel):
    """Fallback for engine transports the event loop cannot drive (TLS, SSH, named pipes).

    One reader thread per session pumps the socket into a StreamReader; writes go through the
    runtime's thread pool. Plain unix and TCP sockets never take this path.
    """

    def __init__(
        self, runtime: DockerRuntime, exec_id: str, sock: t.Any, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._runtime = runtime
        self.exec_id = exec_id
        self._sock = sock
        self.reader = asyncio.StreamReader(limit=_READ_LIMIT, loop=loop)
        self._loop = loop
        self._closed = False
        self._started = False
        threading.Thread(target=self._pump, name=f"exec-{exec_id[:12]}", daemon=True).start()

    def _pump(self) -> None:
        while True:
            try:
                data = self._sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                self._loop.call_soon_threadsafe(self.reader.feed_eof)
                return
            self._loop.call_soon_threadsafe(self.reader.feed_data, data)

    async def write(self, data: bytes) -> None:
        await self._runtime.run(self._sock.sendall, data)

    def hold_output(self, held: bool) -> None:
        """The reader thread keeps reading: nothing to hold."""
        del held

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()


class DockerRuntime(ToolRuntime):
    """Tool instances are Docker containers; connects like ``docker.from_env()``."""

    def __init__(self, *, max_workers: int = 32, log: logging.Logger | None = None) -> None:
        self.log = log or logging.getLogger(__name__)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="jupyter-tool-terminal-docker"
        )
        self._max_workers = max_workers
        self._client: docker.APIClient | None = None
        self._client_lock = threading.Lock()
        # Kill requests waiting for their container's kill worker: (tags, waiters).
        self._pending_kills: dict[str, tuple[set[str], list[asyncio.Future[None]]]] = {}
        self._kill_workers: dict[str, asyncio.Task[None]] = {}

    # -- plumbing ---------------------------------------------------------------------------

    def _api(self) -> docker.APIClient:
        with self._client_lock:
            if self._client is None:
                # The pool must hold a connection per concurrent call, or calls queue in urllib3.
                self._client = docker.from_env(max_pool_size=self._max_workers).api
            return self._client

    async def run(self, func: t.Callable[..., t.Any], *args: t.Any, **kwargs: t.Any) -> t.Any:
        """Run a blocking function in the runtime's thread pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(func, *args, **kwargs))

    async def call(self, method: str, *args: t.Any, **kwargs: t.Any) -> t.Any:
        """Call an ``APIClient`` method off the event loop, turning engine errors into
        :class:`RuntimeUnavailable` with a message that is safe to show to users."""

        def invoke() -> t.Any:
            return getattr(self._api(), method)(*args, **kwargs)

        try:
            return await self.run(invoke)
        except docker.errors.NotFound:
            raise
        except docker.errors.APIError as error:
            self.log.warning("Docker Engine refused %s: %s", method, error.explanation or error)
            msg = "the container engine refused the operation"
            raise RuntimeUnavailable(msg) from error
        except (docker.errors.DockerException, OSError) as error:
            self.log.warning("Docker Engine unreachable during %s: %s", method, error)
            msg = "the container engine is not reachable"
            raise RuntimeUnavailable(msg) from error

    def close(self) -> None:
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- instances --------------------------------------------------------------------------

    @staticmethod
    def _instance(
        name: str,
        container_id: str,
        labels: t.Mapping[str, str],
        status: str,
        env: t.Iterable[str] = (),
    ) -> Instance | None:
        owner, tool = labels.get(OWNER_LABEL), labels.get(TOOL_LABEL)
        if not owner or not tool:
            return None
        return Instance(
            id=name.lstrip("/"),
            container_id=container_id,
            owner=owner,
            tool=tool,
            status=status,
            env_names=frozenset(item.split("=", 1)[0] for item in env),
        )

    async def list_instances(self, owner: str) -> list[Instance]:
        containers = await self.call(
            "containers", all=True, filters={"label": [f"{OWNER_LABEL}={owner}", TOOL_LABEL]}
        )
        found = []
        for summary in containers:
            names = summary.get("Names") or []
            labels = summary.get("Labels") or {}
            instance = self._instance(
                names[0] if names else "", summary["Id"], labels, summary.get("State", "")
            )
            # The engine's filter is a convenience; the exact comparison here is the check.
            if instance is not None and instance.owner == owner and instance.id:
                found.append(instance)
        return sorted(found, key=lambda instance: instance.id)

    async def get_instance(self, instance_id: str) -> Instance | None:
        try:
            info = await self.call("inspect_container", instance_id)
        except docker.errors.NotFound:
            return None
        # The engine also resolves id prefixes; only an exact name is an instance id.
        if info.get("Name", "").lstrip("/") != instance_id:
            return None
        config = info.get("Config") or {}
        return self._instance(
            info["Name"],
            info["Id"],
            config.get("Labels") or {},
            (info.get("State") or {}).get("Status", ""),
            config.get("Env") or (),
        )

    # -- shells -----------------------------------------------------------------------------

    async def start_shell(self, instance: Instance, tool: ToolType, tag: str) -> ShellChannel:
        command = list(tool.shell)
        if tool.startup_command is not None:
            command = [
                "/bin/sh",
                "-c",
                STARTUP_WRAPPER,
                "jupyter-tool-terminal",
                tool.startup_command,
                *command,
            ]
        environment = {"TERM": "xterm-256color"}
        if "LANG" not in instance.env_names:
            environment["LANG"] = "C.UTF-8"
        environment.update(tool.env)
        environment[SESSION_TAG_VARIABLE] = tag
        try:
            created = await self.call(
                "exec_create",
                instance.container_id,
                command,
                stdin=True,
                tty=True,
                privileged=False,
                user=tool.user or "",
                environment=environment,
                workdir=tool.workdir,
                # No key sequence may detach the exec behind the session's back.
                detach_keys="ctrl-@,ctrl-@,ctrl-@,ctrl-@",
            )
        except docker.errors.NotFound as error:
            msg = "the tool instance is gone"
            raise RuntimeUnavailable(msg) from error
        exec_id: str = created["Id"]
        try:
            sock = await self.call("exec_start", exec_id, tty=True, socket=True)
        except docker.errors.NotFound as error:
            msg = "the tool instance is gone"
            raise RuntimeUnavailable(msg) from error
        return await self._channel(exec_id, sock)

    async def _channel(self, exec_id: str, sock: t.Any) -> ShellChannel:
        loop = asyncio.get_running_loop()
        raw = getattr(sock, "_sock", sock)
        if isinstance(raw, socket.socket) and not isinstance(raw, ssl.SSLSocket):
            # Hand a duplicate of the descriptor to asyncio and drop the SDK's objects: the
            # stream then belongs to the event loop alone and closes when the channel closes.
            own = raw.dup()
            own.setblocking(False)
            if own.family in (socket.AF_INET, socket.AF_INET6):
                own.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with contextlib.suppress(Exception):
                sock.close()
            with contextlib.suppress(Exception):
                raw.close()
            reader, writer = await asyncio.open_connection(sock=own, limit=_READ_LIMIT)
            return _SocketShellChannel(self, exec_id, reader, writer)
        return _ThreadShellChannel(self, exec_id, raw, loop)

    async def kill_tagged(self, container_id: str, tags: t.Collection[str]) -> None:
        """Kill the tagged shells' processes; concurrent kills in one container share one exec.

        The kill script scans every process of the container, so one exec per closing session
        would cost O(sessions^2) when many close at once (server shutdown, a reset storm).
        Instead one kill exec per container runs at a time, and every request that arrives
        meanwhile joins the next one.
        """
        if not tags:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        pending_tags, waiters = self._pending_kills.setdefault(container_id, (set(), []))
        pending_tags.update(tags)
        waiters.append(waiter)
        if container_id not in self._kill_workers:
            self._kill_workers[container_id] = asyncio.create_task(self._kill_worker(container_id))
        await waiter

    async def _kill_worker(self, container_id: str) -> None:
        try:
            while (pending := self._pending_kills.pop(container_id, None)) is not None:
                tags, waiters = pending
                try:
                    await self._kill_now(container_id, sorted(tags))
                finally:
                    for waiter in waiters:
                        if not waiter.done():
                            waiter.set_result(None)
        finally:
            # No await between the last pop and here: a request arriving now starts a worker.
            self._kill_workers.pop(container_id, None)

    async def _kill_now(self, container_id: str, tags: list[str]) -> None:
        def kill() -> None:
            api = self._api()
            created = api.exec_create(
                container_id,
                ["/bin/sh", "-c", KILL_SCRIPT, "jupyter-tool-terminal-kill", *tags],
                user="0",
                environment={"VAR": SESSION_TAG_VARIABLE},
                stdin=False,
                tty=False,
            )
            api.exec_start(created["Id"])
            code = api.exec_inspect(created["Id"]).get("ExitCode")
            if code:
                self.log.warning("Killing tool terminal processes ended with status %s", code)

        try:
            await self.run(kill)
        except docker.errors.NotFound:
            # The container is gone, and its processes with it.
            return
        except docker.errors.APIError as error:
            if error.status_code == 409:  # the container is not running: nothing is left
                return
            self.log.warning("Could not kill tool terminal processes: %s", error.explanation)
        except (docker.errors.DockerException, OSError) as error:
            self.log.warning("Could not kill tool terminal processes: %s", error)
