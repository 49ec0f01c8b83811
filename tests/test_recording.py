"""Recording: asciicast v2 files of the sessions of tool types that record, secrets redacted."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
import typing as t
from pathlib import Path

import pytest
from asciinema.asciicast import open_from_url

from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.recording import MAX_QUEUED, REDACTED, Recorder, Recording, Redactor
from jupyter_tool_terminal.tooltypes import ToolTypeError, parse_tool_type

from .conftest import TOOL_TYPES, Api, InstanceFactory, exec_count

FAKE_GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
FAKE_AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
FAKE_JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
LITERAL = "correct-horse-battery-staple"


def _events(path: Path) -> tuple[dict[str, t.Any], list[list[t.Any]]]:
    """Read a recording with asciinema's own reader, and check the v2 line format."""
    with open_from_url(str(path)) as cast:
        header = cast.v2_header
        events = list(cast.events())
    assert header["version"] == 2
    assert isinstance(header["width"], int)
    assert isinstance(header["height"], int)
    assert isinstance(header["timestamp"], int)
    times = [event[0] for event in events]
    assert times == sorted(times)
    for event in events:
        assert isinstance(event[0], float | int)
        assert event[1] in ("o", "i", "r")
        assert isinstance(event[2], str)
    return header, events


class Recorded(t.NamedTuple):
    path: Path
    mode: int
    size: int
    text: str
    header: dict[str, t.Any]
    events: list[list[t.Any]]


def _read_recording(directory: Path) -> Recorded:
    """The one recording in ``directory`` (blocking: call it in a thread)."""
    (path,) = directory.glob("*.cast")
    header, events = _events(path)
    stat = path.stat()
    return Recorded(path, stat.st_mode, stat.st_size, path.read_text(), header, events)


def _typed(text: str) -> str:
    """A shell word that prints ``text`` without containing it (so the echo does not)."""
    middle = len(text) // 2
    return f"'{text[:middle]}''{text[middle:]}'"


# -- redaction alone ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (f"token {FAKE_GITHUB_TOKEN} end", "token  end"),
        (f"key={FAKE_AWS_KEY}", "key="),
        (f"Authorization: Bearer {FAKE_JWT}", "Authorization: Bearer "),
        ("export DB_PASSWORD=hunter2xyz", "export DB_PASSWORD="),
        ('{"client_secret": "s3cr3t value"}', '{"client_secret": }'),
        # Greedy: an assignment's value runs to the next space (a password may contain '&').
        ("https://hub.example/api?token=abcdef123456&x=1 ok", "https://hub.example/api?token= ok"),
        (f"the demo password is {LITERAL}!", "the demo password is !"),
        ("PIN: 1234", "PIN: "),
    ],
)
def test_redaction_of_builtin_formats_literals_and_operator_patterns(text: str, kept: str) -> None:
    redactor = Redactor([r"(?P<keep>PIN: )\d+"], [LITERAL])
    redacted = redactor.redact(text)
    assert REDACTED in redacted
    assert redacted.replace(REDACTED, "") == kept


#: Escape sequences a terminal shows nothing for: a colour, bold off, a cursor move, a title.
SPLITTERS = ("\x1b[1;31m", "\x1b[0m", "\x1b[2C", "\x1b]0;title\x07", "\x1b(B")


@pytest.mark.parametrize("splitter", SPLITTERS)
def test_a_secret_split_by_escape_sequences_is_redacted_as_shown(splitter: str) -> None:
    # `printf 'ghp_A1b2\e[1;31mC3d4...'` shows the whole token on the screen; so would a
    # recording's player, were the pieces written.
    redactor = Redactor([], [LITERAL])
    for secret in (FAKE_GITHUB_TOKEN, FAKE_AWS_KEY, LITERAL):
        for cut in (1, len(secret) // 2, len(secret) - 1):
            text = f"before {secret[:cut]}{splitter}{secret[cut:]} after\r\n"
            redacted = redactor.redact(text)
            shown = re.sub(r"\x1b(?:\[[0-9;]*[A-Za-z]|\][^\x07]*\x07|\([A-Z])", "", redacted)
            assert secret[:cut] not in shown or cut < 4, (secret, cut, redacted)
            assert secret[cut:] not in shown or len(secret) - cut < 4, (secret, cut, redacted)
            assert REDACTED in shown
            # What the terminal was told besides the secret stays: the escape, the words.
            assert splitter in redacted
            assert shown.startswith("before ")
            assert shown.endswith(" after\r\n")


def test_an_invalid_operator_pattern_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match=r"'\('"):
        Redactor(["("])


