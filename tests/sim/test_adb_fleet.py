"""sim.fleet: N phones in one process, each on its own port, connected to the real adb server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from devices import adb_output
from sim.fleet import RESERVED_PORTS, SimFleet
from sim.phone_api import DeviceState, Faults
from sim.profiles import PROFILES
from sim.stand_in import RecordingPhone, recording_phone
from tests.fixtures.adb import AdbServer, import_sim_phone


@pytest.fixture
def fleet3(adb_server: AdbServer) -> Iterator[SimFleet]:
    with SimFleet(3, adb_port=adb_server.port, phone_factory=recording_phone) as fleet:
        yield fleet


def _rec(fleet: SimFleet, serial: str) -> RecordingPhone:
    phone = fleet.phone(serial)
    assert isinstance(phone, RecordingPhone)
    return phone


def test_fleet_phones_are_listed_and_reachable(adb_server: AdbServer, fleet3: SimFleet) -> None:
    listed = {d.serial: d.state for d in adb_server.client().list()}
    assert len(fleet3) == 3
    ports = [m.port for m in fleet3]
    assert len(set(ports)) == 3 and not set(ports) & set(RESERVED_PORTS)
    for serial in fleet3.serials:
        assert listed[serial] == "device"
        assert serial == f"127.0.0.1:{fleet3.member(serial).port}"
        d = fleet3.device(serial)
        d.click(7, 9)
        assert _rec(fleet3, serial).calls_of("tap") == [(7, 9)]
        assert d.shell("getprop ro.serialno") == fleet3.phone(serial).info.serialno
    # serials and boot ids: each phone its own, in this fleet and in the next one
    with SimFleet(1, adb_port=adb_server.port, phone_factory=recording_phone) as other:
        phones = [fleet3.phone(s) for s in fleet3.serials] + [other.phone(other.serials[0])]
        serialnos = [fleet3.device(s).shell("getprop ro.serialno") for s in fleet3.serials]
        serialnos.append(other.device(other.serials[0]).shell("getprop ro.serialno"))
        assert len(set(serialnos)) == 4 and all(s.startswith("SIM") for s in serialnos)
        boot_ids = {fleet3.device(s).shell("cat /proc/sys/kernel/random/boot_id")
                    for s in fleet3.serials}
        assert len(boot_ids) == 3 and boot_ids == {p.info.boot_id for p in phones[:3]}
        assert phones[3].info.boot_id not in boot_ids
    with pytest.raises(KeyError, match="no simulated phone"):
        fleet3.phone("127.0.0.1:1")


def test_fleet_stop_disconnects(adb_server: AdbServer) -> None:
    fleet = SimFleet(2, adb_port=adb_server.port, phone_factory=recording_phone).start()
    serials = fleet.serials
    fleet.stop()
    fleet.stop()  # twice is harmless
    listed = {d.serial for d in adb_server.client().list()}
    assert not listed & set(serials)
    assert len(fleet) == 0


def test_fleet_concurrent_screenshots_and_taps(fleet3: SimFleet) -> None:
    def work(serial: str) -> tuple[int, ...]:
        d = fleet3.device(serial)
        for k in range(4):
            d.click(k, len(serial))
        return tuple(d.screenshot().convert("RGB").getpixel((2, 2)))

    with ThreadPoolExecutor(6) as pool:
        colours = dict(zip(fleet3.serials, pool.map(work, fleet3.serials * 2), strict=False))
    for serial in fleet3.serials:
        phone = _rec(fleet3, serial)
        assert colours[serial] == phone.colour
        assert sorted(phone.calls_of("tap")) == sorted([(k, len(serial)) for k in range(4)] * 2)
    assert len({_rec(fleet3, s).colour for s in fleet3.serials}) == 3


def test_fleet_restart_brings_a_dropped_phone_back(fleet3: SimFleet) -> None:
    serial = fleet3.serials[1]
    phone = fleet3.phone(serial)
    phone.faults.drop_connections = True
    deadline = time.monotonic() + 15
    while fleet3.state(serial) == "device" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fleet3.state(serial) in ("offline", None)
    assert fleet3.device(fleet3.serials[0]).shell("echo other") == "other"  # no cross-talk
    phone.faults.drop_connections = False
    fleet3.restart(serial)
    assert fleet3.state(serial) == "device"
    assert fleet3.device(serial).shell("echo back") == "back"
    assert fleet3.phone(serial) is phone  # same phone, same state


def test_realistic_profile_is_applied(adb_server: AdbServer) -> None:
    with SimFleet(1, profile="realistic", adb_port=adb_server.port,
                  phone_factory=recording_phone) as fleet:
        serial = fleet.serials[0]
        phone = fleet.phone(serial)
        assert (phone.latency.name, phone.latency.screencap_s, phone.latency.input_s) == (
            "realistic", 0.25, 0.05)
        assert phone.latency.cost is not None  # a real phone's own costs (sim/device_cost.py)
        d = fleet.device(serial)
        t = time.monotonic()
        d.shell("input tap 1 1")
        # a lower bound: `input`'s process start is really charged
        assert time.monotonic() - t >= phone.latency.cost.input_s
        phone.latency.cost = None  # per-phone tuning: the flat delays instead
        phone.latency.screencap_s = 0.4
        t = time.monotonic()
        d.screenshot()
        assert time.monotonic() - t >= 0.4


@pytest.mark.parametrize("kwargs,match", [
    ({"count": 0}, "count"),
    ({"count": 2, "profile": "warp"}, "unknown latency profile"),
    ({"count": 2, "seed": -1}, "seed"),
    ({"count": 4, "base_port": 5553}, "5554-5585"),
    ({"count": 2, "base_port": 65535}, "out of range"),
])
def test_fleet_rejects_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SimFleet(**kwargs, phone_factory=recording_phone)  # type: ignore[arg-type]


def test_fleet_base_port(adb_server: AdbServer) -> None:
    from tests.fixtures.adb import _free_port

    base = _free_port()
    with SimFleet(1, base_port=base, adb_port=adb_server.port,
                  phone_factory=recording_phone) as fleet:
        assert fleet.serials == [f"127.0.0.1:{base}"]


def test_stop_does_not_wait_for_a_running_command(adb_server: AdbServer) -> None:
    fleet = SimFleet(1, adb_port=adb_server.port, phone_factory=recording_phone).start()
    d = fleet.device(fleet.serials[0])
    outcome: list[object] = []
    worker = threading.Thread(target=lambda: outcome.append(
        _shell_or_error(lambda: d.shell("sleep 30", timeout=60))))
    worker.start()
    time.sleep(0.5)  # the command is running on the phone
    t = time.monotonic()
    fleet.stop()
    assert time.monotonic() - t < 10, "stopping waited for `sleep 30`"
    worker.join(20)
    assert not worker.is_alive() and outcome  # the client saw the end, not a hang


def _shell_or_error(call: Callable[[], object]) -> object:
    try:
        return call()
    except Exception as e:  # the connection went away: that is an answer too
        return e


def test_sim_fleet_fixture(sim_fleet: Callable[..., SimFleet]) -> None:
    fleet = sim_fleet(2, stand_in=True)
    assert [fleet.state(s) for s in fleet.serials] == ["device", "device"]
    assert fleet.device(fleet.serials[1]).shell("echo hi") == "hi"


def test_fleet_of_device_profiles_on_real_phones(adb_server: AdbServer) -> None:
    """Real rendered phones answering as each profile: the launcher at home, a locked
    phone's keyguard, and a phone of the fleet changed alone through the test API."""
    import_sim_phone()
    names = [n for n, p in PROFILES.items() if p.real]
    with SimFleet(len(names), adb_port=adb_server.port, device_profile=names,
                  state=DeviceState(locked=True)) as fleet:
        for serial, name in zip(fleet.serials, names, strict=True):
            p = PROFILES[name]
            d = fleet.device(serial)
            assert d.shell("getprop ro.product.model") == p.model
            assert adb_output.keyguard_showing(d.shell("dumpsys window policy")) is True
            d.shell("wm dismiss-keyguard")
            assert adb_output.foreground_package(d.shell("dumpsys window")) == p.launcher_package
            shot = d.screenshot()
            assert shot.size == (p.width, p.height)
        first = fleet.phone(fleet.serials[0])
        first.device_state.awake = False
        assert adb_output.wakefulness(fleet.device(fleet.serials[0]).shell("dumpsys power")) == "asleep"
        assert adb_output.wakefulness(fleet.device(fleet.serials[1]).shell("dumpsys power")) == "awake"



def test_fleet_hands_out_one_state_per_phone_in_turn(adb_server: AdbServer) -> None:
    states = [DeviceState(awake=False), DeviceState(locked=True)]
    with SimFleet(3, adb_port=adb_server.port, state=states) as fleet:
        got = [fleet.phone(s).device_state for s in fleet.serials]
        assert [st.awake for st in got] == [False, True, False]
        assert [st.locked for st in got] == [False, True, False]
        assert got[0] is not got[2]  # copies: one phone woken leaves the other asleep
        assert adb_output.wakefulness(fleet.device(fleet.serials[2]).shell("dumpsys power")) \
            == "asleep"


def test_fleet_of_unauthorized_phones_then_allowed(adb_server: AdbServer) -> None:
    with SimFleet(1, adb_port=adb_server.port, phone_factory=recording_phone,
                  faults=Faults(unauthorized=True)) as fleet:
        serial = fleet.serials[0]
        assert fleet.state(serial) == "unauthorized"
        fleet.phone(serial).faults.unauthorized = False  # the owner taps "Allow"
        fleet.restart(serial)
        assert fleet.state(serial) == "device"
