"""Frame codecs on OpenCV: decode to RGB, shrink, encode JPEG or PNG.

The one place the product encodes a JPEG (``encode_jpeg``; ``fit_jpeg`` for bytes that
may already be one): capture's frames, views and screens, the LLM client's images and
perception's marked candidates all come through here. OpenCV (the headless wheel, already
a dependency) decodes and encodes straight from and into numpy arrays; Pillow's path costs
two extra full-frame copies (``convert`` and ``tobytes``) and a slower resize, which is
about half the host's CPU per step when many phones share two cores (bench/fleet.py;
``mobagent bench codecs`` has the encoders side by side). Pillow stays as the fallback
decoder for formats OpenCV does not read, and reads headers.

This module imports nothing of ours, so ``models/`` may use it and stay usable on its own
(tests/test_import_boundaries.py keeps it a leaf). Every function here blocks: async
callers run it off the loop (``anyio.to_thread.run_sync``).
"""

from __future__ import annotations

import io

import cv2
import numpy as np


def decode_rgb(data: bytes) -> np.ndarray:
    """An encoded image (PNG, JPEG, ...) as a contiguous HxWx3 uint8 RGB array.

    Raises ``ValueError`` when the bytes are not a readable image.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    bgr = cv2.imdecode(buf, cv2.IMREAD_COLOR) if buf.size else None
    if bgr is not None:
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as img:
            return np.ascontiguousarray(np.asarray(img.convert("RGB")))
    except Exception as exc:
        raise ValueError(f"not a readable image ({len(data)} bytes): {exc}") from None


def shrink(rgb: np.ndarray, max_side: int) -> np.ndarray:
    """The image with its longer side at most ``max_side`` (area-averaged), else itself."""
    h, w = rgb.shape[:2]
    if max_side <= 0 or max(h, w) <= max_side:
        return rgb
    scale = max_side / max(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    # Area averaging by a whole factor takes OpenCV's fast path (a 2.34x shrink straight
    # through INTER_AREA is ten times slower); bilinear covers the remaining < 2x.
    k = int(1 / scale)
    if k >= 2:
        rgb = cv2.resize(rgb, (max(size[0], w // k), max(size[1], h // k)),
                         interpolation=cv2.INTER_AREA)
    return cv2.resize(rgb, size, interpolation=cv2.INTER_LINEAR)


def encode_jpeg(rgb: np.ndarray, quality: int = 80, *, max_side: int = 0,
                optimize: bool = False) -> bytes:
    """An HxWx3 RGB array as JPEG at ``quality``, its longer side first shrunk to at most
    ``max_side`` (0: as it is). ``optimize`` computes Huffman tables for the image: a few
    percent smaller for a little more time, for images that travel to a remote API."""
    params = [cv2.IMWRITE_JPEG_QUALITY, int(quality)]
    if optimize:
        params += [cv2.IMWRITE_JPEG_OPTIMIZE, 1]
    return _encode(shrink(rgb, max_side), ".jpg", params)


def fit_jpeg(data: bytes, max_side: int, quality: int = 85, *, optimize: bool = True) -> bytes:
    """An encoded image (any format ``decode_rgb`` reads) as a JPEG with its longer side at
    most ``max_side``; a JPEG that already fits passes through untouched, so a view capture
    made small is not encoded twice. Raises ``ValueError`` when the bytes are no image."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as img:  # reads the header only
            if img.format == "JPEG" and max(img.size) <= max_side:
                return data
    except Exception:
        pass  # not one Pillow reads: decode_rgb says why, or reads it after all
    return encode_jpeg(decode_rgb(data), quality, max_side=max_side, optimize=optimize)


def encode_png(rgb: np.ndarray, level: int = 1, *, unfiltered: bool = False) -> bytes:
    """PNG at zlib ``level``. ``unfiltered`` skips libpng's per-row filter search: on flat
    UI frames it is about twice as fast at about the same size (bench/sim.py)."""
    params = [cv2.IMWRITE_PNG_COMPRESSION, int(level)]
    if unfiltered:
        params += [cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_NONE]
    return _encode(rgb, ".png", params)


def _encode(rgb: np.ndarray, ext: str, params: list[int]) -> bytes:
    ok, buf = cv2.imencode(ext, cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), params)
    if not ok:
        raise ValueError(f"cannot encode a {rgb.shape} image as {ext[1:].upper()}")
    return bytes(buf)
