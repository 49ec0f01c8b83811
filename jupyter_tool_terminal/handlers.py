"""REST handlers and the terminal WebSocket handler."""

from __future__ import annotations

import asyncio
import http
import json
import math
import typing as t

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized
from jupyter_server.auth.identity import User
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web
from tornado.ioloop import PeriodicCallback
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from . import metrics
from .manager import SessionError, ToolTerminalManager, valid_session_id
from .recheck import recheck_handler
from .runtime.base import valid_instance_id
from .session import ToolTerminal, clamp_size

if t.TYPE_CHECKING:
    from .app import ToolTerminalApp

#: What a terminal whose credentials stopped granting it is told before it closes (1008).
ACCESS_ENDED_MESSAGE = (
    "Your login is no longer valid here (you logged out, or your token or access was revoked), "
    "so this terminal was closed. Log in again to open a new one."
)
#: The authorization resource of every route: list is ``read``, create/reset/delete ``write``,
#: and opening a terminal WebSocket ``execute``.
AUTH_RESOURCE = "jupyter_tool_terminal:terminals"
#: Seconds an identity check may take, a request's or an open terminal's: an identity provider
#: that cannot answer (a JupyterHub that does not respond, whose client waits five minutes)
#: refuses. A request gets a 503 instead of hanging, and a terminal closes instead of staying
#: open on credentials nobody can check.
ACCESS_CHECK_TIMEOUT = 10.0


def _reject_constant(name: str) -> t.NoReturn:
    msg = f"{name} is not a number here"
    raise ValueError(msg)


