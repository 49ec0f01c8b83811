"""What every handler of the extension shares: its resource, its access to the manager, how a
refusal is answered (one mapping from :class:`Refusal` to a status and a JSON message) and
audited, and how a request's JSON body is read."""

from __future__ import annotations

import asyncio
import http
import json
import typing as t
from http.client import responses

from jupyter_core.utils import ensure_async
from jupyter_server.auth.identity import IdentityProvider, User
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

from . import metrics
from .errors import Refusal
from .manager import valid_session_id
from .protocol import is_integer, strict_json

if t.TYPE_CHECKING:
    from .files import FileTransfers
    from .manager import ToolTerminalManager

#: The authorization resource of every route: list is ``read``, create/reset/delete ``write``,
#: and opening a terminal WebSocket ``execute``.
AUTH_RESOURCE = "jupyter_tool_terminal:terminals"
#: Seconds an identity check may take, a request's or an open terminal's: an identity provider
#: that cannot answer (a JupyterHub that does not respond, whose client waits five minutes)
#: refuses. A request gets a 503 instead of hanging, and a terminal closes instead of staying
#: open on credentials nobody can check.
ACCESS_CHECK_TIMEOUT = 10.0
#: A route's id segment. Handlers match any single path segment; ids are validated strictly by
#: the manager, so that a malformed id gets the same 403 as an unknown one.
ID = r"([^/]+)"


class ToolTerminalExtension(t.Protocol):
    """What the handlers need of the extension application (``app.py`` provides it; naming
    the protocol rather than the app keeps the handlers from importing the app back)."""

    session_manager: ToolTerminalManager | None
    file_transfers: FileTransfers | None
    service_url: str
    ping_interval: float
    pong_timeout: float
    max_message_size: int
    auth_recheck_interval: float

    def principal_for(self, user: User, identity_provider: IdentityProvider) -> str:
        """The owner-label value that ``user`` acts as."""


def status_phrase(status: int) -> str:
    """The reason phrase of an HTTP status ("Forbidden")."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def allowed_methods(handler: web.RequestHandler) -> str:
    """The methods ``handler``'s route answers, for the ``Allow`` header a 405 must carry
    (RFC 9110): those its class defines, not tornado's defaults (which answer 405)."""
    return ", ".join(
        method
        for method in handler.SUPPORTED_METHODS
        if getattr(type(handler), method.lower(), None)
        is not getattr(web.RequestHandler, method.lower(), None)
    )


def json_error(handler: web.RequestHandler, status: int, error: BaseException | None) -> None:
    """Finish ``handler`` with ``status`` and the JSON body jupyter_server's API errors have
    (``APIHandler.write_error``'s: ``{"message", "reason"}``), the message written as it is (a
    :class:`Refusal`'s, an HTTPError's; never a traceback). Written here rather than
    borrowed: the WebSocket handler is no APIHandler (``test_errors`` keeps the two alike)."""
    handler.set_status(status)
    handler.set_header("Content-Type", "application/json")
    reply: dict[str, t.Any] = {"message": responses.get(status, "Unknown HTTP Error")}
    if isinstance(error, Refusal):
        reply.update(message=error.message, reason=None)
    elif isinstance(error, web.HTTPError):
        reply.update(message=error.log_message or reply["message"], reason=error.reason)
    elif error is not None:
        reply.update(message="Unhandled error", reason=None, traceback="")
    handler.finish(json.dumps(reply))


class ToolTerminalMixin(ExtensionHandlerMixin):
    """Shared access to the extension and to the caller's identity as an instance owner."""

    #: Whether refusals are JSON (API routes and the WebSocket) or Jupyter's HTML pages.
    json_errors = True

    @property
    def tool_app(self) -> ToolTerminalExtension:
        """The extension application."""
        return t.cast("ToolTerminalExtension", self.extensionapp)

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
            reason = status_phrase(status)
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
            owner = manager.owner_of(session_id)
            whose = f" (of {owner})" if owner is not None else " (no such session)"
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

    def log_exception(self, typ: t.Any, value: t.Any, tb: t.Any) -> None:
        """A :class:`Refusal` is a refusal, not a fault: no traceback (``on_finish``
        audits it)."""
        if not isinstance(value, Refusal):
            t.cast(t.Any, super()).log_exception(typ, value, tb)

    def write_error(self, status_code: int, **kwargs: t.Any) -> None:
        """Answer a refusal: a :class:`Refusal` with its own status and message, as
        written (an HTTPError's message would show every '%' of a user name doubled); JSON on
        the API routes, and on every route before authentication completed (an HTML error page
        needs the user: jupyter_server's raises without one)."""
        handler = t.cast(JupyterHandler, self)
        if status_code == 405:
            handler.set_header("Allow", allowed_methods(handler))
        error = kwargs["exc_info"][1] if kwargs.get("exc_info") else None
        if isinstance(error, Refusal):
            status_code = error.status
        if self.json_errors or not self.authentication_ran:
            json_error(handler, status_code, error)
            return
        if isinstance(error, Refusal):
            # Jupyter's HTML page formats an HTTPError's message with '%'.
            escaped = web.HTTPError(status_code, error.message.replace("%", "%%"))
            kwargs["exc_info"] = (web.HTTPError, escaped, None)
        handler.set_status(status_code)
        t.cast(t.Any, super()).write_error(status_code, **kwargs)

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
        if not all(is_integer(value) for value in (rows, cols)):
            raise web.HTTPError(400, '"rows" and "cols" must be integers.')
        return int(rows), int(cols)

    def _json_body(self) -> t.Any:
        try:
            return strict_json(self.request.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return None
