"""Limits: session caps under concurrency, idle timeout, and clients that stop answering pings."""

from __future__ import annotations

import asyncio
import base64
import os
import typing as t

import pytest

from .conftest import (
    BASE_PROCESSES,
    Api,
    InstanceFactory,
    both_runtimes,
    exec_count,
    wait_for_processes,
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
        assert statuses == [200] * 5 + [429] * 45
        refused = next(body for status, body in results if status == 429)
        assert "close one first" in refused["message"]
        assert len(await alice.call("GET", "sessions")) == 5
        # Only the five sessions made execs (plus nothing for the 45 refusals).
        assert await asyncio.to_thread(exec_count, alices) == 5

        # One user at the cap does not stop another; the global cap stops both.
        results = await asyncio.gather(
            *(bob.status("POST", "sessions", body={"instance": bobs.name}) for _ in range(10))
        )
        assert sorted(status for status, _ in results) == [200] * 3 + [429] * 7
        status, body = await bob.status("POST", "sessions", body={"instance": bobs.name})
        assert status == 429
        assert "limit" in body["message"]

        # Closing a session frees its slot.
        first = (await alice.call("GET", "sessions"))[0]
        await alice.call("DELETE", "sessions", first["id"])
        status, _ = await bob.status("POST", "sessions", body={"instance": bobs.name})
        assert status == 200


class TestIdleTimeout:
    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"idle_timeout": 1.0, "ping_interval": 0.1, "ping_timeout": 0.1}

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
        return {"ping_interval": 0.2, "ping_timeout": 0.2}

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
