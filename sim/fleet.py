"""N simulated phones in one process, each on its own loopback port, `adb connect`ed.

The adb server is the one ANDROID_ADB_SERVER_PORT names (5037 by default); it is started
when none answers. `SimFleet.phone(serial)` hands out the phone objects themselves: that is
the test API, for tests and benchmark scoring only; agents reach phones through adb.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

from devices.adb import adb_server_port as _adb_server_port
from sim.adb.server import SimAdbServer
from sim.phone_api import DeviceInfo, DeviceState, Faults, LatencyProfile, Phone
from sim.profiles import DeviceProfile, profile_named

if TYPE_CHECKING:
    import adbutils

log = logging.getLogger(__name__)

RESERVED_PORTS = range(5554, 5586)  # the adb server probes these as emulators
PhoneFactory = Callable[[DeviceInfo, int], Phone]


class FleetError(RuntimeError):
    """The fleet could not start: no adb, no server, or a phone that never came online."""


def make_sim_phone(info: DeviceInfo, seed: int) -> Phone:
    """The real rendered phone from sim/phone (imported here, so sim.adb works without it)."""
    try:
        from sim.phone import SimPhone
    except ImportError as e:
        raise FleetError(f"the simulated phone package is not available: {e}") from e
    phone: Phone = SimPhone(info, seed=seed)
    return phone


def adb_server_port() -> int:
    try:
        return _adb_server_port()
    except ValueError as exc:
        raise FleetError(str(exc)) from None


def find_adb() -> str | None:
    """adbutils' choice (ADBUTILS_ADB_PATH, then PATH, then its bundled adb)."""
    try:
        from adbutils import adb_path

        return str(adb_path())
    except Exception:
        return shutil.which("adb")


def stop_adb_server(port: int) -> None:
    """Stop the adb server a benchmark started on ``port`` (nothing when adb is missing)."""
    adb = find_adb()
    if adb:
        subprocess.run([adb, "-P", str(port), "kill-server"], capture_output=True, check=False)


