"""The bus: a thin typed async context manager over aiomqtt.

``Bus`` keeps one MQTT connection alive for as long as it is open:

- typed ``publish(topic, msg)`` / ``subscribe(filter)`` / ``messages()``; payloads are
  encoded by ``runtime.messages`` (JSON for control and events, msgpack for frames);
- a fixed client id with clean start off (MQTT 5: plus a session expiry; 3.1.1: clean
  session off), so QoS 1 messages queued while we were away arrive after a reconnect;
- reconnect with jittered exponential backoff, resubscribing every filter each time, so a
  subscription survives a broker restart; a publish waits for the connection to return;
- a last will (e.g. a retained ``offline`` status), also published on a clean close;
- MQTT 5 when the broker speaks it, else 3.1.1 (``protocol = "auto"``);
- username/password and TLS.

Inbound payloads that are malformed, oversized or of the wrong kind for their topic are
never delivered: each becomes an ``Error`` (logged, counted, and published to
``reject_topic`` when one is given).
"""

from __future__ import annotations

import asyncio
import errno
import math
import random
import socket
import ssl
import uuid
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

import aiomqtt
import anyio
import structlog
from aiomqtt.exceptions import MqttConnectError
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from runtime import topics
from runtime.config import BusConfig
from runtime.errors import MobagentError
from runtime.messages import RUNTIME_CODEC, Codec, Error, Msg, Rejected, encode

log = structlog.get_logger(__name__)

Protocol = Literal["5", "3.1.1"]
REJECT_LOG_PER_S = 10


class BusError(MobagentError, RuntimeError):
    """The bus could not connect, publish or subscribe in time."""


@dataclass(frozen=True)
class BrokerAddress:
    host: str
    port: int
    tls: bool = False
    username: str = ""
    password: str = field(default="", repr=False)

    @property
    def url(self) -> str:
        """The address without credentials, safe to log."""
        return f"{'mqtts' if self.tls else 'mqtt'}://{self.host}:{self.port}"


