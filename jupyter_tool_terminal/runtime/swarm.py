"""Tool instances as Docker Swarm services: the managers' view, and the node engines it finds.

``c.DockerRuntime.swarm = {"managers": [NAME, ...], "node_engine": {"url": TEMPLATE, "tls":
{...}}}`` names engines of ``c.DockerRuntime.engines`` that are Swarm managers. A service whose
task containers carry the owner and tool labels (``docker service create --container-label``,
as SwarmSpawner makes them) is one tool instance, ``swarm/SERVICE`` (``swarm/SERVICE.SLOT`` with
several replicas), whatever its tasks do: the id survives every move.

What the managers say is the only truth. A service's status is that of the task they want
running (exited tasks, and what a node cut off from them still runs, are never instances of
their own). Swarm has no exec across nodes (moby#27552), so a terminal execs on the engine of
the node that runs the task: every node's engine is found from the managers' list of nodes
(``{addr}`` and ``{hostname}`` in the URL template), nodes that join later included, and each is
an engine runtime of its own (its pool, kills and health), as a configured engine is. Before a
terminal opens, the node's engine is asked whether that container carries the service's labels
and the task's id. When the managers move the task (a constraint, a drain, a node that went
down), the terminal ends saying so, and the same id opens on the new node.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import typing as t
import weakref

from .base import EngineUnreachable, Instance, InstanceMoved, RuntimeUnavailable
from .docker_engine import (
    OWNER_LABEL,
    TASK_LABEL,
    TOOL_LABEL,
    DockerInstance,
    EngineRuntime,
    ExecChannel,
)
from .engines import ENGINE_NAME, SCHEMES, EngineSpec, parse_tls

if t.TYPE_CHECKING:
    import logging

#: The first part of a Swarm instance's id (an engine of that name is refused beside a swarm).
PREFIX = "swarm"
#: The desired states of the tasks the managers want running (a new task is ``ready`` until
#: the one it replaces stopped); the others (``shutdown``...) are history.
WANTED = ("running", "ready")
#: Swarm service names (DNS labels): the id's ``SERVICE`` part.
SERVICE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?")


@dataclasses.dataclass(frozen=True)
class SwarmSpec:
    """``c.DockerRuntime.swarm``, checked."""

    managers: tuple[str, ...]
    #: The URL of a node's engine, with ``{addr}`` and ``{hostname}`` to fill in.
    url: str
    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def node_engine(self, name: str, addr: str, hostname: str) -> EngineSpec:
        """The engine of a node the managers list."""
        url = self.url.format(addr=addr, hostname=hostname)
        return EngineSpec(name, url, self.ca, self.cert, self.key)


def parse_swarm(value: t.Mapping[str, t.Any], engines: t.Collection[str]) -> SwarmSpec | None:
    """``c.DockerRuntime.swarm`` as a spec (``None`` when empty); ``ValueError`` says what is
    wrong. ``engines``: the names of ``c.DockerRuntime.engines``."""
    if not value:
        return None
    unknown = set(value) - {"managers", "node_engine"}
    if unknown:
        msg = f"unknown keys: {', '.join(sorted(unknown))}"
        raise ValueError(msg)
    managers = value.get("managers")
    if not isinstance(managers, list | tuple) or not managers:
        msg = "managers must be a list of names of c.DockerRuntime.engines"
        raise ValueError(msg)
    missing = [name for name in managers if name not in engines]
    if missing:
        msg = f"managers {', '.join(map(repr, missing))} are not in c.DockerRuntime.engines"
        raise ValueError(msg)
    if PREFIX in engines:
        msg = f"an engine named {PREFIX!r} would share the Swarm instances' ids: rename it"
        raise ValueError(msg)
    node_engine = value.get("node_engine")
    if not isinstance(node_engine, dict) or set(node_engine) - {"url", "tls"}:
        msg = 'node_engine must be {"url": TEMPLATE, "tls": {"ca", "cert", "key"}}'
        raise ValueError(msg)
    url = node_engine.get("url")
    if not isinstance(url, str) or not url.startswith(SCHEMES):
        msg = f"node_engine needs a url starting with {', '.join(SCHEMES)}"
        raise ValueError(msg)
    try:
        url.format(addr="192.0.2.1", hostname="node")
    except (KeyError, IndexError, ValueError) as error:
        msg = f"node_engine's url may name only {{addr}} and {{hostname}}: {error}"
        raise ValueError(msg) from error
    tls = parse_tls("node_engine", url, node_engine.get("tls"))
    return SwarmSpec(tuple(managers), url, *tls)


def split_id(instance_id: str) -> tuple[str, int | None] | None:
    """``swarm/SERVICE[.SLOT]`` as (service, slot); ``None`` if it is not of that form."""
    prefix, _, rest = instance_id.partition("/")
    if prefix != PREFIX:
        return None
    service, dot, slot = rest.partition(".")
    if SERVICE_NAME.fullmatch(service) is None:
        return None
    if not dot:
        return service, None
    if not slot.isdigit() or slot.startswith("0") or len(slot) > 6:
        return None
    return service, int(slot)


@dataclasses.dataclass(frozen=True)
class Node:
    """A node as the managers list it."""

    id: str
    hostname: str
    addr: str
    #: ``ready``, ``down``, ``unknown``, ``disconnected``.
    state: str


@dataclasses.dataclass(frozen=True)
class Task:
    """A task of a service."""

    id: str
    service_id: str
    slot: int
    node_id: str
    #: ``new``, ``pending``, ``assigned``, ... ``running``.
    state: str
    container_id: str
    #: What the managers want of it: ``running`` (``ready`` first, for a move's new task).
    desired: str = "running"


@dataclasses.dataclass(frozen=True)
class View:
    """The managers' answer at one moment: services, the tasks they want running, nodes."""

    services: list[dict[str, t.Any]]
    tasks: list[Task]
    nodes: dict[str, Node]

    def task_for(self, service_id: str, slot: int) -> Task | None:
        """The task the managers want running in a service's slot (during a start-first
        update there may be two: the running one is the instance)."""
        found = [task for task in self.tasks if task.service_id == service_id and task.slot == slot]
        running = [task for task in found if task.state == "running"]
        return running[0] if running else found[0] if found else None


