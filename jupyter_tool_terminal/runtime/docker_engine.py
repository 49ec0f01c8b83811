"""One Docker engine's runtime: its Engine API client, its shells (``docker exec`` PTYs), its kills.

:class:`EngineRuntime` drives one engine, as ``jupyter_client``'s ``KernelManager`` drives one
kernel: its connection pool and thread pool, the execs of its shells and their streams, its
kill wing and this server's leases there, and (for an engine of ``c.DockerRuntime.engines``) its
health. The runtime users configure, ``DockerRuntime`` (``docker.py``), holds one of these per
engine and routes instance ids to them, as ``MultiKernelManager`` holds kernel managers.

Every blocking call of the ``docker`` SDK runs in a thread pool; the terminal's byte stream is
the exec's hijacked socket (a local engine's) or a TLS connection of the event loop's own (a
remote engine's, see ``docker_tls.py``), read and written by the event loop itself, so a session
costs no thread and no process on the Jupyter host. Only transports asyncio cannot drive (SSH,
named pipes) fall back to two threads per exec stream (one reads, one writes), bounded all the
same (``stream.ThreadTransport``). Shells and reapers share that one stream type.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import secrets
import socket
import ssl
import threading
import typing as t
import weakref

import docker
import docker.errors

from .. import metrics
from ..tooltypes import ToolType
from . import access as engine_access
from . import docker_files, docker_tls
from .base import (
    EngineUnreachable,
    Instance,
    InstanceMoved,
    RuntimeUnavailable,
    ShellChannel,
    ToolRuntime,
)
from .engines import EngineHealth, EngineSpec, unreachable
from .foreground import ForegroundWatch
from .kills import KillWing, Target
from .launch import STANDBY_READY, shell_command, shell_environment, standby_command
from .shells import MissingShells, is_start_failure
from .standby import StandbyShells
from .stream import ShellStream, ThreadTransport
from .transfer import FileDownload, FileUpload

OWNER_LABEL = "jupyter-tool-terminal.owner"
TOOL_LABEL = "jupyter-tool-terminal.tool"
#: The label Swarm puts on a task's container: its task's id.
TASK_LABEL = "com.docker.swarm.task.id"

#: How many times a shell is killed again while the engine still reports it running.
KILL_ATTEMPTS = 6
#: How long the first kill waits for the engine to report the shell's end before killing it
#: again (doubling each time: 50 ms to 1.6 s, 3.2 s in all).
KILL_RETRY_DELAY = 0.05
#: How long a silent shell's end waits for the engine to have really started it.
START_WAIT = 5.0
#: How long the question which program holds a terminal waits for its shell to be found.
FOREGROUND_SETTLE = 2.0


@dataclasses.dataclass(frozen=True)
class _Exec:
    """A shell's exec: the container it runs in, the engine's id for it, and its kill tag."""

    container_id: str
    exec_id: str
    tag: str
    #: The exec user of the shell, and so of its kill.
    user: str = ""
    #: The name of its engine (for a successor with several engines, see ``handover/``).
    engine: str = ""

    @property
    def target(self) -> Target:
        return (self.container_id, self.user)


@dataclasses.dataclass(frozen=True)
class DockerInstance(Instance):
    """A tool instance that is a labelled container."""

    runtime: t.ClassVar[str] = "docker"

    #: The container's immutable id; every exec targets this, never a name.
    container_id: str = ""
    #: The container's own environment names (to know whether ``LANG`` is already set).
    env_names: frozenset[str] = frozenset()
    #: The container's own environment (``Config.Env``) as (name, value) pairs, known when the
    #: instance was inspected; kept out of ``repr`` since values may be secrets.
    env: tuple[tuple[str, str], ...] = dataclasses.field(default=(), repr=False, compare=False)


class ExecChannel(ShellChannel):
    """A shell's exec: its stream (on the event loop), its size and its end.

    ``stream`` is ``None`` for an exec whose stream never opened: then it only terminates.
    """

    def __init__(self, runtime: EngineRuntime, shell: _Exec, stream: ShellStream | None) -> None:
        self._runtime = runtime
        self._exec = shell
        self.exec_id = shell.exec_id
        self._stream = stream
        self._started = False
        self._terminated = False
        #: Set when the engine stopped answering: the stream was dropped, the kill waits.
        self.engine_lost = False
        #: Set when a cluster ran the instance elsewhere: why the terminal ended.
        self.moved: InstanceMoved | None = None
        #: Asked when the shell's stream ends by itself: why, if the instance moved (Swarm).
        self.end_check: t.Callable[[], t.Awaitable[str | None]] | None = None
        #: What the terminal shows instead of the engine's refusal to start a missing shell.
        self.missing_shell: t.Callable[[], bytes] | None = None
        self._foreground = ForegroundWatch(runtime.kills, shell.target, shell.tag)

    def lose_engine(self) -> None:
        """The engine does not answer: end the stream now (the session then ends, saying so);
        the shell's kill waits until the engine answers again."""
        self.engine_lost = True
        if self._stream is not None:
            self._stream.abandon()

    def lose_instance(self, error: InstanceMoved) -> None:
        """The instance moved to another container: end the stream now, saying so."""
        self.moved = error
        if self._stream is not None:
            self._stream.abandon()

    async def read(self, size: int) -> bytes:
        if self._stream is None:
            return b""
        data = await self._stream.read(size)
        if data and not self.spoke and self.missing_shell is not None and is_start_failure(data):
            data = self.missing_shell()
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
            # "Running" is set before the engine asks runc for the process; its "Pid" only once
            # the process exists (under load, seconds later).
            started = info.get("Pid") if "Pid" in info else info.get("Running")
            if started or info.get("ExitCode") is not None:
                self._started = True
                return
            if asyncio.get_running_loop().time() > deadline:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)

    async def never_started(self) -> bool:
        """Whether the engine could not start the command at all (it is missing): the exec
        ended without ever having had a process."""
        await self.wait_started(START_WAIT)
        try:
            info = await self._runtime.call("exec_inspect", self.exec_id)
        except Exception:  # noqa: BLE001 - exec or engine gone: it is not for a shell to say
            return False
        return not info.get("Pid") and info.get("ExitCode") is not None

    async def _ends_within(self, timeout: float) -> bool:
        """Whether the engine reports the shell ended within ``timeout`` seconds."""
        deadline = asyncio.get_running_loop().time() + timeout
        pause = 0.01
        while await self.is_running():
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.1)
        return True

    async def is_running(self) -> bool:
        """Whether the shell process is still running (``False`` if that cannot be known)."""
        try:
            info = await self._runtime.call("exec_inspect", self.exec_id)
        except Exception:  # noqa: BLE001 - exec or engine gone
            return False
        return bool(info.get("Running"))

    async def foreground_program(self) -> str | None:
        """Asked in the container (``foreground.py``); ``RuntimeUnavailable`` if it cannot be."""
        # (The engine answers an exec's start before its process exists.)
        await self.wait_started(START_WAIT)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FOREGROUND_SETTLE
        while True:
            try:
                return await self._foreground.program()
            except RuntimeUnavailable:
                # The shell is not (or no longer) what runs: the engine reports the exec's
                # process before it has become the shell (runc's own, until its exec), and
                # its end a moment after it.
                if not await self.is_running():
                    return None  # ended: nothing reads what is typed (the session ends)
                if loop.time() >= deadline:
                    raise
            await asyncio.sleep(0.05)

    async def open_gate(self, timeout: float) -> bool:
        """Let a pre-started shell go on (``standby.py``): its startup command and shell start
        now. Whether it did within ``timeout`` seconds (``False``: it ended, or does not
        answer; it is of no use then). What it printed before is not the terminal's: dropped."""
        stream = self._stream
        if stream is None or stream.ended:
            return False
        try:
            await stream.write(b"\n")
            await asyncio.wait_for(stream.read_until(STANDBY_READY, limit=4096), timeout)
        except (ConnectionError, TimeoutError):
            return False
        # Its process runs, carrying its tag, and what it prints from now on is the terminal's.
        self._started = self.spoke = True
        return True

    async def working_directory(self) -> str | None:
        shell = self._exec
        return await docker_files.working_directory(
            self._runtime, shell.container_id, shell.user, shell.tag
        )

    async def exit_code(self) -> int | None:
        if self.engine_lost:
            raise self._runtime.unreachable()
        if self.moved is None and self.end_check is not None:
            # Swarm stops a moved task's container: its shell's end says "137", not why.
            why = await self.end_check()
            self.moved = None if why is None else InstanceMoved(why)
        if self.moved is not None:
            raise self.moved
        info = await self._runtime.call("exec_inspect", self.exec_id)
        code = info.get("ExitCode")
        return code if isinstance(code, int) and not info.get("Running") else None

    def take_buffered(self) -> bytes:
        return b"" if self._stream is None else self._stream.take_buffered()

    def release(self) -> None:
        self._terminated = True  # the successor's to end, not this server's
        self.close()

    def handover(self) -> tuple[int, dict[str, str]]:
        """The descriptor of the exec's connection and what names the shell, for a successor
        (``handover/``); ``ValueError`` if the connection cannot change process: a TLS
        connection's state (a remote engine's) and a thread's transport (SSH) stay here."""
        transport = None if self._stream is None else self._stream.transport
        sock = None if transport is None else transport.get_extra_info("socket")
        if sock is None or transport is None or transport.get_extra_info("ssl_object"):
            msg = "only exec streams over a local engine socket can be handed over"
            raise ValueError(msg)
        shell = dataclasses.asdict(self._exec)
        return sock.fileno(), shell

    def close(self) -> None:
        """Close the stream. This does not end the shell: see :meth:`terminate`."""
        if self._stream is not None:
            self._stream.close()

    async def terminate(self) -> None:
        if self._terminated:
            return
        self._terminated = True
        self.end_check = None
        self._runtime.forget_channel(self)
        if self.engine_lost or not self._runtime.answering:
            # Nothing can run on an engine that does not answer: the kill waits for it.
            self.close()
            self._runtime.kills.defer(self._exec.target, [self._exec.tag])
            return
        # A shell that wrote output runs and carries its tag, so one kill finds it; only a
        # silent one needs the engine's word (two more calls, which many closing sessions feel).
        unsure = not self.spoke
        self.close()
        if unsure:
            await self.wait_started(timeout=START_WAIT)
        delay = KILL_RETRY_DELAY
        for _ in range(KILL_ATTEMPTS):
            if not await self._runtime.kills.kill(self._exec.target, [self._exec.tag]):
                return  # the container is paused: the kill runs as soon as it is unpaused
            # A shell caught between the engine's start and its exec() does not carry its tag
            # yet; the exec's own state says whether it survived, and another round gets it.
            # The engine reports an exec's end a moment after it (and announces nothing), so a
            # round is repeated only once the shell has outlived the kill for a while.
            if not unsure or await self._ends_within(delay):
                return
            delay *= 2
        self._runtime.log.warning("A tool terminal's shell survived every kill")


