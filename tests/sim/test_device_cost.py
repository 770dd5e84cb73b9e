"""sim/device_cost.py: a real phone's own cost (input's process start, a running server's
injection, screencap's encode, one USB hub shared), charged where the simulated phone
answers adb and scrcpy."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sim.adb.commands import DeviceShell
from sim.adb.fs import VirtualFS
from sim.device_cost import INPUT_JVM_S, DeviceCost, UsbHub
from sim.phone_api import DeviceInfo, LatencyProfile
from sim.stand_in import RecordingPhone


def test_encode_time_grows_with_pixels_and_png_costs_more_than_raw() -> None:
    cost = DeviceCost.usb2()
    small, big = 720 * 1600, 1440 * 3200
    assert cost.encode_s(big, png=True) == pytest.approx(4 * cost.encode_s(small, png=True))
    assert cost.encode_s(big, png=False) < cost.encode_s(big, png=True)
    assert DeviceCost().encode_s(big, png=True) == 0  # the default: no cost


def test_the_realistic_profile_has_the_model_and_instant_has_none() -> None:
    realistic = LatencyProfile.named("realistic")
    assert realistic.cost is not None and realistic.cost.input_s == INPUT_JVM_S
    assert realistic.cost.control_s < INPUT_JVM_S / 10  # a running server: milliseconds
    assert LatencyProfile.named("instant").cost is None


def test_a_png_crosses_the_hub_at_a_real_screens_size() -> None:
    cost = DeviceCost.usb2()
    # the simulated phone's flat frame is ~110 kB; a real 1080x2400 screen's PNG is MBs
    assert cost.wire_bytes(1080 * 2400, 110_000, png=True) >= 2_000_000
    assert cost.wire_bytes(1080 * 2400, 10_368_000, png=False) == 10_368_000


def test_phones_on_one_hub_share_its_bandwidth() -> None:
    hub = UsbHub(bytes_per_s=1_000_000)
    # booked at the same instant: the second transfer ends after the first
    assert hub.reserve(100_000, now=10.0) == pytest.approx(10.1)
    assert hub.reserve(100_000, now=10.0) == pytest.approx(10.2)
    assert UsbHub(1_000_000).reserve(100_000, now=10.0) == pytest.approx(10.1)  # a hub alone


def test_sixteen_phones_pngs_queue_on_one_hub() -> None:
    """Each PNG alone takes 20 ms on the hub; sixteen at once end one after another."""
    hub = UsbHub(bytes_per_s=10_000_000)
    shells = []
    for i in range(16):
        phone = RecordingPhone(DeviceInfo(serial=f"q{i}", width=400, height=500))
        phone.latency.cost = DeviceCost(png_wire_bytes_per_pixel=1.0, hub=hub)
        shells.append(DeviceShell(phone, VirtualFS()))
    took: list[float] = []

    def capture(shell: DeviceShell) -> None:
        t = time.monotonic()
        assert shell.run("screencap -p").stdout.startswith(b"\x89PNG")
        took.append(time.monotonic() - t)

    alone = time.monotonic()
    capture(shells[0])
    alone = time.monotonic() - alone
    took.clear()
    threads = [threading.Thread(target=capture, args=(s,)) for s in shells]
    t = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert alone >= 0.018
    assert time.monotonic() - t >= 16 * 0.02 * 0.95  # one after another on the hub
    assert max(took) >= 5 * alone  # the last ones waited for those before them


def test_screencap_charges_the_phone_its_encode_and_transfer() -> None:
    phone = RecordingPhone(DeviceInfo(serial="c", width=400, height=500))
    phone.latency.cost = DeviceCost(png_s_per_pixel=200e-9, hub=UsbHub(bytes_per_s=10_000_000))
    shell = DeviceShell(phone, VirtualFS())
    t = time.monotonic()
    raw = shell.run("screencap").stdout
    assert time.monotonic() - t >= len(raw) / 10_000_000 * 0.9  # 800 kB over 10 MB/s: 80 ms
    t = time.monotonic()
    assert shell.run("screencap -p").stdout.startswith(b"\x89PNG")
    assert time.monotonic() - t >= 400 * 500 * 200e-9  # 40 ms to encode 200k pixels


def test_input_through_adb_costs_the_process_start() -> None:
    phone = RecordingPhone(DeviceInfo(serial="i", width=400, height=500))
    phone.latency.cost = DeviceCost.usb2()
    phone.latency.input_s = 0.0  # only the model charges
    shell = DeviceShell(phone, VirtualFS())
    t = time.monotonic()
    assert shell.run("input tap 10 10").status == 0
    assert time.monotonic() - t >= INPUT_JVM_S
    assert ("tap", 10, 10) in phone.calls


# ---- through the real adb server: adb's `input` against scrcpy's control socket -----------


@pytest.fixture
def costly_phone(adb_server: Any) -> Iterator[tuple[Any, Any]]:
    from devices.scrcpy import ScrcpyError, server_jar
    from sim.adb.server import SimAdbServer
    from tests.fixtures.adb import import_sim_phone

    try:
        server_jar()
    except ScrcpyError as exc:
        pytest.skip(str(exc))
    phone = import_sim_phone()(DeviceInfo(serial="cost-0", width=540, height=1200), seed=0)
    phone.latency = LatencyProfile(cost=DeviceCost.usb2())
    sim = SimAdbServer(phone).start()
    try:
        yield phone, adb_server.connect(sim.port)
    finally:
        adb_server.disconnect(sim.port)
        sim.stop()


def _landed(phone: Any, before: str, timeout_s: float = 5.0) -> float:
    t = time.monotonic()
    while phone.current_screen() == before:
        assert time.monotonic() - t < timeout_s, "the tap never landed"
        time.sleep(0.001)
    return time.monotonic()


@pytest.mark.needs_adb
def test_a_tap_through_adb_costs_input_s_and_through_scrcpy_milliseconds(
        costly_phone: tuple[Any, Any]) -> None:
    from devices.scrcpy import ScrcpyStream, server_jar

    phone, device = costly_phone
    x, y = (int(v) for v in phone.find("Notes")[-1].center)
    t = time.monotonic()
    device.shell(f"input tap {x} {y}")
    assert time.monotonic() - t >= INPUT_JVM_S
    assert phone.current_screen() != "launcher"
    phone.key(3)  # HOME
    stream = ScrcpyStream(device, server_jar(), timeout_s=10.0)
    stream.start()
    try:
        stream.frames.first_after(0.0, 10.0)  # the first frame: the server runs
        t = time.monotonic()
        stream.tap(x, y, (phone.info.width, phone.info.height))
        landed = _landed(phone, "launcher") - t
        assert landed < INPUT_JVM_S / 3, landed  # the server is running: no process start
    finally:
        stream.close()
