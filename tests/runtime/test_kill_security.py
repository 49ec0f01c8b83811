"""The kill in the container trusts nothing the container's users control (issue 10)."""

from __future__ import annotations

import asyncio
import collections
import typing as t

import pytest

from jupyter_tool_terminal.runtime.reaper import (
    LEASE_NAME,
    REAPER_TITLE,
    lease_command,
    lease_of,
)

from ..conftest import (
    BASE_PROCESSES,
    LEASE_PROCESS,
    Api,
    InstanceFactory,
    container_processes,
    wait_for_processes,
    wait_until,
)

#: Tools a kill script could call by name; the fakes log the uid they ran as, then do the job.
FAKED_TOOLS = ("grep", "kill", "cat", "sleep", "env", "sed", "awk", "ps", "printf", "echo", "[")


def _plant_fakes(container: t.Any) -> None:
    """As the tool user (uid 1000), put fake tools into the first, user-writable PATH entry."""
    for name in FAKED_TOOLS:
        script = f'#!/bin/sh\n/usr/bin/id -u >> /tmp/fake-ran\nexec /usr/bin/{name} "$@"\n'
        result = container.exec_run(
            [
                "/bin/sh",
                "-c",
                'printf "%s" "$1" > "/opt/tool/bin/$2" && chmod 755 "/opt/tool/bin/$2"',
                "plant",
                script,
                name,
            ],
            user="1000",
        )
        assert result.exit_code == 0, result.output


def _uids_that_ran_fakes(container: t.Any) -> list[str]:
    result = container.exec_run(
        ["/bin/sh", "-c", "[ -e /tmp/fake-ran ] && /usr/bin/cat /tmp/fake-ran"]
    )
    return result.output.decode().split() if result.exit_code == 0 else []


async def _busy(alice: Api, container: t.Any) -> tuple[dict[str, t.Any], t.Any]:
    model, term = await alice.terminal(container.name)
    # A user of the image runs its tools through its PATH: the fakes log uid 1000 for this.
    term.send("stdin", "/usr/bin/sleep 1001 & setsid /usr/bin/sleep 1002 &\r")
    await term.run("true")

    async def started() -> bool:
        processes = await asyncio.to_thread(container_processes, container)
        return any("sleep 1002" in p for p in processes) and any(
            "sleep 1001" in p for p in processes
        )

    await wait_until(started)
    return model, term


class TestUserWritablePath:
    """An image whose PATH starts with a directory the tool user may write (docker-stacks'
    /opt/conda/bin): fake tools there must never run as root."""

    @pytest.fixture(params=["1000:1000", None], ids=["user-1000", "image-user-root"])
    def tool_types(self, request: pytest.FixtureRequest) -> dict[str, t.Any]:
        # dash prints its prompt before a command's output; none keeps `run`'s markers apart.
        spec: dict[str, t.Any] = {"shell": ["/bin/sh"], "env": {"PS1": ""}}
        if request.param is not None:
            spec["user"] = request.param
        return {"debian": spec}

    async def test_no_fake_tool_runs_as_root(
        self, alice: Api, make_instance: InstanceFactory, debian_image: str
    ) -> None:
        container = make_instance(tool="debian", image=debian_image)
        await asyncio.to_thread(_plant_fakes, container)
        keeper, keeper_term = await _busy(alice, container)
        # Closed beside a live shell: the kill goes through a reaper.
        model, _ = await _busy(alice, container)
        await alice.call("DELETE", "sessions", model["id"])
        # The container's last shell: the kill runs on its own.
        await alice.call("DELETE", "sessions", keeper["id"])
        await keeper_term.expect_frame("disconnect")

        async def only_base() -> bool:
            processes = await asyncio.to_thread(container_processes, container)
            return set(processes) <= BASE_PROCESSES

        await wait_until(only_base)
        assert "0" not in await asyncio.to_thread(_uids_that_ran_fakes, container)


async def _top(container: t.Any) -> list[str]:
    return await asyncio.to_thread(container_processes, container)


async def _wait_started(container: t.Any, *names: str) -> None:
    async def started() -> bool:
        processes = await _top(container)
        return all(any(name in p for p in processes) for name in names)

    try:
        await wait_until(started)
    except AssertionError as error:
        raise AssertionError(await _top(container)) from error


