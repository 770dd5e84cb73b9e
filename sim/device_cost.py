"""What a real phone's own work costs, for the simulated one (opt-in: plain phones are free).

A simulated phone answers at once; a real one does not. ``DeviceCost`` charges what the
sources below measured on real phones, so a benchmark compares transports at real cost:

- ``adb shell input ...`` starts a process on the phone for every call (the JVM of
  ``input``; scrcpy's author explains it in Genymobile/scrcpy#231), where scrcpy's control
  socket reaches a server that is already running;
- ``screencap -p`` reads the screen back and deflates every pixel on the phone's CPU, then
  its bytes (a real screen's PNG, megabytes) cross the USB cable;
- the scrcpy stream's H.264 bytes cross the same cable; the phone's hardware encoder
  costs the phone no CPU, so nothing else is charged for it here.

Phones that share one ``UsbHub`` object share its bandwidth: transfers queue on it, so 16
phones on one USB 2 hub wait behind each other. The charges sleep; nothing here burns CPU.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import anyio

USB2_BYTES_PER_S = 35_000_000  # USB 2.0's 480 Mbit/s less the protocol's overhead

# `adb shell input tap` end to end on a real phone, the JVM start of `input` most of it:
# 226 ms on real hardware against 5.6 ms through a persistent on-device server
# (github.com/mobile-next/mobilecli/pull/412, measured in #286); `io tap` over `adb shell
# input tap` 0.25-0.33 s on a Pixel 9 Pro emulator (github.com/mobile-next/mobile-mcp/
# pull/430); 300-400 ms (github.com/camalot/madb/issues/56, as issue 38 quotes it); "almost
# 1 second" in 2018 (github.com/Genymobile/scrcpy/issues/231) and "under 1 s"
# (github.com/mzlogin/awesome-adb/issues/54). 0.3 s: the middle of the recent figures.
INPUT_JVM_S = 0.3
# One injection through a server already running on the phone: 5.6 ms a tap
# (mobilecli PR #412, above), which is what scrcpy's control socket is.
CONTROL_S = 0.0056
# `screencap -p` of a 1080x2400 phone: about 450 ms through adb (the screenshot column of
# github.com/web-infra-dev/midscene/pull/1842, whose 550 ms adds a 100 ms resize on the
# host) against about 130 ms through scrcpy; users report 2-5 s with the upload
# (github.com/zai-org/Open-AutoGLM/issues/63) and 2-4 s (awesome-adb#54). The PNG's
# transfer is charged on the hub apart, so the phone's part is 450 ms less ~75 ms of
# USB 2 for a 2.6 MB PNG (below): 375 ms for 2,592,000 pixels.
PNG_S_PER_PIXEL = 0.375 / (1080 * 2400)
# Raw screencap only reads the pixels back and copies them: no published figure found, so
# a round assumption of a tenth of the PNG path (it is the bytes, 4 a pixel, that cost).
RAW_S_PER_PIXEL = PNG_S_PER_PIXEL / 10
# A real screen's PNG is megabytes: about 5 MB at 1440x2560 on a Nexus 6P
# (github.com/facebook/screenshot-tests-for-android/issues/158, 1.4 bytes a pixel), 2-4 MB
# at 1080x2400 (issue 38). The simulated phone's flat frames deflate to ~110 kB, so the
# hub is charged at least 1 byte a pixel (2.6 MB at 1080x2400, the low end).
PNG_WIRE_BYTES_PER_PIXEL = 1.0


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

    async def transfer_async(self, nbytes: int) -> float:
        """``transfer`` for the event loop (the scrcpy server's stream): sleeps, never blocks."""
        t = time.monotonic()
        end = self.reserve(nbytes, t)
        if end > t:
            await anyio.sleep(end - t)
        return max(0.0, end - t)


@dataclass
class DeviceCost:
    """A phone's own costs: screencap's encode per pixel, ``input``'s process start, one
    control injection, and the hub its bytes cross. All zero by default (no cost)."""

    png_s_per_pixel: float = 0.0
    raw_s_per_pixel: float = 0.0
    input_s: float = 0.0  # each `input` command (a process start on the phone)
    control_s: float = 0.0  # each injection through scrcpy's control socket
    png_wire_bytes_per_pixel: float = 0.0  # the least a PNG puts on the hub, per pixel
    hub: UsbHub | None = None

    @classmethod
    def usb2(cls, hub: UsbHub | None = None) -> DeviceCost:
        """A real phone's costs (the sourced figures above) on a USB 2.0 hub."""
        return cls(png_s_per_pixel=PNG_S_PER_PIXEL, raw_s_per_pixel=RAW_S_PER_PIXEL,
                   input_s=INPUT_JVM_S, control_s=CONTROL_S,
                   png_wire_bytes_per_pixel=PNG_WIRE_BYTES_PER_PIXEL,
                   hub=hub if hub is not None else UsbHub())

    def encode_s(self, pixels: int, png: bool) -> float:
        return pixels * (self.png_s_per_pixel if png else self.raw_s_per_pixel)

    def wire_bytes(self, pixels: int, nbytes: int, png: bool) -> int:
        """The bytes a capture puts on the hub: a real screen's PNG is no smaller than
        ``png_wire_bytes_per_pixel`` (the simulated phone's flat frames would be)."""
        return max(nbytes, int(pixels * self.png_wire_bytes_per_pixel)) if png else nbytes

    def charge_capture(self, pixels: int, nbytes: int, png: bool) -> None:
        """Spend what one screencap costs: the encode on the phone, then the transfer."""
        encode = self.encode_s(pixels, png)
        if encode > 0:
            time.sleep(encode)
        if self.hub is not None and nbytes:
            self.hub.transfer(self.wire_bytes(pixels, nbytes, png))

    def charge_input(self) -> None:
        """Spend what starting one ``input`` process costs the phone."""
        if self.input_s > 0:
            time.sleep(self.input_s)

    async def charge_control(self) -> None:
        """Spend what one injection through a running server costs (the event loop's)."""
        if self.control_s > 0:
            await anyio.sleep(self.control_s)

    async def charge_stream(self, nbytes: int) -> None:
        """The stream's bytes cross the hub (the encode is the phone's hardware's)."""
        if self.hub is not None and nbytes:
            await self.hub.transfer_async(nbytes)
