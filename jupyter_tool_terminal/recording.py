"""Recording sessions as asciicast v2 files, with secrets redacted before anything is written.

A tool type with ``"record": true`` has each of its sessions written to
``ToolTerminalApp.recording_dir`` as an `asciicast v2 <https://docs.asciinema.org/manual/asciicast/v2/>`_
file (playable with ``asciinema play``): a JSON header line, then one ``[time, code, data]`` line
per event (``o`` output, ``i`` input if configured, ``r`` resize).

Secrets never reach the disk: text is redacted line by line (a secret cannot be split across
two writes of the program, since only whole lines, or the part of a long line that is certainly
not inside a match, are redacted and written). Redaction and writing run in a worker thread; the
event loop only queues text. The queue is bounded: a disk slower than the terminal loses
output from the recording (a marker says so), it never holds the terminal back.
"""

from __future__ import annotations

import bisect
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

#: What replaces a secret in a recording.
REDACTED = "[REDACTED]"

#: Built-in secret formats. A pattern's group ``keep`` (an assignment's name) stays readable.
BUILTIN_PATTERNS: tuple[str, ...] = (
    # AWS access key ids (long-term and temporary).
    r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b",
    # GitHub tokens: classic (ghp_, gho_, ghu_, ghs_, ghr_) and fine-grained.
    r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b",
    r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b",
    # GitLab personal access tokens, Slack tokens, Google API keys, Stripe keys.
    r"\bglpat-[A-Za-z0-9_-]{20,}",
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    r"\bAIza[0-9A-Za-z_-]{35}\b",
    r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}\b",
    # JSON Web Tokens (header.payload.signature, each base64url; the first two are JSON).
    r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}",
    # Private key headers (the key's body is base64 lines, which no pattern can tell apart).
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    # "Authorization: Bearer ...", tokens in URLs.
    r"(?i)(?P<keep>\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}",
    r"(?i)(?P<keep>[?&](?:token|access_token|api_key|apikey|key|secret|password)=)[^&\s\"'<>]+",
    # password=..., API_KEY: ..., "secret": "..." and similar assignments.
    r"(?i)(?P<keep>\b[\w.-]*(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key"
    r"|access[_-]?key|private[_-]?key|credentials?)[\w.-]*[\"']?\s*[:=]\s*)"
    r"(?:\"[^\"\r\n]*\"|'[^'\r\n]*'|[^\s\"',;]+)",
)

#: Characters of one line held back while waiting for its end; beyond this the line is
#: written in parts, each ending ``LOOKBACK`` characters before the newest text (and never
#: inside a match), so a secret of up to ``LOOKBACK`` characters is still seen whole.
MAX_LINE = 16 * 1024
LOOKBACK = 1024
#: Bytes kept free at the end of a recording for the marker that says it stopped.
MARKER_ROOM = 128
#: Characters queued for the writer thread per recording; beyond this output is dropped from
#: the recording (and a marker written) rather than held in memory or holding the terminal.
MAX_QUEUED = 4 * 1024 * 1024

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._@+-]")
_EXECUTOR = concurrent.futures.ThreadPoolExecutor(
    max_workers=4, thread_name_prefix="tool-terminal-recording"
)


class RecordingError(RuntimeError):
    """A recording cannot be started; the session must not start without it."""


#: Escape sequences that show nothing themselves: CSI (colours, cursor moves), OSC (titles,
#: hyperlinks), character set designations and the other two-character escapes.
ESCAPE_SEQUENCE = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()*+][0-~]|[@-Z\\-_])"
)