async def _background(term: t.Any, container: t.Any, command: str) -> None:
    """Start ``command`` in the background of the terminal's shell and wait until it runs."""
    term.send("stdin", f"{command} &\r")
    await term.run("true")
    await _wait_started(container, command)


async def _gone_and_stays_gone(container: t.Any, also: frozenset[str] = frozenset()) -> None:
    """Only the container's own processes and one of each of ``also`` remain, a second later too.

    Counted, not just named: a fork chain that survived the kill shows as one more ``/bin/sh``
    beside a session's shell of that name.
    """

    def extras(processes: list[str]) -> list[str]:
        left = collections.Counter(p for p in processes if p not in BASE_PROCESSES)
        left.subtract(also)
        return sorted(left.elements())

    async def settled() -> bool:
        return not extras(await _top(container))

    try:
        await wait_until(settled)
    except AssertionError as error:
        raise AssertionError(await _top(container)) from error
    await asyncio.sleep(1.0)  # a fork chain that slipped through would have grown meanwhile
    processes = await _top(container)
    assert not extras(processes), processes


@pytest.fixture(params=[None, "nobody"], ids=["root", "nobody"])
def shell_user(request: pytest.FixtureRequest) -> str | None:
    """The tool type's `user`: the image's (root) or a non-root one."""
    return t.cast("str | None", request.param)


@pytest.fixture
def tool_types(shell_user: str | None) -> dict[str, t.Any]:
    spec: dict[str, t.Any] = {"shell": ["/bin/sh"]}
    if shell_user:
        spec["user"] = shell_user
    return {"sandbox": spec}


