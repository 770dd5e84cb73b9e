"""The device's abstract-namespace UNIX sockets (``localabstract:NAME``), one registry a phone.

A process on the phone listens on a name (the scrcpy server's LocalServerSocket); adbd
connects each ``localabstract:NAME`` stream it is asked for to that listener. While nothing
listens, adbd refuses the service, which an `adb forward` client sees as its connection
closed and an adbutils client as FAIL "closed", and both retry (scrcpy's client does,
app/src/server.c connect_and_read_byte).

``adb reverse`` puts adbd itself on a name (AOSP adb: daemon/services.cpp reverse_service ->
adb.cpp handle_forward_request -> adb_listeners.cpp install_listener): a process that
connects to it makes adbd open a stream towards the host whose destination is the reverse
rule's remote spec, e.g. ``tcp:27183`` (listener_event_func -> sockets.cpp connect_to_remote:
A_OPEN, payload the destination plus a NUL), and the host's adb server connects that to
its local port.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from runtime.errors import MobagentError

if TYPE_CHECKING:
    from sim.adb.server import Stream
    from sim.adb.services import Service


class AddressInUse(MobagentError, OSError):
    """Another listener holds the name (bind() fails with EADDRINUSE)."""


class ConnectionRefused(MobagentError, ConnectionRefusedError):
    """Nothing listens on the name (connect() fails with ECONNREFUSED)."""


Opener = Callable[[str], Awaitable["Stream"]]  # opens a stream to the host: OPEN(destination)


class ReverseListener:
    """adbd listening for an ``adb reverse`` rule of one host connection (``owner``)."""

    def __init__(self, name: str, connect_to: str, opener: Opener, owner: object) -> None:
        self.name, self.connect_to, self.opener, self.owner = name, connect_to, opener, owner


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
        self._names: dict[str, Listener | ReverseListener] = {}

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

    async def connect(self, name: str) -> Stream:
        """A process on the phone connects to ``name``: through an ``adb reverse`` rule
        that is a new stream to the host."""
        with self._lock:
            listener = self._names.get(name)
        if not isinstance(listener, ReverseListener):
            raise ConnectionRefused(f"localabstract:{name}: Connection refused")
        return await listener.opener(listener.connect_to)

    def install_reverse(self, local: str, connect_to: str, opener: Opener, owner: object,
                        no_rebind: bool) -> str | None:
        """``reverse:forward:[norebind:]LOCAL;REMOTE``: None, or adbd's FAIL message."""
        if not local.startswith("localabstract:") or len(local) == 14:
            return f"cannot bind listener: {local} is not simulated (localabstract: only)"
        name = local[14:]
        with self._lock:
            current = self._names.get(name)
            if isinstance(current, Listener):
                return "cannot bind listener: Address already in use"
            if current is not None and no_rebind:
                return "cannot rebind existing socket"
            self._names[name] = ReverseListener(name, connect_to, opener, owner)
        return None

    def remove_reverse(self, local: str, owner: object | None = None) -> bool:
        """``reverse:killforward:LOCAL`` (or, with no LOCAL, all of ``owner``'s rules)."""
        with self._lock:
            gone = [n for n, lst in self._names.items() if isinstance(lst, ReverseListener)
                    and (f"localabstract:{n}" == local or (not local and lst.owner is owner))]
            for n in gone:
                del self._names[n]
        return bool(gone)

    def list_reverse(self) -> str:
        """``reverse:list-forward`` (adb_listeners.cpp format_listeners: adbd's entries
        have no serial)."""
        with self._lock:
            return "".join(f"(reverse) localabstract:{n} {lst.connect_to}\n"
                           for n, lst in self._names.items() if isinstance(lst, ReverseListener))

    def service(self, name: str) -> Service | None:
        """The stream service that connects to ``name``'s listener, or None (refused)."""
        with self._lock:
            listener = self._names.get(name)
        if not isinstance(listener, Listener):
            return None

        async def connect(stream: Stream) -> None:
            conn = Accepted(stream)
            try:
                listener.offer(conn)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # it stopped listening between OPEN and now: the stream closes
            await conn.done.wait()

        return connect