def test_record_must_be_a_boolean() -> None:
    assert parse_tool_type("t", {"record": True}).record is True
    assert parse_tool_type("t", {}).record is False
    with pytest.raises(ToolTypeError, match="'record' must be true or false"):
        parse_tool_type("t", {"record": "yes"})


async def test_a_secret_split_across_output_chunks_never_reaches_the_file(tmp_path: Path) -> None:
    recorder = Recorder(
        tmp_path,
        max_bytes=10**7,
        redactor=Redactor(),
        record_input=False,
        log=logging.getLogger("test"),
    )
    line = f"$ cat token\r\n{FAKE_GITHUB_TOKEN} and {FAKE_JWT}\r\n"
    for cut in range(1, len(line)):
        recording = recorder.start(
            owner="alice", instance="i", session_id=f"s{cut}", title="t", shell="/bin/sh"
        )
        recording.output(line[:cut])
        await asyncio.sleep(0)
        recording.output(line[cut:])
        await asyncio.wrap_future(recording.close())
        data = recording.path.read_text()
        assert FAKE_GITHUB_TOKEN[4:20] not in data, cut
        assert FAKE_JWT[10:30] not in data, cut
        assert "".join(event[2] for event in _events(recording.path)[1]) == line.replace(
            FAKE_GITHUB_TOKEN, REDACTED
        ).replace(FAKE_JWT, REDACTED)


async def test_a_slow_disk_never_holds_the_event_loop_and_memory_stays_bounded(
    tmp_path: Path,
) -> None:
    # A pipe nobody reads yet stands for a disk that stops answering: writes block once its
    # buffer (64 KiB) is full.
    fifo = tmp_path / "slow.cast"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    recording = Recording(
        fifo,
        await asyncio.to_thread(open, fifo, "wb"),
        redactor=Redactor(),
        max_bytes=10**9,
        record_input=False,
        log=logging.getLogger("test"),
    )
    line = "x" * 8191 + "\n"
    slowest = 0.0

    def read_all() -> bytes:
        os.set_blocking(reader, True)
        chunks = []
        while chunk := os.read(reader, 1 << 16):
            chunks.append(chunk)
        os.close(reader)
        return b"".join(chunks)

    try:
        for _ in range(2000):  # 16 MiB while the writer is stuck
            started = time.perf_counter()
            recording.output(line)
            slowest = max(slowest, time.perf_counter() - started)
        queued = recording._queued
    finally:
        closed = recording.close()
        data = await asyncio.to_thread(read_all)
        await asyncio.wrap_future(closed)
    # The writer thread competes for the GIL (switch interval 5 ms), never the disk.
    assert slowest < 0.05
    assert queued <= MAX_QUEUED
    assert b"recording skipped" in data
    assert len(data) < 8 * 1024 * 1024


# -- sessions that record -------------------------------------------------------------------------


@pytest.fixture
def tool_types() -> dict[str, t.Any]:
    return {**TOOL_TYPES, "recorded": {"shell": ["/bin/sh"], "record": True}}


@pytest.fixture
def recording_dir(tmp_path: Path) -> Path:
    return tmp_path / "recordings"


@pytest.fixture
def extension_config(recording_dir: Path) -> dict[str, t.Any]:
    return {"recording_dir": str(recording_dir), "redact_literals": [LITERAL]}


