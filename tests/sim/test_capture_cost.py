"""sim/capture.py: a real phone's screenshot cost (encode per pixel, one USB hub shared)."""

from __future__ import annotations

import threading
import time

import pytest

from sim.adb.commands import DeviceShell
from sim.adb.fs import VirtualFS
from sim.capture import CaptureCost, UsbHub
from sim.phone_api import DeviceInfo
from sim.stand_in import RecordingPhone


def test_encode_time_grows_with_pixels_and_png_costs_more_than_raw() -> None:
    cost = CaptureCost.usb2()
    small, big = 720 * 1600, 1440 * 3200
    assert cost.encode_s(big, png=True) == pytest.approx(4 * cost.encode_s(small, png=True))
    assert cost.encode_s(big, png=False) < cost.encode_s(big, png=True)
    assert CaptureCost().encode_s(big, png=True) == 0  # the default: no cost


def test_phones_on_one_hub_share_its_bandwidth() -> None:
    hub = UsbHub(bytes_per_s=1_000_000)
    # booked at the same instant: the second transfer ends after the first
    assert hub.reserve(100_000, now=10.0) == pytest.approx(10.1)
    assert hub.reserve(100_000, now=10.0) == pytest.approx(10.2)
    assert UsbHub(1_000_000).reserve(100_000, now=10.0) == pytest.approx(10.1)  # a hub alone


def test_two_phones_sending_at_once_take_twice_as_long() -> None:
    hub = UsbHub(bytes_per_s=2_000_000)
    waited: list[float] = []

    def send() -> None:
        waited.append(hub.transfer(100_000))  # 50 ms alone

    threads = [threading.Thread(target=send) for _ in range(2)]
    t = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert time.monotonic() - t >= 0.095
    assert max(waited) >= 0.095 and min(waited) >= 0.045


def test_screencap_charges_the_phone_its_cost() -> None:
    phone = RecordingPhone(DeviceInfo(serial="c", width=400, height=500))
    phone.latency.capture = CaptureCost(png_s_per_pixel=200e-9, raw_s_per_pixel=0.0,
                                        hub=UsbHub(bytes_per_s=10_000_000))
    shell = DeviceShell(phone, VirtualFS())
    t = time.monotonic()
    raw = shell.run("screencap").stdout
    raw_s = time.monotonic() - t
    assert raw_s >= len(raw) / 10_000_000 * 0.9  # 800 kB over 10 MB/s: 80 ms
    t = time.monotonic()
    assert shell.run("screencap -p").stdout.startswith(b"\x89PNG")
    assert time.monotonic() - t >= 400 * 500 * 200e-9  # 40 ms to encode 200k pixels