class TestEscapes:
    """Routes out of a session that the kill must still catch (issue 10.2)."""

    async def test_newline_in_name_and_fork_chains_are_killed(
        self, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance()
        # Another session of the same user, with a job its user stopped: the kill may freeze
        # it for a moment (a forking loop), but leaves it running, and the job stopped.
        _, keeper = await alice.terminal(container.name)
        await _background(keeper, container, "sleep 2003")
        await keeper.run("kill -STOP $!")
        model, term = await alice.terminal(container.name)
        # A program whose name (its comm in /proc/PID/stat) holds a newline.
        term.send("stdin", "n=\"/tmp/z$(printf '\\nq')\"\r")
        term.send("stdin", "printf '#!/bin/sh\\nwhile :; do sleep 1; done\\n' > \"$n\"\r")
        # Without the tag, only its terminal session names it as the shell's.
        term.send("stdin", 'chmod +x "$n"; env -i "$n" &\r')
        term.send("stdin", "f() { f & }; f; f; f; f\r")
        await term.run("true")
        await _wait_started(container, "/tmp/z")
        await alice.call("DELETE", "sessions", model["id"])
        await _gone_and_stays_gone(
            container, also=frozenset({"/bin/sh", "sleep 2003", LEASE_PROCESS})
        )
        assert await keeper.run("echo alive") == "alive\r\n"
        assert (await keeper.run("grep State /proc/$!/status")).split()[1] == "T"

    async def test_uid_change_inside_the_session_is_killed(
        self, alice: Api, make_instance: InstanceFactory, shell_user: str | None
    ) -> None:
        if shell_user is not None:
            pytest.skip("busybox has no setuid su: a non-root shell cannot change its uid")
        container = make_instance()
        model, term = await alice.terminal(container.name)
        # Root reads no environment of another uid's process: its session still names it.
        term.send("stdin", "su -s /bin/sh nobody -c 'sleep 1005' &\r")
        await term.run("true")
        await _wait_started(container, "sleep 1005")
        await alice.call("DELETE", "sessions", model["id"])
        await _gone_and_stays_gone(container)


class TestUnattributable:
    """`setsid env -i` (or `start-stop-daemon -b` running `env -i`) leaves nothing that names
    its session: the kernel shows the process as a child of init in a session of its own,
    without the tag; only an instance-wide clean-up gets it."""

    ESCAPE = "setsid env -i sleep {} </dev/null >/dev/null 2>&1 &\r"

    @pytest.fixture
    def tool_types(self) -> dict[str, t.Any]:
        return {
            "sandbox": {"shell": ["/bin/sh"]},
            "strict": {"shell": ["/bin/sh"], "cleanup": "instance"},
        }

    async def _escaped(self, alice: Api, container: t.Any, seconds: int) -> dict[str, t.Any]:
        model, term = await alice.terminal(container.name)
        term.send("stdin", self.ESCAPE.format(seconds))
        await term.run("true")
        await _wait_started(container, f"sleep {seconds}")
        return model

    @staticmethod
    def _facts(container: t.Any, seconds: int) -> tuple[str, ...]:
        """What the kernel shows of an escaped process, as root in the container sees it."""
        script = (
            f'for p in /proc/[0-9]*; do grep -q "slee[p].{seconds}" $p/cmdline 2>/dev/null'
            " && { s=$(cat $p/stat); s=${s##*) }; set -- $s;"
            ' echo "ppid=$2 leader=$([ $4 = ${p#/proc/} ] && echo yes) tty=$5"'
            " $(tr '\\0' '\\n' < $p/environ | grep -c JUPYTER_TOOL_TERMINAL); }; done"
        )
        result = container.exec_run(["/bin/sh", "-c", script], user="0")
        return tuple(result.output.decode().split())

    async def test_session_cleanup_cannot_attribute_it(
        self, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance()
        first = await self._escaped(alice, container, 1111)
        await self._escaped(alice, container, 2222)
        # Same facts for both: reparented to init, a session of its own, no terminal, no tag.
        facts = await asyncio.to_thread(self._facts, container, 1111)
        assert facts == ("ppid=1", "leader=yes", "tty=0", "0")
        assert await asyncio.to_thread(self._facts, container, 2222) == facts
        await alice.call("DELETE", "sessions", first["id"])
        assert any("sleep 1111" in p for p in await _top(container))

    async def test_instance_cleanup_kills_everything_started_since_the_first_session(
        self, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance(tool="strict")
        await asyncio.to_thread(container.exec_run, ["sleep", "3333"], detach=True)
        await _wait_started(container, "sleep 3333")
        first = await self._escaped(alice, container, 1111)
        second, term = await alice.terminal(container.name)
        term.send("stdin", "start-stop-daemon -S -b -x /bin/env -- -i /bin/sleep 5555\r")
        await term.run("true")
        await _wait_started(container, "sleep 5555")
        await alice.call("DELETE", "sessions", first["id"])
        # Another session still runs: nothing that might be its own is touched.
        assert any("sleep 1111" in p for p in await _top(container))
        await alice.call("DELETE", "sessions", second["id"])
        await _gone_and_stays_gone(container, also=frozenset({"sleep 3333"}))
        # The next first session takes a new mark, and works as before.
        third = await self._escaped(alice, container, 4444)
        await alice.call("DELETE", "sessions", third["id"])
        await _gone_and_stays_gone(container, also=frozenset({"sleep 3333"}))


def _reaper_pid(container: t.Any) -> str:
    script = (
        "for p in /proc/[0-9]*; do grep -q 'TERMINAL_REAP[E]R' $p/cmdline 2>/dev/null"
        " && echo ${p#/proc/}; done"
    )
    (pid,) = container.exec_run(["/bin/sh", "-c", script], user="0").output.decode().split()
    return str(pid)


async def test_lines_written_to_the_reaper_from_the_container_kill_nothing(
    alice: Api, make_instance: InstanceFactory, shell_user: str | None
) -> None:
    """The reaper's own user (root, or the shells' user) can write to its stdin (issue 10.5)."""
    container = make_instance()
    _, keeper = await alice.terminal(container.name)
    await _background(keeper, container, "sleep 2001")
    model, _ = await alice.terminal(container.name)
    await alice.call("DELETE", "sessions", model["id"])  # starts the reaper
    pid = await asyncio.to_thread(_reaper_pid, container)
    for line in (".", "1 session .", "2 session .*", "done 0", "7 done 0", "x" * 5000):
        result = await asyncio.to_thread(
            container.exec_run,
            ["/bin/sh", "-c", 'printf "%s\\n" "$1" > "/proc/$2/fd/0"', "w", line, pid],
            user=shell_user or "0",
        )
        assert result.exit_code == 0, result.output
    # Nothing was killed by those lines, and the next kill's answer is its own.
    model, term = await alice.terminal(container.name)
    await _background(term, container, "sleep 2002")
    await alice.call("DELETE", "sessions", model["id"])
    processes = await _top(container)
    assert not any("sleep 2002" in p for p in processes), processes
    assert any("sleep 2001" in p for p in processes), processes
    assert await keeper.run("echo alive") == "alive\r\n"


async def test_ps_in_the_container_says_what_the_reaper_is(
    alice: Api, make_instance: InstanceFactory, shell_user: str | None
) -> None:
    """A user who finds the reaper in ``ps`` or ``top`` reads what it is and what killing it
    does, before the server's plumbing (issue 32.7)."""
    container = make_instance()
    await alice.terminal(container.name)
    model, _ = await alice.terminal(container.name)
    await alice.call("DELETE", "sessions", model["id"])  # starts the reaper
    pid = await asyncio.to_thread(_reaper_pid, container)
    result = await asyncio.to_thread(container.exec_run, ["ps"], user=shell_user or "0")
    assert result.exit_code == 0, result.output
    (line,) = [row for row in result.output.decode().splitlines() if row.split()[0] == pid]
    command = line[line.index("/bin/sh") :]
    assert command.startswith(f"/bin/sh -c {REAPER_TITLE}; eval "), line
    assert "killing it ends no terminal" in command
    assert f" {LEASE_NAME} " in command
    assert command.index("cleanup") < command.index("eval")


def test_leases_of_earlier_versions_are_still_leases() -> None:
    """A server started beside an older one (an upgrade) sees the older one's lease: its
    shells are no orphans."""
    server_id = "0123456789abcdef" * 2
    assert lease_of(lease_command(server_id)[1:]) == server_id
    legacy = ["-c", 'eval "$JUPYTER_TOOL_TERMINAL_REAPER"', "jupyter-tool-terminal-lease"]
    assert lease_of([*legacy, server_id]) == server_id
    assert lease_of(["-c", "eval x", LEASE_NAME, server_id]) is None
    assert lease_of([*lease_command(server_id)[1:-1], "not-a-server-id"]) is None


class TestPaused:
    """A kill that cannot run in a paused container waits for it (issue 10.3)."""

    @pytest.mark.parametrize("beside", [False, True], ids=["alone", "beside-a-reaper"])
    async def test_delete_in_a_paused_container_kills_once_it_is_unpaused(
        self, alice: Api, make_instance: InstanceFactory, beside: bool
    ) -> None:
        container = make_instance()
        if beside:
            # Another session and a reaper: the kill would go to the (frozen) reaper.
            await alice.terminal(container.name)
            first, _ = await alice.terminal(container.name)
            await alice.call("DELETE", "sessions", first["id"])
        model, term = await alice.terminal(container.name)
        await _background(term, container, "sleep 3001")
        await asyncio.to_thread(container.pause)
        try:
            began = asyncio.get_running_loop().time()
            await alice.call("DELETE", "sessions", model["id"])
            assert asyncio.get_running_loop().time() - began < 5.0
        finally:
            await asyncio.to_thread(container.unpause)

        async def gone() -> bool:
            return not any("sleep 3001" in p for p in await _top(container))

        await wait_until(gone)


class TestBecomingRoot:
    """A non-root shell that becomes root through a setuid binary (here a setuid `setpriv`,
    as `sudo` would): its kill, running as the shell's user, cannot signal that process; only
    the instance-wide clean-up, running as root, ends it (as
    docs/source/explanation/kill-guarantees.md says)."""

    @pytest.fixture
    def tool_types(self) -> dict[str, t.Any]:
        spec: dict[str, t.Any] = {"shell": ["/bin/sh"], "user": "1000:1000", "env": {"PS1": ""}}
        return {"debian": spec, "strict": {**spec, "cleanup": "instance"}}

    @pytest.mark.parametrize("tool", ["debian", "strict"])
    async def test_a_setuid_root_process(
        self, alice: Api, make_instance: InstanceFactory, debian_image: str, tool: str
    ) -> None:
        container = make_instance(tool=tool, image=debian_image)
        result = await asyncio.to_thread(
            container.exec_run, ["chmod", "4755", "/usr/bin/setpriv"], user="0"
        )
        assert result.exit_code == 0, result.output
        model, term = await alice.terminal(container.name)
        term.send("stdin", "setpriv --reuid=0 --regid=0 --clear-groups sleep 1006 &\r")
        await term.run("true")
        await _wait_started(container, "sleep 1006")
        await alice.call("DELETE", "sessions", model["id"])
        processes = await wait_for_processes(container, BASE_PROCESSES, timeout=2.0)
        survived = any("sleep 1006" in p for p in processes)
        assert survived is (tool == "debian"), processes
