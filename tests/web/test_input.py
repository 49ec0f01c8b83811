"""Input: a paste the shell does not read is queued and bounded, never stalling the connection."""

from __future__ import annotations

import asyncio
import time
import typing as t

import pytest

from ..conftest import (
    BASE_PROCESSES,
    Api,
    InstanceFactory,
    container_processes,
    wait_for_processes,
    wait_until,
)


class TestInputBacklog:
    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"ping_interval": 0.2, "pong_timeout": 0.2, "max_input_backlog": 256 * 1024}

    async def test_a_paste_nobody_reads_is_refused_and_the_client_stays_healthy(
        self, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance()
        model, term = await alice.terminal(container.name)
        await term.run("true")
        # The foreground command never reads stdin: the terminal's input queue fills, then the
        # engine's socket, then the server's backlog.
        term.send("stdin", "sleep 120\r")

        async def sleeping() -> bool:
            processes = await asyncio.to_thread(container_processes, container)
            return "sleep 120" in processes

        await wait_until(sleeping)
        line = ": " + "p" * 60 + "\n"
        paste = line * (64 * 1024 // len(line))
        for _ in range(32):  # 2 MiB of complete lines
            term.send("stdin", paste)
        error = await term.expect_frame("error", timeout=10)
        assert "input" in error[1].lower(), error

        # The connection's frames are still read (pongs included): it outlives many ping
        # timeouts, and a frame sent now is answered at once.
        outlived = time.monotonic() + 1.5
        while time.monotonic() < outlived:
            term.ws.write_message("[")
            reply = await term.expect_frame("error", timeout=1.0)
            while reply[1].startswith("Input not sent"):  # the rest of the paste's refusals
                reply = await term.expect_frame("error", timeout=1.0)
            assert reply[1].startswith("Malformed frame"), reply
            assert not term.closed
            await asyncio.sleep(0.1)
        assert (await alice.call("GET", "sessions", model["id"]))["clients"] == 1

        # Leaving is immediate, even with input still queued: no ghost client, no shell left.
        term.ws.close()

        async def gone() -> bool:
            status, _ = await alice.status("GET", "sessions", model["id"])
            return status == 403

        await wait_until(gone, timeout=2.0)
        processes = await wait_for_processes(container, BASE_PROCESSES)
        assert set(processes) <= BASE_PROCESSES, processes
