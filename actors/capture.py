"""The capture actor: one device's frames, hashed, flagged and encoded once.

A capture takes a screenshot through the ``Device`` (raw path by default, PNG fallback:
see ``runtime/device.py``), hashes the pixels, flags a frame identical to the previous one
and an all-black frame (a secure window), and encodes it once (JPEG or PNG, off the loop);
the same bytes go on the bus as a ``Frame`` and to the LLM.
"""

from __future__ import annotations

import hashlib
import io
import time
from dataclasses import dataclass
from typing import Literal

import anyio
import numpy as np
from PIL import Image

from runtime.device import Device
from runtime.messages import Frame

BLACK_MEAN = 6.0  # mean brightness below this (and almost no variation) is a black frame


@dataclass(frozen=True)
class Captured:
    """A frame as the step loop uses it: the bus message plus the pixels."""

    frame: Frame
    rgb: np.ndarray
    capture_s: float
    encode_s: float

    @property
    def frame_id(self) -> str:
        return self.frame.frame_id

    @property
    def data(self) -> bytes:
        return self.frame.data

    @property
    def identical(self) -> bool:
        return "identical" in self.frame.flags

    @property
    def black(self) -> bool:
        return "black" in self.frame.flags


def pixel_sha(rgb: np.ndarray) -> str:
    h = hashlib.sha256()
    h.update(f"{rgb.shape}".encode())
    h.update(np.ascontiguousarray(rgb).data)
    return h.hexdigest()


def is_black(rgb: np.ndarray) -> bool:
    small = rgb[::8, ::8]
    return float(small.mean()) < BLACK_MEAN and float(small.std()) < 4.0


def encode_frame(rgb: np.ndarray, fmt: Literal["png", "jpeg"], quality: int = 80) -> bytes:
    buf = io.BytesIO()
    img = Image.fromarray(rgb)
    if fmt == "png":
        img.save(buf, format="PNG", compress_level=1)
    else:
        img.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


class CaptureActor:
    """Frames of one device on request (``capture``); ``previous`` is the last one taken."""

    name = "capture"

    def __init__(
        self, device: Device, *, fmt: Literal["png", "jpeg"] = "jpeg", quality: int = 80,
        timeout_s: float = 20.0,
    ) -> None:
        self.device = device
        self.fmt = fmt
        self.quality = quality
        self.timeout_s = timeout_s
        self.previous: Captured | None = None
        self.count = 0

    async def capture(self, *, episode_id: str = "", step: int = 0) -> Captured:
        t0 = time.perf_counter()
        with anyio.fail_after(self.timeout_s):
            shot = await self.device.screenshot()
        t1 = time.perf_counter()
        rgb = shot.rgb

        def work() -> tuple[str, bool, bytes]:
            sha = pixel_sha(rgb)
            black = is_black(rgb)
            if self.fmt == "png" and shot.png:
                data = shot.png  # the phone's PNG already is the encoding
            else:
                data = encode_frame(rgb, self.fmt, self.quality)
            return sha, black, data

        with anyio.fail_after(self.timeout_s):
            sha, black, data = await anyio.to_thread.run_sync(work)
        flags: list[str] = []
        if self.previous is not None and self.previous.frame.sha256 == sha:
            flags.append("identical")
        if black:
            flags.append("black")
        self.count += 1
        frame = Frame(
            device=self.device.serial, episode_id=episode_id, step=step,
            frame_id=f"{sha[:12]}-{self.count}", sha256=sha, width=shot.width,
            height=shot.height, format=self.fmt, data=data, flags=flags,
            capture_path=shot.path,
        )
        captured = Captured(frame, rgb, t1 - t0, time.perf_counter() - t1)
        self.previous = captured
        return captured
