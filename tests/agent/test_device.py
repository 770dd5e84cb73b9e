"""devices/adb.py against simulated phones through the real adb server and adbutils."""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np
import pytest

from devices.adb import (
    AdbDevice,
    DeviceError,
    input_text_commands,
    parse_raw_screencap,
)
from devices.adb_output import foreground_package
from tests.fixtures.adb import ConnectedPhone

pytestmark = [pytest.mark.anyio, pytest.mark.needs_adb]

# Each of these reaching the phone's field literally shows that no shell metacharacter,
# quote, `%s` escape or option-looking text was interpreted on the way.
HOSTILE = [
    "hello world",
    "a;rm -rf /",
    "$(reboot)",
    "`id`",
    "it's",
    '"double" and \'single\'',
    "back\\slash \\n",
    "100%s sure %s%s",
    "50% off %",
    "pipe | amp & semi ; lt < gt >",
    "$HOME ${PATH} $?",
    "* ? [a-z] ~ #comment",
    "  leading and trailing  ",
    "-e --help",
    "%",
    "s%",
    "%%ss",
]
UNICODE = ["café", "日本語のテキスト", "emoji 🎉 ok", "Привет, мир", "tab\there", "line1\nline2"]


def _typed(cp: ConnectedPhone) -> str:
    return "".join(str(c[0]) for c in cp.phone.calls_of("type_text"))


def test_input_text_commands_never_leave_a_percent_s() -> None:
    for text in HOSTILE:
        for cmd in input_text_commands(text):
            arg = cmd[len("input text "):]
            assert arg.startswith("'") or arg.isalnum(), cmd
    # a literal "%s" is split so the device never reads it as a space
    cmds = input_text_commands("a%sb")
    assert len(cmds) == 2
    with pytest.raises(ValueError):
        input_text_commands("café")


def test_parse_raw_screencap_headers_and_errors() -> None:
    px = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(3, 2, 4)
    for header in (struct.pack("<4I", 2, 3, 1, 1), struct.pack("<3I", 2, 3, 1)):
        rgb = parse_raw_screencap(header + px.tobytes())
        assert rgb.shape == (3, 2, 3)
        assert (rgb == px[:, :, :3]).all()
    bgra = parse_raw_screencap(struct.pack("<4I", 2, 3, 5, 1) + px.tobytes())
    assert (bgra[:, :, 0] == px[:, :, 2]).all()
    for bad in (b"", b"\x89PNG\r\n\x1a\n" + b"x" * 40, struct.pack("<4I", 2, 3, 1, 1) + b"xx"):
        with pytest.raises(ValueError):
            parse_raw_screencap(bad)


def test_foreground_package_reads_the_simulated_phone() -> None:
    out = "  mCurrentFocus=Window{5a1b2c3 u0 com.mobagent.notes/com.mobagent.notes.Main}\n"
    assert foreground_package(out) == "com.mobagent.notes"
    assert foreground_package("nothing here") is None


async def test_screenshot_raw_and_png_agree(sim_phone: Callable[..., ConnectedPhone]) -> None:
    cp = sim_phone(width=400, height=800)
    raw = AdbDevice(cp.serial, capture="raw")
    png = AdbDevice(cp.serial, capture="png")
    a = await raw.screenshot()
    b = await png.screenshot()
    assert (a.path, b.path) == ("raw", "png")
    assert a.rgb.shape == (800, 400, 3)
    assert np.array_equal(a.rgb, b.rgb)
    assert tuple(a.rgb[10, 10]) == cp.phone.colour
    assert await raw.window_size() == (400, 800)


async def test_screenshot_auto_falls_back_to_png(sim_phone: Callable[..., ConnectedPhone]) -> None:
    cp = sim_phone(width=400, height=800, sdk=34)
    dev = AdbDevice(cp.serial, capture="auto")
    cp.phone.faults.corrupt_screencap = True  # raw bytes do not parse...
    with pytest.raises(DeviceError):
        await dev.screenshot()  # ...and corrupt PNG neither: a clear error, no crash
    cp.phone.faults.corrupt_screencap = False
    shot = await dev.screenshot()
    assert shot.path == "png"  # auto stays on the path that worked
    assert tuple(shot.rgb[0, 0]) == cp.phone.colour


