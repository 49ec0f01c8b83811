"""Performance benchmark of jupyter-tool-terminal against the ways people get terminals today.

``python benchmarks/run.py`` starts everything it measures itself, over loopback only:

* ``tool``: jupyter_server + this extension, real Docker Engine, a busybox tool instance;
* ``local``: jupyter_server + this extension with its local runtime (a local instance, /bin/sh);
* ``A``: jupyter_server + ``jupyter_server_terminals`` with a local ``/bin/sh``;
* ``B``: the same with ``shell_command=["docker", "exec", "-it", CONTAINER, "/bin/sh"]``;
* ``C``: no server, no WebSocket: the ``docker`` SDK's raw exec TTY socket on the same container.

Floods are read by a plain blocking loop in a thread of its own, the same for every path (C's
socket, the others' WebSocket frames): what the path gives, not what a client keeps up with.
For comparison they are also read by the asyncio client every other phase uses.

Echo is also shown against its floor: the WebSocket hop alone (each server's ``/bench/echo``)
plus C's echo, and what a path adds above it (``echo p50 - hop - C``).

It measures opening a terminal, keystroke echo, a flood of output, many concurrent typing
sessions and one typing session while others open and close, prints one table with every figure
of this project as a ratio to A, B and C of the same run, writes a JSON file and a plot.

``--quick`` runs every path once with tiny sizes (what CI runs); it exits non-zero if any fails.
Every container and server it starts is removed at the end, also on failure or Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import contextlib
import dataclasses
import datetime
import gc
import json
import math
import os
import platform
import random
import resource
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import typing as t
import urllib.parse
from importlib.metadata import version
from pathlib import Path

import docker
import matplotlib
import psutil
import websocket as blocking_websocket
from tornado import httpclient, websocket

matplotlib.use("Agg")
import matplotlib.pyplot as plt

SCRIPT = Path(__file__).resolve()
HERE = SCRIPT.parent
REPO = HERE.parent
IMAGE = "jupyter-tool-terminal-test:latest"
OWNER = "bench"
TOOL = "bench"
#: The id of the local runtime's tool instance.
LOCAL_INSTANCE = "bench-local"
RUN_LABEL = "jupyter-tool-terminal-bench.run"
#: The prompt every shell gets; typed as ``'@@''P> '`` so the echo of the command never matches.
PROMPT = "@@P> "
READY_COMMAND = "PS1='@@''P> '; echo READY_$((6*7))\r"
READY = "READY_42"
#: Keystrokes cycle through letters that no escape sequence of busybox ash ends with.
KEYS = "abcdefgijkopqrsuvwxyz"
#: Keystrokes per line before the line is submitted (keeps lines shorter than 80 columns).
LINE = 40
FLOOD_LINE = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
MIB = 1024 * 1024
#: The environment of the raw exec (reference C), as the project's exec gets.
RAW_ENV = {"TERM": "xterm-256color", "LANG": "C.UTF-8"}
#: Every target, in the order of the table.
KEYS_ALL = ("tool", "local", "A", "B", "C")
LABELS = {
    "tool": "this project",
    "local": "this project,\nlocal runtime",
    "A": "A: terminado\n/bin/sh",
    "B": "B: terminado\ndocker exec CLI",
    "C": "C: raw exec\nsocket (SDK)",
}


class BenchError(Exception):
    """A measurement path failed."""


class TermTimeout(BenchError):
    """Expected output did not arrive in time."""


# -- configuration ---------------------------------------------------------------------------


@dataclasses.dataclass
class Plan:
    """How much of everything is measured."""

    quick: bool
    opens: int
    keystrokes: int
    flood_bytes: int
    scale_ns: list[int]
    scale_ns_b: list[int]
    scale_seconds: float
    churn_seconds: float
    churners: int
    flood_rounds: int

    @classmethod
    def make(cls, quick: bool) -> Plan:
        if quick:
            return cls(True, 3, 10, 1_000_000, [5], [5], 2.0, 2.0, 2, 1)
        return cls(False, 30, 300, 50_000_000, [50, 200, 500], [50, 200], 10.0, 10.0, 4, 5)


@dataclasses.dataclass
class Target:
    """Something that opens terminals: ``kind`` is ``tool``, ``terminado`` or ``raw``."""

    key: str
    kind: str
    base: str = ""
    token: str = ""
    container: str = ""
    #: Whether the server has lagprobe's ``/bench/echo`` (the WebSocket hop alone).
    hop: bool = True
    #: The server's process id (for its CPU time), if this run started it.
    server_pid: int | None = None

    def ws_base(self) -> str:
        return self.base.replace("http://", "ws://", 1)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}


# -- statistics ------------------------------------------------------------------------------


def percentile(values: t.Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``nan`` for no values)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


# -- terminals -------------------------------------------------------------------------------


class Term:
    """One open terminal as the client sees it: text in, text out."""

    def __init__(self, ident: str) -> None:
        self.ident = ident
        self.buf = ""

    async def read(self) -> str | None:
        """The next piece of output, ``None`` once the terminal is gone."""
        raise NotImplementedError

    async def send(self, text: str) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def recv(self, timeout: float) -> str:
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

    def close(self) -> None:
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
            term = WsTerm(ident, await self.websocket(target, path))
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


# -- measurements ----------------------------------------------------------------------------


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


async def measure_opens(
    client: Client, targets: list[Target], plan: Plan
) -> dict[str, dict[str, t.Any]]:
    """Open (and close) ``plan.opens`` terminals of every target, taking turns so that drift of
    the machine affects all alike, with a pause after each so no close overlaps an open."""
    times: dict[str, list[float]] = {target.key: [] for target in targets}
    for _ in range(plan.opens):
        for target in targets:
            term, elapsed = await client.open(target)
            times[target.key].append(elapsed)
            await client.close_term(target, term)
            await asyncio.sleep(0.1)
    return {key: open_figures(values) for key, values in times.items()}


def open_figures(times: list[float]) -> dict[str, t.Any]:
    return {
        "p50_ms": ms(percentile(times, 0.5)),
        "p95_ms": ms(percentile(times, 0.95)),
        "n": len(times),
    }


async def measure_echoes(
    client: Client, targets: list[Target], plan: Plan
) -> dict[str, dict[str, t.Any]]:
    """``plan.keystrokes`` keystrokes on one terminal of every target, a line of each in turn
    (so that whatever else the machine does hits all alike), one key at a time. On every
    server, as many again into ``/bench/echo`` (``lagprobe.py``): the WebSocket hop alone."""
    terms: dict[str, Term] = {}
    hops: dict[str, Term] = {}
    samples: dict[str, list[float]] = {target.key: [] for target in targets}
    hop_samples: dict[str, list[float]] = {}
    try:
        for target in targets:
            terms[target.key], _ = await client.open(target)
            await type_keys(terms[target.key], [], count=min(20, plan.keystrokes))
            if target.kind != "raw" and target.hop:
                path = "/bench/echo?" + urllib.parse.urlencode({"prompt": PROMPT})
                hops[target.key] = WsTerm("hop", await client.websocket(target, path))
                hop_samples[target.key] = []
        while any(len(values) < plan.keystrokes for values in samples.values()):
            for target in targets:
                left = plan.keystrokes - len(samples[target.key])
                if left > 0:
                    await type_keys(terms[target.key], samples[target.key], count=min(LINE, left))
                    if target.key in hops:
                        await type_keys(
                            hops[target.key], hop_samples[target.key], count=min(LINE, left)
                        )
    finally:
        for target in targets:
            if target.key in terms:
                with contextlib.suppress(Exception):
                    await client.close_term(target, terms[target.key])
            if target.key in hops:
                await hops[target.key].close()
    figures: dict[str, dict[str, t.Any]] = {}
    for key, values in samples.items():
        figures[key] = {
            "p50_ms": ms(percentile(values, 0.5)),
            "p99_ms": ms(percentile(values, 0.99)),
            "max_ms": ms(max(values)),
            "n": len(values),
        }
        if hop_samples.get(key):
            figures[key]["hop_p50_ms"] = ms(percentile(hop_samples[key], 0.5))
            figures[key]["hop_p99_ms"] = ms(percentile(hop_samples[key], 0.99))
    # A server's echo cannot beat its floor: the WebSocket hop alone (same server, no shell)
    # plus the raw exec round trip (C). What lies above that floor is the path's own cost.
    raw = next((target.key for target in targets if target.kind == "raw"), None)
    for key, found in figures.items():
        if raw is not None and key != raw and "hop_p50_ms" in found:
            floor = found["hop_p50_ms"] + figures[raw]["p50_ms"]
            found["floor_p50_ms"] = round(floor, 3)
            found["above_floor_p50_ms"] = round(found["p50_ms"] - floor, 3)
    return figures


def flood_expected(nbytes: int) -> str:
    line = FLOOD_LINE + "\n"
    return (line * (nbytes // len(line) + 1))[:nbytes]


async def measure_floods(
    client: Client, targets: list[Target], plan: Plan
) -> dict[str, dict[str, t.Any]]:
    """``plan.flood_rounds`` floods through every target, taking turns; the median counts.

    Every path is read twice a round: by a plain blocking loop in a thread (the figure: what
    the path gives; C's raw socket, the WebSocket paths' frames) and by the asyncio client every
    other phase uses (shown beside it: what that client reaches)."""
    rates: dict[str, list[float]] = {target.key: [] for target in targets}
    cpus: dict[str, list[dict[str, float]]] = {target.key: [] for target in targets}
    asyncio_client: dict[str, list[float]] = {target.key: [] for target in targets}
    for _ in range(plan.flood_rounds):
        for target in targets:
            if target.kind == "raw":
                found = await asyncio.to_thread(
                    raw_flood_blocking, client.api, target.container, plan.flood_bytes
                )
            else:
                found = await measure_flood_blocking(client, target, plan)
            rates[target.key].append(found["mb_s"])
            cpus[target.key].append(found["cpu_ms_per_mb"])
            asyncio_client[target.key].append((await measure_flood(client, target, plan))["mb_s"])
    return {
        key: {
            "mb_s": round(statistics.median(values), 2),
            "rounds_mb_s": values,
            "asyncio_client_mb_s": round(statistics.median(asyncio_client[key]), 2),
            "asyncio_client_rounds_mb_s": asyncio_client[key],
            "bytes": plan.flood_bytes,
            # Where a megabyte's CPU went (median of the rounds, per process group).
            "cpu_ms_per_mb": {
                part: round(statistics.median(cpu[part] for cpu in cpus[key]), 2)
                for part in CPU_PARTS
            },
        }
        for key, values in rates.items()
    }


async def measure_flood_blocking(client: Client, target: Target, plan: Plan) -> dict[str, t.Any]:
    """A flood through a WebSocket path read by the blocking reader: the terminal is opened as
    always (its shell proven ready), its asyncio connection closed, and the blocking reader
    connects to the same terminal (both servers keep a terminal whose client left)."""
    term, _ = await client.open(target)
    try:
        assert isinstance(term, WsTerm)
        await term.close_and_wait()
        path = (
            f"/tool-terminal/websocket/{term.ident}"
            if target.kind == "tool"
            else f"/terminals/websocket/{term.ident}"
        )
        return await asyncio.to_thread(websocket_flood_blocking, target, path, plan.flood_bytes)
    finally:
        await client.close_term(target, term)


def flood_command(nbytes: int) -> str:
    return f"echo F_$((6*7)); yes {FLOOD_LINE} | head -c {nbytes}; echo G_$((6*7))\r"


def check_flood(text: str, nbytes: int) -> None:
    """Every byte of the flood arrived (the prompt may follow the end marker)."""
    body = text[: text.rindex("G_42")].replace("\r\n", "\n")
    if body != flood_expected(nbytes):
        raise BenchError(f"flood: {len(body)} characters arrived, expected {nbytes}")


def raw_flood_blocking(api: t.Any, container: str, nbytes: int) -> dict[str, t.Any]:
    """Reference C at the socket's own speed: a plain blocking ``recv`` loop on the exec's raw
    TTY socket, in a thread of its own (no event loop, no decoding while timed)."""
    created = api.exec_create(container, ["/bin/sh"], stdin=True, tty=True, environment=RAW_ENV)
    hijacked = api.exec_start(created["Id"], tty=True, socket=True)
    raw: socket.socket = hijacked._sock.dup()
    hijacked._sock.close()
    hijacked.close()
    raw.setblocking(True)

    def read_until(marker: bytes, data: bytearray) -> int:
        while (index := data.find(marker)) < 0:
            chunk = raw.recv(1 << 20)
            if not chunk:
                raise BenchError(f"raw socket closed before {marker!r}")
            data += chunk
        return index + len(marker)

    def next_piece() -> bytes:
        chunk = raw.recv(1 << 20)
        if not chunk:
            raise BenchError("raw socket closed during the flood")
        return chunk

    try:
        seen = bytearray()
        # Input sent in the instant a busybox shell starts can be lost (see Client.open).
        raw.settimeout(1.0)
        for attempt in range(10):
            raw.sendall(READY_COMMAND.encode())
            try:
                read_until(READY.encode(), seen)
                break
            except TimeoutError:
                if attempt == 9:
                    raise
        raw.settimeout(max(60.0, nbytes / 1e6))
        raw.sendall(flood_command(nbytes).encode())
        seen = seen[read_until(b"F_42\r\n", seen) :]
        found, pieces = time_flood(next_piece, bytes(seen), nbytes, None)
        check_flood(b"".join(pieces).decode("utf-8", errors="replace"), nbytes)
        with contextlib.suppress(OSError):
            raw.sendall(b"exit\r")
    finally:
        raw.close()
    return found


def time_flood(
    next_piece: t.Callable[[], bytes], before: bytes, nbytes: int, server_pid: int | None
) -> tuple[dict[str, t.Any], list[bytes]]:
    """Read pieces of a flood until its end marker, timed, with nothing else done meanwhile
    (what is read is only kept; it is checked afterwards). Returns the figures and the pieces,
    ``before`` (output that came with the start marker) first."""
    pieces = [before]
    tail = before[-64:]
    meter = CpuMeter(server_pid)
    start = time.perf_counter()
    while b"G_42" not in tail:
        piece = next_piece()
        pieces.append(piece)
        tail = (tail + piece[-64:])[-64:]
    elapsed = time.perf_counter() - start
    figures = {
        "mb_s": round(nbytes / elapsed / 1e6, 2),
        "seconds": round(elapsed, 3),
        "bytes": nbytes,
        "cpu_ms_per_mb": meter.ms_per_mb(nbytes),
    }
    return figures, pieces


class BlockingFrames:
    """A terminado-protocol WebSocket read by a plain blocking loop, in a thread of its own: the
    same reader as reference C's, for the WebSocket paths, so that no path's figure is the
    asyncio client's limit (a flood of small frames keeps that client's core nearly busy).

    The handshake is websocket-client's (it reads no further than the headers); frames are then
    cut out of large ``recv`` s here, because websocket-client's own frame reader reads in small
    pieces and itself capped a flood at about 4.4 MB/s on this machine (against 30-45 here).
    Server frames are unmasked and not fragmented (tornado's)."""

    #: What a stdout frame's JSON starts and ends with (the servers' ``json.dumps``).
    STDOUT_HEAD = b'["stdout", "'
    STDOUT_END = b'"]'

    def __init__(self, target: Target, path: str) -> None:
        self.ws = blocking_websocket.create_connection(
            target.ws_base() + path,
            header=[f"{name}: {value}" for name, value in target.headers().items()],
            timeout=60,
        )
        if self.ws.sock is None:
            raise BenchError(f"could not connect to {path}")
        self.sock: socket.socket = self.ws.sock
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.pos = 0

    def send(self, message: list[t.Any]) -> None:
        self.ws.send(json.dumps(message))

    def _need(self, size: int) -> None:
        while len(self.buf) - self.pos < size:
            if self.pos > MIB:
                del self.buf[: self.pos]
                self.pos = 0
            data = self.sock.recv(MIB)
            if not data:
                raise BenchError("the WebSocket closed during the flood")
            self.buf += data

    def frame(self) -> tuple[int, bytes]:
        """The next frame's opcode and payload."""
        self._need(2)
        opcode, length, header = self.buf[self.pos] & 0x0F, self.buf[self.pos + 1] & 0x7F, 2
        if length >= 126:
            header = 4 if length == 126 else 10
            self._need(header)
            length = int.from_bytes(self.buf[self.pos + 2 : self.pos + header], "big")
        self._need(header + length)
        start = self.pos + header
        self.pos = start + length
        return opcode, bytes(self.buf[start : self.pos])

    def stdout(self) -> bytes:
        """The next stdout frame's JSON string body, still escaped (pings and other frames are
        skipped; a close frame ends the flood)."""
        while True:
            opcode, payload = self.frame()
            if opcode == 0x8:
                raise BenchError(f"the server closed the WebSocket: {payload[2:]!r}")
            if opcode == 0x1 and payload.startswith(self.STDOUT_HEAD):
                return payload[len(self.STDOUT_HEAD) : -len(self.STDOUT_END)]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close(timeout=1)


def websocket_flood_blocking(target: Target, path: str, nbytes: int) -> dict[str, t.Any]:
    """A flood through a WebSocket path, read by :class:`BlockingFrames` (the terminal is open and
    its shell at the prompt; no other client is connected)."""
    frames = BlockingFrames(target, path)
    try:
        frames.send(["set_size", 24, 80, 0, 0])
        frames.send(["stdin", flood_command(nbytes)])
        seen = b""
        while (index := seen.find(b"F_42\\r\\n")) < 0:
            seen += frames.stdout()
        found, pieces = time_flood(
            frames.stdout, seen[index + len(b"F_42\\r\\n") :], nbytes, target.server_pid
        )
        check_flood(json.loads(b'"' + b"".join(pieces) + b'"'), nbytes)
    finally:
        frames.close()
    return found


#: Where a flood's CPU is counted: the server, the engine, this client, and the whole machine
#: (which also holds the shell's own pipeline and the kernel's terminal work: a flood whose
#: machine figure is far below ``cores x 1000 / MB/s`` is bound by latency, not CPU).
CPU_PARTS = ("server", "engine", "client", "machine")


class CpuMeter:
    """CPU seconds spent while a flood runs, by the server, the engine and this client (this
    process): where a megabyte's CPU goes, and whether the client could be the bottleneck."""

    def __init__(self, server_pid: int | None) -> None:
        self.servers = server_processes(server_pid)
        self.engine = engine_processes()
        self.before = self._now()

    def _now(self) -> list[float]:
        return [
            cpu_seconds(self.servers),
            cpu_seconds(self.engine),
            time.process_time(),
            machine_busy_seconds(),
        ]

    def ms_per_mb(self, nbytes: int) -> dict[str, float]:
        """Milliseconds of CPU per megabyte of output since this meter was made."""
        spent = [b - a for a, b in zip(self.before, self._now(), strict=True)]
        per_mb = [round(seconds * 1e3 / (nbytes / 1e6), 2) for seconds in spent]
        return dict(zip(CPU_PARTS, per_mb, strict=True))


async def measure_flood(client: Client, target: Target, plan: Plan) -> dict[str, t.Any]:
    """``plan.flood_bytes`` of output through the terminal, every byte checked."""
    nbytes = plan.flood_bytes
    term, _ = await client.open(target)
    loop = asyncio.get_running_loop()
    try:
        await term.send(flood_command(nbytes))
        await term.expect("F_42\r\n")
        meter = CpuMeter(target.server_pid)
        start = time.perf_counter()
        chunks = [term.buf]
        term.buf = ""
        received = len(chunks[0])
        deadline = loop.time() + max(60.0, nbytes / 1e6)
        tail = chunks[0][-16:]
        while "G_42" not in tail:
            chunk = await term.recv(deadline - loop.time())
            chunks.append(chunk)
            received += len(chunk)
            tail = (tail + chunk)[-16:]
        elapsed = time.perf_counter() - start
        cpu = meter.ms_per_mb(nbytes)
        text = "".join(chunks)
        del chunks
        check_flood(text, nbytes)
        del text
    finally:
        await client.close_term(target, term)
    return {
        "mb_s": round(nbytes / elapsed / 1e6, 2),
        "seconds": round(elapsed, 3),
        "bytes": nbytes,
        "cpu_ms_per_mb": cpu,
    }


def tree_memory(pid: int) -> dict[str, float]:
    """RSS and PSS (bytes) of a process and every process it started."""
    root = psutil.Process(pid)
    processes = [root, *root.children(recursive=True)]
    rss = pss = 0.0
    count = 0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            info = process.memory_full_info()
            rss += info.rss
            pss += getattr(info, "pss", info.rss)
            count += 1
    return {"rss": rss, "pss": pss, "processes": count}


def cpu_seconds(processes: t.Iterable[t.Any]) -> float:
    """User + system CPU seconds of some processes (vanished ones count 0)."""
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (every core, every process) since boot:
    what a runc exec costs shows up in short-lived processes no process list catches."""
    times = psutil.cpu_times()
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


def engine_processes() -> list[t.Any]:
    """The Docker Engine's processes: dockerd, containerd and the containers' shims."""
    found = []
    for process in psutil.process_iter(["name"]):
        name = process.info.get("name") or ""
        if name in ("dockerd", "containerd") or name.startswith("containerd-shim"):
            found.append(process)
    return found


def server_processes(pid: int | None) -> list[t.Any]:
    if pid is None:
        return []
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    return []


async def measure_scale(
    client: Client, target: Target, n: int, plan: Plan, server_pid: int | None
) -> dict[str, t.Any]:
    """``n`` concurrent sessions, all typing (a key every 0.1-0.3 s) for ``scale_seconds``.
    Also the CPU the server, the Docker Engine and this client used while they typed."""
    before = await asyncio.to_thread(tree_memory, server_pid) if server_pid else None
    gate = asyncio.Semaphore(16)
    failures: list[str] = []

    async def open_one() -> Term | None:
        async with gate:
            try:
                term, _ = await client.open(target, timeout=60, resend_after=5)
                return term
            except Exception as error:  # noqa: BLE001 - counted as a failure
                failures.append(f"open: {error}")
                return None

    opened = [term for term in await asyncio.gather(*(open_one() for _ in range(n))) if term]
    samples: list[float] = []
    loop = asyncio.get_running_loop()

    async def typist(term: Term, deadline: float) -> None:
        await asyncio.sleep(random.uniform(0, 0.3))
        try:
            await type_keys(
                term,
                samples,
                count=int(plan.scale_seconds / 0.1) + 1,
                deadline=deadline,
                pause=(0.1, 0.3),
                timeout=10,
            )
        except Exception as error:  # noqa: BLE001 - recorded, the run goes on
            failures.append(f"typing: {error}")

    try:
        servers = await asyncio.to_thread(server_processes, server_pid)
        engine = await asyncio.to_thread(engine_processes)
        # The client holds hundreds of connections: a full garbage collection of its heap would
        # stall every echo it is timing, whichever target it measures. Everything allocated so
        # far is left out of collections while they type.
        gc.collect()
        gc.freeze()
        cpu_before = [cpu_seconds(servers), cpu_seconds(engine), time.process_time()]
        await loop_lag(client, target)
        begun = loop.time()
        deadline = begun + plan.scale_seconds
        client_lag = asyncio.create_task(client_loop_lag(deadline))
        await asyncio.gather(*(typist(term, deadline) for term in opened))
        typing = loop.time() - begun
        cpu_after = [cpu_seconds(servers), cpu_seconds(engine), time.process_time()]
        server_lag = await loop_lag(client, target)
        own_lag = await client_lag
        after = await asyncio.to_thread(tree_memory, server_pid) if server_pid else None
    finally:
        gc.unfreeze()

        async def close_one(term: Term) -> None:
            async with gate:
                with contextlib.suppress(Exception):
                    await client.close_term(target, term)

        closing = loop.time()
        await asyncio.gather(*(close_one(term) for term in opened))
        # A close the client gave up waiting for may still be running in the server: wait
        # (bounded) until the server holds no session, so the next measurement starts clean.
        left = await wait_no_sessions(client, target, 180)
        teardown = loop.time() - closing
    sessions = max(len(opened), 1)
    cores = [round((b - a) / typing, 2) for a, b in zip(cpu_before, cpu_after, strict=True)]
    found: dict[str, t.Any] = {
        "n": n,
        "opened": len(opened),
        "failures": len(failures),
        "failure_examples": failures[:3],
        "keystrokes": len(samples),
        "keystrokes_per_s": round(len(samples) / typing, 1),
        "echo_p50_ms": ms(percentile(samples, 0.5)),
        "echo_p99_ms": ms(percentile(samples, 0.99)),
        "cpu_cores_server": cores[0] if server_pid else None,
        "cpu_cores_engine": cores[1],
        "cpu_cores_client": cores[2],
        "teardown_s": round(teardown, 1),
        "sessions_left_after_teardown": left,
        # Where the worst echoes waited: the server's event loop, or this client's own.
        "server_loop_lag": server_lag,
        "client_loop_lag": own_lag,
    }
    if before is not None and after is not None:
        found.update(
            rss_mib_per_session=round((after["rss"] - before["rss"]) / sessions / MIB, 3),
            pss_mib_per_session=round((after["pss"] - before["pss"]) / sessions / MIB, 3),
            server_processes=after["processes"],
            server_rss_mib=round(after["rss"] / MIB, 1),
        )
    return found


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


async def client_loop_lag(deadline: float, tick: float = 0.01) -> dict[str, t.Any]:
    """How late this client's own event loop ran a timer until ``deadline``: a client that
    stalls (a garbage collection among hundreds of connections) delays the echoes it times."""
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    collected = gc.get_stats()
    while loop.time() < deadline:
        start = time.perf_counter()
        await asyncio.sleep(tick)
        lags.append(time.perf_counter() - start - tick)
    full = gc.get_stats()[2]["collections"] - collected[2]["collections"]
    return {
        "p99_ms": ms(percentile(lags, 0.99)),
        "max_ms": ms(max(lags, default=0.0)),
        "over_20ms": sum(1 for lag in lags if lag > 0.02),
        "gc_full": full,
    }


async def loop_lag(client: Client, target: Target) -> dict[str, t.Any] | None:
    """The server's event-loop lateness since the last call (see ``lagprobe.py``)."""
    if target.kind == "raw":
        return None
    return t.cast(dict[str, t.Any], await client.request(target, "GET", "/bench/lag"))


async def measure_churn(
    client: Client, target: Target, plan: Plan, loops: int, period: float
) -> dict[str, t.Any]:
    """Echo p99 of one typing session, quiet and then while a separate process opens and
    closes sessions of the same target (``loops`` loops, each cycle taking at least ``period``
    seconds), so that the churn's client work is not the measuring client's."""
    term, _ = await client.open(target)
    loop = asyncio.get_running_loop()
    pause = (0.01, 0.03)
    count = int(plan.churn_seconds / 0.01) + 1
    worker: asyncio.subprocess.Process | None = None
    try:
        await type_keys(term, [], count=20)
        await loop_lag(client, target)
        quiet: list[float] = []
        quiet_began, quiet_busy = loop.time(), machine_busy_seconds()
        await type_keys(
            term, quiet, count=count, deadline=loop.time() + plan.churn_seconds, pause=pause
        )
        quiet_rate = (machine_busy_seconds() - quiet_busy) / (loop.time() - quiet_began)
        quiet_lag = await loop_lag(client, target)
        spec = {
            "target": dataclasses.asdict(target),
            "seconds": plan.churn_seconds + 1.0,
            "concurrency": loops,
            "period": period,
        }
        worker = await asyncio.create_subprocess_exec(
            sys.executable,
            str(SCRIPT),
            "--churn-worker",
            json.dumps(spec),
            stdout=asyncio.subprocess.PIPE,
        )
        assert worker.stdout is not None
        line = await asyncio.wait_for(worker.stdout.readline(), 30)
        if line.strip() != b"started":
            raise BenchError(f"churn worker did not start: {line!r}")
        churn_began, churn_busy = loop.time(), machine_busy_seconds()
        # Let the churn get going before measuring.
        await asyncio.sleep(0.5)
        await loop_lag(client, target)
        busy: list[float] = []
        await type_keys(
            term, busy, count=count, deadline=loop.time() + plan.churn_seconds, pause=pause
        )
        busy_lag = await loop_lag(client, target)
        report, _ = await asyncio.wait_for(worker.communicate(), plan.churn_seconds + 60)
        # The machine's CPU over the churn, less what typing alone costs, per cycle.
        churn_cpu = machine_busy_seconds() - churn_busy - quiet_rate * (loop.time() - churn_began)
        summary = json.loads(report.decode().strip().splitlines()[-1])
        worker = None
    finally:
        if worker is not None and worker.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                worker.kill()
            await worker.wait()
        await client.close_term(target, term)
    # A churn open that fails (see ``Client.open`` on lost input) is counted, not fatal: the
    # figure is the typing session's.
    if summary["cycles"] == 0:
        raise BenchError(f"churn: {summary}")
    quiet_p99, busy_p99 = percentile(quiet, 0.99), percentile(busy, 0.99)
    return {
        "quiet_p50_ms": ms(percentile(quiet, 0.5)),
        "quiet_p99_ms": ms(quiet_p99),
        "churn_p50_ms": ms(percentile(busy, 0.5)),
        "churn_p99_ms": ms(busy_p99),
        "churn_max_ms": ms(max(busy)),
        "delta_p99_ms": ms(busy_p99 - quiet_p99),
        "keystrokes": len(busy),
        "cycles": summary["cycles"],
        "cycles_per_s": round(summary["cycles"] / summary["seconds"], 1),
        "machine_cpu_ms_per_cycle": ms(churn_cpu / summary["cycles"]),
        "churn_failures": summary["failure_count"],
        "churn_failure_examples": summary["failures"],
        "loops": loops,
        "period_s": period,
        "quiet_loop_lag": quiet_lag,
        "churn_loop_lag": busy_lag,
    }


async def churn_worker(spec: dict[str, t.Any]) -> dict[str, t.Any]:
    """Open and close sessions of one target until the time is up (run in its own process)."""
    target = Target(**spec["target"])
    client = Client()
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + float(spec["seconds"])
    cycles = 0
    failures: list[str] = []

    async def loop_once() -> None:
        nonlocal cycles
        period = float(spec["period"])
        for _ in range(10_000):
            if loop.time() >= deadline:
                return
            begun = loop.time()
            try:
                term, _ = await client.open(target, timeout=10)
                await client.close_term(target, term)
                cycles += 1
            except Exception as error:  # noqa: BLE001 - counted as a failure
                failures.append(str(error))
                await asyncio.sleep(0.1)
            await asyncio.sleep(max(0.0, begun + period - loop.time()))

    print("started", flush=True)
    try:
        await asyncio.gather(*(loop_once() for _ in range(int(spec["concurrency"]))))
    finally:
        client.close()
    return {
        "cycles": cycles,
        "failure_count": len(failures),
        "failures": failures[:3],
        "seconds": loop.time() - start,
    }


# -- servers and containers ------------------------------------------------------------------


async def measure_hub_modes(client: Client, plan: Plan) -> dict[str, t.Any]:
    """A terminal through the JupyterHub service against one in the user's own server.

    One real Hub (with configurable-http-proxy) runs both: the tool-terminal service at
    /services/tool-terminal/ and alice's server with the extension and the engine. Both are
    reached the same way, through the proxy with a Hub token, and measured with the same
    open, echo and flood paths; the service must stay within 10% of the per-user server.
    """
    sys.path.insert(0, str(REPO))
    from tests.hub import running_hub, service_mode_config  # noqa: PLC0415 - test helpers

    engine = docker.from_env()
    container = await asyncio.to_thread(
        engine.containers.run,
        IMAGE,
        name=f"jtt-bench-hub-{secrets.token_hex(4)}",
        detach=True,
        init=True,
        network_mode="none",
        labels={"jupyter-tool-terminal.owner": "alice", "jupyter-tool-terminal.tool": TOOL},
    )
    tool_types = f"c.ToolTerminalApp.tool_types = {{{TOOL!r}: {{'shell': ['/bin/sh']}}}}\n"
    figures: dict[str, t.Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="jtt-bench-hub-") as directory:
            config = service_mode_config(
                Path(directory),
                "tool-terminal",
                service_config=tool_types,
                # The per-user server holds the engine itself and serves its own terminals.
                user_config=tool_types + "c.ToolTerminalApp.service_url = ''\n",
                user_environment={"DOCKER_HOST": os.environ.get("DOCKER_HOST", "")},
            )
            running = running_hub(Path(directory), config)
            hub = await asyncio.to_thread(running.__enter__)
            try:
                await asyncio.to_thread(hub.start_server, "alice")
                token, _ = await asyncio.to_thread(hub.new_token, "alice")
                targets = [
                    Target(
                        "per-user",
                        "tool",
                        f"{hub.url}/user/alice",
                        token,
                        container.name,
                        hop=False,
                    ),
                    Target(
                        "service",
                        "tool",
                        f"{hub.url}/services/tool-terminal",
                        token,
                        container.name,
                        hop=False,
                    ),
                ]
                deadline = time.monotonic() + 60
                for target in targets:
                    while True:  # the managed service may still be starting
                        try:
                            term, _ = await client.open(target)
                            await client.close_term(target, term)
                            break
                        except Exception:
                            if time.monotonic() > deadline:
                                raise
                            await asyncio.sleep(0.5)
                for name, measure in (
                    ("open", measure_opens),
                    ("echo", measure_echoes),
                    ("flood", measure_floods),
                ):
                    for key, found in (await measure(client, targets, plan)).items():
                        figures.setdefault(key, {})[name] = found
            finally:
                await asyncio.to_thread(running.__exit__, None, None, None)
    finally:
        await asyncio.to_thread(container.remove, force=True)
        engine.close()
    user, service = figures["per-user"], figures["service"]
    figures["service_over_per_user"] = {
        "open_p50": round(service["open"]["p50_ms"] / user["open"]["p50_ms"], 3),
        "echo_p50": round(service["echo"]["p50_ms"] / user["echo"]["p50_ms"], 3),
        "throughput": round(service["flood"]["mb_s"] / user["flood"]["mb_s"], 3),
    }
    return figures


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclasses.dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    target: Target
    home: Path

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.home / "server.log").read_text(errors="replace")[-3000:]
        return ""