def _labels(service: t.Mapping[str, t.Any]) -> dict[str, str]:
    spec = service.get("Spec") or {}
    container = (spec.get("TaskTemplate") or {}).get("ContainerSpec") or {}
    return dict(container.get("Labels") or {})


def _slots(service: t.Mapping[str, t.Any]) -> list[int] | None:
    """The slots of a replicated service (``None`` for a global one, which is not served)."""
    mode = (service.get("Spec") or {}).get("Mode") or {}
    replicated = mode.get("Replicated")
    if replicated is None:
        return None
    return list(range(1, int(replicated.get("Replicas") or 0) + 1))


@dataclasses.dataclass(frozen=True)
class SwarmInstance(DockerInstance):
    """A service slot's instance: the task's container on its node, as the managers place it."""

    service_id: str = ""
    slot: int = 1
    task_id: str = ""


class Swarm:
    """The managers' view of one swarm, for the Docker runtime over several engines.

    ``managers`` are the runtimes of the configured engines (the managers among them);
    ``make_engine`` makes the runtime of each node's engine this finds. ``timeout`` is the
    time each manager has to answer, ``interval`` the time between looks while terminals are
    open.
    """

    def __init__(
        self,
        spec: SwarmSpec,
        *,
        managers: t.Mapping[str, EngineRuntime],
        make_engine: t.Callable[[EngineSpec], EngineRuntime],
        timeout: float,
        interval: float,
        log: logging.Logger | logging.LoggerAdapter[t.Any],
    ) -> None:
        self.spec = spec
        self.managers = managers
        self._make_engine = make_engine
        self.timeout = timeout
        self.interval = interval
        self.log = log
        #: The nodes' engines, by engine name (the node's host name where it can be).
        self.engines: dict[str, EngineRuntime] = {}
        #: Node id -> engine name.
        self._engine_of_node: dict[str, str] = {}
        self.nodes: dict[str, Node] = {}
        #: Open terminals in Swarm instances, and the task each runs in.
        self._watched: weakref.WeakKeyDictionary[ExecChannel, SwarmInstance] = (
            weakref.WeakKeyDictionary()
        )
        self._watcher: asyncio.Task[None] | None = None
        self._told_global: set[str] = set()

    # -- the managers -----------------------------------------------------------------------

    async def view(self) -> View | None:
        """Ask the managers, in order, until one answers (each within ``engine_timeout``);
        ``None`` if none does. Node engines are made for nodes seen for the first time."""
        for name in self.spec.managers:
            manager = self.managers[name]
            if not manager.answering:
                continue
            try:
                services, tasks, nodes = await asyncio.wait_for(
                    asyncio.gather(
                        manager.call("services"),
                        # (every task: a move's new one is "ready" before "running")
                        manager.call("tasks"),
                        manager.call("nodes"),
                    ),
                    self.timeout,
                )
            except (TimeoutError, RuntimeUnavailable) as error:
                # A worker (or a manager that lost its quorum) answers 503 here: the next one.
                self.log.warning(
                    "Swarm manager %r did not answer: %s", name, str(error) or "no answer in time"
                )
                continue
            view = View(
                services=list(services),
                tasks=[task for task in map(_task, tasks) if task.desired in WANTED],
                nodes={node.id: node for node in map(_node, nodes) if node is not None},
            )
            self._know(view.nodes)
            return view
        return None

    def _know(self, nodes: t.Mapping[str, Node]) -> None:
        self.nodes = dict(nodes)
        for node in nodes.values():
            if node.id in self._engine_of_node or not node.addr:
                continue
            name = node.hostname
            taken = set(self.managers) | set(self.engines) | {PREFIX}
            if ENGINE_NAME.fullmatch(name) is None or name in taken:
                name = f"node-{node.id[:12]}"
            engine = self._make_engine(self.spec.node_engine(name, node.addr, node.hostname))
            self.engines[name] = engine
            self._engine_of_node[node.id] = name
            self.log.info(
                "Swarm node %s: its engine is %s (as engine %r)", node.hostname, engine.spec, name
            )
            if engine.health is not None:
                engine.health.start()

    def engine_of(self, node_id: str) -> EngineRuntime | None:
        """The engine of a node the managers listed."""
        name = self._engine_of_node.get(node_id)
        return None if name is None else self.engines.get(name)

    # -- instances --------------------------------------------------------------------------

    async def list_instances(self, owner: str) -> list[Instance] | None:
        """The owner's service slots (``None`` if no manager answers)."""
        view = await self.view()
        if view is None:
            return None
        found: list[Instance] = []
        for service in view.services:
            labels = _labels(service)
            if labels.get(OWNER_LABEL) != owner or not labels.get(TOOL_LABEL):
                continue
            slots = self._served_slots(service)
            for slot in slots:
                found.append(self._instance(view, service, slot, len(slots) > 1, labels))
        return found

    def _served_slots(self, service: t.Mapping[str, t.Any]) -> list[int]:
        slots = _slots(service)
        if slots is None:
            name = (service.get("Spec") or {}).get("Name", "")
            if name not in self._told_global:
                self._told_global.add(name)
                self.log.warning(
                    "Swarm service %r is global: only replicated services are tool instances",
                    name,
                )
            return []
        return slots

    def _instance(
        self,
        view: View,
        service: t.Mapping[str, t.Any],
        slot: int,
        several: bool,
        labels: t.Mapping[str, str],
    ) -> SwarmInstance:
        name = service["Spec"]["Name"]
        task = view.task_for(service["ID"], slot)
        node = view.nodes.get(task.node_id) if task is not None else None
        engine = self.engine_of(node.id) if node is not None else None
        if task is None:
            status = "pending"
        elif node is None or node.state != "ready" or engine is None or not engine.answering:
            # The managers may still count it running: nobody can open a terminal there now.
            status = "unreachable" if task.state == "running" else task.state
        else:
            status = task.state
        return SwarmInstance(
            id=f"{PREFIX}/{name}.{slot}" if several else f"{PREFIX}/{name}",
            owner=labels[OWNER_LABEL],
            tool=labels[TOOL_LABEL],
            status=status,
            engine=engine.engine_name if engine is not None else "",
            node=node.hostname if node is not None else "",
            container_id=task.container_id if task is not None else "",
            service_id=service["ID"],
            slot=slot,
            task_id=task.id if task is not None else "",
        )

    async def get_instance(self, instance_id: str) -> SwarmInstance | None:
        """The instance ``swarm/SERVICE[.SLOT]``, its container checked on its node."""
        parts = split_id(instance_id)
        if parts is None:
            return None
        service_name, slot = parts
        view = await self.view()
        if view is None:
            msg = "no Swarm manager is reachable"
            raise EngineUnreachable(msg)
        service = next((s for s in view.services if s["Spec"]["Name"] == service_name), None)
        if service is None:
            return None
        labels = _labels(service)
        if not labels.get(OWNER_LABEL) or not labels.get(TOOL_LABEL):
            return None
        slots = self._served_slots(service)
        several = len(slots) > 1
        # One id per slot: SERVICE alone for one replica, SERVICE.SLOT for several.
        if (slot is None) == several or (slot or 1) not in slots:
            return None
        instance = self._instance(view, service, slot or 1, several, labels)
        if instance.status != "running":
            return instance
        return await self._checked_on_node(instance)

    async def _checked_on_node(self, instance: SwarmInstance) -> SwarmInstance:
        """The node's engine is the authority for what runs there: the container must carry
        the service's labels and the task's id (else the instance is not running yet)."""
        engine = self.engines[instance.engine]
        try:
            info = await asyncio.wait_for(
                engine.call("inspect_container", instance.container_id),
                self.timeout,
            )
        except TimeoutError as error:
            raise engine.unreachable() from error
        except Exception as error:  # noqa: BLE001 - docker.errors.NotFound: not there (yet)
            self.log.info("Swarm task %s not on its node: %s", instance.task_id, error)
            return dataclasses.replace(instance, status="starting")
        config = info.get("Config") or {}
        labels = config.get("Labels") or {}
        state = (info.get("State") or {}).get("Status", "")
        if (
            labels.get(OWNER_LABEL) != instance.owner
            or labels.get(TOOL_LABEL) != instance.tool
            or labels.get(TASK_LABEL) != instance.task_id
        ):
            self.log.warning(
                "Swarm task %s: the container on %s does not carry its labels",
                instance.task_id,
                instance.node,
            )
            return dataclasses.replace(instance, status="starting")
        env = config.get("Env") or ()
        return dataclasses.replace(
            instance,
            status=state,
            container_id=info["Id"],
            env_names=frozenset(item.split("=", 1)[0] for item in env),
            env=tuple((n, v) for n, _, v in (item.partition("=") for item in env)),
        )

    # -- moves ------------------------------------------------------------------------------

    def watch(self, channel: ExecChannel, instance: SwarmInstance) -> None:
        """End ``channel`` saying so when the managers move its task elsewhere."""
        self._watched[channel] = instance
        channel.end_check = lambda: self.moved(instance)
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._watch())

    async def moved(self, instance: SwarmInstance) -> str | None:
        """Why a terminal in ``instance`` cannot go on, if its task is no longer the one the
        managers want running (``None`` while it is, or while no manager answers)."""
        view = await self.view()
        return None if view is None else _why_moved(view, instance)

    async def _watch(self) -> None:
        """Ask the managers every ``engine_check_interval`` while terminals are open."""
        while self._watched:
            await asyncio.sleep(self.interval)
            try:
                view = await self.view()
            except Exception:  # a failed look is the next round's (and logged)
                self.log.exception("Could not ask the Swarm managers about open terminals")
                continue
            if view is None:
                continue  # no manager answers: open terminals go on
            for channel, instance in list(self._watched.items()):
                if channel.end_check is None:  # it closed
                    self._watched.pop(channel, None)
                    continue
                why = _why_moved(view, instance)
                if why is not None:
                    self._watched.pop(channel, None)
                    channel.lose_instance(InstanceMoved(why))

    def close(self) -> None:
        """Stop watching and close the nodes' engines."""
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None
        for engine in self.engines.values():
            with contextlib.suppress(Exception):
                engine.close()


