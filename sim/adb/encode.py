"""What ``screencap`` sends: a phone's frame encoded, reused while the frame is unchanged.

A phone hands out the same image object until its screen changes (sim.phone caches its
frame), so the last PNG is kept per phone and sent again for the same object: an agent
that captures twice without acting, or a frozen screen, costs no encode. PNG is zlib
level 1 with no row filters (``PNG_FAST``): on the simulated phone's flat frames that is
about twice as fast as Pillow's level 1 with adaptive filters, at about the same bytes
(``python -m bench.sim`` measures both, and each frame's bytes). The raw path is not kept:
it is 10 MB a frame, and the copy is all it costs.

Each encoder also counts the thread CPU its screenshots took (the phone's layout and
paint and the encode), which is what bench/sim.py and bench/fleet.py report per screenshot.
"""

from __future__ import annotations

import io
import struct
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from PIL import Image

from devices.codecs import encode_png
from sim.adb import system
from sim.phone_api import Phone

Codec = Literal["fast", "pillow"]  # pillow: the old path (level 1, adaptive filters), for bench


@dataclass
class ScreenEncoder:
    """One phone's screencap encoder and its counters (thread-safe)."""

    codec: Codec = "fast"
    reuse: bool = True  # send the last PNG again for the same image object
    shots: int = 0
    reused: int = 0
    cpu_s: float = 0.0
    png_bytes: int = 0
    _last: tuple[Image.Image, bytes] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def png(self, img: Image.Image) -> bytes:
        with self._lock:
            last = self._last
        if self.reuse and last is not None and last[0] is img:
            with self._lock:
                self.reused += 1
            return last[1]
        if self.codec == "pillow":
            buf = io.BytesIO()
            img.save(buf, format="PNG", compress_level=1)
            data = buf.getvalue()
        else:
            rgb = img if img.mode == "RGB" else img.convert("RGB")
            data = encode_png(np.asarray(rgb), 1, unfiltered=True)
        with self._lock:
            # holding the image keeps its id from being reused by a later frame
            self._last = (img, data) if self.reuse else None
        return data

    def count(self, cpu_s: float, nbytes: int) -> None:
        with self._lock:
            self.shots += 1
            self.cpu_s += cpu_s
            self.png_bytes += nbytes

    def reset_counters(self) -> None:
        with self._lock:
            self.shots = self.reused = self.png_bytes = 0
            self.cpu_s = 0.0


_ENCODERS: weakref.WeakKeyDictionary[Phone, ScreenEncoder] = weakref.WeakKeyDictionary()
_ENCODERS_LOCK = threading.Lock()


def encoder_for(phone: Phone) -> ScreenEncoder:
    """The phone's encoder (made on first use; it goes with the phone). A phone type that
    cannot be a weak key (a value-compared dataclass) gets a fresh, unshared one per call."""
    with _ENCODERS_LOCK:
        try:
            enc = _ENCODERS.get(phone)
            if enc is None:
                enc = _ENCODERS[phone] = ScreenEncoder()
            return enc
        except TypeError:
            return ScreenEncoder(reuse=False)


def raw_screencap(img: Image.Image, sdk: int) -> bytes:
    rgba = img.convert("RGBA")
    w, h = rgba.size
    header = struct.pack("<4I", w, h, 1, 1) if sdk >= 28 else struct.pack("<3I", w, h, 1)
    return header + rgba.tobytes()


def screencap(phone: Phone, png: bool) -> bytes:
    """The phone's current frame as ``screencap`` (raw) or ``screencap -p`` sends it (black
    while the phone sleeps, the keyguard while it is locked)."""
    enc = encoder_for(phone)
    t = time.thread_time()
    img = system.frame(phone)
    data = enc.png(img) if png else raw_screencap(img, phone.info.sdk)
    enc.count(time.thread_time() - t, len(data) if png else 0)
    return data
