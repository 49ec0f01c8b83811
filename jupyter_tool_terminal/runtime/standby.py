"""Pre-started shells: a terminal's exec already running when its user clicks.

Starting an exec is most of a terminal's open (the engine's ``runc`` start: 50-100 ms on a
quiet machine, more under load). With ``c.DockerRuntime.prestart_shells``, each engine's
runtime keeps one exec started ahead per (container, tool type) its owner uses: started once
the owner lists their instances (the launcher does) or opens a terminal there, and handed to
the next open, which only has to size its terminal and let it go. A new one is then started
in the background for the open after.

Such an exec runs the tool type's usual command behind a gate (``launch.STANDBY_GATE``): a
``/bin/sh`` that reads one line and prints a marker, and only then runs the startup command
and the shell, exactly as a fresh exec does. So what the contract promises of a fresh shell
holds: the startup command runs when the terminal opens, in a terminal already of its size;
the environment is the tool type's (the kill tag is the pre-started exec's own); it is a shell
of this server's like any other, registered with the kill wing before it starts (a server that
dies leaves it to the next lease as an orphan, like its terminals).

One is ended after :data:`STANDBY_IDLE` seconds without a list or an open of its owner there,
when its container stops, and before the server stops or hands its sessions over (a successor
takes over this server's id: a pre-started exec left behind would never be reclaimed).
Not pre-started: tool types with ``"cleanup": "instance"`` (a pre-started exec would count as
a live shell, and the last terminal's close would not clean the instance).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import typing as t

from ..tooltypes import ToolType
from .base import Instance

#: Seconds a pre-started shell waits for its terminal after its owner last listed their
#: instances or opened a terminal in its container; then it ends.
STANDBY_IDLE = 600.0
#: Seconds after an open took a pre-started shell before its replacement starts.
REPLACE_AFTER = 0.25
#: Seconds an open waits for a pre-started shell to pass its gate before it starts a fresh one.
GATE_TIMEOUT = 2.0

#: Which pre-started shell serves an open: the instance, and everything of the tool type that
#: makes its exec (an agent's terminal, whose secret-named variables are emptied, is another).
Key = tuple[str, str]


class Gated(t.Protocol):
    """A pre-started shell's channel (``docker_engine.ExecChannel``)."""

    async def resize(self, rows: int, cols: int) -> None:
        """Size its terminal."""

    async def open_gate(self, timeout: float) -> bool:
        """Let it go on; whether it did."""

    async def terminate(self) -> None:
        """End it and everything it started."""


_Channel = t.TypeVar("_Channel", bound=Gated)


def standby_key(instance: Instance, tool: ToolType) -> Key:
    """The key of the pre-started shell of ``tool`` in ``instance``."""
    described = dataclasses.asdict(tool)
    described["env"] = sorted(tool.env.items())
    return instance.id, json.dumps(described, sort_keys=True, default=str)


def may_prestart(tool: ToolType) -> bool:
    """Whether terminals of ``tool`` may be pre-started (not with ``"cleanup": "instance"``)."""
    return tool.cleanup != "instance"


@dataclasses.dataclass(eq=False)
class _Standby(t.Generic[_Channel]):
    """One pre-started shell, or its start on the way."""

    starting: asyncio.Task[_Channel | None]
    expiry: asyncio.TimerHandle | None = None
    channel: _Channel | None = None