def _task(entry: t.Mapping[str, t.Any]) -> Task:
    status = entry.get("Status") or {}
    container = status.get("ContainerStatus") or {}
    return Task(
        id=entry.get("ID", ""),
        service_id=entry.get("ServiceID", ""),
        slot=int(entry.get("Slot") or 0),
        node_id=entry.get("NodeID", ""),
        state=status.get("State", ""),
        container_id=container.get("ContainerID", ""),
        desired=entry.get("DesiredState", ""),
    )


def _node(entry: t.Mapping[str, t.Any]) -> Node | None:
    node_id = entry.get("ID")
    if not node_id:
        return None
    status = entry.get("Status") or {}
    addr = status.get("Addr", "")
    if addr in ("", "0.0.0.0"):  # some engines' word for a manager's own address
        # (the address it advertises to the other managers is the one to use)
        manager = (entry.get("ManagerStatus") or {}).get("Addr", "")
        addr = manager.rpartition(":")[0] or addr
    return Node(
        id=node_id,
        hostname=(entry.get("Description") or {}).get("Hostname", ""),
        addr="" if addr == "0.0.0.0" else addr,
        state=status.get("State", ""),
    )


def _why_moved(view: View, instance: SwarmInstance) -> str | None:
    """Why a terminal in ``instance`` cannot go on, in the managers' ``view`` (``None`` while
    its task is the one they want running)."""
    task = view.task_for(instance.service_id, instance.slot)
    if task is not None and task.id == instance.task_id:
        return None
    name = instance.id
    service = next((s for s in view.services if s.get("ID") == instance.service_id), None)
    if service is None or instance.slot not in (_slots(service) or []):
        return f"the tool instance {name} was removed from Swarm"
    node = view.nodes.get(task.node_id) if task is not None else None
    where = f"to node {node.hostname}" if node is not None else "to another node"
    return (
        f"the tool instance {name} moved {where} (Swarm rescheduled it); its processes "
        "did not move with it: open it again"
    )
