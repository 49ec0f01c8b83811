"""The interface between sessions and the thing that runs shells (a container engine)."""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import typing as t

from ..tooltypes import ToolType

#: Environment variable carrying a shell's kill tag; every process the shell starts inherits it,
#: which is how the session finds (and kills) them all again.
SESSION_TAG_VARIABLE = "JUPYTER_TOOL_TERMINAL_SESSION"


class RuntimeUnavailable(RuntimeError):
    """The container engine cannot be reached or refused an operation.

    The message is safe to show to the user: it names no container id and no other user.
    """


@dataclasses.dataclass(frozen=True)
class Instance:
    """A tool instance: a labelled container as seen at one moment."""

    #: The container's name, which is the id clients use.
    id: str
    #: The container's immutable id; every exec targets this, never a name.
    container_id: str
    owner: str
    tool: str
    #: Docker's container state (``running``, ``exited``, ...).
    status: str
    #: The container's own environment names (to know whether ``LANG`` is already set).
    env_names: frozenset[str] = frozenset()


class ShellChannel(abc.ABC):
    """A running shell's terminal: a byte stream in both directions plus the means to resize it."""

    #: Bytes the terminal writes (EOF when the shell's PTY closes).
    reader: asyncio.StreamReader

    @abc.abstractmethod
    async def write(self, data: bytes) -> None:
        """Send keystrokes to the terminal, waiting while the engine's socket is full."""

    @abc.abstractmethod
    async def resize(self, rows: int, cols: int) -> None:
        """Set the terminal size."""

    @abc.abstractmethod
    async def wait_started(self, timeout: float) -> None:
        """Wait until the engine has really started the shell process.

        The engine answers the start request before the process exists; a kill before then
        would find nothing and leave the shell to start afterwards, orphaned.
        """

    @abc.abstractmethod
    async def is_running(self) -> bool:
        """Whether the shell process is still running (``False`` if that cannot be known)."""

    @abc.abstractmethod
    async def exit_code(self) -> int | None:
        """Return the shell's exit code once it has ended (``None`` if unknown)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the stream. This does not end the shell: see :meth:`ToolRuntime.kill_tagged`."""

    def hold_output(self, held: bool) -> None:
        """Stop (``True``) or resume (``False``) taking output off the engine's connection.

        Output that arrives while held waits in the kernel and is then read in one piece,
        instead of one wake-up of the server per piece the engine sends. Optional: channels
        that cannot hold ignore it.
        """
        del held  # nothing to hold by default


class ToolRuntime(abc.ABC):
    """Finds tool instances and starts, resizes and kills shells in them."""

    @abc.abstractmethod
    async def list_instances(self, owner: str) -> list[Instance]:
        """Return the instances labelled as belonging to ``owner``."""

    @abc.abstractmethod
    async def get_instance(self, instance_id: str) -> Instance | None:
        """Return the instance named exactly ``instance_id``, or ``None`` if there is none."""

    @abc.abstractmethod
    async def start_shell(self, instance: Instance, tool: ToolType, tag: str) -> ShellChannel:
        """Start the tool type's shell (after its startup command) in a new PTY of ``instance``.

        Every process of the shell carries ``tag`` in :data:`SESSION_TAG_VARIABLE`.
        """

    @abc.abstractmethod
    async def kill_tagged(self, container_id: str, tags: t.Collection[str]) -> None:
        """Kill every process in the container that belongs to a shell with one of ``tags``."""

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to do by default
        """Release connections to the engine."""
