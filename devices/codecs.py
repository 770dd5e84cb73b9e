"""Frame codecs on OpenCV: decode to RGB, shrink, encode JPEG or PNG.

OpenCV (the headless wheel, already a dependency) decodes and encodes straight from and
into numpy arrays; Pillow's path costs two extra full-frame copies (``convert`` and
``tobytes``) and a slower resize, which is about half the host's CPU per step when many
phones share two cores (bench/fleet.py). Pillow stays as the fallback decoder for
formats OpenCV does not read.
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


def encode_jpeg(rgb: np.ndarray, quality: int = 80) -> bytes:
    return _encode(rgb, ".jpg", [cv2.IMWRITE_JPEG_QUALITY, int(quality)])


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
