"""A small terminado-protocol client for tests: read frames until something appears."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import socket
import struct
import typing as t

from tornado.websocket import WebSocketClientConnection


class TerminalClient:
    """Wraps a WebSocket connection to a tool terminal."""

    def __init__(self, ws: WebSocketClientConnection) -> None:
        self.ws = ws
        self.output = ""
        self.frames: list[list[t.Any]] = []
        self.closed = False

    async def next_frame(self, timeout: float = 10.0) -> list[t.Any] | None:
        """The next frame, or ``None`` once the server closed the connection."""
        message = await asyncio.wait_for(self.ws.read_message(), timeout)
        if message is None:
            self.closed = True
            return None
        frame = json.loads(message)
        assert isinstance(frame, list)
        self.frames.append(frame)
        if frame[0] == "stdout":
            self.output += frame[1]
        return frame

    async def expect(self, pattern: str, timeout: float = 10.0) -> re.Match[str]:
        """Read until the accumulated output matches ``pattern`` (a regex); return the match."""
        regex = re.compile(pattern)
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            match = regex.search(self.output)
            if match:
                return match
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0 or self.closed:
                msg = f"{pattern!r} not seen; output so far: {self.output[-2000:]!r}"
                raise AssertionError(msg)
            try:
                await self.next_frame(remaining)
            except asyncio.TimeoutError:
                continue

    async def expect_frame(self, kind: str, timeout: float = 10.0) -> list[t.Any]:
        """Read until a frame of type ``kind`` arrives; return it."""
        for frame in self.frames:
            if frame[0] == kind:
                self.frames.remove(frame)
                return frame
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                msg = f"no {kind!r} frame; frames: {self.frames[-20:]!r}"
                raise AssertionError(msg)
            received = await self.next_frame(remaining)
            if received is None:
                msg = f"closed before a {kind!r} frame; frames: {self.frames[-20:]!r}"
                raise AssertionError(msg)
            if received[0] == kind:
                self.frames.remove(received)
                return received

    async def wait_closed(self, timeout: float = 10.0) -> None:
        """Read until the server closes the connection."""
        while not self.closed:
            await self.next_frame(timeout)

    def send(self, *message: t.Any) -> None:
        """Send one frame."""
        self.ws.write_message(json.dumps(list(message)))

    async def run(self, command: str, timeout: float = 10.0) -> str:
        """Type ``command`` and return what it printed between two unique markers."""
        marker = f"M{abs(hash(command)) % 10**8}"
        self.send("stdin", f"echo {marker}B; {command}; echo {marker}E\r")
        # A shell without line editing may print its prompt after the tty echoed the typed line.
        pattern = rf"(?s)\n[^\n]{{0,80}}?{marker}B\r?\n(.*?){marker}E\r?\n"
        match = await self.expect(pattern, timeout)
        self.output = self.output[match.end() :]
        return match.group(1)

    async def size_becomes(self, expected: str, timeout: float = 10.0) -> str:
        """Wait (in the shell) until `stty size` prints ``expected``; return what it printed.

        Resizes reach the engine asynchronously, after keystrokes sent at the same time. Until
        the first one arrives the terminal is 0x0, which `stty size` reports as an error.
        """
        loop = (
            f'i=0; while [ "$(stty size 2>/dev/null)" != "{expected}" ] && [ $i -lt 300 ]; '
            "do i=$((i+1)); sleep 0.01; done; stty size"
        )
        return (await self.run(loop, timeout)).strip()


class RawTerminalClient:
    """A terminal client on a plain socket, as a browser tab is: its receive buffer is small
    and it reads only when told to, so a stalled tab really stops the server's writes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        #: The end of the output received so far (the whole of a flood is not kept).
        self.tail = ""
        self.received = 0

    @classmethod
    async def connect(
        cls, port: int, path: str, headers: dict[str, str], receive_buffer: int
    ) -> RawTerminalClient:
        """Upgrade a connection whose receive buffer is set before it connects."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: 127.0.0.1:{port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101 "), head
        return cls(reader, writer)

    async def next_frame(self) -> list[t.Any]:
        """Read one frame (the server sends whole, unmasked text frames)."""
        first, second = await self.reader.readexactly(2)
        assert first & 0x0F in (0x1, 0x8), first
        length = second & 0x7F
        if length == 126:
            length = struct.unpack("!H", await self.reader.readexactly(2))[0]
        elif length == 127:
            length = struct.unpack("!Q", await self.reader.readexactly(8))[0]
        payload = await self.reader.readexactly(length)
        if first & 0x0F == 0x8:
            return ["closed"]
        frame = json.loads(payload)
        if frame[0] == "stdout":
            self.received += len(frame[1])
            self.tail = (self.tail + frame[1])[-4096:]
        return t.cast(list[t.Any], frame)

    async def read_until(self, needle: str) -> None:
        """Read frames until ``needle`` appears in the output."""
        while needle not in self.tail:
            frame = await self.next_frame()
            assert frame != ["closed"], self.tail

    def send(self, *message: t.Any) -> None:
        """Send one (masked, as a client must) text frame."""
        payload = json.dumps(list(message)).encode()
        mask = os.urandom(4)
        if len(payload) < 126:
            header = struct.pack("!BB", 0x81, 0x80 | len(payload))
        else:
            header = struct.pack("!BBH", 0x81, 0x80 | 126, len(payload))
        masked = bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))
        self.writer.write(header + mask + masked)

    def close(self) -> None:
        """Drop the connection."""
        self.writer.close()
