"""What a screenshot costs a real phone, for the simulated one (opt-in: default off).

Two costs the simulated phone does not have by itself: the phone's own encoding time
(``screencap -p`` deflates every pixel on the phone's CPU; raw ``screencap`` only copies
them, so it is cheaper to make but four bytes a pixel to send), and the USB cable, whose
bandwidth every phone on one hub shares. ``CaptureCost`` holds both; phones that share a
``UsbHub`` object share its bandwidth. The numbers of ``CaptureCost.usb2()`` are round
assumptions for a mid-range phone on a USB 2.0 hub, not measurements: set your own.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

USB2_BYTES_PER_S = 35_000_000  # USB 2.0's 480 Mbit/s less the protocol's overhead


@dataclass
class UsbHub:
    """A shared link: transfers queue on it, so N phones sending at once each get 1/N."""

    bytes_per_s: float = USB2_BYTES_PER_S
    _busy_until: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reserve(self, nbytes: int, now: float | None = None) -> float:
        """Book ``nbytes`` on the link; return the monotonic time the transfer ends."""
        now = time.monotonic() if now is None else now
        with self._lock:
            start = max(now, self._busy_until)
            self._busy_until = start + nbytes / self.bytes_per_s
            return self._busy_until

    def transfer(self, nbytes: int) -> float:
        """Block until ``nbytes`` have crossed the link; return the seconds waited."""
        t = time.monotonic()
        end = self.reserve(nbytes, t)
        if end > t:
            time.sleep(end - t)
        return max(0.0, end - t)


@dataclass
class CaptureCost:
    """Phone-side encode time per pixel and the hub the frame's bytes cross."""

    png_s_per_pixel: float = 0.0
    raw_s_per_pixel: float = 0.0
    hub: UsbHub | None = None

    @classmethod
    def usb2(cls, hub: UsbHub | None = None) -> CaptureCost:
        """A mid-range phone (PNG about 250 ms for 1080x2400, raw about 25 ms) on USB 2.0."""
        return cls(png_s_per_pixel=100e-9, raw_s_per_pixel=10e-9,
                   hub=hub if hub is not None else UsbHub())

    def encode_s(self, pixels: int, png: bool) -> float:
        return pixels * (self.png_s_per_pixel if png else self.raw_s_per_pixel)

    def charge(self, pixels: int, nbytes: int, png: bool) -> None:
        """Spend what one capture costs: the encode on the phone, then the transfer."""
        encode = self.encode_s(pixels, png)
        if encode > 0:
            time.sleep(encode)
        if self.hub is not None and nbytes:
            self.hub.transfer(nbytes)
