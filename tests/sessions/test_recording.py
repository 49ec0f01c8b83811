"""Recording: asciicast v2 files of the sessions of tool types that record, secrets redacted."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import re
import subprocess
import sys
import time
import typing as t
from pathlib import Path

import pytest
from asciinema.asciicast import open_from_url

from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.recording import MAX_QUEUED, Recorder, Recording, list_recordings
from jupyter_tool_terminal.redaction import (
    HOLD_SECONDS,
    REDACTED,
    Redactor,
    Released,
    StreamRedactor,
    secret_environment_values,
)
from jupyter_tool_terminal.tooltypes import ToolTypeError, parse_tool_type

from ..conftest import TOOL_TYPES, Api, InstanceFactory, exec_count

FAKE_GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
FAKE_AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
FAKE_JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
LITERAL = "correct-horse-battery-staple"


def _events(path: Path, *, play: bool = True) -> tuple[dict[str, t.Any], list[list[t.Any]]]:
    """Read a recording with asciinema's own reader, check the v2 format; ``play``: also
    have the ``asciinema`` command replay it (`asciinema cat`, half a second each)."""
    if play:
        command = [sys.executable, "-m", "asciinema", "cat", str(path)]
        played = subprocess.run(command, capture_output=True, check=False)
        assert played.returncode == 0, played.stderr
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


def _random_part(length: int, alphabet: str = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0") -> str:
    """Token-like characters (repeating a fixed alphabet: the tests need no real randomness)."""
    return (alphabet * (length // len(alphabet) + 1))[:length]


#: Formats users paste most in 2026, each built from pieces (no scanner flags this file).
FORMATS_OF_2026 = {
    "OpenAI (legacy)": "sk-" + _random_part(20) + "T3BlbkFJ" + _random_part(20),
    "OpenAI (project)": "sk-proj-" + _random_part(74) + "T3BlbkFJ" + _random_part(74),
    "OpenAI (service account)": "sk-svcacct-" + _random_part(60) + "-" + _random_part(40),
    "Anthropic": "sk-ant-api03-" + _random_part(93) + "AA",
    "Anthropic (admin)": "sk-ant-admin01-" + _random_part(93) + "AA",
    "Hugging Face": "hf_" + _random_part(34, "AbCdEfGhIjKlMnOpQrStUvWxYz"),
    "GitHub classic": FAKE_GITHUB_TOKEN,
    "GitHub fine-grained": "github_pat_" + _random_part(22) + "_" + _random_part(59),
    "GitLab": "glpat-" + _random_part(20),
    "Google API key": "AIza" + _random_part(35),
    "Google OAuth access token": "ya29." + _random_part(60),
    "Slack bot": "xoxb-" + "1234567890-1234567890123-" + _random_part(24),
    "Slack app": "xapp-1-A0123456789-1234567890123-" + _random_part(64, "0123456789abcdef"),
    "Slack webhook": "https://hooks.slack.com/services/T0123ABCD/B0123ABCD/" + _random_part(24),
    "Stripe secret": "sk_live_" + _random_part(24),
    "Stripe restricted": "rk_test_" + _random_part(24),
    "Stripe webhook secret": "whsec_" + _random_part(32),
    "npm": "npm_" + _random_part(36),
    "PyPI": "pypi-AgEIcHlwaS5vcmc" + _random_part(60),
    "Docker Hub": "dckr_pat_" + _random_part(27),
    "AWS access key id": FAKE_AWS_KEY,
    "JWT": FAKE_JWT,
}


@pytest.mark.parametrize("name", FORMATS_OF_2026)
def test_the_formats_users_paste_most_are_redacted(name: str) -> None:
    secret = FORMATS_OF_2026[name]
    redacted = Redactor().redact(f"$ echo {secret} | wc -c\r\n")
    assert redacted == f"$ echo {REDACTED} | wc -c\r\n"


def test_a_private_key_is_redacted_with_its_body() -> None:
    body = [_random_part(64), _random_part(64, "Zz9Yy8Xx7Ww6"), "AbCd" + "=" * 4]
    text = "\r\n".join(
        ["-----BEGIN OPENSSH PRIVATE KEY-----", *body, "-----END OPENSSH PRIVATE KEY-----", "$ "]
    )
    redacted = Redactor().redact(text)
    for line in body:
        assert line not in redacted
    assert redacted.endswith("-----END OPENSSH PRIVATE KEY-----\r\n$ ")


#: Ordinary output that must stay as it is.
ORDINARY_LINES = (
    "drwxr-xr-x  2 student student 4096 Dec  1 12:00 skeleton-keys\r\n",
    "Successfully installed scikit-learn-1.5.2 huggingface_hub-0.26.2 sk-video-1.1.10\r\n",
    "commit 3f2a9c4be1d07e5a6b8c9d0e1f2a3b4c5d6e7f80\r\n",
    "id 123e4567-e89b-12d3-a456-426614174000 at https://example.org/docs?page=2&sort=asc\r\n",
    "from huggingface_hub import hf_hub_download; desk-top ask-for-help task-runner\r\n",
    "Password: \r\n",
    "/usr/lib/x86_64-linux-gnu/libssl.so.3 AIzawa sk-ant ghp_short\r\n",
    "base64: QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=\r\n",
)


@pytest.mark.parametrize("line", ORDINARY_LINES)
def test_ordinary_output_is_not_redacted(line: str) -> None:
    assert Redactor().redact(line) == line


def test_the_values_of_secret_environment_variables() -> None:
    environment = {
        "GITHUB_TOKEN": "not-a-known-format-1",
        "db_password": "hunter2hunter2",
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "MY_CREDENTIALS": "user:pa55word",
        "API_KEY": "short",  # under 8 characters: too common to hide
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/home/student",
    }
    assert sorted(secret_environment_values(environment)) == [
        "hunter2hunter2",
        "not-a-known-format-1",
        "user:pa55word",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ]
    redactor = Redactor().for_environment(environment)
    text = "token not-a-known-format-1, login user:pa55word, path /usr/bin short\n"
    assert redactor.redact(text) == f"token {REDACTED}, login {REDACTED}, path /usr/bin short\n"
    # The redactor it came from is unchanged.
    assert Redactor().redact(text) == text


def test_a_screen_row_wrapped_at_its_width_is_one_line() -> None:
    # What an agent reads from a screen model: rows of the terminal's width, soft wraps as LF.
    row = "$ echo " + FAKE_GITHUB_TOKEN
    screen = f"{row[:20]}\n{row[20:]}\n"
    assert row[20:] in Redactor().redact(screen)  # as plain text: two lines
    # Each row keeps its place: the secret's part on each is hidden.
    assert Redactor().redact(screen, width=20) == f"$ echo {REDACTED}\n{REDACTED}\n"


def test_a_stream_gives_out_each_piece_once_no_secret_can_still_be_forming_in_it() -> None:
    stream = Redactor().stream(width=80)
    # A whole line goes out at once; the start of the next is held while it may be a secret.
    assert stream.feed("total 48\r\n$ cat t", 1.0) == [Released(0, 1.0, "total 48\r\n", False)]
    assert stream.feed("oken: " + FAKE_GITHUB_TOKEN[:9], 1.1) == []
    assert stream.holding
    released = stream.feed(FAKE_GITHUB_TOKEN[9:] + " ok\r\n", 1.2)
    assert released == [
        Released(0, 1.0, "$ cat t", True),
        Released(1, 1.1, f"oken: {REDACTED}", True),
        Released(2, 1.2, " ok\r\n", True),
    ]
    # Held text goes out once its oldest piece is HOLD_SECONDS old, as it is by then.
    assert stream.feed("$ ", 2.0) == []
    assert stream.expire(2.0 + HOLD_SECONDS - 0.01) == []
    assert stream.expire(2.0 + HOLD_SECONDS) == [Released(3, 2.0, "$ ", True)]
    assert not stream.holding


def _recording(
    directory: Path, *, record_input: bool = False, cols: int = 80, session_id: str = "s"
) -> Recording:
    """A recording started as a session's would be (blocking: it creates the file)."""
    recorder = Recorder(
        directory=str(directory),
        max_bytes=10**7,
        redactor=Redactor(),
        record_input=record_input,
        log=logging.getLogger("test"),
    )
    return recorder.start(
        owner="alice", instance="i", session_id=session_id, title="t", shell="/bin/sh", cols=cols
    )


