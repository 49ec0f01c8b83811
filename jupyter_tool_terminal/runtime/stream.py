"""A shell's byte stream on the event loop, with one owner of its flow control.

asyncio's ``StreamReader`` pauses its transport by itself when its buffer is full and then
believes it is still paused; a ``resume_reading`` from anyone else (a session holding output
back for a frame interval) makes the transport read again while the reader never pauses it
anew, so a client that stops reading lets the buffer grow without bound. :class:`ShellStream`
is the protocol of a shell's connection instead: it alone pauses and resumes the transport,
for either reason, so output waiting in the server never exceeds ``limit`` bytes plus the one
read that crossed it, and the rest waits in the kernel and, behind it, in the shell's terminal.

It is a buffered protocol: the transport reads into one buffer the stream keeps (``recv_into``)
instead of making a new ``bytes`` of its own read size for every piece; asyncio asks for
256 KiB at a time, and allocating that much costs more than the read itself (about 12 µs
against 1.5 µs per piece here), paid for every piece of output a flood arrives in. The buffer
is shared by every stream of a thread: a transport fills it and hands it back in one step.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import queue
import socket
import threading
import typing as t

#: Output buffered in the server per shell before its connection is no longer read.
STREAM_LIMIT = 256 * 1024
#: The most one read of the connection takes.
READ_SIZE = 64 * 1024

_incoming = threading.local()


def _incoming_buffer() -> memoryview:
    """This thread's receive buffer (see the module's docstring)."""
    buffer: memoryview | None = getattr(_incoming, "buffer", None)
    if buffer is None:
        buffer = _incoming.buffer = memoryview(bytearray(READ_SIZE))
    return buffer


class ShellStream(asyncio.BufferedProtocol):
    """A shell's connection: buffered output (bounded), writes that wait for the transport."""

    transport: asyncio.Transport | None = None

    def __init__(self, limit: int = STREAM_LIMIT) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._eof = False
        self._held = False
        self._reading_paused = False
        self._data_waiter: asyncio.Future[None] | None = None
        self._writing_paused = False
        self._drain_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._lost = False

    # -- protocol callbacks ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = t.cast(asyncio.Transport, transport)
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        return _incoming_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(_incoming_buffer()[:nbytes])

    def data_received(self, data: bytes | memoryview) -> None:
        """Take a piece of output (also fed this way by readers that are not a transport)."""
        self._buffer += data
        self._wake_reader()
        self._update_reading()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake_reader()
        return False  # nothing more to read: the transport may close

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = self._lost = True
        self._wake_reader()
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        while self._drain_waiters:
            waiter = self._drain_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    # -- flow control ---------------------------------------------------------------------

    def _update_reading(self) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        paused = self._held or len(self._buffer) >= self._limit
        if paused != self._reading_paused:
            self._reading_paused = paused
            if paused:
                transport.pause_reading()
            else:
                transport.resume_reading()

    def hold(self, held: bool) -> None:
        """Stop (``True``) or resume (``False``) reading the connection for a moment, so that
        what the shell writes meanwhile is read in one piece afterwards."""
        self._held = held
        self._update_reading()

    def _wake_reader(self) -> None:
        waiter, self._data_waiter = self._data_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- reading and writing --------------------------------------------------------------

    @property
    def ended(self) -> bool:
        """Whether the connection reached its end (nothing more will be read)."""
        return self._eof

    @property
    def buffered(self) -> int:
        """Bytes of output read from the connection and not yet taken by :meth:`read`."""
        return len(self._buffer)

    def take_buffered(self) -> bytes:
        """Everything read from the connection and not yet taken by :meth:`read`."""
        data = bytes(self._buffer)
        self._buffer.clear()
        self._update_reading()
        return data

    async def _wait_for_data(self) -> None:
        self._data_waiter = asyncio.get_running_loop().create_future()
        try:
            await self._data_waiter
        finally:
            self._data_waiter = None

    async def read(self, size: int) -> bytes:
        """Up to ``size`` bytes of output; ``b""`` once the connection is closed."""
        while not self._buffer and not self._eof:
            await self._wait_for_data()
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        self._update_reading()
        return data

    async def read_until(self, separator: bytes, limit: int) -> bytes:
        """Everything up to and including ``separator`` (an HTTP head, say), leaving the rest.

        Raises :class:`ConnectionError` if the connection ends first or ``limit`` bytes come
        without it.
        """
        while (end := self._buffer.find(separator)) < 0:
            if self._eof or len(self._buffer) > limit:
                msg = "the connection ended or overflowed before its header was complete"
                raise ConnectionError(msg)
            await self._wait_for_data()
        end += len(separator)
        data = bytes(self._buffer[:end])
        del self._buffer[:end]
        self._update_reading()
        return data

    def write_nowait(self, data: bytes) -> bool:
        """Send ``data`` unless the transport's write buffer is full (then ``False``)."""
        transport = self.transport
        if transport is None or self._lost or transport.is_closing():
            msg = "the shell's connection is closed"
            raise ConnectionResetError(msg)
        if self._writing_paused:
            return False
        transport.write(data)
        return True

    async def write(self, data: bytes) -> None:
        """Send ``data``, waiting while the transport's write buffer is full."""
        transport = self.transport
        if transport is None or self._lost or transport.is_closing():
            msg = "the shell's connection is closed"
            raise ConnectionResetError(msg)
        transport.write(data)
        if self._writing_paused:
            waiter = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            await waiter

    def close(self) -> None:
        """Close the connection (this alone does not end the shell)."""
        if self.transport is not None:
            self.transport.close()

    def abandon(self) -> None:
        """Drop the connection at once, unsent output and all (its peer does not answer):
        readers get the end of the stream now."""
        if self.transport is not None:
            try:
                self.transport.abort()
            except NotImplementedError:  # a transport that cannot abort closes
                self.transport.close()
        self.connection_lost(None)