class Lab:
    """Everything the benchmark started; ``cleanup`` removes it all."""

    def __init__(self) -> None:
        self.run_id = secrets.token_hex(4)
        self._engine: t.Any = None
        self.servers: list[Server] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="jtt-bench-"))

    @property
    def docker(self) -> t.Any:
        """The Docker SDK's client, made when first needed: the local runtime and A are
        measured on machines without Docker too."""
        if self._engine is None:
            self._engine = docker.from_env()
        return self._engine

    def container(self, name: str) -> str:
        """Start a labelled busybox tool instance; returns its name."""
        try:
            self.docker.images.get(IMAGE)
        except docker.errors.ImageNotFound:
            subprocess.run(["bash", str(REPO / "scripts/build-test-image.sh"), IMAGE], check=True)
        full = f"jtt-bench-{self.run_id}-{name}"
        self.docker.containers.run(
            IMAGE,
            name=full,
            detach=True,
            init=True,
            network_mode="none",
            labels={
                "jupyter-tool-terminal.owner": OWNER,
                "jupyter-tool-terminal.tool": TOOL,
                RUN_LABEL: self.run_id,
            },
        )
        return full

    def wait_engine_idle(self, container: str, timeout: float = 300.0) -> tuple[float, int]:
        """Wait until ``container``'s process count holds still and the engine answers at once;
        returns the seconds that took and the count. Hundreds of execs ending together keep
        dockerd busy for minutes (it answered nothing for four minutes after 500 raw exec
        sockets closed at once): the next measurement must not pay for the previous one. The
        count need not return to the container's own two processes: B's closes leave their
        shells running in the container (terminado kills only the docker CLI)."""
        start = time.monotonic()
        last = -1
        while time.monotonic() - start < timeout:
            asked = time.monotonic()
            with contextlib.suppress(docker.errors.DockerException, OSError):
                count = len(self.docker.api.top(container).get("Processes") or [])
                if time.monotonic() - asked < 0.5 and count == last:
                    break
                last = count
            time.sleep(1.0)
        return round(time.monotonic() - start, 1), last

    def start_server(self, name: str, kind: str, config: str, container: str = "") -> Server:
        home = self.tmp / name
        (home / "config").mkdir(parents=True)
        (home / "runtime").mkdir()
        port, token = free_port(), secrets.token_hex(16)
        extensions = {
            "jupyter_tool_terminal": kind == "tool",
            "jupyter_server_terminals": kind == "terminado",
            "jupyterlab": False,
            "jupyter_lsp": False,
            "notebook_shim": False,
            "lagprobe": True,
        }
        (home / "jupyter_server_config.py").write_text(
            f"c.ServerApp.ip = '127.0.0.1'\n"
            f"c.ServerApp.port = {port}\n"
            f"c.ServerApp.port_retries = 0\n"
            f"c.ServerApp.open_browser = False\n"
            f"c.ServerApp.allow_root = True\n"
            f"c.ServerApp.root_dir = {str(home)!r}\n"
            f"c.IdentityProvider.token = {token!r}\n"
            f"c.ServerApp.jpserver_extensions = {extensions!r}\n"
            f"c.ServerApp.log_level = 'WARN'\n"
            f"c.Application.log_level = 'WARN'\n" + config
        )
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("JUPYTER", "JPY_")) and key != "SHELL"
        }
        env.update(
            JUPYTER_CONFIG_DIR=str(home / "config"),
            JUPYTER_RUNTIME_DIR=str(home / "runtime"),
            JUPYTER_PLATFORM_DIRS="1",
            SHELL="/bin/sh",
            PYTHONPATH=os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(HERE)])),
        )
        log = (home / "server.log").open("wb")
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter_server",
                f"--config={home / 'jupyter_server_config.py'}",
            ],
            cwd=home,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        target = Target(
            name, kind, f"http://127.0.0.1:{port}", token, container, server_pid=process.pid
        )
        server = Server(name, process, target, home)
        self.servers.append(server)
        return server

    async def wait_ready(self, server: Server, timeout: float = 90.0) -> None:
        http = httpclient.AsyncHTTPClient()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if server.process.poll() is not None:
                raise BenchError(f"server {server.name} exited:\n{server.log_tail()}")
            with contextlib.suppress(Exception):
                response = await http.fetch(
                    server.target.base + "/api/status",
                    headers=server.target.headers(),
                    request_timeout=5,
                    raise_error=False,
                )
                if response.code == 200:
                    return
            await asyncio.sleep(0.2)
        raise BenchError(
            f"server {server.name} did not answer in {timeout} s:\n{server.log_tail()}"
        )

    def cleanup(self) -> None:
        for server in self.servers:
            self._stop(server)
        if self._engine is not None:
            with contextlib.suppress(Exception):
                for container in self._engine.containers.list(
                    all=True, filters={"label": f"{RUN_LABEL}={self.run_id}"}
                ):
                    with contextlib.suppress(Exception):
                        container.remove(force=True)
            with contextlib.suppress(Exception):
                self._engine.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @staticmethod
    def _stop(server: Server) -> None:
        process = server.process
        if process.poll() is not None:
            return
        try:
            children = psutil.Process(process.pid).children(recursive=True)
        except psutil.Error:
            children = []
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        for child in children:
            with contextlib.suppress(psutil.Error):
                child.kill()


