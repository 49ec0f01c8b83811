"""The Docker runtime: shells are ``docker exec`` PTYs created over the Engine API.

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
from traitlets import Dict, Float, Integer, TraitError, observe, validate

from .. import metrics
from ..settings import rename
from ..tooltypes import ToolType
from . import access as engine_access
from . import docker_files, docker_tls
from . import engines as several
from . import swarm as swarms
from .base import (
    EngineUnreachable,
    Instance,
    InstanceMoved,
    RuntimeUnavailable,
    ShellChannel,
    ToolRuntime,
)
from .foreground import ForegroundWatch
from .kills import KillWing, Target
from .launch import shell_command, shell_environment
from .shells import MissingShells, is_start_failure
from .stream import ShellStream, ThreadTransport
from .transfer import FileDownload, FileUpload

OWNER_LABEL = "jupyter-tool-terminal.owner"
TOOL_LABEL = "jupyter-tool-terminal.tool"

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


@dataclasses.dataclass(frozen=True)
class SwarmTaskInstance(DockerInstance):
    """A Swarm service slot's instance: its task's container, as a node's engine runs it."""

    #: What the managers said of it (service, slot, task).
    swarm: swarms.SwarmInstance = dataclasses.field(
        default=swarms.SwarmInstance("", "", "", ""), repr=False, compare=False
    )


