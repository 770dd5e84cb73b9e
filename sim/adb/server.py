"""The device side of the ADB transport on a loopback TCP port, one server per phone.

Each server runs an anyio event loop in a blocking portal (its own thread), so blocking
callers (tests, the CLI, the fleet) can start and stop it. Per connection: the CNXN
handshake (AUTH only for a phone whose fault says it is unauthorized: it never accepts
a key), then streams multiplexed by local/remote ids with one WRTE in
flight per direction. Every connection and every stream service lives in a task group;
stopping the server cancels them all.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
from concurrent.futures import Future
from contextlib import AbstractContextManager
from types import TracebackType

import anyio
from anyio.abc import SocketAttribute, SocketStream, TaskGroup, TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal
from anyio.streams.buffered import BufferedByteReceiveStream

from sim.adb import wire
from sim.adb.abstract import AbstractSockets
from sim.adb.fs import VirtualFS
from sim.adb.services import Service, resolve
from sim.adb.wire import Command, Message, ProtocolError, StreamClosed
from sim.phone_api import Phone

log = logging.getLogger(__name__)

FEATURES = ["shell_v2", "cmd"]  # advertise only what services.py really implements
FAULT_POLL_S = 0.05
CLOSED_IDS_KEPT = 4096
SEND_TIMEOUT_S = 30.0  # a peer that stops reading its socket for this long is dropped
ACK_TIMEOUT_S = 60.0  # a peer that never OKAYs our WRTE: the stream is closed
OPEN_TIMEOUT_S = 10.0  # a host that never answers a stream we OPENed (adb reverse)
# AUTH's arg0 (AOSP protocol.txt): we send TOKENs; the host answers SIGNATURE, then RSAPUBLICKEY
AUTH_TOKEN, AUTH_SIGNATURE, AUTH_RSAPUBLICKEY = 1, 2, 3
AUTH_TOKEN_SIZE = 20


class Stream:
    """One side of an ADB stream: our local id, the peer's id, and flow control."""

    def __init__(self, conn: Connection, local_id: int, remote_id: int) -> None:
        self.conn = conn
        self.local_id = local_id
        self.remote_id = remote_id
        self.closed = False
        self._inbox: collections.deque[bytes | None] = collections.deque()
        self.opened = anyio.Event()  # a stream we OPENed: set by the peer's OKAY or CLSE
        self._arrived = anyio.Event()  # replaced after each wake-up, set by on_data/close
        self._may_write = anyio.Event()  # replaced after each WRTE, set by the peer's OKAY
        self._may_write.set()

    @property
    def max_payload(self) -> int:
        return self.conn.max_payload

    async def write(self, data: bytes) -> None:
        """Send data as WRTEs, each waiting for the peer's OKAY to the one before."""
        view = memoryview(data)
        for start in range(0, len(view), self.max_payload):
            chunk = bytes(view[start : start + self.max_payload])
            with anyio.move_on_after(ACK_TIMEOUT_S) as waited:
                await self._may_write.wait()
            if waited.cancelled_caught:
                log.warning("adb %s: no OKAY for %s s; closing stream %d", self.conn.server.serial,
                            ACK_TIMEOUT_S, self.local_id)
                raise StreamClosed
            if self.closed:
                raise StreamClosed
            self._may_write = anyio.Event()
            await self.conn.send(Message(Command.WRTE, self.local_id, self.remote_id, chunk))

    async def read(self) -> bytes | None:
        """The next WRTE payload from the peer; None once the peer closed the stream."""
        while not self._inbox:
            if self.closed:
                return None
            await self._arrived.wait()
            self._arrived = anyio.Event()
        return self._inbox.popleft()

    def on_data(self, data: bytes) -> None:
        self._inbox.append(data)
        self._arrived.set()

    def on_okay(self) -> None:
        self._may_write.set()

    def on_peer_close(self) -> None:
        self.opened.set()
        if not self.closed:
            self.closed = True
            self._may_write.set()
            self._inbox.append(None)
            self._arrived.set()

    async def close(self) -> None:
        if not self.closed:
            self.on_peer_close()
            with contextlib.suppress(ConnectionError, anyio.BrokenResourceError,
                                     anyio.ClosedResourceError):
                await self.conn.send(Message(Command.CLSE, self.local_id, self.remote_id))
        self.conn.forget(self)


