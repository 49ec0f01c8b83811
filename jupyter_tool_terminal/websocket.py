"""``/tool-terminal/websocket/{session_id}``: a browser's terminal connection.

Everything is checked before the upgrade (authenticated, authorized to ``execute``, admitted to
the session by the manager); then the connection attaches through the manager, hands each
frame, parsed by ``protocol.py``, to it, and has its credentials checked again while it stays
open. The session itself is the manager's business: this module never touches one.
"""

from __future__ import annotations

import asyncio
import typing as t

from jupyter_core.utils import ensure_async
from jupyter_server.auth.identity import User
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from tornado import web
from tornado.ioloop import PeriodicCallback
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from . import metrics
from .base import ACCESS_CHECK_TIMEOUT, AUTH_RESOURCE, ID, ToolTerminalMixin
from .errors import SessionError
from .protocol import (
    DETACH_CLOSE_CODE,
    FrameError,
    Unknown,
    disconnect_frame,
    error_frame,
    parse_client_frame,
)
from .recheck import recheck_handler

if t.TYPE_CHECKING:
    from .manager import Admission

#: What a terminal whose credentials stopped granting it is told before it closes (1008).
ACCESS_ENDED_MESSAGE = (
    "Your login is no longer valid here (you logged out, or your token or access was revoked), "
    "so this terminal was closed. Log in again to open a new one."
)


class TerminalSocket(ToolTerminalMixin, WebSocketMixin, WebSocketHandler, JupyterHandler):
    """``/tool-terminal/websocket/{session_id}``: terminado's protocol over one session."""

    auth_resource = AUTH_RESOURCE
    #: The connection's admission to its session (``None`` before it, and once it closed).
    admission: Admission | None = None
    #: The client's last requested terminal size (rows, cols), if it sent one.
    size: tuple[int, int] | None = None
    #: Who connected, as the session knows them (owner label value or observer name).
    principal = ""
    #: Whether this connection only watches (the session was shared with its user).
    observer = False
    _recheck: PeriodicCallback | None = None
    #: Who connected (the audit names them even once their credentials are gone).
    _username = ""
    #: Set when the periodic access check found the owner's credentials gone.
    _access_revoked = False

    def set_default_headers(self) -> None:
        """Leave headers to tornado: a WebSocket upgrade is not an HTML page."""

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
        return min(float(self.tool_app.pong_timeout), self.ping_interval)

    @property
    def max_message_size(self) -> int:
        """Frames larger than this close the connection with 1009."""
        return int(self.tool_app.max_message_size)

    async def get(self, *args: t.Any, **kwargs: t.Any) -> None:
        """Check everything before the upgrade; refusals are HTTP errors and spawn nothing."""
        user = self.current_user
        owner = await self._executing_owner(user) if user else None
        if not user or owner is None:
            raise web.HTTPError(403)
        self._username = user.username
        # A SessionError (403, 429) is answered by `write_error`, before any upgrade.
        self.admission = self.tool_sessions.admit(owner, args[0] if args else "")
        self.principal, self.observer = owner, self.admission.observer
        await super().get(*args, **kwargs)

    async def open(self, *args: t.Any, **kwargs: t.Any) -> None:
        """Attach to the session: ``setup``, the current screen, then live output."""
        self.set_nodelay(True)
        admission = self.admission
        try:
            attached = admission is not None and await self.tool_sessions.attach(admission, self)
        except SessionError as error:
            # Connections that passed the check together may not all fit.
            self.admission = None
            self.send_frame(error_frame(error.message))
            self.close(1013, "Too many connections")
            return
        if not attached:
            self.send_frame(disconnect_frame())
            self.close(1000)
            return
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
        admission = self.admission
        if admission is None:
            return
        try:
            allowed = await asyncio.wait_for(self._still_allowed(admission), ACCESS_CHECK_TIMEOUT)
        except Exception as error:  # noqa: BLE001 - an identity provider that fails refuses
            self.log.warning("Tool terminal access check failed: %s", type(error).__name__)
            allowed = False
        if not allowed and self.admission is admission:
            self.log.info(
                "Tool terminal %s: access revoked, disconnecting", admission.session_id[:8]
            )
            self.tool_sessions.audit.emit(
                "refuse",
                self._username,
                owner=admission.owner,
                status=403,
                reason="access revoked",
                session_id=admission.session_id,
                instance=admission.instance_id,
            )
            metrics.count_refusal(403, "access revoked")
            self._access_revoked = True
            self.send_frame(error_frame(ACCESS_ENDED_MESSAGE))
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

    async def _still_allowed(self, admission: Admission) -> bool:
        # The upgrade request authenticated again, on a handler of its own (see recheck.py).
        request = recheck_handler(self)
        user = await ensure_async(self.identity_provider.get_user(request))
        if not isinstance(user, User):
            return False
        principal = await self._executing_owner(user, request)
        return self.tool_sessions.still_admits(admission, principal)

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

    async def on_message(self, message: str | bytes) -> None:
        """Hand ``stdin`` and ``set_size`` to the session; refuse anything malformed with an
        error frame."""
        admission = self.admission
        if admission is None or admission.ended:
            return
        try:
            parsed = parse_client_frame(message)
        except FrameError as error:
            self.send_frame(error_frame(error.message))
            return
        if isinstance(parsed, Unknown):
            self.log.debug("Ignoring tool terminal message of unknown type")
        refusal = self.tool_sessions.receive(admission, self, parsed)
        if refusal is not None:
            self.send_frame(error_frame(refusal))

    def on_close(self) -> None:
        """Detach; the last client leaving ends the session (after the grace), unless it
        closed with :data:`DETACH_CLOSE_CODE` (the tab closed, the session kept)."""
        if self._recheck is not None:
            self._recheck.stop()
        admission, self.admission = self.admission, None
        if admission is not None:
            self.tool_sessions.detach(
                admission,
                self,
                revoked=self._access_revoked,
                kept=self.close_code == DETACH_CLOSE_CODE,
            )


#: The WebSocket route (relative: the server adds its base_url).
default_handlers: list[tuple[str, type[web.RequestHandler]]] = [
    (rf"/tool-terminal/websocket/{ID}", TerminalSocket),
]
