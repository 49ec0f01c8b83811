"""A small terminado-protocol client for tests: read frames until something appears."""

from __future__ import annotations

import asyncio
import json
import re
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
