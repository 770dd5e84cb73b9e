"""The scrcpy stream under chaos (devices/streamed.py, bench/stream_chaos.py): servers killed
and a cable pulled mid-run lose no step and double none, and each phone is back on the
stream within 30 s; an action the stream may not have delivered is settled by the screen;
a phone that refuses injected input goes on through adb in the same call."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from bench.stream_chaos import BACK_WITHIN_S, chaos_phone, run_chaos
from devices.adb import AdbDevice, DeviceError
from devices.scrcpy import ScrcpyActionBroken, ScrcpyError, ScrcpyStream, server_jar
from devices.streamed import StreamedDevice
from sim.adb.server import SimAdbServer
from sim.phone_api import DeviceInfo
from sim.stand_in import RecordingPhone
from tests.fixtures.adb import AdbServer

pytestmark = [pytest.mark.anyio, pytest.mark.needs_adb]
Make = Callable[..., tuple[RecordingPhone, StreamedDevice]]


@pytest.fixture
def streamed(adb_server: AdbServer) -> Iterator[Make]:
    try:
        jar = server_jar()
    except ScrcpyError as exc:
        pytest.skip(str(exc))
    servers: list[SimAdbServer] = []

    def make(profile: str = "sim", **state: object) -> tuple[RecordingPhone, StreamedDevice]:
        phone = chaos_phone(DeviceInfo.for_profile(f"chaos{len(servers)}", profile))
        for key, value in state.items():
            setattr(phone.device_state, key, value)
        sim = SimAdbServer(phone).start()
        servers.append(sim)
        return phone, StreamedDevice(AdbDevice(adb_server.connect(sim.port).serial,
                                               timeout_s=10.0), jar)

    yield make
    for sim in servers:
        adb_server.disconnect(sim.port)
        sim.stop()


async def test_killed_servers_and_a_pulled_cable_lose_and_double_nothing() -> None:
    report = await run_chaos(phones=4, steps=24, server_kills=2, usb_drops=1, drop_s=2.0)
    assert report["steps_sent"] == 4 * 24
    assert (report["lost"], report["doubled"], report["stray"]) == (0, 0, 0), report
    assert report["steps_done"] == report["steps_sent"]
    assert len(report["faults"]) == 3 and report["stream_losses"] >= 3
    for f in report["faults"]:
        assert f["back_after_s"] is not None and f["back_after_s"] <= BACK_WITHIN_S, f
    assert report["capture_stream_share"] > 0.8 and report["ok"]


async def test_a_tap_the_killed_server_never_read_is_done_once_through_adb(
        streamed: Make) -> None:
    phone, dev = streamed()
    try:
        await dev.screenshot()
        assert dev.path == "stream"
        # sent "whole" into a server that died before reading it: the bytes are gone
        await dev._act(lambda s, sc: None, lambda: dev.adb.tap(50, 60), "tap")
        phone.faults.scrcpy_kills += 1
        await dev.screenshot()  # the stream is found dead: the screen decides
        assert phone.calls_of("tap") == [(50, 60)]
        assert (dev.uncertain, dev.redone) == (1, 1)
    finally:
        await dev.close()


async def test_a_tap_that_landed_before_the_kill_is_not_redone(streamed: Make) -> None:
    phone, dev = streamed()
    try:
        await dev.screenshot()
        await dev.tap(50, 60)
        assert dev.path == "stream"
        phone.faults.scrcpy_kills += 1  # before any capture confirmed it
        await dev.screenshot()
        assert len(phone.calls_of("tap")) == 1
        assert (dev.uncertain, dev.redone, dev.losses) == (1, 0, 1)
    finally:
        await dev.close()


def _broken_after(landed: RecordingPhone | None
                  ) -> Callable[[ScrcpyStream, tuple[int, int]], None]:
    """A key that reached ``landed`` before the break, or a tap whose DOWN alone went out."""
    def act(stream: ScrcpyStream, screen: tuple[int, int]) -> None:
        if landed is not None:
            stream.key(66)
            deadline = time.monotonic() + 5
            while not landed.calls_of("key") and time.monotonic() < deadline:
                time.sleep(0.01)
        else:
            stream.send(stream.touch(0, 50, 60, screen))
        stream.close("the cable is out")
        raise ScrcpyActionBroken("the control socket broke mid-action", sent=1)
    return act


async def test_a_tap_broken_before_its_up_is_done_once_through_adb(streamed: Make) -> None:
    phone, dev = streamed()
    try:
        await dev.screenshot()
        await dev._act(_broken_after(None), lambda: dev.adb.tap(50, 60), "tap",
                       lands_at_end=True)
        assert phone.calls_of("tap") == [(50, 60)] and dev.path == "adb"
        assert dev.redone == 1
    finally:
        await dev.close()


async def test_a_broken_key_is_decided_by_the_screen(streamed: Make) -> None:
    phone, dev = streamed()
    try:
        await dev.screenshot()
        await dev._act(_broken_after(phone), lambda: dev.adb.key(66), "key")
        assert phone.calls_of("key") == [(66,)]  # it had landed: not sent again
        assert (dev.uncertain, dev.redone) == (1, 0)
    finally:
        await dev.close()


async def test_a_phone_that_refuses_injected_input_goes_on_through_adb(streamed: Make) -> None:
    phone, dev = streamed("xiaomi-hyperos", usb_security=False)
    try:
        await dev.screenshot()
        assert dev.path == "stream"
        with pytest.raises(DeviceError, match=r"USB debugging \(Security settings\)") as err:
            await dev.tap(50, 60)  # the same call: adb's answer, as on the adb path
        assert err.value.failure is not None
        assert err.value.failure.kind == "inject_events_permission"
        assert phone.calls_of("tap") == [] and dev.path == "adb"
        dev._retry_at = 0.0  # past the backoff: the stream is back, for the screen only
        await dev.screenshot()
        assert dev.path == "stream" and dev.starts == 2
        phone.device_state.usb_security = True  # switched on: adb's input works
        await dev.tap(50, 60)
        assert dev.path == "adb" and phone.calls_of("tap") == [(50, 60)]
    finally:
        await dev.close()


async def test_a_phone_that_allows_input_keeps_it_on_the_stream(streamed: Make) -> None:
    phone, dev = streamed("xiaomi-hyperos", usb_security=True)
    try:
        await dev.screenshot()
        await dev.tap(50, 60)
        assert dev.path == "stream" and dev.stream is not None and not dev.stream.dead
        assert phone.calls_of("tap") == [(50, 60)]
    finally:
        await dev.close()
