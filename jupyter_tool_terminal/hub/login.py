"""``POST /tool-terminal/api/hub-login``: a JupyterLab's Hub token as the service's login cookie."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..base import ToolTerminalAPIHandler


class HubLoginHandler(ToolTerminalAPIHandler):
    """``POST /tool-terminal/api/hub-login``: this request's Hub token as the login cookie.

    A browser cannot put a header on a WebSocket. A JupyterLab that reaches the tool-terminal
    service of a JupyterHub (``service_url``) with its Hub token in the ``Authorization`` header
    calls this first; the service sets its own login cookie (HttpOnly, on its own path) for that
    token, as its OAuth callback would, so the terminals' WebSockets authenticate with the cookie
    and no token ever appears in a URL.
    """

    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Set the login cookie; 400 unless the token came in the Authorization header."""
        hub_auth = getattr(self.identity_provider, "hub_auth", None)
        pattern = getattr(hub_auth, "auth_header_pat", None)
        header = self.request.headers.get("Authorization", "")
        match = pattern.match(header) if pattern is not None else None
        if match is None or hub_auth is None or not hasattr(hub_auth, "set_cookie"):
            raise web.HTTPError(
                400, "Only a JupyterHub token in the Authorization header can log in here."
            )
        hub_auth.set_cookie(self, match.group(1))
        self.set_status(204)
        self.finish()


#: The route (relative: the server adds its base_url).
default_handlers: list[tuple[str, type[web.RequestHandler]]] = [
    (r"/tool-terminal/api/hub-login", HubLoginHandler),
]
