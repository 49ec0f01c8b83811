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
LEASE_NAME = "jupyter-tool-terminal-lease"

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

# Shell functions that kill processes; see the README's "What the kill guarantees".
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
KILL_FUNCTIONS = rf"""
IFS=$(printf ' \t\nx'); IFS=${{IFS%x}}
stat_of() {{
  _st=
  {{ while IFS= read -r _l; do _st="$_st$_l "; done; }} 2>/dev/null < "/proc/$1/stat" || return 1
  case $_st in *") "*) _st=${{_st##*) }} ;; *) return 1 ;; esac
}}
uptime_s() {{
  read -r _up _ < /proc/uptime
  _up=${{_up%%.*}}
}}
consider() {{
  case " $victims " in *" $1 "*) return 0 ;; esac
  [ "$1" = "$me" ] && return 0
  [ "$1" = 1 ] && return 0
  if ! stat_of "$1"; then
    vanished=1
    return 0
  fi
  set -- "$1" "$2" $_st
  case $3 in Z|X|x) vanished=1; return 0 ;; esac
  [ "$4" = "$me" ] && return 0
  if [ "$2" = check ]; then
    case " $victims " in
      *" $4 "*) ;;
      *) case " $sids " in *" $6 "*) ;; *) return 0 ;; esac ;;
    esac
  fi
  victims="$victims $1"
  case $6 in 0|"$init_sid"|"$my_sid") return 0 ;; esac
  case " $sids " in *" $6 "*) ;; *) sids="$sids $6" ;; esac
  case $5 in 0|1|"$init_pgid"|"$my_pgid") ;; *)
    case " $groups " in *" $5 "*) ;; *) groups="$groups $5" ;; esac ;;
  esac
}}
alternatives() {{
  _alt=
  for _x in $1; do _alt="$_alt|$_x"; done
  _alt=${{_alt#|}}
}}
grep_each() {{
  # grep_each KIND OPTIONS PATTERN: grep /proc/*/KIND; the pids with a match in $_hits.
  # `grep -c -H` answers for every file it could read, in the order it was given them, so a
  # walk along both lists finds the files it could not read; one that no longer exists was
  # a process that vanished after the listing (vanished=1).
  _kind=$1 _options=$2 _pattern=$3 _hits=
  set -- /proc/[0-9]*/"$_kind"
  for _l in $(grep -c -H -s $_options ${{_pattern:+"$_pattern"}} "$@"); do
    while [ $# -gt 0 ] && [ "${{_l%:*}}" != "$1" ]; do
      [ -e "$1" ] || vanished=1
      shift
    done
    [ $# -gt 0 ] && shift
    case $_l in *:0) ;; *) _p=${{_l#/proc/}}; _hits="$_hits ${{_p%%/*}}" ;; esac
  done
  for _f in "$@"; do [ -e "$_f" ] || vanished=1; done
}}
tagged() {{
  # The processes a kill starts from, in $_hits: those carrying one of $_tags; or, for an
  # orphan kill, those carrying a server id other than the live ones in $_live.
  if [ -z "$_live" ]; then
    grep_each environ "-z -x -F $_tags" ""
    return
  fi
  grep_each environ "-z -x -E" "{SERVER_VARIABLE}=[0-9a-f]{{32}}"
  _any=$_hits
  grep_each environ "-z -x -F $_live" ""
  _spared=" $_hits "
  _hits=
  for _p in $_any; do
    case $_spared in *" $_p "*) ;; *) _hits="$_hits $_p" ;; esac
  done
}}
unknown_lease() {{
  # Whether a lease runs that the orphan kill was not told of: a server that started after
  # its caller listed the live ones, and whose shells must not be taken for orphans.
  _v=$vanished
  grep_each environ "-z -x -E" "{LEASE_VARIABLE}=[0-9a-f]{{32}}"
  _leases=$_hits
  grep_each environ "-z -x -F $_known" ""
  vanished=$_v
  for _p in $_leases; do
    case " $_hits " in *" $_p "*) ;; *) return 0 ;; esac
  done
  return 1
}}
scan() {{
  vanished=
  tagged
  for _p in $_hits; do consider "$_p" tagged; done
  [ -n "$victims" ] || return 0
  alternatives "$victims"
  _re="($_alt)"
  alternatives "$sids"
  [ -n "$_alt" ] && _re="($_re|-?[0-9]+ -?[0-9]+ ($_alt))"
  grep_each stat -E "\) . $_re "
  for _p in $_hits; do consider "$_p" check; done
}}
signal() {{
  for _g in $groups; do kill -s "$1" -- "-$_g" 2>/dev/null; done
  [ -n "$stopped" ] && kill -s "$1" $stopped 2>/dev/null
}}
ids_of() {{
  _pgid= _sid=
  stat_of "$1" || return 1
  set -- $_st
  _pgid=$3 _sid=$4
}}
freeze_all() {{
  held=
  for _f in /proc/[0-9]*/stat; do
    _p=${{_f#/proc/}}; _p=${{_p%/stat}}
    stat_of "$_p" && case $_st in T*|t*) held="$held $_p" ;; esac
  done
  kill -s STOP -1 2>/dev/null
  frozen=1
}}
thaw_others() {{
  _others=
  for _f in /proc/[0-9]*/stat; do
    _p=${{_f#/proc/}}; _p=${{_p%/stat}}
    case " $stopped $held " in *" $_p "*) ;; *) _others="$_others $_p" ;; esac
  done
  [ -n "$_others" ] && kill -s CONT $_others 2>/dev/null
}}
finish() {{
  signal KILL
  [ -n "$frozen" ] && thaw_others
  return "$1"
}}
kill_session() {{
  _tags= _live= _known=
  for _t in "$@"; do _tags="$_tags -e {SESSION_TAG_VARIABLE}=$_t"; done
  kill_rounds
}}
kill_orphans() {{
  _tags= _live= _known=
  for _t in "$@"; do
    _live="$_live -e {SERVER_VARIABLE}=$_t"
    _known="$_known -e {LEASE_VARIABLE}=$_t"
  done
  kill_rounds
}}
kill_rounds() {{
  ids_of 1; init_pgid=$_pgid init_sid=$_sid
  ids_of "$me"; my_pgid=$_pgid my_sid=$_sid
  uptime_s; _deadline=$((_up + {KILL_TIME_LIMIT}))
  stopped= victims= sids= groups= frozen= held= _vanishing=0
  while :; do
    _before=$groups
    scan
    if [ -n "$_live" ] && unknown_lease; then
      # A server the caller did not know of is alive: what this round found may be its
      # shells. What earlier rounds stopped is killed; the caller asks again.
      groups=$_before
      finish {ORPHANS_UNSURE}
      return {ORPHANS_UNSURE}
    fi
    if [ -n "$vanished" ] && [ -z "$frozen" ]; then
      # A process vanished between a listing and its reading: it may have forked a child the
      # listing missed, so this round proves nothing and another looks again. When rounds keep
      # seeing that (a forking loop outruns them), everything this kill may signal is frozen
      # at once (the kernel's `kill -1` reaches children forked meanwhile too), looked at in
      # peace, and all but the victims continued afterwards. (Processes a previous kill ended
      # vanish too while init reaps them: one more round, not a freeze.)
      _vanishing=$((_vanishing + 1))
      if [ "$_vanishing" -ge 3 ]; then
        freeze_all
        continue
      fi
    else
      _vanishing=0
    fi
    _new=
    for _v in $victims; do
      case " $stopped " in *" $_v "*) ;; *) _new="$_new $_v" ;; esac
    done
    if [ -z "$_new" ] && [ "$_vanishing" = 0 ]; then
      finish 0
      return 0
    fi
    if [ -n "$_new" ]; then
      stopped="$stopped $_new"
      signal STOP
    fi
    uptime_s
    if [ "$_up" -ge "$_deadline" ]; then
      finish 1
      return 1
    fi
  done
}}
kill_instance() {{
  stopped= groups=
  kill -s STOP -1 2>/dev/null
  for _f in /proc/[0-9]*/stat; do
    _p=${{_f#/proc/}}; _p=${{_p%/stat}}
    [ "$_p" = "$me" ] && continue
    stat_of "$_p" || continue
    set -- $_st
    [ "$2" = "$me" ] && continue
    [ "${{20}}" -gt "$_mark" ] 2>/dev/null && stopped="$stopped $_p"
  done
  signal KILL
  kill -s CONT -1 2>/dev/null
  return 0
}}
request() {{
  _id=$1 _verb=$2
  shift 2
  case $_id in ""|*[!0-9]*) return ;; esac
  [ "${{#_id}}" -le 9 ] || return
  case $_verb in
    session|orphans)
      # Tags, or the ids of the live servers: 32 hex digits each.
      [ $# -ge 1 ] || return
      for _t in "$@"; do
        case $_t in *[!0-9a-f]*) return ;; esac
        [ "${{#_t}}" -eq 32 ] || return
      done
      "kill_$_verb" "$@"
      echo "$_id done $?" ;;
    instance)
      [ $# -eq 1 ] || return
      case $1 in ""|*[!0-9]*) return ;; esac
      [ "${{#1}}" -le 18 ] || return
      _mark=$1
      kill_instance
      echo "$_id done $?" ;;
    mark)
      [ $# -eq 0 ] || return
      stat_of "$me" || return
      set -- $_st
      echo "$_id done 0 ${{20}}" ;;
  esac
}}
me=$$
"""

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

