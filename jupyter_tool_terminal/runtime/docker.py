"""The Docker runtime: shells are ``docker exec`` PTYs created over the Engine API.

Every blocking call of the ``docker`` SDK runs in a thread pool; the terminal's byte stream is
the exec's hijacked socket (a local engine's) or a TLS connection of the event loop's own (a
remote engine's, see ``docker_tls.py``), read and written by the event loop itself, so a session
costs no thread and no process on the Jupyter host. Only transports asyncio cannot drive (SSH,
named pipes) fall back to a reader thread per session, bounded all the same.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import os
import secrets
import socket
import ssl
import threading
import typing as t

import docker
import docker.errors
from traitlets import Float, Integer

from ..tooltypes import ToolType
from . import docker_tls
from .base import Instance, RuntimeUnavailable, ShellChannel, ToolRuntime
from .launch import shell_command, shell_environment
from .reaper import (
    KILL_ENVIRONMENT,
    KILL_ONCE_SCRIPT,
    LEASE_VARIABLE,
    ORPHANS_UNSURE,
    REAPER_SCRIPT,
    REAPER_SCRIPT_VARIABLE,
    Answer,
    Reaper,
    ReaperGone,
    lease_command,
    lease_of,
    parse_answer,
)
from .stream import ShellStream

OWNER_LABEL = "jupyter-tool-terminal.owner"
TOOL_LABEL = "jupyter-tool-terminal.tool"

_READ_LIMIT = 1 << 20

#: How many times a shell is killed again while the engine still reports it running.
KILL_ATTEMPTS = 5
#: How long a silent shell's end waits for the engine to have really started it.
START_WAIT = 5.0


#: Who kills a shell's processes: (container id, exec user). The kill runs as the shell's own
#: user, so it never has more rights in the container than the shell had, and it can read the
#: environment (the kill tag) of every process the shell started without changing uid; root
#: cannot read another uid's /proc/PID/environ without CAP_SYS_PTRACE, which Docker does not
#: grant by default.
_Target = tuple[str, str]

#: The exec user of instance-wide kills, which must reach every process of the container.
ROOT = "0"

#: How long a kill waits for the reaper before it checks whether the container is paused.
PAUSE_PROBE = 0.5
#: How many times an orphan kill is asked again when a server it was not told of came up.
ORPHAN_ATTEMPTS = 3


@dataclasses.dataclass(frozen=True)
class _Exec:
    """A shell's exec: the container it runs in, the engine's id for it, and its kill tag."""

    container_id: str
    exec_id: str
    tag: str
    #: The exec user of the shell, and so of its kill.
    user: str = ""

    @property
    def target(self) -> _Target:
        return (self.container_id, self.user)


@dataclasses.dataclass(frozen=True)
class DockerInstance(Instance):
    """A tool instance that is a labelled container."""

    runtime: t.ClassVar[str] = "docker"

    #: The container's immutable id; every exec targets this, never a name.
    container_id: str = ""
    #: The container's own environment names (to know whether ``LANG`` is already set).
    env_names: frozenset[str] = frozenset()


#: How long a reaper may take to answer one kill before the kill falls back to its own exec.
REAPER_TIMEOUT = 10.0


class _ExecChannel(ShellChannel):
    """A shell's exec: its stream (on the event loop), its size and its end.

    ``stream`` is ``None`` for an exec whose stream never opened: then it only terminates.
    """

    def __init__(self, runtime: DockerRuntime, shell: _Exec, stream: ShellStream | None) -> None:
        self._runtime = runtime
        self._exec = shell
        self.exec_id = shell.exec_id
        self._stream = stream
        self._started = False
        self._terminated = False

    async def read(self, size: int) -> bytes:
        if self._stream is None:
            return b""
        data = await self._stream.read(size)
        if data:
            self.spoke = True
        return data

    async def write(self, data: bytes) -> None:
        if self._stream is None:
            msg = "the shell's stream is not open"
            raise ConnectionResetError(msg)
        await self._stream.write(data)

    def write_nowait(self, data: bytes) -> int:
        if self._stream is None:
            msg = "the shell's stream is not open"
            raise ConnectionResetError(msg)
        return len(data) if self._stream.write_nowait(data) else 0

    def hold_output(self, held: bool) -> None:
        if self._stream is not None:
            self._stream.hold(held)

    async def resize(self, rows: int, cols: int) -> None:
        await self._runtime.call("exec_resize", self.exec_id, height=rows, width=cols)

    async def wait_started(self, timeout: float) -> None:
        """Wait until the engine has really started the shell process.

        The engine answers the start request before the process exists; a kill before then
        would find nothing and leave the shell to start afterwards, orphaned.
        """
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
        """Whether the shell process is still running (``False`` if that cannot be known)."""
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
        """Close the stream. This does not end the shell: see :meth:`terminate`."""
        if self._stream is not None:
            self._stream.close()

    async def terminate(self) -> None:
        if self._terminated:
            return
        self._terminated = True
        # A shell that wrote output runs and carries its tag, so one kill finds it; only a
        # silent one needs the engine's word (two more calls, which many closing sessions feel).
        unsure = not self.spoke
        self.close()
        if unsure:
            await self.wait_started(timeout=START_WAIT)
        for _ in range(KILL_ATTEMPTS):
            if not await self._runtime.kill_tagged(self._exec.target, [self._exec.tag]):
                return  # the container is paused: the kill runs as soon as it is unpaused
            # A shell caught between the engine's start and its exec() does not carry its tag
            # yet; the exec's own state says whether it survived, and another round gets it.
            if not unsure or not await self.is_running():
                return
        self._runtime.log.warning("A tool terminal's shell survived every kill")


class _ThreadReading(asyncio.Transport):
    """Fallback for exec sockets the event loop cannot drive (SSH, named pipes): one thread
    reads the socket into a :class:`ShellStream` and stops while the stream is paused, so
    the stream's bound holds here too. Writes go through the runtime's thread pool."""

    def __init__(
        self, sock: t.Any, stream: ShellStream, loop: asyncio.AbstractEventLoop, name: str
    ) -> None:
        super().__init__()
        self._sock = sock
        self._stream = stream
        self._loop = loop
        self._reading = threading.Event()
        self._reading.set()
        self._closed = False
        stream.connection_made(self)
        threading.Thread(target=self._pump, name=name, daemon=True).start()

    def _pump(self) -> None:
        while True:
            self._reading.wait()
            try:
                data = b"" if self._closed else self._sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                self._loop.call_soon_threadsafe(self._stream.eof_received)
                self._loop.call_soon_threadsafe(self._stream.connection_lost, None)
                return
            # Wait until the stream took the piece (and paused, if it is full) before the
            # next recv: the thread would otherwise read on while the loop is busy.
            delivered: concurrent.futures.Future[None] = concurrent.futures.Future()
            try:
                self._loop.call_soon_threadsafe(self._deliver, data, delivered)
            except RuntimeError:  # the event loop is closed: nobody reads any more
                return
            delivered.result()

    def _deliver(self, data: bytes, delivered: concurrent.futures.Future[None]) -> None:
        try:
            self._stream.data_received(data)
        finally:
            delivered.set_result(None)

    def pause_reading(self) -> None:
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    def is_reading(self) -> bool:
        return self._reading.is_set()

    def is_closing(self) -> bool:
        return self._closed

    def write(self, data: t.Any) -> None:
        # The channel sends through the runtime's thread pool (``_ThreadExecChannel.write``).
        msg = "a thread-read exec socket is written by its channel"
        raise NotImplementedError(msg)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._reading.set()
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()


class _ThreadExecChannel(_ExecChannel):
    """An exec whose stream is read by a :class:`_ThreadReading` thread."""

    def __init__(self, runtime: DockerRuntime, shell: _Exec, sock: t.Any) -> None:
        stream = ShellStream()
        name = f"exec-{shell.exec_id[:12]}"
        _ThreadReading(sock, stream, asyncio.get_running_loop(), name)
        super().__init__(runtime, shell, stream)
        self._sock = sock

    async def write(self, data: bytes) -> None:
        await self._runtime.run(self._sock.sendall, data)

    def write_nowait(self, data: bytes) -> int:
        # Its socket is blocking (a thread reads it): writes go through the pool.
        del data
        return 0


class DockerRuntime(ToolRuntime):
    """Tool instances are labelled Docker containers; connects like ``docker.from_env()``
    (``DOCKER_HOST``, ``DOCKER_TLS_VERIFY``, ``DOCKER_CERT_PATH``, the default socket)."""

    name = "docker"

    threads = Integer(
        32,
        min=1,
        help="""Threads (and connections to the Docker Engine) for blocking Engine API calls:
        how many opens, resizes and kills can be on their way at once.""",
    ).tag(config=True)

    ping_timeout = Float(
        5,
        min=0.1,
        help="Seconds to wait for the Docker Engine's answer when checking for it at start-up.",
    ).tag(config=True)

    def __init__(self, **kwargs: t.Any) -> None:
        super().__init__(**kwargs)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.threads, thread_name_prefix="jupyter-tool-terminal-docker"
        )
        self._client: docker.APIClient | None = None
        self._client_lock = threading.Lock()
        # Kill requests waiting for their container's kill worker: (tags, waiters).
        self._pending_kills: dict[_Target, tuple[set[str], list[asyncio.Future[bool]]]] = {}
        self._kill_workers: dict[_Target, asyncio.Task[None]] = {}
        # The tags of the shells started in each container and not killed yet; a container
        # with other live shells gets a reaper for its kills (see ``reaper.py``).
        self._live_tags: dict[_Target, set[str]] = {}
        self._reapers: dict[_Target, Reaper] = {}
        # Kills a paused container could not run yet, and the tasks waiting to run them.
        self._deferred: dict[_Target, set[str]] = {}
        self._pause_watchers: dict[str, asyncio.Task[None]] = {}
        # Containers of "cleanup": "instance" tool types: the start time (in the container's
        # clock ticks) of a process started just before their first session.
        self._marks: dict[str, int] = {}
        self._container_locks: dict[str, asyncio.Lock] = {}
        # Reapers need a socket the event loop can drive; an engine behind TLS or SSH never
        # gives one, and is not asked again.
        self._reapers_possible = True
        self._tls_context: ssl.SSLContext | None = None
        #: This server's id: its shells carry it, and its reapers are its leases (see
        #: README, "What the kill guarantees": after a crash).
        self.server_id = secrets.token_hex(16)
        self._lease_locks: dict[_Target, asyncio.Lock] = {}

    # -- plumbing ---------------------------------------------------------------------------

    def _api(self) -> docker.APIClient:
        with self._client_lock:
            if self._client is None:
                # The pool must hold a connection per concurrent call, or calls queue in urllib3.
                self._client = docker.from_env(max_pool_size=self.threads).api
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

    def check_available(self) -> None:
        """Ping the engine; :class:`RuntimeUnavailable` says where it was looked for."""
        where = os.environ.get("DOCKER_HOST") or "the default socket /var/run/docker.sock"
        try:
            client = docker.from_env(timeout=int(max(self.ping_timeout, 1)))
        except docker.errors.DockerException as error:
            msg = f"no Docker Engine answers at {where}; start Docker or set DOCKER_HOST"
            raise RuntimeUnavailable(msg) from error
        try:
            client.ping()
        except (docker.errors.DockerException, OSError) as error:
            msg = f"no Docker Engine answers at {where}; start Docker or set DOCKER_HOST"
            raise RuntimeUnavailable(msg) from error
        finally:
            client.close()

    def close(self) -> None:
        for container_id in {target[0] for target in self._deferred}:
            self.log.warning(
                "Container %s is paused: its closed tool terminals' processes could not be "
                "killed and outlive this server",
                container_id[:12],
            )
        for watcher in self._pause_watchers.values():
            watcher.cancel()
        for reaper in self._reapers.values():
            reaper.close()
        self._reapers.clear()
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
    ) -> DockerInstance | None:
        owner, tool = labels.get(OWNER_LABEL), labels.get(TOOL_LABEL)
        if not owner or not tool:
            return None
        return DockerInstance(
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

    async def get_instance(self, instance_id: str) -> DockerInstance | None:
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

    async def start_shell(self, instance: Instance, tool: ToolType) -> ShellChannel:
        """Start the shell as a ``docker exec`` with a TTY, tagged for its later kill."""
        if not isinstance(instance, DockerInstance):
            msg = f"not a Docker tool instance: {instance.id}"
            raise TypeError(msg)
        tag = secrets.token_hex(16)
        target = (instance.container_id, tool.user or "")
        if tool.cleanup == "instance":
            # Marked before the first shell, under the lock that the instance-wide kill holds.
            async with self._container_lock(instance.container_id):
                if instance.container_id not in self._marks:
                    self._marks[instance.container_id] = await self._take_mark(
                        instance.container_id
                    )
                self._live_tags.setdefault(target, set()).add(tag)
        else:
            self._live_tags.setdefault(target, set()).add(tag)
        try:
            leased = await self._lease(target)
            exec_id = await self._create_exec(instance, tool, tag, leased)
        except BaseException:
            # No shell runs with this tag: it must not count as a live shell of the container.
            live = self._live_tags.get(target)
            if live is not None:
                live.discard(tag)
                if not live:
                    self._live_tags.pop(target, None)
            raise
        return await self._open(_Exec(instance.container_id, exec_id, tag, target[1]))

    async def _create_exec(
        self, instance: DockerInstance, tool: ToolType, tag: str, leased: bool
    ) -> str:
        """Create the shell's exec (not started yet); its id. Only a shell of a server whose
        lease runs in the container (``leased``) carries the server's id."""
        environment = shell_environment(
            tool,
            tag=tag,
            has_lang="LANG" in instance.env_names,
            server=self.server_id if leased else None,
        )
        try:
            created = await self.call(
                "exec_create",
                instance.container_id,
                shell_command(tool),
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
        return exec_id

    async def _open(self, shell: _Exec) -> ShellChannel:
        """Start the created exec and open its stream on the event loop."""
        try:
            api = await self.run(self._api)
            if docker_tls.is_tls(api):
                stream = await docker_tls.start_exec(api, await self._tls(api), shell.exec_id)
                return _ExecChannel(self, shell, stream)
            sock = await self.call("exec_start", shell.exec_id, tty=True, socket=True)
            return await self._channel(shell, sock)
        except BaseException as error:
            # The engine may have started the shell whatever failed after the exec was
            # created: it ends through the one kill path, as every shell does.
            await asyncio.shield(_ExecChannel(self, shell, None).terminate())
            if isinstance(error, docker.errors.NotFound):
                msg = "the tool instance is gone"
                raise RuntimeUnavailable(msg) from error
            if isinstance(error, OSError):
                self.log.warning("Could not open a tool terminal's stream: %s", error)
                msg = "the container engine is not reachable"
                raise RuntimeUnavailable(msg) from error
            raise

    async def _tls(self, api: t.Any) -> ssl.SSLContext:
        """The TLS context for exec streams (made once, off the event loop)."""
        if self._tls_context is None:
            self._tls_context = await self.run(docker_tls.ssl_context, api)
        return self._tls_context

    async def _channel(self, shell: _Exec, sock: t.Any) -> ShellChannel:
        own = self._own_socket(sock)
        if own is None:
            return _ThreadExecChannel(self, shell, getattr(sock, "_sock", sock))
        loop = asyncio.get_running_loop()
        _, stream = await loop.create_connection(ShellStream, sock=own)
        return _ExecChannel(self, shell, stream)

    @staticmethod
    def _own_socket(sock: t.Any) -> socket.socket | None:
        """The hijacked exec socket as a socket of the event loop's own, if it is a plain one.

        A duplicate of the descriptor goes to asyncio and the SDK's objects are dropped: the
        stream then belongs to the event loop alone and closes when its transport closes.
        """
        raw = getattr(sock, "_sock", sock)
        if not isinstance(raw, socket.socket) or isinstance(raw, ssl.SSLSocket):
            return None
        own = raw.dup()
        own.setblocking(False)
        if own.family in (socket.AF_INET, socket.AF_INET6):
            own.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with contextlib.suppress(Exception):
            sock.close()
        with contextlib.suppress(Exception):
            raw.close()
        return own

    @classmethod
    async def _loop_stream(
        cls,
        sock: t.Any,
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """Turn a hijacked exec socket into event-loop streams, if it is a plain socket."""
        own = cls._own_socket(sock)
        if own is None:
            return None
        return await asyncio.open_connection(sock=own, limit=_READ_LIMIT)

    def _container_lock(self, container_id: str) -> asyncio.Lock:
        return self._container_locks.setdefault(container_id, asyncio.Lock())

    async def kill_tagged(self, target: _Target, tags: t.Collection[str]) -> bool:
        """Kill the tagged shells' processes; concurrent kills in one container share one exec.

        Returns ``False`` if the container is paused: the kill is then kept and runs as soon
        as the container is unpaused (or is dropped when it is gone, its processes with it).

        The kill script scans every process of the container, so one exec per closing session
        would cost O(sessions^2) when many close at once (server shutdown, a reset storm).
        Instead one kill exec per container runs at a time, and every request that arrives
        meanwhile joins the next one.
        """
        if not tags:
            return True
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        pending_tags, waiters = self._pending_kills.setdefault(target, (set(), []))
        pending_tags.update(tags)
        waiters.append(waiter)
        if target not in self._kill_workers:
            self._kill_workers[target] = asyncio.create_task(self._kill_worker(target))
        return await waiter

    async def _kill_worker(self, target: _Target) -> None:
        try:
            while (pending := self._pending_kills.pop(target, None)) is not None:
                tags, waiters = pending
                done = True
                try:
                    done = await self._kill_now(target, sorted(tags))
                finally:
                    for waiter in waiters:
                        if not waiter.done():
                            waiter.set_result(done)
        finally:
            # No await between the last pop and here: a request arriving now starts a worker.
            self._kill_workers.pop(target, None)

    def _others_live(self, target: _Target, tags: list[str]) -> bool:
        """Whether shells other than ``tags`` are alive in the target's container."""
        return any(
            key[0] == target[0] and live.difference(tags) for key, live in self._live_tags.items()
        )

    async def _kill_now(self, target: _Target, tags: list[str]) -> bool:
        container_id = target[0]
        if container_id in self._marks:
            async with self._container_lock(container_id):
                mark = self._marks.get(container_id)
                if mark is not None and not self._others_live(target, tags):
                    # The container's last session: everything since its first one goes.
                    done = await self._kill_once(container_id, ROOT, ["instance", str(mark)])
                    if done:
                        self._marks.pop(container_id, None)
                    return self._killed(target, tags, done)
        return self._killed(target, tags, await self._kill_session(target, tags))

    def _killed(self, target: _Target, tags: list[str], done: bool) -> bool:
        """Book a kill's outcome: the tags are gone, or deferred until the container runs."""
        if not done:
            self._deferred.setdefault(target, set()).update(tags)
            if target[0] not in self._pause_watchers:
                self._pause_watchers[target[0]] = asyncio.create_task(
                    self._run_when_unpaused(target[0])
                )
            return False
        # Looked up again: a shell may have started in the container meanwhile.
        live = self._live_tags.get(target)
        if live is not None:
            live.difference_update(tags)
        if not live:
            self._live_tags.pop(target, None)
            # No shell is left to kill: the reaper goes too, and the container is as before.
            if (idle := self._reapers.pop(target, None)) is not None:
                idle.close()
        return True

    async def _kill_session(self, target: _Target, tags: list[str]) -> bool:
        reaper = self._reapers.get(target)
        if reaper is None and self._reapers_possible and self._others_live(target, tags):
            # Other shells are still running here, so more kills are to come: the exec
            # started now serves them all, instead of one exec per kill.
            reaper = await self._start_reaper(target)
        if reaper is not None:
            request = asyncio.ensure_future(reaper.request("session", tags, REAPER_TIMEOUT))
            await asyncio.wait({request}, timeout=PAUSE_PROBE)
            if not request.done() and await self._paused(target[0]):
                # A frozen reaper answers nothing; the caller is not held up waiting for it.
                request.cancel()
                with contextlib.suppress(asyncio.CancelledError, ReaperGone):
                    await request
                reaper.close()
                self._reapers.pop(target, None)
                return False
            try:
                answer = await request
            except ReaperGone:
                self._reapers.pop(target, None)
            else:
                self._log_status(answer)
                return True
        return await self._kill_once(target[0], target[1], ["session", *tags])

    async def _paused(self, container_id: str) -> bool:
        try:
            info = await self.call("inspect_container", container_id)
        except (docker.errors.NotFound, RuntimeUnavailable):
            return False
        return bool((info.get("State") or {}).get("Paused"))

    async def _run_when_unpaused(self, container_id: str) -> None:
        """Wait until a paused container runs again (or is gone), then run its deferred kills."""
        delay = 0.1
        try:
            while True:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                try:
                    info = await self.call("inspect_container", container_id)
                except docker.errors.NotFound:
                    info = {}
                except RuntimeUnavailable:
                    continue
                state = info.get("State") or {}
                if state.get("Paused"):
                    continue
                targets = [key for key in self._deferred if key[0] == container_id]
                for target in targets:
                    tags = self._deferred.pop(target)
                    if state.get("Running"):
                        await self.kill_tagged(target, tags)
                    else:  # stopped or removed: its processes are gone
                        self._killed(target, sorted(tags), True)
                if not any(key[0] == container_id for key in self._deferred):
                    return
        finally:
            self._pause_watchers.pop(container_id, None)

    def _log_status(self, answer: Answer) -> None:
        if answer.status:
            self.log.warning("Killing tool terminal processes ended with status %s", answer.status)

    async def _lease(self, target: _Target) -> bool:
        """Make sure this server's lease (its reaper) runs for the target before a shell
        starts there; the first time, kill what dead servers left there. Whether a lease runs.

        A shell starts only once its server's lease has answered: so a server that finds a
        shell of another server whose lease does not run knows that server is gone.
        """
        lock = self._lease_locks.setdefault(target, asyncio.Lock())
        async with lock:
            reaper = self._reapers.get(target)
            if reaper is not None and not reaper.broken:
                return True
            if not self._reapers_possible:
                return False
            reaper = await self._start_reaper(target)
            return reaper is not None and await self._kill_orphans(target, reaper)

    async def _kill_orphans(self, target: _Target, reaper: Reaper) -> bool:
        """Kill, through the new lease, the processes of servers that have no lease running
        in the container; whether the lease answered."""
        for _ in range(ORPHAN_ATTEMPTS):
            try:
                live = await self._live_servers(target[0])
            except RuntimeUnavailable as error:
                # Without the list of live servers nothing may be taken for an orphan.
                self.log.warning("Could not look for orphaned tool terminals: %s", error)
                return True
            try:
                answer = await reaper.request("orphans", sorted(live), REAPER_TIMEOUT)
            except ReaperGone:
                self._reapers.pop(target, None)
                return False
            if answer.status != ORPHANS_UNSURE:
                self._log_status(answer)
                return True
        return True

    async def _live_servers(self, container_id: str) -> set[str]:
        """The ids of the servers with a lease running in the container (this one included),
        from the engine's record of the container's running execs."""
        live = {self.server_id}
        try:
            info = await self.call("inspect_container", container_id)
        except docker.errors.NotFound:
            return live

        async def lease(exec_id: str) -> str | None:
            try:
                found = await self.call("exec_inspect", exec_id)
            except (docker.errors.NotFound, RuntimeUnavailable):
                return None
            config = found.get("ProcessConfig") or {}
            if not found.get("Running") or config.get("entrypoint") != "/bin/sh":
                return None
            return lease_of(config.get("arguments") or [])

        found = await asyncio.gather(*(lease(i) for i in info.get("ExecIDs") or []))
        return live | {server_id for server_id in found if server_id is not None}

    async def _start_reaper(self, target: _Target) -> Reaper | None:
        """Start a reaper (this server's lease) in the container; ``None`` if it cannot be
        had (the kill then runs as its own exec)."""
        try:
            created = await self.call(
                "exec_create",
                target[0],
                lease_command(self.server_id),
                user=target[1],
                environment={
                    **KILL_ENVIRONMENT,
                    REAPER_SCRIPT_VARIABLE: REAPER_SCRIPT,
                    LEASE_VARIABLE: self.server_id,
                },
                stdin=True,
                tty=False,
            )
            api = await self.run(self._api)
            if docker_tls.is_tls(api):
                stream: (
                    tuple[asyncio.StreamReader, asyncio.StreamWriter] | None
                ) = await docker_tls.start_exec_streams(api, await self._tls(api), created["Id"])
            else:
                sock = await self.call("exec_start", created["Id"], tty=False, socket=True)
                stream = await self._loop_stream(sock)
        except (docker.errors.NotFound, RuntimeUnavailable):
            return None
        if stream is None:
            self._reapers_possible = False
            with contextlib.suppress(Exception):
                sock.close()
            return None
        reaper = Reaper(*stream)
        self._reapers[target] = reaper
        return reaper

    async def _take_mark(self, container_id: str) -> int:
        """The start time of a process started now in the container (for instance cleanup)."""
        answer = await self._once(container_id, ROOT, ["mark"])
        if answer is None or answer.value is None:
            msg = "the tool instance cannot be prepared for its clean-up"
            raise RuntimeUnavailable(msg)
        return answer.value

    async def _kill_once(self, container_id: str, user: str, words: list[str]) -> bool:
        """Run one kill request as its own exec; ``False`` if the container is paused."""
        try:
            answer = await self._once(container_id, user, words)
        except _Paused:
            return False
        except RuntimeUnavailable as error:
            self.log.warning("Could not kill tool terminal processes: %s", error)
            return True
        if answer is not None:
            self._log_status(answer)
        return True

    async def _once(self, container_id: str, user: str, words: list[str]) -> Answer | None:
        """Run a request of the kill script as its own exec; its answer, or ``None`` if the
        container is gone or stopped (and its processes with it)."""

        def run() -> bytes:
            api = self._api()
            created = api.exec_create(
                container_id,
                ["/bin/sh", "-c", KILL_ONCE_SCRIPT, "jupyter-tool-terminal-kill", *words],
                user=user,
                environment=KILL_ENVIRONMENT,
                stdin=False,
                tty=False,
                stderr=False,
            )
            output: bytes = api.exec_start(created["Id"])
            return output

        try:
            output = await self.run(run)
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as error:
            if error.status_code == 409:
                if "paused" in str(error.explanation or "").lower():
                    raise _Paused from error
                return None  # the container is not running: nothing is left
            msg = f"the engine refused the kill: {error.explanation}"
            raise RuntimeUnavailable(msg) from error
        except (docker.errors.DockerException, OSError) as error:
            msg = f"the engine could not be reached: {error}"
            raise RuntimeUnavailable(msg) from error
        lines = output.strip().splitlines()
        answer = parse_answer(lines[-1], 0) if lines else None
        if answer is None:
            self.log.warning("The kill in container %s did not answer", container_id[:12])
        return answer


class _Paused(Exception):
    """The container is paused: nothing can run in it now."""
