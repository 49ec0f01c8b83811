"""The local runtime: tool instances are working directories on this machine.

A local instance is declared in ``ToolTerminalApp.local_instances`` (its id, its tool type, its
root directory) and belongs to the server's owner. Its shells are PTYs of this machine, spawned
with ``ptyprocess`` and run as the server's own user: a local instance is a working directory,
not an isolation boundary.

The PTY's file descriptor is read and written by the event loop, and the shell's end is seen
through a pidfd: a session costs no thread and no process beyond the shell itself. Output is
read ahead into a buffer of at most ``READ_AHEAD`` bytes (what a socket's kernel buffer gives
the Docker runtime, and a PTY's 4 KiB does not); once that is full the PTY is no longer
watched, so output a slow client has not taken stays in the kernel and stops the shell.

``ptyprocess.PtyProcess`` is used directly rather than terminado's ``PtyWithClients``: the
session already does what terminado's class adds (clients, a read buffer, broadcasting without
backpressure), and terminado's end signals only the shell's process group, which misses
children that left it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fnmatch
import os
import pwd
import secrets
import shutil
import signal
import typing as t
import warnings

from jupyter_core.paths import jupyter_runtime_dir
from ptyprocess import PtyProcess
from traitlets import Dict, Float, List, Unicode, default
from traitlets import Instance as InstanceOf

from ..tooltypes import ToolType
from . import local_files, procfs
from .base import Instance, RuntimeUnavailable, ShellChannel, ToolRuntime, valid_instance_id
from .launch import SERVER_VARIABLE, SESSION_TAG_VARIABLE, shell_command, shell_environment
from .leases import ServerLease
from .shells import missing_shell_text
from .transfer import FileDownload, FileUpload

#: The keys of one entry of ``ToolTerminalApp.local_instances``.
INSTANCE_KEYS = ("tool", "root")
#: How long an ending shell's exit status is waited for after its processes were killed.
REAP_TIMEOUT = 5.0
#: The most output taken off a PTY ahead of the session's reads: several session reads' worth,
#: so that a flood keeps flowing while the session gathers a frame (with one read's worth the
#: shell stopped for every frame interval, which capped a flood at 64 KiB per 2 ms).
READ_AHEAD = 256 * 1024
#: The most one read of the PTY asks for (a PTY gives about 4 KiB at a time anyway): ``os.read``
#: allocates the size it is asked for first, and allocating 256 KiB costs more than the read
#: itself (about 16 µs against 1 µs here), paid for every 4 KiB of a flood.
READ_SIZE = 64 * 1024


@dataclasses.dataclass(frozen=True)
class LocalInstance(Instance):
    """A tool instance that is a working directory on this machine."""

    runtime: t.ClassVar[str] = "local"

    #: The instance's root directory: absolute, ``~`` expanded, symbolic links resolved.
    root: str = ""

    @classmethod
    def declared(
        cls, instance_id: str, entry: t.Any, *, owner: str, tool_types: t.Collection[str]
    ) -> LocalInstance:
        """The instance one entry of ``ToolTerminalApp.local_instances`` declares, checked:
        :class:`RuntimeUnavailable` names it and what is wrong."""
        where = f"local instance {instance_id!r}"
        if not isinstance(entry, t.Mapping) or set(entry) != set(INSTANCE_KEYS):
            msg = f"{where}: must be a mapping with exactly the keys 'tool' and 'root'"
            raise RuntimeUnavailable(msg)
        # (The ENGINE/ form is the Docker runtime's, with several engines.)
        if not valid_instance_id(instance_id) or "/" in instance_id:
            msg = f"{where}: an id is 1-128 letters, digits, '_', '.' or '-'"
            raise RuntimeUnavailable(msg)
        tool, root = entry["tool"], entry["root"]
        if tool not in tool_types:
            msg = f"{where}: unknown tool type {tool!r}"
            raise RuntimeUnavailable(msg)
        if not isinstance(root, str) or not root or "\x00" in root:
            msg = f"{where}: 'root' must be a path, not {root!r}"
            raise RuntimeUnavailable(msg)
        return cls(
            id=instance_id,
            owner=owner,
            tool=tool,
            status="running",
            root=os.path.abspath(os.path.expanduser(root)),
        )


class _LocalShellChannel(ShellChannel):
    """A shell on a PTY of this machine, driven by the event loop."""

    def __init__(
        self,
        runtime: LocalRuntime,
        process: PtyProcess,
        processes: procfs.ShellProcesses,
    ) -> None:
        self._runtime = runtime
        self._process = process
        self._processes = processes
        self._fd: int = process.fd
        os.set_blocking(self._fd, False)
        self._loop = asyncio.get_running_loop()
        self._exited: asyncio.Future[int | None] = self._loop.create_future()
        self._waiters: set[asyncio.Future[None]] = set()
        self._write_lock = asyncio.Lock()
        self._terminated = False
        # Output taken off the PTY ahead of the session's reads, and whether the PTY closed.
        self._buffer = bytearray()
        self._ended = False
        # Whether the PTY is watched for output, and the read waiting for it.
        self._watching = False
        self._read_waiter: asyncio.Future[None] | None = None
        self._pidfd = -1
        try:
            self._pidfd = os.pidfd_open(process.pid)
        except (AttributeError, OSError):
            # Kernels before 5.3: look for the end now and then instead.
            self._loop.call_later(0.2, self._poll_exit)
        else:
            self._loop.add_reader(self._pidfd, self._reap)

    async def foreground_program(self) -> str | None:
        """The foreground process group of the PTY (Linux answers it on the master side): the
        shell leads its own group, any other group is a program the shell started."""
        try:
            group = os.tcgetpgrp(self._fd)
        except OSError:
            return None
        if group in (self._process.pid, 0):
            return None
        try:
            # (a read of /proc never waits on a device)
            with open(f"/proc/{group}/comm", encoding="utf-8", errors="replace") as comm:  # noqa: ASYNC230
                return comm.read().strip() or f"process {group}"
        except OSError:
            return f"process {group}"

    # -- the shell's end ----------------------------------------------------------------------

    def _reap(self) -> bool:
        """Collect the shell's exit status if it ended; whether it has."""
        try:
            pid, status = os.waitpid(self._process.pid, os.WNOHANG)
        except ChildProcessError:
            # Someone else collected it (a handler of SIGCHLD): ended, status unknown.
            pid, status = self._process.pid, -1
        if pid == 0:
            return False
        if self._pidfd >= 0:
            self._loop.remove_reader(self._pidfd)
        code = None if status == -1 else os.waitstatus_to_exitcode(status)
        if code is not None and code < 0:
            code = 128 - code  # killed by a signal: the shell's own convention
        if not self._exited.done():
            self._exited.set_result(code)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        return True

    def _poll_exit(self) -> None:
        if not self._reap():
            self._loop.call_later(0.2, self._poll_exit)

    def _watch(self) -> None:
        if not self._watching and not self._terminated:
            self._watching = True
            self._loop.add_reader(self._fd, self._readable)

    def _unwatch(self) -> None:
        if self._watching:
            self._watching = False
            self._loop.remove_reader(self._fd)

    def _readable(self) -> None:
        """Take the PTY's output into the read-ahead buffer, up to ``READ_AHEAD`` bytes.

        A PTY holds only about 4 KiB in the kernel; without a buffer of the size a socket
        has, a shell flooding output would stall at every frame the session sends. Once the
        buffer is full the PTY is no longer watched: a client that is behind leaves the rest
        in the kernel, and the shell blocks there (backpressure).
        """
        try:
            data = os.read(self._fd, min(READ_SIZE, READ_AHEAD - len(self._buffer)))
        except BlockingIOError:
            return
        except OSError:
            data = b""  # EIO: every process let go of the terminal
        if not data:
            self._ended = True
            self._unwatch()
        else:
            self._buffer += data
            if len(self._buffer) >= READ_AHEAD:
                self._unwatch()
        waiter = self._read_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _writable(self) -> None:
        """Wait until the PTY takes input again, or the shell ended."""
        waiter: asyncio.Future[None] = self._loop.create_future()

        def wake() -> None:
            if not waiter.done():
                waiter.set_result(None)

        self._waiters.add(waiter)
        self._loop.add_writer(self._fd, wake)
        try:
            await waiter
        finally:
            self._loop.remove_writer(self._fd)
            self._waiters.discard(waiter)

    # -- the terminal -------------------------------------------------------------------------

    async def read(self, size: int) -> bytes:
        """Read what the terminal has; ``b""`` once the shell ended and its output is read."""
        while True:
            if self._buffer:
                data = bytes(self._buffer[:size])
                del self._buffer[:size]
                self.spoke = True
                self._watch()  # there is room in the buffer again
                return data
            if self._ended or self._terminated:
                return b""
            if self._exited.done():
                # The shell is gone: what is still in the PTY, then the end.
                self._unwatch()
                self._readable()
                if not self._buffer:
                    return b""
                continue
            waiter = self._read_waiter = self._loop.create_future()
            self._waiters.add(waiter)
            self._watch()
            try:
                await waiter
            finally:
                self._read_waiter = None
                self._waiters.discard(waiter)

    def hold_output(self, held: bool) -> None:
        """Nothing to do: output that comes while the session holds it goes to the bounded
        read-ahead buffer (see :meth:`_readable`), and is read in one piece afterwards."""
        del held

    def write_nowait(self, data: bytes) -> int:
        if self._write_lock.locked():
            return 0
        if self._terminated or self._exited.done():
            msg = "the shell has ended"
            raise ConnectionError(msg)
        try:
            return os.write(self._fd, data)
        except BlockingIOError:
            return 0

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        async with self._write_lock:
            while view:
                if self._terminated or self._exited.done():
                    msg = "the shell has ended"
                    raise ConnectionError(msg)
                try:
                    written = os.write(self._fd, view)
                except BlockingIOError:
                    # The shell is not reading its input: wait, as a full socket would.
                    await self._writable()
                    continue
                view = view[written:]

    async def resize(self, rows: int, cols: int) -> None:
        if not self._terminated:
            self._process.setwinsize(rows, cols)

    async def working_directory(self) -> str | None:
        try:
            return os.readlink(f"/proc/{self._process.pid}/cwd")
        except OSError:
            return None

    async def exit_code(self) -> int | None:
        # The terminal can close a moment before the shell's end is seen.
        try:
            return await asyncio.wait_for(asyncio.shield(self._exited), REAP_TIMEOUT)
        except asyncio.TimeoutError:
            return None

    async def terminate(self) -> None:
        if self._terminated:
            return
        self._terminated = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        killed = await asyncio.to_thread(procfs.kill, self._processes, self._runtime.kill_timeout)
        if not killed:
            self._runtime.log.warning("A local tool terminal's processes survived every kill")
        # The shell is this server's child: collect it, so that no zombie is left.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._exited), REAP_TIMEOUT)
        self._close()

    def _close(self) -> None:
        self._unwatch()
        if self._pidfd >= 0:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1
        # Closing through ptyprocess would sleep on the event loop and signal the shell again;
        # its descriptor is closed here and the object marked closed instead.
        with contextlib.suppress(OSError):
            self._process.fileobj.close()
        self._process.closed = True


