"""Files into and out of a tool instance (``/tool-terminal/api/instances/{id}/files``).

:class:`FileTransfers` decides whether a transfer may happen and where: the caller must own
the instance (the same 403 as for one that does not exist), it must be running, and a relative
path is taken against the current directory of one of the caller's own sessions in it. The
runtime then moves the bytes as the tool type's user (``runtime/transfer.py``). Every transfer
done is audited with its path and size, never its content.
"""

from __future__ import annotations

import posixpath

from traitlets import Instance, Integer
from traitlets.config import LoggingConfigurable

from .errors import EngineUnavailable, NotPermitted, NotRunning
from .manager import ToolTerminalManager
from .runtime.base import Instance as ToolInstance
from .runtime.base import RuntimeUnavailable, valid_instance_id
from .runtime.transfer import FileDownload, FileUpload, TransferRefused, check_path, too_large
from .tooltypes import ToolType

#: The default of ``max_file_transfer_bytes`` (contract): 100 MiB.
DEFAULT_MAX_BYTES = 104857600


class FileTransfers(LoggingConfigurable):
    """Serves the file routes of tool instances: checks, then the runtime's transfer."""

    max_file_transfer_bytes = Integer(
        DEFAULT_MAX_BYTES,
        min=0,
        help="""The largest file (bytes) that one download from, or upload into, a tool instance
        may be; a larger one is refused with 413 (an upload's body is not kept).""",
    ).tag(config=True)

    manager = Instance(ToolTerminalManager)

    async def _target(
        self, owner: str, instance_id: str, path: str | None, session_id: str | None
    ) -> tuple[ToolInstance, ToolType, str]:
        """The caller's running instance, its tool type and the absolute path meant."""
        manager = self.manager
        unknown = "No such tool instance for this user."
        if not valid_instance_id(instance_id):
            raise NotPermitted(unknown)
        if not path:
            raise TransferRefused(400, "Say which file: the query argument 'path' is missing.")
        instance, tool = await manager.instances.find(owner, instance_id)
        if not instance.running:
            stopped = f"The tool instance is not running (it is {instance.status}): start it first."
            raise NotRunning(stopped)
        if session_id is not None and not path.startswith("/"):
            session = manager.get_session(owner, session_id)
            if session.instance.id != instance.id:
                elsewhere = "No such session in this tool instance for this user."
                raise NotPermitted(elsewhere)
            directory = await session.working_directory()
            if directory is None:
                raise TransferRefused(
                    400,
                    "The terminal's current folder cannot be found (its shell is not running): "
                    "give an absolute path.",
                )
            path = posixpath.join(directory, path)
        check_path(path)
        return instance, tool, path

    async def open_download(
        self, owner: str, instance_id: str, path: str | None, session_id: str | None
    ) -> tuple[ToolInstance, FileDownload]:
        """Check and start a download (a :class:`~.errors.Refusal` says why not)."""
        instance, tool, path = await self._target(owner, instance_id, path, session_id)
        try:
            download = await self.manager.runtime.open_download(
                instance, tool, path, self.max_file_transfer_bytes
            )
        except RuntimeUnavailable as error:
            raise EngineUnavailable(str(error)) from error
        return instance, download

    async def open_upload(
        self,
        owner: str,
        instance_id: str,
        path: str | None,
        session_id: str | None,
        *,
        size: int,
        overwrite: bool,
    ) -> tuple[ToolInstance, FileUpload]:
        """Check and start an upload of ``size`` bytes."""
        if path is not None and path.endswith("/"):
            raise TransferRefused(400, f"The path {path!r} ends in '/': name the file to write.")
        instance, tool, path = await self._target(owner, instance_id, path, session_id)
        if size > self.max_file_transfer_bytes:
            raise TransferRefused(413, too_large(path, size, self.max_file_transfer_bytes))
        try:
            upload = await self.manager.runtime.open_upload(instance, tool, path, size, overwrite)
        except RuntimeUnavailable as error:
            raise EngineUnavailable(str(error)) from error
        return instance, upload

    def audit(
        self,
        action: str,
        username: str,
        *,
        owner: str,
        instance: ToolInstance,
        path: str,
        size: int,
    ) -> None:
        """Record a transfer done: who, which instance, which path, how many bytes."""
        self.log.info(
            "Tool instance file %s: %s %s (%d bytes) by %s",
            action,
            instance.id,
            path,
            size,
            username,
        )
        self.manager.audit.emit(
            action,
            username,
            owner=owner,
            instance=instance.id,
            tool=instance.tool,
            path=path,
            size=size,
        )
