"""Files into and out of a tool instance: what every runtime's transfer looks like.

A download is a file's size, known before its first byte is sent (so that a refusal is an
HTTP status, not a cut-off body), then its bytes in pieces. An upload is a destination checked
before the first byte is taken, then the body in pieces, written beside the destination and
moved over it only once every byte arrived: a refused or broken upload leaves the instance as
it was.

Refusals are :class:`TransferRefused` with the HTTP status the contract gives them and a
message that says what to do. In a container the checks and the copy run as the tool type's
user, by the scripts below (``/bin/sh`` and the commands ``cat``, ``head``, ``ls`` and ``mv``,
which every image with a shell has), so the kernel decides what that user may read and write.
"""

from __future__ import annotations

import abc
import posixpath

from ..errors import Refusal

#: The most one piece of a transfer holds (what one read of a download yields at most).
CHUNK_SIZE = 256 * 1024


class TransferRefused(Refusal):
    """A file transfer cannot be done; ``status`` is the contract's (400, 403, 404, 409, 413)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class FileDownload(abc.ABC):
    """A file being read out of an instance: its absolute path and size, then its bytes."""

    path: str
    size: int

    @abc.abstractmethod
    async def read(self) -> bytes:
        """The next piece of the file (at most :data:`CHUNK_SIZE` bytes); ``b""`` at its end.

        Raises :class:`OSError` if the file cannot be read to its end (it shrank, the
        instance stopped): the download is then incomplete and must be reported as such.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Stop reading (idempotent); nothing is left running."""


class FileUpload(abc.ABC):
    """A file being written into an instance: its checked absolute path, then its bytes."""

    path: str
    size: int

    @abc.abstractmethod
    async def write(self, data: bytes) -> None:
        """Write the next piece (waiting while the instance is behind)."""

    @abc.abstractmethod
    async def finish(self) -> None:
        """Every byte was written: put the file in place; :class:`TransferRefused` if that
        failed (then nothing changed)."""

    @abc.abstractmethod
    def abort(self) -> None:
        """Give up (idempotent): the partial file is removed, the destination unchanged."""


def check_path(path: str) -> None:
    """Refuse (400) a path that is not absolute or holds control characters."""
    if not path.startswith("/"):
        raise TransferRefused(
            400, f"The path {path!r} is not absolute: give the full path, starting with '/'."
        )
    if any(ord(character) < 32 or ord(character) == 127 for character in path):
        raise TransferRefused(400, "The path must not contain control characters.")


def folder_of(path: str) -> str:
    """The folder a file path names its file in (``/`` for ``/name``)."""
    return posixpath.dirname(path) or "/"


# The scripts' exit codes, one per refusal, and what each means for a path.
IS_FOLDER = 40
NOT_A_FILE = 41
NOT_ALLOWED = 43
NOT_FOUND = 44
TOO_LARGE = 45
INCOMPLETE = 47
EXISTS = 49
#: What an engine's exec answers when the command (``/bin/sh``) or one the script calls is
#: missing or cannot run.
COMMAND_MISSING = (126, 127)

#: Prints the file's size, then the file (``$1``: its absolute path; ``$2``: the most bytes
#: taken). ``ls -n`` has numeric owners, so the size is always the fifth field.
DOWNLOAD_SCRIPT = r"""
set -f
p=$1 max=$2
d=${p%/*}; [ -n "$d" ] || d=/
if [ ! -e "$p" ]; then
  if [ -d "$d" ] && [ ! -x "$d" ]; then exit 43; fi
  exit 44
fi
[ -d "$p" ] && exit 40
[ -f "$p" ] || exit 41
[ -r "$p" ] || exit 43
set -- $(LC_ALL=C ls -lnd -- "$p")
size=$5
echo "$size"
[ "$size" -gt "$max" ] && exit 45
exec cat -- "$p"
"""

#: Checks the destination (``$1``), says ``ready``, takes exactly ``$3`` bytes from its input
#: into a hidden file beside it and moves that over it (``$2`` is ``true`` to replace a file).
UPLOAD_SCRIPT = r"""
set -f
p=$1 overwrite=$2 size=$3
d=${p%/*}; [ -n "$d" ] || d=/
[ -d "$d" ] || exit 44
[ -x "$d" ] || exit 43
[ -d "$p" ] && exit 40
if [ -e "$p" ] || [ -L "$p" ]; then
  [ "$overwrite" = true ] || exit 49
  [ -f "$p" ] || exit 41
fi
[ -w "$d" ] || exit 43
tmp="$d/.${p##*/}.upload-$$"
: > "$tmp" 2>/dev/null || exit 43
echo ready
head -c "$size" > "$tmp"
set -- $(LC_ALL=C ls -lnd -- "$tmp")
if [ "$5" != "$size" ]; then rm -f -- "$tmp"; exit 47; fi
mv -f -- "$tmp" "$p" || { rm -f -- "$tmp"; exit 43; }
"""


def refusal_for(
    code: int | None,
    *,
    path: str,
    user: str,
    writing: bool,
    size: int | None = None,
    max_bytes: int = 0,
) -> TransferRefused:
    """What a script's exit ``code`` means for ``path``, in words (``user``: whose rights)."""
    who = f"The tool's user ({user})" if user else "The tool's user"
    folder = folder_of(path)
    missing = (
        f"The folder {folder} does not exist: create it first."
        if writing
        else f"{path} does not exist."
    )
    answers: dict[int | None, tuple[int, str]] = {
        IS_FOLDER: (400, f"{path} is a folder: name a file (folders are not transferred)."),
        NOT_A_FILE: (400, f"{path} is not a regular file."),
        NOT_ALLOWED: (403, f"{who} may not {f'write to {folder}' if writing else f'read {path}'}."),
        NOT_FOUND: (404, missing),
        TOO_LARGE: (413, too_large(path, size, max_bytes)),
        EXISTS: (409, f"{path} exists: ask again with overwrite=true to replace it."),
        INCOMPLETE: (400, f"The upload to {path} was incomplete; nothing changed."),
    }
    for command_missing in COMMAND_MISSING:
        answers[command_missing] = (
            501,
            "Files cannot be transferred in this tool instance: it needs /bin/sh with cat, "
            "head, ls and mv, and one of them is missing.",
        )
    status, message = answers.get(
        code, (500, f"The transfer of {path} failed in the tool instance.")
    )
    return TransferRefused(status, message)


def too_large(path: str, size: int | None, max_bytes: int) -> str:
    """The 413 message: how large, and the limit."""
    what = f"{path} is {size} bytes" if size is not None else f"The file for {path} is larger"
    return (
        f"{what}, more than the {max_bytes} bytes this server transfers at once "
        "(max_file_transfer_bytes)."
    )
