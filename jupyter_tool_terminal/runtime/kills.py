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


class KillWing:
    """Kills shells' processes for one engine, and keeps this server's leases there."""

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
        # Kill requests waiting for their container's kill worker: (tags, waiters).
        self._pending_kills: dict[Target, tuple[set[str], list[asyncio.Future[bool]]]] = {}
        self._kill_workers: dict[Target, asyncio.Task[None]] = {}
        # The tags of the shells started in each container and not killed yet; a container
        # with other live shells gets a reaper for its kills (see ``reaper.py``).
        self._live_tags: dict[Target, set[str]] = {}
        self._reapers: dict[Target, Reaper] = {}
        # Kills a paused container could not run yet, and the tasks waiting to run them.
        self._deferred: dict[Target, set[str]] = {}
        self._pause_watchers: dict[str, asyncio.Task[None]] = {}
        # Containers of "cleanup": "instance" tool types: the start time (in the container's
        # clock ticks) of a process started just before their first session.
        self._marks: dict[str, int] = {}
        self._container_locks: dict[str, asyncio.Lock] = {}
        #: This server's id: its shells carry it, and its reapers are its leases (see
        #: README, "What the kill guarantees": after a crash).
        self.server_id = secrets.token_hex(16)
        self._lease_locks: dict[Target, asyncio.Lock] = {}
        #: Seconds a lease outlives the last shell of its target (0: it ends with it).
        self.linger = linger
        # The retirements of leases whose target has no live shell, due after ``linger``.
        self._retirements: dict[Target, asyncio.TimerHandle] = {}

    def handover_state(self) -> dict[str, t.Any]:
        """What a successor takes over (``handover/``): this server's id, which its shells
        carry, and the marks of ``"cleanup": "instance"`` containers."""
        return {"server_id": self.server_id, "marks": dict(self._marks)}

    def take_over(self, state: t.Mapping[str, t.Any]) -> None:
        """Become the predecessor whose :meth:`handover_state` this is, before any lease of
        this server runs: its shells are then this server's, never orphans to its leases."""
        self.server_id = state["server_id"]
        self._marks.update(state["marks"])

    def close(self) -> None:
        """Give up: the server stops (its sessions were killed before)."""
        for container_id in {target[0] for target in self._deferred}:
            self.log.warning(
                "Container %s is paused: its closed tool terminals' processes could not be "
                "killed and outlive this server",
                container_id[:12],
            )
        for watcher in self._pause_watchers.values():
            watcher.cancel()
        for retirement in self._retirements.values():
            retirement.cancel()
        self._retirements.clear()
        for reaper in self._reapers.values():
            reaper.close()
        self._reapers.clear()

    async def register(self, target: Target, tag: str, *, mark: bool) -> bool:
        """Count a shell about to start in the target as live (taking the container's mark
        first for ``"cleanup": "instance"``), with this server's lease running there; whether
        it does (the shell may then carry this server's id). Undo with :meth:`forget`."""
        if mark:
            # Marked before the first shell, under the lock that the instance-wide kill holds.
            async with self._container_lock(target[0]):
                if target[0] not in self._marks:
                    self._marks[target[0]] = await self._take_mark(target[0])
                self._live_tags.setdefault(target, set()).add(tag)
        else:
            self._live_tags.setdefault(target, set()).add(tag)
        return await self._lease(target)

    def forget(self, target: Target, tag: str) -> None:
        """No shell runs with this tag: it must not count as a live shell of the container."""
        live = self._live_tags.get(target)
        if live is not None:
            live.discard(tag)
            if not live:
                self._live_tags.pop(target, None)

    def live_reaper(self, target: Target) -> Reaper | None:
        """This server's lease in the target, if it runs (for questions other than kills,
        ``foreground.py``)."""
        reaper = self._reapers.get(target)
        return None if reaper is None or reaper.gone else reaper

    def _container_lock(self, container_id: str) -> asyncio.Lock:
        return self._container_locks.setdefault(container_id, asyncio.Lock())

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
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        pending_tags, waiters = self._pending_kills.setdefault(target, (set(), []))
        pending_tags.update(tags)
        waiters.append(waiter)
        if target not in self._kill_workers:
            self._kill_workers[target] = asyncio.create_task(self._kill_worker(target))
        return await waiter

    async def _kill_worker(self, target: Target) -> None:
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

    def _others_live(self, target: Target, tags: list[str]) -> bool:
        """Whether shells other than ``tags`` are alive in the target's container."""
        return any(
            key[0] == target[0] and live.difference(tags) for key, live in self._live_tags.items()
        )

    async def _kill_now(self, target: Target, tags: list[str]) -> bool:
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

    def defer(self, target: Target, tags: t.Collection[str]) -> None:
        """Keep a kill that cannot run now (its engine does not answer): it runs once the
        engine answers and the container runs, or is dropped with the container."""
        self._killed(target, sorted(tags), False)

    def _killed(self, target: Target, tags: list[str], done: bool) -> bool:
        """Book a kill's outcome: the tags are gone, or deferred until the container runs."""
        if not done:
            if self._on_deferred is not None:
                self._on_deferred()
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
            # No shell is left to kill: the reaper goes too (after ``linger``), and the
            # container is as before.
            self._retire_later(target)
        return True

    def _retire_later(self, target: Target) -> None:
        """End the target's reaper once it has had no live shell for ``linger`` seconds.

        Starting a lease costs a shell's open an exec that must run and answer before the
        shell starts (as long again as the shell's own start): a lease that stays a while
        spares that to the next open (a reset, a reload, a terminal opened again), and the
        kills meanwhile go through it instead of an exec of their own.
        """
        if (pending := self._retirements.pop(target, None)) is not None:
            pending.cancel()
        reaper = self._reapers.get(target)
        if reaper is None:
            return
        if self.linger <= 0:
            self._retire(target, reaper)
            return
        self._retirements[target] = asyncio.get_running_loop().call_later(
            self.linger, self._retire, target, reaper
        )

    def _retire(self, target: Target, reaper: Reaper) -> None:
        self._retirements.pop(target, None)
        if self._live_tags.get(target) or self._reapers.get(target) is not reaper:
            return  # a shell started there meanwhile, or the reaper was replaced
        del self._reapers[target]
        reaper.close()

    async def _kill_session(self, target: Target, tags: list[str]) -> bool:
        reaper = self._reapers.get(target)
        if reaper is None and self._others_live(target, tags):
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
            info = await self._engine.call("inspect_container", container_id)
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
                await self._engine.wait_answering()
                try:
                    info = await self._engine.call("inspect_container", container_id)
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
                        await self.kill(target, tags)
                    else:  # stopped or removed: its processes are gone
                        self._killed(target, sorted(tags), True)
                if not any(key[0] == container_id for key in self._deferred):
                    return
        finally:
            self._pause_watchers.pop(container_id, None)

    def _log_status(self, answer: Answer) -> None:
        if answer.status:
            self.log.warning("Killing tool terminal processes ended with status %s", answer.status)

    async def _lease(self, target: Target) -> bool:
        """Make sure this server's lease (its reaper) runs for the target before a shell
        starts there; the first time, kill what dead servers left there. Whether a lease runs.

        A shell starts only once its server's lease has answered: so a server that finds a
        shell of another server whose lease does not run knows that server is gone.
        """
        lock = self._lease_locks.setdefault(target, asyncio.Lock())
        async with lock:
            if (pending := self._retirements.pop(target, None)) is not None:
                pending.cancel()  # a shell starts there again: the lease stays
            reaper = self._reapers.get(target)
            if reaper is not None and not reaper.gone:
                return True
            reaper = await self._start_reaper(target)
            return reaper is not None and await self._kill_orphans(target, reaper)

    async def _kill_orphans(self, target: Target, reaper: Reaper) -> bool:
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

    async def _start_reaper(self, target: Target) -> Reaper | None:
        """Start a reaper (this server's lease) in the container; ``None`` if it cannot be
        had (the kill then runs as its own exec)."""
        try:
            created = await self._engine.call(
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
            stream = await self._engine.attach(created["Id"], tty=False)
        except (docker.errors.NotFound, RuntimeUnavailable, OSError):
            return None
        reaper = Reaper(stream)
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
