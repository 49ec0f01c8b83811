"""Files into and out of a container, as the tool type's user, through an exec.

The Engine's archive API (``get_archive``, ``put_archive``) reads and writes as root whatever
the tool's user may do, so it is not used: the transfer runs the scripts of ``transfer.py`` in
an exec of the tool's user, and the file's bytes flow through that exec's stream (stdin up,
stdout down), a piece at a time, with the stream's own bounded buffer: no file is ever held
whole in the server's memory.

The stream is Docker's multiplexed (non-TTY) framing: an 8-byte header (the stream: 1 stdout,
2 stderr; three zero bytes; the payload's size, big-endian), then the payload.
"""

from __future__ import annotations

import asyncio
import contextlib
import typing as t

import docker.errors

from ..tooltypes import ToolType
from .base import RuntimeUnavailable
from .launch import SESSION_TAG_VARIABLE
from .stream import ShellStream
from .transfer import (
    CHUNK_SIZE,
    DOWNLOAD_SCRIPT,
    UPLOAD_SCRIPT,
    FileDownload,
    FileUpload,
    TransferRefused,
    refusal_for,
    too_large,
)

if t.TYPE_CHECKING:
    import logging


class EngineRuntime(t.Protocol):
    """What file transfers need of an engine's runtime (``docker_engine.py``, which imports
    this module: naming it here would be an import loop)."""

    @property
    def log(self) -> logging.Logger | logging.LoggerAdapter[t.Any]: ...

    async def call(self, method: str, *args: t.Any, **kwargs: t.Any) -> t.Any: ...

    async def attach(self, exec_id: str, tty: bool) -> ShellStream: ...

    def api(self) -> t.Any: ...

    async def run(self, func: t.Callable[..., t.Any], *args: t.Any, **kwargs: t.Any) -> t.Any: ...


class DockerInstance(t.Protocol):
    """What file transfers need of a Docker instance: its container."""

    @property
    def container_id(self) -> str: ...


STDOUT, STDERR = 1, 2
#: The largest frame accepted (the engine sends at most 32 KiB of a stream at a time).
MAX_FRAME = 1 << 20
#: How long the end of a transfer's exec is waited for, once its stream ended.
EXIT_WAIT = 10.0
#: The environment of a transfer's exec: the C locale, so that ``ls`` prints what is parsed.
ENVIRONMENT = {"LC_ALL": "C"}
#: The most stderr kept (for the log) of a transfer's exec.
STDERR_KEPT = 4096

#: Prints the working directory of the shell tagged ``$1``: the session leader (the exec's
#: process) among the processes that carry the tag.
CWD_SCRIPT = rf"""
for e in /proc/[0-9]*/environ; do
  pid=${{e#/proc/}}; pid=${{pid%/environ}}
  tr '\0' '\n' < "$e" 2>/dev/null | grep -qx "{SESSION_TAG_VARIABLE}=$1" || continue
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
  set -- "$1" ${{stat##*) }}
  [ "$5" = "$pid" ] || continue
  cd -P "/proc/$pid/cwd" 2>/dev/null && pwd -P && exit 0
done
exit 1
"""


class _Exec:
    """A transfer's exec: its demultiplexed output, its input, and its exit code."""

    def __init__(self, runtime: EngineRuntime, exec_id: str, stream: ShellStream) -> None:
        self._runtime = runtime
        self.exec_id = exec_id
        self.stream = stream
        self._incoming = bytearray()
        #: Standard output received and not yet taken.
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.ended = False
        self._closed = False

    async def _exactly(self, size: int) -> bytes | None:
        while len(self._incoming) < size:
            data = await self.stream.read(CHUNK_SIZE)
            if not data:
                return None
            self._incoming += data
        piece = bytes(self._incoming[:size])
        del self._incoming[:size]
        return piece

    async def more(self) -> bool:
        """Read the next frame of standard output (stderr is kept aside); ``False`` at the
        end of the stream."""
        while not self.ended:
            header = await self._exactly(8)
            size = int.from_bytes(header[4:8], "big") if header is not None else 0
            payload = (
                await self._exactly(size) if header is not None and size <= MAX_FRAME else None
            )
            if header is None or payload is None:
                self.ended = True
                break
            if header[0] == STDOUT:
                self.stdout += payload
                return True
            if header[0] == STDERR and len(self.stderr) < STDERR_KEPT:
                self.stderr += payload[: STDERR_KEPT - len(self.stderr)]
        return False

    async def line(self, limit: int = 64) -> bytes | None:
        """The first line of standard output, without its end; ``None`` if the stream ends
        (or ``limit`` bytes come) first."""
        while b"\n" not in self.stdout:
            if len(self.stdout) > limit or not await self.more():
                return None
        line, _, rest = bytes(self.stdout).partition(b"\n")
        self.stdout[:] = rest
        return line

    async def exit_code(self) -> int | None:
        """The exec's exit code once it ended (``None`` if the engine cannot say)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + EXIT_WAIT
        pause = 0.005
        while True:
            try:
                info = await self._runtime.call("exec_inspect", self.exec_id)
            except (docker.errors.NotFound, RuntimeUnavailable):
                return None
            if not info.get("Running"):
                code = info.get("ExitCode")
                return code if isinstance(code, int) else None
            if loop.time() > deadline:
                return None
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.1)

    def log_failure(self, what: str, code: int | None) -> None:
        if self.stderr or code:
            self._runtime.log.info(
                "File %s in a tool instance ended with exit code %s: %s",
                what,
                code,
                bytes(self.stderr).decode("utf-8", "replace").strip(),
            )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.stream.close()


async def _start(
    runtime: EngineRuntime,
    *,
    instance: DockerInstance,
    tool: ToolType,
    script: str,
    arguments: list[str],
    stdin: bool,
) -> _Exec:
    """Run ``script`` with ``arguments`` in the container as the tool's user."""
    try:
        created = await runtime.call(
            "exec_create",
            instance.container_id,
            ["/bin/sh", "-c", script, "jupyter-tool-terminal-files", *arguments],
            stdin=stdin,
            tty=False,
            privileged=False,
            user=tool.user or "",
            environment=ENVIRONMENT,
        )
        stream = await runtime.attach(created["Id"], tty=False)
    except docker.errors.NotFound as error:
        msg = "the tool instance is gone"
        raise RuntimeUnavailable(msg) from error
    return _Exec(runtime, created["Id"], stream)