class Redactor:
    """Replaces secrets in text: built-in formats, operator regexes and literal strings."""

    def __init__(self, patterns: t.Iterable[str] = (), literals: t.Iterable[str] = ()) -> None:
        compiled = [re.compile(p) for p in BUILTIN_PATTERNS]
        for pattern in patterns:
            try:
                compiled.append(re.compile(pattern))
            except re.error as error:
                msg = f"redact_patterns: {pattern!r} is not a valid regular expression: {error}"
                raise ValueError(msg) from error
        words = sorted({literal for literal in literals if literal}, key=len, reverse=True)
        if words:
            compiled.append(re.compile("|".join(map(re.escape, words))))
        self._patterns = compiled

    @staticmethod
    def _replace(match: re.Match[str]) -> str:
        keep = match.groupdict().get("keep")
        return (keep or "") + REDACTED

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced, also one split by escape sequences."""
        for pattern in self._patterns:
            text = pattern.sub(self._replace, text)
        if "\x1b" in text:
            text = self._redact_as_shown(text)
        return text

    def _redact_as_shown(self, text: str) -> str:
        """Redact secrets in the text a terminal shows, ignoring the escape sequences between
        their characters (`printf 'ghp_ab\\e[1mcd...'` shows a whole token). A secret's
        characters are replaced; the escape sequences among them are kept, so that what the
        terminal was told (a colour, a title) stays as it was."""
        # The shown text, and for each of its runs the offset where it starts in ``text``.
        runs: list[tuple[int, int]] = []
        pieces: list[str] = []
        shown_length = last = 0
        for escape in ESCAPE_SEQUENCE.finditer(text):
            if escape.start() > last:
                runs.append((shown_length, last))
                pieces.append(text[last : escape.start()])
                shown_length += escape.start() - last
            last = escape.end()
        runs.append((shown_length, last))
        pieces.append(text[last:])
        shown = "".join(pieces)
        starts = [start for start, _ in runs]

        def position(index: int) -> int:
            run = bisect.bisect_right(starts, index) - 1
            return runs[run][1] + index - runs[run][0]

        spans: list[tuple[int, int, str]] = []
        for pattern in self._patterns:
            for match in pattern.finditer(shown):
                if match.end() > match.start():
                    spans.append(
                        (
                            position(match.start()),
                            position(match.end() - 1) + 1,
                            self._replace(match),
                        )
                    )
        if not spans:
            return text
        out: list[str] = []
        done = 0
        for start, end, replacement in sorted(spans):
            if start < done:  # overlaps one already replaced
                continue
            kept = "".join(ESCAPE_SEQUENCE.findall(text, start, end))
            out += [text[done:start], replacement, kept]
            done = end
        out.append(text[done:])
        return "".join(out)

    def safe_end(self, text: str, end: int) -> int:
        """The latest position at or before ``end`` that lies inside no match in ``text``."""
        for pattern in self._patterns:
            for match in pattern.finditer(text, max(0, end - LOOKBACK)):
                if match.start() < end < match.end():
                    end = match.start()
        return end


class _Stream:
    """One direction (output or input) of a recording, cut into redactable pieces."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.held = ""
        self.held_since = 0.0

    def take(self, text: str, when: float, redactor: Redactor) -> tuple[float, str] | None:
        """Add ``text``; return (time, redacted text) that may be written now, if any."""
        if not self.held:
            self.held_since = when
        self.held += text
        cut = max(self.held.rfind("\n"), self.held.rfind("\r")) + 1
        if len(self.held) - cut > MAX_LINE:
            cut = redactor.safe_end(self.held, len(self.held) - LOOKBACK)
        if cut <= 0:
            return None
        ready, self.held = self.held[:cut], self.held[cut:]
        since, self.held_since = self.held_since, when
        return since, redactor.redact(ready)

    def flush(self, redactor: Redactor) -> tuple[float, str] | None:
        held, self.held = self.held, ""
        return (self.held_since, redactor.redact(held)) if held else None


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
    ) -> None:
        self.path = path
        self._file = file
        self._redactor = redactor
        self._max_bytes = max_bytes
        self.record_input = record_input
        self._log = log
        self._started = time.monotonic()
        self._streams = {"o": _Stream("o"), "i": _Stream("i")}
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

    # -- on the event loop ----------------------------------------------------------------

    def output(self, text: str) -> None:
        """Record terminal output."""
        self._put("o", text)

    def input(self, text: str) -> None:
        """Record keystrokes (only if the recording records input)."""
        if self.record_input:
            self._put("i", text)

    def resize(self, rows: int, cols: int) -> None:
        """Record a terminal size change."""
        self._put("r", f"{cols}x{rows}")

    def _put(self, code: str, text: str) -> None:
        if self._closing:
            return
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

    def close(self) -> concurrent.futures.Future[None]:
        """Write what is held (redacted), close the file; the future resolves when done."""
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
                    return
            try:
                self._write_batch(batch, dropped)
            except OSError as error:
                self._log.error("Tool terminal recording %s failed: %s", self.path.name, error)
                self._stopped = True
                with contextlib.suppress(OSError):
                    self._file.close()

    def _write_batch(self, batch: list[tuple[float, str, str]], dropped: int) -> None:
        lines: list[str] = []
        if dropped:
            gap = f"\r\n[recording skipped {dropped} characters: the disk was too slow]\r\n"
            lines.append(json.dumps([self._now(batch), "o", gap]))
        for when, code, text in batch:
            if code == "close":
                for stream in self._streams.values():
                    self._event(lines, stream, stream.flush(self._redactor))
                self._emit(lines)
                if not self._file.closed:
                    self._file.close()
                return
            if code == "r":
                self._last_time = max(self._last_time, round(when, 6))
                lines.append(json.dumps([self._last_time, "r", text]))
            else:
                stream = self._streams[code]
                self._event(lines, stream, stream.take(text, when, self._redactor))
        self._emit(lines)

    def _now(self, batch: list[tuple[float, str, str]]) -> float:
        return round(batch[0][0] if batch else time.monotonic() - self._started, 6)

    def _event(self, lines: list[str], stream: _Stream, ready: tuple[float, str] | None) -> None:
        if ready is not None and ready[1]:
            # Held text is stamped with when it arrived; players want times that never go back.
            self._last_time = max(self._last_time, round(ready[0], 6))
            lines.append(json.dumps([self._last_time, stream.code, ready[1]]))

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

    def _limit_marker(self) -> bytes:
        when = max(self._last_time, round(time.monotonic() - self._started, 6))
        text = "\r\n[recording stopped: it reached its size limit]\r\n"
        return (json.dumps([when, "o", text]) + "\n").encode()

    def header_written(self, size: int) -> None:
        """Count the header (written when the file was opened) against the size limit."""
        self._written += size


class Recorder:
    """Starts recordings: where they go, how large they may grow, what is redacted."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        max_bytes: int,
        redactor: Redactor,
        record_input: bool,
        log: logging.Logger,
    ) -> None:
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.redactor = redactor
        self.record_input = record_input
        self.log = log

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
    ) -> Recording:
        """Create the session's file and write its header (blocking: call it in a thread).

        Raises :class:`RecordingError` if the file cannot be created and written.
        """
        started = datetime.datetime.now(datetime.timezone.utc)
        name = "_".join(
            _UNSAFE_NAME.sub("-", part)[:64]
            for part in (owner, instance, session_id, started.strftime("%Y%m%dT%H%M%SZ"))
        )
        path = self.directory / f"{name}.cast"
        header = {
            "version": 2,
            "width": cols,
            "height": rows,
            "timestamp": int(started.timestamp()),
            "title": title,
            "env": {"TERM": "xterm-256color", "SHELL": shell},
        }
        encoded = (json.dumps(header) + "\n").encode("utf-8")
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
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
            redactor=self.redactor,
            max_bytes=self.max_bytes,
            record_input=self.record_input,
            log=self.log,
        )
        recording.header_written(len(encoded))
        return recording
