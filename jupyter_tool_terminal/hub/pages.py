"""``GET /tool-terminal/``: a plain page listing the caller's tool instances.

It is the landing page of the JupyterHub service (``/services/<name>/`` redirects here): a
browser that opens it is sent through the Hub's login and sees its tool tiles. Terminals open
from the user's own JupyterLab, which reaches the service for them (``service_url``).
"""

from __future__ import annotations

import json

import jinja2
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import JupyterHandler
from tornado import web

from ..base import AUTH_RESOURCE, ToolTerminalMixin
from ..models import instance_models

#: The pages' templates (``templates/``), HTML-escaped by default.
_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("jupyter_tool_terminal.hub", "templates"),
    autoescape=True,
)


class ToolTilesPage(ToolTerminalMixin, JupyterHandler):
    """The caller's tool instances as tiles (read access to this extension's resource)."""

    auth_resource = AUTH_RESOURCE
    json_errors = False

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """Render the tiles; unauthenticated browsers are redirected to the login."""
        owner = self.tool_user()
        if owner is None:
            raise web.HTTPError(403)
        instances = instance_models(await self.tool_sessions.list_instances(owner))
        self.set_header("Content-Type", "text/html; charset=utf-8")
        page = _TEMPLATES.get_template("tool_tiles.html")
        self.finish(page.render(user=owner, instances=instances))


#: The ``type`` of the message a login frame or window posts to the page that opened it.
LOGIN_MESSAGE = "jupyter-tool-terminal:logged-in"


class LoginPage(ToolTerminalMixin, JupyterHandler):
    """``GET /tool-terminal/login``: log the browser in here, then say as whom.

    In a JupyterHub service this is the service's own login: an unauthenticated browser is
    redirected through the Hub's OAuth flow *for this service*, whose callback sets the
    service's login cookie. No token of the user's own server is involved, so what a user
    server receives for its visitors never reaches the service.

    A user's JupyterLab (on another path of the same origin) loads it with ``?popup=1`` in a
    hidden frame, or in a window when the Hub asks the user something: the page posts the
    user and the service's XSRF token (which the lab cannot read from a cookie of another path)
    to the page that opened it, on the same origin only. The Hub lets only navigations through
    its OAuth flow, so a script's ``fetch`` could not log in. Without ``popup`` the answer is
    ``{"user", "xsrf"}`` as JSON, for clients that follow redirects themselves.
    """

    auth_resource = AUTH_RESOURCE
    json_errors = False

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """Answer ``{"user", "xsrf"}`` (or the popup's page); redirects to log in first."""
        owner = self.tool_user()
        if owner is None:
            raise web.HTTPError(403)
        self.set_header("Cache-Control", "no-store")
        login = {"user": owner, "xsrf": self.xsrf_token.decode("ascii")}
        if self.get_query_argument("popup", ""):
            # What the page shows gives the page that opened it (same origin only) the user
            # and the XSRF token, and a window closes itself. (``tojson`` escapes "<", so no
            # user name ends the script early.)
            page = _TEMPLATES.get_template("login_done.html")
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.finish(page.render(login={"type": LOGIN_MESSAGE, **login}))
            return
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(login))
