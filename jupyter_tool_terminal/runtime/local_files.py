"""Files into and out of a local tool instance: its folder, as the server's user.

A local instance's shells run as the server's user and see this machine's paths, so a path is
one of this machine's (what ``pwd`` shows in the terminal), and it must lead into the
instance's root folder: a path, or a symbolic link on it, that leaves the root is refused.
Blocking file calls run in threads, a piece at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import tempfile

from .transfer import CHUNK_SIZE, FileDownload, FileUpload, TransferRefused, too_large

#: The mode of a new file (before the umask of nobody: files are created by this server).
NEW_FILE_MODE = 0o644


def _inside(root: str, path: str) -> bool:
    return os.path.commonpath([root, path]) == root


def _check_inside(root: str, real: str, path: str) -> None:
    if not _inside(root, real):
        raise TransferRefused(
            403, f"{path} is outside this local instance's folder {root}: name a file in it."
        )


class LocalDownload(FileDownload):
    """A file of this machine, read a piece at a time in a thread."""

    def __init__(self, path: str, size: int, descriptor: int) -> None:
        self.path = path
        self.size = size
        self._fd = descriptor
        self._sent = 0

    async def read(self) -> bytes:
        if self._fd < 0 or self._sent >= self.size:
            self.close()
            return b""
        piece = await asyncio.to_thread(os.read, self._fd, min(CHUNK_SIZE, self.size - self._sent))
        if not piece:
            self.close()
            msg = f"{self.path} ended after {self._sent} of {self.size} bytes"
            raise OSError(msg)
        self._sent += len(piece)
        return piece

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1


def open_download(root: str, path: str, max_bytes: int) -> LocalDownload:
    """Check ``path`` (inside ``root``) and open it. Blocking."""
    real = os.path.realpath(path)
    _check_inside(root, real, path)
    try:
        info = os.stat(real)
    except PermissionError:
        raise TransferRefused(403, f"This server's user may not read {path}.") from None
    except OSError:
        raise TransferRefused(404, f"{path} does not exist.") from None
    if stat.S_ISDIR(info.st_mode):
        raise TransferRefused(
            400, f"{path} is a folder: name a file (folders are not transferred)."
        )
    if not stat.S_ISREG(info.st_mode):
        raise TransferRefused(400, f"{path} is not a regular file.")
    if info.st_size > max_bytes:
        raise TransferRefused(413, too_large(path, info.st_size, max_bytes))
    try:
        descriptor = os.open(real, os.O_RDONLY | os.O_CLOEXEC)
    except PermissionError:
        raise TransferRefused(403, f"This server's user may not read {path}.") from None
    except OSError as error:
        raise TransferRefused(404, f"{path} cannot be opened: {error.strerror}.") from None
    return LocalDownload(path, info.st_size, descriptor)


class LocalUpload(FileUpload):
    """A hidden file beside the destination, moved over it once complete."""

    def __init__(self, path: str, size: int, destination: str, mode: int) -> None:
        self.path = path
        self.size = size
        self._destination = destination
        self._mode = mode
        folder = os.path.dirname(destination)
        name = os.path.basename(destination)
        self._fd, self._staging = tempfile.mkstemp(prefix=f".{name}.upload-", dir=folder)
        self._written = 0

    async def write(self, data: bytes) -> None:
        if self._fd < 0:
            msg = "the upload was aborted"
            raise OSError(msg)
        view = memoryview(data)
        while view:
            done = await asyncio.to_thread(os.write, self._fd, view)
            view = view[done:]
            self._written += done

    async def finish(self) -> None:
        if self._written != self.size:
            self.abort()
            raise TransferRefused(
                400, f"The upload to {self.path} was incomplete; nothing changed."
            )
        try:
            await asyncio.to_thread(self._put_in_place)
        except OSError as error:
            self.abort()
            raise TransferRefused(
                403, f"{self.path} could not be written: {error.strerror}."
            ) from None

    def _put_in_place(self) -> None:
        os.fchmod(self._fd, self._mode)
        os.close(self._fd)
        self._fd = -1
        os.replace(self._staging, self._destination)
        self._staging = ""

    def abort(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1
        if self._staging:
            with contextlib.suppress(OSError):
                os.unlink(self._staging)
            self._staging = ""


def open_upload(root: str, path: str, size: int, overwrite: bool) -> LocalUpload:
    """Check that ``path`` (inside ``root``) may be written, and start writing. Blocking."""
    folder = os.path.dirname(path) or "/"
    real_folder = os.path.realpath(folder)
    _check_inside(root, real_folder, path)
    if not os.path.isdir(real_folder):
        raise TransferRefused(404, f"The folder {folder} does not exist: create it first.")
    destination = os.path.join(real_folder, os.path.basename(path))
    mode = NEW_FILE_MODE
    try:
        info = os.lstat(destination)
    except FileNotFoundError:
        pass
    except OSError:
        raise TransferRefused(403, f"This server's user may not write to {folder}.") from None
    else:
        if stat.S_ISDIR(info.st_mode):
            raise TransferRefused(
                400, f"{path} is a folder: name a file (folders are not transferred)."
            )
        if not overwrite:
            raise TransferRefused(
                409, f"{path} exists: ask again with overwrite=true to replace it."
            )
        if not stat.S_ISREG(info.st_mode):
            raise TransferRefused(400, f"{path} is not a regular file.")
        mode = stat.S_IMODE(info.st_mode)
    if not os.access(real_folder, os.W_OK | os.X_OK):
        raise TransferRefused(403, f"This server's user may not write to {folder}.")
    try:
        return LocalUpload(path, size, destination, mode)
    except OSError as error:
        raise TransferRefused(403, f"{path} could not be written: {error.strerror}.") from None
