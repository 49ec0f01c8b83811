"""Which program holds a Docker shell's terminal: asked of the in-container helper.

Docker's exec gives the server no PTY of its own to ask (``tcgetpgrp``), so the question goes
to the container, where ``/proc/<shell>/stat`` says which process group is in the terminal's
foreground (field 8, ``tpgid``). It is asked of this server's lease there (its reaper, over the
stream it keeps open anyway: no exec per question), and of a one-off exec only when no lease
runs. The shell is the session leader among the processes carrying its kill tag; the first
answer names its pid and start time, and later questions name them back, so the reaper finds it
again without reading every process's environment.
"""

from __future__ import annotations

import docker.errors

from .base import RuntimeUnavailable
from .kills import REAPER_TIMEOUT, KillWing, Target
from .reaper import (
    Answer,
    Foreground,
    ReaperGone,
    parse_foreground,
    request_words,
)


class ForegroundWatch:
    """One shell's foreground questions (the shell's pid and start time, once known)."""

    def __init__(self, kills: KillWing, target: Target, tag: str) -> None:
        self._kills = kills
        self._target = target
        self._tag = tag
        self._known: list[str] = []

    async def program(self) -> str | None:
        """The program holding the terminal when it is not the shell; ``None`` when the shell
        holds it. ``RuntimeUnavailable`` when it cannot be told (the shell is not found, the
        container does not answer): a caller must not take that for the shell."""
        arguments = [self._tag, *self._known]
        answer: Foreground | Answer | None = None
        reaper = self._kills.live_reaper(self._target)
        if reaper is not None:
            try:
                answer = await reaper.ask("foreground", arguments, parse_foreground, REAPER_TIMEOUT)
            except ReaperGone:
                answer = None
        if answer is None:
            answer = await self._once(arguments)
        if not isinstance(answer, Foreground):
            msg = "the shell's terminal could not be found in its container"
            raise RuntimeUnavailable(msg)
        self._known = [str(answer.shell), str(answer.start)]
        return answer.program

    async def _once(self, arguments: list[str]) -> Foreground | Answer | None:
        """Ask a one-off exec (no lease runs in the container)."""
        container_id, user = self._target
        try:
            words = request_words("foreground", arguments)
            output = await self._kills.exec_once(container_id, user, words)
        except (docker.errors.DockerException, OSError) as error:
            msg = f"the container could not be asked which program holds the terminal: {error}"
            raise RuntimeUnavailable(msg) from error
        lines = output.strip().splitlines()
        return parse_foreground(lines[-1], 0) if lines else None
