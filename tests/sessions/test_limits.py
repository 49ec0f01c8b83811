"""Limits: session caps under concurrency, idle timeout, and clients that stop answering pings."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import typing as t

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_tool_terminal.app import ToolTerminalApp

from ..conftest import (
    ALICE,
    BASE_PROCESSES,
    Api,
    InstanceFactory,
    both_runtimes,
    exec_count,
    wait_for_processes,
    wait_until,
)


class TestSessionCaps:
    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"max_sessions_per_user": 5, "max_sessions": 8}

    async def test_caps_hold_exactly_under_50_concurrent_requests(
        self, alice: Api, bob: Api, make_instance: InstanceFactory
    ) -> None:
        alices, bobs = make_instance(owner="alice"), make_instance(owner="bob")
        results = await asyncio.gather(
            *(alice.status("POST", "sessions", body={"instance": alices.name}) for _ in range(50))
        )
        statuses = sorted(status for status, _ in results)
        assert statuses == [201] * 5 + [429] * 45
        refused = next(body for status, body in results if status == 429)
        assert "close one first" in refused["message"]
        assert len(await alice.call("GET", "sessions")) == 5
        # Only the five sessions made execs, beside the server's one lease in the container
        # (nothing for the 45 refusals).
        assert await asyncio.to_thread(exec_count, alices) == 5 + 1

        # One user at the cap does not stop another; the global cap stops both.
        results = await asyncio.gather(
            *(bob.status("POST", "sessions", body={"instance": bobs.name}) for _ in range(10))
        )
        assert sorted(status for status, _ in results) == [201] * 3 + [429] * 7
        status, body = await bob.status("POST", "sessions", body={"instance": bobs.name})
        assert status == 429
        assert "limit" in body["message"]

        # Closing a session frees its slot.
        first = (await alice.call("GET", "sessions"))[0]
        await alice.call("DELETE", "sessions", first["id"])
        status, _ = await bob.status("POST", "sessions", body={"instance": bobs.name})
        assert status == 201


class TestClientCaps:
    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"max_clients_per_session": 2, "max_clients_per_user": 3}

    async def test_clients_per_session_and_per_user_are_capped_before_the_upgrade(
        self, alice: Api, bob: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance()
        first = await alice.open_session(container.name)
        second = await alice.open_session(container.name)
        a1, a2 = await alice.connect(first["id"]), await alice.connect(first["id"])
        with pytest.raises(HTTPClientError) as refused:
            await alice.connect(first["id"])
        assert refused.value.code == 429
        assert refused.value.response is not None
        assert "connections" in json.loads(refused.value.response.body)["message"]
        # A third connection of the user's, to another session: the per-user cap is 3.
        b1 = await alice.connect(second["id"])
        with pytest.raises(HTTPClientError) as refused:
            await alice.connect(second["id"])
        assert refused.value.code == 429
        # Another user is not held back by alice's connections.
        bobs = make_instance(owner="bob")
        _, bob_term = await bob.terminal(bobs.name)
        assert await bob_term.run("echo bob") == "bob\r\n"
        # Closing a connection frees its slot; the refused ones left nothing behind.
        assert (await alice.call("GET", "sessions", first["id"]))["clients"] == 2
        a2.ws.close()

        async def one_client() -> bool:
            return bool((await alice.call("GET", "sessions", first["id"]))["clients"] == 1)

        await wait_until(one_client)
        again = await alice.connect(second["id"])
        for term in (a1, b1, again):
            assert await term.run("echo ok") == "ok\r\n"

    async def test_concurrent_connections_never_exceed_the_cap(
        self, alice: Api, make_instance: InstanceFactory, tool_app: ToolTerminalApp
    ) -> None:
        container = make_instance()
        model = await alice.open_session(container.name)

        opened = []

        async def attempt() -> str:
            try:
                ws = await alice._ws_fetch("tool-terminal", "websocket", model["id"], headers=ALICE)
            except HTTPClientError as error:
                return str(error.code)
            message = await ws.read_message()
            first = json.loads(message) if message else None
            if first == ["setup", {}]:
                opened.append(ws)  # (kept open until the end of the test)
                return "open"
            # Lost the race to the cap after the upgrade: told why, then closed with 1013.
            assert first is not None
            assert first[0] == "error", first
            assert await ws.read_message() is None
            assert ws.close_code == 1013
            return "closed"

        results = await asyncio.gather(*(attempt() for _ in range(8)))
        assert results.count("open") == 2, results
        assert (await alice.call("GET", "sessions", model["id"]))["clients"] == 2
        assert tool_app.session_manager is not None
        session = tool_app.session_manager.sessions[model["id"]]

        # A client counts from its upgrade, and joins the session's live clients once its
        # screen was replayed (after ``setup``): both do, and no other.
        async def both_live() -> bool:
            return len(session.clients) == 2

        await wait_until(both_live)
        for ws in opened:
            ws.close()


class TestIdleTimeout:
    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"idle_timeout": 1.0, "ping_interval": 0.1, "pong_timeout": 0.1}

    @both_runtimes
    async def test_idle_sessions_are_closed_and_killed_and_pings_do_not_count(
        self, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance()
        model, term = await alice.terminal(container.name)
        term.send("stdin", "sleep 6001 &\r")
        await term.run("true")
        # Ten pings a second go back and forth meanwhile; the session still goes idle.
        await term.expect_frame("disconnect", timeout=5)
        await term.wait_closed()
        processes = await wait_for_processes(container, BASE_PROCESSES)
        assert set(processes) <= BASE_PROCESSES, processes
        status, _ = await alice.status("GET", "sessions", model["id"])
        assert status == 403

    @both_runtimes
    async def test_activity_keeps_a_session_open(
        self, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance()
        _, term = await alice.terminal(container.name)
        # Output every 0.3 s for 2 s: twice the idle timeout without a gap as long as it.
        assert "done" in await term.run(
            "for i in 1 2 3 4 5 6 7; do echo tick; sleep 0.3; done; echo done", timeout=10
        )


class TestDeadClients:
    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"ping_interval": 0.2, "pong_timeout": 0.2}

    @both_runtimes
    async def test_a_client_that_never_answers_pings_is_dropped_and_its_session_killed(
        self, alice: Api, make_instance: InstanceFactory, jp_http_port: int, jp_base_url: str
    ) -> None:
        container = make_instance()
        model = await alice.open_session(container.name)
        # A raw client: it completes the upgrade, then never reads and never answers a ping.
        reader, writer = await asyncio.open_connection("127.0.0.1", jp_http_port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET {jp_base_url}tool-terminal/websocket/{model['id']} HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{jp_http_port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\nAuthorization: token alice-secret-token\r\n\r\n"
            ).encode()
        )
        status_line = await reader.readline()
        assert b" 101 " in status_line
        try:
            assert (await alice.call("GET", "sessions", model["id"]))["clients"] == 1

            async def gone() -> bool:
                status, _ = await alice.status("GET", "sessions", model["id"])
                return status == 403

            for _ in range(200):
                if await gone():
                    break
                await asyncio.sleep(0.05)
            assert await gone()
            processes = await wait_for_processes(container, BASE_PROCESSES)
            assert set(processes) <= BASE_PROCESSES, processes
        finally:
            writer.close()