class Connection:
    def __init__(self, server: SimAdbServer, sock: SocketStream) -> None:
        self.server = server
        self.sock = sock
        self.reader = BufferedByteReceiveStream(sock)
        self.connected = False
        self.peer_version = wire.VERSION
        self.max_payload = wire.MAX_PAYLOAD_LEGACY
        self.streams: dict[int, Stream] = {}
        self.closed_ids: collections.deque[int] = collections.deque(maxlen=CLOSED_IDS_KEPT)
        self.scope = anyio.CancelScope()
        self._next_id = 1
        self._send_lock = anyio.Lock()

    async def send(self, msg: Message) -> None:
        data = msg.pack(with_checksum=self.peer_version < wire.VERSION)
        async with self._send_lock:
            try:
                with anyio.fail_after(SEND_TIMEOUT_S):
                    await self.sock.send(data)
            except (TimeoutError, OSError, anyio.BrokenResourceError) as e:
                self.abort()
                raise ConnectionResetError(f"sending to the adb peer failed: {e!r}") from e

    async def open_stream(self, destination: str) -> Stream:
        """Open a stream towards the host, as adbd does for an ``adb reverse`` rule
        (AOSP sockets.cpp connect_to_remote: OPEN(local-id, 0, destination + NUL))."""
        local_id = self._new_id()
        stream = Stream(self, local_id, 0)
        self.streams[local_id] = stream
        await self.send(Message(Command.OPEN, local_id, 0, destination.encode() + b"\0"))
        with anyio.move_on_after(OPEN_TIMEOUT_S):
            await stream.opened.wait()
        if stream.closed or stream.remote_id == 0:
            await stream.close()
            raise StreamClosed(f"the host refused {destination}")
        return stream

    def _new_id(self) -> int:
        local_id = self._next_id
        self._next_id = self._next_id + 1 if self._next_id < 0xFFFFFFFF else 1
        return local_id

    def forget(self, stream: Stream) -> None:
        if self.streams.pop(stream.local_id, None) is not None:
            self.closed_ids.append(stream.local_id)

    def abort(self) -> None:
        """End this connection now (its services are cancelled, the socket closed)."""
        self.scope.cancel()

    async def serve(self) -> None:
        try:
            with self.scope:
                async with anyio.create_task_group() as services:
                    try:
                        await self._read_loop(services)
                    except ProtocolError as e:
                        log.warning("adb %s: closing a connection on bad input: %s",
                                    self.server.serial, e)
                    except (anyio.EndOfStream, anyio.BrokenResourceError,
                            anyio.ClosedResourceError, ConnectionError, OSError):
                        pass
                    for stream in list(self.streams.values()):
                        stream.on_peer_close()
                    self.server.sockets.remove_reverse("", owner=self)  # listener_disconnect
                    services.cancel_scope.cancel()
        finally:
            await anyio.aclose_forcefully(self.sock)

    async def _read_loop(self, services: TaskGroup) -> None:
        while True:
            try:
                raw = await self.reader.receive_exactly(wire.HEADER_SIZE)
            except anyio.IncompleteRead as e:
                if self.reader.buffer:
                    raise ProtocolError(f"truncated header: {len(self.reader.buffer)} bytes") from e
                return  # a clean EOF between messages
            limit = wire.MAX_PAYLOAD if self.connected else max(wire.MAX_PAYLOAD, 1 << 20)
            header = wire.parse_header(raw, limit)
            try:
                data = await self.reader.receive_exactly(header.data_length) \
                    if header.data_length else b""
            except anyio.IncompleteRead as e:
                raise ProtocolError("truncated payload") from e
            wire.verify_payload(header, data, self.peer_version if self.connected else wire.VERSION)
            await self._handle(Message(header.command, header.arg0, header.arg1, data), services)

    async def _handle(self, msg: Message, services: TaskGroup) -> None:
        if msg.command == Command.CNXN:
            if msg.arg0 < wire.VERSION_MIN:
                raise ProtocolError(f"unsupported protocol version {msg.arg0:#x}")
            self.peer_version = min(msg.arg0, wire.VERSION)
            self.max_payload = max(wire.MAX_PAYLOAD_LEGACY, min(msg.arg1, wire.MAX_PAYLOAD))
            if self.server.phone.faults.unauthorized:
                await self._send_auth_token()
                return
            self.connected = True
            await self.send(Message(Command.CNXN, wire.VERSION, wire.MAX_PAYLOAD,
                                    self.server.banner()))
            return
        if msg.command == Command.AUTH and not self.connected:
            # an unauthorized phone: every signature fails (no key is trusted) and a public
            # key waits for a tap on "Allow USB debugging?" that never comes, as adbd does
            if msg.arg0 == AUTH_SIGNATURE:
                await self._send_auth_token()
            return
        if not self.connected:
            raise ProtocolError(f"{msg.command.name} before CNXN")
        if msg.command == Command.OPEN:
            await self._open(msg, services)
        elif msg.command == Command.OKAY:
            stream = self._stream(msg.arg1, msg)
            if stream is not None:
                stream.on_okay()
        elif msg.command == Command.WRTE:
            stream = self._stream(msg.arg1, msg)
            if stream is not None:
                stream.on_data(msg.data)
                await self.send(Message(Command.OKAY, stream.local_id, stream.remote_id))
        elif msg.command == Command.CLSE:
            stream = self._stream(msg.arg1, msg)
            if stream is not None:
                stream.on_peer_close()
                self.forget(stream)
        else:  # AUTH, STLS or SYNC: we never asked for them
            raise ProtocolError(f"unexpected {msg.command.name}")

    async def _send_auth_token(self) -> None:
        await self.send(Message(Command.AUTH, AUTH_TOKEN, 0, os.urandom(AUTH_TOKEN_SIZE)))

    def _stream(self, local_id: int, msg: Message) -> Stream | None:
        stream = self.streams.get(local_id)
        if stream is not None:
            if stream.remote_id == 0 and msg.command == Command.OKAY and msg.arg0 != 0:
                stream.remote_id = msg.arg0  # the host took a stream we opened
                stream.opened.set()
            if stream.remote_id != msg.arg0 and msg.arg0 != 0:
                raise ProtocolError(f"{msg.command.name} for stream {local_id} from wrong peer id")
            return stream
        if local_id in self.closed_ids:
            return None  # a late OKAY/CLSE that crossed our CLSE on the wire
        raise ProtocolError(f"{msg.command.name} for unknown stream id {local_id}")

    async def _open(self, msg: Message, services: TaskGroup) -> None:
        if msg.arg0 == 0:
            raise ProtocolError("OPEN with local-id 0")
        destination = msg.data.rstrip(b"\0").decode("utf-8", errors="replace")
        service = resolve(destination, self.server.phone, self.server.fs, self.server.sockets,
                          owner=self)
        if service is None:
            log.info("adb %s: refusing service %r", self.server.serial, destination)
            await self.send(Message(Command.CLSE, 0, msg.arg0))
            return
        local_id = self._new_id()
        stream = Stream(self, local_id, msg.arg0)
        self.streams[local_id] = stream
        await self.send(Message(Command.OKAY, local_id, msg.arg0))
        services.start_soon(self._run_service, stream, service, destination,
                            name=f"adb service {destination[:40]!r}")

    async def _run_service(self, stream: Stream, service: Service, destination: str) -> None:
        try:
            await service(stream)
        except (StreamClosed, ConnectionError, anyio.BrokenResourceError,
                anyio.ClosedResourceError):
            pass
        except Exception:  # a bug in one service must not take the connection down
            log.exception("adb %s: service %r failed", self.server.serial, destination)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await stream.close()


