"""The REST routes of instances and sessions (``/tool-terminal/api/...``).

Each handler asks the manager and answers its result; a refusal is a :class:`SessionError`
raised through, which ``base.py`` answers with its status and message.
"""

from __future__ import annotations

import asyncio
import json
import typing as t
import urllib.parse
from pathlib import Path

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized
from jupyter_server.auth.identity import User
from jupyter_server.utils import url_path_join
from tornado import iostream, web
from tornado.http1connection import HTTP1Connection

from .base import ID, ToolTerminalAPIHandler
from .errors import NotPermitted
from .models import instance_models
from .recording import list_recordings, recording_path
from .runtime.base import Instance, valid_instance_id
from .runtime.transfer import FileUpload, TransferRefused

if t.TYPE_CHECKING:
    from .files import FileTransfers


class InstancesHandler(ToolTerminalAPIHandler):
    """``GET /tool-terminal/api/instances``: the caller's tool instances."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """List the caller's instances."""
        instances = await self.tool_sessions.list_instances(self.owner())
        self.finish(json.dumps(instance_models(instances)))


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


def attachment(path: str) -> str:
    """A ``Content-Disposition`` that saves the file under its own name (RFC 6266: an ASCII
    fallback in ``filename``, the exact name in ``filename*``)."""
    name = path.rstrip("/").rsplit("/", 1)[-1] or "download"
    fallback = "".join(
        character if 32 <= ord(character) < 127 and character not in '"\\' else "_"
        for character in name
    )
    header = f'attachment; filename="{fallback}"'
    if fallback != name:
        header += f"; filename*=UTF-8''{urllib.parse.quote(name, safe='')}"
    return header


@web.stream_request_body
class InstanceFilesHandler(ToolTerminalAPIHandler):
    """``GET``/``PUT /tool-terminal/api/instances/{id}/files?path=...``: a file out of, or
    into, one of the caller's tool instances, as the tool type's user.

    An upload's body is streamed into the instance as it arrives (never held whole): its
    checks run in :meth:`prepare`, once the headers are in and before any byte of the body
    is read, so that a refusal is answered at once and the body is not kept.
    """

    #: The upload under way (between ``prepare`` and the end of ``put``), and its instance.
    upload: FileUpload | None = None
    upload_instance: Instance | None = None
    #: Why writing the upload's body failed (the instance's end of it stopped taking it).
    upload_failed: BaseException | None = None

    @property
    def file_transfers(self) -> FileTransfers:
        """The file transfer service (after the same 503 checks as for sessions)."""
        self.tool_sessions  # noqa: B018 - 503 when the extension serves no terminals
        transfers = self.tool_app.file_transfers
        assert transfers is not None
        return transfers

    def _query(self) -> tuple[str | None, str | None]:
        return self.get_query_argument("path", None), self.get_query_argument("session", None)

    @web.authenticated
    @authorized
    async def get(self, instance_id: str) -> None:
        """Send the file at ``path`` as an attachment."""
        self.requested_instance = instance_id if valid_instance_id(instance_id) else None
        owner = self.owner()
        path, session_id = self._query()
        instance, download = await self.file_transfers.open_download(
            owner, instance_id, path, session_id
        )
        try:
            self.set_header("Content-Type", "application/octet-stream")
            self.set_header("Content-Disposition", attachment(download.path))
            self.set_header("Content-Length", str(download.size))
            self.set_header("Cache-Control", "no-store")
            while piece := await download.read():
                self.write(piece)
                await self.flush()
        except (OSError, iostream.StreamClosedError) as error:
            # The headers are out: the only way left to say the file is incomplete is to end
            # the connection short of its Content-Length.
            self.log.warning("Download of %s from %s broke off: %s", path, instance_id, error)
            t.cast(HTTP1Connection, self.request.connection).stream.close()
            return
        finally:
            download.close()
        username = t.cast(User, self.current_user).username
        self.file_transfers.audit(
            "download",
            username,
            owner=owner,
            instance=instance,
            path=download.path,
            size=download.size,
        )
        self.finish(set_content_type="application/octet-stream")

    async def prepare(self, *args: t.Any, **kwargs: t.Any) -> None:
        """For an upload: authenticate, authorize and check it before its body is read."""
        await super().prepare(*args, **kwargs)
        if self.request.method != "PUT" or self._finished:
            return
        # `put` runs only once the body is read: its decorators' checks are made here first.
        user = self.current_user
        if not user:
            raise web.HTTPError(403)
        allowed = self.authorizer.is_authorized(self, user, "write", self.auth_resource)
        if not await ensure_async(allowed):
            raise web.HTTPError(403, "You are not allowed to write tool instance files.")
        instance_id = self.path_args[0]
        self.requested_instance = instance_id if valid_instance_id(instance_id) else None
        length = self.request.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise TransferRefused(411, "Send the file with its Content-Length.")
        path, session_id = self._query()
        overwrite = self.get_query_argument("overwrite", "false") == "true"
        self.upload_instance, self.upload = await self.file_transfers.open_upload(
            self.owner(), instance_id, path, session_id, size=int(length), overwrite=overwrite
        )
        t.cast(HTTP1Connection, self.request.connection).set_max_body_size(int(length))

    async def data_received(self, chunk: bytes) -> None:
        """Pass a piece of the upload on (the next is read once it is taken)."""
        if self.upload is not None and self.upload_failed is None:
            try:
                await self.upload.write(chunk)
            except OSError as error:
                # The rest is read and dropped; `put` says what the instance said.
                self.upload_failed = error

    @web.authenticated
    @authorized
    async def put(self, instance_id: str) -> None:
        """Put the uploaded file in place: 201 with its absolute path and size."""
        del instance_id  # checked in `prepare`
        upload, instance = self.upload, self.upload_instance
        # (`prepare` refused otherwise.)
        assert upload is not None
        assert instance is not None
        await upload.finish()
        self.upload = None
        username = t.cast(User, self.current_user).username
        self.file_transfers.audit(
            "upload",
            username,
            owner=self.owner(),
            instance=instance,
            path=upload.path,
            size=upload.size,
        )
        self.set_status(201)
        self.finish(json.dumps({"path": upload.path, "size": upload.size}))

    def on_connection_close(self) -> None:
        """The client went away mid-upload: nothing of it is kept."""
        if self.upload is not None:
            self.upload.abort()
        super().on_connection_close()

    def on_finish(self) -> None:
        if self.upload is not None:  # refused or broken: nothing of it is kept
            self.upload.abort()
            self.upload = None
        super().on_finish()


