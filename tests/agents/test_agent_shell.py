"""An agent's commands in a tool terminal's own shell: their end, exit code and output, in
busybox ash, bash and dash, against a real server and the real engine."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
import statistics
import time
import typing as t
import uuid
from pathlib import Path

import docker
import pytest

from jupyter_tool_terminal.agents import echo, shell
from jupyter_tool_terminal.agents.shell import (
    CURSOR_AT_START,
    CURSOR_QUERY,
    MARKER_OSC,
    AgentShell,
    AgentShellError,
    _Run,
    typed_command,
)
from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.manager import ToolTerminalManager
from jupyter_tool_terminal.redaction import REDACTED, Redactor
from jupyter_tool_terminal.runtime.docker import DockerRuntime
from jupyter_tool_terminal.session import ToolTerminal

from ..conftest import DEBIAN_IMAGE, TEST_IMAGE, Api, InstanceFactory, both_runtimes, rss_mib

SECRET = "s3cr3t-agent-value-0042"
#: shell name -> (tool type, image)
SHELLS = {
    "ash": ("ash", TEST_IMAGE),
    "bash": ("bash", TEST_IMAGE),
    "dash": ("dash", DEBIAN_IMAGE),
}
AGENT_TOOL_TYPES: dict[str, t.Any] = {
    name: {
        "display_name": name,
        "shell": ["/bin/bash"] if name == "bash" else ["/bin/sh"],
        "env": {"MY_API_TOKEN": SECRET, "PLAIN": "visible-value"},
    }
    for name in SHELLS
}
AGENT_TOOL_TYPES["recorded"] = {
    "shell": ["/bin/sh"],
    "record": True,
    "env": {"MY_API_TOKEN": SECRET},
}
log = logging.getLogger("test_agent_shell")


class ShellUnderTest(AgentShell):
    """An agent's shell, attached through the manager as the tools attach it, with the session
    beside it for the tests to look into."""

    session: ToolTerminal


def agent_shell_of(
    manager: ToolTerminalManager, session: ToolTerminal, redactor: Redactor, **options: t.Any
) -> ShellUnderTest:
    """An agent's shell on ``session`` (an agent of the session's owner, as the tools make it)."""
    admission = manager.admit_agent(session.owner, "test-agent", session.id)
    shell = ShellUnderTest(manager, admission, redactor=redactor, log=log, **options)
    shell.session = session
    return shell


@pytest.fixture
def tool_types() -> dict[str, t.Any]:
    return AGENT_TOOL_TYPES


@pytest.fixture
def extension_config() -> dict[str, t.Any]:
    # Agent terminals have no WebSocket client: the attach timeout would end them.
    return {"attach_timeout": 0}


@pytest.fixture(params=list(SHELLS))
def shell_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def open_agent_shell(
    alice: Api,
    tool_app: ToolTerminalApp,
    make_container: InstanceFactory,
    shell: str,
    *,
    output_limit: int = 32768,
) -> ShellUnderTest:
    tool, image = SHELLS[shell]
    container = make_container(tool=tool, image=image)
    model = await alice.open_session(container.name)
    manager = tool_app.session_manager
    assert manager is not None
    session = manager.sessions[model["id"]]
    redactor = Redactor().for_environment(session.environment)
    agent = agent_shell_of(manager, session, redactor, output_limit=output_limit)
    await agent.start()
    return agent


OpenShell = t.Callable[..., t.Awaitable[ShellUnderTest]]


@pytest.fixture
def open_shell(
    alice: Api, tool_app: ToolTerminalApp, make_container: InstanceFactory
) -> t.Iterator[OpenShell]:
    """``await open_shell(shell)``: an agent's shell on a new session (closed after the test;
    the session ends with the server)."""
    opened: list[ShellUnderTest] = []

    async def open_(shell: str, output_limit: int = 32768) -> ShellUnderTest:
        agent = await open_agent_shell(
            alice, tool_app, make_container, shell, output_limit=output_limit
        )
        opened.append(agent)
        return agent

    yield open_
    for agent in opened:
        agent.close()


@pytest.fixture
def agent_shell(shell_name: str, request: pytest.FixtureRequest) -> str:
    """The shell under test (its image built if needed)."""
    if shell_name == "dash":
        request.getfixturevalue("debian_image")
    return shell_name


class TestCommands:
    async def test_the_owner_sees_the_command_typed_not_its_framing(
        self, open_shell: OpenShell, agent_shell: str, alice: Api
    ) -> None:
        agent = await open_shell(agent_shell)
        owner = await alice.connect(agent.session.id)
        assert agent.admission.watched
        for _ in range(2):  # (the second after the first's prompt)
            result = await agent.run_command("echo readable-$((6 * 7))", 10)
            assert result.output == "readable-42\n"
        # Several lines: the first, and "..." (here-document, read after the command line).
        result = await agent.run_command("for i in 1 2\ndo echo item$i\ndone", 10)
        assert result.output == "item1\nitem2\n"
        screen = await agent.read_screen()
        lines = screen["text"].split("\n")
        (shown,) = [row for row, line in enumerate(lines) if line.endswith("for i in 1 2 ...")]
        assert lines[shown + 1 : shown + 3] == ["item1", "item2"], lines
        assert len(lines[shown]) > len("for i in 1 2 ..."), lines  # (the prompt in front)
        typed = [line for line in lines if line.endswith("echo readable-$((6 * 7))")]
        assert len(typed) == 2, lines
        # After the prompt, as a person's command is; its output on the next row.
        assert all(len(line) > len("echo readable-$((6 * 7))") for line in typed), lines
        assert lines[lines.index(typed[0]) + 1] == "readable-42", lines
        assert not any("6973" in line or "printf" in line for line in lines), lines
        owner.ws.close()

    async def test_exit_codes(self, open_shell: OpenShell, agent_shell: str) -> None:
        agent = await open_shell(agent_shell)
        for command, code in [
            ("true", 0),
            ("false", 1),
            ("(exit 42)", 42),
            ("sh -c 'exit 3'", 3),
            ("test -d /nonexistent", 1),
        ]:
            result = await agent.run_command(command, 10)
            assert (result.exit_code, result.timed_out) == (code, False), (command, result)

    async def test_output_is_what_the_command_printed_only(
        self, open_shell: OpenShell, agent_shell: str
    ) -> None:
        agent = await open_shell(agent_shell)
        assert (await agent.run_command("true", 10)).output == ""
        result = await agent.run_command("echo one; echo two >&2; printf 'no newline'", 10)
        # No echo of the typed lines, no prompt, LF line ends, none of our markers.
        assert result.output == "one\ntwo\nno newline"
        assert not result.truncated

    async def test_state_carries_over_to_the_next_command(
        self, open_shell: OpenShell, agent_shell: str
    ) -> None:
        agent = await open_shell(agent_shell)
        result = await agent.run_command("cd /tmp && AGENT_VAR=kept; f() { echo fn:$1; }", 10)
        assert result.exit_code == 0
        result = await agent.run_command('pwd; echo "$AGENT_VAR"; f arg', 10)
        assert result.output == "/tmp\nkept\nfn:arg\n"

    async def test_quoting_multiline_and_long_commands_arrive_exactly(
        self, open_shell: OpenShell, agent_shell: str
    ) -> None:
        agent = await open_shell(agent_shell)
        tricky = "a$b`c\\d 'q' \"dq\" \\$HOME !! !x 100% \\\\"
        # One line (eval), and a here-document (with a tab, and several lines).
        result = await agent.run_command(f"printf '%s\\n' {shlex.quote(tricky)}", 10)
        assert result.output == tricky + "\n"
        result = await agent.run_command(f"cat <<'EOF'\n{tricky}\ttab\nEOF", 10)
        assert result.output == tricky + "\ttab\n"
        result = await agent.run_command("for i in 1 2 3\ndo\n  echo item$i\ndone", 10)
        assert result.output == "item1\nitem2\nitem3\n"
        word = "w" * 6000
        result = await agent.run_command(f"x={word}; echo ${{#x}}; echo {word}", 10)
        assert result.output == f"6000\n{word}\n"

    async def test_a_syntax_error_is_a_result(
        self, open_shell: OpenShell, agent_shell: str
    ) -> None:
        agent = await open_shell(agent_shell)
        result = await agent.run_command('echo "unclosed', 10)
        assert result.exit_code == 2
        assert not result.timed_out
        assert (await agent.run_command("echo fine", 10)).output == "fine\n"

    async def test_background_jobs_do_not_hold_the_command(
        self, open_shell: OpenShell, agent_shell: str
    ) -> None:
        agent = await open_shell(agent_shell)
        started = time.monotonic()
        result = await agent.run_command("sleep 100 &", 10)
        assert result.exit_code == 0
        assert time.monotonic() - started < 5
        assert (await agent.run_command("echo after", 10)).output.endswith("after\n")

    async def test_a_command_reads_what_send_keys_types(
        self, open_shell: OpenShell, agent_shell: str
    ) -> None:
        agent = await open_shell(agent_shell)
        ready = asyncio.Event()
        seen: list[str] = []

        def watch(text: str | None) -> None:
            seen.append(text or "")
            if "ready\r\n" in "".join(seen):
                ready.set()

        agent.session.output_listeners.append(watch)
        running = asyncio.ensure_future(
            agent.run_command('echo ready; read line; echo "got:$line"', 10)
        )
        await asyncio.wait_for(ready.wait(), 10)
        agent.send_keys("hello\r")
        result = await running
        assert result.exit_code == 0
        # What the terminal showed: its echo of the typed line, then the command's own output.
        assert result.output == "ready\nhello\ngot:hello\n"

    async def test_timeout_leaves_the_command_running_and_ctrl_c_recovers(
        self, open_shell: OpenShell, agent_shell: str
    ) -> None:
        agent = await open_shell(agent_shell)
        result = await agent.run_command("echo before; sleep 100", 1)
        assert result.timed_out
        assert result.exit_code is None
        assert result.output == "before\n"
        assert "keeps running" in result.note
        # Typed now it would go to the running command (and run whenever that ends).
        with pytest.raises(AgentShellError, match="previous command"):
            await agent.run_command("echo typed-into-sleep", 0.5)
        agent.send_keys("\x03")
        result = await agent.run_command("echo recovered", 10)
        assert (result.exit_code, result.output) == (0, "recovered\n")

    async def test_keys_sent_after_a_timeout_finish_the_command_and_free_the_shell(
        self, open_shell: OpenShell, agent_shell: str
    ) -> None:
        agent = await open_shell(agent_shell)
        result = await agent.run_command('read line; echo "got:$line"', 0.5)
        assert result.timed_out
        agent.send_keys("hello\r")
        # The next command waits for that one to end, then runs.
        result = await agent.run_command("echo next", 10)
        assert (result.exit_code, result.output) == (0, "next\n")

    async def test_a_forged_end_marker_does_not_end_the_command(
        self, open_shell: OpenShell, agent_shell: str
    ) -> None:
        agent = await open_shell(agent_shell)
        forged = (
            f"printf '\\033]{MARKER_OSC};E;0123456789abcdef;0\\007'; "
            f"printf '\\033]{MARKER_OSC};S;0123456789abcdef\\007'; "
            f"printf '\\033]{MARKER_OSC};E;;0\\007'; "
            "sleep 0.3; echo real-end; (exit 5)"
        )
        result = await agent.run_command(forged, 10)
        assert result.exit_code == 5
        assert result.output.endswith("real-end\n")

    async def test_secret_environment_values_are_hidden(
        self, open_shell: OpenShell, agent_shell: str
    ) -> None:
        agent = await open_shell(agent_shell)
        assert agent.session.environment["MY_API_TOKEN"] == SECRET
        result = await agent.run_command('echo "$MY_API_TOKEN"; echo "$PLAIN"', 10)
        assert SECRET not in result.output
        assert result.output == f"{REDACTED}\nvisible-value\n"
        screen = await agent.read_screen()
        assert SECRET not in screen["text"]

    async def test_the_owner_types_between_commands(
        self, open_shell: OpenShell, agent_shell: str, alice: Api
    ) -> None:
        agent = await open_shell(agent_shell)
        owner = await alice.connect(agent.session.id)
        owner.send("stdin", "cd /etc; OWNER_VAR=set\r")
        await owner.expect(r"OWNER_VAR=set")
        assert (await agent.run_command("pwd", 10)).output == "/etc\n"
        # Half a line left at the prompt is cleared, not prefixed to the agent's command.
        owner.send("stdin", "echo half-typed")
        await owner.expect("half-typed")
        result = await agent.run_command('echo "$OWNER_VAR"', 10)
        assert (result.exit_code, result.output) == (0, "set\n")
        owner.ws.close()

    async def test_read_screen_shows_the_visible_screen(
        self, open_shell: OpenShell, agent_shell: str
    ) -> None:
        agent = await open_shell(agent_shell)
        await agent.run_command("echo on-the-screen", 10)
        screen = await agent.read_screen()
        assert "on-the-screen" in screen["text"]
        assert (screen["rows"], screen["cols"]) == agent.session.screen.size
        row, col = screen["cursor"]
        assert 0 <= row < screen["rows"]
        assert 0 <= col < screen["cols"]

    async def test_exit_ends_the_terminal_and_later_calls_are_refused(
        self, open_shell: OpenShell, agent_shell: str
    ) -> None:
        agent = await open_shell(agent_shell)
        result = await agent.run_command("exit 3", 10)
        assert not result.timed_out
        assert result.exit_code is None
        assert "ended" in result.note
        with pytest.raises(AgentShellError, match="ended"):
            agent.send_keys("x")
        with pytest.raises(AgentShellError, match="ended"):
            await agent.run_command("true", 1)

    async def test_a_reset_shell_takes_commands_at_once(
        self, open_shell: OpenShell, agent_shell: str, tool_app: ToolTerminalApp
    ) -> None:
        agent = await open_shell(agent_shell)
        await agent.run_command("cd /tmp", 10)
        assert tool_app.session_manager is not None
        await tool_app.session_manager.reset_session(agent.session)
        result = await agent.run_command("pwd", 10)
        assert (result.exit_code, result.output) == (0, "/\n")

    async def test_many_lines_are_bounded_to_head_and_tail(
        self, open_shell: OpenShell, agent_shell: str
    ) -> None:
        agent = await open_shell(agent_shell, output_limit=1024)
        loop = 'i=0; while [ $i -lt 5000 ]; do i=$((i+1)); echo "n$i"; done'
        result = await agent.run_command(loop, 60)
        assert result.exit_code == 0
        assert result.truncated
        assert len(result.output) <= 1024
        head, _, tail = result.output.partition("\n[... ")
        assert head.startswith("n1\nn2\nn3\n")
        assert tail.endswith("n4999\nn5000\n")


@pytest.mark.parametrize("seen", [False, True], ids=["right-after-typing", "while-answered"])
async def test_an_agent_detaching_at_the_question_leaves_the_shell_at_its_prompt(
    open_shell: OpenShell,
    agent_shell: str,
    alice: Api,
    tool_app: ToolTerminalApp,
    monkeypatch: pytest.MonkeyPatch,
    seen: bool,
) -> None:
    """While the owner watches, the typed line asks where its echo lies and reads one line
    (``agents/echo.py``). An agent detaching between the question and its answer (its
    terminal's shell closed, as at the session's end or when its open races a revocation) must
    not leave the shell waiting in ``read`` for a person's Enter: the command runs, and the
    agent's shell detaches once the answer is typed."""
    agent = await open_shell(agent_shell)
    owner = await alice.connect(agent.session.id)
    assert agent.admission.watched
    asked = f"\x1b]{MARKER_OSC};P;"
    detached = asyncio.Event()

    def detach() -> None:
        if not detached.is_set():
            detached.set()
            agent.close()

    if seen:
        # After the agent's own listener: it saw the question, and its answer is on the way.
        came: list[str] = []

        def at_the_question(text: str | None) -> None:
            came.append(text or "")
            if asked in "".join(came):
                detach()

        agent.session.output_listeners.append(at_the_question)
    else:
        # Once the command's lines are typed: the question comes after, unseen by the agent.
        write = agent.session.write

        def typed_then_detach(text: str) -> bool:
            written = bool(write(text))
            if f"]{MARKER_OSC};P;" in text:
                detach()
            return written

        monkeypatch.setattr(agent.session, "write", typed_then_detach)
    running = asyncio.ensure_future(agent.run_command("echo after-$((6 * 7))", 30))
    await asyncio.wait_for(detached.wait(), 10)
    await running  # (given up by the close)
    await owner.expect("after-42")  # (the echo shows ``$((6 * 7))``: only the run shows 42)
    assert not agent.admission.attached  # (answered before the command ran: gone since)
    manager = tool_app.session_manager
    assert manager is not None
    successor = agent_shell_of(manager, agent.session, Redactor())
    await successor.start()
    try:
        result = await successor.run_command("echo next-$((6 * 7))", 10)
        assert (result.exit_code, result.output) == (0, "next-42\n")
    finally:
        successor.close()
    owner.ws.close()


