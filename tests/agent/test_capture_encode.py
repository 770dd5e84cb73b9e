"""Capture's ``encode`` stage (``encode_capture``) makes what it made before it was cut: the
same JPEG bytes for the frame, the LLM's view and the watchers' screen (so the same pixels),
the digest of every pixel, and the same black area read on the view as on the frame;
identical frames are flagged as such. Its speed is measured in bench/codecs.py, not here."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from actors.capture import (
    CaptureEngine,
    black_area,
    encode_capture,
    encode_frame,
    pixel_sha,
    same_pixels,
    small_views,
)
from devices.adb import Screenshot
from devices.codecs import shrink
from sim.phone import SimPhone
from sim.phone_api import DeviceInfo

W, H = 1080, 2400
VIEW, VIEW_Q, SCREEN, FRAME_Q = 1024, 85, 360, 80


def sim_screens() -> dict[str, np.ndarray]:
    """Rendered screens of the simulated phone: the launcher, settings, a dark-ish app."""
    phone = SimPhone(DeviceInfo("enc"), seed=0)
    phone.clock = lambda: 0.0
    out = {"home": np.asarray(phone.screenshot().convert("RGB"))}
    phone.launch("com.android.settings")
    phone.settle()
    out["settings"] = np.asarray(phone.screenshot().convert("RGB"))
    return {k: np.ascontiguousarray(v) for k, v in out.items()}


def secure_window(bars: bool = True) -> np.ndarray:
    """A FLAG_SECURE app: black, with the status bar and the gesture pill drawn over it."""
    rgb = np.zeros((H, W, 3), np.uint8)
    if bars:
        rgb[20:50, 40:160] = 230
        rgb[20:50, 900:1040] = 230
        rgb[2350:2362, 400:680] = 240
    return rgb


def dark_theme() -> np.ndarray:
    rgb = np.full((H, W, 3), 18, np.uint8)
    rgb[600:700, 100:900] = 200
    return rgb


@pytest.fixture(scope="module")
def frames() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {**sim_screens(), "noise": rng.integers(0, 255, (H, W, 3), dtype=np.uint8),
            "secure": secure_window(), "black": np.zeros((H, W, 3), np.uint8),
            "dark_theme": dark_theme()}


def test_the_stage_makes_the_bytes_the_frame_made_before(frames: dict[str, np.ndarray]) -> None:
    for name, rgb in frames.items():
        enc = encode_capture(rgb, b"", fmt="jpeg", quality=FRAME_Q, view_side=VIEW,
                             view_quality=VIEW_Q, screen_side=SCREEN)
        view, screen = small_views(rgb, VIEW, VIEW_Q, SCREEN)  # each JPEG from RGB
        assert enc.data == encode_frame(rgb, "jpeg", FRAME_Q), name
        assert (enc.view, enc.screen) == (view, screen), name
        assert enc.sha == pixel_sha(rgb), name
        assert enc.dark == black_area(rgb), name
    rgb = frames["settings"]
    png = encode_capture(rgb, b"phone's png", fmt="png", quality=FRAME_Q, view_side=VIEW,
                         view_quality=VIEW_Q, screen_side=0)
    assert png.data == b"phone's png" and png.view == small_views(rgb, VIEW, VIEW_Q, 0)[0]
    alone = encode_capture(rgb, b"", fmt="jpeg", quality=FRAME_Q, view_side=0,
                           view_quality=VIEW_Q, screen_side=SCREEN)
    assert (alone.view, alone.screen) == small_views(rgb, 0, VIEW_Q, SCREEN)


def test_the_digest_is_of_every_pixel(frames: dict[str, np.ndarray]) -> None:
    rgb = frames["settings"].copy()
    before = pixel_sha(rgb)
    rgb[H - 1, W - 1, 2] ^= 1  # one bit of the last pixel
    assert pixel_sha(rgb) != before


def test_the_black_area_reads_the_same_on_the_view(frames: dict[str, np.ndarray]) -> None:
    want = {"secure": "app", "black": "frame", "dark_theme": None, "home": None,
            "settings": None, "noise": None}
    for name, rgb in frames.items():
        view = shrink(rgb, VIEW)
        assert black_area(rgb) == black_area(view, 1) == want[name], name
    assert black_area(shrink(secure_window(bars=False), VIEW), 1) == "frame"
    # Darkened real screens, away from the threshold (mean 6): the same call either way.
    for name in ("home", "settings"):
        rgb = frames[name].astype(np.float32)
        for mean in (0.5, 2.0, 4.0, 9.0, 14.0):
            dim = np.clip(rgb * (mean / rgb.mean()), 0, 255).astype(np.uint8)
            assert black_area(dim) == black_area(shrink(dim, VIEW), 1), (name, mean)


@dataclass
class Screens:
    """A phone that shows the given frames in turn, as fresh arrays (as adb gives them)."""

    frames: list[np.ndarray]
    serial: str = "enc-1"
    shown: list[int] = field(default_factory=list)

    async def screenshot(self) -> Screenshot:
        i = len(self.shown) % len(self.frames)
        self.shown.append(i)
        return Screenshot(self.frames[i].copy(), "raw")


@pytest.mark.anyio
async def test_identical_frames_are_flagged_and_others_not(
    frames: dict[str, np.ndarray],
) -> None:
    settings = frames["settings"]
    one_pixel = settings.copy()
    one_pixel[H // 2, W // 3] += 1  # off the rows a quick look would compare
    phone = Screens([settings, settings, one_pixel, one_pixel, settings, frames["secure"]])
    cap = CaptureEngine(phone, screen_side=SCREEN)  # type: ignore[arg-type]
    got = [await cap.capture(view_side=VIEW, view_quality=VIEW_Q, wake=False)
           for _ in range(6)]
    assert [g.identical for g in got] == [False, True, False, True, False, False]
    assert [g.black for g in got] == [False] * 5 + [True]
    view, screen = small_views(settings, VIEW, VIEW_Q, SCREEN)
    for g in (got[0], got[1], got[4]):
        assert (g.view, g.screen) == (view, screen)
        assert g.data == encode_frame(settings, "jpeg", FRAME_Q)
        assert g.frame.sha256 == pixel_sha(settings)
    assert got[2].frame.sha256 == pixel_sha(one_pixel) != got[1].frame.sha256


def test_same_pixels_compares_every_pixel(frames: dict[str, np.ndarray]) -> None:
    rgb = frames["settings"]
    assert same_pixels(rgb, rgb.copy())
    for y, x in ((0, 0), (H // 2 + 1, W // 3), (H - 1, W - 1)):
        other = rgb.copy()
        other[y, x, 1] ^= 4
        assert not same_pixels(rgb, other), (y, x)
    assert not same_pixels(rgb, rgb[:-1])


@pytest.mark.anyio
async def test_a_frame_asked_for_another_view_is_encoded_again(
    frames: dict[str, np.ndarray],
) -> None:
    rgb = frames["home"]
    cap = CaptureEngine(Screens([rgb]), screen_side=SCREEN)  # type: ignore[arg-type]
    first = await cap.capture(view_side=VIEW, view_quality=VIEW_Q, wake=False)
    second = await cap.capture(view_side=512, view_quality=VIEW_Q, wake=False)
    assert second.identical and second.frame.sha256 == first.frame.sha256
    assert second.view == small_views(rgb, 512, VIEW_Q, SCREEN)[0] != first.view
    assert second.frame_id != first.frame_id  # a new frame, however alike
