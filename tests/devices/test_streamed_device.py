"""The scrcpy transport (devices/scrcpy.py, devices/streamed.py) against the simulated
phone's scrcpy 3.3.4 server, through the real adb server: frames that match ``screencap``,
taps and keys that land, Unicode typed with no ADB Keyboard and the clipboard put back,
the fresh-frame rule, and adb taking over at once when the stream dies."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import numpy as np
import pytest

from devices.adb import AdbDevice, decode_png
from devices.scrcpy import ScrcpyError, server_jar
from devices.streamed import StreamedDevice
from sim.adb.server import SimAdbServer
from sim.phone_api import DeviceInfo
from tests.fixtures.adb import AdbServer, import_sim_phone

pytestmark = [pytest.mark.anyio, pytest.mark.needs_adb]
SETTLE_S = 0.3  # agent.settle_s's default


@pytest.fixture
def phone(adb_server: AdbServer) -> Iterator[tuple[Any, AdbDevice]]:
    try:
        server_jar()
    except ScrcpyError as exc:
        pytest.skip(str(exc))
    cls = import_sim_phone()
    sim_phone = cls(DeviceInfo(serial="stream-0"), seed=0)
    sim = SimAdbServer(sim_phone).start()
    try:
        device = adb_server.connect(sim.port)
        yield sim_phone, AdbDevice(device.serial, timeout_s=10.0)
    finally:
        adb_server.disconnect(sim.port)
        sim.stop()


def _centre(phone: Any, **query: str) -> tuple[int, int]:
    found = phone.find(**query)
    assert found, f"nothing on screen matches {query}: {phone.current_screen()}"
    x, y = found[-1].center
    return int(x), int(y)


def _close_to_screencap(shot: np.ndarray, adb: AdbDevice) -> float:
    png = adb.device.shell("screencap -p", encoding=None)
    ref = decode_png(png)
    assert shot.shape == ref.shape
    return float(np.abs(shot.astype(np.int16) - ref.astype(np.int16)).mean())


async def test_capture_and_input_go_through_the_stream(phone: tuple[Any, AdbDevice]) -> None:
    sim_phone, adb = phone
    sim_phone.open("com.mobagent.notes")
    dev = StreamedDevice(adb, server_jar())
    try:
        shot = await dev.screenshot()
        assert dev.path == "stream" and shot.path == "stream" and dev.starts == 1
        assert _close_to_screencap(shot.rgb, adb) < 4  # H.264 at 8 Mbps: a few levels off
        await dev.tap(*_centre(sim_phone, kind="fab"))
        assert dev.path == "stream"
        await anyio.sleep(SETTLE_S)  # as the agent waits after an action
        after = await dev.screenshot()  # never the frame from before the tap
        assert sim_phone.current_screen() == "com.mobagent.notes/edit"
        moved = np.abs(after.rgb.astype(np.int16) - shot.rgb.astype(np.int16)).mean()
        assert moved > 4, moved  # the page changed on the frame
        await anyio.sleep(0.5)  # the page's animation is over
        assert _close_to_screencap((await dev.screenshot()).rgb, adb) < 4
        await dev.tap(*_centre(sim_phone, id="title"))
        await dev.screenshot()
        assert sim_phone.focused_field() == "title"
        text = "héllo wörld 你好"
        await dev.type_text(text)
        await dev.screenshot()
        assert sim_phone.state("com.mobagent.notes").draft_title == text
        assert dev.stream is not None and dev.stream.clipboard in ("", None)  # put back
        await dev.key(4)  # BACK
        assert dev.path == "stream"
        assert not any(c[0] == "input" for c in getattr(sim_phone, "calls", []))
    finally:
        await dev.close()


async def test_an_unchanged_screen_does_not_hang_the_capture(
        phone: tuple[Any, AdbDevice]) -> None:
    sim_phone, adb = phone
    dev = StreamedDevice(adb, server_jar())
    try:
        await dev.screenshot()
        await dev.tap(5, 5)  # nothing there: no frame comes
        import time

        t0 = time.monotonic()
        await dev.screenshot()
        assert time.monotonic() - t0 < 1.0 and dev.path == "stream"
    finally:
        await dev.close()


async def test_a_look_with_no_action_since_takes_the_newest_frame_and_asks_for_none(
        phone: tuple[Any, AdbDevice]) -> None:
    sim_phone, adb = phone
    dev = StreamedDevice(adb, server_jar())
    try:
        await dev.screenshot()
        assert dev.stream is not None
        sent: list[Any] = []
        send = dev.stream.send
        dev.stream.send = lambda *m, **kw: (sent.extend(m), send(*m, **kw))[1]  # type: ignore[method-assign]
        await dev.tap(5, 5)  # nothing there: after an action the fresh-frame rule asks
        await dev.screenshot()
        asked = [type(m).__name__ for m in sent]
        assert asked[-1] == "ResetVideo"
        for _ in range(3):  # a watcher's frames between episodes
            shot = await dev.screenshot()
            assert dev.path == "stream" and _close_to_screencap(shot.rgb, adb) < 4
        # no key frame asked for again: the stream already shows the screen
        assert [type(m).__name__ for m in sent] == asked
    finally:
        await dev.close()


async def test_a_killed_stream_falls_back_to_adb_in_the_same_call_and_comes_back(
        phone: tuple[Any, AdbDevice]) -> None:
    sim_phone, adb = phone
    sim_phone.open("com.mobagent.notes")
    dev = StreamedDevice(adb, server_jar())
    try:
        await dev.screenshot()
        assert dev.stream is not None
        dev.stream.close("killed by the test")  # as a server killed on the phone
        before = sim_phone.current_screen()
        await dev.tap(*_centre(sim_phone, kind="fab"))  # the same tap, through adb, once
        assert dev.path == "adb" and dev.losses == 1
        assert sim_phone.current_screen() != before  # adb's input returns once applied
        shot = await dev.screenshot()
        assert shot.path in ("raw", "png")
        dev._retry_at = 0.0  # the backoff has passed
        shot = await dev.screenshot()
        assert shot.path == "stream" and dev.starts == 2
    finally:
        await dev.close()


async def test_the_streams_decoding_is_on_the_cpu_ledger_as_decode(
        phone: tuple[Any, AdbDevice]) -> None:
    from actors.capture import CaptureEngine
    from runtime.cpu_ledger import CpuLedger

    sim_phone, adb = phone
    sim_phone.open("com.mobagent.notes")
    dev = StreamedDevice(adb, server_jar())
    ledger = CpuLedger()
    engine = CaptureEngine(dev, ledger=ledger)
    try:
        await engine.capture()
        await dev.tap(*_centre(sim_phone, kind="fab"))  # a page change: an animation decoded
        await anyio.sleep(SETTLE_S)
        await engine.capture()
        decoded = ledger.stages(dev.serial)["decode"]
        assert dev.stream is not None and dev.stream.frames_decoded > 2
        # all that was decoded up to the last look (frames may still come in after it)
        assert 0 < decoded <= dev.decode_cpu_s
    finally:
        await dev.close()
