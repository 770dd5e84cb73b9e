"""A phone through its scrcpy stream while the stream runs, through adb otherwise.

``StreamedDevice`` is the ``Device`` the actors use when ``device.transport`` is
``scrcpy`` or ``auto``: screenshots are the stream's frames (devices/scrcpy.py's
fresh-frame rule: never a frame from before the last action), touches and keys go down
the control socket, text by the clipboard and a paste (no keyboard app). When the stream
dies (the server killed, USB dropped, an encoder error, a vendor's refusal), the same call
goes through adb at once, so no step is lost; an action is never sent twice: one that
broke half-way through is an error, not redone. The stream is started again after a
backoff (1 s doubling to 16 s), so a phone is back on it within 30 s. Starting an app and
clearing a field go through adb but count as actions (the next frame is from after them).
Everything else (shell lines, packages, the app in front) is adb's (``AdbDevice``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import cv2
import structlog

from devices.adb import AdbDevice, DeviceError, Screenshot
from devices.scrcpy import ScrcpyActionBroken, ScrcpyError, ScrcpyStream
from runtime.bus import Backoff

log = structlog.get_logger(__name__)

RETRY_FIRST_S, RETRY_MAX_S = 1.0, 16.0
START_TIMEOUT_S = 15.0


class StreamedDevice:
    """``AdbDevice``'s surface; capture and input through the stream when it runs."""

    def __init__(self, adb: AdbDevice, jar: Path) -> None:
        self.adb = adb
        self.serial = adb.serial
        self.jar = jar
        self.stream: ScrcpyStream | None = None
        self.path = "adb"  # what the last capture or action went through
        self.starts = 0
        self.losses = 0
        self._screen: tuple[int, int] | None = None
        self._last_action = 0.0
        self._looked_at = 0.0  # the last capture from the stream
        self._retry_at = 0.0
        self._backoff = Backoff(RETRY_FIRST_S, RETRY_MAX_S)
        self._lost = ""

    def __repr__(self) -> str:
        return f"StreamedDevice({self.serial!r})"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.adb, name)  # shell, packages, ...: adb's

    async def _live(self) -> ScrcpyStream | None:
        """The running stream, started (again) when its backoff allows; None: use adb."""
        if self.stream is not None and self.stream.dead:
            self.losses += 1
            self._lost = self.stream.dead
            self.stream = None
            self._retry_at = time.monotonic() + self._backoff.next_delay()
            log.warning("scrcpy_stream_lost", reason=self._lost, using="adb",
                        retry_in_s=round(self._retry_at - time.monotonic(), 2))
        if self.stream is not None or time.monotonic() < self._retry_at:
            return self.stream
        if self._screen is None:
            self._screen = await self.adb.window_size()
        stream = ScrcpyStream(self.adb.device, self.jar, timeout_s=self.adb.timeout_s)
        t0 = time.monotonic()
        try:
            with anyio.fail_after(START_TIMEOUT_S):
                await anyio.to_thread.run_sync(stream.start, abandon_on_cancel=True)
                await anyio.to_thread.run_sync(lambda: stream.frames.first_after(t0, START_TIMEOUT_S),
                                               abandon_on_cancel=True)  # the first frame
        except (ScrcpyError, TimeoutError) as exc:
            stream.close("start failed")
            self._retry_at = time.monotonic() + self._backoff.next_delay()
            log.warning("scrcpy_stream_unavailable", error=str(exc) or "timed out",
                        using="adb", retry_in_s=round(self._retry_at - time.monotonic(), 2))
            return None
        self.starts += 1
        self._backoff.reset()
        log.info("scrcpy_stream_started", first_frame_ms=round((time.monotonic() - t0) * 1000),
                 video=f"{stream.video_size[0]}x{stream.video_size[1]}", scid=f"{stream.scid:08x}")
        self.stream = stream
        return stream

    async def screenshot(self) -> Screenshot:
        stream = await self._live()
        if stream is not None and self._screen is not None:
            since, screen = self._last_action, self._screen
            # No action since the last look (a watcher's frame between episodes): the newest
            # settled frame is the screen now. After one: the fresh-frame rule.
            looked_since = self._looked_at > since
            self._looked_at = time.monotonic()
            try:
                frame = await anyio.to_thread.run_sync(
                    lambda: stream.frames.newest(self.adb.timeout_s) if looked_since
                    else stream.frame_after(since, self.adb.timeout_s),
                    abandon_on_cancel=True)
                rgb = frame.rgb
                if (rgb.shape[1], rgb.shape[0]) != screen:  # the video is rounded to 8 px
                    rgb = cv2.resize(rgb, screen, interpolation=cv2.INTER_LINEAR)
                self.path = "stream"
                return Screenshot(rgb, "stream")
            except ScrcpyError as exc:
                log.warning("scrcpy_capture_failed", error=str(exc), using="adb")
        self.path = "adb"
        return await self.adb.screenshot()

    async def _act(self, through_stream: Callable[[ScrcpyStream, tuple[int, int]], None],
                   through_adb: Callable[[], Any], what: str) -> None:
        stream = await self._live()
        try:
            if stream is not None and self._screen is not None:
                screen = self._screen
                try:
                    with anyio.fail_after(self.adb.timeout_s * 2):
                        await anyio.to_thread.run_sync(lambda: through_stream(stream, screen),
                                                       abandon_on_cancel=True)
                    self.path = "stream"
                    return
                except ScrcpyActionBroken as exc:  # part of it may have landed: never redone
                    raise DeviceError(f"{self.serial}: {what} broke on the stream: {exc}") \
                        from None
                except (ScrcpyError, TimeoutError) as exc:  # nothing was sent: adb does it
                    log.warning("scrcpy_action_failed", action=what, error=str(exc),
                                using="adb")
            self.path = "adb"
            await through_adb()
        finally:
            self._last_action = time.monotonic()

    async def tap(self, x: int, y: int) -> None:
        await self._act(lambda s, sc: s.tap(x, y, sc), lambda: self.adb.tap(x, y), "tap")

    async def long_press(self, x: int, y: int, duration_ms: int = 800) -> None:
        await self._act(lambda s, sc: s.long_press(x, y, duration_ms, sc),
                        lambda: self.adb.long_press(x, y, duration_ms), "long press")

    async def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int = 300) -> None:
        await self._act(lambda s, sc: s.swipe(x1, y1, x2, y2, duration_ms, sc),
                        lambda: self.adb.swipe(x1, y1, x2, y2, duration_ms), "swipe")

    async def key(self, keycode: int) -> None:
        await self._act(lambda s, sc: s.key(keycode), lambda: self.adb.key(keycode), "key")

    async def type_text(self, text: str) -> None:
        if text:
            await self._act(lambda s, sc: s.paste(text), lambda: self.adb.type_text(text),
                            "type")

    # Actions only adb can do: the next capture must still come from after them.
    async def start_app(self, package: str) -> None:
        try:
            await self.adb.start_app(package)
        finally:
            self._last_action = time.monotonic()

    async def clear_text(self) -> None:
        try:
            await self.adb.clear_text()
        finally:
            self._last_action = time.monotonic()

    async def close(self) -> None:
        if self.stream is not None:
            stream, self.stream = self.stream, None
            await anyio.to_thread.run_sync(stream.close)
