"""The Docker runtime: tool instances are labelled containers on one Docker engine or several.

:class:`DockerRuntime` is what users configure (``c.DockerRuntime``). It drives no engine
itself: it holds one :class:`~.docker_engine.EngineRuntime` per engine, as ``jupyter_client``'s
``MultiKernelManager`` holds a ``KernelManager`` per kernel, and routes to them:

* without ``engines``, the one engine ``docker.from_env()`` finds, whose container names are
  the instance ids;
* with ``engines``, one runtime per entry: ids are ``ENGINE/CONTAINER``, lists ask every
  engine at once and leave out one that does not answer, and each engine's health is watched
  (an engine that does not answer takes nothing else down);
* with ``swarm``, also the services of a Docker Swarm (``swarm.py``): ids ``swarm/SERVICE``,
  served by the engine of the node that runs the task.

Everything one engine does (its API client, pool, execs, kills, leases) is its runtime's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import typing as t

from traitlets import Bool, Dict, Float, Integer, TraitError, observe, validate

from ..settings import rename
from ..tooltypes import ToolType
from . import swarm as swarms
from .base import EngineUnreachable, Instance, RuntimeUnavailable, ShellChannel, ToolRuntime
from .docker_engine import DockerInstance, EngineRuntime, EngineSettings, ExecChannel
from .engines import EngineHealth, EngineSpec, parse_engines
from .transfer import FileDownload, FileUpload


class DockerRuntime(ToolRuntime):
    """Tool instances are labelled Docker containers; connects like ``docker.from_env()``
    (``DOCKER_HOST``, ``DOCKER_TLS_VERIFY``, ``DOCKER_CERT_PATH``, the default socket), or to
    the engines of ``engines``."""

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

    prestart_shells = Bool(
        False,
        help="""Start each terminal's shell ahead: for every running tool instance its owner
        lists (the launcher does) or opens a terminal in, one exec waits behind a gate, and
        the next terminal opened there takes it (its startup command and shell start then, in
        a terminal of its size) instead of waiting for the engine to start one: an open takes
        a few ms instead of the engine's 50-100. Each waiting exec is a /bin/sh in the
        container (`ps` names it) and a connection of this server's; one unused for 10
        minutes ends. Not for tool types with "cleanup": "instance".""",
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
            parse_engines(proposal["value"])
        except ValueError as error:
            msg = f"c.DockerRuntime.engines: {error}"
            raise TraitError(msg) from error
        return dict(proposal["value"])

    def __init__(self, **kwargs: t.Any) -> None:
        super().__init__(**kwargs)
        #: The one engine ``docker.from_env()`` finds, when ``engines`` is empty.
        self.default_engine: EngineRuntime | None = None
        #: The engines of ``engines``, by name.
        self.by_engine: dict[str, EngineRuntime] = {}
        if self.engines:
            for spec in parse_engines(self.engines).values():
                self.by_engine[spec.name] = self.engine_for(spec)
        else:
            self.default_engine = EngineRuntime(
                parent=self, settings=self._engine_settings(), log=self.log
            )
        #: The Swarm the managers among ``engines`` run (``c.DockerRuntime.swarm``).
        self.cluster: swarms.Swarm | None = None
        self._config_error: str | None = None
        self._make_swarm()

    def _engine_settings(self) -> EngineSettings:
        return EngineSettings(
            threads=self.threads,
            call_timeout=self.call_timeout,
            startup_check_timeout=self.startup_check_timeout,
            lease_linger=self.lease_linger,
            check_interval=self.engine_check_interval,
            check_timeout=self.engine_timeout,
            prestart_shells=self.prestart_shells,
        )

    def engine_for(self, spec: EngineSpec) -> EngineRuntime:
        """A runtime of its own for one engine (a configured one, or a Swarm node's)."""
        return EngineRuntime(parent=self, spec=spec, settings=self._engine_settings(), log=self.log)

    def _make_swarm(self) -> None:
        try:
            spec = swarms.parse_swarm(self.swarm, self.by_engine)
        except ValueError as error:
            self._config_error = f"c.DockerRuntime.swarm: {error}"
            return
        if spec is None:
            return
        self.cluster = swarms.Swarm(
            spec,
            managers=self.by_engine,
            make_engine=self.engine_for,
            timeout=self.engine_timeout,
            interval=self.engine_check_interval,
            log=self.log,
        )
        for engine in self.by_engine.values():
            engine.hide_swarm_tasks = True

    def check_available(self) -> None:
        """Ping the engine; :class:`RuntimeUnavailable` says where it was looked for.

        With several engines, one that does not answer is logged and served once it does;
        only none answering is an error.
        """
        if self._config_error is not None:
            raise RuntimeUnavailable(self._config_error)
        if self.default_engine is not None:
            self.default_engine.check_available()
            return
        healths = [engine.health for engine in self.by_engine.values() if engine.health]
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(healths)) as pool:
            answers = list(pool.map(EngineHealth.ping, healths))
        for health, answered in zip(healths, answers, strict=True):
            health.assume(answered)
            if not answered:
                self.log.warning(
                    "Docker engine %r (%s) does not answer at start-up: its instances are left "
                    "out until it does",
                    health.spec.name,
                    health.spec.url,
                )
        if not any(answers):
            names = ", ".join(repr(health.spec.name) for health in healths)
            msg = f"none of the container engines {names} answers"
            raise RuntimeUnavailable(msg)

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.close()
        for engine in self._engines():
            engine.close()

    def _engines(self) -> list[EngineRuntime]:
        """The runtimes of the configured engines (or of the one engine)."""
        if self.default_engine is not None:
            return [self.default_engine]
        return list(self.by_engine.values())

    def _watch_engines(self) -> None:
        """Start the health checks of the configured engines (once the event loop runs)."""
        for engine in self.by_engine.values():
            if engine.health is not None:
                engine.health.start()

    # -- instances --------------------------------------------------------------------------

    async def list_instances(self, owner: str) -> list[Instance]:
        if self.default_engine is not None:
            return await self.default_engine.list_instances(owner)
        if self.cluster is None:
            return await self._list_everywhere(owner)

        async def plain() -> list[Instance] | None:
            try:
                return await self._list_everywhere(owner)
            except EngineUnreachable:
                return None

        # The engines' own instances and the Swarm's: each part answers (or is left out)
        # within its timeouts; an error only when no engine at all answers.
        cluster = self.cluster
        engines, services = await asyncio.gather(plain(), cluster.list_instances(owner))
        if engines is None and services is None:
            if not any(engine.answering for engine in cluster.engines.values()):
                msg = "no container engine is reachable"
                raise EngineUnreachable(msg)
            self.log.warning("No Swarm manager answers: Swarm instances are left out")
        return sorted([*(engines or []), *(services or [])], key=lambda instance: instance.id)

    async def _list_everywhere(self, owner: str) -> list[Instance]:
        """The owner's instances on every engine that answers within ``engine_timeout``, listed
        concurrently; their ids ``ENGINE/CONTAINER``. One that does not answer is left out (and
        logged); :class:`EngineUnreachable` only if no engine answered."""
        self._watch_engines()

        async def on(engine: EngineRuntime) -> list[Instance] | None:
            if not engine.answering:
                return None
            try:
                found = await asyncio.wait_for(engine.list_instances(owner), self.engine_timeout)
            except (TimeoutError, RuntimeUnavailable) as error:
                self.log.warning(
                    "Docker engine %r left out of a list: %s",
                    engine.engine_name,
                    str(error) or "no answer in time",
                )
                return None
            return [_on_engine(instance, engine.engine_name) for instance in found]

        answers = await asyncio.gather(*(on(engine) for engine in self.by_engine.values()))
        if all(answer is None for answer in answers):
            msg = "no container engine is reachable"
            raise EngineUnreachable(msg)
        return sorted(
            (instance for answer in answers if answer for instance in answer),
            key=lambda instance: instance.id,
        )

    def could_own(self, instance_id: str) -> bool:
        if self.default_engine is not None:
            return self.default_engine.could_own(instance_id)
        if self.cluster is not None and swarms.split_id(instance_id) is not None:
            return True
        engine, _, container = instance_id.partition("/")
        return engine in self.by_engine and self.by_engine[engine].could_own(container)

    async def get_instance(self, instance_id: str) -> DockerInstance | None:
        if not self.could_own(instance_id):
            return None
        if self.default_engine is not None:
            return await self.default_engine.get_instance(instance_id)
        if self.cluster is not None and swarms.split_id(instance_id) is not None:
            return await self.cluster.get_instance(instance_id)
        return await self._look_up(instance_id)

    async def _look_up(self, instance_id: str) -> DockerInstance | None:
        """The instance ``ENGINE/CONTAINER``; ``None`` if there is none (or no such engine);
        the engine's :class:`EngineUnreachable` if it does not answer within ``engine_timeout``."""
        self._watch_engines()
        name, _, container = instance_id.partition("/")
        engine = self.by_engine.get(name)
        if engine is None or not container:
            return None
        if not engine.answering:
            raise engine.unreachable()
        try:
            found = await asyncio.wait_for(engine.get_instance(container), self.engine_timeout)
        except TimeoutError as error:
            raise engine.unreachable() from error
        return None if found is None else _on_engine(found, name)

    def _engine_of(self, instance: Instance) -> EngineRuntime:
        """The runtime of the engine that runs ``instance`` (of several, or a Swarm node's)."""
        if not isinstance(instance, DockerInstance):
            msg = f"not a Docker tool instance: {instance.id}"
            raise TypeError(msg)
        if self.default_engine is not None:
            return self.default_engine
        return self._engine_named(instance.engine, node=bool(instance.node))

    def _engine_named(self, name: str, *, node: bool = False) -> EngineRuntime:
        if node and self.cluster is not None:
            engine = self.cluster.engines.get(name)
        else:
            engine = self.by_engine.get(name)
        if engine is None:
            msg = "the tool instance is gone"
            raise RuntimeUnavailable(msg)
        return engine

    # -- shells and files -------------------------------------------------------------------

    def shell_variables(self, instance: Instance, tool: ToolType) -> dict[str, str]:
        """The container's own environment (as inspected) under the tool type's ``env``."""
        own = dict(instance.env) if isinstance(instance, DockerInstance) else {}
        return {**own, **tool.env}

    async def start_shell(
        self, instance: Instance, tool: ToolType, size: tuple[int, int] | None = None
    ) -> ShellChannel:
        """Start the shell on the instance's engine (``EngineRuntime.start_shell``); a Swarm
        instance's terminal ends, saying so, when the managers move its task."""
        channel = await self._engine_of(instance).start_shell(instance, tool, size)
        if isinstance(instance, swarms.SwarmInstance) and self.cluster is not None:
            assert isinstance(channel, ExecChannel)
            self.cluster.watch(channel, instance)
        return channel

    def prestart(self, instance: Instance, tool: ToolType) -> None:
        try:
            engine = self._engine_of(instance)
        except RuntimeUnavailable:
            return  # its engine is gone: nothing to start ahead
        engine.prestart(instance, tool)

    async def end_prestarted(self) -> None:
        await asyncio.gather(*(engine.end_prestarted() for engine in self._all_engines()))

    def resume_prestarting(self) -> None:
        for engine in self._all_engines():
            engine.resume_prestarting()

    def _all_engines(self) -> list[EngineRuntime]:
        """The configured engines' runtimes and the Swarm nodes'."""
        nodes = list(self.cluster.engines.values()) if self.cluster is not None else []
        return [*self._engines(), *nodes]

    async def open_download(
        self, instance: Instance, tool: ToolType, path: str, max_bytes: int
    ) -> FileDownload:
        return await self._engine_of(instance).open_download(instance, tool, path, max_bytes)

    async def open_upload(
        self, instance: Instance, tool: ToolType, path: str, size: int, overwrite: bool
    ) -> FileUpload:
        engine = self._engine_of(instance)
        return await engine.open_upload(instance, tool, path, size, overwrite)

    # -- hand-over (``handover/``) --------------------------------------------------------------

    def handover_state(self) -> dict[str, t.Any]:
        """The one engine's state; with several, each configured engine's by name."""
        if self.default_engine is not None:
            return self.default_engine.handover_state()
        return {"engines": {name: e.handover_state() for name, e in self.by_engine.items()}}

    def take_over(self, state: t.Mapping[str, t.Any]) -> None:
        if self.default_engine is not None:
            self.default_engine.take_over(state)
            return
        for name, taken in (state.get("engines") or {}).items():
            if name in self.by_engine:
                self.by_engine[name].take_over(taken)

    async def adopt_shell(self, shell: t.Mapping[str, str], sock: t.Any) -> ShellChannel:
        engine = self.default_engine or self._engine_named(shell.get("engine", ""))
        return await engine.adopt_shell(shell, sock)


_Found = t.TypeVar("_Found", bound=Instance)


def _on_engine(instance: _Found, engine: str) -> _Found:
    """An engine's instance as the runtime over several names it: ``ENGINE/CONTAINER``."""
    return dataclasses.replace(instance, id=f"{engine}/{instance.id}", engine=engine)