# -- report ----------------------------------------------------------------------------------


def machine() -> dict[str, t.Any]:
    cpu = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    info: dict[str, t.Any] = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 1024**3, 1),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }
    with contextlib.suppress(Exception):
        client = docker.from_env()
        info["docker_engine"] = client.version().get("Version")
        client.close()
    for package in ("jupyter_server", "jupyter_server_terminals", "terminado", "tornado", "docker"):
        with contextlib.suppress(Exception):
            info[package] = version(package)
    return info


Row = tuple[str, str, t.Callable[[dict[str, t.Any]], float | None], bool]


def get(path: str) -> t.Callable[[dict[str, t.Any]], float | None]:
    """A getter of a nested figure (``a.b.c``), ``None`` where it is missing."""

    def read(figures: dict[str, t.Any]) -> float | None:
        value: t.Any = figures
        for part in path.split("."):
            if not isinstance(value, dict) or part not in value:
                return None
            value = value[part]
        return float(value) if isinstance(value, int | float) else None

    return read


def rows(plan: Plan) -> list[Row]:
    """(figure, unit, getter, lower is better)."""
    table: list[Row] = [
        ("open p50", "ms", get("open.p50_ms"), True),
        ("open p95", "ms", get("open.p95_ms"), True),
        ("echo p50", "ms", get("echo.p50_ms"), True),
        ("echo p99", "ms", get("echo.p99_ms"), True),
        ("echo p50, WebSocket hop alone", "ms", get("echo.hop_p50_ms"), True),
        ("echo floor: hop + C's echo p50", "ms", get("echo.floor_p50_ms"), True),
        ("echo p50 above its floor (p50 - hop - C)", "ms", get("echo.above_floor_p50_ms"), True),
        ("throughput", "MB/s", get("flood.mb_s"), False),
        (
            "throughput read by the asyncio client",
            "MB/s",
            get("flood.asyncio_client_mb_s"),
            False,
        ),
        ("flood: server CPU per MB", "ms", get("flood.cpu_ms_per_mb.server"), True),
        ("flood: engine CPU per MB", "ms", get("flood.cpu_ms_per_mb.engine"), True),
        ("flood: client CPU per MB", "ms", get("flood.cpu_ms_per_mb.client"), True),
        ("flood: machine CPU per MB (all of it)", "ms", get("flood.cpu_ms_per_mb.machine"), True),
    ]
    for n in plan.scale_ns:
        table += [
            (f"N={n} echo p50", "ms", get(f"scale.{n}.echo_p50_ms"), True),
            (f"N={n} echo p99", "ms", get(f"scale.{n}.echo_p99_ms"), True),
            (f"N={n} failures", "", get(f"scale.{n}.failures"), True),
            (f"N={n} RSS/session", "MiB", get(f"scale.{n}.rss_mib_per_session"), True),
            (f"N={n} PSS/session", "MiB", get(f"scale.{n}.pss_mib_per_session"), True),
            (f"N={n} server CPU", "cores", get(f"scale.{n}.cpu_cores_server"), True),
            (f"N={n} engine CPU", "cores", get(f"scale.{n}.cpu_cores_engine"), True),
            (f"N={n} server loop lag max", "ms", get(f"scale.{n}.server_loop_lag.max_ms"), True),
            (f"N={n} teardown", "s", get(f"scale.{n}.teardown_s"), True),
        ]
    table += [
        ("churn: quiet echo p99", "ms", get("churn.quiet_p99_ms"), True),
        ("churn: echo p99", "ms", get("churn.churn_p99_ms"), True),
        ("churn: p99 increase", "ms", get("churn.delta_p99_ms"), True),
        ("churn: cycles/s", "", get("churn.cycles_per_s"), False),
        ("churn: machine CPU per cycle", "ms", get("churn.machine_cpu_ms_per_cycle"), True),
        ("churn: server loop lag max", "ms", get("churn.churn_loop_lag.max_ms"), True),
        ("churn max: quiet echo p99", "ms", get("churn_max.quiet_p99_ms"), True),
        ("churn max: echo p99", "ms", get("churn_max.churn_p99_ms"), True),
        ("churn max: p99 increase", "ms", get("churn_max.delta_p99_ms"), True),
        ("churn max: cycles/s", "", get("churn_max.cycles_per_s"), False),
        ("churn max: machine CPU per cycle", "ms", get("churn_max.machine_cpu_ms_per_cycle"), True),
        ("churn max: server loop lag max", "ms", get("churn_max.churn_loop_lag.max_ms"), True),
    ]
    return table