def _status_phrase(status: int) -> str:
    """The reason phrase of an HTTP status ("Forbidden")."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _is_integer(value: t.Any) -> bool:
    """Whether a JSON value is an integer (JSON Schema's sense: ``2.0`` is one, ``true`` not)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def allowed_methods(handler: web.RequestHandler) -> str:
    """The methods ``handler``'s route answers, for the ``Allow`` header a 405 must carry
    (RFC 9110): those its class defines, not tornado's defaults (which answer 405)."""
    return ", ".join(
        method
        for method in handler.SUPPORTED_METHODS
        if getattr(type(handler), method.lower(), None)
        is not getattr(web.RequestHandler, method.lower(), None)
    )


def _strict_json(text: str) -> t.Any:
    """Parse JSON without NaN/Infinity (Python accepts them by default)."""
    return json.loads(text, parse_constant=_reject_constant)


class ToolTerminalMixin(ExtensionHandlerMixin):
    """Shared access to the extension and to the caller's identity as an instance owner."""

    @property
    def tool_app(self) -> ToolTerminalApp:
        """The extension application."""
        return t.cast("ToolTerminalApp", self.extensionapp)

    @property
    def tool_sessions(self) -> ToolTerminalManager:
        """The registry of sessions; :class:`web.HTTPError` 503 if the extension is disabled."""
        manager = self.tool_app.session_manager
        if manager is None:
            service = self.tool_app.service_url
            raise web.HTTPError(
                503,
                f"Tool terminals are served by the JupyterHub service at {service}, not by "
                "this server."
                if service
                else "Tool terminals are not available on this server.",
            )
        return manager

    def on_finish(self) -> None:
        """Audit every refused request (4xx/5xx), whoever made it, also those tornado refused
        before any method ran (an unknown method, an undecodable path, a malformed body)."""
        handler = t.cast(JupyterHandler, self)
        status = handler.get_status()
        manager = self.tool_app.session_manager
        if status >= 400 and manager is not None:
            reason = _status_phrase(status)
            metrics.count_refusal(status, reason)
            user = self.authenticated_user
            session_id = self.path_kwargs_id()
            self.log.info(
                "Tool terminal request refused (%d %s): %s by %s%s",
                status,
                reason,
                handler.request.method,
                user.username if user else "an unauthenticated client",
                self._refused_target(manager, session_id),
            )
            manager.audit.emit(
                "refuse",
                user.username if user else "",
                owner=self.tool_app.principal_for(user, handler.identity_provider)
                if user
                else None,
                status=status,
                reason=reason,
                session_id=session_id,
                instance=self.requested_instance,
            )
        super().on_finish()  # type: ignore[misc]

    def _refused_target(self, manager: ToolTerminalManager, session_id: str | None) -> str:
        """What a refused request asked for, for the log (whose session it is, if one)."""
        if session_id is not None:
            session = manager.sessions.get(session_id)
            whose = f" (of {session.owner})" if session is not None else " (no such session)"
            return f" for session {session_id[:8]}{whose}"
        if self.requested_instance is not None:
            return f" for instance {self.requested_instance}"
        return f" at {t.cast(JupyterHandler, self).request.path}"

    async def prepare(self, *args: t.Any, **kwargs: t.Any) -> None:
        """Authenticate as jupyter_server does, within :data:`ACCESS_CHECK_TIMEOUT` (else 503)."""
        preparing = t.cast(t.Any, super()).prepare(*args, **kwargs)
        try:
            await asyncio.wait_for(ensure_async(preparing), ACCESS_CHECK_TIMEOUT)
        except asyncio.TimeoutError:
            raise web.HTTPError(
                503,
                "The server could not check who you are (its identity provider, such as "
                "JupyterHub, did not answer); nothing was done. Try again shortly.",
            ) from None
        self.authenticated_user = t.cast(JupyterHandler, self).current_user
        self.authentication_ran = True

    #: Who the request authenticated as, once it did (``None`` before, or if anonymous). Not
    #: `current_user`: for a request refused before authentication ran (a foreign Host, an
    #: unknown method) tornado would call jupyter_server's deprecated getter, which raises.
    authenticated_user: User | None = None
    #: Whether `prepare` (authentication) completed.
    authentication_ran = False

    def write_error(self, status_code: int, **kwargs: t.Any) -> None:
        """A refusal before authentication completed is a JSON message on every route: an
        HTML error page needs the user (jupyter_server's raises without one)."""
        if status_code == 405:
            t.cast(JupyterHandler, self).set_header("Allow", allowed_methods(t.cast(t.Any, self)))
        if self.authentication_ran:
            t.cast(t.Any, super()).write_error(status_code, **kwargs)
        else:
            t.cast(t.Any, APIHandler).write_error(self, status_code, **kwargs)

    #: The instance id a request asked for, if well-formed (for the audit log).
    requested_instance: str | None = None

    def path_kwargs_id(self) -> str | None:
        """The session id in the URL, if well-formed (for the audit log)."""
        # (tornado sets `path_args` only for a request it did not refuse before decoding them.)
        args = getattr(self, "path_args", None)
        return args[0] if args and valid_session_id(args[0]) else None

    def tool_user(self) -> str | None:
        """The name that instances' owner labels are compared with, or ``None`` if anonymous."""
        handler = t.cast(JupyterHandler, self)
        user = handler.current_user
        if not user:
            return None
        return self.tool_app.principal_for(user, handler.identity_provider)


class ToolTerminalAPIHandler(ToolTerminalMixin, APIHandler):
    """Base of the REST handlers: JSON in and out, errors as JSON messages."""

    auth_resource = AUTH_RESOURCE

    def owner(self) -> str:
        """The caller as an instance owner (``@web.authenticated`` ran, so there is one)."""
        owner = self.tool_user()
        if owner is None:
            raise web.HTTPError(403)
        return owner

    def fail(self, error: SessionError) -> t.NoReturn:
        """Answer a refused request with its status and a JSON message, as written (an
        HTTPError's message would show every '%' of a user name doubled)."""
        self.set_status(error.status)
        self.finish(json.dumps({"message": error.message, "reason": None}))
        raise web.Finish

    def body_string(self, key: str) -> str:
        """The string ``key`` of the request's JSON object body; 400 for any other body."""
        body = self._json_body()
        if not isinstance(body, dict) or not isinstance(body.get(key), str):
            raise web.HTTPError(400, f'The body must be a JSON object {{"{key}": "<{key}>"}}.')
        return t.cast(str, body[key])

    def body_size(self) -> tuple[int, int] | None:
        """The terminal size (``rows``, ``cols``: integers, one missing is 24 rows or 80
        columns) of the request's JSON object body, if it has one; 400 for anything else."""
        body = self._json_body()
        if not isinstance(body, dict) or ("rows" not in body and "cols" not in body):
            return None
        rows, cols = body.get("rows", 24), body.get("cols", 80)
        if not all(_is_integer(value) for value in (rows, cols)):
            raise web.HTTPError(400, '"rows" and "cols" must be integers.')
        return int(rows), int(cols)

    def _json_body(self) -> t.Any:
        try:
            return _strict_json(self.request.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return None

    def _session(self, session_id: str) -> ToolTerminal:
        """The caller's own session ``session_id`` (else 403, as for one that does not exist)."""
        try:
            return self.tool_sessions.get_session(self.owner(), session_id)
        except SessionError as error:
            self.fail(error)


class InstancesHandler(ToolTerminalAPIHandler):
    """``GET /tool-terminal/api/instances``: the caller's tool instances."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """List the caller's instances."""
        try:
            models = await self.tool_sessions.list_instances(self.owner())
        except SessionError as error:
            self.fail(error)
        self.finish(json.dumps(models))


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
            self.finish(json.dumps([_observed_model(session) for session in observed]))
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
        try:
            session = await self.tool_sessions.create_session(
                self.owner(), instance, username, size=size
            )
        except SessionError as error:
            self.fail(error)
        self.set_status(201)
        self.set_header(
            "Location", self.base_url.rstrip("/") + f"/tool-terminal/api/sessions/{session.id}"
        )
        self.finish(json.dumps(session.model()))


class OwnSessionHandler(ToolTerminalAPIHandler):
    """Base of the handlers of one of the caller's sessions (no methods of its own: each
    route answers only the methods it defines, anything else 405)."""


class SessionHandler(OwnSessionHandler):
    """``GET``/``DELETE /tool-terminal/api/sessions/{id}``."""

    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        """Show one of the caller's sessions."""
        self.finish(json.dumps(self._session(session_id).model()))

    @web.authenticated
    @authorized
    async def delete(self, session_id: str) -> None:
        """End one of the caller's sessions, killing its processes."""
        session = self._session(session_id)
        await self.tool_sessions.close_session(session, "deleted")
        self.set_status(204)
        self.finish()


class ObserversHandler(ToolTerminalAPIHandler):
    """``GET``/``POST /tool-terminal/api/sessions/{id}/observers``: who may watch a session."""

    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        """The users the caller's session is shared with (read-only)."""
        self.finish(json.dumps(list(self._session(session_id).observers)))

    @web.authenticated
    @authorized
    async def post(self, session_id: str) -> None:
        """Share the caller's session read-only with ``{"user": NAME}``."""
        session = self._session(session_id)
        user = self.body_string("user")
        username = t.cast(User, self.current_user).username
        try:
            await self.tool_sessions.grant(session, user, username)
        except SessionError as error:
            self.fail(error)
        self.set_status(201)
        self.finish(json.dumps(list(session.observers)))


class ObserverHandler(ToolTerminalAPIHandler):
    """``DELETE /tool-terminal/api/sessions/{id}/observers/{user}``: stop sharing."""

    @web.authenticated
    @authorized
    async def delete(self, session_id: str, user: str) -> None:
        """Revoke ``user``'s view; their connections close at once."""
        session = self._session(session_id)
        username = t.cast(User, self.current_user).username
        try:
            self.tool_sessions.revoke(session, user, username)
        except SessionError as error:
            self.fail(error)
        self.set_status(204)
        self.finish()


def _observed_model(session: ToolTerminal) -> dict[str, t.Any]:
    """A session as an observer sees it listed: whose it is, and that it is read-only."""
    return {**session.model(), "owner": session.owner, "role": "observer"}


class SessionResetHandler(OwnSessionHandler):
    """``POST /tool-terminal/api/sessions/{id}/reset``: restart the session's shell."""

    @web.authenticated
    @authorized
    async def post(self, session_id: str) -> None:
        """Kill the shell and everything it started, then start it again."""
        session = self._session(session_id)
        try:
            await self.tool_sessions.reset_session(session)
        except SessionError as error:
            self.fail(error)
        self.finish(json.dumps(session.model()))


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


class TerminalSocket(ToolTerminalMixin, WebSocketMixin, WebSocketHandler, JupyterHandler):
    """``/tool-terminal/websocket/{session_id}``: terminado's protocol over one session."""

    auth_resource = AUTH_RESOURCE
    session: ToolTerminal | None = None
    size: tuple[int, int] | None = None
    #: Who connected, as the session knows them (owner label value or observer name).
    principal = ""
    #: Whether this connection only watches (the session was shared with its user).
    observer = False
    _recheck: PeriodicCallback | None = None
    #: Who connected (the audit names them even once their credentials are gone).
    _username = ""
    #: The owner name the connection acts as (its slot in the per-user connection cap).
    _owner = ""
    #: Whether the connection attached to its session (and holds a connection slot).
    _attached = False
    #: Set when the periodic access check found the owner's credentials gone.
    _access_revoked = False

    def set_default_headers(self) -> None:
        """Leave headers to tornado: a WebSocket upgrade is not an HTML page."""

    def write_error(self, status_code: int, **kwargs: t.Any) -> None:
        """Refusals before the upgrade are JSON messages, as for the REST routes."""
        if status_code == 405:
            self.set_header("Allow", allowed_methods(self))
        t.cast(t.Any, APIHandler).write_error(self, status_code, **kwargs)

    def get_compression_options(self) -> dict[str, t.Any] | None:
        """No compression: a compressed frame could inflate past the size cap."""
        return None

    # Jupyter's WebSocketMixin gives these in milliseconds, which tornado reads as seconds, so
    # its pings would never come: the extension sets its own, in seconds.
    @property
    def ping_interval(self) -> float:
        """Seconds between pings."""
        return float(self.tool_app.ping_interval)

    @property
    def ping_timeout(self) -> float:
        """Seconds a client has to answer a ping."""
        return min(float(self.tool_app.ping_timeout), self.ping_interval)

    @property
    def max_message_size(self) -> int:
        """Frames larger than this close the connection with 1009."""
        return int(self.tool_app.max_message_size)

    async def get(self, *args: t.Any, **kwargs: t.Any) -> None:
        """Check everything before the upgrade; refusals are HTTP 403 and spawn nothing."""
        user = self.current_user
        owner = await self._executing_owner(user) if user else None
        if not user or owner is None:
            raise web.HTTPError(403)
        self._username = user.username
        self._owner = owner
        session_id = args[0] if args else ""
        try:
            self.session, self.observer = self.tool_sessions.get_viewable(owner, session_id)
            self.tool_sessions.check_client_slot(self.session, owner, self.observer)
        except SessionError as error:
            raise web.HTTPError(error.status, error.message) from None
        self.principal = owner
        await super().get(*args, **kwargs)

    async def open(self, *args: t.Any, **kwargs: t.Any) -> None:
        """Attach to the session: ``setup``, the current screen, then live output."""
        self.set_nodelay(True)
        session = self.session
        if session is None or session.ended:
            self.write_message(json.dumps(["disconnect", 1]))
            self.close(1000)
            return
        try:
            # Again: connections that passed the check together may not all fit.
            self.tool_sessions.check_client_slot(session, self._owner, self.observer)
        except SessionError as error:
            self.session = None
            self._error(error.message)
            self.close(1013, "Too many connections")
            return
        self.tool_sessions.client_attached(session, self._owner, observer=self.observer)
        self._attached = True
        await session.attach(self)
        interval = self.tool_app.auth_recheck_interval
        if interval > 0 and self.identity_provider.auth_enabled:
            self._recheck = PeriodicCallback(self._check_access, interval * 1000)
            self._recheck.start()

    async def _check_access(self) -> None:
        """Close the connection if its credentials no longer grant the session.

        A WebSocket is authenticated once, at the upgrade; a logout or a revoked token must
        not leave an open shell behind, so the request's credentials are checked again.
        """
        # PeriodicCallback awaits one check before it schedules the next: they never overlap.
        session = self.session
        if session is None:
            return
        try:
            allowed = await asyncio.wait_for(self._still_allowed(session), ACCESS_CHECK_TIMEOUT)
        except Exception as error:  # noqa: BLE001 - an identity provider that fails refuses
            self.log.warning("Tool terminal access check failed: %s", type(error).__name__)
            allowed = False
        if not allowed and self.session is session:
            self.log.info("Tool terminal %s: access revoked, disconnecting", session.id[:8])
            self.tool_sessions.audit.emit(
                "refuse",
                self._username,
                owner=session.owner,
                status=403,
                reason="access revoked",
                session_id=session.id,
                instance=session.instance.id,
            )
            metrics.count_refusal(403, "access revoked")
            # A session whose owner lost access ends with its last owner connection, without
            # the grace a reload gets: a logout must not leave a shell behind for a minute.
            self._access_revoked = not self.observer
            self._error(ACCESS_ENDED_MESSAGE)
            self.close(1008, "Access revoked")

    async def _executing_owner(
        self, user: User, request: JupyterHandler | None = None
    ) -> str | None:
        """The owner label ``user`` acts as, if the authorizer lets them open terminals (in
        ``request``, this connection's own request unless given)."""
        authorized = await ensure_async(
            self.authorizer.is_authorized(request or self, user, "execute", self.auth_resource)
        )
        if authorized is not True:
            return None
        return self.tool_app.principal_for(user, self.identity_provider)

    async def _still_allowed(self, session: ToolTerminal) -> bool:
        # The upgrade request authenticated again, on a handler of its own (see recheck.py).
        request = recheck_handler(self)
        user = await ensure_async(self.identity_provider.get_user(request))
        if not isinstance(user, User):
            return False
        principal = await self._executing_owner(user, request)
        if self.observer:
            return principal == self.principal and principal in session.observers
        return principal == session.owner

    def send_frame(self, frame: str | bytes) -> t.Awaitable[None] | None:
        """Send one text frame (``bytes`` already UTF-8 encoded, as a session's broadcast is,
        once for all its clients); ``None`` if the connection is gone."""
        try:
            return self.write_message(frame)
        except WebSocketClosedError:
            return None

    def end(self, code: int | None = None, reason: str | None = None) -> None:
        """Close the connection from the server side (by default with 1000, normal closure:
        the session ended; a close frame without a code would reach the client as 1005)."""
        if code is None:
            code, reason = 1000, reason or "The terminal session ended"
        self.close(code, reason)

    def _error(self, message: str) -> None:
        self.send_frame(json.dumps(["error", message]))

    async def on_message(self, message: str | bytes) -> None:
        """Handle ``stdin`` and ``set_size``; refuse anything malformed with an error frame."""
        session = self.session
        if session is None or session.ended:
            return
        if isinstance(message, bytes):
            self._error("Binary frames are not accepted; send JSON text frames.")
            return
        try:
            command = _strict_json(message)
        except (ValueError, RecursionError):
            self._error("Malformed frame: not JSON.")
            return
        if not isinstance(command, list) or not command or not isinstance(command[0], str):
            self._error('Malformed frame: expected a JSON list like ["stdin", "text"].')
            return
        kind = command[0]
        if self.observer and kind in ("stdin", "set_size"):
            self._error("This terminal is shared with you read-only: you cannot type or resize.")
        elif kind == "stdin":
            self._stdin(session, command)
        elif kind == "set_size":
            self._set_size(session, command)
        else:
            self.log.debug("Ignoring tool terminal message of unknown type")

    def _stdin(self, session: ToolTerminal, command: list[t.Any]) -> None:
        if len(command) < 2 or not isinstance(command[1], str):
            self._error('Malformed frame: expected ["stdin", "text"].')
            return
        if not session.write(command[1]):
            self._error(
                "Input not sent: the program in the terminal is not reading its input "
                f"and {session.input_backlog // 1024} KiB are already waiting for it. "
                "Wait for it, or reset the terminal."
            )

    def _set_size(self, session: ToolTerminal, command: list[t.Any]) -> None:
        rows, cols = [*command[1:3], None, None][:2]
        if not all(_is_size(value) for value in (rows, cols)):
            self._error('Malformed frame: expected ["set_size", rows, cols] with integers.')
            return
        self.size = clamp_size(int(rows), int(cols))
        session.resize_requested()

    def on_close(self) -> None:
        """Detach; the last client leaving ends the session."""
        if self._recheck is not None:
            self._recheck.stop()
        session, self.session = self.session, None
        if session is not None and self._attached:
            self._attached = False
            session.detach(self)
            self.tool_sessions.client_detached(
                session,
                self._owner,
                observer=self.observer,
                grace=0 if self._access_revoked else None,
            )


def _is_size(value: t.Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    # xterm sends integral floats through some clients; anything else is refused.
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()
