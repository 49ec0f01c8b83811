"""The kill wing of the Docker runtime: every shell's end, and this server's leases.

A shell's processes are killed inside its container (see ``reaper.py`` for how, and the
README's "What the kill guarantees" for what): through the reaper of its container and exec
user, this server's lease there, or a one-off exec. This module decides which, and when:
kills in one container share one exec at a time, a paused container's kills wait until it
runs, a ``"cleanup": "instance"`` container's last session kills everything since its mark,
and a new lease first kills what servers that died left in its container. One
:class:`KillWing` serves one engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import typing as t

import docker
import docker.errors

from .base import EngineUnreachable, RuntimeUnavailable
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

#: Who kills a shell's processes: (container id, exec user). The kill runs as the shell's own
#: user, so it never has more rights in the container than the shell had, and it can read the
#: environment (the kill tag) of every process the shell started without changing uid; root
#: cannot read another uid's /proc/PID/environ without CAP_SYS_PTRACE, which Docker does not
#: grant by default.
Target = tuple[str, str]

#: The exec user of instance-wide kills, which must reach every process of the container.
ROOT = "0"

#: How long a kill waits for the reaper before it checks whether the container is paused.
PAUSE_PROBE = 0.5
#: How many times an orphan kill is asked again when a server it was not told of came up.
ORPHAN_ATTEMPTS = 3

#: How long a reaper may take to answer one kill before the kill falls back to its own exec.
REAPER_TIMEOUT = 10.0


class Engine(t.Protocol):
    """What the kill wing needs of its runtime: Engine API calls off the event loop, and the
    stream of a started exec."""

    log: logging.Logger | logging.LoggerAdapter[t.Any]

    def api(self) -> docker.APIClient:
        """The SDK client (blocking: for functions run with :meth:`run`)."""

    async def run(self, func: t.Callable[..., t.Any], *args: t.Any, **kwargs: t.Any) -> t.Any:
        """Run a blocking function in the runtime's thread pool."""

    async def call(self, method: str, *args: t.Any, **kwargs: t.Any) -> t.Any:
        """Call an ``APIClient`` method off the event loop (engine errors made safe)."""

    async def attach(self, exec_id: str, tty: bool) -> ShellStream:
        """Start a created exec and return its stream."""

    async def wait_answering(self) -> None:
        """Return once the engine answers (at once while it does)."""


@dataclasses.dataclass(eq=False)
class _TargetKills:
    """Everything the kill wing keeps of one target: its live shells, the kills asked of it,
    and this server's lease there."""

    target: Target
    #: The tags of the shells started here and not killed yet; while a container has other
    #: live shells, its kills go through a reaper (see ``reaper.py``).
    live: set[str] = dataclasses.field(default_factory=set)
    #: Kill requests waiting for the target's kill worker (tags, and who waits for them).
    pending: set[str] = dataclasses.field(default_factory=set)
    waiters: list[asyncio.Future[bool]] = dataclasses.field(default_factory=list)
    worker: asyncio.Task[None] | None = None
    #: Kills the container could not run yet (it is paused, or its engine away).
    deferred: set[str] = dataclasses.field(default_factory=set)
    #: This server's lease here (its reaper), the lock its start holds, and its retirement
    #: once no shell is left (due after ``linger``).
    reaper: Reaper | None = None
    lease_lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    retirement: asyncio.TimerHandle | None = None

    @property
    def container_id(self) -> str:
        return self.target[0]

    @property
    def user(self) -> str:
        return self.target[1]

    def cancel_retirement(self) -> None:
        if self.retirement is not None:
            self.retirement.cancel()
            self.retirement = None


@dataclasses.dataclass(eq=False)
class _ContainerKills:
    """What the kill wing keeps of one container: its targets (one per exec user), and what
    its instance-wide kills and paused kills need."""

    #: The container's targets, by exec user.
    targets: dict[str, _TargetKills] = dataclasses.field(default_factory=dict)
    #: For a ``"cleanup": "instance"`` tool type: the start time (in the container's clock
    #: ticks) of a process started just before its first session.
    mark: int | None = None
    #: Held by the mark's taking and the instance-wide kill.
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    #: The task waiting for the paused container to run its deferred kills.
    pause_watcher: asyncio.Task[None] | None = None

    def others_live(self, tags: t.Collection[str]) -> bool:
        """Whether shells other than ``tags`` are alive in the container."""
        return any(state.live.difference(tags) for state in self.targets.values())

    def due_mark(self, tags: t.Collection[str]) -> int | None:
        """The mark, if ``tags`` are the container's last live shells: its instance-wide kill
        is due."""
        return None if self.others_live(tags) else self.mark

    def has_deferred(self) -> bool:
        return any(state.deferred for state in self.targets.values())


