"""The local runtime's own rules: its configuration, refusals, backpressure and reaping.

(What both runtimes share is tested once for each, with ``@both_runtimes``.)
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
import typing as t
from pathlib import Path

import pytest

from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.runtime import RuntimeUnavailable
from jupyter_tool_terminal.runtime.local import LocalRuntime
from jupyter_tool_terminal.tooltypes import parse_tool_types

from ..conftest import LOCAL_OWNER, TOOL_TYPES, Api, rss_mib, wait_until

#: An engine address where nothing answers.
NOWHERE = "tcp://127.0.0.1:9"


def _config(folder: Path, **instances: str) -> dict[str, t.Any]:
    return {
        "owner": LOCAL_OWNER,
        "local_instances": {
            name: {"tool": tool, "root": str(folder / name)} for name, tool in instances.items()
        },
    }


def _cpu_ticks(pid: int) -> int:
    """The user and system CPU time a process used, in clock ticks."""
    fields = _stat_fields(pid)
    return int(fields[11]) + int(fields[12])


def _stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat from the state on."""
    with open(f"/proc/{pid}/stat") as file:
        return file.read().rsplit(")", 1)[1].split()


async def _running(command: str) -> bool:
    """Whether a process with exactly this command line runs (not a zombie)."""

    def scan() -> bool:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as file:
                    if file.read().rstrip(b"\0").replace(b"\0", b" ").decode() == command:
                        return True
            except OSError:
                continue
        return False

    return await asyncio.to_thread(scan)


#: Forks per second above which fork chains run: four of them fork thousands of times a
#: second, this machine otherwise a few dozen at most.
CHAINS_FORK_RATE = 200


async def _forks_per_second(window: float) -> float:
    """How many processes the machine forked per second over the next ``window`` seconds."""

    def forks() -> int:
        with open("/proc/stat") as file:
            for line in file:
                if line.startswith("processes "):
                    return int(line.split()[1])
        msg = "no processes line in /proc/stat"
        raise AssertionError(msg)

    before = forks()
    await asyncio.sleep(window)
    return (forks() - before) / window


class TestAutoWithoutAnEngine:
    """``runtime = "auto"`` with no Docker Engine serves the local instances."""

    @pytest.fixture
    def extension_config(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, t.Any]:
        monkeypatch.setenv("DOCKER_HOST", NOWHERE)
        return {"runtime": "auto", **_config(tmp_path, box="sandbox", lab="course")}

    async def test_instances_are_listed_as_local_and_roots_created(
        self, alice: Api, bob: Api, tmp_path: Path
    ) -> None:
        instances = await alice.call("GET", "instances")
        assert [(i["id"], i["tool"], i["runtime"], i["status"]) for i in instances] == [
            ("box", "sandbox", "local", "running"),
            ("lab", "course", "local", "running"),
        ]
        assert (tmp_path / "box").is_dir()
        assert await bob.call("GET", "instances") == []
        status, _ = await bob.status("POST", "sessions", body={"instance": "box"})
        assert status == 403
        _, term = await alice.terminal("box")
        assert await term.run("pwd") == f"{(tmp_path / 'box').resolve()}\r\n"


def test_auto_says_which_runtime_it_chose_and_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", NOWHERE)
    app = ToolTerminalApp(runtime="auto", **_config(tmp_path, box="sandbox"))
    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    app.log.addHandler(handler)
    runtime = app._make_runtime(parse_tool_types(TOOL_TYPES))
    assert isinstance(runtime, LocalRuntime)
    assert said == [
        "jupyter_tool_terminal: tool terminals run locally, as this server's user, in 1 "
        f"local instance(s) (runtime 'auto' and no Docker Engine answers at {NOWHERE}; "
        "start Docker or set DOCKER_HOST)"
    ]


BAD_TOOL_TYPES = {
    **TOOL_TYPES,
    "escape": {"workdir": "/../.."},
    "student": {"user": "nobody-here"},
}


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"tool": "sandbox-typo", "root": "x"}, "unknown tool type 'sandbox-typo'"),
        ({"tool": "escape", "root": "x"}, "the working directory '/../..' is outside its root"),
        ({"tool": "student", "root": "x"}, "asks for user 'nobody-here'"),
        ({"tool": "sandbox"}, "must be a mapping with exactly the keys 'tool' and 'root'"),
        ({"tool": "sandbox", "root": ""}, "'root' must be a path, not ''"),
    ],
)
def test_bad_instances_are_start_up_errors_naming_them(
    spec: dict[str, str], problem: str, tmp_path: Path
) -> None:
    if spec.get("root"):
        spec = {**spec, "root": str(tmp_path / spec["root"])}
    runtime = LocalRuntime(
        instances={"bad": spec}, owner=LOCAL_OWNER, tool_types=parse_tool_types(BAD_TOOL_TYPES)
    )
    with pytest.raises(RuntimeUnavailable) as raised:
        runtime.check_available()
    assert str(raised.value).startswith("local instance 'bad': ")
    assert problem in str(raised.value)