def _server_answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def ensure_adb_server(port: int, timeout: float = 30.0) -> None:
    """Start an adb server on `port` unless one answers there already."""
    if _server_answers(port):
        return
    adb = find_adb()
    if adb is None:
        raise FleetError("no adb binary found: install Debian's `adb` or the adbutils wheel")
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(port)}
    env.setdefault("ADB_EMU", "0")  # do not probe 5555-5585 for emulators
    try:
        done = subprocess.run([adb, "-P", str(port), "start-server"], env=env, timeout=timeout,
                              capture_output=True, text=True, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise FleetError(f"adb start-server on port {port} failed: {e}") from e
    if done.returncode != 0 or not _server_answers(port):
        raise FleetError(f"adb start-server on port {port} failed: {done.stderr.strip()}")


@dataclass
class FleetPhone:
    phone: Phone
    server: SimAdbServer

    @property
    def serial(self) -> str:
        """The serial adb lists: 127.0.0.1:PORT."""
        return self.server.serial

    @property
    def port(self) -> int:
        return self.server.port


class SimFleet:
    """`with SimFleet(8) as fleet: fleet.serials` — phones up and connected to adb.

    ``profile`` is the latency profile; ``device_profile`` which real phone each answers
    as (one name, or one per phone, cycled: a mixed fleet); ``state`` likewise (one for
    every phone, or one per phone, cycled); ``faults`` are copied to every phone (each may be
    changed alone later through ``fleet.phone``). ``step_clock``: spinners and toasts last
    screen reads, not seconds (sim/phone/clock.py), so a seed's run is repeatable."""

    def __init__(self, count: int, *, seed: int = 0, profile: str | LatencyProfile = "instant",
                 adb_port: int | None = None, base_port: int | None = None,
                 phone_factory: PhoneFactory | None = None,
                 connect_timeout: float = 15.0,
                 device_profile: str | DeviceProfile | Sequence[str | DeviceProfile] = "sim",
                 state: DeviceState | Sequence[DeviceState] | None = None,
                 faults: Faults | None = None, step_clock: bool = False) -> None:
        if count < 1:
            raise ValueError(f"count must be at least 1, not {count}")
        if seed < 0:
            raise ValueError(f"seed must be >= 0, not {seed}")
        # a name (ValueError if unknown) or a tuned profile
        self.latency = LatencyProfile.named(profile) if isinstance(profile, str) else profile
        wanted = [device_profile] if isinstance(device_profile, (str, DeviceProfile)) \
            else list(device_profile)
        if not wanted:
            raise ValueError("device_profile names no profile")
        self.device_profiles = [profile_named(p) if isinstance(p, str) else p for p in wanted]
        self.device_states = [] if state is None else [state] if isinstance(state, DeviceState) \
            else list(state)
        self.faults = faults
        if base_port is not None:
            last = base_port + count - 1
            if base_port < 1024 or last > 65535:
                raise ValueError(f"ports {base_port}-{last} are out of range (1024-65535)")
            if base_port <= RESERVED_PORTS[-1] and last >= RESERVED_PORTS[0]:
                raise ValueError(f"ports {base_port}-{last} overlap 5554-5585, which adb "
                                 "treats as emulators")
        self.count = count
        self.seed = seed
        self.adb_port = adb_port if adb_port is not None else adb_server_port()
        self.base_port = base_port
        self.connect_timeout = connect_timeout
        self._factory = phone_factory or make_sim_phone
        self.step_clock = step_clock
        self._token = secrets.token_hex(4).upper()  # this fleet's part of its serials
        self.members: list[FleetPhone] = []

    # ---- lifecycle ---------------------------------------------------------------------

    def start(self) -> SimFleet:
        ensure_adb_server(self.adb_port)
        try:
            for i in range(self.count):
                self.members.append(self._start_one(i))
            for member in self.members:
                self._connect(member)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Disconnect every phone from adb, then stop its server. Safe to call twice."""
        client = self._client()
        for member in self.members:
            with contextlib.suppress(Exception):
                client.disconnect(member.serial)
            member.server.stop()
        self.members.clear()

    def __enter__(self) -> SimFleet:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def restart(self, serial: str, *, connect: bool = True) -> None:
        """Stop one phone's ADB server and start it again on the same port (same phone
        state); ``connect=False`` leaves the `adb connect` to someone else (the fleet's)."""
        self.drop(serial)
        self.resume(serial, connect=connect)

    def drop(self, serial: str) -> None:
        """Stop one phone's ADB server: a phone on Wi-Fi gone (``resume`` brings it back)."""
        self.member(serial).server.stop()

    def resume(self, serial: str, *, connect: bool = True) -> None:
        """Start a dropped phone's ADB server again on its port."""
        member = self.member(serial)
        member.server = SimAdbServer(member.phone, port=member.port).start()
        if connect:
            self._connect(member)

    # ---- the test API ------------------------------------------------------------------

    @property
    def serials(self) -> list[str]:
        return [m.serial for m in self.members]

    def member(self, serial: str) -> FleetPhone:
        for m in self.members:
            if m.serial == serial:
                return m
        raise KeyError(f"no simulated phone {serial!r} in this fleet")

    def phone(self, serial: str) -> Phone:
        """The phone object behind `serial`: tests and benchmark scoring only."""
        return self.member(serial).phone

    def device(self, serial: str) -> adbutils.AdbDevice:
        return self._client().device(serial)

    def __iter__(self) -> Iterator[FleetPhone]:
        return iter(list(self.members))

    def __len__(self) -> int:
        return len(self.members)

    # ---- internals -----------------------------------------------------------------------

    def _start_one(self, index: int) -> FleetPhone:
        device_profile = self.device_profiles[index % len(self.device_profiles)]
        info = DeviceInfo.for_profile(f"sim{index:02d}", device_profile)
        if not info.serialno:  # unique across fleets and processes, as real phones' are
            info.serialno = f"SIM{self._token}{index:02d}"
        phone = self._factory(info, self.seed)
        # copies: each phone may be tuned alone (a capture cost's hub stays shared)
        phone.latency = dataclasses.replace(self.latency)
        use_step_clock = getattr(phone, "use_step_clock", None)  # SimPhone's, not stand-ins'
        if self.step_clock and use_step_clock is not None:
            use_step_clock()
        if self.device_states:
            phone.device_state = dataclasses.replace(
                self.device_states[index % len(self.device_states)])
        if self.faults is not None:
            phone.faults = dataclasses.replace(self.faults)
        port = self.base_port + index if self.base_port is not None else 0
        server = SimAdbServer(phone, port=port).start()
        while self.base_port is None and server.port in RESERVED_PORTS:  # vanishingly rare
            server.stop()
            server = SimAdbServer(phone).start()
        return FleetPhone(phone, server)

    def _client(self) -> adbutils.AdbClient:
        import adbutils

        return adbutils.AdbClient(host="127.0.0.1", port=self.adb_port, socket_timeout=20)

    def state(self, serial: str) -> str | None:
        """What `adb devices` says about a serial: device, offline, ... or None if unlisted."""
        for d in self._client().list():
            if d.serial == serial:
                return str(d.state)
        return None

    def _connect(self, member: FleetPhone) -> None:
        client = self._client()
        deadline = time.monotonic() + self.connect_timeout
        answer = ""
        while True:
            with contextlib.suppress(Exception):
                answer = client.connect(member.serial, timeout=5)
            state = self.state(member.serial)
            if state == ("unauthorized" if member.phone.faults.unauthorized else "device"):
                return
            if time.monotonic() > deadline:
                raise FleetError(f"{member.serial} did not come online through the adb server "
                                 f"on port {self.adb_port}: {answer!r}, state {state!r}")
            time.sleep(0.1)
