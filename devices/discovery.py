"""Where a host's phones come from: a ``DeviceSource``, and its two kinds.

The fleet (``host/fleet.py``) needs three things of a source: the phones present now (with
adb's state for each: ``device``, ``offline``, ``unauthorized``...), a stream of changes
after that (a phone plugged in, unplugged, changing state), and a readiness probe for one
phone (is it really there after an episode failed on it?).

- ``AdbDevices``: what the adb server sees. The listing is ``adb devices``; the changes are
  adbutils' ``track_devices`` (adb's ``host:track-devices``, hot-plug) read in a thread
  and fed into a memory stream; the tracking socket is shut down to stop it, and the stream
  ends when the adb server goes away (the fleet lists again and starts a new one). The
  probe is the listing plus ``echo ok`` through the phone's shell.
- ``FixedDevices``: a list of serials given up front (``mobagent run``, ``demo``, the
  Mobile-Eval runner): all present, no changes, always ready. The phones are the caller's
  for the whole run, and an episode that fails on one keeps the agent's own reason.

Two more pieces for phones on Wi-Fi: ``WifiConnector`` keeps ``[fleet] connect``'s
addresses ``adb connect``ed (at start, and again after a drop, with a bounded backoff), and
``is_network_serial`` tells a phone adb reaches over the network from one on USB (a phone on
both is two serials; the fleet keeps the USB one).
"""

from __future__ import annotations

import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import anyio
import structlog

from devices.adb import adb_server_port
from devices.identity import SHARED_SERIAL_FIX, shared_serials
from runtime.bus import Backoff
from runtime.errors import MobagentError

if TYPE_CHECKING:
    import adbutils

log = structlog.get_logger(__name__)

ABSENT = "absent"  # a change's state when the phone left adb's list altogether
PROBE_TIMEOUT_S = 5.0


def adb_state(raw: str) -> str:
    """adb's state word as the fleet names it: ``host:devices`` cut at the first blank
    gives ``no`` for ``no permissions (user in plugdev group; are your udev rules
    wrong?)...``, and track-devices gives the whole sentence; both are ``no permissions``."""
    raw = raw.strip()
    return "no permissions" if raw == "no" or raw.startswith("no permissions") else raw


class DeviceChange(NamedTuple):
    serial: str
    state: str  # adb's state ("device" is usable), or ABSENT


class DeviceSourceError(MobagentError, RuntimeError):
    """The source cannot list its phones now (no adb server there, ...)."""


class DeviceSource(Protocol):
    """The phones a host may drive, and how that set changes."""

    def describe(self) -> str:
        """A few words for logs: where the phones come from."""
        ...

    async def present(self) -> dict[str, str]:
        """Serial -> adb state of every phone there now; ``DeviceSourceError`` if unknown."""
        ...

    def changes(self) -> AbstractAsyncContextManager[AsyncIterator[DeviceChange]]:
        """Changes from now on; the iterator ends when the source lost track (list again)."""
        ...

    async def ready(self, serial: str) -> bool:
        """Whether ``serial`` is there and answering (never raises)."""
        ...


# ---- the adb server ------------------------------------------------------------------------


class _Tracker:
    """adbutils' ``track_devices`` in a thread; ``stop`` shuts its socket to end it."""

    def __init__(self, host: str, port: int) -> None:
        import adbutils

        conns: list[Any] = []

        class TrackingClient(adbutils.AdbClient):
            # The only way to reach the tracking socket (to shut it from another thread):
            # remember each connection this client makes.
            def make_connection(self, timeout: float | None = None) -> adbutils.AdbConnection:
                conn = super().make_connection(timeout)
                conns.append(conn)
                return conn

        self._conns = conns
        self._client = TrackingClient(host=host, port=port, socket_timeout=None)
        self._stopped = False
        self._closed_error = adbutils.AdbError

    def run(self, emit: Callable[[DeviceChange], None]) -> str:
        """Blocking: call ``emit`` for every change; returns why it ended."""
        try:
            for ev in self._client.track_devices():
                if self._stopped:
                    return "stopped"
                emit(DeviceChange(ev.serial, adb_state(ev.status) if ev.present else ABSENT))
        except Exception as exc:  # the adb server went away, or stop() shut the socket
            return "stopped" if self._stopped else f"{type(exc).__name__}: {exc}"
        return "ended"

    def stop(self) -> None:
        """Idempotent: called when the consumer stops and again when the tracking task
        ends; by then the thread may have closed the socket itself (adbutils then says
        ``AdbError: Connection is closed``), which is a stop, not a failure."""
        self._stopped = True
        for conn in self._conns:
            if conn.closed:
                continue
            try:
                conn.conn.shutdown(socket.SHUT_RDWR)
            except (OSError, self._closed_error):
                pass  # closed meanwhile (by the tracking thread)


