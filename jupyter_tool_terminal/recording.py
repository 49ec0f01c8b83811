"""Recording sessions as asciicast v2 files, with secrets redacted before anything is written.

A tool type with ``"record": true`` has each of its sessions written to
``ToolTerminalApp.recording_dir`` as an `asciicast v2 <https://docs.asciinema.org/manual/asciicast/v2/>`_
file (playable with ``asciinema play``): a JSON header line, then one ``[time, code, data]`` line
per event (``o`` output, ``i`` input if configured, ``r`` resize).

A recording replays what the user saw, when they saw it: every piece of output, every resize
and every keystroke is one event, stamped with the time it arrived, written in the order they
arrived. Secrets never reach the disk: each direction goes through a
:class:`~.redaction.StreamRedactor`, which holds the line being drawn until it ends (at most
:data:`~.redaction.HOLD_SECONDS`), so a secret drawn in several pieces, or across a line the
shell wrapped, is seen whole; what comes after held text waits behind it, keeping the order.
Redaction and writing run in a worker thread; the event loop only queues text. The queue is
bounded: a disk slower than the terminal loses output from the recording (a marker says so),
it never holds the terminal back.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import datetime
import json
import logging
import os
import re
import threading
import time
import typing as t
from pathlib import Path

from traitlets import Bool, Integer, Unicode
from traitlets.config import LoggingConfigurable

from .redaction import HOLD_SECONDS, Redactor, RememberedSecrets, StreamRedactor

#: Bytes kept free at the end of a recording for the marker that says it stopped.
MARKER_ROOM = 128
#: Characters queued for the writer thread per recording; beyond this output is dropped from
#: the recording (and a marker written) rather than held in memory or holding the terminal.
MAX_QUEUED = 4 * 1024 * 1024
#: How often held text is looked at again while nothing new arrives.
CHECK_INTERVAL = HOLD_SECONDS / 8

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._@+-]")
#: The header key (beside asciicast v2's own, which players ignore) naming whose recording it
#: is: ``{"owner", "instance", "session"}``. Only recordings that carry it are listed to users.
OWNER_KEY = "jupyter_tool_terminal"
#: A recording's id in the API: its file name without ``.cast`` (what ``Recorder.start`` makes:
#: never a '/', never a leading '.'). Whose it is, its header says (``OWNER_KEY``).
RECORDING_ID = re.compile(r"[A-Za-z0-9_@+-][A-Za-z0-9._@+-]{0,299}")
#: The most of a recording's first line read for its header.
HEADER_LIMIT = 64 * 1024
_EXECUTOR = concurrent.futures.ThreadPoolExecutor(
    max_workers=4, thread_name_prefix="tool-terminal-recording"
)


class RecordingError(RuntimeError):
    """A recording cannot be started; the session must not start without it."""


class _Event:
    """One event of the file, waiting for its redacted text."""

    __slots__ = ("code", "complete", "parts", "when")

    def __init__(self, when: float, code: str, text: str = "", *, complete: bool) -> None:
        self.when = when
        self.code = code
        self.parts = [text] if text else []
        self.complete = complete


class Recording:
    """One session's asciicast file. Methods are called on the event loop and never block."""

    def __init__(
        self,
        path: Path,
        file: t.IO[bytes],
        *,
        redactor: Redactor,
        max_bytes: int,
        record_input: bool,
        log: logging.Logger,
        width: int = 80,
    ) -> None:
        self.path = path
        self._file = file
        self._max_bytes = max_bytes
        self.record_input = record_input
        self._log = log
        self._started = time.monotonic()
        remembered = RememberedSecrets()  # a secret typed is hidden in its echo, and back
        self._streams = {
            "o": StreamRedactor(redactor, width=width, remembered=remembered),
            "i": StreamRedactor(redactor, keystrokes=True, remembered=remembered),
        }
        #: Events in arrival order, waiting to be written; by stream, piece number -> event.
        self._order: collections.deque[_Event] = collections.deque()
        self._waiting: dict[str, dict[int, _Event]] = {"o": {}, "i": {}}
        self._fed = {"o": 0, "i": 0}
        #: Events waiting for the writer thread: (time, code, raw text).
        self._queue: list[tuple[float, str, str]] = []
        self._queued = 0
        self._dropped = 0
        self._lock = threading.Lock()
        self._writing = False
        self._written = 0
        self._last_time = 0.0
        self._stopped = False
        self._closing = False
        self._done: concurrent.futures.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._check: asyncio.TimerHandle | None = None

    # -- on the event loop ----------------------------------------------------------------

    def output(self, text: str) -> None:
        """Record terminal output."""
        self._put("o", text)

    def input(self, text: str) -> None:
        """Record keystrokes (written only if the recording records input; read in any case,
        so that a secret typed is known when the terminal echoes it)."""
        self._put("i", text)

    def resize(self, rows: int, cols: int) -> None:
        """Record a terminal size change."""
        self._put("r", f"{cols}x{rows}")

    def _put(self, code: str, text: str) -> None:
        if self._closing:
            return
        if self._loop is None:
            with contextlib.suppress(RuntimeError):  # no loop: held text waits for close()
                self._loop = asyncio.get_running_loop()
        with self._lock:
            if self._queued + len(text) > MAX_QUEUED:
                self._dropped += len(text)
                return
            self._queue.append((time.monotonic() - self._started, code, text))
            self._queued += len(text)
            if self._writing:
                return
            self._writing = True
        self._done = _EXECUTOR.submit(self._drain)

    def _check_held(self) -> None:
        """Look at held text again (from the loop, every CHECK_INTERVAL while text is held)."""
        self._check = None
        self._put("check", "")

    def _schedule_check(self) -> None:
        if self._check is None and not self._closing:
            assert self._loop is not None
            self._check = self._loop.call_later(CHECK_INTERVAL, self._check_held)

    def close(self) -> concurrent.futures.Future[None]:
        """Write what is held (redacted), close the file; the future resolves when done."""
        if self._check is not None:
            self._check.cancel()
            self._check = None
        with self._lock:
            self._closing = True
            self._queue.append((time.monotonic() - self._started, "close", ""))
            if not self._writing:
                self._writing = True
                self._done = _EXECUTOR.submit(self._drain)
        assert self._done is not None
        return self._done

    # -- in the writer thread -------------------------------------------------------------

    def _drain(self) -> None:
        while True:
            with self._lock:
                batch, self._queue, self._queued = self._queue, [], 0
                dropped, self._dropped = self._dropped, 0
                if not batch and not dropped:
                    self._writing = False
                    holding = any(stream.holding for stream in self._streams.values())
                    if holding and self._loop is not None and not (self._closing or self._stopped):
                        with contextlib.suppress(RuntimeError):  # the loop is closing
                            self._loop.call_soon_threadsafe(self._schedule_check)
                    return
            if self._stopped:
                continue  # the file is closed: nothing more to redact or write
            try:
                self._write_batch(batch, dropped)
            except OSError as error:
                self._log.error("Tool terminal recording %s failed: %s", self.path.name, error)
                self._stop()
            except Exception:  # noqa: BLE001 - any bug: stop rather than write unredacted text
                # A bug must not write what was not redacted: the recording ends here.
                self._log.exception("Tool terminal recording %s stopped", self.path.name)
                self._stop()

    def _stop(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            self._file.close()

    def _write_batch(self, batch: list[tuple[float, str, str]], dropped: int) -> None:
        lines: list[str] = []
        if dropped:
            gap = f"\r\n[recording skipped {dropped} characters: the disk was too slow]\r\n"
            self._order.append(_Event(self._now(batch), "o", gap, complete=True))
        for when, code, text in batch:
            if code == "close":
                for name, stream in self._streams.items():
                    self._take(name, stream.flush())
                self._write_ready(lines)
                self._emit(lines)
                if not self._file.closed:
                    self._file.close()
                return
            for name, stream in self._streams.items():
                self._take(name, stream.expire(when))
            if code == "r":
                self._order.append(_Event(when, "r", text, complete=True))
                self._streams["o"].resize(int(text.split("x")[0]))
            elif code in self._streams:
                if code == "o" or self.record_input:
                    event = _Event(when, code, complete=False)
                    self._order.append(event)
                    self._waiting[code][self._fed[code]] = event
                self._fed[code] += 1
                self._take(code, self._streams[code].feed(text, when))
            self._write_ready(lines)
        self._emit(lines)

    def _take(self, code: str, released: t.Iterable[t.Any]) -> None:
        """Give released (redacted) text to the events it belongs to."""
        waiting = self._waiting[code]
        for piece in released:
            event = waiting.get(piece.piece)
            if event is None:
                continue  # keystrokes that are not written
            if piece.text:
                event.parts.append(piece.text)
            if piece.complete:
                event.complete = True
                del waiting[piece.piece]

    def _write_ready(self, lines: list[str]) -> None:
        """Write events from the oldest on, as far as their text is known (keeps the order)."""
        order = self._order
        while order:
            event = order[0]
            if event.parts:
                # Players want times that never go back.
                self._last_time = max(self._last_time, round(event.when, 6))
                lines.append(json.dumps([self._last_time, event.code, "".join(event.parts)]))
                event.parts = []
            if not event.complete:
                return
            order.popleft()

    def _now(self, batch: list[tuple[float, str, str]]) -> float:
        return round(batch[0][0] if batch else time.monotonic() - self._started, 6)

    def _emit(self, lines: list[str]) -> None:
        if self._stopped or not lines:
            return
        data = bytearray()
        for line in lines:
            encoded = (line + "\n").encode("utf-8")
            if self._written + len(data) + len(encoded) > self._max_bytes - MARKER_ROOM:
                data += self._limit_marker()
                self._stopped = True
                break
            data += encoded
        self._file.write(data)
        self._file.flush()
        self._written += len(data)
        if self._stopped:
            self._file.close()  # full: what comes later is neither redacted nor kept

    def _limit_marker(self) -> bytes:
        when = max(self._last_time, round(time.monotonic() - self._started, 6))
        text = "\r\n[recording stopped: it reached its size limit]\r\n"
        return (json.dumps([when, "o", text]) + "\n").encode()

    def header_written(self, size: int) -> None:
        """Count the header (written when the file was opened) against the size limit."""
        self._written += size


class Recorder(LoggingConfigurable):
    """Starts recordings: where they go, how large they may grow, what is redacted.

    Made by the app with ``parent=`` (its settings are the app's ``recording_*``, the
    contract's names)."""

    directory = Unicode(help="The folder recordings are written to.")
    max_bytes = Integer(help="The size at which a recording stops (bytes).")
    record_input = Bool(False, help="Whether what the user types is recorded too.")

    def __init__(self, *, redactor: Redactor, **kwargs: t.Any) -> None:
        super().__init__(**kwargs)
        self.redactor = redactor

    def start(
        self,
        *,
        owner: str,
        instance: str,
        session_id: str,
        title: str,
        shell: str,
        rows: int = 24,
        cols: int = 80,
        environment: t.Mapping[str, str] | None = None,
    ) -> Recording:
        """Create the session's file and write its header (blocking: call it in a thread).

        ``environment``: the shell's (see :attr:`.ToolTerminal.environment`); the values of its
        secret variables are hidden as well. Raises :class:`RecordingError` if the file cannot
        be created and written.
        """
        started = datetime.datetime.now(datetime.timezone.utc)
        name = "_".join(
            _UNSAFE_NAME.sub("-", part)[:64]
            for part in (owner, instance, session_id, started.strftime("%Y%m%dT%H%M%SZ"))
        )
        header = {
            "version": 2,
            "width": cols,
            "height": rows,
            "timestamp": int(started.timestamp()),
            "title": title,
            "env": {"TERM": "xterm-256color", "SHELL": shell},
            OWNER_KEY: {"owner": owner, "instance": instance, "session": session_id},
        }
        encoded = (json.dumps(header) + "\n").encode("utf-8")
        try:
            path, descriptor = _create_new(Path(self.directory), name)
            file = os.fdopen(descriptor, "wb")
            file.write(encoded)
            file.flush()
        except OSError as error:
            self.log.error(  # noqa: TRY400 - the error says it
                "Cannot record tool terminal %s in %s: %s", session_id[:8], self.directory, error
            )
            msg = "This tool type records its terminals, and the recording could not be started."
            raise RecordingError(msg) from error
        recording = Recording(
            path,
            file,
            redactor=self.redactor.for_environment(environment or {}),
            max_bytes=self.max_bytes,
            record_input=self.record_input,
            log=self.log,
            width=cols,
        )
        recording.header_written(len(encoded))
        return recording


#: How many names a recording tries (``NAME.cast``, ``NAME-2.cast``...) before it fails.
MAX_NAME_TRIES = 100


def _create_new(directory: Path, name: str) -> tuple[Path, int]:
    """A file of its own for a recording named ``name``, created (``O_EXCL``) in
    ``directory``, and its descriptor. A session taken over goes on recording under its own
    id, maybe in the second its last recording started: ``NAME-2``, ``NAME-3``... then."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    for number in range(1, MAX_NAME_TRIES + 1):
        path = directory / (f"{name}.cast" if number == 1 else f"{name}-{number}.cast")
        try:
            return path, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
    msg = f"{MAX_NAME_TRIES} recordings named {name} exist in {directory}"
    raise FileExistsError(msg)


def _header(path: Path) -> dict[str, t.Any] | None:
    """A recording's header, if it is one of this extension's. Blocking."""
    try:
        with path.open("rb") as file:
            header = json.loads(file.readline(HEADER_LIMIT))
    except (OSError, ValueError):
        return None
    if not isinstance(header, dict) or not isinstance(header.get(OWNER_KEY), dict):
        return None
    return header


def list_recordings(directory: Path, owner: str) -> list[dict[str, t.Any]]:
    """``owner``'s recordings in ``directory``, newest first (blocking: run it in a thread)."""
    found = []
    try:
        paths = list(directory.glob("*.cast"))
    except OSError:
        return []
    for path in paths:
        if not RECORDING_ID.fullmatch(path.stem):
            continue
        header = _header(path)
        if header is None or header[OWNER_KEY].get("owner") != owner:
            continue
        try:
            size = path.stat().st_size
        except OSError:
            continue
        started = datetime.datetime.fromtimestamp(header.get("timestamp", 0), datetime.timezone.utc)
        found.append(
            {
                "id": path.stem,
                "instance": header[OWNER_KEY].get("instance"),
                "session": header[OWNER_KEY].get("session"),
                "title": header.get("title", ""),
                "started": started.isoformat().replace("+00:00", "Z"),
                "size": size,
            }
        )
    return sorted(found, key=lambda item: (item["started"], item["id"]), reverse=True)


def recording_path(directory: Path, owner: str, recording_id: str) -> Path | None:
    """The file of ``owner``'s recording ``recording_id``; ``None`` for anyone else's or an
    unknown one (blocking)."""
    if not RECORDING_ID.fullmatch(recording_id):
        return None
    path = directory / f"{recording_id}.cast"
    header = _header(path)
    if header is None or header[OWNER_KEY].get("owner") != owner:
        return None
    return path
