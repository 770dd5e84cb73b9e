"""devices.codecs: the frame codecs every screenshot goes through."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from devices.codecs import decode_rgb, encode_jpeg, encode_png, fit_jpeg, shrink


def screen(h: int = 240, w: int = 108) -> np.ndarray:
    rng = np.random.default_rng(0)
    rgb = np.zeros((h, w, 3), np.uint8)
    rgb[:, :, 0] = np.linspace(0, 255, w, dtype=np.uint8)[None, :]  # red ramp left to right
    rgb[: h // 2, :, 2] = 200  # blue top half
    rgb[h // 2 :, :, 1] = rng.integers(0, 255, (h - h // 2, w), dtype=np.uint8)
    return rgb


def test_png_round_trip_is_exact_and_channels_stay_rgb() -> None:
    rgb = screen()
    out = decode_rgb(encode_png(rgb))
    assert out.dtype == np.uint8 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, rgb)


def test_decodes_what_pillow_wrote_including_alpha_and_palette() -> None:
    rgb = screen()
    for mode in ("RGBA", "P", "L"):
        buf = io.BytesIO()
        Image.fromarray(rgb).convert(mode).save(buf, format="PNG")
        want = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))
        np.testing.assert_array_equal(decode_rgb(buf.getvalue()), want)


def test_jpeg_is_close_to_the_source() -> None:
    rgb = screen()
    rgb[:, :, 1] = 60  # smooth content: JPEG error stays small
    out = decode_rgb(encode_jpeg(rgb, 90))
    assert out.shape == rgb.shape
    assert np.abs(out.astype(int) - rgb.astype(int)).mean() < 3


def test_formats_opencv_lacks_fall_back_to_pillow() -> None:
    buf = io.BytesIO()
    Image.fromarray(screen()).save(buf, format="GIF")
    out = decode_rgb(buf.getvalue())
    assert out.shape == (240, 108, 3)


@pytest.mark.parametrize("data", [b"", b"not an image", b"\x89PNG\r\n\x1a\n" + b"\0" * 40])
def test_unreadable_bytes_raise_value_error(data: bytes) -> None:
    with pytest.raises(ValueError, match="not a readable image"):
        decode_rgb(data)


def test_shrink_keeps_aspect_and_matches_area_averaging() -> None:
    rgb = screen(2400, 1080)
    small = shrink(rgb, 1024)
    assert small.shape == (1024, 461, 3)
    ref = np.asarray(Image.fromarray(rgb).resize((461, 1024), Image.Resampling.BOX))
    assert np.abs(small.astype(int) - ref.astype(int)).mean() < 4
    assert shrink(rgb, 4000) is rgb and shrink(rgb, 0) is rgb


def test_encode_jpeg_shrinks_to_max_side_and_optimize_only_shrinks_bytes() -> None:
    rgb = screen(480, 216)
    small = decode_rgb(encode_jpeg(rgb, 85, max_side=120))
    assert small.shape == (120, 54, 3)
    plain, optimized = encode_jpeg(rgb, 85), encode_jpeg(rgb, 85, optimize=True)
    assert len(optimized) < len(plain)
    np.testing.assert_array_equal(decode_rgb(plain), decode_rgb(optimized))  # same pixels


def test_encode_jpeg_writes_what_pillow_writes() -> None:
    """The marked-candidates image moved from Pillow's save to the codec: same bytes."""
    rgb = screen()
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=85)
    assert encode_jpeg(rgb, 85) == buf.getvalue()


def test_fit_jpeg_passes_a_fitting_jpeg_through_and_shrinks_the_rest() -> None:
    rgb = screen(480, 216)
    jpeg = encode_jpeg(rgb, 80)
    assert fit_jpeg(jpeg, 480) is jpeg  # untouched, not encoded twice
    shrunk = fit_jpeg(jpeg, 240)
    assert decode_rgb(shrunk).shape == (240, 108, 3)
    png = encode_png(rgb)  # fits, but is no JPEG: encoded once
    out = fit_jpeg(png, 4000)
    assert out[:3] == b"\xff\xd8\xff" and decode_rgb(out).shape == rgb.shape
    with pytest.raises(ValueError, match="not a readable image"):
        fit_jpeg(b"\x89PNG definitely not an image", 100)