class TestStartUpError:
    @pytest.fixture
    def extension_config(self, tmp_path: Path) -> dict[str, t.Any]:
        return {"runtime": "local", **_config(tmp_path, bad="sandbox-typo")}

    async def test_disables_the_extension(self, alice: Api, tool_app: ToolTerminalApp) -> None:
        assert tool_app.session_manager is None
        status, _ = await alice.status("GET", "instances")
        assert status == 503


class TestRefusals:
    @pytest.fixture
    def tool_types(self) -> dict[str, t.Any]:
        return {
            **TOOL_TYPES,
            "linked": {"workdir": "/work"},
            "noshell": {"shell": ["/no/such/shell"]},
        }

    @pytest.fixture
    def extension_config(self, tmp_path: Path, tool_types: dict[str, t.Any]) -> dict[str, t.Any]:
        return {
            "runtime": "local",
            **_config(tmp_path, linked="linked", noshell="noshell", box="sandbox"),
        }

    async def test_a_symlink_out_of_the_root_is_refused_and_starts_nothing(
        self, alice: Api, tmp_path: Path
    ) -> None:
        # Made after start-up (a user of the instance can make one): refused at each open.
        work = tmp_path / "linked" / "work"
        work.rmdir()
        work.symlink_to("/")
        status, body = await alice.status("POST", "sessions", body={"instance": "linked"})
        assert status == 503
        assert body["message"] == (
            "local instance 'linked': the working directory '/work' leads outside its root"
        )
        assert await alice.call("GET", "sessions") == []

    async def test_a_missing_shell_is_a_clear_refusal(self, alice: Api) -> None:
        status, body = await alice.status("POST", "sessions", body={"instance": "noshell"})
        assert status == 503
        assert body["message"].startswith(
            'The tool instance noshell has no /no/such/shell (the shell of tool type "noshell"), '
            "so no terminal can start in it."
        )
        assert "Traceback" not in str(body)

    async def test_a_client_that_stops_reading_applies_backpressure(
        self, alice: Api, tmp_path: Path
    ) -> None:
        _, flood = await alice.terminal("box")
        _, other = await alice.terminal("box")
        flood.send("stdin", "yes flood-line-with-some-length\r")
        await flood.expect("flood-line-with-some-length\r\nflood-line")
        pid = int((await other.run("pgrep -x yes")).split()[0])
        # The client reads nothing now. Once the buffers on the way (the read-ahead, the
        # socket's, the client's) are full, `yes` spends its time blocked on the full
        # terminal: its CPU time stops growing, while the other terminal still answers.
        rss_before = rss_mib()

        async def cpu_seconds_over(seconds: float) -> float:
            first = _cpu_ticks(pid)
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                assert await other.run("echo ok") == "ok\r\n"
            return (_cpu_ticks(pid) - first) / os.sysconf("SC_CLK_TCK")

        await cpu_seconds_over(1.5)  # the buffers fill
        assert await cpu_seconds_over(1.5) < 0.15
        assert rss_mib() - rss_before < 64
        flood.output = ""
        flood.send("stdin", "\x03")
        assert await flood.run("echo recovered", timeout=30) == "recovered\r\n"

    async def test_shells_get_default_signal_dispositions(self, alice: Api) -> None:
        # The server ignores SIGPIPE (as Python does); a shell must not inherit that, or every
        # pipeline's writer outlives its reader and complains ("yes: ... Broken pipe"). A
        # server started with `nohup`, or in the background by a script, also ignores SIGHUP,
        # SIGINT and SIGQUIT; a shell that kept those could not interrupt a command with Ctrl-C.
        inherited = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT)
        before = {number: signal.signal(number, signal.SIG_IGN) for number in inherited}
        try:
            _, term = await alice.terminal("box")
        finally:
            for number, handler in before.items():
                signal.signal(number, handler)
        assert await term.run("yes | head -c 3; echo") == "y\r\ny\r\n"
        ignored = await term.run("sh -c 'grep SigIgn /proc/$$/status'")
        assert ignored.split() == ["SigIgn:", "0000000000000000"]

    async def test_caps_hold_under_concurrent_requests(
        self, alice: Api, tool_app: ToolTerminalApp
    ) -> None:
        assert tool_app.session_manager is not None
        tool_app.session_manager.max_sessions_per_user = 3
        results = await asyncio.gather(
            *(alice.status("POST", "sessions", body={"instance": "box"}) for _ in range(20))
        )
        assert sorted(status for status, _ in results) == [201] * 3 + [429] * 17
        assert len(await alice.call("GET", "sessions")) == 3

    async def test_a_child_in_its_own_session_without_the_tag_is_killed(
        self, alice: Api, tmp_path: Path
    ) -> None:
        # Neither its session nor its environment leads to the shell; its parent does.
        model, term = await alice.terminal("box")
        term.send("stdin", "sh -c 'setsid env -i sleep 1004 & wait' &\r")
        await wait_until(lambda: _running("sleep 1004"))
        await alice.call("DELETE", "sessions", model["id"])
        assert not await _running("sleep 1004")

    async def test_fork_chains_are_killed_and_stay_gone(self, alice: Api) -> None:
        # Each link starts the next and exits: a scan that lists /proc, then reads it, can miss
        # a chain whose link exits in between while its successor was not listed yet. (A script,
        # not a recursive function: dash ends function recursion at a depth of 1000.)
        # What the rest of the machine forks meanwhile (the measure is machine-wide).
        background = await _forks_per_second(0.5)
        model, term = await alice.terminal("box")
        term.send("stdin", "printf 'sh \"$0\" &\\n' > chain.sh\r")
        term.send("stdin", "for i in 1 2 3 4; do sh chain.sh; done\r")

        async def chains_run() -> bool:
            return await _forks_per_second(0.2) > background + CHAINS_FORK_RATE

        await wait_until(chains_run)
        await alice.call("DELETE", "sessions", model["id"])
        # Measured over a whole second: a chain that slipped through would still be forking.
        assert await _forks_per_second(1.0) < background + CHAINS_FORK_RATE

    async def test_ended_shells_are_reaped(self, alice: Api) -> None:
        for _ in range(3):
            model, term = await alice.terminal("box")
            await term.run("true")
            await alice.call("DELETE", "sessions", model["id"])
        _, term = await alice.terminal("box")
        term.send("stdin", "exit 3\r")
        assert await term.expect_frame("exit") == ["exit", 3]
        await asyncio.sleep(0)
        zombies = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                fields = _stat_fields(int(pid))
            except OSError:
                continue
            if fields[0] == "Z" and int(fields[1]) == os.getpid():
                zombies.append(pid)
        assert zombies == []


