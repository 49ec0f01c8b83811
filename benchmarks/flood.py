"""Throughput: a flood of output (``yes | head -c N``) through every path, every byte checked.

A path's figure (``mb_s``) is what it gives, read by a plain blocking loop in a thread of its
own, the same for every path: C's raw exec socket (:func:`raw_flood_blocking`), the WebSocket
paths' frames (:class:`BlockingFrames`). The same rounds also read every path with the asyncio
client every other phase uses (:func:`measure_flood`, ``asyncio_client_mb_s``), and count where
a megabyte's CPU went (``cpu_ms_per_mb``, :class:`~accounting.CpuMeter`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import statistics
import time
import typing as t

import websocket as blocking_websocket

from accounting import CPU_PARTS, CpuMeter
from client import Client, WsTerm
from common import MIB, RAW_ENV, READY, READY_COMMAND, BenchError, Plan, Target

FLOOD_LINE = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def flood_expected(nbytes: int) -> str:
    """The flood's output, as :func:`flood_command` makes it (newlines without their ``\\r``)."""
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
    """The shell command of a flood: ``nbytes`` of output between a start and an end marker
    (typed as ``$((6*7))`` so the echo of the command never matches them)."""
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