class StandbyShells(t.Generic[_Channel]):
    """The pre-started shells of one engine: at most one per :data:`Key`.

    ``start`` starts a tool type's pre-started exec in a container (the engine runtime's own
    start, with the gate in front); ``None`` where it cannot.
    """

    def __init__(
        self,
        start: t.Callable[[Instance, ToolType], t.Awaitable[_Channel | None]],
        log: logging.Logger | logging.LoggerAdapter[t.Any],
        *,
        idle: float = STANDBY_IDLE,
    ) -> None:
        self._start = start
        self.log = log
        self.idle = idle
        self._shells: dict[Key, _Standby[_Channel]] = {}
        #: Keys whose pre-started shell the engine refused to start: their terminals start
        #: as fresh execs (no container is asked again and again). One that started and then
        #: failed its gate (its container restarted) is replaced at the next open.
        self._refused: set[Key] = set()
        #: The kills of those that ended unused (the server's shutdown waits for them).
        self._ending: set[asyncio.Task[None]] = set()
        self._closed = False

    def __len__(self) -> int:
        return sum(1 for standby in self._shells.values() if standby.channel is not None)

    def offer(self, instance: Instance, tool: ToolType) -> None:
        """Have a shell of ``tool`` pre-started in ``instance`` (its owner uses it): start one
        unless there is one, and keep it another :attr:`idle` seconds."""
        if self._closed or not may_prestart(tool):
            return
        key = standby_key(instance, tool)
        if key in self._refused:
            return
        standby = self._shells.get(key)
        if standby is None:
            task = asyncio.create_task(self._start_one(key, instance, tool))
            standby = self._shells[key] = _Standby(task)
        self._keep(key, standby)

    def _keep(self, key: Key, standby: _Standby[_Channel]) -> None:
        if standby.expiry is not None:
            standby.expiry.cancel()
        loop = asyncio.get_running_loop()
        standby.expiry = loop.call_later(self.idle, self._expire, key, standby)

    async def _start_one(self, key: Key, instance: Instance, tool: ToolType) -> _Channel | None:
        try:
            channel = await self._start(instance, tool)
        except Exception as error:  # noqa: BLE001 - an engine's refusal: opens start fresh
            self.log.debug("No pre-started shell in %s: %s", instance.id, error)
            channel = None
        standby = self._shells.get(key)
        if standby is None or standby.starting is not asyncio.current_task() or self._closed:
            # Ended while it started (expired, or the server stops): it ends too.
            if channel is not None:
                await channel.terminate()
            return None
        if channel is None:
            self._drop(key, standby)
            self._refused.add(key)
            return None
        standby.channel = channel
        return channel

    async def take(
        self, instance: Instance, tool: ToolType, size: tuple[int, int] | None
    ) -> _Channel | None:
        """The pre-started shell of ``tool`` in ``instance``, sized ``size`` and let go (its
        startup command and shell start now), or ``None``: none is ready (the caller starts a
        fresh shell, then :meth:`offer` s one for the next open). A taken one is replaced for
        the open after once it runs."""
        if self._closed or not may_prestart(tool):
            return None
        key = standby_key(instance, tool)
        standby = self._shells.get(key)
        channel = None if standby is None else standby.channel
        if standby is None or channel is None:
            return None
        self._drop(key, standby)
        try:
            if await self._let_go(channel, size):
                return channel
            await channel.terminate()
            return None
        finally:
            # The next open's, once this one's shell has started: the engine's start of an
            # exec is CPU work (runc) that would delay the shell of the open it replaces.
            asyncio.get_running_loop().call_later(REPLACE_AFTER, self.offer, instance, tool)

    async def _let_go(self, channel: _Channel, size: tuple[int, int] | None) -> bool:
        """Size the pre-started shell's terminal and open its gate; whether it passed."""
        try:
            if size is not None:
                await channel.resize(*size)
            return await channel.open_gate(GATE_TIMEOUT)
        except Exception as error:  # noqa: BLE001 - gone meanwhile: the open starts fresh
            self.log.debug("A pre-started shell could not be used: %s", error)
            return False

    def _expire(self, key: Key, standby: _Standby[_Channel]) -> None:
        if self._shells.get(key) is standby:
            self._drop(key, standby)
            if standby.channel is not None:
                ending = asyncio.create_task(standby.channel.terminate())
                self._ending.add(ending)
                ending.add_done_callback(self._ending.discard)

    def _drop(self, key: Key, standby: _Standby[_Channel]) -> None:
        if standby.expiry is not None:
            standby.expiry.cancel()
        if self._shells.get(key) is standby:
            del self._shells[key]

    async def close(self) -> None:
        """End every pre-started shell (and those starting), and start none from now on."""
        self._closed = True
        shells, self._shells = list(self._shells.values()), {}
        for standby in shells:
            if standby.expiry is not None:
                standby.expiry.cancel()
        # Those still starting end themselves (they find they were dropped).
        channels = await asyncio.gather(
            *(standby.starting for standby in shells), return_exceptions=True
        )
        for standby, started in zip(shells, channels, strict=True):
            channel = standby.channel
            if channel is None and not isinstance(started, BaseException):
                channel = started
            if channel is not None:
                with contextlib.suppress(Exception):
                    await channel.terminate()
        await asyncio.gather(*self._ending, return_exceptions=True)

    def reopen(self) -> None:
        """Start pre-starting again (a hand-over that failed: the server goes on)."""
        self._closed = False
