"""Durable sessions: a reload finds its shell again, and gets the terminal's current screen."""

from __future__ import annotations

import asyncio
import contextlib
import typing as t

import pyte
import pytest

from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.screen import PyteScreenModel
from jupyter_tool_terminal.session import ToolTerminal

from ..conftest import Api, InstanceFactory, container_processes, wait_until
from ..support.terminal_client import TerminalClient


def _session(tool_app: ToolTerminalApp, session_id: str) -> ToolTerminal:
    assert tool_app.session_manager is not None
    return tool_app.session_manager.sessions[session_id]


async def _sized_terminal(
    api: Api, instance: str, rows: int = 24, cols: int = 80
) -> tuple[dict[str, t.Any], TerminalClient]:
    model, term = await api.terminal(instance)
    term.send("set_size", rows, cols)
    assert await term.size_becomes(f"{rows} {cols}") == f"{rows} {cols}"
    return model, term


async def _reconnect(api: Api, session_id: str) -> tuple[TerminalClient, str]:
    """Connect again; return the client and the screen snapshot it received first."""
    term = await api.connect(session_id)
    frame = await term.expect_frame("stdout")
    return term, frame[1]


def _visible(char: pyte.screens.Char) -> pyte.screens.Char | None:
    """A cell as it looks: blanks without a background, reverse or underline are all alike."""
    blank = char.data in " " and char.bg == "default"
    return None if blank and not (char.reverse or char.underscore) else char


def _cells(screen: pyte.Screen) -> list[list[pyte.screens.Char | None]]:
    return [
        [_visible(screen.buffer[y][x]) for x in range(screen.columns)] for y in range(screen.lines)
    ]


async def _assert_rebuilds(session: ToolTerminal, term: TerminalClient) -> pyte.Screen:
    """What ``term`` received since it attached (the snapshot, then live output until the
    output pauses), fed into a fresh pyte screen, must equal the server's screen model."""
    with contextlib.suppress(asyncio.TimeoutError):
        while True:
            await term.next_frame(timeout=0.3)
    await session.screen.snapshot()  # the model has caught up with every output
    rows, columns = session.screen.dimensions
    fresh = pyte.Screen(columns, rows)
    pyte.Stream(fresh).feed(term.output)
    assert [line.rstrip() for line in fresh.display] == [
        line.rstrip() for line in session.screen.display()
    ]
    assert (fresh.cursor.x, fresh.cursor.y) == session.screen.cursor
    if isinstance(session.screen, PyteScreenModel):
        assert _cells(fresh) == _cells(session.screen.screen)
    return fresh


class TestDefaultGrace:
    """The product default: a session outlives its last client by 60 s."""

    @pytest.fixture
    def suite_defaults(self) -> dict[str, t.Any]:
        return {}

    async def test_a_reload_finds_the_same_shell_its_directory_and_its_programs(
        self, tool_app: ToolTerminalApp, alice: Api, make_instance: InstanceFactory
    ) -> None:
        assert tool_app.disconnect_grace == 60
        container = make_instance()
        model, term = await alice.terminal(container.name)
        pid = await term.run("echo $$")
        await term.run("cd /tmp; { sleep 4321 & }")
        term.ws.close()

        async def detached() -> bool:
            session = await alice.call("GET", "sessions", model["id"])
            return bool(session["clients"] == 0)

        async def sleeping() -> bool:
            processes = await asyncio.to_thread(container_processes, container)
            return any("sleep 4321" in p for p in processes)

        await wait_until(detached)
        # The prompt comes back as soon as the background job is forked; under load the child
        # may not have exec'd `sleep` yet (it still shows as `sh`): wait for it, do not race it.
        await wait_until(sleeping)
        again, _ = await _reconnect(alice, model["id"])
        assert await again.run("echo $$") == pid
        assert await again.run("pwd") == "/tmp\r\n"
        assert await sleeping()


class TestScreenOnReattach:
    """A client that reattaches gets the terminal's screen, rebuilt, then live output."""

    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"disconnect_grace": 30.0}

    async def test_vi_comes_back_on_the_alternate_screen(
        self, tool_app: ToolTerminalApp, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance()
        model, term = await _sized_terminal(alice, container.name)
        await term.run("printf 'first line\\nsecond line\\n' > /tmp/f.txt")
        term.send("stdin", "vi /tmp/f.txt\r")
        await term.expect("second line")
        await term.expect(r"f\.txt")
        term.ws.close()
        again, snapshot = await _reconnect(alice, model["id"])
        session = _session(tool_app, model["id"])
        assert session.screen.alternate
        assert "\x1b[?1049h" in snapshot
        fresh = await _assert_rebuilds(session, again)
        assert fresh.display[0].startswith("first line")
        # Then live: the editor still runs and answers.
        again.send("stdin", ":q\r")
        assert await again.run("echo back in the shell") == "back in the shell\r\n"
        await session.screen.snapshot()
        assert not session.screen.alternate

    async def test_top_comes_back_with_its_attributes(
        self, tool_app: ToolTerminalApp, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance()
        model, term = await _sized_terminal(alice, container.name)
        term.send("stdin", "top -d 3600\r")
        await term.expect("PID")
        await term.expect(r"top -d 3600")
        term.ws.close()
        again, _ = await _reconnect(alice, model["id"])
        session = _session(tool_app, model["id"])
        fresh = await _assert_rebuilds(session, again)
        header = next(y for y, line in enumerate(fresh.display) if "PID" in line)
        assert fresh.buffer[header][fresh.display[header].index("PID")].reverse

    async def test_plain_scrollback_comes_back_and_stays_small(
        self, tool_app: ToolTerminalApp, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance()
        model, term = await _sized_terminal(alice, container.name)
        await term.run("seq 1 300")
        term.ws.close()
        again, snapshot = await _reconnect(alice, model["id"])
        assert len(snapshot.encode()) < 16 * 1024
        numbers = [line.strip() for line in snapshot.split("\r\n")]
        assert [str(n) for n in range(1, 301)] == [n for n in numbers if n.isdigit()]
        await _assert_rebuilds(_session(tool_app, model["id"]), again)
        assert await again.run("echo live") == "live\r\n"

    async def test_scrollback_is_bounded_in_lines_and_bytes(
        self, tool_app: ToolTerminalApp, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance()
        model, term = await _sized_terminal(alice, container.name)
        await term.run("seq 1 5000")
        await term.run("head -c 1000000 /dev/zero | tr '\\000' b; echo", timeout=60)
        term.ws.close()
        again, snapshot = await _reconnect(alice, model["id"])
        assert len(snapshot.encode()) < 64 * 1024
        assert snapshot.count("\r\n") <= tool_app.scrollback_lines + 24
        await _assert_rebuilds(_session(tool_app, model["id"]), again)

    async def test_the_screen_follows_resizes(
        self, tool_app: ToolTerminalApp, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance()
        model, term = await _sized_terminal(alice, container.name, 30, 100)
        await term.run("echo resized")
        session = _session(tool_app, model["id"])
        await session.screen.snapshot()
        assert session.screen.dimensions == (30, 100)
        term.ws.close()
        again, _ = await _reconnect(alice, model["id"])
        await _assert_rebuilds(session, again)
