"""The extension's JSON refusals have the shape of jupyter_server's own API errors.

``base.json_error`` writes them itself (the WebSocket handler is no APIHandler, and a request
refused before authentication cannot use Jupyter's HTML page); this fails if jupyter_server's
``APIHandler.write_error`` changes what its JSON says, so that the two are made alike again.
"""

from __future__ import annotations

import json
import typing as t

import pytest
from jupyter_server.base.handlers import APIHandler
from tornado import httputil, web

from jupyter_tool_terminal.base import json_error
from jupyter_tool_terminal.errors import LimitReached


class _Connection(httputil.HTTPConnection):
    """A request's connection that sends nothing (the answers are read from ``finish``)."""

    def set_close_callback(self, callback: t.Callable[[], None] | None) -> None:
        """Remembers nothing."""


def _handler(jp_serverapp: t.Any) -> tuple[APIHandler, list[t.Any]]:
    request = httputil.HTTPServerRequest(
        start_line=httputil.RequestStartLine("GET", "/tool-terminal/api/sessions", "HTTP/1.1"),
        headers=httputil.HTTPHeaders({"Host": "127.0.0.1:8888"}),
        connection=_Connection(),
    )
    handler = APIHandler(jp_serverapp.web_app, request)
    finished: list[t.Any] = []
    handler.finish = lambda chunk=None: finished.append(json.loads(chunk))  # type: ignore[method-assign,assignment,misc]
    return handler, finished


@pytest.mark.parametrize(
    "error",
    [
        None,
        web.HTTPError(403),
        web.HTTPError(400, "The body must be a JSON object."),
        web.HTTPError(503, "Nobody answers", reason="Engine down"),
        RuntimeError("a bug"),
    ],
    ids=["no exception", "bare HTTPError", "HTTPError message", "HTTPError reason", "a bug"],
)
def test_the_json_is_jupyter_servers(jp_serverapp: t.Any, error: BaseException | None) -> None:
    status = error.status_code if isinstance(error, web.HTTPError) else 500
    theirs, their_body = _handler(jp_serverapp)
    exc_info = (type(error), error, None) if error is not None else None
    theirs.write_error(status, **({"exc_info": exc_info} if exc_info else {}))
    ours, our_body = _handler(jp_serverapp)
    json_error(ours, status, error)
    assert our_body == their_body
    assert ours.get_status() == status


def test_a_session_error_says_its_message_as_written(jp_serverapp: t.Any) -> None:
    handler, body = _handler(jp_serverapp)
    json_error(handler, 429, LimitReached("100% of alice%20's slots"))
    assert body == [{"message": "100% of alice%20's slots", "reason": None}]
