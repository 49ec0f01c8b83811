"""A shell's stream holds at most about its limit in the server, however its socket is read."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading

from jupyter_tool_terminal.runtime.stream import (
    STREAM_LIMIT,
    THREAD_WRITE_LIMIT,
    ShellStream,
    ThreadTransport,
)

FLOOD = bytes(range(256)) * 4096 * 8  # 8 MiB


def _flood(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # the reader closed early (a failed test)
        sock.sendall(FLOOD)
        sock.shutdown(socket.SHUT_WR)


async def _bounded_then_complete(stream: ShellStream, sender: threading.Thread) -> None:
    # Nobody reads while the peer floods: the stream stops taking data at its limit (plus the
    # read that crossed it: asyncio reads up to 256 KiB at once).
    for _ in range(20):
        await asyncio.sleep(0.05)
        assert stream.buffered <= STREAM_LIMIT + 256 * 1024, stream.buffered
    assert sender.is_alive()  # the flood waits in the kernel, not in the server
    # Held, a stream takes nothing more even once read.
    stream.hold(True)
    first = await stream.read(STREAM_LIMIT)
    assert first == FLOOD[: len(first)]
    stream.hold(False)
    received = bytearray(first)
    while data := await stream.read(1 << 16):
        received += data
    assert received == FLOOD


async def test_a_socket_stream_is_bounded_and_complete() -> None:
    ours, theirs = socket.socketpair()
    sender = threading.Thread(target=_flood, args=(theirs,))
    sender.start()
    ours.setblocking(False)
    _, stream = await asyncio.get_running_loop().create_connection(ShellStream, sock=ours)
    try:
        await _bounded_then_complete(stream, sender)
    finally:
        stream.close()
        await asyncio.to_thread(sender.join, 10)
        theirs.close()


async def test_the_thread_fallback_is_bounded_and_complete() -> None:
    """The reader thread of transports asyncio cannot drive (SSH) stops while the stream is
    paused instead of feeding it every byte."""
    ours, theirs = socket.socketpair()
    sender = threading.Thread(target=_flood, args=(theirs,))
    sender.start()
    stream = ShellStream()
    reading = ThreadTransport(ours, stream, asyncio.get_running_loop(), "test-exec")
    try:
        await _bounded_then_complete(stream, sender)
    finally:
        reading.close()
        await asyncio.to_thread(sender.join, 10)
        theirs.close()


async def test_the_thread_fallback_sends_in_order_and_makes_writers_wait() -> None:
    """Writes over a thread transport (an exec over SSH: shells and reapers alike) arrive in
    order, and while the peer does not read, a writer waits instead of queueing without end."""
    ours, theirs = socket.socketpair()
    stream = ShellStream()
    transport = ThreadTransport(ours, stream, asyncio.get_running_loop(), "test-exec")
    piece = 1 << 14
    try:

        async def send() -> None:
            for i in range(0, len(FLOOD), piece):
                await stream.write(FLOOD[i : i + piece])

        writes = asyncio.ensure_future(send())
        await asyncio.sleep(0.5)
        # Nobody reads: the kernel's buffers and the transport's queue hold a bounded part.
        assert not writes.done()
        assert transport._queued <= THREAD_WRITE_LIMIT + piece, transport._queued

        def receive() -> bytes:
            received = bytearray()
            while len(received) < len(FLOOD):
                received += theirs.recv(1 << 16)
            return bytes(received)

        received = await asyncio.to_thread(receive)
        await asyncio.wait_for(writes, 10)
        assert received == FLOOD
    finally:
        transport.close()
        theirs.close()
