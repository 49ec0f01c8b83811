"""Killing a shell's processes inside its container.

Docker has no call that signals an exec's processes, so the kill itself runs in the container:
either as a one-off exec per kill, or through a *reaper*, a shell kept running in a busy
container that reads requests on its stdin and kills their processes. Each exec costs a round
of ``runc`` (tens of milliseconds of CPU across dockerd, containerd and runc); when sessions
come and go in a container where others are typing, that work is what their echo waits behind.

What the kill trusts, and what it does not:

* It runs ``/bin/sh`` and, through :data:`KILL_ENVIRONMENT`, a ``PATH`` of the system
  directories only, with the loader's and shells' start-up variables emptied. The exec's
  environment is merged into the container's, so each is overridden, not left out: an image
  whose ``PATH`` starts with a directory its users may write (``/opt/conda/bin`` in the Jupyter
  docker-stacks images) must not choose the ``grep`` a root kill runs.
* Its only external tool is ``grep``; ``kill``, ``read``, ``printf`` and ``[`` are built into
  every ``sh`` it supports (dash, busybox ash, bash).
* Every line a reaper reads is checked against an exact format (a request id, a verb, then
  tags of 32 hex digits or a number) before anything runs; tags are matched as fixed strings,
  never as patterns. Anything else is ignored, unanswered. Answers carry the request's id, so
  a line written to the reaper's stdin from inside the container (root can open
  ``/proc/<reaper>/fd/0``) can neither trigger a kill the server did not ask for (unless it
  names a live tag, which such a writer could kill directly anyway) nor be taken for the
  answer to another request.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.resources
import itertools
import re
import typing as t

from docker.utils.socket import STDOUT

from .launch import SERVER_VARIABLE, SESSION_TAG_VARIABLE
from .stream import ShellStream

#: The variable that makes a reaper a server's *lease* in its container: its value is the
#: server's id. A server keeps a lease in every container (and for every exec user) where its
#: shells run; while the lease runs the server is alive, and when the server dies the engine
#: drops the lease's connection, which ends it (see :data:`REAPER_SCRIPT`).
LEASE_VARIABLE = "JUPYTER_TOOL_TERMINAL_LEASE"

#: The name a lease runs under (its ``$0``), followed by its server's id: the engine keeps
#: both in the exec's record, which is how servers find each other's leases.
LEASE_NAME = "jupyter-tool-terminal-cleanup"

#: The environment of every kill exec, over the container's own (the engine merges them).
KILL_ENVIRONMENT: dict[str, str] = {
    "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
    "IFS": " \t\n",
    "LC_ALL": "C",
    **dict.fromkeys(
        (
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "LD_AUDIT",
            "ENV",
            "BASH_ENV",
            "CDPATH",
            "SHELLOPTS",
            "BASHOPTS",
            "GLOBIGNORE",
            "PS4",
            "GREP_OPTIONS",
            "GREP_COLOR",
            "GREP_COLORS",
            "LOCPATH",
            "GCONV_PATH",
            "NLSPATH",
        ),
        "",
    ),
}

#: An orphan kill's status when a lease it was not told of runs (a server that just came up):
#: what it found may be that server's, so it stopped short; the caller asks again.
ORPHANS_UNSURE = 3

#: How long one kill may go on freezing newcomers before it gives up (seconds).
KILL_TIME_LIMIT = 8

# Shell functions that kill processes (reaper.sh, checked by shellcheck in CI); see the README's
# "What the kill guarantees".
#
# A *session* kill finds, in rounds: the processes carrying one of the tags in their
# environment (readable for the kill's own uid; a root kill reads everyone's but processes of
# other uids, which need CAP_SYS_PTRACE), every process in their terminal sessions (which
# catches children that cleared their environment, or changed uid), and every child of any of
# them (which catches children that left the session but not their parent; a round looks one
# generation further than the last, the next round the next). Each round stops what it found,
# whole process groups at once: the kernel delivers a group signal to a child
# forked meanwhile too, so a forking loop inside the group cannot outrun it. Rounds repeat
# until one finds nothing it had not stopped already; then everything stopped is killed. The
# rounds end after KILL_TIME_LIMIT seconds at the latest (status 1). When tagged processes
# vanish before a round can read them (a loop forking faster than a scan), the kill first
# freezes every process it may signal with `kill -1`, which no fork escapes, and continues
# all but its victims (and those that were stopped already) at the end.
#
# An *instance* kill (the "cleanup": "instance" option, as root) stops every process of the
# container at once (`kill -1` spares only init and the caller), kills those started after a
# mark taken before the container's first session, and lets the others continue.
#
# /proc/PID/stat is "PID (COMM) STATE PPID PGRP SID ... STARTTIME(22) ...", where COMM may
# contain ")", spaces and newlines: the file is read whole and cut at its last ")". The greps
# over stat are only a fast preselection (not anchored, so a newline in COMM cannot hide a
# process); every candidate is parsed exactly before it counts.

#: The script's constants, from this module's (in front of ``reaper.sh``).
_CONSTANTS = "".join(
    f"{name}={value}\n"
    for name, value in {
        "SESSION_TAG_VARIABLE": SESSION_TAG_VARIABLE,
        "SERVER_VARIABLE": SERVER_VARIABLE,
        "LEASE_VARIABLE": LEASE_VARIABLE,
        "KILL_TIME_LIMIT": KILL_TIME_LIMIT,
        "ORPHANS_UNSURE": ORPHANS_UNSURE,
    }.items()
)
KILL_FUNCTIONS = _CONSTANTS + importlib.resources.files(__package__).joinpath(
    "reaper.sh"
).read_text("utf-8")

#: The one-off kill: ``sh -c KILL_ONCE_SCRIPT name VERB ARG...``; prints the answer line.
KILL_ONCE_SCRIPT = KILL_FUNCTIONS + 'request 0 "$@"\n'

#: The reaper: one request line in, one answer line out, until stdin closes (the server
#: stopping or retiring it, or the engine dropping the connection). Lines that are not exactly
#: a request are skipped before anything else is done with them.
REAPER_SCRIPT = (
    KILL_FUNCTIONS
    + r"""