class AdbDevices:
    """Every phone the adb server at ``host:port`` lists (port 0: as adb picks it)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, timeout_s: float = 15.0,
                 client: adbutils.AdbClient | None = None) -> None:
        self.host = host
        self.port = port or adb_server_port()
        self.timeout_s = timeout_s
        self._client = client

    def describe(self) -> str:
        return f"adb server {self.host}:{self.port}"

    def client(self) -> adbutils.AdbClient:
        if self._client is None:
            import adbutils  # late: ANDROID_ADB_SERVER_PORT must be set before the first use

            self._client = adbutils.AdbClient(host=self.host, port=self.port,
                                              socket_timeout=self.timeout_s)
        return self._client

    async def present(self) -> dict[str, str]:
        rows = await self.rows()
        for serial in shared_serials(s for s, _ in rows):
            # adb answers "more than one device" to every command for this serial
            log.warning("adb_serial_listed_twice", serial=serial, fix=SHARED_SERIAL_FIX)
        return dict(rows)

    async def rows(self) -> list[tuple[str, str]]:
        """``adb devices`` as listed: (serial, state) a row, a serial twice where two
        phones share it."""
        client = self.client()
        try:
            with anyio.fail_after(self.timeout_s + 1):
                infos = await anyio.to_thread.run_sync(client.list, abandon_on_cancel=True)
        except Exception as exc:
            raise DeviceSourceError(
                f"cannot list the phones of the {self.describe()} ({type(exc).__name__}: {exc});"
                " is an adb server running there? `adb start-server`") from exc
        return [(str(d.serial), adb_state(str(d.state))) for d in infos]

    @asynccontextmanager
    async def changes(self) -> AsyncIterator[AsyncIterator[DeviceChange]]:
        tracker = _Tracker(self.host, self.port)
        send, recv = anyio.create_memory_object_stream[DeviceChange](256)

        async def track() -> None:
            def emit(change: DeviceChange) -> None:
                anyio.from_thread.run(send.send, change)

            with send:  # closed when tracking ends: the consumer's iteration ends with it
                try:
                    why = await anyio.to_thread.run_sync(
                        tracker.run, emit, abandon_on_cancel=True,
                        limiter=anyio.CapacityLimiter(1))
                    log.warning("adb_tracker_ended", why=why, adb=self.describe())
                finally:
                    tracker.stop()

        async with anyio.create_task_group() as tg:
            tg.start_soon(track)
            try:
                with recv:
                    yield recv
            finally:
                tracker.stop()
                tg.cancel_scope.cancel()

    async def ready(self, serial: str) -> bool:
        """Listed as ``device`` by adb and answering a shell command: really there."""
        try:
            if (await self.present()).get(serial) != "device":
                return False
            dev = self.client().device(serial)
            with anyio.fail_after(PROBE_TIMEOUT_S):
                out = await anyio.to_thread.run_sync(
                    lambda: dev.shell("echo ok", timeout=PROBE_TIMEOUT_S - 1),
                    abandon_on_cancel=True)
            return str(out).strip() == "ok"
        except Exception:  # any failure to answer means: not there
            return False


# ---- a fixed list ---------------------------------------------------------------------------


class FixedDevices:
    """These serials, present from the start and never changing."""

    def __init__(self, serials: Sequence[str]) -> None:
        if not serials:
            raise ValueError("FixedDevices needs at least one serial")
        self.serials = tuple(dict.fromkeys(serials))

    def describe(self) -> str:
        return f"fixed list {', '.join(self.serials)}"

    async def present(self) -> dict[str, str]:
        return dict.fromkeys(self.serials, "device")

    @asynccontextmanager
    async def changes(self) -> AsyncIterator[AsyncIterator[DeviceChange]]:
        send, recv = anyio.create_memory_object_stream[DeviceChange](0)
        with send, recv:  # nothing is ever sent: the iteration waits until the fleet stops
            yield recv

    async def ready(self, serial: str) -> bool:
        return serial in self.serials


# ---- phones on Wi-Fi --------------------------------------------------------------------------

ADB_TCP_PORT = 5555  # `adb connect HOST` without a port, and `adb tcpip`'s usual one
# host:port (IPv4, a name, or [IPv6]) as `adb connect` lists it, or an mDNS service name
# (`adb-SERIAL-xxxxxx._adb-tls-connect._tcp`) as wireless debugging lists it
_NETWORK_SERIAL = re.compile(r"^(?:\[[0-9a-fA-F:.]+\]|[\w.-]+):\d{1,5}$|\._adb-tls-connect\._tcp")


def is_network_serial(serial: str) -> bool:
    """Whether adb reaches this phone over the network (else: USB)."""
    return _NETWORK_SERIAL.search(serial) is not None


def connect_address(address: str) -> str:
    """``host[:port]`` as adb lists the phone once connected (``host:5555`` by default)."""
    address = address.strip()
    if not address:
        raise ValueError("an empty address to adb connect")
    if address.startswith("[") and "]:" in address or (
            address.count(":") == 1 and address.rsplit(":", 1)[1].isdigit()):
        return address
    return f"{address}:{ADB_TCP_PORT}"


class WifiConnector:
    """Keeps each address ``adb connect``ed: at start, and again whenever adb lists it as
    gone or offline, checking every ``check_s`` (or at once when ``wake`` is called) and
    retrying a failed connect after a backoff capped at ``max_backoff_s``, each try logged."""

    def __init__(self, client: Callable[[], adbutils.AdbClient], addresses: Sequence[str],
                 present: Callable[[], Awaitable[dict[str, str]]], *,
                 timeout_s: float = 10.0, check_s: float = 5.0,
                 max_backoff_s: float = 30.0) -> None:
        self.addresses = tuple(dict.fromkeys(connect_address(a) for a in addresses))
        self._client = client
        self._present = present
        self.timeout_s = timeout_s
        self.check_s = check_s
        self.max_backoff_s = max_backoff_s
        self.connects: dict[str, int] = dict.fromkeys(self.addresses, 0)  # successful ones
        self._wake = {a: anyio.Event() for a in self.addresses}

    def wake(self, serial: str) -> None:
        """The fleet saw ``serial`` drop: check it now rather than at the next tick."""
        if serial in self._wake:
            self._wake[serial].set()

    async def run(self) -> None:
        """One task per address, until cancelled."""
        async with anyio.create_task_group() as tg:
            for address in self.addresses:
                tg.start_soon(self._keep, address)

    async def _keep(self, address: str) -> None:
        backoff = Backoff(0.5, self.max_backoff_s)
        was_offline = False
        while True:
            try:
                state = (await self._present()).get(address)
            except DeviceSourceError:
                state = "unknown"  # no adb server now: try again later
            if state in (None, "offline") and (state is None or was_offline):
                if await self._connect(address, stale=state == "offline"):
                    backoff.reset()
                else:
                    await anyio.sleep(backoff.next_delay())
                    continue
            was_offline = state == "offline"
            self._wake[address] = event = anyio.Event()
            with anyio.move_on_after(self.check_s):
                await event.wait()

    async def _connect(self, address: str, *, stale: bool) -> bool:
        """``adb connect`` (after ``adb disconnect`` when adb holds a dead transport)."""
        client = self._client()

        def connect() -> str:
            if stale:
                client.disconnect(address)
            return str(client.connect(address, timeout=self.timeout_s))

        try:
            with anyio.fail_after(self.timeout_s + 2):
                answer = await anyio.to_thread.run_sync(connect, abandon_on_cancel=True)
        except Exception as exc:
            answer = f"{type(exc).__name__}: {exc}"
        ok = answer.startswith(("connected to", "already connected to"))
        if ok:
            self.connects[address] += 1
            log.info("adb_connected", address=address, answer=answer.strip(), stale=stale)
        else:
            log.warning("adb_connect_failed", address=address, answer=answer.strip()[:300])
        return ok
