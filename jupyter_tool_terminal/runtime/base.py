"""The interface between sessions and the thing that runs shells (a runtime).

A session asks its runtime for tool instances and for a shell in one of them, and then talks
to that shell only through a :class:`ShellChannel`: read, write, resize, and terminate. How a
shell is started and how every process it started is found and killed again (tags, process
groups, a reaper in a container, retries around an engine's start race) is the runtime's
business, behind this interface.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import re
import typing as t

from traitlets.config import LoggingConfigurable

from ..tooltypes import ToolType

if t.TYPE_CHECKING:
    from .transfer import FileDownload, FileUpload

#: Instance ids are container names, which Docker restricts to this (with a length cap here);
#: every runtime's ids follow it, with the engine's name in front (``ENGINE/CONTAINER``) when the
#: Docker runtime drives several engines. Used with ``fullmatch`` (``$`` would match before a
#: newline).
INSTANCE_ID = re.compile(r"([a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}/)?[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}")


def valid_instance_id(value: t.Any) -> bool:
    """Whether ``value`` is a syntactically valid instance id (checked before any engine call)."""
    return isinstance(value, str) and INSTANCE_ID.fullmatch(value) is not None


class RuntimeUnavailable(RuntimeError):
    """The runtime cannot be reached or refused an operation.

    The message is safe to show to the user: it names no container id and no other user.
    """


class EngineUnreachable(RuntimeUnavailable):
    """The engine does not answer at all (as opposed to refusing an operation): work for it
    waits until it answers again."""


class InstanceMoved(RuntimeUnavailable):
    """A cluster engine ran the tool instance elsewhere (a new container): the terminal's
    processes are gone, and the same instance id opens a terminal there."""


@dataclasses.dataclass(frozen=True)
class Instance:
    """A tool instance as seen at one moment."""

    #: The id clients use (a container's name, a local instance's key).
    id: str
    #: The user name the instance belongs to.
    owner: str
    #: The name of its tool type.
    tool: str
    #: Its state in the runtime's own words (``running``, ``exited``, ``paused``...).
    status: str
    #: The name of the Docker engine it runs on, when the runtime drives several (else "").
    engine: str = ""
    #: The host name of the cluster node that runs it (Docker Swarm), else "".
    node: str = ""

    #: The name of the runtime that serves it, as the REST API shows it.
    runtime: t.ClassVar[str] = ""

    @property
    def running(self) -> bool:
        """Whether shells can be started in it now."""
        return self.status == "running"


class ShellChannel(abc.ABC):
    """A running shell's terminal: a byte stream in both directions, a size, and an end."""

    #: Bytes the terminal writes (EOF when the shell's terminal closes).
    reader: asyncio.StreamReader
    #: Whether the shell has written anything yet (then it has certainly started).
    spoke = False

    async def read(self, size: int) -> bytes:
        """Read up to ``size`` bytes of output; ``b""`` once the terminal is closed."""
        data = await self.reader.read(size)
        if data:
            self.spoke = True
        return data

    @abc.abstractmethod
    async def write(self, data: bytes) -> None:
        """Send keystrokes to the terminal, waiting while its input is full."""

    def write_nowait(self, data: bytes) -> int:
        """Send as much of ``data`` as the terminal takes without waiting; how many bytes.

        The fast path for keystrokes (a task per keystroke costs the echo a turn of the event
        loop). 0 if the channel cannot; :meth:`write` then sends the rest.
        """
        del data
        return 0

    @abc.abstractmethod
    async def resize(self, rows: int, cols: int) -> None:
        """Set the terminal size."""

    def hold_output(self, held: bool) -> None:
        """Stop (``True``) or resume (``False``) taking output off the terminal's connection.

        Output that arrives while held waits in the kernel and is then read in one piece,
        instead of one wake-up of the server per piece the shell writes. Optional: channels
        that cannot hold ignore it.
        """
        del held  # nothing to hold by default

    def take_buffered(self) -> bytes:
        """Take the output already read off the terminal's connection and not yet by
        :meth:`read` (a hand-over moves it to the screen before the connection moves)."""
        return b""

    async def foreground_program(self) -> str | None:
        """The name of the program that holds the terminal's foreground, when that is not the
        shell itself (a program there reads what is typed); ``None`` when the shell holds it,
        or when the runtime cannot tell at all. A runtime that can tell but fails to this time
        raises :class:`RuntimeUnavailable`."""
        return None

    def release(self) -> None:  # noqa: B027 - optional: most channels hold nothing more
        """Let go of the terminal without ending the shell: a successor took it over."""

    def handover(self) -> tuple[int, dict[str, str]]:
        """The descriptor of the terminal's connection and what names the shell, for a
        successor (``handover/``); ``ValueError`` if this terminal cannot change process."""
        msg = "this runtime's terminals cannot be handed over"
        raise ValueError(msg)

    async def working_directory(self) -> str | None:
        """The shell's current working directory (absolute, as the instance sees it), or
        ``None`` if it cannot be known (where a file dropped on the terminal lands)."""
        return None

    @abc.abstractmethod
    async def exit_code(self) -> int | None:
        """Return the shell's exit code once it has ended (``None`` if unknown)."""

    @abc.abstractmethod
    async def terminate(self) -> None:
        """Close the terminal and end the shell and every process it started.

        Idempotent. Returns once they are gone, or once their end is certain to follow (a
        runtime that cannot act now, say on a paused container, keeps the work and does it
        as soon as it can): closing a terminal alone leaves its processes running.
        """


