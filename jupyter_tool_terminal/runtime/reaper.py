"""Killing a shell's processes inside its container.

Docker has no call that signals an exec's processes, so the kill itself runs in the container:
either as a one-off exec per kill, or through a *reaper*, a root shell kept running in a busy
container that reads tags on its stdin and kills their processes. Each exec costs a round of
``runc`` (tens of milliseconds of CPU across dockerd, containerd and runc); when sessions come
and go in a container where others are typing, that work is what their echo waits behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import re

from docker.utils.socket import STDOUT

# A shell function that kills every process of the shells tagged with "$@": the processes that
# carry a tag in their environment, and every process in their terminal sessions (which catches
# children that cleared their environment). Processes are stopped before they are killed, in
# rounds, so a loop that forks cannot outrun it. The container's own init session is never
# touched, nor the shell running the function (a reaper has its own session).
# Each round is two `grep`s over /proc, not a shell loop over every process: a container with
# hundreds of sessions has thousands of processes, and sessions closing together wait for it.
# In /proc/PID/stat the session id is the 6th field, after "(comm)", which may itself contain
# ") ": the greedy `.*\)` ends at the last parenthesis, where the numeric fields begin.
# $VAR names the tag variable; it is set in the environment of the exec running this.
KILL_FUNCTION = r"""
sid_of() {
  _sid=
  { read -r _stat < "/proc/$1/stat"; } 2>/dev/null || return 1
  _stat=${_stat##*) }
  set -- $_stat
  _sid=$4
}
kill_tagged() {
  me=$$
  set -- $(for tag in "$@"; do printf -- "-e %s=%s " "$VAR" "$tag"; done)
  sid_of 1; init_sid=$_sid
  round=0
  victims=
  while [ "$round" -lt 6 ]; do
    round=$((round + 1))
    sids=
    for file in $(grep -l "$@" /proc/[0-9]*/environ 2>/dev/null); do
      pid=${file#/proc/}; pid=${pid%/environ}
      [ "$pid" = "$me" ] && continue
      sid_of "$pid" || continue
      case "$_sid" in 0|"$init_sid"|"$me") ;; *) sids="$sids|$_sid" ;; esac
      victims="$victims $pid"
    done
    if [ -n "$sids" ]; then
      for file in $(grep -l -E "^[0-9]+ \(.*\) . -?[0-9]+ -?[0-9]+ (${sids#|}) " \
          /proc/[0-9]*/stat 2>/dev/null); do
        pid=${file#/proc/}; pid=${pid%/stat}
        case "$pid" in "$me"|1) ;; *) victims="$victims $pid" ;; esac
      done
    fi
    [ -z "$victims" ] && return 0
    kill -STOP $victims 2>/dev/null
    kill -KILL $victims 2>/dev/null
    victims=
  done
  return 1
}
"""

#: The one-off kill: ``sh -c KILL_ONCE_SCRIPT name TAG...``; the exit status is the function's.
KILL_ONCE_SCRIPT = KILL_FUNCTION + 'kill_tagged "$@"\n'

#: The reaper: one line of space-separated tags in, one ``done STATUS`` line out, until stdin
#: closes (the server stopping or retiring it, or the engine dropping the connection).
REAPER_SCRIPT = (
    KILL_FUNCTION
    + r"""
while read -r tags; do
  kill_tagged $tags
  echo "done $?"
done
"""
)

#: The reaper's script travels in this environment variable, so that ``ps`` in the container
#: shows one short line for it instead of the whole script.
REAPER_SCRIPT_VARIABLE = "JUPYTER_TOOL_TERMINAL_REAPER"

#: The reaper's command line; short, because ``ps`` (and ``docker top``) cut long ones.
REAPER_COMMAND = ["/bin/sh", "-c", f'eval "${REAPER_SCRIPT_VARIABLE}"']

# Tags are the server's own random hex tokens; anything else never reaches a shell's `read`.
_TAG = re.compile(r"[0-9a-f]{8,64}")


class ReaperGone(Exception):
    """The reaper did not answer (its exec ended, or the engine dropped its connection)."""


class Reaper:
    """The server's end of a reaper exec: its hijacked, multiplexed (non-TTY) stream.

    One kill at a time: the caller serialises requests per container.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._stdout = b""
        self.broken = False

    async def kill(self, tags: list[str], timeout: float) -> int:
        """Kill the tagged shells' processes; return the kill's exit status (0: all gone).

        Raises :class:`ReaperGone` when the reaper cannot be used any more; it is closed then.
        """
        if self.broken:
            raise ReaperGone
        if not tags or not all(_TAG.fullmatch(tag) for tag in tags):
            msg = f"not kill tags: {tags!r}"
            raise ValueError(msg)
        try:
            line = await asyncio.wait_for(self._exchange(" ".join(tags)), timeout)
        except (asyncio.TimeoutError, OSError, asyncio.IncompleteReadError) as error:
            self.close()
            raise ReaperGone from error
        status = line.removeprefix(b"done ")
        if status == line or not status.isdigit():
            self.close()
            raise ReaperGone
        return int(status)

    async def _exchange(self, request: str) -> bytes:
        self._writer.write(request.encode() + b"\n")
        await self._writer.drain()
        return await self._read_line()

    async def _read_line(self) -> bytes:
        # The stream is Docker's multiplexed framing: an 8-byte header (stream, 0, 0, 0, size as
        # big-endian u32), then the payload. Only stdout carries answers. (The SDK's own frame
        # readers in docker.utils.socket block on a socket; this one reads the event loop's.)
        while b"\n" not in self._stdout:
            header = await self._reader.readexactly(8)
            payload = await self._reader.readexactly(int.from_bytes(header[4:8], "big"))
            if header[0] == STDOUT:
                self._stdout += payload
        line, _, self._stdout = self._stdout.partition(b"\n")
        return line

    def close(self) -> None:
        """Close the stream: the reaper reads end-of-file and exits."""
        self.broken = True
        with contextlib.suppress(Exception):
            self._writer.close()