#: A terminal's size (rows, cols) until a client asks for another: ptyprocess's default.
DEFAULT_SIZE = (24, 80)

#: Variables that carry a tool type's prompt past the login shell's profile files, which set
#: their own (Debian's ``/etc/profile`` sets ``PS1='# '`` for sh and sources
#: ``/etc/bash.bashrc`` for bash; a user's ``~/.bashrc`` usually sets one too). An interactive
#: POSIX shell (dash, BusyBox ash) reads the file named by ``ENV`` after the profile files; bash
#: does not, but runs ``PROMPT_COMMAND`` before its first prompt, after all of them.
PROMPT_VARIABLE = "JUPYTER_TOOL_TERMINAL_PS1"
USER_ENV_VARIABLE = "JUPYTER_TOOL_TERMINAL_USER_ENV"
PROMPT_COMMAND = f"PS1=${PROMPT_VARIABLE}; unset PROMPT_COMMAND {PROMPT_VARIABLE}"
#: The ``ENV`` file: the user's own ``ENV`` file first (it is read instead of it), then the
#: tool type's prompt.
PROMPT_FILE = f"""# jupyter-tool-terminal: the tool type's prompt, over what the profile files set
if [ -n "${{{USER_ENV_VARIABLE}-}}" ]; then . "${USER_ENV_VARIABLE}"; fi
unset {USER_ENV_VARIABLE}
if [ -n "${{{PROMPT_VARIABLE}+set}}" ]; then PS1=${PROMPT_VARIABLE}; fi
unset PROMPT_COMMAND {PROMPT_VARIABLE}
"""


