"""The HTTP server's listening sockets during a hand-over: what tornado and jupyter_server do not
offer publicly, in one place (``tests/project/test_upstream.py`` fails when either changes it).

Waiting for upstream:

- jupyter_server cannot start on sockets it is given: a successor must serve on its
  predecessor's listening sockets and bind no port. Once it can (systemd socket activation,
  jupyter-server/jupyter_server#759 and #1591: a server that serves on inherited descriptors),
  :func:`serve_only_on_inherited` becomes a setting and the successor passes its sockets as
  systemd does.
- tornado's ``TCPServer`` can stop accepting only by closing its listening sockets
  (``stop()``), and does not say which sockets it listens on: a running server must stop
  accepting for the hand-over, keep the sockets (their backlog holds the browsers'
  reconnections), and go on accepting if the successor fails. Once ``TCPServer`` can pause
  and resume accepting, or list its sockets, :func:`pause_accepting` uses that.
"""

from __future__ import annotations

import socket
import typing as t

from tornado.httpserver import HTTPServer

if t.TYPE_CHECKING:
    from jupyter_server.serverapp import ServerApp


def pause_accepting(server: HTTPServer) -> list[socket.socket]:
    """Stop accepting connections (they wait in the backlog); the listening sockets."""
    for fd in list(server._handlers):
        server._handlers.pop(fd)()
    return list(server._sockets.values())


def resume_accepting(server: HTTPServer, sockets: list[socket.socket]) -> None:
    """Accept on ``sockets`` again (the hand-over failed)."""
    server.add_sockets(sockets)


def close_listening(server: HTTPServer, sockets: list[socket.socket]) -> None:
    """Close the paused ``sockets`` here (the successor has its own copies)."""
    for sock in sockets:
        server._sockets.pop(sock.fileno(), None)
        sock.close()


def serve_only_on_inherited(serverapp: ServerApp, sockets: list[socket.socket]) -> None:
    """Have ``serverapp`` bind no port of its own: it serves on the predecessor's ``sockets``
    (added with tornado's public ``add_sockets`` once they are let go of), on their port."""
    address = sockets[0].getsockname()
    if isinstance(address, tuple):
        serverapp.port = address[1]
    server: t.Any = serverapp
    server._find_http_port = lambda: None
    server._bind_http_server = lambda: None