class _SshPipes:
    """The SDK's ``SSHSocket`` (``ssh://`` engines) as :class:`ThreadTransport` reads it.

    Its ``recv(n)`` is a buffered read of the ssh process's stdout, which waits until ``n``
    bytes came: a shell's echo would wait for 64 KiB of output. ``read1`` returns what is
    there, the buffered rest of the HTTP answer first.
    """

    def __init__(self, sock: t.Any) -> None:
        self._sock = sock

    def recv(self, size: int) -> bytes:
        data: bytes = self._sock.proc.stdout.read1(size)
        return data

    def sendall(self, data: bytes) -> None:
        self._sock.sendall(data)

    def shutdown(self, how: int) -> None:
        del how  # a pipe pair has no half-close; close() ends the ssh process

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._sock.close()


@dataclasses.dataclass(frozen=True)
class EngineSettings:
    """What ``c.DockerRuntime`` sets for the runtime of each of its engines (see its help)."""

    #: Threads (and pooled connections) for blocking Engine API calls.
    threads: int
    #: Seconds a blocking Engine API call may take.
    call_timeout: float
    #: Seconds the start-up check waits for the engine ``docker.from_env()`` finds.
    startup_check_timeout: float
    #: Seconds a lease outlives its target's last shell.
    lease_linger: float
    #: Seconds between an engine's health checks, and the time each has to answer.
    check_interval: float
    check_timeout: float
    #: Whether each (container, tool type) in use has a shell started ahead (``standby.py``).
    prestart_shells: bool = False


