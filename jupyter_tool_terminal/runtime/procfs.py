"""Finding and killing a local shell's processes through this machine's ``/proc``.

A local shell starts in its own terminal session (the PTY's), and carries a random kill tag in
its environment, which every process it starts inherits. Its processes are then: every
process of its session (which catches children that cleared their environment), every process
carrying its tag (which catches children that called ``setsid``), every process of the
sessions those started, and every child of any of these (which catches a child that did both,
while its parent lives). Only processes of the same user that started after the shell count,
so a recycled process id or another user's process is never touched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time


@dataclasses.dataclass(frozen=True)
class ShellProcesses:
    """What identifies the processes of one local shell."""

    #: The shell's session id (its process id: the shell leads its own session).
    session: int
    #: The value of the shell's kill tag variable.
    tag: str
    #: The name of the kill tag variable.
    variable: str
    #: The user id the shell runs as.
    uid: int
    #: The shell's start time, in clock ticks after boot (as ``/proc/PID/stat`` counts it).
    since: int


@dataclasses.dataclass(frozen=True)
class _Stat:
    state: str
    parent: int
    group: int
    session: int
    start: int

    @property
    def dead(self) -> bool:
        """Whether the process has exited (a zombie, or on its way out)."""
        return self.state in "ZXx"


@dataclasses.dataclass
class Found:
    """What one scan of ``/proc`` found of a shell's processes."""

    #: The live processes.
    processes: set[int] = dataclasses.field(default_factory=set)
    #: Their process groups, and those of the exited ones: a child forked by a process that
    #: exited meanwhile may not have been listed yet, but is in its parent's group.
    groups: set[int] = dataclasses.field(default_factory=set)
    #: ``False`` if processes kept vanishing between a listing and their reading (each may have
    #: forked a child after the listing) for every one of ``MAX_LISTINGS`` listings.
    complete: bool = True


def _stat(pid: int) -> _Stat | None:
    """A process's state, session and start time; ``None`` if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read()
    except OSError:
        return None
    # The command name in parentheses may itself contain ") ": the fields start after the last.
    fields = text[text.rfind(b")") + 2 :].split()
    # Fields counted from the state (the 3rd of the file): the group is the 5th, the session
    # the 6th, the start the 22nd.
    return _Stat(
        state=fields[0].decode(),
        parent=int(fields[1]),
        group=int(fields[2]),
        session=int(fields[3]),
        start=int(fields[19]),
    )


def start_time(pid: int) -> int:
    """A running process's start time in clock ticks after boot (0 if it is gone)."""
    stat = _stat(pid)
    return stat.start if stat is not None else 0


def _carries(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            return needle in file.read().split(b"\0")
    except OSError:
        return False


#: How many times one scan lists ``/proc`` again to catch children of processes that vanished.
MAX_LISTINGS = 50


def _listed() -> set[int]:
    return {int(name) for name in os.listdir("/proc") if name.isdigit()}


def find(shell: ShellProcesses) -> Found:
    """The shell's processes as they are now: the live ones and the groups of all of them."""
    needle = f"{shell.variable}={shell.tag}".encode()
    own = {os.getpid()}
    never = {0, os.getsid(0)}
    result = Found()
    candidates: dict[int, _Stat] = {}
    found: set[int] = set()
    sessions = {shell.session}
    examined: set[int] = set()
    batch = _listed()
    for _ in range(MAX_LISTINGS):
        vanished = False
        for pid in batch - own:
            try:
                if os.stat(f"/proc/{pid}").st_uid != shell.uid:
                    continue
            except OSError:
                vanished = True
                continue
            stat = _stat(pid)
            if stat is None:
                vanished = True
                continue
            if stat.start < shell.since or stat.session in never:
                continue
            candidates[pid] = stat
            if stat.session == shell.session:
                found.add(pid)
            elif not stat.dead and _carries(pid, needle):
                found.add(pid)
                sessions.add(stat.session)
        examined |= batch
        if not vanished:
            break
        # A process that vanished between the listing and its reading may have forked a child
        # after the listing: list again, and look at the newcomers (only at them: processes
        # that other kills end meanwhile must not keep this one going).
        batch = _listed() - examined
    else:
        result.complete = False
    # Sessions that tagged processes started hold children that may have cleared their tag,
    # and so do the children of any process found; until nothing more is found.
    while True:
        more = {
            pid
            for pid, stat in candidates.items()
            if pid not in found and (stat.session in sessions or stat.parent in found)
        }
        if not more:
            break
        found |= more
        sessions.update(candidates[pid].session for pid in more)
    result.processes = {pid for pid in found if not candidates[pid].dead}
    result.groups = {candidates[pid].group for pid in found} - {0, 1, os.getpgid(0)}
    return result


def kill(shell: ShellProcesses, timeout: float) -> bool:
    """Kill every process of the shell, in rounds until a whole round finds none alive.

    Each round stops its victims, whole process groups at once (the kernel delivers a group
    signal to a child forked meanwhile too, so a forking loop cannot outrun it), before it
    kills them. A round that could not read every process it listed does not count as finding
    none. Returns ``False`` if some were still found after ``timeout`` seconds. Blocking: run
    it off the event loop.
    """
    deadline = time.monotonic() + timeout
    while True:
        found = find(shell)
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for group in found.groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, sig)
            for pid in found.processes:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
        if not found.processes and found.complete:
            return True
        if time.monotonic() > deadline:
            return False
        if found.processes:
            # A killed process takes a moment to become a zombie; do not spin on it meanwhile.
            time.sleep(0.005)
