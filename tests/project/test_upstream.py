"""What the extension relies on in its upstreams beyond their documented API, in one place:
each test fails when an upstream changes it, so that the adapter that uses it is changed too.

- handover/listening.py: tornado's HTTPServer keeps its listening sockets and their accept
  handlers in ``_sockets`` and ``_handlers``; jupyter_server's ServerApp binds its port in
  ``_find_http_port`` and ``_bind_http_server`` (``serve_only_on_inherited`` skips them).
- hub.login.HubLoginHandler: JupyterHub's identity provider has a ``hub_auth`` whose
  ``auth_header_pat`` reads the token of an Authorization header and whose ``set_cookie``
  logs a handler in with a token (public names, read with ``getattr``: no JupyterHub, no login).
"""

from __future__ import annotations

import inspect
import socket

from jupyter_server.serverapp import ServerApp
from jupyterhub.services.auth import HubOAuth
from jupyterhub.singleuser.extension import JupyterHubIdentityProvider
from tornado.httpserver import HTTPServer


async def test_tornado_keeps_the_listening_sockets_where_the_hand_over_takes_them() -> None:
    server = HTTPServer(lambda request: None)
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    listening.setblocking(False)
    try:
        server.add_sockets([listening])
        assert list(server._sockets.values()) == [listening]
        assert list(server._handlers) == [listening.fileno()]
        assert all(callable(remove) for remove in server._handlers.values())
    finally:
        server.stop()


def test_jupyter_server_binds_its_port_in_the_two_steps_the_successor_skips() -> None:
    source = inspect.getsource(ServerApp.init_httpserver)
    assert "self._find_http_port()" in source
    assert "self._bind_http_server" in source


def test_jupyterhubs_identity_provider_logs_in_with_a_header_token() -> None:
    assert "hub_auth" in JupyterHubIdentityProvider.class_trait_names()
    match = HubOAuth.auth_header_pat.match("token abc123")
    assert match is not None
    assert match.group(1) == "abc123"
    assert list(inspect.signature(HubOAuth.set_cookie).parameters) == [
        "self",
        "handler",
        "access_token",
    ]
