"""The device side of the ADB transport on a loopback TCP port, one server per phone.

Each server runs its own asyncio loop in a background thread so that blocking callers
(tests, the CLI) can start and stop it. Per connection: the CNXN handshake (no AUTH),
then streams multiplexed by local/remote ids with one WRTE in flight per direction.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
from types import TracebackType

from sim.adb import wire
from sim.adb.fs import VirtualFS
from sim.adb.services import Service, resolve
from sim.adb.wire import Command, Message, ProtocolError
from sim.phone_api import Phone

log = logging.getLogger(__name__)

FEATURES = ["shell_v2", "cmd"]  # advertise only what services.py really implements
FAULT_POLL_S = 0.05
CLOSED_IDS_KEPT = 4096


class StreamClosed(Exception):
    pass


class Stream:
    """One side of an ADB stream: our local id, the peer's id, and flow control."""

    def __init__(self, conn: Connection, local_id: int, remote_id: int) -> None:
        self.conn = conn
        self.local_id = local_id
        self.remote_id = remote_id
        self.inbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.closed = False
        self._may_write = asyncio.Event()
        self._may_write.set()

    @property
    def max_payload(self) -> int:
        return self.conn.max_payload

    async def write(self, data: bytes) -> None:
        """Send data as WRTEs, each waiting for the peer's OKAY to the one before."""
        view = memoryview(data)
        for start in range(0, max(len(view), 1), self.max_payload):
            chunk = bytes(view[start : start + self.max_payload])
            if not chunk:
                return
            await self._may_write.wait()
            if self.closed:
                raise StreamClosed
            self._may_write.clear()
            await self.conn.send(Message(Command.WRTE, self.local_id, self.remote_id, chunk))

    async def read(self) -> bytes | None:
        """The next WRTE payload from the peer; None once the peer closed the stream."""
        if self.closed and self.inbox.empty():
            return None
        return await self.inbox.get()

    def on_okay(self) -> None:
        self._may_write.set()

    def on_peer_close(self) -> None:
        self.closed = True
        self._may_write.set()
        self.inbox.put_nowait(None)

    async def close(self) -> None:
        if not self.closed:
            self.on_peer_close()
            with contextlib.suppress(ConnectionError):
                await self.conn.send(Message(Command.CLSE, self.local_id, self.remote_id))
        self.conn.forget(self)