class RecordingsHandler(ToolTerminalAPIHandler):
    """``GET /tool-terminal/api/recordings``: the caller's own recordings, newest first."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """List ``{"id", "instance", "session", "title", "started", "size"}``."""
        recorder = self.tool_sessions.recorder
        listed = (
            []
            if recorder is None
            else await asyncio.to_thread(list_recordings, Path(recorder.directory), self.owner())
        )
        self.finish(json.dumps(listed))


class RecordingHandler(ToolTerminalAPIHandler):
    """``GET /tool-terminal/api/recordings/{id}``: one of the caller's recordings, as an
    asciicast v2 file (``application/x-asciicast``), to play or save."""

    @web.authenticated
    @authorized
    async def get(self, recording_id: str) -> None:
        """Send the file (another user's, or an unknown one: 403, the same answer)."""
        recorder = self.tool_sessions.recorder
        path = (
            None
            if recorder is None
            else await asyncio.to_thread(
                recording_path, Path(recorder.directory), self.owner(), recording_id
            )
        )
        if path is None:
            unknown = "No such recording for this user."
            raise NotPermitted(unknown)
        self.set_header("Content-Type", "application/x-asciicast")
        self.set_header("Content-Disposition", attachment(path.name))
        self.set_header("Cache-Control", "no-store")
        with path.open("rb") as file:
            while piece := await asyncio.to_thread(file.read, 256 * 1024):
                self.write(piece)
                await self.flush()
        self.finish(set_content_type="application/x-asciicast")


#: The REST routes of instances and sessions (relative: the server adds its base_url).
default_handlers: list[tuple[str, type[web.RequestHandler]]] = [
    (r"/tool-terminal/api/instances", InstancesHandler),
    # (Instance ids may hold one '/': ENGINE/CONTAINER.)
    (r"/tool-terminal/api/instances/(.+)/files", InstanceFilesHandler),
    (r"/tool-terminal/api/sessions", SessionsHandler),
    (r"/tool-terminal/api/recordings", RecordingsHandler),
    (rf"/tool-terminal/api/recordings/{ID}", RecordingHandler),
    (rf"/tool-terminal/api/sessions/{ID}", SessionHandler),
    (rf"/tool-terminal/api/sessions/{ID}/reset", SessionResetHandler),
    (rf"/tool-terminal/api/sessions/{ID}/observers", ObserversHandler),
    (rf"/tool-terminal/api/sessions/{ID}/observers/{ID}", ObserverHandler),
]