#: Bytes a :class:`ThreadTransport` queues for sending before its stream's writers wait.
THREAD_WRITE_LIMIT = 64 * 1024


class ThreadTransport(asyncio.Transport):
    """Fallback for sockets the event loop cannot drive (an exec over SSH, named pipes).

    One thread reads the socket into a :class:`ShellStream` and stops while the stream is
    paused, so the stream's bound holds here too; another sends what is written, in order,
    and the stream's writers wait while more than ``THREAD_WRITE_LIMIT`` bytes are queued.
    """

    def __init__(
        self, sock: t.Any, stream: ShellStream, loop: asyncio.AbstractEventLoop, name: str
    ) -> None:
        super().__init__()
        self._sock = sock
        self._stream = stream
        self._loop = loop
        self._reading = threading.Event()
        self._reading.set()
        self._closed = False
        self._outgoing: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._queued = 0
        self._writing_paused = False
        stream.connection_made(self)
        threading.Thread(target=self._pump, name=name, daemon=True).start()
        threading.Thread(target=self._send, name=f"{name}-send", daemon=True).start()

    def _pump(self) -> None:
        while True:
            self._reading.wait()
            try:
                data = b"" if self._closed else self._sock.recv(READ_SIZE)
            except OSError:
                data = b""
            if not data:
                with contextlib.suppress(RuntimeError):  # the event loop is closed
                    self._loop.call_soon_threadsafe(self._stream.eof_received)
                    self._loop.call_soon_threadsafe(self._stream.connection_lost, None)
                return
            # Wait until the stream took the piece (and paused, if it is full) before the
            # next recv: the thread would otherwise read on while the loop is busy.
            delivered: concurrent.futures.Future[None] = concurrent.futures.Future()
            try:
                self._loop.call_soon_threadsafe(self._deliver, data, delivered)
            except RuntimeError:  # the event loop is closed: nobody reads any more
                return
            delivered.result()

    def _deliver(self, data: bytes, delivered: concurrent.futures.Future[None]) -> None:
        try:
            self._stream.data_received(data)
        finally:
            delivered.set_result(None)

    def _send(self) -> None:
        while (data := self._outgoing.get()) is not None:
            try:
                self._sock.sendall(data)
            except OSError:
                return  # the connection is gone: the reader sees its end
            try:
                self._loop.call_soon_threadsafe(self._sent, len(data))
            except RuntimeError:
                return

    def _sent(self, size: int) -> None:
        self._queued -= size
        if self._writing_paused and self._queued <= THREAD_WRITE_LIMIT // 4:
            self._writing_paused = False
            self._stream.resume_writing()

    def pause_reading(self) -> None:
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    def is_reading(self) -> bool:
        return self._reading.is_set()

    def is_closing(self) -> bool:
        return self._closed

    def write(self, data: t.Any) -> None:
        if self._closed:
            return
        piece = bytes(data)
        self._queued += len(piece)
        self._outgoing.put(piece)
        if not self._writing_paused and self._queued > THREAD_WRITE_LIMIT:
            self._writing_paused = True
            self._stream.pause_writing()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._outgoing.put(None)
            self._reading.set()
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
