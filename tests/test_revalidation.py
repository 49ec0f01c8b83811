"""Open terminals are re-authenticated: a logout or a revoked token ends the connection."""

from __future__ import annotations

import typing as t

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_tool_terminal.app import ToolTerminalApp

from .conftest import (
    BASE_PROCESSES,
    REVOKED_TOKENS,
    Api,
    AuditEvents,
    InstanceFactory,
    wait_for_processes,
)


@pytest.fixture
def revoke() -> t.Iterator[t.Callable[[str], None]]:
    """Revoke a test token (as a Hub does at logout); restored after the test."""
    yield REVOKED_TOKENS.add
    REVOKED_TOKENS.clear()


class TestAccessRecheck:
    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"auth_recheck_interval": 0.2}

    async def test_a_revoked_token_closes_the_terminal_with_1008_and_kills_its_shell(
        self,
        alice: Api,
        bob: Api,
        make_instance: InstanceFactory,
        revoke: t.Callable[[str], None],
        audit: AuditEvents,
        tool_app: ToolTerminalApp,
    ) -> None:
        container = make_instance()
        alice_model, alice_term = await alice.terminal(container.name)
        bob_container = make_instance(owner="bob")
        _, bob_term = await bob.terminal(bob_container.name)
        assert (await alice_term.run("echo $((6*7))")).strip() == "42"

        assert _scheduled_checks(tool_app, alice_model["id"]) == [True]
        revoke("alice-secret-token")
        await alice_term.wait_closed(timeout=5)
        assert alice_term.ws.close_code == 1008
        processes = await wait_for_processes(container, BASE_PROCESSES)
        assert set(processes) <= BASE_PROCESSES, processes
        with pytest.raises(HTTPClientError) as refused:
            await alice.connect(alice_model["id"])
        assert refused.value.code == 403

        # Bob's credentials are still good: several checks later his terminal still works.
        for _ in range(3):
            assert (await bob_term.run("echo $((6*7))")).strip() == "42"
            assert not bob_term.closed
        revoked = [e for e in audit.events if e["reason"] == "access revoked"]
        # The refusal, then the session's end for that reason (no grace after a revocation).
        assert [(e["action"], e["username"], e["session_id"]) for e in revoked] == [
            ("refuse", "alice", alice_model["id"]),
            ("close", "alice", alice_model["id"]),
        ]


class TestAccessRecheckOff:
    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"auth_recheck_interval": 0}

    async def test_with_checks_off_an_open_terminal_outlives_its_token(
        self,
        alice: Api,
        make_instance: InstanceFactory,
        revoke: t.Callable[[str], None],
        tool_app: ToolTerminalApp,
    ) -> None:
        container = make_instance()
        model, term = await alice.terminal(container.name)
        revoke("alice-secret-token")
        assert (await term.run("echo $((6*7))")).strip() == "42"
        assert not term.closed
        # No check is scheduled at all (a check at any interval would close the connection
        # now that the token is revoked, however long after this test it came).
        assert _scheduled_checks(tool_app, model["id"]) == [False]


def _scheduled_checks(tool_app: ToolTerminalApp, session_id: str) -> list[bool]:
    """For each connection to the session, whether a periodic access check is running."""
    assert tool_app.session_manager is not None
    session = tool_app.session_manager.sessions[session_id]
    return [
        bool(getattr(client, "_recheck", None) and client._recheck.is_running())  # type: ignore[attr-defined]
        for client in session.clients
    ]
