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
    session: int
    start: int


def _stat(pid: int) -> _Stat | None:
    """A process's state, session and start time; ``None`` if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read()
    except OSError:
        return None
    # The command name in parentheses may itself contain ") ": the fields start after the last.
    fields = text[text.rfind(b")") + 2 :].split()
    # Fields counted from the state (the 3rd of the file): session is the 6th, start the 22nd.
    return _Stat(
        state=fields[0].decode(),
        parent=int(fields[1]),
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


def find(shell: ShellProcesses) -> set[int]:
    """The process ids of the shell's processes that are alive now (not zombies)."""
    needle = f"{shell.variable}={shell.tag}".encode()
    own = {os.getpid()}
    never = {0, os.getsid(0)}
    candidates: dict[int, _Stat] = {}
    found: set[int] = set()
    sessions = {shell.session}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            if pid in own or os.stat(f"/proc/{pid}").st_uid != shell.uid:
                continue
        except OSError:
            continue
        stat = _stat(pid)
        if stat is None or stat.state in "ZX" or stat.start < shell.since:
            continue
        if stat.session in never:
            continue
        candidates[pid] = stat
        if stat.session == shell.session:
            found.add(pid)
        elif _carries(pid, needle):
            found.add(pid)
            sessions.add(stat.session)
    # Sessions that tagged processes started hold children that may have cleared their tag,
    # and so do the children of any process found; until nothing more is found.
    while True:
        more = {
            pid
            for pid, stat in candidates.items()
            if pid not in found and (stat.session in sessions or stat.parent in found)
        }
        if not more:
            return found
        found |= more
        sessions.update(candidates[pid].session for pid in more)


def kill(shell: ShellProcesses, timeout: float) -> bool:
    """Kill every process of the shell, in rounds until a whole round finds none.

    Each round stops its victims before it kills them, so that a process that forks cannot
    outrun it. Returns ``False`` if some were still found after ``timeout`` seconds. Blocking:
    run it off the event loop.
    """
    deadline = time.monotonic() + timeout
    while True:
        victims = find(shell)
        if not victims:
            return True
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in victims:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
        if time.monotonic() > deadline:
            return False
        # A killed process takes a moment to become a zombie; do not spin on it meanwhile.
        time.sleep(0.005)