class LocalRuntime(ToolRuntime):
    """Tool instances are working directories on this machine; shells are local PTYs run as
    the server's user. Instances come from ``ToolTerminalApp.local_instances``."""

    name = "local"

    inherited_variables = List(
        Unicode(),
        ["PATH", "LANG", "LANGUAGE", "LC_*", "TZ"],
        help="""Names (shell-style patterns) of the server's environment variables that local
        shells inherit. Nothing else of the server's environment reaches them: HOME, USER,
        LOGNAME and SHELL are set from the password database and the tool type, and the
        tool type's `env` is added on top.""",
    ).tag(config=True)

    kill_timeout = Float(
        5,
        min=0.1,
        help="""Seconds an ending terminal may spend finding and killing the processes its
        shell started (in rounds, until a round finds none); a warning is logged if some
        survive.""",
    ).tag(config=True)

    lease_dir = Unicode(
        help="""Directory where each server of this user holds a lock file for its whole life
        (default: `jupyter-tool-terminal` in Jupyter's runtime directory). At start-up a server
        kills what the local shells of servers that died (SIGKILL, a crash) left running:
        servers whose file is no longer locked. Servers that should reclaim each other's
        leftovers must share it.""",
    ).tag(config=True)

    @default("lease_dir")
    def _default_lease_dir(self) -> str:
        return os.path.join(jupyter_runtime_dir(), "jupyter-tool-terminal")

    #: The instances, as ``ToolTerminalApp.local_instances`` declares them (given at creation).
    instances = Dict(help="{id: {'tool': name, 'root': path}}")
    #: The user name every local instance belongs to (the server's owner).
    owner = Unicode()
    #: The validated tool types, to check the instances against.
    tool_types = Dict(key_trait=Unicode(), value_trait=InstanceOf(ToolType))

    def __init__(self, **kwargs: t.Any) -> None:
        super().__init__(**kwargs)
        self._lease = ServerLease(self.lease_dir, secrets.token_hex(16))
        self._declared: dict[str, LocalInstance] | None = None

    def check_available(self) -> None:
        """Validate every instance and create its root (the error names the instance); then
        take this server's lease and kill what servers that died left running."""
        for instance in self._instances().values():
            tool = self.tool_types[instance.tool]
            self._check_user(instance, tool)
            self._working_directory(instance, tool)
        try:
            self._lease.acquire()
            self._lease.reclaim(self._kill_server)
        except OSError as error:
            # Shells are then not marked as this server's; nothing is reclaimed.
            self.log.warning("Cannot keep a lease in %s: %s", self.lease_dir, error)

    def _kill_server(self, server_id: str) -> None:
        """Kill every process of this user that carries a dead server's id (and what they
        started, as a shell's end does). Blocking."""
        # No session of its own: the dead server's shells' sessions are found by their tags.
        processes = procfs.ShellProcesses(
            session=0, tag=server_id, variable=SERVER_VARIABLE, uid=os.getuid(), since=0
        )
        left = len(procfs.find(processes).processes)
        if not left:
            return
        if procfs.kill(processes, self.kill_timeout):
            self.log.info("Killed %d process(es) a stopped server left in local terminals", left)
        else:
            self.log.warning("Processes of a stopped server survived every kill")

    def close(self) -> None:
        self._lease.close()

    def _instances(self) -> dict[str, LocalInstance]:
        """The declared instances, checked the first time they are asked for (at start-up:
        :meth:`check_available`); what is wrong raises :class:`RuntimeUnavailable`."""
        if self._declared is None:
            self._declared = {
                instance_id: LocalInstance.declared(
                    instance_id, entry, owner=self.owner, tool_types=self.tool_types
                )
                for instance_id, entry in self.instances.items()
            }
        return self._declared

    @staticmethod
    def _check_user(instance: LocalInstance, tool: ToolType) -> None:
        me = pwd.getpwuid(os.getuid()).pw_name
        if tool.user is not None and tool.user != me:
            msg = (
                f"local instance {instance.id!r}: tool type {tool.name!r} asks for user "
                f"{tool.user!r}, but local shells run as the server's user {me!r}"
            )
            raise RuntimeUnavailable(msg)

    @staticmethod
    def _working_directory(instance: LocalInstance, tool: ToolType) -> str:
        """The shell's working directory, created if missing; never outside the root.

        ``workdir`` is taken relative to the instance root (a tool type's ``/data`` is
        ``ROOT/data``), so one tool type serves containers and local instances alike. A path
        that leaves the root (``..``, or a symbolic link inside it pointing elsewhere) is
        refused.
        """
        where = f"local instance {instance.id!r}"
        try:
            os.makedirs(instance.root, exist_ok=True)
            root = os.path.realpath(instance.root)
            relative = (tool.workdir or "").lstrip("/")
            wanted = os.path.normpath(os.path.join(root, relative))
            if os.path.commonpath([root, wanted]) != root:
                msg = f"{where}: the working directory {tool.workdir!r} is outside its root"
                raise RuntimeUnavailable(msg)
            real = os.path.realpath(wanted)
            if os.path.commonpath([root, real]) != root:
                msg = f"{where}: the working directory {tool.workdir!r} leads outside its root"
                raise RuntimeUnavailable(msg)
            os.makedirs(real, exist_ok=True)
        except OSError as error:
            msg = f"{where}: cannot use its root {instance.root!r}: {error.strerror}"
            raise RuntimeUnavailable(msg) from error
        return real

    def _environment(self, tool: ToolType, tag: str) -> dict[str, str]:
        """The curated environment: an allow-list of the server's, the user, the tool's."""
        environment = {
            name: value
            for name, value in os.environ.items()
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in self.inherited_variables)
        }
        environment.setdefault("PATH", os.defpath)
        user = pwd.getpwuid(os.getuid())
        environment.update(
            HOME=user.pw_dir, USER=user.pw_name, LOGNAME=user.pw_name, SHELL=tool.shell[0]
        )
        server = self._lease.server_id if self._lease.held else None
        environment.update(
            shell_environment(tool, tag=tag, has_lang="LANG" in environment, server=server)
        )
        if "PS1" in tool.env:
            self._keep_tool_prompt(environment, tool.env["PS1"])
        return environment

    def _keep_tool_prompt(self, environment: dict[str, str], prompt: str) -> None:
        """Make the tool type's prompt win over the profile files' (see ``PROMPT_FILE``)."""
        try:
            path = self._prompt_file()
        except OSError as error:
            self.log.debug("No prompt file in %s: %s", self.lease_dir, error)
            return
        environment[PROMPT_VARIABLE] = prompt
        environment["PROMPT_COMMAND"] = PROMPT_COMMAND
        if "ENV" in environment:
            environment[USER_ENV_VARIABLE] = environment["ENV"]
        environment["ENV"] = path

    def _prompt_file(self) -> str:
        path = os.path.join(self.lease_dir, "prompt.sh")
        if not os.path.exists(path):
            os.makedirs(self.lease_dir, mode=0o700, exist_ok=True)
            staging = f"{path}.{secrets.token_hex(4)}"
            with open(staging, "w") as file:
                file.write(PROMPT_FILE)
            os.replace(staging, path)
        return path

    def shell_variables(self, instance: Instance, tool: ToolType) -> dict[str, str]:
        del instance
        environment = self._environment(tool, "")
        environment.pop(SESSION_TAG_VARIABLE, None)
        return environment

    async def list_instances(self, owner: str) -> list[Instance]:
        if owner != self.owner:
            return []
        return sorted(self._instances().values(), key=lambda instance: instance.id)

    async def get_instance(self, instance_id: str) -> LocalInstance | None:
        if not self.could_own(instance_id):
            return None
        return self._instances().get(instance_id)

    @staticmethod
    def _root(instance: Instance) -> str:
        if not isinstance(instance, LocalInstance):
            msg = f"not a local tool instance: {instance.id}"
            raise TypeError(msg)
        return os.path.realpath(instance.root)

    async def open_download(
        self, instance: Instance, tool: ToolType, path: str, max_bytes: int
    ) -> FileDownload:
        """Read a file of the instance's folder as the server's user (``local_files.py``)."""
        del tool
        return await asyncio.to_thread(
            local_files.open_download, self._root(instance), path, max_bytes
        )

    async def open_upload(
        self, instance: Instance, tool: ToolType, path: str, size: int, overwrite: bool
    ) -> FileUpload:
        """Write a file into the instance's folder as the server's user (``local_files.py``)."""
        del tool
        return await asyncio.to_thread(
            local_files.open_upload, self._root(instance), path, size, overwrite
        )

    async def start_shell(
        self, instance: Instance, tool: ToolType, size: tuple[int, int] | None = None
    ) -> ShellChannel:
        """Start the shell on a new PTY (of ``size``, when given) in the instance's working
        directory."""
        if not isinstance(instance, LocalInstance):
            msg = f"not a local tool instance: {instance.id}"
            raise TypeError(msg)
        self._check_user(instance, tool)
        cwd = self._working_directory(instance, tool)
        tag = secrets.token_hex(16)
        environment = self._environment(tool, tag)
        if tool.shells and tool.startup_command is None:
            # The first of the tool type's shells this machine has.
            found = [
                shell for shell in tool.shells if shutil.which(shell, path=environment["PATH"])
            ]
            if found:
                tool = dataclasses.replace(tool, shell=(found[0],), shells=())  # noqa: S604 - a field
        argv = shell_command(tool)
        program = shutil.which(argv[0], path=environment["PATH"])
        if program is None:
            raise RuntimeUnavailable(missing_shell_text(tool, instance.id))
        try:
            # Off the loop: the fork and the wait for the child's exec take milliseconds.
            process = await asyncio.to_thread(
                _spawn, [program, *argv[1:]], cwd, environment, size or DEFAULT_SIZE
            )
        except OSError as error:
            self.log.warning("Local shell for %s did not start: %s", instance.id, error)
            msg = f"local instance {instance.id!r}: the shell could not start"
            raise RuntimeUnavailable(msg) from error
        processes = procfs.ShellProcesses(
            session=process.pid,
            tag=tag,
            variable=SESSION_TAG_VARIABLE,
            uid=os.getuid(),
            since=procfs.start_time(process.pid),
        )
        return _LocalShellChannel(self, process, processes)


def _spawn(
    argv: list[str], cwd: str, environment: dict[str, str], size: tuple[int, int]
) -> PtyProcess:
    with warnings.catch_warnings():
        # Python 3.12+ warns about fork() in a threaded process; the child only sets up its
        # terminal and calls exec(), which is what ptyprocess (and terminado) always do.
        warnings.simplefilter("ignore", DeprecationWarning)
        return PtyProcess.spawn(
            argv, cwd=cwd, env=environment, dimensions=size, preexec_fn=_default_signals
        )


def _default_signals() -> None:
    """In the child, before exec: the signal state a login would give the shell.

    Ignored signals survive exec. Python ignores SIGPIPE and SIGXFSZ, and a server started with
    ``nohup`` or in the background by a script ignores SIGHUP, SIGINT or SIGQUIT: a shell that
    kept those would let every pipeline's writer outlive its reader ("yes: Broken pipe"), or
    could not interrupt a command with Ctrl-C. Every signal goes back to its default (handlers
    would be reset by exec anyway); the ones that cannot be changed are left as they are.
    """
    for number in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