class KillWing:
    """Kills shells' processes for one engine, and keeps this server's leases there.

    What it keeps is one record per container (:class:`_ContainerKills`) holding one per
    target (:class:`_TargetKills`); records stay for the server's life, as their locks must.
    """

    def __init__(
        self,
        engine: Engine,
        on_deferred: t.Callable[[], None] | None = None,
        *,
        linger: float = 0.0,
    ) -> None:
        self._engine = engine
        self.log = engine.log
        #: Called for each kill that cannot run when asked (the engine or container is not
        #: there for it) and waits.
        self._on_deferred = on_deferred
        self._containers: dict[str, _ContainerKills] = {}
        #: This server's id: its shells carry it, and its reapers are its leases (see
        #: README, "What the kill guarantees": after a crash).
        self.server_id = secrets.token_hex(16)
        #: Seconds a lease outlives the last shell of its target (0: it ends with it).
        self.linger = linger

    def _container(self, container_id: str) -> _ContainerKills:
        return self._containers.setdefault(container_id, _ContainerKills())

    def _at(self, target: Target) -> _TargetKills:
        targets = self._container(target[0]).targets
        state = targets.get(target[1])
        if state is None:
            state = targets[target[1]] = _TargetKills(target)
        return state

    def _all_targets(self) -> list[_TargetKills]:
        return [state for kept in self._containers.values() for state in kept.targets.values()]

    def handover_state(self) -> dict[str, t.Any]:
        """What a successor takes over (``handover/``): this server's id, which its shells
        carry, and the marks of ``"cleanup": "instance"`` containers."""
        marks = {cid: kept.mark for cid, kept in self._containers.items() if kept.mark is not None}
        return {"server_id": self.server_id, "marks": marks}

    def take_over(self, state: t.Mapping[str, t.Any]) -> None:
        """Become the predecessor whose :meth:`handover_state` this is, before any lease of
        this server runs: its shells are then this server's, never orphans to its leases."""
        self.server_id = state["server_id"]
        for container_id, mark in state["marks"].items():
            self._container(container_id).mark = mark

    def close(self) -> None:
        """Give up: the server stops (its sessions were killed before)."""
        for container_id, kept in self._containers.items():
            if kept.has_deferred():
                self.log.warning(
                    "Container %s is paused: its closed tool terminals' processes could not be "
                    "killed and outlive this server",
                    container_id[:12],
                )
            if kept.pause_watcher is not None:
                kept.pause_watcher.cancel()
        for state in self._all_targets():
            state.cancel_retirement()
            if state.reaper is not None:
                state.reaper.close()
                state.reaper = None

    async def register(self, target: Target, tag: str, *, mark: bool) -> bool:
        """Count a shell about to start in the target as live (taking the container's mark
        first for ``"cleanup": "instance"``), with this server's lease running there; whether
        it does (the shell may then carry this server's id). Undo with :meth:`forget`."""
        state = self._at(target)
        if mark:
            # Marked before the first shell, under the lock that the instance-wide kill holds.
            kept = self._container(state.container_id)
            async with kept.lock:
                if kept.mark is None:
                    kept.mark = await self._take_mark(state.container_id)
                state.live.add(tag)
        else:
            state.live.add(tag)
        return await self._lease(state)

    def forget(self, target: Target, tag: str) -> None:
        """No shell runs with this tag: it must not count as a live shell of the container."""
        self._at(target).live.discard(tag)

    def live_reaper(self, target: Target) -> Reaper | None:
        """This server's lease in the target, if it runs (for questions other than kills,
        ``foreground.py``)."""
        kept = self._containers.get(target[0])
        state = None if kept is None else kept.targets.get(target[1])
        reaper = None if state is None else state.reaper
        return None if reaper is None or reaper.gone else reaper

    async def kill(self, target: Target, tags: t.Collection[str]) -> bool:
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
        state = self._at(target)
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        state.pending.update(tags)
        state.waiters.append(waiter)
        if state.worker is None:
            state.worker = asyncio.create_task(self._kill_worker(state))
        return await waiter

    async def _kill_worker(self, state: _TargetKills) -> None:
        try:
            while state.waiters:
                tags, waiters = state.pending, state.waiters
                state.pending, state.waiters = set(), []
                done = True
                try:
                    done = await self._kill_now(state, sorted(tags))
                finally:
                    for waiter in waiters:
                        if not waiter.done():
                            waiter.set_result(done)
        finally:
            # No await between the last look and here: a request arriving now starts a worker.
            state.worker = None

    async def _kill_now(self, state: _TargetKills, tags: list[str]) -> bool:
        kept = self._container(state.container_id)
        if kept.mark is not None:
            async with kept.lock:
                mark = kept.due_mark(tags)
                if mark is not None:
                    # The container's last session: everything since its first one goes.
                    words = ["instance", str(mark)]
                    done = await self._kill_once(state.container_id, ROOT, words)
                    if done:
                        kept.mark = None
                    return self._killed(state, tags, done)
        return self._killed(state, tags, await self._kill_session(state, tags))

    def defer(self, target: Target, tags: t.Collection[str]) -> None:
        """Keep a kill that cannot run now (its engine does not answer): it runs once the
        engine answers and the container runs, or is dropped with the container."""
        self._killed(self._at(target), sorted(tags), False)

    def _killed(self, state: _TargetKills, tags: list[str], done: bool) -> bool:
        """Book a kill's outcome: the tags are gone, or deferred until the container runs."""
        if not done:
            if self._on_deferred is not None:
                self._on_deferred()
            state.deferred.update(tags)
            kept = self._container(state.container_id)
            if kept.pause_watcher is None:
                kept.pause_watcher = asyncio.create_task(
                    self._run_when_unpaused(state.container_id)
                )
            return False
        # (a shell may have started in the container meanwhile: its tag stays)
        state.live.difference_update(tags)
        if not state.live:
            # No shell is left to kill: the reaper goes too (after ``linger``), and the
            # container is as before.
            self._retire_later(state)
        return True

    def _retire_later(self, state: _TargetKills) -> None:
        """End the target's reaper once it has had no live shell for ``linger`` seconds.

        Starting a lease costs a shell's open an exec that must run and answer before the
        shell starts (as long again as the shell's own start): a lease that stays a while
        spares that to the next open (a reset, a reload, a terminal opened again), and the
        kills meanwhile go through it instead of an exec of their own.
        """
        state.cancel_retirement()
        reaper = state.reaper
        if reaper is None:
            return
        if self.linger <= 0:
            self._retire(state, reaper)
            return
        state.retirement = asyncio.get_running_loop().call_later(
            self.linger, self._retire, state, reaper
        )

    def _retire(self, state: _TargetKills, reaper: Reaper) -> None:
        state.retirement = None
        if state.live or state.reaper is not reaper:
            return  # a shell started there meanwhile, or the reaper was replaced
        state.reaper = None
        reaper.close()

    async def _kill_session(self, state: _TargetKills, tags: list[str]) -> bool:
        reaper = state.reaper
        if reaper is None and self._container(state.container_id).others_live(tags):
            # Other shells are still running here, so more kills are to come: the exec
            # started now serves them all, instead of one exec per kill.
            reaper = await self._start_reaper(state)
        if reaper is not None:
            request = asyncio.ensure_future(reaper.request("session", tags, REAPER_TIMEOUT))
            await asyncio.wait({request}, timeout=PAUSE_PROBE)
            if not request.done() and await self._paused(state.container_id):
                # A frozen reaper answers nothing; the caller is not held up waiting for it.
                request.cancel()
                with contextlib.suppress(asyncio.CancelledError, ReaperGone):
                    await request
                reaper.close()
                state.reaper = None
                return False
            try:
                answer = await request
            except ReaperGone:
                state.reaper = None
            else:
                self._log_status(answer)
                return True
        return await self._kill_once(state.container_id, state.user, ["session", *tags])

    async def _paused(self, container_id: str) -> bool:
        try:
            info = await self._engine.call("inspect_container", container_id)
        except (docker.errors.NotFound, RuntimeUnavailable):
            return False
        return bool((info.get("State") or {}).get("Paused"))

    async def _run_when_unpaused(self, container_id: str) -> None:
        """Wait until a paused container runs again (or is gone), then run its deferred kills."""
        kept = self._container(container_id)
        delay = 0.1
        try:
            while True:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                await self._engine.wait_answering()
                try:
                    info = await self._engine.call("inspect_container", container_id)
                except docker.errors.NotFound:
                    info = {}
                except RuntimeUnavailable:
                    continue
                status = info.get("State") or {}
                if status.get("Paused"):
                    continue
                for record in [record for record in kept.targets.values() if record.deferred]:
                    tags, record.deferred = record.deferred, set()
                    if status.get("Running"):
                        await self.kill(record.target, tags)
                    else:  # stopped or removed: its processes are gone
                        self._killed(record, sorted(tags), True)
                if not kept.has_deferred():
                    return
        finally:
            kept.pause_watcher = None

    def _log_status(self, answer: Answer) -> None:
        if answer.status:
            self.log.warning("Killing tool terminal processes ended with status %s", answer.status)

    async def _lease(self, state: _TargetKills) -> bool:
        """Make sure this server's lease (its reaper) runs for the target before a shell
        starts there; the first time, kill what dead servers left there. Whether a lease runs.

        A shell starts only once its server's lease has answered: so a server that finds a
        shell of another server whose lease does not run knows that server is gone.
        """
        async with state.lease_lock:
            state.cancel_retirement()  # a shell starts there again: the lease stays
            reaper = state.reaper
            if reaper is not None and not reaper.gone:
                return True
            reaper = await self._start_reaper(state)
            return reaper is not None and await self._kill_orphans(state, reaper)

    async def _kill_orphans(self, state: _TargetKills, reaper: Reaper) -> bool:
        """Kill, through the new lease, the processes of servers that have no lease running
        in the container; whether the lease answered."""
        for _ in range(ORPHAN_ATTEMPTS):
            try:
                live = await self._live_servers(state.container_id)
            except RuntimeUnavailable as error:
                # Without the list of live servers nothing may be taken for an orphan.
                self.log.warning("Could not look for orphaned tool terminals: %s", error)
                return True
            try:
                answer = await reaper.request("orphans", sorted(live), REAPER_TIMEOUT)
            except ReaperGone:
                state.reaper = None
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
            info = await self._engine.call("inspect_container", container_id)
        except docker.errors.NotFound:
            return live

        async def lease(exec_id: str) -> str | None:
            try:
                found = await self._engine.call("exec_inspect", exec_id)
            except (docker.errors.NotFound, RuntimeUnavailable):
                return None
            config = found.get("ProcessConfig") or {}
            if not found.get("Running") or config.get("entrypoint") != "/bin/sh":
                return None
            return lease_of(config.get("arguments") or [])

        found = await asyncio.gather(*(lease(i) for i in info.get("ExecIDs") or []))
        return live | {server_id for server_id in found if server_id is not None}

    async def _start_reaper(self, state: _TargetKills) -> Reaper | None:
        """Start a reaper (this server's lease) in the target's container; ``None`` if it
        cannot be had (the kill then runs as its own exec)."""
        try:
            created = await self._engine.call(
                "exec_create",
                state.container_id,
                lease_command(self.server_id),
                user=state.user,
                environment={
                    **KILL_ENVIRONMENT,
                    REAPER_SCRIPT_VARIABLE: REAPER_SCRIPT,
                    LEASE_VARIABLE: self.server_id,
                },
                stdin=True,
                tty=False,
            )
            stream = await self._engine.attach(created["Id"], tty=False)
        except (docker.errors.NotFound, RuntimeUnavailable, OSError):
            return None
        reaper = Reaper(stream)
        state.reaper = reaper
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
        except (_Paused, EngineUnreachable):
            return False  # kept: it runs when the container (or its engine) is back
        except RuntimeUnavailable as error:
            self.log.warning("Could not kill tool terminal processes: %s", error)
            return True
        if answer is not None:
            self._log_status(answer)
        return True

    async def _once(self, container_id: str, user: str, words: list[str]) -> Answer | None:
        """Run a request of the kill script as its own exec; its answer, or ``None`` if the
        container is gone or stopped (and its processes with it)."""
        try:
            output = await self.exec_once(container_id, user, words)
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as error:
            explanation = str(error.explanation or "").lower()
            if error.status_code == 409 and "paused" in explanation:
                raise _Paused from error
            if error.status_code == 409 or "is not running" in explanation:
                # (some engines answer 500 when the container stopped between the exec's
                # create and its start)
                return None  # the container is not running: nothing is left
            msg = f"the engine refused the kill: {error.explanation}"
            raise RuntimeUnavailable(msg) from error
        except (docker.errors.DockerException, OSError) as error:
            msg = f"the engine could not be reached: {error}"
            raise EngineUnreachable(msg) from error
        lines = output.strip().splitlines()
        answer = parse_answer(lines[-1], 0) if lines else None
        if answer is None and await self._still_running(container_id):
            self.log.warning("The kill in container %s did not answer", container_id[:12])
        return answer

    async def exec_once(self, container_id: str, user: str, words: list[str]) -> bytes:
        """Run one request of the script (``request_words``) as its own exec; its output.
        The engine's errors are the caller's to handle."""

        def run() -> bytes:
            api = self._engine.api()
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

        result: bytes = await self._engine.run(run)
        return result

    async def _still_running(self, container_id: str) -> bool:
        """Whether the container runs (a kill that did not answer in one that stopped under
        it, as a moved Swarm task's does, found nothing left to kill)."""
        try:
            info = await self._engine.call("inspect_container", container_id)
        except Exception:  # noqa: BLE001 - gone, or the engine with it: nothing runs there
            return False
        return bool((info.get("State") or {}).get("Running"))


class _Paused(Exception):
    """The container is paused: nothing can run in it now."""
