"""The phone repaints only what changed, and its screencap reuses an unchanged frame's PNG:
both must give exactly what a whole paint and a fresh encode give."""

from __future__ import annotations

import io
import random

import pytest
from PIL import Image, ImageChops

from sim.adb.encode import ScreenEncoder, encoder_for, screencap
from sim.phone import SimPhone, canvas
from sim.phone.apps import notes
from sim.phone_api import DeviceInfo


def whole_paint(p: SimPhone) -> Image.Image:
    frame = p._frame()
    return canvas.paint(frame.base, frame.layout.ops)


def act(p: SimPhone, rng: random.Random) -> None:
    """One random thing a user does: tap something, type, scroll, go back or home."""
    roll = rng.random()
    W, H = p.info.width, p.info.height
    if p.keyboard_visible() and roll < 0.4:
        p.type_text(rng.choice(["a", "hello", " 42", "Zed"]))
    elif roll < 0.7:
        targets = p.find(clickable=True)
        if targets:
            p.tap_element(rng.choice(targets))
    elif roll < 0.8:
        p.swipe(W // 2, H * 2 // 3, W // 2, H // 3, 300)
    elif roll < 0.88:
        p.swipe(W * 3 // 4, H // 2, W // 4, H // 2, 300)
    elif roll < 0.96:
        p.key(4)  # BACK
    else:
        p.key(3)  # HOME
    p.settle()


@pytest.fixture
def regions(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int, int] | None]:
    """The changed regions the phone's repaints found, in order."""
    seen: list[tuple[int, int, int, int] | None] = []
    real = canvas.changed_region

    def spy(*a: object, **kw: object) -> tuple[int, int, int, int] | None:
        r = real(*a, **kw)  # type: ignore[arg-type]
        seen.append(r)
        return r

    monkeypatch.setattr(canvas, "changed_region", spy)
    return seen


def assert_whole(p: SimPhone, what: str) -> None:
    diff = ImageChops.difference(p.screenshot(), whole_paint(p)).getbbox()
    assert diff is None, f"{what} on {p.current_screen()}: differs from a whole paint at {diff}"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_repaints_on_a_random_walk_equal_a_whole_paint(
        seed: int, regions: list[tuple[int, int, int, int] | None]) -> None:
    p = SimPhone(DeviceInfo("r"), seed=seed)
    rng = random.Random(seed)
    p.launch(notes.PACKAGE)
    p.settle()
    for step in range(40):
        act(p, rng)
        assert_whole(p, f"seed {seed} step {step}")
    assert len(regions) > 10  # the walk went through the repaint path


def test_typing_repaints_a_small_region_exactly(
        regions: list[tuple[int, int, int, int] | None]) -> None:
    p = SimPhone(DeviceInfo("r"))
    p.launch(notes.PACKAGE)
    p.settle()
    p.tap_element(p.find(kind="search_bar")[0])
    assert p.keyboard_visible()
    assert_whole(p, "focused")
    regions.clear()
    for ch in "milk":
        p.type_text(ch)
        assert_whole(p, f"typed {ch!r}")
    W, H = p.info.width, p.info.height
    assert len(regions) == 4
    for r in regions:
        assert r is not None and (r[2] - r[0]) * (r[3] - r[1]) < W * H * canvas.FULL_PAINT_SHARE


def test_unchanged_ops_keep_the_same_image() -> None:
    p = SimPhone(DeviceInfo("r"))
    p.launch(notes.PACKAGE)
    p.settle()
    a = p.screenshot()
    p.tap(5, p.info.height // 2)  # nothing there: the frame is laid out again, identically
    p.key(0)  # an unknown key: the same
    assert p.screenshot() is a


def test_screencap_reuses_the_png_of_an_unchanged_frame() -> None:
    p = SimPhone(DeviceInfo("r"))
    enc = encoder_for(p)
    first = screencap(p, png=True)
    assert screencap(p, png=True) is first and enc.reused == 1 and enc.shots == 2
    assert enc.cpu_s > 0 and enc.png_bytes == 2 * len(first)
    p.launch(notes.PACKAGE)
    p.settle()
    second = screencap(p, png=True)
    assert second != first
    decoded = Image.open(io.BytesIO(second)).convert("RGB")
    assert ImageChops.difference(decoded, p.screenshot()).getbbox() is None  # lossless
    assert encoder_for(p) is enc  # one encoder per phone


def test_both_codecs_decode_to_the_frame() -> None:
    p = SimPhone(DeviceInfo("r"))
    img = p.screenshot()
    for codec in ("fast", "pillow"):
        data = ScreenEncoder(codec=codec, reuse=False).png(img)  # type: ignore[arg-type]
        assert ImageChops.difference(Image.open(io.BytesIO(data)).convert("RGB"), img).getbbox() is None
