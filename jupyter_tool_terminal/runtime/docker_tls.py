"""Exec streams from a Docker Engine reached over TLS (``DOCKER_HOST=tcp://...`` with
``DOCKER_TLS_VERIFY``), driven by the event loop like a local engine's.

The SDK's ``exec_start(socket=True)`` hands back the ``ssl.SSLSocket`` on which it already
made the TLS handshake; that session's state lives in OpenSSL behind a blocking socket and
cannot be moved to asyncio, and a new handshake (``loop.start_tls``) on its TCP socket would
speak TLS inside TLS. So the exec is started here on a connection that asyncio's own TLS
opens, with the SDK's certificates, and is then the shell's :class:`ShellStream`: its flow
control (backpressure, holding output) is the same as on a local socket, and no thread reads it.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import typing as t
import urllib.parse

from .base import EngineUnreachable, RuntimeUnavailable
from .stream import ShellStream

#: The largest HTTP head the engine may answer an exec start with.
_HEAD_LIMIT = 16 * 1024


def is_tls(api: t.Any) -> bool:
    """Whether the SDK client ``api`` talks to its engine over TLS."""
    return str(api.base_url).startswith("https://")


def ssl_context(api: t.Any) -> ssl.SSLContext:
    """A client TLS context with the SDK client's CA and client certificate (blocking: it
    reads the certificate files)."""
    verify = api.verify
    context = ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)
    if verify is False:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    cert = api.cert
    if isinstance(cert, tuple | list):
        context.load_cert_chain(cert[0], cert[1])
    elif isinstance(cert, str):
        context.load_cert_chain(cert)
    return context


def _start_request(api: t.Any, exec_id: str, tty: bool) -> bytes:
    """The engine's exec start request, asking it to upgrade the connection to the stream."""
    body = json.dumps({"Detach": False, "Tty": tty}).encode()
    head = "\r\n".join(
        [
            f"POST /v{api.api_version}/exec/{exec_id}/start HTTP/1.1",
            f"Host: {urllib.parse.urlsplit(str(api.base_url)).netloc}",
            f"User-Agent: {api.headers.get('User-Agent', 'jupyter-tool-terminal')}",
            "Content-Type: application/json",
            "Connection: Upgrade",
            "Upgrade: tcp",
            f"Content-Length: {len(body)}",
        ]
    )
    return head.encode() + b"\r\n\r\n" + body


def _check_answer(head: bytes) -> None:
    status = head.split(b" ", 2)[1:2]
    # 101 when the engine upgrades the connection; engines before API 1.42 answer 200.
    if status not in ([b"101"], [b"200"]):
        gone = status == [b"404"]
        msg = "the tool instance is gone" if gone else "the container engine refused the operation"
        raise RuntimeUnavailable(msg)


def _address(api: t.Any) -> tuple[str, int]:
    url = urllib.parse.urlsplit(str(api.base_url))
    return url.hostname or "localhost", url.port or 2376


_UNREACHABLE = "the container engine is not reachable"


async def start_exec(
    api: t.Any, context: ssl.SSLContext, exec_id: str, *, tty: bool = True
) -> ShellStream:
    """Start exec ``exec_id`` attached, on a new TLS connection; return its stream.

    Raises :class:`RuntimeUnavailable` (safe to show) if the engine cannot be reached or does
    not upgrade the connection.
    """
    host, port = _address(api)
    loop = asyncio.get_running_loop()
    try:
        _, stream = await loop.create_connection(
            ShellStream, host, port, ssl=context, server_hostname=host
        )
    except (OSError, ssl.SSLError) as error:
        raise EngineUnreachable(_UNREACHABLE) from error
    try:
        await stream.write(_start_request(api, exec_id, tty))
        _check_answer(await stream.read_until(b"\r\n\r\n", _HEAD_LIMIT))
    except (OSError, ConnectionError) as error:
        stream.close()
        raise EngineUnreachable(_UNREACHABLE) from error
    except RuntimeUnavailable:
        stream.close()
        raise
    return stream