class DockerDownload(FileDownload):
    """A file read by ``cat`` in the container, its bytes taken off the exec's stdout."""

    def __init__(self, running: _Exec, path: str, size: int) -> None:
        self._exec = running
        self.path = path
        self.size = size
        self._sent = 0

    async def read(self) -> bytes:
        if self._sent >= self.size:
            self.close()
            return b""
        if not self._exec.stdout and not await self._exec.more():
            code = await self._exec.exit_code()
            self._exec.log_failure(f"download of {self.path}", code)
            self.close()
            msg = f"{self.path} ended after {self._sent} of {self.size} bytes"
            raise OSError(msg)
        # Never more than the size announced: a file that grew is cut where it was measured.
        piece = bytes(self._exec.stdout[: min(CHUNK_SIZE, self.size - self._sent)])
        del self._exec.stdout[: len(piece)]
        self._sent += len(piece)
        return piece

    def close(self) -> None:
        # Closing the stream ends ``cat`` (its output has nowhere to go).
        self._exec.close()


async def open_download(
    runtime: EngineRuntime, instance: DockerInstance, tool: ToolType, path: str, max_bytes: int
) -> DockerDownload:
    """Check ``path`` as the tool's user and start reading it."""
    running = await _start(
        runtime,
        instance=instance,
        tool=tool,
        script=DOWNLOAD_SCRIPT,
        arguments=[path, str(max_bytes)],
        stdin=False,
    )
    try:
        size = await _announced_size(running, path, tool, max_bytes)
    except BaseException:
        running.close()
        raise
    return DockerDownload(running, path, size)


async def _announced_size(running: _Exec, path: str, tool: ToolType, max_bytes: int) -> int:
    """The size the download script announces, or the refusal its exit code means."""
    line = await running.line()
    size = int(line) if line is not None and line.isdigit() else None
    if size is not None and size > max_bytes:
        raise TransferRefused(413, too_large(path, size, max_bytes))
    if size is None:
        code = await running.exit_code()
        running.log_failure(f"download of {path}", code)
        raise refusal_for(code, path=path, user=tool.user or "", writing=False)
    return size


class DockerUpload(FileUpload):
    """A file written by ``head -c`` in the container from the exec's stdin."""

    def __init__(self, running: _Exec, path: str, size: int, user: str) -> None:
        self._exec = running
        self.path = path
        self.size = size
        self._user = user

    async def write(self, data: bytes) -> None:
        await self._exec.stream.write(data)

    async def finish(self) -> None:
        try:
            while await self._exec.more():
                pass
            code = await self._exec.exit_code()
        finally:
            self._exec.close()
        if code != 0:
            self._exec.log_failure(f"upload to {self.path}", code)
            raise refusal_for(code, path=self.path, user=self._user, writing=True)

    def abort(self) -> None:
        # The engine closes the exec's stdin with its stream: `head` ends short and the
        # script removes the partial file.
        self._exec.close()


async def open_upload(
    runtime: EngineRuntime,
    *,
    instance: DockerInstance,
    tool: ToolType,
    path: str,
    size: int,
    overwrite: bool,
) -> DockerUpload:
    """Check ``path`` as the tool's user; once it may be written, take its bytes."""
    running = await _start(
        runtime,
        instance=instance,
        tool=tool,
        script=UPLOAD_SCRIPT,
        arguments=[path, "true" if overwrite else "false", str(size)],
        stdin=True,
    )
    try:
        ready = await running.line() == b"ready"
        code = None if ready else await running.exit_code()
    except BaseException:
        running.close()
        raise
    if not ready:
        running.close()
        running.log_failure(f"upload to {path}", code)
        raise refusal_for(code, path=path, user=tool.user or "", writing=True)
    return DockerUpload(running, path, size, tool.user or "")


async def working_directory(
    runtime: EngineRuntime, container_id: str, user: str, tag: str
) -> str | None:
    """The current directory of the shell tagged ``tag`` (``None`` if it cannot be found)."""

    def run() -> bytes:
        api = runtime.api()
        created = api.exec_create(
            container_id,
            ["/bin/sh", "-c", CWD_SCRIPT, "jupyter-tool-terminal-cwd", tag],
            user=user,
            environment=ENVIRONMENT,
            stdin=False,
            tty=False,
            stderr=False,
        )
        output: bytes = api.exec_start(created["Id"])
        return output

    with contextlib.suppress(docker.errors.DockerException, OSError):
        # The script prints the directory only once it found it.
        output: bytes = await runtime.run(run)
        directory = output.decode("utf-8", "surrogateescape").strip()
        if directory.startswith("/") and "\n" not in directory:
            return directory
    return None
