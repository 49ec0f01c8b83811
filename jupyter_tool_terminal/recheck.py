"""A WebSocket's credentials checked again, as a new request carrying the same ones.

An open terminal's credentials are checked every ``auth_recheck_interval``. Identity providers
take a request handler, and they treat it as a request being served: they remember its user on
it (jupyter_server, JupyterHub's clients), and may answer with a cookie (jupyter_server sets its
login cookie for a request authenticated by a token alone). An upgraded WebSocket handler
refuses cookies and headers (tornado raises ``RuntimeError``), and a user remembered on it would
never be checked again. So each check authenticates a fresh handler made from a copy of the
upgrade request, with tornado's public constructors: it has the same method, URL (with any
``?token=``), headers (with any ``Authorization`` and cookies) and client address, remembers
nothing, and whatever an identity provider sets on it is never sent.
"""

from __future__ import annotations

import typing as t

from jupyter_server.base.handlers import JupyterHandler
from tornado import httputil, web


class _CheckConnection(httputil.HTTPConnection):
    """The connection of a re-check request: there is nobody to answer, nothing is sent."""

    def set_close_callback(self, callback: t.Callable[[], None] | None) -> None:
        """Nothing to notify: the request ends with the check that made it."""


def recheck_handler(handler: web.RequestHandler) -> JupyterHandler:
    """A new handler of ``handler``'s request, to authenticate and authorize it again."""
    original = handler.request
    request = httputil.HTTPServerRequest(
        start_line=httputil.RequestStartLine(
            original.method or "GET", original.uri or "/", original.version
        ),
        headers=httputil.HTTPHeaders(original.headers),
        connection=_CheckConnection(),
    )
    request.remote_ip = original.remote_ip
    request.protocol = original.protocol
    return JupyterHandler(handler.application, request)
