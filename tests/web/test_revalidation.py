"""Open terminals are re-authenticated: a logout or a revoked token ends the connection."""

from __future__ import annotations

import collections
import copy
import http.cookies
import typing as t

import pytest
from tornado.httpclient import HTTPClientError
from traitlets.config import Config

from jupyter_tool_terminal.app import ToolTerminalApp
from jupyter_tool_terminal.websocket import TerminalSocket

from ..conftest import (
    BASE_PROCESSES,
    REVOKED_TOKENS,
    Api,
    AuditEvents,
    InstanceFactory,
    wait_for_processes,
    wait_until,
)
from ..support.terminal_client import TerminalClient


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
        # The panel can say why: the server said it before closing.
        assert any(
            frame[0] == "error" and "no longer valid" in frame[1] for frame in alice_term.frames
        ), alice_term.frames
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


#: jupyter_server's own login token in the tests of its own identity provider.
SERVER_TOKEN = "server-own-token-0123456789"
LOGIN_COOKIE = "jtt-test-login"


class TestJupyterServerLogin:
    """With jupyter_server's own identity provider (token, login cookie), every way a client
    authenticates keeps its terminal past several re-checks, and a changed token still ends
    token-authenticated ones."""

    @pytest.fixture
    def jp_server_config(self, jp_server_config: Config) -> Config:
        config = copy.deepcopy(jp_server_config)
        config.ServerApp.pop("identity_provider_class")  # jupyter_server's own
        config.IdentityProvider.token = SERVER_TOKEN
        # (By default its name has the host in it, which differs between the test's clients.)
        config.IdentityProvider.cookie_name = LOGIN_COOKIE
        return config

    @pytest.fixture
    def jp_auth_header(self) -> dict[str, str]:
        return {}  # each test says how it authenticates

    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"auth_recheck_interval": 0.1, "owner": "alice"}

    @pytest.fixture
    def checks(self, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
        """How many access checks have run, by session id."""
        counted: dict[str, int] = collections.Counter()
        real = TerminalSocket._check_access

        async def counting(socket: TerminalSocket) -> None:
            await real(socket)
            if socket.admission is not None:
                counted[socket.admission.session_id] += 1

        monkeypatch.setattr(TerminalSocket, "_check_access", counting)
        return counted

    async def _login_cookie(self, jp_fetch: t.Any) -> str:
        """The login cookie jupyter_server sets for a token-authenticated request."""
        response = await jp_fetch(
            "tool-terminal", "api", "sessions", headers={"Authorization": f"token {SERVER_TOKEN}"}
        )
        cookies = http.cookies.SimpleCookie()
        for header in response.headers.get_list("Set-Cookie"):
            cookies.load(header)
        return f"{LOGIN_COOKIE}={cookies[LOGIN_COOKIE].value}"

    @pytest.mark.parametrize("credential", ["header token", "query token", "login cookie"])
    async def test_a_terminal_outlives_several_rechecks(
        self,
        credential: str,
        jp_fetch: t.Any,
        jp_ws_fetch: t.Any,
        make_instance: InstanceFactory,
        checks: dict[str, int],
    ) -> None:
        token_header = {"Authorization": f"token {SERVER_TOKEN}"}
        api = Api(jp_fetch, jp_ws_fetch, token_header)
        model = await api.open_session(make_instance().name)
        headers, params = {}, {}
        if credential == "header token":
            headers = token_header
        elif credential == "query token":
            params = {"token": SERVER_TOKEN}
        else:
            headers = {"Cookie": await self._login_cookie(jp_fetch)}
        ws = await jp_ws_fetch(
            "tool-terminal", "websocket", model["id"], headers=headers, params=params
        )
        term = TerminalClient(ws)
        assert await term.next_frame() == ["setup", {}]

        async def rechecked() -> bool:
            return checks[model["id"]] >= 5

        await wait_until(rechecked)
        assert (await term.run("echo $((6*7))")).strip() == "42"
        assert not term.closed

    async def test_a_changed_token_still_closes_token_terminals(
        self,
        jp_fetch: t.Any,
        jp_ws_fetch: t.Any,
        jp_serverapp: t.Any,
        make_instance: InstanceFactory,
    ) -> None:
        api = Api(jp_fetch, jp_ws_fetch, {"Authorization": f"token {SERVER_TOKEN}"})
        container = make_instance()
        _, term = await api.terminal(container.name)
        assert (await term.run("echo $((6*7))")).strip() == "42"
        jp_serverapp.identity_provider.token = "another-token-9876543210"
        await term.wait_closed(timeout=5)
        assert term.ws.close_code == 1008
        processes = await wait_for_processes(container, BASE_PROCESSES)
        assert set(processes) <= BASE_PROCESSES, processes