class Connection:
    def __init__(self, server: SimAdbServer, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.connected = False
        self.peer_version = wire.VERSION
        self.max_payload = wire.MAX_PAYLOAD_LEGACY
        self.streams: dict[int, Stream] = {}
        self.closed_ids: collections.deque[int] = collections.deque(maxlen=CLOSED_IDS_KEPT)
        self.tasks: set[asyncio.Task[None]] = set()
        self._next_id = 1
        self._send_lock = asyncio.Lock()

    async def send(self, msg: Message) -> None:
        async with self._send_lock:
            if self.writer.is_closing():
                raise ConnectionResetError("connection closed")
            self.writer.write(msg.pack(with_checksum=self.peer_version < wire.VERSION))
            await self.writer.drain()

    def forget(self, stream: Stream) -> None:
        if self.streams.pop(stream.local_id, None) is not None:
            self.closed_ids.append(stream.local_id)

    def abort(self) -> None:
        self.writer.transport.abort()

    async def serve(self) -> None:
        try:
            await self._read_loop()
        except ProtocolError as e:
            log.warning("adb %s: closing a connection on bad input: %s", self.server.serial, e)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            for stream in list(self.streams.values()):
                stream.on_peer_close()
            for task in self.tasks:
                task.cancel()
            if self.tasks:
                await asyncio.gather(*self.tasks, return_exceptions=True)
            self.writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self.writer.wait_closed()

    async def _read_loop(self) -> None:
        while True:
            try:
                raw = await self.reader.readexactly(wire.HEADER_SIZE)
            except asyncio.IncompleteReadError as e:
                if e.partial:
                    raise ProtocolError(f"truncated header: {len(e.partial)} bytes") from e
                return  # a clean EOF between messages
            limit = wire.MAX_PAYLOAD if self.connected else max(wire.MAX_PAYLOAD, 1 << 20)
            header = wire.parse_header(raw, limit)
            try:
                data = await self.reader.readexactly(header.data_length)
            except asyncio.IncompleteReadError as e:
                raise ProtocolError("truncated payload") from e
            wire.verify_payload(header, data, self.peer_version if self.connected else wire.VERSION)
            await self._handle(Message(header.command, header.arg0, header.arg1, data))

    async def _handle(self, msg: Message) -> None:
        if msg.command == Command.CNXN:
            if msg.arg0 < wire.VERSION_MIN:
                raise ProtocolError(f"unsupported protocol version {msg.arg0:#x}")
            self.peer_version = min(msg.arg0, wire.VERSION)
            self.max_payload = max(wire.MAX_PAYLOAD_LEGACY, min(msg.arg1, wire.MAX_PAYLOAD))
            self.connected = True
            await self.send(Message(Command.CNXN, wire.VERSION, wire.MAX_PAYLOAD,
                                    self.server.banner()))
            return
        if not self.connected:
            raise ProtocolError(f"{msg.command.name} before CNXN")
        if msg.command == Command.OPEN:
            await self._open(msg)
        elif msg.command == Command.OKAY:
            stream = self._stream(msg.arg1, msg)
            if stream is not None:
                stream.on_okay()
        elif msg.command == Command.WRTE:
            stream = self._stream(msg.arg1, msg)
            if stream is not None:
                stream.inbox.put_nowait(msg.data)
                await self.send(Message(Command.OKAY, stream.local_id, stream.remote_id))
        elif msg.command == Command.CLSE:
            stream = self._stream(msg.arg1, msg)
            if stream is not None:
                stream.on_peer_close()
                self.forget(stream)
        else:  # AUTH, STLS or SYNC: we never asked for them
            raise ProtocolError(f"unexpected {msg.command.name}")

    def _stream(self, local_id: int, msg: Message) -> Stream | None:
        stream = self.streams.get(local_id)
        if stream is not None:
            if stream.remote_id != msg.arg0 and msg.arg0 != 0:
                raise ProtocolError(f"{msg.command.name} for stream {local_id} from wrong peer id")
            return stream
        if local_id in self.closed_ids:
            return None  # a late OKAY/CLSE that crossed our CLSE on the wire
        raise ProtocolError(f"{msg.command.name} for unknown stream id {local_id}")

    async def _open(self, msg: Message) -> None:
        if msg.arg0 == 0:
            raise ProtocolError("OPEN with local-id 0")
        destination = msg.data.rstrip(b"\0").decode("utf-8", errors="replace")
        service = resolve(destination, self.server.phone, self.server.fs)
        if service is None:
            log.info("adb %s: refusing service %r", self.server.serial, destination)
            await self.send(Message(Command.CLSE, 0, msg.arg0))
            return
        local_id = self._next_id
        self._next_id = self._next_id + 1 if self._next_id < 0xFFFFFFFF else 1
        stream = Stream(self, local_id, msg.arg0)
        self.streams[local_id] = stream
        await self.send(Message(Command.OKAY, local_id, msg.arg0))
        task = asyncio.get_running_loop().create_task(self._run_service(stream, service, destination))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run_service(self, stream: Stream, service: Service, destination: str) -> None:
        try:
            await service(stream)
        except (StreamClosed, ConnectionError):
            pass
        except Exception:
            log.exception("adb %s: service %r failed", self.server.serial, destination)
        finally:
            await stream.close()


class SimAdbServer:
    """`with SimAdbServer(phone) as srv: adb connect 127.0.0.1:{srv.port}`."""

    def __init__(self, phone: Phone, host: str = "127.0.0.1", port: int = 0,
                 fs: VirtualFS | None = None) -> None:
        self.phone = phone
        self.host = host
        self.fs = fs if fs is not None else VirtualFS()
        self._requested_port = port
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
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
        if self._thread is not None:
            raise RuntimeError("SimAdbServer already started")
        self._thread = threading.Thread(target=self._thread_main, daemon=True,
                                        name=f"sim-adb-{self.phone.info.serial}")
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("SimAdbServer did not start in time")
        if self._error is not None:
            raise RuntimeError(f"SimAdbServer failed to start: {self._error}") from self._error
        return self

    def stop(self, timeout: float = 10.0) -> None:
        loop, stop, thread = self._loop, self._stop, self._thread
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended already
                loop.call_soon_threadsafe(stop.set)
        if thread is not None:
            thread.join(timeout)
        self._thread = None

    def __enter__(self) -> SimAdbServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except BaseException as e:  # report start failures to start()
            self._error = e
        finally:
            self._ready.set()
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._on_client, self.host, self._requested_port)
        self._port = server.sockets[0].getsockname()[1]
        self._ready.set()
        watcher = asyncio.get_running_loop().create_task(self._watch_faults())
        try:
            await self._stop.wait()
        finally:
            watcher.cancel()
            server.close()
            for conn in list(self._connections):
                conn.abort()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(server.wait_closed(), 5)

    async def _watch_faults(self) -> None:
        while True:
            if self.phone.faults.drop_connections:
                for conn in list(self._connections):
                    conn.abort()
            await asyncio.sleep(FAULT_POLL_S)

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.phone.faults.drop_connections:
            writer.transport.abort()
            return
        conn = Connection(self, reader, writer)
        self._connections.add(conn)
        try:
            await conn.serve()
        finally:
            self._connections.discard(conn)
