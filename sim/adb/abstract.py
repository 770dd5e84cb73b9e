"""The device's abstract-namespace UNIX sockets (``localabstract:NAME``), one registry a phone.

A process on the phone listens on a name (the scrcpy server's LocalServerSocket); adbd
connects each ``localabstract:NAME`` stream it is asked for to that listener. While nothing
listens, adbd refuses the service, which an `adb forward` client sees as its connection
closed and an adbutils client as FAIL "closed", and both retry (scrcpy's client does,
app/src/server.c connect_and_read_byte).
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from runtime.errors import MobagentError

if TYPE_CHECKING:
    from sim.adb.server import Stream
    from sim.adb.services import Service


class AddressInUse(MobagentError, OSError):
    """Another listener holds the name (bind() fails with EADDRINUSE)."""


class Accepted:
    """One accepted connection: its adb stream, open until ``close`` (or the peer closes)."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.done = anyio.Event()

    def close(self) -> None:
        self.done.set()


class Listener:
    def __init__(self, registry: AbstractSockets, name: str) -> None:
        self.name = name
        self._registry = registry
        send, recv = anyio.create_memory_object_stream[Accepted](max_buffer_size=math.inf)
        self._send: MemoryObjectSendStream[Accepted] = send
        self._recv: MemoryObjectReceiveStream[Accepted] = recv

    def offer(self, conn: Accepted) -> None:
        self._send.send_nowait(conn)

    async def accept(self) -> Accepted:
        return await self._recv.receive()

    def close(self) -> None:
        """Stop listening: new connections are refused; queued, unaccepted ones end."""
        self._registry.unlisten(self)
        self._send.close()
        while True:
            try:
                self._recv.receive_nowait().close()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                break
        self._recv.close()


class AbstractSockets:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[str, Listener] = {}

    def listen(self, name: str) -> Listener:
        with self._lock:
            if name in self._names:
                raise AddressInUse(f"localabstract:{name}: Address already in use")
            listener = self._names[name] = Listener(self, name)
            return listener

    def unlisten(self, listener: Listener) -> None:
        with self._lock:
            if self._names.get(listener.name) is listener:
                del self._names[listener.name]

    def listening(self, name: str) -> bool:
        with self._lock:
            return name in self._names

    def service(self, name: str) -> Service | None:
        """The stream service that connects to ``name``'s listener, or None (refused)."""
        with self._lock:
            listener = self._names.get(name)
        if listener is None:
            return None

        async def connect(stream: Stream) -> None:
            conn = Accepted(stream)
            try:
                listener.offer(conn)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # it stopped listening between OPEN and now: the stream closes
            await conn.done.wait()

        return connect
