"""A black frame told apart: a phone asleep (woken and captured again, ``display_off``)
from a secure window (the app area black under drawn bars, ``black``), and what the model
is told of each. The phone is a recording stand-in behind the real adb server."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from PIL import Image

from actors.capture import KEY_WAKEUP, CaptureEngine, black_area
from actors.episode import frame_notes
from devices.adb import AdbDevice, Screenshot
from devices.adb_output import Wakefulness
from tests.fixtures.adb import ConnectedPhone

pytestmark = pytest.mark.anyio

W, H = 1080, 2400


def secure_window(bars: bool = True) -> np.ndarray:
    """A FLAG_SECURE app as screencap gets it: black, with the status bar (clock and icons)
    and the gesture bar's pill drawn over it."""
    rgb = np.zeros((H, W, 3), np.uint8)
    if bars:
        rgb[20:50, 40:160] = 230  # the clock
        rgb[20:50, 900:1040] = 230  # battery and signal
        rgb[2350:2362, 400:680] = 240  # the navigation pill
    return rgb


def test_the_black_area_is_read_from_the_pixels() -> None:
    assert black_area(np.zeros((H, W, 3), np.uint8)) == "frame"
    assert black_area(secure_window()) == "app"
    assert black_area(secure_window(bars=False)) == "frame"
    app = np.full((H, W, 3), 18, np.uint8)  # a dark theme with something on it
    app[600:700, 100:900] = 200
    assert black_area(app) is None
    assert black_area(np.full((H, W, 3), 200, np.uint8)) is None


def test_the_model_is_told_which_black_it_is() -> None:
    assert frame_notes([]) == frame_notes(["identical"]) == []
    (secure,) = frame_notes(["black"])
    assert "secure window" in secure and "asleep" not in secure
    (woken,) = frame_notes(["display_off"])
    assert "asleep" in woken and "woken" in woken and "secure" not in woken
    assert len(frame_notes(["display_off", "black"])) == 2  # woken, and then a secure window
    (off,) = frame_notes(["display_off", "wake_failed"])
    assert "did not wake" in off


async def test_a_sleeping_phone_is_woken_and_captured_again(
    sim_phone: Callable[..., ConnectedPhone],
) -> None:
    cp = sim_phone()
    cp.phone.device_state.awake = False  # the ADB side gives black frames now
    cap = CaptureEngine(AdbDevice(cp.serial), fmt="png")
    cap.wake_settle_s = 0.05
    got = await cap.capture()
    assert got.frame.flags == ["display_off"]
    assert cp.phone.device_state.awake
    assert black_area(got.rgb) is None and got.rgb[H // 2, W // 2].tolist() == [30, 120, 200]
    assert cap.previous is got and cap.count == 2  # the black frame, then the woken one
    assert "asleep" in frame_notes(got.frame.flags)[0]


async def test_a_secure_window_is_flagged_and_nothing_is_woken(
    sim_phone: Callable[..., ConnectedPhone], monkeypatch: pytest.MonkeyPatch,
) -> None:
    cp = sim_phone()
    for rgb in (secure_window(), secure_window(bars=False)):  # under bars; all of the screen
        image = Image.fromarray(rgb)
        monkeypatch.setattr(cp.phone, "screenshot", lambda image=image: image)
        got = await CaptureEngine(AdbDevice(cp.serial), fmt="png").capture()
        assert got.frame.flags == ["black"]
    assert not cp.phone.calls_of("key")  # the display was on: no wake key


@dataclass
class StaysAsleep:
    """A phone whose display stays off whatever it is sent."""

    serial: str = "asleep-1"
    keys: list[int] = field(default_factory=list)

    async def screenshot(self) -> Screenshot:
        return Screenshot(np.zeros((H, W, 3), np.uint8), "raw")

    async def wakefulness(self) -> Wakefulness | None:
        return "asleep"

    async def key(self, keycode: int) -> None:
        self.keys.append(keycode)


async def test_a_phone_that_does_not_wake_says_so() -> None:
    phone = StaysAsleep()
    cap = CaptureEngine(phone)  # type: ignore[arg-type]
    cap.wake_settle_s = 0.0
    streamed = await cap.capture(wake=False)  # the idle stream leaves the phone asleep
    assert streamed.frame.flags == ["black"] and not phone.keys
    got = await cap.capture()
    assert phone.keys == [KEY_WAKEUP]
    assert got.frame.flags == ["identical", "display_off", "wake_failed"]
    assert "did not wake" in frame_notes(got.frame.flags)[0]