async def test_a_closed_agent_shell_whose_question_never_comes_detaches_typing_nothing(
    open_shell: OpenShell,
    alice: Api,
    tool_app: ToolTerminalApp,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An agent's shell that closed before its command's question came waits for it (to answer
    it), but not for ever: typed into a line the owner left unfinished, the command never asks;
    the shell detaches after ``QUESTION_WAIT`` and types nothing more."""
    monkeypatch.setattr(shell, "QUESTION_WAIT", 0.05)
    agent = await open_shell("ash")
    owner = await alice.connect(agent.session.id)
    owner.send("stdin", "echo 'unfinished\r")
    await owner.expect("\n> ")  # (the shell waits for the rest of the quoted line)
    manager = tool_app.session_manager
    assert manager is not None
    detached = asyncio.Event()
    detach_reader = manager.detach_reader

    def detach_and_tell(admission: t.Any, reader: t.Any) -> None:
        detach_reader(admission, reader)
        detached.set()

    monkeypatch.setattr(manager, "detach_reader", detach_and_tell)
    keys = TypedKeys(agent.session, monkeypatch)
    keys.after_write.append(agent.close)  # (right after typing the command)
    result = await agent.run_command("echo never-run", 10)
    assert result.exit_code is None
    await asyncio.wait_for(detached.wait(), 10)
    assert not agent.admission.attached
    assert len(keys.typed) == 1, keys.typed  # (the command's lines only: no answer)
    owner.ws.close()


async def test_read_screen_right_after_a_large_output_shows_its_end(
    open_shell: OpenShell,
) -> None:
    """The screen model waits for a pause before it emulates a large burst (``BUSY_QUIET_TIME``,
    the flood's CPU savings); an agent reading the screen as soon as its command ended must
    still see the command's last line, not a screen from before its output."""
    agent = await open_shell("ash")
    for attempt in range(2):
        # (the echo of the typed line shows ``$((...))``: only the run shows the number)
        result = await agent.run_command(f"seq 1 20000; echo last-line-$(({attempt} + 40))", 30)
        assert result.output.endswith(f"19999\n20000\nlast-line-{attempt + 40}\n")
        screen = await agent.read_screen()
        assert f"20000\nlast-line-{attempt + 40}" in screen["text"], screen["text"]


class TypedKeys:
    """Records what an agent's shell types into its session; awaits the cursor answer."""

    def __init__(self, session: t.Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.typed: list[str] = []
        self.answered = asyncio.Event()
        self.after_write: list[t.Callable[[], None]] = []
        write = session.write

        def recording_write(text: str) -> bool:
            self.typed.append(text)
            if text == CURSOR_AT_START:
                self.answered.set()
            written = bool(write(text))
            while self.after_write:
                self.after_write.pop(0)()
            return written

        monkeypatch.setattr(session, "write", recording_write)

    def clear(self) -> None:
        self.typed.clear()
        self.answered.clear()


async def test_the_cursor_position_query_is_answered_only_without_the_owners_terminal(
    open_shell: OpenShell, alice: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = await open_shell("ash")
    keys = TypedKeys(agent.session, monkeypatch)
    asked = asyncio.Event()

    def watch_for_the_question(text: str | None) -> None:
        if text is not None and CURSOR_QUERY in text:
            asked.set()

    # After the agent's own listener: once this one has seen the question, so has the agent.
    agent.session.output_listeners.append(watch_for_the_question)
    await agent.run_command("true", 10)
    # The prompt, and its question, come after the command's end marker (when run_command
    # returns).
    await asyncio.wait_for(keys.answered.wait(), 10)
    owner = await alice.connect(agent.session.id)
    keys.clear()
    asked.clear()
    await agent.run_command("true", 10)
    await asyncio.wait_for(asked.wait(), 10)
    # The owner's terminal answers it; this test client does not, which costs 20 ms.
    assert CURSOR_AT_START not in keys.typed
    owner.ws.close()


async def test_a_prompt_read_after_the_next_command_was_typed_is_answered(
    open_shell: OpenShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shell asks at its prompt before the next command is typed, but the server reads
    that output after it was typed: the question is answered all the same (it was taken
    for the next command's output, and the line editor waited 20 ms)."""
    agent = await open_shell("ash")
    await agent.run_command("true", 10)
    keys = TypedKeys(agent.session, monkeypatch)
    listener = agent.session.output_listeners[-1]
    end_marker = f"\x1b]{MARKER_OSC};E;"
    read: list[str] = []
    held: list[str | None] = []
    answered_when_read: list[bool] = []

    def read_late() -> None:
        before = len(keys.typed)
        for text in held:
            listener(text)
        held.clear()
        answered_when_read.append(CURSOR_AT_START in keys.typed[before:])

    def late_prompt(text: str | None) -> None:
        """What comes from the question after the next command's end on is read once the
        line after it is typed."""
        if held:
            held.append(text)
            return
        if text is None or answered_when_read:
            listener(text)
            return
        read.append(text)
        end = "".join(read).rfind(end_marker)
        at = -1 if end < 0 else text.find(CURSOR_QUERY, max(end - sum(map(len, read[:-1])), 0))
        if at < 0:
            listener(text)
            return
        listener(text[:at])
        held.append(text[at:])
        keys.after_write.append(read_late)
        asked.set()

    asked = asyncio.Event()
    agent.session.output_listeners[-1] = late_prompt
    # BusyBox asks only when no input is waiting (an answer to the last prompt's question, read
    # late, may be): the next line is typed once a prompt asked.
    for _attempt in range(5):
        await agent.run_command("true", 10)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asked.wait(), 2)
            break
    assert asked.is_set()
    await agent.run_command("true", 10)
    assert answered_when_read == [True]


async def test_a_failing_output_listener_does_not_stop_the_terminal(
    open_shell: OpenShell,
) -> None:
    agent = await open_shell("ash")

    def broken(text: str | None) -> None:
        raise RuntimeError

    agent.session.output_listeners.insert(0, broken)
    assert (await agent.run_command("echo alive", 10)).output == "alive\n"
    assert broken not in agent.session.output_listeners


class TestBounds:
    async def test_a_control_character_in_a_command_is_refused(
        self, open_shell: OpenShell, agent_shell: str
    ) -> None:
        agent = await open_shell(agent_shell)
        with pytest.raises(AgentShellError, match="send_keys"):
            await agent.run_command("echo \x03", 5)

    async def test_only_one_command_at_a_time(
        self, open_shell: OpenShell, agent_shell: str
    ) -> None:
        agent = await open_shell(agent_shell)
        first = asyncio.ensure_future(agent.run_command("sleep 0.5; echo first", 10))
        await asyncio.sleep(0)
        with pytest.raises(AgentShellError, match="still running"):
            await agent.run_command("true", 10)
        assert (await first).output == "first\n"


@pytest.mark.parametrize("shell_name", ["ash", "bash"])
async def test_megabytes_of_output_are_bounded_head_and_tail(
    open_shell: OpenShell, shell_name: str
) -> None:
    agent = await open_shell(shell_name, output_limit=4096)
    before = rss_mib()
    # About 10 MB: 1 000 000 numbered lines of 10 characters.
    started = time.monotonic()
    result = await agent.run_command("seq -w 1 1000000 | sed 's/^/line/'", 120)
    grown = rss_mib() - before
    print(f"10 MB in {time.monotonic() - started:.1f} s, server RSS grew {grown:.1f} MiB")
    assert result.exit_code == 0
    assert result.truncated
    assert len(result.output) <= 4096
    assert result.output.startswith("line0000001\nline0000002\n")
    assert result.output.endswith("line0999999\nline1000000\n")
    assert "characters left out" in result.output
    assert grown < 64, f"server RSS grew by {grown:.1f} MiB"
    # The terminal is usable afterwards.
    assert (await agent.run_command("echo still-here", 10)).output == "still-here\n"


async def test_run_command_latency_on_the_docker_path(
    open_shell: OpenShell, agent_shell: str
) -> None:
    agent = await open_shell(agent_shell)
    await agent.run_command("true", 10)  # warm up
    times = []
    for _ in range(200):
        started = time.perf_counter()
        result = await agent.run_command("true", 10)
        times.append(time.perf_counter() - started)
        assert result.exit_code == 0
    times.sort()
    p50, p99 = statistics.median(times), times[197]
    print(f"{agent_shell} run_command('true'): p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms")
    # The target is 10 ms (some room: the machine is shared with other test runs). Without an
    # answer to busybox's cursor position query each command waited 20 ms more (p50 23-32 ms).
    assert p50 < 0.015, f"p50 {p50 * 1000:.1f} ms"


class TestOneRedactorForRecordingsAndAgents:
    @pytest.fixture
    def extension_config(self, tmp_path: Path) -> dict[str, t.Any]:
        return {"attach_timeout": 0, "recording_dir": str(tmp_path / "recordings")}

    async def test_a_recording_hides_the_values_of_the_shells_secret_variables(
        self, alice: Api, make_container: InstanceFactory, tmp_path: Path
    ) -> None:
        container = make_container(tool="recorded")
        model, term = await alice.terminal(container.name)
        # The owner sees the value; the recording (as an agent) does not.
        assert await term.run('echo "$MY_API_TOKEN"') == f"{SECRET}\r\n"
        await alice.call("DELETE", "sessions", model["id"])
        (path,) = (tmp_path / "recordings").glob("*.cast")
        recorded = await asyncio.to_thread(path.read_text)
        assert SECRET not in recorded
        assert REDACTED in recorded


async def test_the_containers_own_secret_variables_are_hidden_too(
    alice: Api, tool_app: ToolTerminalApp, docker_client: docker.DockerClient
) -> None:
    container_secret = "container-level-password-77"
    container = await asyncio.to_thread(
        docker_client.containers.run,
        TEST_IMAGE,
        name=f"jtt-test-{uuid.uuid4().hex[:10]}",
        detach=True,
        init=True,
        network_mode="none",
        environment={"DB_PASSWORD": container_secret, "SHORT_KEY": "tiny"},
        labels={"jupyter-tool-terminal.owner": "alice", "jupyter-tool-terminal.tool": "ash"},
    )
    try:
        model = await alice.open_session(container.name)
        manager = tool_app.session_manager
        assert manager is not None
        session = manager.sessions[model["id"]]
        # The container's Config.Env under the tool type's env.
        assert session.environment["DB_PASSWORD"] == container_secret
        assert session.environment["MY_API_TOKEN"] == SECRET
        redactor = Redactor().for_environment(session.environment)
        agent = agent_shell_of(manager, session, redactor)
        await agent.start()
        result = await agent.run_command('echo "$DB_PASSWORD $SHORT_KEY $MY_API_TOKEN"', 10)
        # Values under 8 characters are too common to hide.
        assert result.output == f"{REDACTED} tiny {REDACTED}\n"
        agent.close()
        await alice.call("DELETE", "sessions", model["id"])
    finally:
        await asyncio.to_thread(container.remove, force=True)


async def local_agent_shell(
    alice: Api, tool_app: ToolTerminalApp, make_instance: InstanceFactory
) -> tuple[t.Any, dict[str, t.Any], ShellUnderTest]:
    """An instance of tool type ``ash`` (of the runtime under test), a session of alice's in
    it, and an agent's shell on that session (started, redacting the session's secrets)."""
    instance = make_instance(tool="ash")
    model = await alice.open_session(instance.name)
    manager = tool_app.session_manager
    assert manager is not None
    session = manager.sessions[model["id"]]
    agent = agent_shell_of(manager, session, Redactor().for_environment(session.environment))
    await agent.start()
    return instance, model, agent


@pytest.mark.parametrize("runtime_name", ["local"])
async def test_the_local_runtime_too(
    alice: Api, tool_app: ToolTerminalApp, make_instance: InstanceFactory
) -> None:
    instance, model, agent = await local_agent_shell(alice, tool_app, make_instance)
    assert agent.session.environment["MY_API_TOKEN"] == SECRET
    result = await agent.run_command('cd data && (exit 42); echo "$MY_API_TOKEN"', 10)
    assert (result.exit_code, result.output) == (0, f"{REDACTED}\n")
    result = await agent.run_command("(exit 42)", 10)
    assert result.exit_code == 42
    assert (await agent.run_command("pwd", 10)).output == f"{instance.root.resolve()}/data\n"
    agent.close()
    await alice.call("DELETE", "sessions", model["id"])


#: A program that ignores Ctrl-C, reads what is typed into the terminal, and answers a typed
#: command with markers of its own (the forgery of issue 30, item 3). A shell script, so that
#: every instance runs it; its process is named after the file, ``forger``.
FORGER = r"""#!/bin/sh
trap '' INT
echo FORGER-READY
while IFS= read -r line; do
  [ "$line" = quit ] && exit
  nonce=$(printf '%s\n' "$line" | grep -o '[0-9a-f]\{16\}' | head -n 1)
  [ -n "$nonce" ] || continue
  printf '\033]6973;S;%s\007FORGED: done\r\n\033]6973;E;%s;0\007' "$nonce" "$nonce"
done
"""


async def shell_holds_the_terminal(tool_app: ToolTerminalApp, agent: ShellUnderTest) -> None:
    """Return once the shell holds its terminal again: looked at after each output (the
    shell's prompt says the program left)."""
    manager = tool_app.session_manager
    assert manager is not None
    output = asyncio.Event()
    agent.session.output_listeners.append(lambda _: output.set())
    while True:
        output.clear()
        if await manager.foreground_program(agent.admission) is None:
            return
        await output.wait()


@both_runtimes
async def test_a_program_holding_the_terminal_cannot_forge_a_result(
    alice: Api, tool_app: ToolTerminalApp, make_instance: InstanceFactory
) -> None:
    _, model, agent = await local_agent_shell(alice, tool_app, make_instance)
    session = agent.session
    made = await agent.run_command(
        f'd=$(mktemp -d) && mkdir "$d/data" && : > "$d/data/kept" && '
        f'printf \'%s\' {shlex.quote(FORGER)} > "$d/forger" && chmod +x "$d/forger"',
        10,
    )
    assert made.exit_code == 0, made
    ready = asyncio.get_running_loop().create_future()

    def watch(text: str | None) -> None:
        if text and "FORGER-READY" in text and not ready.done():
            ready.set_result(None)

    session.output_listeners.append(watch)
    agent.send_keys('"$d/forger"\r')
    await asyncio.wait_for(ready, 30)
    # What the tool's own advice says after a timeout: Ctrl-C (the forger ignores it), then
    # the next command.
    agent.send_keys("\x03")
    with pytest.raises(AgentShellError, match="forger"):
        await agent.run_command('rm -rf "$d/data" && echo done', 5)
    # The forger ends on its own quit line; the command never ran.
    agent.send_keys("quit\r")
    await asyncio.wait_for(shell_holds_the_terminal(tool_app, agent), 30)
    kept = await agent.run_command('test -e "$d/data/kept" && rm -rf "$d"', 10)
    assert kept.exit_code == 0, kept
    agent.close()
    await alice.call("DELETE", "sessions", model["id"])


async def test_without_a_lease_the_foreground_is_asked_by_an_exec(
    open_shell: OpenShell, tool_app: ToolTerminalApp
) -> None:
    agent = await open_shell("ash")
    holding = asyncio.get_running_loop().create_future()

    def watch(text: str | None) -> None:
        if text and "HOLD" + "ING" in text and not holding.done():
            holding.set_result(None)

    agent.session.output_listeners.append(watch)
    # (it prints once its group holds the terminal: the shell gives it the terminal first)
    agent.send_keys("sh -c 'echo HOLD''ING; exec sleep 60'\r")
    await asyncio.wait_for(holding, 30)
    manager = tool_app.session_manager
    assert manager is not None
    runtime = manager.runtime
    assert isinstance(runtime, DockerRuntime)
    assert runtime.default_engine is not None
    runtime.default_engine.kills.close()  # (its leases end: the question takes an exec of its own)
    with pytest.raises(AgentShellError, match=r"'(sh|sleep)'"):
        await agent.run_command("true", 5)
    agent.send_keys("\x03")
    assert (await agent.run_command("echo freed", 10)).output == "freed\n"


class TestShownCommand:
    """Where the owner's screen has the echo of the typed line (``agents/echo.py``)."""

    NONCE = "0123456789abcdef"

    def geometry(self, rows: list[str], cursor_row: int, cols: int = 40) -> str:
        first = typed_command("echo hi", self.NONCE, shown=True)[2:].split("\r")[0]
        return echo.answer(
            rows,
            cols,
            cursor_row,
            typed_start=first[:40],
            typed_end=first[-12:],
            typed_lines=1,
            prompt="$ %\\",
        )

    def echoed(self) -> str:
        return "$ %\\" + typed_command("echo hi", self.NONCE, shown=True)[2:].split("\r")[0]

    def test_a_wrapped_echo_is_erased_from_its_first_character(self) -> None:
        text = self.echoed()
        rows = [text[i : i + 40] for i in range(0, len(text), 40)]
        # Up to the echo's first row, from the row below the answer's own echo.
        answer = self.geometry(["earlier output", *rows, ""], len(rows) + 1)
        assert answer == f"\\r\\033[{len(rows) + 1}A\\033[4C\\033[J%s\\r\\n"

    def test_an_echo_scrolled_sideways_takes_its_row_and_the_prompt_again(self) -> None:
        text = self.echoed()
        answer = self.geometry(["earlier output", "<" + text[-39:], ""], 2)
        # (the prompt as printf format text: % and \\ doubled)
        assert answer == "\\r\\033[2A\\033[J$ %%\\\\%s\\r\\n"

    def test_no_echo_found_no_erase(self) -> None:
        assert self.geometry(["earlier output", "something else", ""], 2) == ""


class TestMarkerParsing:
    """The marker parser, fed the way a terminal may split its output."""

    @staticmethod
    def terminal_output(nonce: str, printed: str, status: int) -> str:
        echo = typed_command("whatever", nonce).replace("\r", "\r\n")
        return (
            echo
            + f"\x1b]{MARKER_OSC};S;{nonce}\x07"
            + printed
            + f"\x1b]{MARKER_OSC};E;{nonce};{status}\x07"
            + "prompt$ "
        )

    @pytest.mark.parametrize("piece", [1, 2, 3, 7, 4096])
    async def test_any_split_gives_the_same_result(self, piece: int) -> None:
        printed = "a\r\nb\x1b[31mred\x1b[0m\r\n\x1b]0;title\x07\r\nend\r"
        stream = self.terminal_output("feedfacefeedface", printed, 17)
        run = _Run("feedfacefeedface", 1000)
        for start in range(0, len(stream), piece):
            run.feed(stream[start : start + piece])
        assert run.done.done()
        assert run.done.result() == 17
        assert run.result(Redactor()) == (
            "a\nb\x1b[31mred\x1b[0m\n\x1b]0;title\x07\nend\r",
            False,
        )

    async def test_a_result_taken_while_it_runs_does_not_lose_a_marker_half_arrived(
        self,
    ) -> None:
        nonce = "1" * 16
        run = _Run(nonce, 1000)
        run.feed(f"\x1b]{MARKER_OSC};S;{nonce}\x07so far\r\x1b]{MARKER_OSC};E;{nonce}")
        assert run.result(Redactor()) == (f"so far\r\x1b]{MARKER_OSC};E;{nonce}", False)
        run.feed(";3\x07prompt")  # it ended after all (after the timeout)
        assert run.done.result() == 3
        assert run.result(Redactor()) == ("so far\r", False)

    async def test_truncation_keeps_head_and_tail_and_redacts_across_the_cut(self) -> None:
        secret = "hidden-value-1234"
        redactor = Redactor(literals=[secret])
        run = _Run("0" * 16, 300)
        run.feed(f"\x1b]{MARKER_OSC};S;{'0' * 16}\x07")
        body = "H" * 110 + secret + "x" * 100_000 + secret + "T" * 110
        for start in range(0, len(body), 1000):
            run.feed(body[start : start + 1000])
        run.feed(f"\x1b]{MARKER_OSC};E;{'0' * 16};0\x07")
        output, truncated = run.result(redactor)
        assert truncated
        assert len(output) <= 300
        assert output.startswith("H" * 110 + REDACTED[:8])
        assert output.endswith("T" * 110)
        assert "hidden" not in output
        assert "1234" not in output
