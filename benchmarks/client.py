"""The benchmark's client: terminals of every path as text in, text out, and keystrokes timed.

One :class:`Client` opens and closes terminals of any :class:`~common.Target` (this project's
REST API and WebSocket, terminado's, or reference C's raw exec socket) and proves each shell
ready by an echoed marker; :func:`type_keys` times keystrokes to their echo, the unit of every
echo figure (one session, many sessions, churn). It also asks a server what the phases need to
know of it: how many sessions it still holds, how late its event loop ran.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import random
import socket
import time
import typing as t

import docker
from tornado import httpclient, websocket

from common import KEYS, LINE, MIB, PROMPT, RAW_ENV, READY, READY_COMMAND, BenchError, Target


class TermTimeout(BenchError):
    """Expected output did not arrive in time."""


class Term:
    """One open terminal as the client sees it: text in, text out."""

    def __init__(self, ident: str) -> None:
        self.ident = ident
        self.buf = ""

    async def read(self) -> str | None:
        """The next piece of output, ``None`` once the terminal is gone."""
        raise NotImplementedError

    async def send(self, text: str) -> None:
        """Type ``text`` into the terminal."""
        raise NotImplementedError

    async def close(self) -> None:
        """Let the terminal go (the client side only; see :meth:`Client.close_term`)."""
        raise NotImplementedError

    async def recv(self, timeout: float) -> str:
        """The next piece of output within ``timeout`` s: :class:`TermTimeout` if none came,
        :class:`~common.BenchError` if the terminal is gone."""
        try:
            text = await asyncio.wait_for(self.read(), max(timeout, 0.001))
        except asyncio.TimeoutError:
            raise TermTimeout(
                f"no output within {timeout:.1f} s; got {self.buf[-200:]!r}"
            ) from None
        if text is None:
            raise BenchError(f"terminal closed; output so far {self.buf[-200:]!r}")
        return text

    async def expect(self, pattern: str, timeout: float = 10.0) -> None:
        """Read until ``pattern`` appeared; consume the output up to and including it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            index = self.buf.find(pattern)
            if index >= 0:
                self.buf = self.buf[index + len(pattern) :]
                return
            if len(self.buf) > 1 << 16:
                self.buf = self.buf[-4096:]
            self.buf += await self.recv(deadline - loop.time())


class WsTerm(Term):
    """A terminado-protocol WebSocket (this project and both references)."""

    def __init__(self, ident: str, ws: websocket.WebSocketClientConnection) -> None:
        super().__init__(ident)
        self.ws = ws

    async def read(self) -> str | None:
        while True:
            message = await self.ws.read_message()
            if message is None:
                return None
            frame = json.loads(message)
            if frame[0] == "stdout":
                return t.cast(str, frame[1])
            if frame[0] == "disconnect":
                return None

    async def send(self, text: str) -> None:
        await self.ws.write_message(json.dumps(["stdin", text]))

    async def close(self) -> None:
        self.ws.close()

    async def close_and_wait(self) -> None:
        """Close, and wait for the server's answer: it has let this client go."""
        self.ws.close()
        while await self.ws.read_message() is not None:
            pass