class SimAdbServer:
    """`with SimAdbServer(phone) as srv: adb connect 127.0.0.1:{srv.port}`."""

    def __init__(self, phone: Phone, host: str = "127.0.0.1", port: int = 0,
                 fs: VirtualFS | None = None) -> None:
        self.phone = phone
        self.host = host
        self.fs = fs if fs is not None else VirtualFS()
        self.sockets = AbstractSockets()  # the phone's localabstract: listeners
        self._requested_port = port
        self._port: int | None = None
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._future: Future[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self._connections: set[Connection] = set()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("SimAdbServer is not started")
        return self._port

    @property
    def serial(self) -> str:
        """The serial the adb server lists after `adb connect`."""
        return f"{self.host}:{self._port}" if self._port is not None else self.phone.info.serial

    def banner(self) -> bytes:
        info = self.phone.info
        return wire.connect_banner(info.product_name, info.model, info.device, FEATURES)

    def start(self, timeout: float = 10.0) -> SimAdbServer:
        if self._portal is not None:
            raise RuntimeError("SimAdbServer already started")
        cm = start_blocking_portal(name=f"sim-adb-{self.phone.info.serial}")
        portal = cm.__enter__()
        self._portal_cm, self._portal = cm, portal
        try:
            self._future, self._port = portal.start_task(
                self._serve, timeout, name=f"sim-adb {self.phone.info.serial}")
        except BaseException as e:
            self._close_portal()
            raise RuntimeError(f"SimAdbServer failed to start: {e}") from e
        return self

    def stop(self, timeout: float = 10.0) -> None:
        portal, future = self._portal, self._future
        if portal is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop ended already
            portal.call(self._cancel)
        if future is not None:
            with contextlib.suppress(Exception):
                future.result(timeout)
        self._close_portal()

    def _close_portal(self) -> None:
        cm = self._portal_cm
        self._portal_cm = self._portal = self._future = None
        if cm is not None:
            cm.__exit__(None, None, None)

    def _cancel(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    def __enter__(self) -> SimAdbServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    async def _serve(self, bind_timeout: float, *, task_status: TaskStatus[int]) -> None:
        with anyio.fail_after(bind_timeout):
            listener = await anyio.create_tcp_listener(local_host=self.host,
                                                       local_port=self._requested_port)
        with anyio.CancelScope() as scope:
            self._scope = scope
            async with listener, anyio.create_task_group() as tg:
                tg.start_soon(self._watch_faults, name="sim-adb fault watcher")
                task_status.started(int(listener.extra(SocketAttribute.local_port)))
                await listener.serve(self._on_client, task_group=tg)

    async def _watch_faults(self) -> None:
        while True:
            if self.phone.faults.drop_connections:
                for conn in list(self._connections):
                    conn.abort()
            await anyio.sleep(FAULT_POLL_S)

    async def _on_client(self, sock: SocketStream) -> None:
        if self.phone.faults.drop_connections:
            await anyio.aclose_forcefully(sock)
            return
        conn = Connection(self, sock)
        self._connections.add(conn)
        try:
            await conn.serve()
        except Exception:  # never let one connection end the listener's task group
            log.exception("adb %s: connection failed", self.serial)
        finally:
            self._connections.discard(conn)