def fmt(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None or math.isnan(ours) or math.isnan(theirs) or theirs == 0:
        return "-"
    return f"{ours / theirs:.2f}x"


def table(results: dict[str, t.Any], plan: Plan) -> str:
    targets = results["targets"]
    header = "| figure | this project | local | A | B | C | vs A | vs B | vs C | local vs A |"
    lines = [header, "|" + "---|" * 10]
    for name, unit, read, _ in rows(plan):
        values = {key: read(targets.get(key, {})) for key in KEYS_ALL}
        label = f"{name} ({unit})" if unit else name
        cells = [fmt(values[key]) for key in KEYS_ALL]
        ratios = [ratio(values["tool"], values[key]) for key in ("A", "B", "C")]
        ratios.append(ratio(values["local"], values["A"]))
        lines.append(f"| {label} | " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines)


def markdown(results: dict[str, t.Any], plan: Plan) -> str:
    """The run as Markdown: machine, table, targets."""
    info = results["machine"]
    lines = [
        f"Run of {results['when']} ({results['mode']} mode, {results['seconds']} s).",
        "",
        f"Machine: {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB, "
        f"Linux {info['kernel']}, Python {info['python']}, Docker Engine "
        f"{info.get('docker_engine')}, jupyter_server {info.get('jupyter_server')}, "
        f"jupyter_server_terminals {info.get('jupyter_server_terminals')}, terminado "
        f"{info.get('terminado')}, tornado {info.get('tornado')}.",
        "",
        table(results, plan),
        "",
    ]
    for check in results.get("checks", []):
        mark = "met" if check["met"] else "**missed**"
        lines.append(f"- {mark}: {check['target']} ({check['detail']})")
    return "\n".join(lines) + "\n"


def check_targets(results: dict[str, t.Any], plan: Plan) -> list[dict[str, t.Any]]:
    """The issue's targets, each with whether this run met it."""
    figures = results["targets"]

    def value(key: str, path: str) -> float:
        found = get(path)(figures.get(key, {}))
        return math.nan if found is None else found

    checks: list[tuple[str, bool, str]] = []
    open_tool, open_b, open_c = (value(k, "open.p50_ms") for k in ("tool", "B", "C"))
    checks.append(
        ("open p50 within 10 ms of C", open_tool <= open_c + 10, f"{open_tool} vs C {open_c}")
    )
    checks.append(("open p50 <= 0.9x B", open_tool <= 0.9 * open_b, f"{open_tool} vs B {open_b}"))
    echo_tool, echo_a, echo_b = (value(k, "echo.p50_ms") for k in ("tool", "A", "B"))
    checks.append(("echo p50 <= 0.6x B", echo_tool <= 0.6 * echo_b, f"{echo_tool} vs B {echo_b}"))
    checks.append(("echo p50 <= 1.5x A", echo_tool <= 1.5 * echo_a, f"{echo_tool} vs A {echo_a}"))
    above = value("tool", "echo.above_floor_p50_ms")
    checks.append(("echo p50 - hop - C <= 0.08 ms", above <= 0.08, f"{above}"))
    p99 = value("tool", "echo.p99_ms")
    checks.append(("echo p99 < 3 ms, one session", p99 < 3, f"{p99}"))
    flood_tool, flood_b, flood_c = (value(k, "flood.mb_s") for k in ("tool", "B", "C"))
    checks.append(
        ("throughput >= 0.85x C", flood_tool >= 0.85 * flood_c, f"{flood_tool} vs C {flood_c}")
    )
    checks.append(
        ("throughput >= 1.5x B", flood_tool >= 1.5 * flood_b, f"{flood_tool} vs B {flood_b}")
    )
    largest = max(plan.scale_ns)
    rss = value("tool", f"scale.{largest}.rss_mib_per_session")
    checks.append((f"RSS/session < 1 MiB (N={largest})", rss < 1, f"{rss}"))
    scale_p99 = value("tool", f"scale.{largest}.echo_p99_ms")
    failures = value("tool", f"scale.{largest}.failures")
    checks.append(
        (
            f"N={largest}: echo p99 < 100 ms, no failure",
            scale_p99 < 100 and failures == 0,
            f"p99 {scale_p99}, failures {failures}",
        )
    )
    delta = value("tool", "churn.delta_p99_ms")
    checks.append(("churn raises echo p99 by <= 5 ms", delta <= 5, f"+{delta}"))
    # The local runtime against terminado on the same machine (both local shells).
    for name, path, lower_is_better in (
        ("open p50", "open.p50_ms", True),
        ("echo p50", "echo.p50_ms", True),
        ("throughput", "flood.mb_s", False),
        (f"RSS/session (N={largest})", f"scale.{largest}.rss_mib_per_session", True),
    ):
        local, a = value("local", path), value("A", path)
        met = local <= a if lower_is_better else local >= a
        relation = "<=" if lower_is_better else ">="
        checks.append((f"local: {name} {relation} A", met, f"{local} vs A {a}"))
    hub = figures.get("hub", {}).get("modes", {}).get("service_over_per_user")
    if hub:
        # The service is one more process, not one more hop: each within 10% of per-user.
        checks.append(
            (
                "Hub service within 10% of the per-user server (open, echo p50, throughput)",
                hub["open_p50"] <= 1.1 and hub["echo_p50"] <= 1.1 and hub["throughput"] >= 0.9,
                ", ".join(f"{name} {value}x" for name, value in hub.items()),
            )
        )
    return [{"target": name, "met": bool(ok), "detail": detail} for name, ok, detail in checks]


def log_scale(ax: t.Any) -> None:
    """A logarithmic y axis, where there is something positive to plot (a partial run may have
    nothing there)."""
    if ax.has_data() and ax.dataLim.ymax > 0:
        ax.set_yscale("log")


def plot(results: dict[str, t.Any], plan: Plan, path: Path) -> None:
    figures = results["targets"]
    keys = [key for key in KEYS_ALL if key in figures]
    colors = {"tool": "#2a7ab0", "local": "#7b4fa8", "A": "#9a9a9a", "B": "#d9822b", "C": "#4c9a4c"}
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))

    def bars(ax: t.Any, title: str, unit: str, paths: list[tuple[str, str]]) -> None:
        width = 0.8 / len(paths)
        for offset, (label, path) in enumerate(paths):
            xs, ys, cs = [], [], []
            for index, key in enumerate(keys):
                found = get(path)(figures[key])
                if found is not None and not math.isnan(found):
                    xs.append(index + offset * width)
                    ys.append(found)
                    cs.append(colors[key])
            drawn = ax.bar(xs, ys, width, color=cs, alpha=1.0 - 0.4 * offset, label=label)
            ax.bar_label(drawn, fmt="%.3g", fontsize=7)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(keys))])
        ax.set_xticklabels([LABELS[key] for key in keys], fontsize=7)
        ax.set_title(title)
        ax.set_ylabel(unit)
        if len(paths) > 1:
            ax.legend(fontsize=7)

    bars(
        axes[0][0],
        "open (to an echoed marker)",
        "ms",
        [("p50", "open.p50_ms"), ("p95", "open.p95_ms")],
    )
    bars(
        axes[0][1],
        "keystroke echo, one session",
        "ms",
        [("p50", "echo.p50_ms"), ("p99", "echo.p99_ms")],
    )
    bars(
        axes[0][2], f"throughput ({plan.flood_bytes / 1e6:g} MB)", "MB/s", [("MB/s", "flood.mb_s")]
    )
    ax = axes[1][0]
    for key in keys:
        scale = figures[key].get("scale", {})
        ns = sorted(int(n) for n in scale)
        if ns:
            ax.plot(
                ns,
                [scale[str(n)]["echo_p99_ms"] for n in ns],
                "o-",
                color=colors[key],
                label=LABELS[key],
            )
    ax.set_title("echo p99 with N sessions typing")
    ax.set_xlabel("concurrent sessions")
    ax.set_ylabel("ms")
    log_scale(ax)
    ax.legend(fontsize=7)
    ax = axes[1][1]
    for key in keys:
        scale = figures[key].get("scale", {})
        ns = sorted(int(n) for n in scale if "rss_mib_per_session" in scale[n])
        if ns:
            ax.plot(
                ns,
                [scale[str(n)]["rss_mib_per_session"] for n in ns],
                "o-",
                color=colors[key],
                label=LABELS[key],
            )
    ax.set_title("server RSS per session (all its processes)")
    ax.set_xlabel("concurrent sessions")
    ax.set_ylabel("MiB")
    ax.legend(fontsize=7)
    bars(
        axes[1][2],
        "echo p99 of one typing session",
        "ms",
        [("quiet", "churn.quiet_p99_ms"), ("with churn", "churn.churn_p99_ms")],
    )
    log_scale(axes[1][2])
    fig.suptitle(
        f"jupyter-tool-terminal benchmark "
        f"({results['machine']['cores']} cores, {results['machine']['cpu']})",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


# -- the run ---------------------------------------------------------------------------------


async def run(plan: Plan, lab: Lab, only: set[str], phases: set[str]) -> dict[str, t.Any]:
    loop = asyncio.get_running_loop()
    started = loop.time()
    # The local runtime and A need no engine: without the Docker paths, none is asked for.
    engine_needed = bool(only & {"tool", "B", "C", "hub"})
    container = await asyncio.to_thread(lab.container, "main") if engine_needed else ""
    ns = max(plan.scale_ns + plan.scale_ns_b)
    configs: dict[str, t.Callable[[], Server]] = {
        "tool": lambda: lab.start_server(
            "tool",
            "tool",
            f"c.ToolTerminalApp.tool_types = {{{TOOL!r}: {{'shell': ['/bin/sh']}}}}\n"
            f"c.ToolTerminalApp.owner = {OWNER!r}\n"
            f"c.ToolTerminalApp.max_sessions = {ns + 50}\n"
            f"c.ToolTerminalApp.max_sessions_per_user = {ns + 50}\n"
            f"c.ToolTerminalApp.max_clients_per_user = {ns + 50}\n"
            f"c.DockerRuntime.threads = 64\n",
            container,
        ),
        "local": lambda: lab.start_server(
            "local",
            "tool",
            "c.ToolTerminalApp.runtime = 'local'\n"
            f"c.ToolTerminalApp.tool_types = {{{TOOL!r}: {{'shell': ['/bin/sh']}}}}\n"
            f"c.ToolTerminalApp.local_instances = {{{LOCAL_INSTANCE!r}: "
            f"{{'tool': {TOOL!r}, 'root': {str(lab.tmp / LOCAL_INSTANCE)!r}}}}}\n"
            f"c.ToolTerminalApp.owner = {OWNER!r}\n"
            f"c.ToolTerminalApp.max_sessions = {ns + 50}\n"
            f"c.ToolTerminalApp.max_sessions_per_user = {ns + 50}\n"
            f"c.ToolTerminalApp.max_clients_per_user = {ns + 50}\n",
            LOCAL_INSTANCE,
        ),
        "A": lambda: lab.start_server(
            "A",
            "terminado",
            "c.ServerApp.terminals_enabled = True\n"
            "c.ServerApp.terminado_settings = {'shell_command': ['/bin/sh']}\n",
        ),
        "B": lambda: lab.start_server(
            "B",
            "terminado",
            "c.ServerApp.terminals_enabled = True\n"
            f"c.ServerApp.terminado_settings = {{'shell_command': "
            f"['docker', 'exec', '-it', {container!r}, '/bin/sh']}}\n",
        ),
    }
    servers = {key: start() for key, start in configs.items() if key in only}
    await asyncio.gather(*(lab.wait_ready(server) for server in servers.values()))
    targets = {key: server.target for key, server in servers.items()}
    if "C" in only:
        targets["C"] = Target("C", "raw", container=container)
    print(f"servers ready in {loop.time() - started:.1f} s; container {container}", flush=True)

    client = Client()
    figures: dict[str, dict[str, t.Any]] = {key: {} for key in [*targets, "hub"]}
    errors: list[str] = []

    async def path(key: str, name: str, work: t.Awaitable[dict[str, t.Any]]) -> None:
        begun = loop.time()
        try:
            figures[key][name] = await work
            print(
                f"  {key:4} {name:12} {figures[key][name]}  ({loop.time() - begun:.1f} s)",
                flush=True,
            )
        except Exception as error:  # noqa: BLE001 - recorded, the run goes on
            errors.append(f"{key} {name}: {type(error).__name__}: {error}")
            print(f"  {key:4} {name:12} FAILED: {type(error).__name__}: {error}", flush=True)

    try:
        order: list[str] = [key for key in KEYS_ALL if key in only]
        for key in order:
            target = targets[key]
            # One warm-up open (imports, connection pools), not counted.
            with contextlib.suppress(Exception):
                term, _ = await client.open(target)
                await client.close_term(target, term)

        async def all_targets(
            phase: str,
            measure: t.Callable[
                [Client, list[Target], Plan], t.Awaitable[dict[str, dict[str, t.Any]]]
            ],
        ) -> None:
            """One phase measured on every target together; a failure is recorded, not fatal."""
            if phase not in phases:
                return
            begun = loop.time()
            try:
                found_by_key = await measure(client, [targets[key] for key in order], plan)
                for name, found in found_by_key.items():
                    figures[name][phase] = found
                    print(f"  {name:4} {phase:<12} {found}", flush=True)
            except Exception as error:  # noqa: BLE001 - recorded, the run goes on
                errors.append(f"{phase}: {type(error).__name__}: {error}")
                print(f"  {phase} FAILED: {type(error).__name__}: {error}", flush=True)
            print(f"  ({phase} took {loop.time() - begun:.1f} s)", flush=True)

        await all_targets("open", measure_opens)
        await all_targets("echo", measure_echoes)
        await all_targets("flood", measure_floods)
        if "hub" in only:
            await path("hub", "modes", measure_hub_modes(client, plan))
        for key in order:
            if "churn" in phases:
                # The figure: one loop opening and closing a session at most 5 times a second.
                await path(key, "churn", measure_churn(client, targets[key], plan, 1, 0.2))
            if "churnmax" in phases:
                # Saturating: several loops as fast as the target goes (both cores busy).
                await path(
                    key, "churn_max", measure_churn(client, targets[key], plan, plan.churners, 0)
                )
        # The tool's scale runs last: closing 500 sessions in one container keeps the engine
        # busy for minutes afterwards (see RESULTS.md).
        for key in [*[k for k in order if k != "tool"], *[k for k in order if k == "tool"]]:
            if "scale" not in phases:
                continue
            scale: dict[str, t.Any] = {}
            for n in plan.scale_ns_b if key == "B" else plan.scale_ns:
                begun = loop.time()
                try:
                    scale[str(n)] = await measure_scale(
                        client,
                        targets[key],
                        n,
                        plan,
                        servers[key].process.pid if key in servers else None,
                    )
                    print(
                        f"  {key:4} scale N={n:<4} {scale[str(n)]}  ({loop.time() - begun:.1f} s)",
                        flush=True,
                    )
                    if scale[str(n)]["failures"]:
                        errors.append(f"{key} scale N={n}: {scale[str(n)]['failure_examples']}")
                    if container:
                        settled, processes = await asyncio.to_thread(
                            lab.wait_engine_idle, container
                        )
                        scale[str(n)]["engine_settle_s"] = settled
                        scale[str(n)]["container_processes_after"] = processes
                        print(
                            f"  (engine idle again after {settled} s; {processes} processes"
                            " left in the container)",
                            flush=True,
                        )
                except Exception as error:  # noqa: BLE001 - counted as a failure
                    errors.append(f"{key} scale N={n}: {type(error).__name__}: {error}")
                    print(f"  {key:4} scale N={n} FAILED: {error}", flush=True)
            figures[key]["scale"] = scale
    finally:
        client.close()
    return {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "mode": "quick" if plan.quick else "full",
        "plan": dataclasses.asdict(plan),
        "machine": machine(),
        "targets": figures,
        "errors": errors,
        "ready_marker_resends": client.resends,
        "seconds": round(loop.time() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="every path once, tiny sizes (CI)")
    parser.add_argument("--out", type=Path, help="JSON results file (default benchmarks/results/)")
    parser.add_argument(
        "--plot",
        type=Path,
        help="PNG plot (default: docs/benchmark.png for a whole full run, else results/)",
    )
    parser.add_argument(
        "--only",
        default=",".join([*KEYS_ALL, "hub"]),
        help="comma-separated subset of tool,local,A,B,C,hub (hub: the JupyterHub service "
        "against the per-user server, through a real Hub)",
    )
    parser.add_argument(
        "--phases",
        help="comma-separated subset of open,echo,flood,scale,churn,churnmax "
        "(default all; --quick: all but churnmax, the same path as churn)",
    )
    parser.add_argument("--churners", type=int, help="concurrent open/close loops in the churn")
    parser.add_argument(
        "--flood-rounds", type=int, help="floods per target, taking turns (the median counts)"
    )
    parser.add_argument(
        "--scale-ns", help="comma-separated session counts of the scale phase (e.g. 500)"
    )
    parser.add_argument("--churn-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.churn_worker:
        summary = asyncio.run(churn_worker(json.loads(args.churn_worker)))
        print(json.dumps(summary), flush=True)
        return 0

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))

    def interrupted(signum: int, frame: t.Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    plan = Plan.make(args.quick)
    if args.churners:
        plan.churners = args.churners
    if args.flood_rounds:
        plan.flood_rounds = args.flood_rounds
    if args.scale_ns:
        plan.scale_ns = plan.scale_ns_b = [int(n) for n in args.scale_ns.split(",")]
    only = {key.strip() for key in args.only.split(",") if key.strip()}
    default = "open,echo,flood,scale,churn" + ("" if args.quick else ",churnmax")
    phases = {key.strip() for key in (args.phases or default).split(",") if key.strip()}
    lab = Lab()
    try:
        results = asyncio.run(run(plan, lab, only, phases))
    except KeyboardInterrupt:
        print("interrupted; cleaning up", file=sys.stderr)
        return 130
    finally:
        lab.cleanup()

    results["checks"] = check_targets(results, plan)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = args.out or HERE / "results" / f"{results['mode']}-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(results, plan))
    rendered = table(results, plan)
    print()
    print(rendered)
    print()
    for check in results["checks"]:
        print(f"  [{'met' if check['met'] else 'MISSED'}] {check['target']}: {check['detail']}")
    # Only a whole full run replaces the README's plot; a quick or partial one goes to results/.
    partial = only != {*KEYS_ALL, "hub"} or phases != {*default.split(",")}
    plot_path = args.plot or (
        HERE / "results" / f"{results['mode']}-{stamp}.png"
        if plan.quick or partial
        else REPO / "docs" / "benchmark.png"
    )
    try:
        plot(results, plan, plot_path)
    except Exception as error:  # noqa: BLE001 - recorded
        results["errors"].append(f"plot: {type(error).__name__}: {error}")
    print(f"\nresults: {out}\nplot: {plot_path}\ntook {results['seconds']} s")
    if results["errors"]:
        print("\nFAILED paths:\n  " + "\n  ".join(results["errors"]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
