"""The re-check's copy of an upgrade request: what identity providers read from it, and that
they may answer it (a cookie) as they answer any request. Fails if tornado or jupyter_server
change what the copy relies on (their public constructors, a handler made for a request)."""

from __future__ import annotations

import copy
import typing as t

import pytest
from jupyter_server.auth.identity import User
from tornado import httputil, web
from traitlets.config import Config

from jupyter_tool_terminal.recheck import recheck_handler

TOKEN = "recheck-token-0123456789"


class _Connection(httputil.HTTPConnection):
    """The upgrade's connection (never used to send anything here)."""

    context = None

    def set_close_callback(self, callback: t.Callable[[], None] | None) -> None:
        """Remembers nothing."""


def _upgrade(jp_serverapp: t.Any, uri: str, headers: dict[str, str]) -> web.RequestHandler:
    request = httputil.HTTPServerRequest(
        start_line=httputil.RequestStartLine("GET", uri, "HTTP/1.1"),
        headers=httputil.HTTPHeaders({"Host": "127.0.0.1:8888", **headers}),
        connection=_Connection(),
    )
    request.remote_ip = "192.0.2.7"
    request.protocol = "https"
    return web.RequestHandler(jp_serverapp.web_app, request)


def test_the_copy_carries_the_requests_credentials_and_client(jp_serverapp: t.Any) -> None:
    original = _upgrade(
        jp_serverapp,
        f"/tool-terminal/websocket/abc?token={TOKEN}",
        {"Authorization": "token header-token", "Cookie": "login=value"},
    )
    fresh = recheck_handler(original)
    assert fresh is not original
    assert fresh.request is not original.request
    assert (fresh.request.method, fresh.request.uri, fresh.request.path) == (
        "GET",
        f"/tool-terminal/websocket/abc?token={TOKEN}",
        "/tool-terminal/websocket/abc",
    )
    assert fresh.get_argument("token") == TOKEN
    assert fresh.request.headers["Authorization"] == "token header-token"
    assert fresh.get_cookie("login") == "value"
    assert (fresh.request.remote_ip, fresh.request.protocol) == ("192.0.2.7", "https")
    assert fresh.request.host == "127.0.0.1:8888"


class TestJupyterServersOwnProvider:
    @pytest.fixture
    def jp_server_config(self, jp_server_config: Config) -> Config:
        config = copy.deepcopy(jp_server_config)
        config.ServerApp.pop("identity_provider_class")
        config.IdentityProvider.token = TOKEN
        return config

    async def test_it_authenticates_a_token_only_copy_and_answers_it_with_a_cookie(
        self, jp_serverapp: t.Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        provider = jp_serverapp.identity_provider
        cookies_set: list[web.RequestHandler] = []
        real = provider.set_login_cookie

        def set_login_cookie(handler: web.RequestHandler, user: User) -> None:
            real(handler, user)  # raises on an upgraded WebSocket handler
            cookies_set.append(handler)

        monkeypatch.setattr(provider, "set_login_cookie", set_login_cookie)
        fresh = recheck_handler(_upgrade(jp_serverapp, f"/x?token={TOKEN}", {}))
        assert isinstance(await provider.get_user(fresh), User)
        assert cookies_set == [fresh]
        for uri in ("/x?token=wrong", "/x"):
            assert await provider.get_user(recheck_handler(_upgrade(jp_serverapp, uri, {}))) is None