def _as_docker_instance(instance: swarms.SwarmInstance) -> SwarmTaskInstance:
    names = {field.name for field in dataclasses.fields(DockerInstance)}
    return SwarmTaskInstance(**{name: getattr(instance, name) for name in names}, swarm=instance)


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

    startup_check_timeout = Float(
        5,
        min=0.1,
        help="Seconds to wait for the Docker Engine's answer when checking for it at start-up.",
    ).tag(config=True)

    ping_timeout = Float(
        5, min=0.1, help="Deprecated: the old name of `startup_check_timeout` (the same setting)."
    ).tag(config=True)

    @observe("ping_timeout")
    def _ping_timeout_renamed(self, change: t.Mapping[str, t.Any]) -> None:
        rename(self, change, "startup_check_timeout")

    lease_linger = Float(
        60,
        min=0,
        help="""Seconds this server's lease (the reaper exec it keeps in a container where its
        shells run) stays after the container's last shell ended. An open into a container
        without a lease waits for one to start (one exec more before the shell's own); a
        lease that stays spares that to the terminals opened again soon after (a reset, a
        reload, the next terminal). 0: the lease ends with the last shell.""",
    ).tag(config=True)

    engines = Dict(
        help="""Several Docker engines, one per host: {NAME: {"url": URL, "tls": {"ca": PATH,
        "cert": PATH, "key": PATH}}} (tls optional, for tcp:// urls; URL as DOCKER_HOST:
        unix://, tcp://, ssh://). Empty (the default): the one engine docker.from_env() finds.
        With engines, instance ids are ENGINE/CONTAINER and instances carry their engine's
        name; an engine that does not answer takes nothing else down (README, "Several
        hosts").""",
    ).tag(config=True)

    swarm = Dict(
        help="""Docker Swarm: {"managers": [NAME, ...], "node_engine": {"url": TEMPLATE,
        "tls": {"ca": PATH, "cert": PATH, "key": PATH}}}. The managers are names of `engines`;
        every node's engine is found from their list of nodes ({addr} and {hostname} in the
        URL template), nodes that join later included. A replicated service whose task
        containers carry the owner and tool labels is a tool instance with the id
        swarm/SERVICE (swarm/SERVICE.SLOT with several replicas) that survives moves; its
        terminals open on the node that runs the task. Empty (the default): no Swarm.""",
    ).tag(config=True)

    engine_timeout = Float(
        3,
        min=0.1,
        help="""Seconds each engine of `engines` has to answer a list, a look-up or a health
        check; one that does not is left out of lists (they all answer within this), and is
        marked unreachable when its health check fails.""",
    ).tag(config=True)

    engine_check_interval = Float(
        2,
        min=0.1,
        help="Seconds between health checks of each engine of `engines`.",
    ).tag(config=True)

    call_timeout = Float(
        60,
        min=1,
        help="Seconds a blocking Engine API call may take before it fails (the SDK's timeout).",
    ).tag(config=True)

    @validate("engines")
    def _check_engines(self, proposal: t.Any) -> dict[str, t.Any]:
        try:
            several.parse_engines(proposal["value"])
        except ValueError as error:
            msg = f"c.DockerRuntime.engines: {error}"
            raise TraitError(msg) from error
        return dict(proposal["value"])

    def __init__(self, **kwargs: t.Any) -> None:
        #: The engine this runtime drives, when it is one of a parent's several engines.
        self.spec: several.EngineSpec | None = kwargs.pop("spec", None)
        super().__init__(**kwargs)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.threads, thread_name_prefix="jupyter-tool-terminal-docker"
        )
        self._client: docker.APIClient | None = None
        self._client_lock = threading.Lock()
        self._tls_context: ssl.SSLContext | None = None
        #: The kill wing: every shell's end, this server's leases, orphans of others.
        self.kills = KillWing(self, on_deferred=self._count_deferred_kill, linger=self.lease_linger)
        self._channels: weakref.WeakSet[_ExecChannel] = weakref.WeakSet()
        #: Shells instances lack (logged once each), and the one of ``shells`` each has.
        self.missing_shells = MissingShells(self.log)
        self.health: several.EngineHealth | None = None
        #: With several engines: one runtime of its own per engine, by name.
        self.by_engine: dict[str, DockerRuntime] = {}
        if self.spec is not None:
            self.health = several.EngineHealth(
                self.spec,
                interval=self.engine_check_interval,
                timeout=self.engine_timeout,
                log=self.log,
                on_change=self._engine_changed,
            )
            for family in (metrics.ENGINE_SESSIONS, metrics.ENGINE_OPENS):
                family.labels(self.spec.name)
            metrics.ENGINE_KILL_FAILURES.labels(self.spec.name)
        elif self.engines:
            for spec in several.parse_engines(self.engines).values():
                self.by_engine[spec.name] = self.engine_for(spec)
        #: The Swarm the managers among ``engines`` run (``c.DockerRuntime.swarm``).
        self.cluster: swarms.Swarm | None = None
        #: Whether Swarm's task containers are left out of this engine's own instances (they
        #: are instances of their services, through the managers).
        self.hide_swarm_tasks = False
        self._config_error: str | None = None
        if self.spec is None:
            self._make_swarm()

    def _make_swarm(self) -> None:
        try:
            spec = swarms.parse_swarm(self.swarm, self.by_engine)
        except ValueError as error:
            self._config_error = f"c.DockerRuntime.swarm: {error}"
            return
        if spec is None:
            return
        self.cluster = swarms.Swarm(self, spec)
        for engine in self.by_engine.values():
            engine.hide_swarm_tasks = True

    def engine_for(self, spec: several.EngineSpec) -> DockerRuntime:
        """A runtime of its own for one engine (a configured one, or a Swarm node's)."""
        return DockerRuntime(parent=self, spec=spec, engines={}, swarm={}, log=self.log)

    # -- one engine of several ----------------------------------------------------------------

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
        return several.unreachable(self.spec.name)

    def _engine_changed(self, up: bool) -> None:
        if not up:
            for channel in list(self._channels):
                channel.lose_engine()

    def forget_channel(self, channel: _ExecChannel) -> None:
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
                        max_pool_size=self.threads, timeout=int(self.call_timeout)
                    )
                else:
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

        With several engines, one that does not answer is logged and served once it does;
        only none answering is an error.
        """
        if self._config_error is not None:
            raise RuntimeUnavailable(self._config_error)
        if self.by_engine:
            several.check_at_start(list(self.by_engine.values()), self.log)
            return
        try:
            client = docker.from_env(timeout=int(max(self.startup_check_timeout, 1)))
        except docker.errors.DockerException as error:
            raise RuntimeUnavailable(engine_access.diagnose().message) from error
        try:
            client.ping()
        except (docker.errors.DockerException, OSError) as error:
            raise RuntimeUnavailable(engine_access.diagnose().message) from error
        finally:
            client.close()

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.close()
        for engine in self.by_engine.values():
            engine.close()
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
        if self.cluster is not None:
            return await self._list_with_swarm(self.cluster, owner)
        if self.by_engine:
            return await several.list_everywhere(self, owner)
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
            hidden = self.hide_swarm_tasks and swarms.TASK_LABEL in labels
            if instance is not None and instance.owner == owner and instance.id and not hidden:
                found.append(instance)
        return sorted(found, key=lambda instance: instance.id)

    async def _list_with_swarm(self, cluster: swarms.Swarm, owner: str) -> list[Instance]:
        """The engines' own instances and the Swarm's: each part answers (or is left out)
        within its timeouts; an error only when no engine at all answers."""

        async def plain() -> list[Instance] | None:
            try:
                return await several.list_everywhere(self, owner)
            except EngineUnreachable:
                return None

        engines, services = await asyncio.gather(plain(), cluster.list_instances(owner))
        if engines is None and services is None:
            if not any(engine.answering for engine in cluster.engines.values()):
                msg = "no container engine is reachable"
                raise EngineUnreachable(msg)
            self.log.warning("No Swarm manager answers: Swarm instances are left out")
        return sorted([*(engines or []), *(services or [])], key=lambda instance: instance.id)

    def could_own(self, instance_id: str) -> bool:
        if self.cluster is not None and swarms.split_id(instance_id) is not None:
            return True
        if not self.by_engine:
            return super().could_own(instance_id)
        engine, _, container = instance_id.partition("/")
        return engine in self.by_engine and self.by_engine[engine].could_own(container)

    async def get_instance(self, instance_id: str) -> DockerInstance | None:
        if not self.could_own(instance_id):
            return None
        if self.cluster is not None and swarms.split_id(instance_id) is not None:
            found = await self.cluster.get_instance(instance_id)
            return None if found is None else _as_docker_instance(found)
        if self.by_engine:
            # (an instance of one of its engines: a DockerInstance, its id made ENGINE/...)
            return t.cast("DockerInstance | None", await several.look_up(self, instance_id))
        return await self._inspect_instance(instance_id)

    async def _inspect_instance(self, instance_id: str) -> DockerInstance | None:
        """The container named exactly ``instance_id`` on this engine, as an instance."""
        try:
            info = await self.call("inspect_container", instance_id)
        except docker.errors.NotFound:
            return None
        # The engine also resolves id prefixes; only an exact name is an instance id.
        if info.get("Name", "").lstrip("/") != instance_id:
            return None
        config = info.get("Config") or {}
        if self.hide_swarm_tasks and swarms.TASK_LABEL in (config.get("Labels") or {}):
            return None  # an instance of its service (swarm/SERVICE), not of its own
        return self._instance(
            info["Name"],
            info["Id"],
            config.get("Labels") or {},
            (info.get("State") or {}).get("Status", ""),
            config.get("Env") or (),
        )

    # -- shells -----------------------------------------------------------------------------

    def shell_variables(self, instance: Instance, tool: ToolType) -> dict[str, str]:
        own = dict(instance.env) if isinstance(instance, DockerInstance) else {}
        return {**own, **tool.env}

    async def start_shell(
        self, instance: Instance, tool: ToolType, size: tuple[int, int] | None = None
    ) -> ShellChannel:
        """Start the shell as a ``docker exec`` with a TTY, tagged for its later kill."""
        if not isinstance(instance, DockerInstance):
            msg = f"not a Docker tool instance: {instance.id}"
            raise TypeError(msg)
        if self.by_engine:
            channel = await self._engine_of(instance).start_shell(instance, tool, size)
            if isinstance(instance, SwarmTaskInstance) and self.cluster is not None:
                assert isinstance(channel, _ExecChannel)
                self.cluster.watch(channel, instance.swarm)
            return channel
        if not self.answering:
            raise self.unreachable()
        if tool.shells and tool.startup_command is None:
            return await self._start_one_of(instance, tool, size)
        return await self._start_exec(instance, tool, size)

    async def _start_exec(
        self, instance: DockerInstance, tool: ToolType, size: tuple[int, int] | None
    ) -> ShellChannel:
        """Start ``tool``'s shell (its startup command first) as an exec."""
        tag = secrets.token_hex(16)
        target = (instance.container_id, tool.user or "")
        try:
            leased = await self.kills.register(target, tag, mark=tool.cleanup == "instance")
            exec_id = await self._create_exec(instance, tool, tag, leased, size)
        except BaseException:
            self.kills.forget(target, tag)
            raise
        channel = await self._open(_Exec(instance.container_id, exec_id, tag, target[1]))
        if isinstance(channel, _ExecChannel):
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
            if not isinstance(channel, _ExecChannel) or not await channel.never_started():
                self.missing_shells.chosen[key] = candidate
                if isinstance(channel, _ExecChannel):  # (its words name all the shells)
                    channel.missing_shell = functools.partial(
                        self.missing_shells.report, tool, instance.id
                    )
                return channel
            await channel.terminate()
        self.missing_shells.chosen.pop(key, None)
        raise RuntimeUnavailable(self.missing_shells.tell(tool, instance.id))

    def _serving(self, instance: Instance) -> tuple[DockerRuntime, DockerInstance]:
        """The runtime of ``instance``'s engine (this one, with a single engine)."""
        if not isinstance(instance, DockerInstance):
            msg = f"not a Docker tool instance: {instance.id}"
            raise TypeError(msg)
        if not self.by_engine:
            if not self.answering:
                raise self.unreachable()
            return self, instance
        return self._engine_of(instance)._serving(instance)

    def _engine_of(self, instance: DockerInstance) -> DockerRuntime:
        """The runtime of the engine (of several, or a Swarm node's) that runs ``instance``."""
        if instance.node and self.cluster is not None:
            # (a node's engine is one of this runtime's, made by engine_for)
            engine = t.cast("DockerRuntime | None", self.cluster.engines.get(instance.engine))
        else:
            engine = self.by_engine.get(instance.engine)
        if engine is None:
            msg = "the tool instance is gone"
            raise RuntimeUnavailable(msg)
        return engine

    async def open_download(
        self, instance: Instance, tool: ToolType, path: str, max_bytes: int
    ) -> FileDownload:
        """Read the file through an exec of the tool's user (``docker_files.py``)."""
        engine, container = self._serving(instance)
        return await docker_files.open_download(engine, container, tool, path, max_bytes)

    async def open_upload(
        self, instance: Instance, tool: ToolType, path: str, size: int, overwrite: bool
    ) -> FileUpload:
        """Write the file through an exec of the tool's user (``docker_files.py``)."""
        engine, container = self._serving(instance)
        return await docker_files.open_upload(
            engine, instance=container, tool=tool, path=path, size=size, overwrite=overwrite
        )

    def handover_state(self) -> dict[str, t.Any]:
        return self.kills.handover_state()

    def take_over(self, state: t.Mapping[str, t.Any]) -> None:
        self.kills.take_over(state)

    async def adopt_shell(self, shell: t.Mapping[str, str], sock: t.Any) -> ShellChannel:
        """Go on with a predecessor's shell (``shell`` from :meth:`_ExecChannel.handover`)
        over its exec connection ``sock``; it counts as this server's from now on."""
        adopted = _Exec(shell["container_id"], shell["exec_id"], shell["tag"], shell["user"])
        await self.kills.register(adopted.target, adopted.tag, mark=False)
        sock.setblocking(False)
        _, stream = await asyncio.get_running_loop().create_connection(ShellStream, sock=sock)
        channel = _ExecChannel(self, adopted, stream)
        channel.spoke = channel._started = True  # it ran under the predecessor
        return channel

    async def _create_exec(
        self,
        instance: DockerInstance,
        tool: ToolType,
        tag: str,
        leased: bool,
        size: tuple[int, int] | None,
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
                shell_command(tool, size),
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
            channel = _ExecChannel(self, shell, await self.attach(shell.exec_id, tty=True))
        except BaseException as error:
            # The engine may have started the shell whatever failed after the exec was
            # created: it ends through the one kill path, as every shell does.
            await asyncio.shield(_ExecChannel(self, shell, None).terminate())
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