def parse_broker_url(url: str) -> BrokerAddress:
    """``mqtt://[user[:pass]@]host[:port]`` or ``mqtts://...``; ``ValueError`` if not."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"bad broker url: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("mqtt", "mqtts", "tcp", "ssl"):
        raise ValueError(f"bad broker url scheme {scheme!r}: expected mqtt:// or mqtts://")
    if not parts.hostname:
        raise ValueError("bad broker url: no host")
    if parts.path not in ("", "/") or parts.query:
        raise ValueError("bad broker url: expected no path or query")
    tls = scheme in ("mqtts", "ssl")
    return BrokerAddress(
        host=parts.hostname,
        port=port or (8883 if tls else 1883),
        tls=tls,
        username=unquote(parts.username or ""),
        password=unquote(parts.password or ""),
    )


class Backoff:
    """Exponential backoff with jitter; ``reset`` after a success."""

    def __init__(self, base_s: float = 0.2, cap_s: float = 10.0) -> None:
        self.base_s, self.cap_s, self.attempt = base_s, cap_s, 0

    def next_delay(self) -> float:
        delay = min(self.cap_s, self.base_s * math.pow(2, min(self.attempt, 30)))
        self.attempt += 1
        return random.uniform(delay / 2, delay)

    def reset(self) -> None:
        self.attempt = 0


@dataclass
class BusStats:
    connects: int = 0
    published: int = 0
    received: int = 0
    rejected: int = 0
    rejects_dropped: int = 0


def _tls_context(cfg: BusConfig) -> ssl.SSLContext:
    tls = cfg.tls
    ctx = ssl.create_default_context(cafile=tls.ca_file or None)
    if tls.cert_file:
        ctx.load_cert_chain(tls.cert_file, tls.key_file or None)
    if tls.insecure:
        ctx.check_hostname = False
    return ctx


def set_nodelay(sock: Any) -> None:
    """``TCP_NODELAY`` on a TCP (or TLS over TCP) socket; anything else is left as it is."""
    try:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except (AttributeError, OSError) as exc:  # a websocket wrapper, a socket already closed
        log.debug("bus_nodelay_not_set", error=str(exc))


def queued_messages(client: aiomqtt.Client) -> asyncio.Queue[aiomqtt.Message] | None:
    """aiomqtt's incoming message queue: the one read of a dependency's private in runtime/.

    Why: each step of aiomqtt's ``client.messages`` iterator costs an asyncio task, so the
    loop drains what is already queued with ``get_nowait`` (bench/bus.py throughput, small
    QoS 1 messages/s). Measured on this 2-core host, loopback mosquitto, 8000 messages,
    2 runs each: with the drain 5,695 and 5,167 msgs/s, without it 3,780 and 3,766 (about
    1.4x). Reproduce: run ``bench.bus --small 300 --frames 10 --throughput 8000 --rounds 2``
    once as is and once with this function patched to return None. aiomqtt is pinned to <3;
    tests/runtime/test_bus.py fails loudly if the attribute moves. None (no drain, still
    correct) if it is absent.
    """
    queue = getattr(client, "_queue", None)
    return queue if isinstance(queue, asyncio.Queue) else None


class _GuardedClient(aiomqtt.Client):
    """aiomqtt's client with Nagle off, and minus one race: a writer for a dead socket.

    paho leaves Nagle's algorithm on, so a small publish written while the previous small
    packet (a PUBACK) is unacknowledged waits for the peer's delayed ACK: about 40 ms per
    event published right after another (measured in bench/fleet.py's steps). MQTT
    packets are whole messages, so the socket gets ``TCP_NODELAY``.

    paho may ask for a writer from its connect thread; aiomqtt schedules ``add_writer`` on
    the loop, and when the connection died in between, the fd is closed by the time it
    runs and the loop reports ``OSError(EBADF)`` as an unhandled error. A writer for a
    closed socket has nothing to write, so that one error is dropped (the reconnect loop
    already handles the dead connection). Overrides a private hook: aiomqtt is pinned <3.
    """

    def _on_socket_open(self, client: Any, userdata: Any, sock: Any) -> None:
        set_nodelay(sock)
        super()._on_socket_open(client, userdata, sock)

    def _on_socket_register_write(self, client: Any, userdata: Any, sock: Any) -> None:
        def write() -> None:
            try:
                client.loop_write()
            except Exception as exc:  # a broken pipe: let the connection loop reconnect
                if not self._disconnected.done():
                    self._disconnected.set_exception(exc)

        def register(fd: int) -> None:
            try:
                self._loop.add_writer(fd, write)
            except OSError as exc:
                if exc.errno != errno.EBADF:
                    raise
                log.debug("bus_writer_for_closed_socket", fd=fd)

        self._loop.call_soon_threadsafe(register, sock.fileno())


class Bus:
    """One MQTT connection, kept alive; use as ``async with Bus(...) as bus``."""

    def __init__(
        self,
        cfg: BusConfig,
        address: BrokerAddress,
        *,
        client_id: str | None = None,
        persistent: bool | None = None,
        will: tuple[str, Msg] | None = None,
        max_payload_bytes: int | None = None,
        reject_topic: str | None = None,
        inbox_size: int = 1024,
        protocol: Protocol | None = None,
        codec: Codec = RUNTIME_CODEC,
    ) -> None:
        self.cfg = cfg
        self.address = address
        self.codec = codec
        self.client_id = client_id or cfg.client_id or f"mobagent-{uuid.uuid4().hex[:12]}"
        self.persistent = cfg.persistent_session if persistent is None else persistent
        self.will = will
        self.max_payload_bytes = max_payload_bytes
        self.reject_topic = reject_topic
        self.stats = BusStats()
        self._protocol: Protocol | None = protocol or (None if cfg.protocol == "auto" else cfg.protocol)
        self._subs: dict[str, int] = {}
        self._client: aiomqtt.Client | None = None
        self._connected = anyio.Event()
        self._closing = False
        self._tg: TaskGroup | None = None
        self._in_send, self._in_recv = anyio.create_memory_object_stream[tuple[str, Msg]](
            inbox_size
        )
        self._rej_send: MemoryObjectSendStream[Error]
        self._rej_recv: MemoryObjectReceiveStream[Error]
        self._rej_send, self._rej_recv = anyio.create_memory_object_stream[Error](256)
        self._last_error = ""
        self._reject_window_start = -1e9
        self._reject_logged = self._reject_suppressed = 0
        try:
            self._tls = _tls_context(cfg) if (address.tls or cfg.tls.enabled) else None
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise BusError(f"TLS setup for {address.url} failed: {exc}") from None

    # ---- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> Bus:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            with anyio.fail_after(self.cfg.connect_timeout_s):
                await self._tg.start(self._connection_loop)
        except BaseException as exc:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            if isinstance(exc, TimeoutError):
                raise BusError(
                    f"could not connect to {self.address.url} within "
                    f"{self.cfg.connect_timeout_s}s: {self._last_error or 'no answer'}"
                ) from None
            raise
        self._tg.start_soon(self._reject_loop)
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._tg is not None
        self._closing = True
        if self.will is not None and self._client is not None:
            # A clean close says what the will would have said.
            with anyio.move_on_after(2, shield=True):
                try:
                    await self._client.publish(
                        self.will[0], encode(self.will[1]), qos=1, retain=True, timeout=2
                    )
                except aiomqtt.MqttError:
                    pass
        self._tg.cancel_scope.cancel()
        self._in_send.close()
        return await self._tg.__aexit__(et, exc, tb)

    @property
    def connected(self) -> bool:
        return self._client is not None

    @property
    def protocol(self) -> Protocol | None:
        return self._protocol

    def _make_client(self, protocol: Protocol) -> aiomqtt.Client:
        will = None
        if self.will is not None:
            will = aiomqtt.Will(self.will[0], encode(self.will[1]), qos=1, retain=True)
        username = self.cfg.username or self.address.username or None
        password = self.cfg.password or self.address.password or None
        kwargs: dict[str, Any] = {}
        if protocol == "5":
            kwargs["protocol"] = aiomqtt.ProtocolVersion.V5
            kwargs["clean_start"] = not self.persistent
            if self.persistent:
                props = Properties(PacketTypes.CONNECT)
                props.SessionExpiryInterval = self.cfg.session_expiry_s
                kwargs["properties"] = props
        else:
            kwargs["protocol"] = aiomqtt.ProtocolVersion.V311
            kwargs["clean_session"] = not self.persistent
        client = _GuardedClient(
            self.address.host,
            self.address.port,
            username=username,
            password=password,
            identifier=self.client_id,
            will=will,
            keepalive=self.cfg.keepalive_s,
            timeout=self.cfg.connect_timeout_s,
            max_inflight_messages=self.cfg.max_inflight,
            tls_context=self._tls,
            **kwargs,
        )
        # aiomqtt warns above 10 concurrent publishes; that many in flight is normal here.
        client.pending_calls_threshold = max(10, 2 * self.cfg.max_inflight)
        return client

    async def _connection_loop(self, *, task_status: TaskStatus[None]) -> None:
        backoff = Backoff(self.cfg.reconnect_min_s, self.cfg.reconnect_max_s)
        started = False
        while True:
            try:
                if self._protocol is None:
                    self._protocol = await self._probe_protocol()
                client = self._make_client(self._protocol)
                async with client:
                    for filter_, qos in list(self._subs.items()):
                        await client.subscribe(self._wire_filter(filter_), qos=qos)
                    self._client = client
                    self.stats.connects += 1
                    self._connected.set()
                    backoff.reset()
                    log.info(
                        "bus_connected", broker=self.address.url, client_id=self.client_id,
                        protocol=self._protocol, subscriptions=len(self._subs),
                    )
                    if not started:
                        started = True
                        task_status.started()
                    queue = queued_messages(client)
                    async for m in client.messages:
                        await self._on_message(m)
                        # Drain what is already queued (see queued_messages for why).
                        while queue is not None and not queue.empty():
                            await self._on_message(queue.get_nowait())
                    raise aiomqtt.MqttError("message stream ended")
            except (aiomqtt.MqttError, OSError) as exc:  # OSError: TLS and socket failures
                self._last_error = str(exc) or type(exc).__name__
                if self._client is not None:
                    log.warning("bus_disconnected", broker=self.address.url, error=self._last_error)
                else:
                    log.debug("bus_connect_failed", broker=self.address.url, error=self._last_error)
            finally:
                if self._client is not None:
                    self._client = None
                    self._connected = anyio.Event()
            if self._closing:
                return
            delay = backoff.next_delay()
            log.debug("bus_reconnect_wait", broker=self.address.url, delay_s=round(delay, 3))
            await anyio.sleep(delay)

    async def _probe_protocol(self) -> Protocol:
        """``auto``: MQTT 5 unless the broker refuses that version (amqtt speaks 3.1.1).

        A throwaway clean MQTT 5 connection under another client id asks the broker: a
        session-carrying CONNECT is not used for this, because amqtt stalls on its
        properties instead of refusing, and a clean start would wipe our session.
        """
        probe = _GuardedClient(
            self.address.host, self.address.port,
            username=self.cfg.username or self.address.username or None,
            password=self.cfg.password or self.address.password or None,
            identifier=f"{self.client_id[:40]}-probe-{uuid.uuid4().hex[:6]}",
            protocol=aiomqtt.ProtocolVersion.V5, clean_start=True,
            timeout=self.cfg.connect_timeout_s, tls_context=self._tls,
        )
        try:
            async with probe:
                return "5"
        except MqttConnectError as exc:
            rc = exc.rc.value if isinstance(exc.rc, ReasonCode) else exc.rc
            if rc in (1, 132):  # 3.1.1 "unacceptable protocol version" / 5.0 0x84
                return "3.1.1"
            raise

    def _wire_filter(self, filter_: str) -> str:
        # Shared subscriptions are MQTT 5 only; on 3.1.1 a plain subscription is the fallback.
        if filter_.startswith("$share/") and self._protocol != "5":
            return filter_.split("/", 2)[2]
        return filter_

    async def _on_message(self, m: aiomqtt.Message) -> None:
        topic = m.topic.value
        payload = m.payload
        if not isinstance(payload, bytes | bytearray):
            payload = b"" if payload is None else str(payload).encode()
        self.stats.received += 1
        try:
            msg = self.codec.decode_for(
                topic, payload, max_bytes=self.max_payload_bytes,
                expected=topics.expected_kinds(topic), expected_kind=topics.request_kind(topic),
            )
        except Rejected as exc:
            self._reject(exc.error)
            return
        try:  # without a trip through the event loop when there is room
            self._in_send.send_nowait((topic, msg))
        except anyio.WouldBlock:
            await self._in_send.send((topic, msg))

    def _reject(self, err: Error) -> None:
        self.stats.rejected += 1
        # At most a few log lines per second: a flood of garbage must not flood the logs.
        now = anyio.current_time()
        if now - self._reject_window_start >= 1.0:
            if self._reject_suppressed:
                log.warning("bus_rejected_suppressed", count=self._reject_suppressed)
            self._reject_window_start, self._reject_logged, self._reject_suppressed = now, 0, 0
        if self._reject_logged < REJECT_LOG_PER_S:
            self._reject_logged += 1
            log.warning("bus_rejected", topic=err.topic, reason=err.reason, detail=err.detail[:200])
        else:
            self._reject_suppressed += 1
        if self.reject_topic is None:
            return
        try:
            self._rej_send.send_nowait(err)
        except anyio.WouldBlock:
            self.stats.rejects_dropped += 1  # a flood of garbage must not stall the inbox

    async def _reject_loop(self) -> None:
        async with self._rej_recv:
            async for err in self._rej_recv:
                if self.reject_topic is None:
                    continue
                try:
                    await self.publish(self.reject_topic, err, qos=0)
                except BusError as exc:
                    log.warning("bus_reject_publish_failed", error=str(exc))

    # ---- the typed API -------------------------------------------------------------------

    async def _wait_client(self) -> aiomqtt.Client:
        while self._client is None:
            if self._closing:
                raise BusError("bus is closed")
            await self._connected.wait()
        return self._client

    async def subscribe(self, filter_: str, qos: int = 1) -> None:
        """Subscribe now (when connected) and again after every reconnect."""
        self._subs[filter_] = qos
        client = self._client
        if client is not None:
            try:
                await client.subscribe(
                    self._wire_filter(filter_), qos=qos, timeout=self.cfg.publish_timeout_s
                )
            except aiomqtt.MqttError as exc:
                # The reconnect path subscribes again; only log here.
                log.warning("bus_subscribe_deferred", filter=filter_, error=str(exc))

    async def unsubscribe(self, filter_: str) -> None:
        self._subs.pop(filter_, None)
        client = self._client
        if client is not None:
            try:
                await client.unsubscribe(
                    self._wire_filter(filter_), timeout=self.cfg.publish_timeout_s
                )
            except aiomqtt.MqttError as exc:
                log.warning("bus_unsubscribe_failed", filter=filter_, error=str(exc))

    async def publish(self, topic: str, msg: Msg, *, qos: int = 1, retain: bool = False) -> None:
        """Publish a message; waits for the broker's ack at QoS 1 (at least once)."""
        await self.publish_raw(topic, encode(msg), qos=qos, retain=retain)

    async def publish_raw(
        self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False
    ) -> None:
        """Publish bytes as they are (tests and benchmarks use this for odd payloads)."""
        timeout = self.cfg.publish_timeout_s
        # A publish lost with a dead connection is retried on the next one, after this
        # much of the budget (so a retry is possible); duplicates are deduped by id.
        attempt_s = max(1.0, timeout / 3)
        client = self._client
        if client is not None:  # the fast path: connected, one deadline
            try:
                # An anyio deadline instead of aiomqtt's timeout, which costs a task per call.
                with anyio.fail_after(attempt_s):
                    await client.publish(topic, payload, qos=qos, retain=retain, timeout=math.inf)
                self.stats.published += 1
                return
            except (aiomqtt.MqttError, TimeoutError) as exc:
                log.debug("bus_publish_retry", topic=topic, error=str(exc) or "timeout")
        try:
            with anyio.fail_after(timeout):
                while True:
                    client = self._client or await self._wait_client()
                    try:
                        with anyio.fail_after(attempt_s):
                            await client.publish(
                                topic, payload, qos=qos, retain=retain, timeout=math.inf
                            )
                        self.stats.published += 1
                        return
                    except (aiomqtt.MqttError, TimeoutError) as exc:
                        log.debug("bus_publish_retry", topic=topic, error=str(exc) or "timeout")
                        await anyio.sleep(0.05)
        except TimeoutError:
            raise BusError(f"publish to {topic} not acknowledged within {timeout}s") from None

    def messages(self) -> MemoryObjectReceiveStream[tuple[str, Msg]]:
        """Every valid inbound message as ``(topic, message)``, across reconnects.

        One consumer (usually a ``Router``); it ends when the bus closes.
        """
        return self._in_recv
