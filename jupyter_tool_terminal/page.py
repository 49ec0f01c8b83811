"""``GET /tool-terminal/``: a plain page listing the caller's tool instances.

It is the landing page of the JupyterHub service (``/services/<name>/`` redirects here): a
browser that opens it is sent through the Hub's login and sees its tool tiles. Terminals open
from the user's own JupyterLab, which reaches the service for them (``service_url``).
"""

from __future__ import annotations

import html

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import JupyterHandler
from tornado import web

from .handlers import AUTH_RESOURCE, ToolTerminalMixin
from .manager import SessionError

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Tool terminals</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; }}
ul {{ list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: 1rem; }}
li {{ border: 1px solid #bbb; border-radius: 6px; padding: 1rem; min-width: 10rem; }}
.tool {{ color: #666; font-size: 0.9em; }}
</style>
</head>
<body>
<h1>Tool terminals of {user}</h1>
{body}
</body>
</html>
"""


class ToolTilesPage(ToolTerminalMixin, JupyterHandler):
    """The caller's tool instances as tiles (read access to this extension's resource)."""

    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """Render the tiles; unauthenticated browsers are redirected to the login."""
        owner = self.tool_user()
        if owner is None:
            raise web.HTTPError(403)
        try:
            instances = await self.tool_sessions.list_instances(owner)
        except SessionError as error:
            raise web.HTTPError(error.status, error.message) from None
        tiles = "".join(
            f'<li class="jp-ToolTerminal-tile" data-instance="{html.escape(item["id"])}">'
            f"<strong>{html.escape(item['display_name'])}</strong><br>"
            f'<span class="tool">{html.escape(item["id"])} ({html.escape(item["status"])})'
            "</span></li>"
            for item in instances
        )
        body = f"<ul>{tiles}</ul>" if tiles else "<p>You have no tool instances.</p>"
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(_PAGE.format(user=html.escape(owner), body=body))