async def test_a_recorded_session_is_a_redacted_asciicast_file(
    alice: Api, make_instance: InstanceFactory, recording_dir: Path
) -> None:
    container = make_instance(tool="recorded")
    model, term = await alice.terminal(container.name)
    term.send("set_size", 30, 100)
    await term.size_becomes("30 100")
    secrets = (FAKE_GITHUB_TOKEN, FAKE_AWS_KEY, FAKE_JWT, LITERAL)
    for secret in secrets:
        assert await term.run(f"echo {_typed(secret)}") == f"{secret}\r\n"  # the user sees it
    # A secret written in two pieces, a moment apart (two output chunks).
    half = len(FAKE_GITHUB_TOKEN) // 2
    split = f"printf {FAKE_GITHUB_TOKEN[:half]}; sleep 0.3; echo {FAKE_GITHUB_TOKEN[half:]}"
    assert await term.run(split) == f"{FAKE_GITHUB_TOKEN}\r\n"
    assert await term.run("echo password=hunter2") == "password=hunter2\r\n"
    await alice.call("DELETE", "sessions", model["id"])

    path, mode, _, _, header, events = await asyncio.to_thread(_read_recording, recording_dir)
    assert path.name.startswith(f"alice_{container.name}_{model['id']}_")
    assert mode & 0o077 == 0
    assert (header["width"], header["height"]) == (80, 24)
    assert ["r", "100x30"] in [event[1:] for event in events]
    output = "".join(event[2] for event in events if event[1] == "o")
    assert "password=hunter2" not in output
    assert f"password={REDACTED}" in output
    for secret in secrets:
        assert secret not in output
        assert secret[2:-2] not in output
    assert output.count(REDACTED) >= 6
    assert not [event for event in events if event[1] == "i"]  # input is not recorded


class TestLimits:
    @pytest.fixture
    def extension_config(self, recording_dir: Path) -> dict[str, t.Any]:
        return {"recording_dir": str(recording_dir), "recording_max_bytes": 4096}

    async def test_the_recording_stops_at_its_size_with_a_marker(
        self, alice: Api, make_instance: InstanceFactory, recording_dir: Path
    ) -> None:
        model, term = await alice.terminal(make_instance(tool="recorded").name)
        await term.run("seq 1 5000 | tail -n 3")
        await term.run("seq 1 3000")
        assert await term.run("echo still working") == "still working\r\n"
        await alice.call("DELETE", "sessions", model["id"])
        recorded = await asyncio.to_thread(_read_recording, recording_dir)
        assert recorded.size <= 4096
        events = recorded.events
        assert "recording stopped" in events[-1][2]


class TestInput:
    @pytest.fixture
    def extension_config(self, recording_dir: Path) -> dict[str, t.Any]:
        return {"recording_dir": str(recording_dir), "recording_input": True}

    async def test_input_is_recorded_when_configured_and_redacted(
        self, alice: Api, make_instance: InstanceFactory, recording_dir: Path
    ) -> None:
        model, term = await alice.terminal(make_instance(tool="recorded").name)
        await term.run(f": {FAKE_GITHUB_TOKEN}")
        await alice.call("DELETE", "sessions", model["id"])
        recorded = await asyncio.to_thread(_read_recording, recording_dir)
        typed = "".join(event[2] for event in recorded.events if event[1] == "i")
        assert f": {REDACTED}" in typed
        assert FAKE_GITHUB_TOKEN not in recorded.text


class TestUnwritableDirectory:
    @pytest.fixture
    def extension_config(self, tmp_path: Path) -> dict[str, t.Any]:
        (tmp_path / "a-file").write_text("not a directory")
        return {"recording_dir": str(tmp_path / "a-file" / "recordings")}

    async def test_the_session_does_not_start_and_says_why(
        self, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance(tool="recorded")
        status, body = await alice.status("POST", "sessions", body={"instance": container.name})
        assert status == 500
        assert "recording could not be started" in body["message"]
        assert "a-file" not in json.dumps(body)  # no server paths for the user
        assert await alice.call("GET", "sessions") == []
        assert await asyncio.to_thread(exec_count, container) == 0
        # Tool types that do not record are unaffected.
        await alice.terminal(make_instance().name)


class TestInvalidPattern:
    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"redact_patterns": ["(unclosed"]}

    def test_an_invalid_pattern_disables_the_extension(self, tool_app: ToolTerminalApp) -> None:
        assert tool_app.session_manager is None
