"""The REST routes of instances and sessions (``/tool-terminal/api/...``).

Each handler asks the manager and answers its result; a refusal is a :class:`SessionError`
raised through, which ``base.py`` answers with its status and message.
"""

from __future__ import annotations

import json
import typing as t

from jupyter_server.auth.decorator import authorized
from jupyter_server.auth.identity import User
from jupyter_server.utils import url_path_join
from tornado import web

from .base import ID, ToolTerminalAPIHandler
from .runtime.base import valid_instance_id


class InstancesHandler(ToolTerminalAPIHandler):
    """``GET /tool-terminal/api/instances``: the caller's tool instances."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """List the caller's instances."""
        self.finish(json.dumps(await self.tool_sessions.list_instances(self.owner())))


class SessionsHandler(ToolTerminalAPIHandler):
    """``GET``/``POST /tool-terminal/api/sessions``: list and create the caller's sessions."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """List the caller's sessions, or (``?role=observer``) those shared with the caller."""
        role = self.get_query_argument("role", "owner")
        if role == "owner":
            sessions = self.tool_sessions.list_sessions(self.owner())
            self.finish(json.dumps([session.model() for session in sessions]))
        elif role == "observer":
            observed = self.tool_sessions.list_observed(self.owner())
            self.finish(json.dumps([session.observed_model() for session in observed]))
        else:
            raise web.HTTPError(400, 'role must be "owner" or "observer".')

    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Create a session in one of the caller's instances."""
        instance = self.body_string("instance")
        size = self.body_size()
        if valid_instance_id(instance):
            self.requested_instance = instance
        username = t.cast(User, self.current_user).username
        session = await self.tool_sessions.create_session(
            self.owner(), instance, username, size=size
        )
        self.set_status(201)
        self.set_header(
            "Location", url_path_join(self.base_url, "tool-terminal/api/sessions", session.id)
        )
        self.finish(json.dumps(session.model()))


class SessionHandler(ToolTerminalAPIHandler):
    """``GET``/``DELETE /tool-terminal/api/sessions/{id}``. (Each route answers only the
    methods its handler defines, anything else 405.)"""

    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        """Show one of the caller's sessions."""
        self.finish(json.dumps(self.tool_sessions.get_session(self.owner(), session_id).model()))

    @web.authenticated
    @authorized
    async def delete(self, session_id: str) -> None:
        """End one of the caller's sessions, killing its processes."""
        session = self.tool_sessions.get_session(self.owner(), session_id)
        await self.tool_sessions.close_session(session, "deleted")
        self.set_status(204)
        self.finish()


class SessionResetHandler(ToolTerminalAPIHandler):
    """``POST /tool-terminal/api/sessions/{id}/reset``: restart the session's shell."""

    @web.authenticated
    @authorized
    async def post(self, session_id: str) -> None:
        """Kill the shell and everything it started, then start it again."""
        session = self.tool_sessions.get_session(self.owner(), session_id)
        await self.tool_sessions.reset_session(session)
        self.finish(json.dumps(session.model()))


class ObserversHandler(ToolTerminalAPIHandler):
    """``GET``/``POST /tool-terminal/api/sessions/{id}/observers``: who may watch a session."""

    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        """The users the caller's session is shared with (read-only)."""
        session = self.tool_sessions.get_session(self.owner(), session_id)
        self.finish(json.dumps(list(session.observers)))

    @web.authenticated
    @authorized
    async def post(self, session_id: str) -> None:
        """Share the caller's session read-only with ``{"user": NAME}``."""
        session = self.tool_sessions.get_session(self.owner(), session_id)
        user = self.body_string("user")
        username = t.cast(User, self.current_user).username
        await self.tool_sessions.grant(session, user, username)
        self.set_status(201)
        self.finish(json.dumps(list(session.observers)))


class ObserverHandler(ToolTerminalAPIHandler):
    """``DELETE /tool-terminal/api/sessions/{id}/observers/{user}``: stop sharing."""

    @web.authenticated
    @authorized
    async def delete(self, session_id: str, user: str) -> None:
        """Revoke ``user``'s view; their connections close at once."""
        session = self.tool_sessions.get_session(self.owner(), session_id)
        username = t.cast(User, self.current_user).username
        self.tool_sessions.revoke(session, user, username)
        self.set_status(204)
        self.finish()


#: The REST routes of instances and sessions (relative: the server adds its base_url).
default_handlers: list[tuple[str, type[web.RequestHandler]]] = [
    (r"/tool-terminal/api/instances", InstancesHandler),
    (r"/tool-terminal/api/sessions", SessionsHandler),
    (rf"/tool-terminal/api/sessions/{ID}", SessionHandler),
    (rf"/tool-terminal/api/sessions/{ID}/reset", SessionResetHandler),
    (rf"/tool-terminal/api/sessions/{ID}/observers", ObserversHandler),
    (rf"/tool-terminal/api/sessions/{ID}/observers/{ID}", ObserverHandler),
]