class EngineRuntime(ToolRuntime):
    """The runtime of one Docker engine: instances are its labelled containers, shells its
    execs. ``spec`` names an engine of ``c.DockerRuntime.engines`` (or a Swarm node's); without
    it, the engine is the one ``docker.from_env()`` finds (``DOCKER_HOST``, ...).

    Instance ids here are the engine's own container names: the runtime over the engines adds
    the engine's name in front where there are several.
    """

    name = "docker"

    def __init__(
        self, *, settings: EngineSettings, spec: EngineSpec | None = None, **kwargs: t.Any
    ) -> None:
        super().__init__(**kwargs)
        #: The engine this runtime drives (``None``: the one ``docker.from_env()`` finds).
        self.spec = spec
        self.settings = settings
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=settings.threads, thread_name_prefix="jupyter-tool-terminal-docker"
        )
        self._client: docker.APIClient | None = None
        self._client_lock = threading.Lock()
        self._tls_context: ssl.SSLContext | None = None
        #: The kill wing: every shell's end, this server's leases, orphans of others.
        self.kills = KillWing(
            self, on_deferred=self._count_deferred_kill, linger=settings.lease_linger
        )
        self._channels: weakref.WeakSet[ExecChannel] = weakref.WeakSet()
        #: Shells instances lack (logged once each), and the one of ``shells`` each has.
        self.missing_shells = MissingShells(self.log)
        #: Whether a named engine answers (``None`` for the one ``docker.from_env()`` finds).
        self.health: EngineHealth | None = None
        #: Whether Swarm's task containers are left out of this engine's own instances (they
        #: are instances of their services, through the managers).
        self.hide_swarm_tasks = False
        #: The shells started ahead for the next open (``c.DockerRuntime.prestart_shells``).
        self.standby: StandbyShells[ExecChannel] | None = (
            StandbyShells(self._start_standby, self.log) if settings.prestart_shells else None
        )
        if spec is not None:
            self.health = EngineHealth(
                spec,
                interval=settings.check_interval,
                timeout=settings.check_timeout,
                log=self.log,
                on_change=self._engine_changed,
            )
            for family in (metrics.ENGINE_SESSIONS, metrics.ENGINE_OPENS):
                family.labels(spec.name)
            metrics.ENGINE_KILL_FAILURES.labels(spec.name)

    # -- the engine's health -------------------------------------------------------------------

    @property
    def engine_name(self) -> str:
        """The engine's name ("" for the one engine ``docker.from_env()`` finds)."""
        return self.spec.name if self.spec is not None else ""

    @property
    def answering(self) -> bool:
        """Whether the engine answers (as its last health check or call found)."""
        return self.health is None or self.health.up

    async def wait_answering(self) -> None:
        """Return once the engine answers again (at once while it does)."""
        if self.health is not None:
            await self.health.wait_answering()

    def unreachable(self) -> EngineUnreachable:
        """The error (safe to show) of this engine not answering."""
        if self.spec is None:
            return EngineUnreachable("the container engine is not reachable")
        return unreachable(self.spec.name)

    def _engine_changed(self, up: bool) -> None:
        if not up:
            for channel in list(self._channels):
                channel.lose_engine()

    def forget_channel(self, channel: ExecChannel) -> None:
        """A shell's channel is closing: it no longer counts as one of the engine's."""
        if channel in self._channels:
            self._channels.discard(channel)
            if self.spec is not None:
                metrics.ENGINE_SESSIONS.labels(self.spec.name).dec()

    def _count_deferred_kill(self) -> None:
        if self.spec is not None:
            metrics.ENGINE_KILL_FAILURES.labels(self.spec.name).inc()

    # -- plumbing ---------------------------------------------------------------------------

    def api(self) -> docker.APIClient:
        """The SDK client (blocking: for functions run with :meth:`run`)."""
        with self._client_lock:
            if self._client is None:
                # The pool must hold a connection per concurrent call, or calls queue in urllib3.
                if self.spec is not None:
                    self._client = self.spec.client(
                        max_pool_size=self.settings.threads,
                        timeout=int(self.settings.call_timeout),
                    )
                else:
                    self._client = docker.from_env(max_pool_size=self.settings.threads).api
            return self._client

    async def run(self, func: t.Callable[..., t.Any], *args: t.Any, **kwargs: t.Any) -> t.Any:
        """Run a blocking function in the runtime's thread pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(func, *args, **kwargs))

    async def call(self, method: str, *args: t.Any, **kwargs: t.Any) -> t.Any:
        """Call an ``APIClient`` method off the event loop, turning engine errors into
        :class:`RuntimeUnavailable` with a message that is safe to show to users."""

        def invoke() -> t.Any:
            return getattr(self.api(), method)(*args, **kwargs)

        try:
            return await self.run(invoke)
        except docker.errors.NotFound:
            raise
        except docker.errors.APIError as error:
            self.log.warning("Docker Engine refused %s: %s", method, error.explanation or error)
            msg = "the container engine refused the operation"
            raise RuntimeUnavailable(msg) from error
        except (docker.errors.DockerException, OSError) as error:
            self.log.warning(
                "Docker Engine %s unreachable during %s: %s", self.engine_name, method, error
            )
            if self.health is not None:
                # One failed call may be one broken connection: the engine's own answer to a
                # ping decides whether it is down (and its sessions end).
                await self.health.check()
            raise self.unreachable() from error

    def check_available(self) -> None:
        """Ping the engine; :class:`RuntimeUnavailable` says where it was looked for.

        (A named engine's check is its health's: the runtime over the engines pings them all
        at once.)
        """
        if self.health is not None:
            if not self.health.ping():
                raise self.unreachable()
            return
        try:
            client = docker.from_env(timeout=int(max(self.settings.startup_check_timeout, 1)))
        except docker.errors.DockerException as error:
            raise RuntimeUnavailable(engine_access.diagnose().message) from error
        try:
            client.ping()
        except (docker.errors.DockerException, OSError) as error:
            raise RuntimeUnavailable(engine_access.diagnose().message) from error
        finally:
            client.close()

    def close(self) -> None:
        if self.health is not None:
            self.health.close()
        self.kills.close()
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
            env=tuple((name, value) for name, _, value in (item.partition("=") for item in env)),
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
            hidden = self.hide_swarm_tasks and TASK_LABEL in labels
            if instance is not None and instance.owner == owner and instance.id and not hidden:
                found.append(instance)
        return sorted(found, key=lambda instance: instance.id)

    async def get_instance(self, instance_id: str) -> DockerInstance | None:
        """The container named exactly ``instance_id`` on this engine, as an instance."""
        if not self.could_own(instance_id):
            return None
        try:
            info = await self.call("inspect_container", instance_id)
        except docker.errors.NotFound:
            return None
        # The engine also resolves id prefixes; only an exact name is an instance id.
        if info.get("Name", "").lstrip("/") != instance_id:
            return None
        config = info.get("Config") or {}
        if self.hide_swarm_tasks and TASK_LABEL in (config.get("Labels") or {}):
            return None  # an instance of its service (swarm/SERVICE), not of its own
        return self._instance(
            info["Name"],
            info["Id"],
            config.get("Labels") or {},
            (info.get("State") or {}).get("Status", ""),
            config.get("Env") or (),
        )

    # -- shells -----------------------------------------------------------------------------

    async def start_shell(
        self, instance: Instance, tool: ToolType, size: tuple[int, int] | None = None
    ) -> ShellChannel:
        """Start the shell as a ``docker exec`` with a TTY, tagged for its later kill (or let
        the one started ahead go, ``standby.py``)."""
        container = self._serving(instance)
        if self.standby is not None:
            ahead = await self.standby.take(container, tool, size)
            if ahead is not None:
                return ahead
        if tool.shells and tool.startup_command is None:
            channel = await self._start_one_of(container, tool, size)
        else:
            channel = await self._start_exec(container, tool, size)
        if self.standby is not None:
            self.standby.offer(container, tool)  # for the next open
        return channel

    def prestart(self, instance: Instance, tool: ToolType) -> None:
        """Have a shell of ``tool`` started ahead in ``instance`` (``standby.py``)."""
        if self.standby is not None and self.answering:
            self.standby.offer(self._serving(instance), tool)

    async def end_prestarted(self) -> None:
        """End the shells started ahead, and start none until :meth:`resume_prestarting`."""
        if self.standby is not None:
            await self.standby.close()

    def resume_prestarting(self) -> None:
        if self.standby is not None:
            self.standby.reopen()

    async def _start_standby(self, instance: Instance, tool: ToolType) -> ExecChannel | None:
        """Start a shell of ``tool`` behind its gate, for the next open (``standby.py``)."""
        container = self._serving(instance)
        channel = await self._start_exec(container, tool, None, command=standby_command(tool))
        if isinstance(channel, ExecChannel):
            channel.missing_shell = None  # the gate's script says so itself
            return channel
        await channel.terminate()
        return None

    async def _start_exec(
        self,
        instance: DockerInstance,
        tool: ToolType,
        size: tuple[int, int] | None,
        command: list[str] | None = None,
    ) -> ShellChannel:
        """Start ``tool``'s shell (its startup command first) as an exec; ``command`` instead
        of its usual command line (a shell started ahead)."""
        tag = secrets.token_hex(16)
        target = (instance.container_id, tool.user or "")
        if command is None:
            command = shell_command(tool, size)
        try:
            leased = await self.kills.register(target, tag, mark=tool.cleanup == "instance")
            exec_id = await self._create_exec(instance, tool, tag, leased, command)
        except BaseException:
            self.kills.forget(target, tag)
            raise
        shell = _Exec(instance.container_id, exec_id, tag, target[1], self.engine_name)
        channel = await self._open(shell)
        if isinstance(channel, ExecChannel):
            channel.missing_shell = functools.partial(self.missing_shells.report, tool, instance.id)
        if size is not None and tool.startup_command is None:
            # An exec's TTY can only be sized once it runs (the startup wrapper sizes its own
            # first): the shell's first prompt may still see 80 columns, nothing else does.
            with contextlib.suppress(Exception):
                await channel.resize(*size)
        return channel

    async def _start_one_of(
        self, instance: DockerInstance, tool: ToolType, size: tuple[int, int] | None
    ) -> ShellChannel:
        """Start the first of the tool type's ``shells`` that the container has, the one found
        before in this container first. A shell the engine cannot start is ended and the next
        one tried; with none, :class:`RuntimeUnavailable` says in plain words which are missing
        (and the log, once). Each container pays the wait for its shell's start once (only for
        a tool type with several shells); later sessions start straight away. (A tool type of
        one shell does not wait: a missing shell is said in its terminal, see ``shells.py``.)"""
        key = (instance.container_id, tool.name)
        known = self.missing_shells.chosen.get(key)
        shells = [(shell,) for shell in tool.shells]
        candidates = [known] if known else []
        candidates += [shell for shell in shells if shell != known]
        for candidate in candidates:
            one = dataclasses.replace(tool, shell=candidate, shells=())
            channel = await self._start_exec(instance, one, size)
            if not isinstance(channel, ExecChannel) or not await channel.never_started():
                self.missing_shells.chosen[key] = candidate
                if isinstance(channel, ExecChannel):  # (its words name all the shells)
                    channel.missing_shell = functools.partial(
                        self.missing_shells.report, tool, instance.id
                    )
                return channel
            await channel.terminate()
        self.missing_shells.chosen.pop(key, None)
        raise RuntimeUnavailable(self.missing_shells.tell(tool, instance.id))

    def _serving(self, instance: Instance) -> DockerInstance:
        """``instance`` as this engine's container, which a shell or transfer may use now."""
        if not isinstance(instance, DockerInstance):
            msg = f"not a Docker tool instance: {instance.id}"
            raise TypeError(msg)
        if not self.answering:
            raise self.unreachable()
        return instance

    async def open_download(
        self, instance: Instance, tool: ToolType, path: str, max_bytes: int
    ) -> FileDownload:
        """Read the file through an exec of the tool's user (``docker_files.py``)."""
        container = self._serving(instance)
        return await docker_files.open_download(self, container, tool, path, max_bytes)

    async def open_upload(
        self, instance: Instance, tool: ToolType, path: str, size: int, overwrite: bool
    ) -> FileUpload:
        """Write the file through an exec of the tool's user (``docker_files.py``)."""
        container = self._serving(instance)
        return await docker_files.open_upload(
            self, instance=container, tool=tool, path=path, size=size, overwrite=overwrite
        )

    def handover_state(self) -> dict[str, t.Any]:
        return self.kills.handover_state()

    def take_over(self, state: t.Mapping[str, t.Any]) -> None:
        self.kills.take_over(state)

    async def adopt_shell(self, shell: t.Mapping[str, str], sock: t.Any) -> ShellChannel:
        """Go on with a predecessor's shell (``shell`` from :meth:`ExecChannel.handover`)
        over its exec connection ``sock``; it counts as this server's from now on."""
        adopted = _Exec(
            shell["container_id"], shell["exec_id"], shell["tag"], shell["user"], self.engine_name
        )
        await self.kills.register(adopted.target, adopted.tag, mark=False)
        sock.setblocking(False)
        _, stream = await asyncio.get_running_loop().create_connection(ShellStream, sock=sock)
        channel = ExecChannel(self, adopted, stream)
        channel.spoke = channel._started = True  # it ran under the predecessor
        return channel

    async def _create_exec(
        self,
        instance: DockerInstance,
        tool: ToolType,
        tag: str,
        leased: bool,
        command: list[str],
    ) -> str:
        """Create the shell's exec (not started yet); its id. Only a shell of a server whose
        lease runs in the container (``leased``) carries the server's id."""
        environment = shell_environment(
            tool,
            tag=tag,
            has_lang="LANG" in instance.env_names,
            server=self.kills.server_id if leased else None,
        )
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
        return exec_id

    async def _open(self, shell: _Exec) -> ShellChannel:
        """Start the created exec and open its stream on the event loop."""
        try:
            channel = ExecChannel(self, shell, await self.attach(shell.exec_id, tty=True))
        except BaseException as error:
            # The engine may have started the shell whatever failed after the exec was
            # created: it ends through the one kill path, as every shell does.
            await asyncio.shield(ExecChannel(self, shell, None).terminate())
            if isinstance(error, docker.errors.NotFound):
                msg = "the tool instance is gone"
                raise RuntimeUnavailable(msg) from error
            if isinstance(error, OSError | EngineUnreachable):
                self.log.warning("Could not open a tool terminal's stream: %s", error)
                raise self.unreachable() from error
            raise
        self._channels.add(channel)
        if self.spec is not None:
            metrics.ENGINE_OPENS.labels(self.spec.name).inc()
            metrics.ENGINE_SESSIONS.labels(self.spec.name).inc()
        return channel

    async def _tls(self, api: t.Any) -> ssl.SSLContext:
        """The TLS context for exec streams (made once, off the event loop)."""
        if self._tls_context is None:
            self._tls_context = await self.run(docker_tls.ssl_context, api)
        return self._tls_context

    async def attach(self, exec_id: str, tty: bool) -> ShellStream:
        """Start a created exec and return its stream, the one stream type of every exec
        (shells and reapers) whatever the transport: the event loop's own socket, its own
        TLS connection (a remote engine's), or threads for what it cannot drive (SSH)."""
        api = await self.run(self.api)
        if docker_tls.is_tls(api):
            return await docker_tls.start_exec(api, await self._tls(api), exec_id, tty=tty)
        sock = await self.call("exec_start", exec_id, tty=tty, socket=True)
        loop = asyncio.get_running_loop()
        own = self._own_socket(sock)
        if own is None:
            stream = ShellStream()
            raw = getattr(sock, "_sock", sock)
            if hasattr(raw, "proc"):  # the SDK's SSHSocket: the pipes of an ssh process
                raw = _SshPipes(raw)
            ThreadTransport(raw, stream, loop, f"exec-{exec_id[:12]}")
            return stream
        _, stream = await loop.create_connection(ShellStream, sock=own)
        return stream

    @staticmethod
    def _own_socket(sock: t.Any) -> socket.socket | None:
        """The hijacked exec socket as a socket of the event loop's own, if it is a plain one.

        A duplicate of the descriptor goes to asyncio and the SDK's objects are dropped: the
        stream then belongs to the event loop alone and closes when its transport closes.
        """
        raw = getattr(sock, "_sock", sock)
        # Exactly a socket: an SSLSocket's TLS state is OpenSSL's, and the SDK's SSHSocket (a
        # subclass too) is the pipes of an ssh process, with no descriptor to give asyncio.
        if type(raw) is not socket.socket:
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