#: The reaper's command line; short, because ``ps`` (and ``docker top``) cut long ones.
REAPER_COMMAND = ["/bin/sh", "-c", f'eval "${REAPER_SCRIPT_VARIABLE}"']


def lease_command(server_id: str) -> list[str]:
    """The command line of a reaper that is also ``server_id``'s lease."""
    return [*REAPER_COMMAND, LEASE_NAME, server_id]


def lease_of(arguments: t.Sequence[str]) -> str | None:
    """The server id of a lease exec with these arguments (the engine's record of an exec's
    command line after its program); ``None`` if it is no lease."""
    if list(arguments[:-2]) == REAPER_COMMAND[1:] and arguments[-2:-1] == [LEASE_NAME]:
        server_id = arguments[-1]
        return server_id if _TAG.fullmatch(server_id) else None
    return None


# Tags are the server's own random hex tokens (``secrets.token_hex(16)``).
_TAG = re.compile(r"[0-9a-f]{32}")
_ANSWER = re.compile(rb"(\d{1,9}) done (\d{1,3})(?: (\d{1,18}))?")
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
        if self.broken:
            raise ReaperGone
        words = request_words(verb, arguments)
        async with self._turn:
            if self.broken:
                raise ReaperGone
            request_id = next(self._ids) % 10**9
            try:
                return await asyncio.wait_for(self._exchange(request_id, words), timeout)
            except (asyncio.TimeoutError, OSError) as error:
                self.close()
                raise ReaperGone from error

    async def _exchange(self, request_id: int, words: list[str]) -> Answer:
        await self._stream.write(f"{request_id} {' '.join(words)}\n".encode())
        while True:
            # Lines that answer nothing the server asked (someone in the container wrote to
            # the reaper's stdin) are skipped.
            answer = parse_answer(await self._read_line(), request_id)
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