class RawTerm(Term):
    """The exec's hijacked TTY socket itself (reference C)."""

    def __init__(self, ident: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        super().__init__(ident)
        self.reader = reader
        self.writer = writer
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    async def read(self) -> str | None:
        while True:
            data = await self.reader.read(65536)
            if not data:
                return None
            text = self.decoder.decode(data)
            if text:
                return text

    async def send(self, text: str) -> None:
        self.writer.write(text.encode())
        await self.writer.drain()

    async def close(self) -> None:
        with contextlib.suppress(OSError):
            await self.send("exit\r")
        self.writer.close()


class Client:
    """Opens and closes terminals of any target, with one HTTP client and one Docker client."""

    def __init__(self) -> None:
        httpclient.AsyncHTTPClient.configure(None, max_clients=256)
        self.http = httpclient.AsyncHTTPClient()
        self._api: t.Any = None
        #: How often a ready marker had to be sent again (see ``open``).
        self.resends = 0
        #: The last open's steps of a server's terminal, in seconds from its request: the
        #: REST answer (``post``) and the WebSocket's upgrade (``websocket``).
        self.last_steps: dict[str, float] = {}

    def close(self) -> None:
        """Close the HTTP client and the Docker client."""
        self.http.close()
        if self._api is not None:
            self._api.close()

    @property
    def api(self) -> t.Any:
        """The Docker SDK's low-level client, made when first needed (not for local paths)."""
        if self._api is None:
            self._api = docker.from_env(max_pool_size=64).api
        return self._api

    async def request(self, target: Target, method: str, path: str, body: t.Any = None) -> t.Any:
        """A JSON request to the target's server; its decoded answer, an error above 2xx."""
        response = await self.http.fetch(
            target.base + path,
            method=method,
            headers={**target.headers(), "Content-Type": "application/json"},
            body=None if body is None and method != "POST" else json.dumps(body or {}),
            request_timeout=60,
            raise_error=False,
        )
        if response.code >= 300:
            raise BenchError(f"{method} {path}: HTTP {response.code} {response.body[:200]!r}")
        return json.loads(response.body) if response.body else None

    async def websocket(self, target: Target, path: str) -> websocket.WebSocketClientConnection:
        """A WebSocket to the target's server, Nagle off (every keystroke goes out at once)."""
        request = httpclient.HTTPRequest(
            target.ws_base() + path, headers=target.headers(), connect_timeout=30
        )
        ws = await websocket.websocket_connect(request, max_message_size=64 * MIB)
        stream = getattr(ws.protocol, "stream", None)
        if stream is not None:
            stream.set_nodelay(True)
        return ws

    async def open(
        self, target: Target, timeout: float = 30.0, resend_after: float = 1.0
    ) -> tuple[Term, float]:
        """Open a terminal; returns it and the seconds from the request to a proven-ready shell
        (the echoed marker). The shell is then at the benchmark prompt."""
        start = time.perf_counter()
        self.last_steps = {}
        term: Term
        if target.kind == "raw":
            term = await self._open_raw(target)
        else:
            if target.kind == "tool":
                model = await self.request(
                    target, "POST", "/tool-terminal/api/sessions", {"instance": target.container}
                )
                ident, path = model["id"], f"/tool-terminal/websocket/{model['id']}"
            else:
                model = await self.request(target, "POST", "/api/terminals")
                ident, path = model["name"], f"/terminals/websocket/{model['name']}"
            self.last_steps["post"] = time.perf_counter() - start
            term = WsTerm(ident, await self.websocket(target, path))
            self.last_steps["websocket"] = time.perf_counter() - start
            await term.ws.write_message(json.dumps(["set_size", 24, 80, 0, 0]))
        try:
            # Input sent in the instant a busybox shell starts can be lost (seen about once in
            # 300 opens, on the raw socket as well): the marker is sent again if it does not
            # come back, and the open is timed to the first marker that does.
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while True:
                await term.send(READY_COMMAND)
                try:
                    await term.expect(READY, min(resend_after, deadline - loop.time()))
                    break
                except TermTimeout:
                    if loop.time() >= deadline:
                        raise
                    self.resends += 1
            elapsed = time.perf_counter() - start
            await term.expect(PROMPT, timeout)
        except BaseException:
            await self.close_term(target, term)
            raise
        return term, elapsed

    async def _open_raw(self, target: Target) -> RawTerm:
        def start() -> tuple[str, socket.socket]:
            created = self.api.exec_create(
                target.container, ["/bin/sh"], stdin=True, tty=True, environment=RAW_ENV
            )
            sock = self.api.exec_start(created["Id"], tty=True, socket=True)
            raw: socket.socket = sock._sock.dup()
            sock._sock.close()
            sock.close()
            raw.setblocking(False)
            return created["Id"], raw

        exec_id, raw = await asyncio.to_thread(start)
        reader, writer = await asyncio.open_connection(sock=raw, limit=4 * MIB)
        term = RawTerm(exec_id, reader, writer)
        # The size a client would set; not part of the floor, so it does not wait for it.
        asyncio.get_running_loop().run_in_executor(None, self._resize, exec_id)
        return term

    def _resize(self, exec_id: str) -> None:
        with contextlib.suppress(Exception):
            self.api.exec_resize(exec_id, height=24, width=80)

    async def close_term(self, target: Target, term: Term) -> None:
        """Close a terminal the way its UI does (DELETE for the servers: processes end)."""
        try:
            if target.kind == "tool":
                await self.request(target, "DELETE", f"/tool-terminal/api/sessions/{term.ident}")
            elif target.kind == "terminado":
                await self.request(target, "DELETE", f"/api/terminals/{term.ident}")
        finally:
            await term.close()


async def type_keys(
    term: Term,
    samples: list[float],
    *,
    count: int,
    deadline: float | None = None,
    pause: tuple[float, float] | None = None,
    timeout: float = 10.0,
) -> int:
    """Type up to ``count`` keystrokes (and until ``deadline``), one at a time, each timed from
    sending it to its echo. Lines are comments, submitted every ``LINE`` keys. Returns how
    many were typed."""
    loop = asyncio.get_running_loop()
    typed = 0
    while typed < count and (deadline is None or loop.time() < deadline):
        term.buf = ""
        await term.send("#")
        await term.expect("#", timeout)
        for index in range(min(LINE, count - typed)):
            if deadline is not None and loop.time() >= deadline:
                break
            key = KEYS[index % len(KEYS)]
            term.buf = ""
            start = time.perf_counter()
            await term.send(key)
            await term.expect(key, timeout)
            samples.append(time.perf_counter() - start)
            typed += 1
            if pause is not None:
                await asyncio.sleep(random.uniform(*pause))
        await term.send("\r")
        await term.expect(PROMPT, timeout)
    return typed


async def wait_no_sessions(client: Client, target: Target, timeout: float) -> int:
    """Poll the server until it lists no session (at most ``timeout`` s); how many are left."""
    if target.kind == "raw":
        return 0
    path = "/tool-terminal/api/sessions" if target.kind == "tool" else "/api/terminals"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    left = -1
    while loop.time() < deadline:
        with contextlib.suppress(Exception):
            left = len(await client.request(target, "GET", path))
            if left == 0:
                return 0
        await asyncio.sleep(1)
    return left


async def loop_lag(client: Client, target: Target) -> dict[str, t.Any] | None:
    """The server's event-loop lateness since the last call (see ``lagprobe.py``)."""
    if target.kind == "raw":
        return None
    return t.cast(dict[str, t.Any], await client.request(target, "GET", "/bench/lag"))