class ToolRuntime(LoggingConfigurable):
    """Finds tool instances and starts shells in them.

    Subclasses are configurable objects with their own settings (``c.DockerRuntime...``).
    """

    #: The runtime's name in configuration and in the REST API (``docker``, ``local``).
    name: t.ClassVar[str] = ""

    def check_available(self) -> None:
        """Raise :class:`RuntimeUnavailable` with advice if this runtime cannot work here.

        Called once at start-up (it may block briefly).
        """

    async def list_instances(self, owner: str) -> list[Instance]:
        """Return the instances that belong to ``owner``."""
        raise NotImplementedError

    async def get_instance(self, instance_id: str) -> Instance | None:
        """Return the instance named exactly ``instance_id``, or ``None`` if there is none
        (at once, without asking the engine, when :meth:`could_own` says no)."""
        raise NotImplementedError

    def could_own(self, instance_id: str) -> bool:
        """Whether an instance of this runtime could have the id ``instance_id``: a valid id,
        and ``ENGINE/CONTAINER`` only where there are several engines. Ids no runtime could
        own are refused before any engine call (an engine would read ``a/b`` as a path)."""
        return valid_instance_id(instance_id) and "/" not in instance_id

    async def start_shell(
        self, instance: Instance, tool: ToolType, size: tuple[int, int] | None = None
    ) -> ShellChannel:
        """Start the tool type's shell (after its startup command) in a new terminal, of
        ``size`` (rows, cols) when given."""
        raise NotImplementedError

    def prestart(self, instance: Instance, tool: ToolType) -> None:
        """Have a shell of ``tool`` ready in ``instance`` for its next terminal, where this
        runtime starts shells ahead (its owner listed it; it returns at once)."""
        del instance, tool

    async def end_prestarted(self) -> None:
        """End the shells started ahead, and start none until :meth:`resume_prestarting`
        (the server stops, or hands its sessions over)."""

    def resume_prestarting(self) -> None:
        """Start shells ahead again (a hand-over failed: this server goes on)."""

    def handover_state(self) -> dict[str, t.Any]:
        """What a successor must take over besides the shells (JSON-ready)."""
        return {}

    def take_over(self, state: t.Mapping[str, t.Any]) -> None:
        """Take over a predecessor's :meth:`handover_state`, before any shell starts."""
        del state

    async def adopt_shell(self, shell: t.Mapping[str, str], sock: t.Any) -> ShellChannel:
        """Go on with a predecessor's shell (see :meth:`ShellChannel.handover`)."""
        raise NotImplementedError

    def shell_variables(self, instance: Instance, tool: ToolType) -> dict[str, str]:
        """The environment a shell of ``tool`` in ``instance`` starts with, as far as this
        runtime knows it (at least the tool type's ``env``). Only for redaction: the values of
        its secret-looking variables are hidden from recordings and AI agents."""
        del instance
        return dict(tool.env)

    async def open_download(
        self, instance: Instance, tool: ToolType, path: str, max_bytes: int
    ) -> FileDownload:
        """Start reading the file at the absolute ``path`` of ``instance``, as ``tool``'s
        user; ``TransferRefused`` (``transfer.py``) if it cannot be, or is larger than
        ``max_bytes``."""
        raise NotImplementedError

    async def open_upload(
        self, instance: Instance, tool: ToolType, path: str, size: int, overwrite: bool
    ) -> FileUpload:
        """Check that ``size`` bytes may be written to the absolute ``path`` of ``instance``
        as ``tool``'s user (replacing a file there only if ``overwrite``), then take them;
        ``TransferRefused`` (``transfer.py``) if they may not."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the runtime's resources (connections, threads)."""