def _visible(output: str) -> str:
    """What a recording's output shows, without line breaks and terminal controls."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x1f]", "", output)


def _leaks(secret: str, text: str, window: int = 8) -> list[str]:
    """The pieces of ``secret`` (``window`` characters or more) found in ``text``."""
    return [
        secret[i : i + window]
        for i in range(len(secret) - window + 1)
        if secret[i : i + window] in text
    ]


# Output of the real shells, as they echoed ": xxx... TOKEN end" typed one key at a time at an
# 80-column terminal (captured from the test image): busybox ash wraps with CR CR LF, bash
# (no terminfo) scrolls the line sideways and rewrites it with spaces and backspaces.
TYPED_LINE = ": " + "x" * 60 + " " + FAKE_GITHUB_TOKEN + " end"
ASH_ECHO = ["/ # ", *TYPED_LINE[:76], "\r\r\n", *TYPED_LINE[76:], "\r\n/ # "]
BASH_ECHO = [
    "bash-5.2# ",
    *TYPED_LINE[:67],
    "\r<" + "x" * 45 + " ghp_A" + " " * 25 + "\b" * 25,
    *"1b2C3d4E5f6G7h8I9j0K1l2M3",
    "\r<" + "x" * 19 + " ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n" + " " * 25 + "\b" * 25,
    *"4O5p6Q7r8 end",
    "\r\nbash-5.2# ",
]


@pytest.mark.parametrize("echo", [ASH_ECHO, BASH_ECHO], ids=["ash", "bash"])
async def test_a_token_typed_on_a_line_the_shell_wraps_is_redacted(
    tmp_path: Path, echo: list[str]
) -> None:
    recording = _recording(tmp_path)
    for piece in echo:
        recording.output(piece)
        await asyncio.sleep(0)  # each piece its own event, as they arrive
    await asyncio.wrap_future(recording.close())
    output = "".join(event[2] for event in _events(recording.path)[1])
    assert _leaks(FAKE_GITHUB_TOKEN, _visible(output)) == [], output
    assert REDACTED in output
    assert output.endswith(" end\r\n" + echo[-1].removeprefix("\r\n"))


async def test_one_sessions_recordings_started_in_the_same_second_are_two_files(
    tmp_path: Path,
) -> None:
    """A session taken over goes on in a new recording under its own id, which may start in
    the second its first one did: each is a file of its own, both listed with the session."""
    # Three started at once: at least two of them in the same second.
    recordings = [_recording(tmp_path) for _ in range(3)]
    for recording in recordings:
        await asyncio.wrap_future(recording.close())
    names = sorted(recording.path.stem for recording in recordings)
    assert len(set(names)) == 3, names
    listed = list_recordings(tmp_path, "alice")
    assert sorted(item["id"] for item in listed) == names
    assert [item["session"] for item in listed] == ["s"] * 3


async def test_typed_input_is_redacted_as_one_line(tmp_path: Path) -> None:
    recording = _recording(tmp_path, record_input=True)
    for key in f"echo {FAKE_GITHUB_TOKEN[:10]}x\x7f{FAKE_GITHUB_TOKEN[10:]}\r":
        recording.input(key)
        await asyncio.sleep(0)
    await asyncio.wrap_future(recording.close())
    typed = "".join(event[2] for event in _events(recording.path)[1] if event[1] == "i")
    assert _leaks(FAKE_GITHUB_TOKEN, typed) == [], typed
    assert typed.startswith("echo ")


async def test_a_secret_typed_is_hidden_in_an_echo_that_never_shows_it_whole(
    tmp_path: Path,
) -> None:
    # A line editor scrolling sideways may show a pasted token only in parts, each on a
    # rewrite of the line: the keys typed hold it whole.
    recording = _recording(tmp_path)
    recording.input(f": {FAKE_GITHUB_TOKEN}")
    recording.output("$ : " + FAKE_GITHUB_TOKEN[:30])
    await asyncio.sleep(0)
    recording.input("\r")
    recording.output("\r<" + FAKE_GITHUB_TOKEN[24:] + "\x1b[K\r\n$ ")
    await asyncio.wrap_future(recording.close())
    output = "".join(event[2] for event in _events(recording.path)[1])
    assert _leaks(FAKE_GITHUB_TOKEN, _visible(output)) == [], output
    assert output.startswith("$ : ")
    assert output.endswith("\r\n$ ")


async def test_events_are_written_in_arrival_order_with_their_arrival_times(
    tmp_path: Path,
) -> None:
    recording = _recording(tmp_path)
    started = time.monotonic()
    arrivals = []

    async def at(moment: float, call: t.Callable[[], None]) -> None:
        await asyncio.sleep(max(0.0, started + moment - time.monotonic()))
        arrivals.append(time.monotonic() - recording._started)
        call()

    await at(0.0, lambda: recording.output("BEFORE-"))
    await at(0.3, lambda: recording.resize(30, 100))
    await at(0.6, lambda: recording.output("RESIZE"))
    await at(0.9, lambda: recording.output("AFTER\r\n"))
    await at(1.2, lambda: recording.output("$ "))
    await asyncio.wrap_future(recording.close())
    events = _events(recording.path)[1]
    assert [event[1:] for event in events] == [
        ["o", "BEFORE-"],
        ["r", "100x30"],
        ["o", "RESIZE"],
        ["o", "AFTER\r\n"],
        ["o", "$ "],
    ]
    for event, arrival in zip(events, arrivals, strict=True):
        # Within a frame (a display's, 20 ms: the writer thread may hold the GIL for 5 ms).
        assert abs(event[0] - arrival) < 0.02, (events, arrivals)


async def test_held_output_reaches_the_file_within_a_bounded_time(tmp_path: Path) -> None:
    # A prompt waits for the user with no line end: it must not wait with it.
    recording = _recording(tmp_path)
    recording.output("$ ")
    recording.output("sleep 10")  # a word that may be the start of a secret is held too
    started = time.monotonic()
    deadline = started + HOLD_SECONDS + 2
    # The writer thread tells no one when it writes: what is tested is the file.
    while "sleep 10" not in recording.path.read_text() and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    waited = time.monotonic() - started
    await asyncio.wrap_future(recording.close())
    assert "sleep 10" in recording.path.read_text()
    assert waited < HOLD_SECONDS + 1


def test_record_must_be_a_boolean() -> None:
    assert parse_tool_type("t", {"record": True}).record is True
    assert parse_tool_type("t", {}).record is False
    with pytest.raises(ToolTypeError, match="'record' must be true or false"):
        parse_tool_type("t", {"record": "yes"})


async def test_a_secret_split_across_output_chunks_never_reaches_the_file(tmp_path: Path) -> None:
    line = f"$ cat token\r\n{FAKE_GITHUB_TOKEN} and {FAKE_JWT}\r\n"
    for cut in range(1, len(line)):
        recording = _recording(tmp_path, session_id=f"s{cut}")
        recording.output(line[:cut])
        await asyncio.sleep(0)
        recording.output(line[cut:])
        await asyncio.wrap_future(recording.close())
        data = recording.path.read_text()
        assert FAKE_GITHUB_TOKEN[4:20] not in data, cut
        assert FAKE_JWT[10:30] not in data, cut
        events = _events(recording.path, play=cut == 1)[1]
        assert "".join(event[2] for event in events) == line.replace(
            FAKE_GITHUB_TOKEN, REDACTED
        ).replace(FAKE_JWT, REDACTED)


async def test_a_failure_in_redaction_ends_the_recording_and_writes_nothing_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    recording = _recording(tmp_path)

    def broken(*_: t.Any) -> t.NoReturn:
        raise ValueError("a bug")

    monkeypatch.setattr(StreamRedactor, "feed", broken)
    recording.output(f"{FAKE_GITHUB_TOKEN}\r\n")
    await asyncio.wrap_future(recording.close())  # resolves, does not raise
    assert FAKE_GITHUB_TOKEN not in recording.path.read_text()
    assert "Tool terminal recording" in caplog.text
    _events(recording.path)


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
    # At most a batch in the writer and a full queue behind it (JSON adds 0.3% to these lines).
    assert len(data) < 2 * MAX_QUEUED * 1.01
    # What was written is valid asciicast (behind the header the Recorder would have written).
    cast = tmp_path / "slow-as-written.cast"
    header = {"version": 2, "width": 80, "height": 24, "timestamp": 0}
    cast.write_bytes(json.dumps(header).encode() + b"\n" + data)
    events = (await asyncio.to_thread(_events, cast))[1]
    assert any("recording skipped" in event[2] for event in events)


# -- sessions that record -------------------------------------------------------------------------


@pytest.fixture
def tool_types() -> dict[str, t.Any]:
    return {
        **TOOL_TYPES,
        "recorded": {"shell": ["/bin/sh"], "record": True},
        "recorded-bash": {"shell": ["/bin/bash"], "record": True},
    }


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


async def _terminal_of_80_columns(alice: Api, instance: str) -> tuple[dict[str, t.Any], t.Any]:
    """A session on ``instance`` whose terminal is 24x80 (where ash wraps at column 80)."""
    model, term = await alice.terminal(instance)
    term.send("set_size", 24, 80)
    await term.size_becomes("24 80")
    return model, term


@pytest.mark.parametrize("shell", ["/bin/sh", "/bin/bash"])
@pytest.mark.parametrize("typing", ["pasted", "key by key"])
async def test_a_token_typed_across_column_80_of_a_real_shell_is_redacted(
    alice: Api, make_instance: InstanceFactory, recording_dir: Path, shell: str, typing: str
) -> None:
    tool = "recorded" if shell == "/bin/sh" else "recorded-bash"
    container = make_instance(tool=tool)
    found = await asyncio.to_thread(container.exec_run, ["test", "-x", shell])
    if found.exit_code != 0:
        pytest.skip("the test image has no bash (the host has no bash-static)")
    model, term = await _terminal_of_80_columns(alice, container.name)
    line = ": " + "x" * 60 + " " + FAKE_GITHUB_TOKEN + " end"
    if typing == "pasted":
        term.send("stdin", line)
    else:
        for key in line:
            term.send("stdin", key)
    await term.expect(r"end")  # the shell echoed the whole line
    term.send("stdin", "\r")
    assert await term.run("echo typed") == "typed\r\n"
    await alice.call("DELETE", "sessions", model["id"])
    recorded = await asyncio.to_thread(_read_recording, recording_dir)
    output = "".join(event[2] for event in recorded.events if event[1] == "o")
    assert "xxxxxx " in output, output  # the line is there
    assert _leaks(FAKE_GITHUB_TOKEN, _visible(output)) == [], output
    assert REDACTED in output


async def test_a_resize_and_slow_output_keep_their_order_and_times(
    alice: Api, make_instance: InstanceFactory, recording_dir: Path
) -> None:
    model, term = await _terminal_of_80_columns(alice, make_instance(tool="recorded").name)
    term.send("stdin", "printf BEF''ORE-; sleep 1.5; printf 'AF''TER\\n'\r")
    await term.expect(r"\nBEFORE-")
    term.send("set_size", 30, 100)
    await term.expect(r"BEFORE-AFTER")
    await alice.call("DELETE", "sessions", model["id"])
    events = (await asyncio.to_thread(_read_recording, recording_dir)).events
    before = next(i for i, e in enumerate(events) if e[1] == "o" and "BEFORE-" in e[2])
    resize = next(i for i, e in enumerate(events) if e[1:] == ["r", "100x30"])
    after = next(i for i, e in enumerate(events) if e[1] == "o" and "AFTER" in e[2])
    assert before < resize < after, events
    assert "AFTER" not in events[before][2]
    assert events[after][0] - events[before][0] > 1.2, events


async def test_keys_typed_in_vi_are_events_at_the_times_they_were_echoed(
    alice: Api, make_instance: InstanceFactory, recording_dir: Path
) -> None:
    model, term = await _terminal_of_80_columns(alice, make_instance(tool="recorded").name)
    term.send("stdin", "vi /tmp/notes\r")
    await term.expect(r"/tmp/notes")
    term.send("stdin", "i")
    echoed = []
    for key in "QJZ":
        term.output = ""
        term.send("stdin", key)
        await term.expect(key)
        echoed.append(time.monotonic())
        await asyncio.sleep(0.5)  # the user types slowly (this is the scenario, not a wait)
    await alice.call("DELETE", "sessions", model["id"])  # vi and all
    events = (await asyncio.to_thread(_read_recording, recording_dir)).events
    typed = [next(e for e in events if e[1] == "o" and key in _visible(e[2])) for key in "QJZ"]
    assert len({id(event) for event in typed}) == 3, events  # one event each
    for event, following in itertools.pairwise(typed):
        assert 0.4 < following[0] - event[0] < 1.5, typed
    assert abs((typed[2][0] - typed[0][0]) - (echoed[2] - echoed[0])) < 0.1


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


async def test_users_list_and_fetch_their_own_recordings_only(
    alice: Api, bob: Api, make_container: InstanceFactory, jp_fetch: t.Any
) -> None:
    container = make_container(tool="recorded")
    model, term = await alice.terminal(container.name)
    assert await term.run("echo recorded-$((2*21))") == "recorded-42\r\n"
    await alice.call("DELETE", "sessions", model["id"])
    listed = await alice.call("GET", "recordings")
    assert [(r["instance"], r["session"]) for r in listed] == [(container.name, model["id"])]
    (recording,) = listed
    assert recording["id"].startswith(f"alice_{container.name}_{model['id']}_")
    assert recording["size"] > 0
    assert recording["started"].endswith("Z")
    response = await jp_fetch(
        "tool-terminal", "api", "recordings", recording["id"], headers=alice.headers
    )
    assert response.headers["Content-Type"] == "application/x-asciicast"
    assert response.headers["Content-Disposition"] == (
        f'attachment; filename="{recording["id"]}.cast"'
    )
    lines = response.body.decode().splitlines()
    header = json.loads(lines[0])
    assert header["version"] == 2
    assert header["jupyter_tool_terminal"]["owner"] == "alice"
    assert "recorded-42" in "".join(json.loads(line)[2] for line in lines[1:])
    # Another user's, or an unknown one: the same 403; nobody else's in the list.
    assert await bob.call("GET", "recordings") == []
    for who, name in ((bob, recording["id"]), (alice, "no_such_recording_at-all"), (alice, "..")):
        status, body = await who.status("GET", "recordings", name)
        assert status == 403, name
        assert body["message"] == "No such recording for this user."