while IFS= read -r _line; do
  case $_line in ""|*[!0-9a-z\ ]*) continue ;; esac
  [ "${#_line}" -le 4096 ] || continue
  set -- $_line
  [ $# -ge 2 ] && request "$@"
done
"""
)

#: The reaper's script travels in this environment variable, so that ``ps`` in the container
#: shows one short line for it instead of the whole script.
REAPER_SCRIPT_VARIABLE = "JUPYTER_TOOL_TERMINAL_REAPER"

#: What ``ps`` and ``top`` in the container show first of a reaper, for the user who finds it
#: there: what it is, and that killing it ends no terminal (the server kills with one-off execs
#: until it starts another). A no-op command, so the words are the script's first and stay
#: visible where ``top`` cuts the line; plain words only (``sh`` parses them).
REAPER_TITLE = ": jupyter-tool-terminal cleanup, killing it ends no terminal"

#: The reaper's command line; short, because ``ps`` (and ``docker top``) cut long ones.
REAPER_COMMAND = ["/bin/sh", "-c", f'{REAPER_TITLE}; eval "${REAPER_SCRIPT_VARIABLE}"']

#: The command line (after its program) and name of the leases of earlier versions, which a
#: server still running them keeps while a newer one starts beside it (an upgrade).
_LEGACY_LEASES = [
    (["-c", f'eval "${REAPER_SCRIPT_VARIABLE}"'], "jupyter-tool-terminal-lease"),
]


def lease_command(server_id: str) -> list[str]:
    """The command line of a reaper that is also ``server_id``'s lease."""
    return [*REAPER_COMMAND, LEASE_NAME, server_id]


def lease_of(arguments: t.Sequence[str]) -> str | None:
    """The server id of a lease exec with these arguments (the engine's record of an exec's
    command line after its program); ``None`` if it is no lease. An earlier version's lease
    counts too: its server is alive."""
    for command, name in [(REAPER_COMMAND[1:], LEASE_NAME), *_LEGACY_LEASES]:
        if list(arguments[:-2]) == command and arguments[-2:-1] == [name]:
            server_id = arguments[-1]
            return server_id if _TAG.fullmatch(server_id) else None
    return None


# Tags are the server's own random hex tokens (``secrets.token_hex(16)``).
_TAG = re.compile(r"[0-9a-f]{32}")
_ANSWER = re.compile(rb"(\d{1,9}) done (\d{1,3})(?: (\d{1,18}))?")
_FOREGROUND = re.compile(
    rb"(\d{1,9}) foreground (\d{1,9}) (\d{1,18}) (-?\d{1,9})(?: ([A-Za-z0-9._+?-]{1,16}))?"
)
#: The largest frame of a reaper's stream that is read (its answers are a few bytes).
_MAX_FRAME = 1 << 16
#: How many tags one request names at most (a line stays short for ``read``).
MAX_TAGS_PER_REQUEST = 100


@dataclasses.dataclass(frozen=True)
class Answer:
    """A kill's outcome: its exit status (0: all gone) and the value it reports, if any."""

    status: int
    value: int | None = None


def request_words(verb: str, arguments: list[str]) -> list[str]:
    """Check a request and return its words (verb first); ``ValueError`` if malformed."""
    if verb in ("session", "orphans"):
        if not arguments or not all(_TAG.fullmatch(tag) for tag in arguments):
            msg = f"not kill tags: {arguments!r}"
            raise ValueError(msg)
    elif verb == "foreground":
        if not (
            len(arguments) in (1, 3)
            and _TAG.fullmatch(arguments[0])
            and all(value.isdigit() for value in arguments[1:])
        ):
            msg = f"not a foreground request: {arguments!r}"
            raise ValueError(msg)
    elif verb == "instance":
        if len(arguments) != 1 or not arguments[0].isdigit():
            msg = f"not a mark: {arguments!r}"
            raise ValueError(msg)
    elif verb != "mark" or arguments:
        msg = f"not a kill request: {verb} {arguments!r}"
        raise ValueError(msg)
    return [verb, *arguments]


def parse_answer(line: bytes, request_id: int) -> Answer | None:
    """The answer in ``line`` if it answers ``request_id``; ``None`` for any other line."""
    match = _ANSWER.fullmatch(line.strip())
    if match is None or int(match.group(1)) != request_id:
        return None
    value = match.group(3)
    return Answer(int(match.group(2)), int(value) if value is not None else None)


@dataclasses.dataclass(frozen=True)
class Foreground:
    """Which process group holds a shell's terminal, as the container sees it: the shell's pid
    and start time (which find it again without a scan), the group, and its leader's name
    (letters other than ``[A-Za-z0-9._+-]`` shown as ``?``; empty when the group is the shell's,
    or its leader is gone)."""

    shell: int
    start: int
    group: int
    name: str

    @property
    def program(self) -> str | None:
        """The program holding the terminal when it is not the shell; ``None`` when it is (or
        no group holds it)."""
        if self.group in (self.shell, 0, -1):
            return None
        return self.name or f"process {self.group}"


def parse_foreground(line: bytes, request_id: int) -> Foreground | Answer | None:
    """The answer to a ``foreground`` request in ``line``: where the shell's terminal is, or
    an :class:`Answer` (status 1: no such shell); ``None`` for any other line."""
    match = _FOREGROUND.fullmatch(line.strip())
    if match is None:
        return parse_answer(line, request_id)
    if int(match.group(1)) != request_id:
        return None
    shell, start, group = (int(match.group(n)) for n in (2, 3, 4))
    return Foreground(shell, start, group, (match.group(5) or b"").decode("ascii"))


class ReaperGone(Exception):
    """The reaper did not answer (its exec ended, or the engine dropped its connection)."""


class Reaper:
    """The server's end of a reaper exec: its hijacked, multiplexed (non-TTY) stream.

    Requests are sent one at a time (a request waits for the one before it to be answered).
    """

    def __init__(self, stream: ShellStream) -> None:
        self._stream = stream
        self._incoming = bytearray()
        self._stdout = b""
        self._ids = itertools.count(1)
        self._turn = asyncio.Lock()
        self.broken = False

    async def request(self, verb: str, arguments: list[str], timeout: float) -> Answer:
        """Send one request; return its answer.

        Raises :class:`ReaperGone` when the reaper cannot be used any more; it is closed then.
        """
        answer = await self.ask(verb, arguments, parse_answer, timeout)
        assert isinstance(answer, Answer)  # (what parse_answer parses)
        return answer

    async def ask(
        self,
        verb: str,
        arguments: list[str],
        parse: t.Callable[[bytes, int], Foreground | Answer | None],
        timeout: float,
    ) -> Foreground | Answer:
        """Send one request; return its answer as ``parse`` reads it (see :meth:`request`)."""
        if self.broken:
            raise ReaperGone
        words = request_words(verb, arguments)
        async with self._turn:
            if self.broken:
                raise ReaperGone
            request_id = next(self._ids) % 10**9
            try:
                return await asyncio.wait_for(self._exchange(request_id, words, parse), timeout)
            except (asyncio.TimeoutError, OSError) as error:
                self.close()
                raise ReaperGone from error

    async def _exchange(
        self,
        request_id: int,
        words: list[str],
        parse: t.Callable[[bytes, int], Foreground | Answer | None],
    ) -> Foreground | Answer:
        await self._stream.write(f"{request_id} {' '.join(words)}\n".encode())
        while True:
            # Lines that answer nothing the server asked (someone in the container wrote to
            # the reaper's stdin) are skipped.
            answer = parse(await self._read_line(), request_id)
            if answer is not None:
                return answer

    async def _read_line(self) -> bytes:
        # The stream is Docker's multiplexed framing: an 8-byte header (stream, 0, 0, 0, size as
        # big-endian u32), then the payload. Only stdout carries answers. (The SDK's own frame
        # readers in docker.utils.socket block on a socket; this one reads the event loop's.)
        while b"\n" not in self._stdout:
            header = await self._read_exactly(8)
            payload = await self._read_exactly(int.from_bytes(header[4:8], "big"))
            if header[0] == STDOUT:
                self._stdout += payload
                if len(self._stdout) > 1 << 16:
                    # Nothing the reaper prints is this long: someone else is writing.
                    msg = "the reaper's output is not its answers"
                    raise ConnectionError(msg)
        line, _, self._stdout = self._stdout.partition(b"\n")
        return line

    async def _read_exactly(self, size: int) -> bytes:
        if size > _MAX_FRAME:
            msg = "a frame larger than any answer"
            raise ConnectionError(msg)
        while len(self._incoming) < size:
            data = await self._stream.read(_MAX_FRAME)
            if not data:
                msg = "the reaper's stream ended"
                raise ConnectionError(msg)
            self._incoming += data
        piece = bytes(self._incoming[:size])
        del self._incoming[:size]
        return piece

    @property
    def gone(self) -> bool:
        """Whether the reaper cannot answer any more: closed, or its exec ended (a reaper
        kept while no shell runs may see its container restart)."""
        return self.broken or self._stream.ended

    def close(self) -> None:
        """Close the stream: the reaper reads end-of-file and exits."""
        self.broken = True
        with contextlib.suppress(Exception):
            self._stream.close()