async def test_auto_capture_measures_again_whichever_path_won(
    sim_phone: Callable[..., ConnectedPhone],
) -> None:
    from sim.device_cost import DeviceCost

    cp = sim_phone(width=400, height=800, sdk=34)
    for slow, fast in (("raw", "png"), ("png", "raw")):
        # this phone's slow path costs 40 ms a frame more than the other
        cp.phone.latency.cost = DeviceCost(**{f"{slow}_s_per_pixel": 1.25e-7})
        dev = AdbDevice(cp.serial, capture="auto")
        dev.remeasure_every = 3
        assert dev.chosen is None
        for _ in range(7):
            await dev.screenshot()
        assert dev.chosen == fast, dev.timings
        assert dev.measurements == 3  # frames 1, 3 and 6, also when PNG won
        assert dev.timings[slow] > dev.timings[fast]  # type: ignore[operator]


async def test_hostile_strings_arrive_literally(sim_phone: Callable[..., ConnectedPhone]) -> None:
    cp = sim_phone()
    dev = AdbDevice(cp.serial)
    for text in HOSTILE:
        cp.phone.calls.clear()
        await dev.type_text(text)
        assert _typed(cp) == text, text
    assert not cp.phone.calls_of("launch")  # nothing ran but typing


async def test_unicode_goes_through_adb_keyboard(sim_phone: Callable[..., ConnectedPhone]) -> None:
    cp = sim_phone()
    dev = AdbDevice(cp.serial)
    for text in UNICODE:
        cp.phone.calls.clear()
        await dev.type_text(text)
        assert _typed(cp) == text, text
        # the user's keyboard is put back after each (Open-AutoGLM's Type does the same)
        assert cp.phone.ime == "com.android.inputmethod.latin/.LatinIME"


async def test_missing_adb_keyboard_says_how_to_install(
    sim_phone: Callable[..., ConnectedPhone],
) -> None:
    cp = sim_phone()
    cp.phone.ime_ids = ["com.android.inputmethod.latin/.LatinIME"]
    dev = AdbDevice(cp.serial)
    with pytest.raises(DeviceError, match="ADB Keyboard.*install"):
        await dev.type_text("café")
    assert not cp.phone.calls_of("type_text")


async def test_input_and_apps(sim_phone: Callable[..., ConnectedPhone]) -> None:
    cp = sim_phone()
    dev = AdbDevice(cp.serial)
    await dev.tap(10, 20)
    await dev.long_press(30, 40, 900)
    await dev.swipe(1, 2, 300, 400, 250)
    await dev.key(4)
    await dev.start_app("com.mobagent.notes")
    assert cp.phone.calls_of("tap") == [(10, 20)]
    assert cp.phone.calls_of("long_press") == [(30, 40, 900)]
    assert cp.phone.calls_of("swipe") == [(1, 2, 300, 400, 250)]
    assert cp.phone.calls_of("key") == [(4,)]
    # resolved to its launcher activity and started with `am start -n`, not monkey
    assert [str(c[0]).split("/")[0] for c in cp.phone.calls_of("start_activity")] == [
        "com.mobagent.notes"]
    assert cp.phone.calls_of("launch") == []
    assert await dev.current_app() == "com.mobagent.notes"
    with pytest.raises(DeviceError, match="not a package name"):
        await dev.start_app("x; reboot")
    with pytest.raises(DeviceError):
        await dev.start_app("com.not.installed")


async def test_timeout_is_a_device_error(sim_phone: Callable[..., ConnectedPhone]) -> None:
    cp = sim_phone()
    dev = AdbDevice(cp.serial, timeout_s=0.5)
    cp.phone.faults.slow_s = 3.0
    with pytest.raises(DeviceError, match="timed out"):
        await dev.tap(1, 1)
    cp.phone.faults.slow_s = 0.0