class TestToolPrompt:
    """A tool type's ``PS1`` is the prompt of its local login shells, whatever the profile
    files set (Debian's ``/etc/profile`` sets ``PS1='# '`` for sh and sources
    ``/etc/bash.bashrc`` for bash, and a user's ``~/.bashrc`` usually sets its own)."""

    @pytest.fixture
    def tool_types(self) -> dict[str, t.Any]:
        prompt = {"PS1": "tool-prompt:$ "}
        return {
            "sh": {"shell": ["/bin/sh", "-l"], "env": prompt},
            "bash": {"shell": ["bash", "-l"], "env": prompt},
        }

    @pytest.fixture
    def extension_config(self, tmp_path: Path) -> dict[str, t.Any]:
        return {"runtime": "local", **_config(tmp_path, plain="sh", bourne="bash")}

    @pytest.mark.parametrize("instance", ["plain", "bourne"])
    async def test_the_tool_prompt_wins_over_the_profile_files(
        self, alice: Api, instance: str
    ) -> None:
        _, term = await alice.terminal(instance)
        term.send("stdin", "echo ready\r")
        await term.expect(r"ready\r\n")
        # The prompt the shell shows after a command is the tool's.
        await term.expect(r"ready\r\n[^\n]*tool-prompt:\$ ")
        assert await term.run("echo $PS1") == "tool-prompt:$\r\n"


def test_a_local_id_has_no_engine_part(tmp_path: Path) -> None:
    # ENGINE/NAME ids are the Docker runtime's (several engines), not a local instance's.
    runtime = LocalRuntime(
        instances={"a/b": {"tool": "sandbox", "root": str(tmp_path)}},
        owner=LOCAL_OWNER,
        tool_types=parse_tool_types(TOOL_TYPES),
    )
    with pytest.raises(RuntimeUnavailable, match="an id is 1-128 letters"):
        runtime.check_available()
