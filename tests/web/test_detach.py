"""Closing a tab detaches: a client that closes its WebSocket with the detach code leaves its
session running (as JupyterLab's own terminals do), where any other close starts the
``disconnect_grace`` countdown (0 in this suite: the session ends at once)."""

from __future__ import annotations

import typing as t

import pytest

from jupyter_tool_terminal.protocol import DETACH_CLOSE_CODE

from ..conftest import Api, InstanceFactory, both_runtimes, wait_until


async def _listed(api: Api) -> list[str]:
    return [session["id"] for session in await api.call("GET", "sessions")]


@both_runtimes
async def test_a_detached_session_keeps_its_shell_until_reopened(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    model, term = await alice.terminal(container.name)
    await term.run("export KEPT=detached")
    pid = await term.run("echo $$")
    term.ws.close(DETACH_CLOSE_CODE, "detach")
    await term.wait_closed()

    # The server saw the close (its client count drops), and keeps the session listed.
    async def detached() -> bool:
        sessions = await alice.call("GET", "sessions")
        return [(s["id"], s["clients"]) for s in sessions] == [(model["id"], 0)]

    await wait_until(detached)
    again = await alice.connect(model["id"])
    assert await again.run("echo $$") == pid
    assert await again.run("echo $KEPT") == "detached\r\n"
    # A plain close after that ends it, as before (grace 0 in this suite).
    again.ws.close()

    async def gone() -> bool:
        return model["id"] not in await _listed(alice)

    await wait_until(gone)


class TestIdleTimeout:
    """A detached session still ends after ``idle_timeout``."""

    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"idle_timeout": 2.0}

    async def test_a_detached_session_ends_when_idle(
        self, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance()
        model, term = await alice.terminal(container.name)
        await term.run("true")
        term.ws.close(DETACH_CLOSE_CODE, "detach")

        async def gone() -> bool:
            return model["id"] not in await _listed(alice)

        await wait_until(gone, timeout=30)
