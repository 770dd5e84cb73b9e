"""A phone through its scrcpy stream while the stream runs, through adb otherwise.

``StreamedDevice`` is the ``Device`` the actors use when ``device.transport`` is
``scrcpy`` or ``auto``: screenshots are the stream's frames (devices/scrcpy.py's
fresh-frame rule: never a frame from before the last action), touches and keys go down
the control socket, text by the clipboard and a paste (no keyboard app). When the stream
dies (the server killed, USB dropped, an encoder error, a vendor's refusal), the same call
goes through adb at once, so no step is lost, and an action is never sent twice (below).
The stream is started again after a
backoff (1 s doubling to 16 s), so a phone is back on it within 30 s. Starting an app and
clearing a field go through adb but count as actions (the next frame is from after them).
Everything else (shell lines, packages, the app in front) is adb's (``AdbDevice``).

An action the stream may or may not have delivered is settled here, in the device, so that
no step is lost and none is done twice, whatever the caller (one operation may be several
calls: a type and its ENTER). Two cases:

- it broke half-way (``ScrcpyActionBroken``) or hung: a tap whose UP never went out did not
  land (a touch lands at its UP) and is done through adb at once; any other (a swipe's
  MOVEs, a key's DOWN, a paste without its ACK) is *uncertain*;
- it went out whole, but the stream died before showing it had been read (a frame decoded
  after it, with the stream still up): the server may have been killed with it unread.
  It is *uncertain* once the stream is found dead, at the next call.

An uncertain action is decided by the screen: adb's screenshot against the stream's last
frame from before it. Changed: it landed, and is not redone. Unchanged: it did not, and is
done through adb now. (An action that landed and changed nothing visible would be done
twice: a tap on nothing, a swipe on a page that cannot scroll; harmless, and logged.)

A phone that refuses injected input (a Xiaomi without "USB debugging (Security settings)")
kills the server on its first touch; its output says why (INJECT_EVENTS). The first action
on each new stream is therefore watched for a moment, and on that refusal the same call
goes through adb, which gives adb's own error (and fix); the stream stays for capture only.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import cv2
import numpy as np
import structlog

from devices.adb import AdbDevice, DeviceError, Screenshot
from devices.scrcpy import Frame, ScrcpyActionBroken, ScrcpyError, ScrcpyStream
from runtime.bus import Backoff

log = structlog.get_logger(__name__)

RETRY_FIRST_S, RETRY_MAX_S = 1.0, 16.0
START_TIMEOUT_S = 15.0
FIRST_ACTION_WATCH_S = 0.3  # a refused injection kills the server within ms of the touch
UNCERTAIN_SETTLE_S = 0.5  # before the screen decides an uncertain action: let it show
# The screen test: cells of 8x8 pixels (area means: the codec's noise averages out) whose
# colour moved by more than CHANGED_LEVEL; this many such cells is a change (a typed
# character is dozens of cells, the stream's noise none).
CELL_PX, CHANGED_LEVEL, CHANGED_CELLS = 8, 24, 4


@dataclass
class _Unconfirmed:
    """Stream actions not yet known to have been read by the server (several when no
    capture came between them: a type and its ENTER), settled together."""

    what: list[str]
    redo: list[Callable[[], Awaitable[Any]]]  # the same actions through adb, in order
    before: Frame | None  # the stream's newest frame when the first was sent
    stream: ScrcpyStream


def screen_changed(before: np.ndarray, after: np.ndarray) -> bool:
    """Whether ``after`` (any size) shows another screen than ``before``, beyond the
    difference of a stream frame and a PNG of the same screen."""
    h, w = before.shape[:2]
    if after.shape[:2] != (h, w):
        after = cv2.resize(after, (w, h), interpolation=cv2.INTER_AREA)
    cells = (max(1, w // CELL_PX), max(1, h // CELL_PX))
    a = cv2.resize(before, cells, interpolation=cv2.INTER_AREA).astype(np.int16)
    b = cv2.resize(after, cells, interpolation=cv2.INTER_AREA).astype(np.int16)
    moved = np.abs(a - b).max(axis=-1) > CHANGED_LEVEL
    return int(moved.sum()) >= CHANGED_CELLS


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
        self._decoded_before = 0.0  # the decode CPU of the streams that have ended
        self._screen: tuple[int, int] | None = None
        self._last_action = 0.0
        self._looked_at = 0.0  # the last capture from the stream
        self._retry_at = 0.0
        self._backoff = Backoff(RETRY_FIRST_S, RETRY_MAX_S)
        self._lost = ""
        self._unconfirmed: _Unconfirmed | None = None
        self._input_refused = False  # the phone refused the stream's input: actions by adb
        self._watch_next = True  # the first action on a new stream is watched (a refusal)
        self.captures: Counter[str] = Counter()  # "stream" | "adb": how each capture went
        self.actions: Counter[str] = Counter()  # ... and each action
        self.uncertain = 0  # actions the stream may not have delivered, settled by the screen
        self.redone = 0  # ... of which done again through adb (they had not landed)

    def __repr__(self) -> str:
        return f"StreamedDevice({self.serial!r})"

    @property
    def decode_cpu_s(self) -> float:
        """The host's thread CPU spent turning this phone's screen into pixels: every frame
        its streams decoded (the page animations' included) and adb's PNGs."""
        live = self.stream.decode_cpu_s if self.stream is not None else 0.0
        return self._decoded_before + live + self.adb.decode_cpu_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self.adb, name)  # shell, packages, ...: adb's

    async def _live(self) -> ScrcpyStream | None:
        """The running stream, started (again) when its backoff allows; None: use adb."""
        if self.stream is not None and self.stream.dead:
            dead, self.stream = self.stream, None
            self._decoded_before += dead.decode_cpu_s
            self.losses += 1
            self._lost = dead.dead or "gone"
            self._retry_at = time.monotonic() + self._backoff.next_delay()
            log.warning("scrcpy_stream_lost", reason=self._lost, using="adb",
                        retry_in_s=round(self._retry_at - time.monotonic(), 2))
        pending = self._unconfirmed
        if pending is not None and pending.stream.dead:
            self._unconfirmed = None
            try:
                await self._settle(pending, f"the stream died before it was read: "
                                            f"{pending.stream.dead}")
            except DeviceError:  # adb cannot reach the phone either (USB gone): kept, and
                self._unconfirmed = pending  # settled by a later call; this one fails as adb's
                raise
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
        self._watch_next = True
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
                if self._unconfirmed is not None and self._unconfirmed.stream is stream:
                    # a frame after it, the stream still up well past it: the server read it
                    self._unconfirmed = None
                self.path = "stream"
                self.captures["stream"] += 1
                return Screenshot(rgb, "stream")
            except ScrcpyError as exc:
                log.warning("scrcpy_capture_failed", error=str(exc), using="adb")
                await self._live()  # the stream is gone: an unread action is settled first
        self.path = "adb"
        self.captures["adb"] += 1
        return await self.adb.screenshot()

    async def _act(self, through_stream: Callable[[ScrcpyStream, tuple[int, int]], None],
                   through_adb: Callable[[], Awaitable[Any]], what: str, *,
                   lands_at_end: bool = False) -> None:
        """``lands_at_end``: the action does nothing until its last message (a tap's UP)."""
        stream = await self._live()
        try:
            if stream is not None and self._screen is not None and not self._input_refused:
                if await self._through_stream(stream, through_stream, through_adb, what,
                                              lands_at_end):
                    return
            self.path = "adb"
            self.actions["adb"] += 1
            await through_adb()
        finally:
            self._last_action = time.monotonic()

    async def _through_stream(self, stream: ScrcpyStream,
                              through_stream: Callable[[ScrcpyStream, tuple[int, int]], None],
                              through_adb: Callable[[], Awaitable[Any]], what: str,
                              lands_at_end: bool) -> bool:
        """The action on the stream; False: nothing went out, adb is to do it."""
        screen = self._screen
        assert screen is not None
        prior = self._unconfirmed if self._unconfirmed is not None \
            and self._unconfirmed.stream is stream else None
        self._unconfirmed = None
        pending = (_Unconfirmed([*prior.what, what], [*prior.redo, through_adb], prior.before,
                                stream) if prior is not None
                   else _Unconfirmed([what], [through_adb], stream.frames.latest, stream))
        try:
            with anyio.fail_after(self.adb.timeout_s * 2):
                await anyio.to_thread.run_sync(lambda: through_stream(stream, screen),
                                               abandon_on_cancel=True)
        except ScrcpyActionBroken as exc:  # part of it went out
            if lands_at_end and prior is None:  # its last message never went: it did not land
                log.warning("scrcpy_action_broken", action=what, error=str(exc),
                            landed=False, using="adb")
                self._count_redo(1)
                await through_adb()
                return True
            await self._settle(pending, f"it broke on the stream: {exc}")
            return True
        except TimeoutError:  # hung part-way (the socket full): what went out is unknown
            stream.close(f"{what} hung on the control socket")
            await self._live()  # counts the loss
            await self._settle(pending, f"it hung on the stream for "
                                        f"{self.adb.timeout_s * 2:g}s")
            return True
        except ScrcpyError as exc:  # nothing was sent: adb does it
            log.warning("scrcpy_action_failed", action=what, error=str(exc), using="adb")
            return False
        self.path = "stream"
        self.actions["stream"] += 1
        self._unconfirmed = pending
        if self._watch_next:
            self._watch_next = False
            await self._watch_first(stream, pending)
        return True

    async def _watch_first(self, stream: ScrcpyStream, pending: _Unconfirmed) -> None:
        """The first action on a new stream: a phone that refuses injected input kills the
        server on it; then the same call goes through adb (and fails as adb does there)."""
        died = await anyio.to_thread.run_sync(lambda: stream.wait_dead(FIRST_ACTION_WATCH_S),
                                              abandon_on_cancel=True)
        if not died or not stream.input_refused:
            return
        self._input_refused = True
        self._unconfirmed = None
        await self._live()  # the loss counted, its restart (for the screen) scheduled
        log.warning("scrcpy_input_refused", device=self.serial, action=pending.what[-1],
                    using="adb", fix='turn on "USB debugging (Security settings)"')
        self.actions["stream"] -= 1
        self.actions["adb"] += 1
        self.path = "adb"
        await pending.redo[-1]()  # the first on this stream: nothing before it is pending

    def _count_redo(self, n: int) -> None:
        self.uncertain += n
        self.redone += n
        self.actions["adb"] += n
        self.path = "adb"

    async def _settle(self, pending: _Unconfirmed, why: str) -> None:
        """An action the stream may not have delivered: the screen says whether it landed;
        if not, adb does it now (see the module's doc)."""
        await anyio.sleep(UNCERTAIN_SETTLE_S)
        shot = await self.adb.screenshot()
        landed = pending.before is None or await anyio.to_thread.run_sync(
            screen_changed, pending.before.rgb, shot.rgb)
        log.warning("scrcpy_action_uncertain", actions=pending.what, why=why,
                    landed=landed, using="adb" if not landed else "none",
                    known=pending.before is not None)
        if landed:
            self.uncertain += len(pending.redo)
            return
        self._count_redo(len(pending.redo))
        for redo in pending.redo:
            await redo()

    async def tap(self, x: int, y: int) -> None:
        await self._act(lambda s, sc: s.tap(x, y, sc), lambda: self.adb.tap(x, y), "tap",
                        lands_at_end=True)

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

    def expect_change(self) -> None:
        """The phone may have changed by other means (another adb client, the fleet's set-up
        between episodes): the next capture follows the fresh-frame rule from now."""
        self._last_action = time.monotonic()

    # Actions only adb can do: the next capture must still come from after them.
    async def _through_adb(self, action: Awaitable[None]) -> None:
        try:
            await action
        finally:
            self._last_action = time.monotonic()

    async def start_app(self, package: str) -> None:
        await self._through_adb(self.adb.start_app(package))

    async def clear_text(self) -> None:
        await self._through_adb(self.adb.clear_text())

    def close_stream(self) -> None:
        """Stop the phone's stream now (its sockets shut: its reader threads end), e.g. when
        the phone leaves the fleet; a later call starts it again."""
        if self.stream is not None:
            stream, self.stream = self.stream, None
            stream.close("closed")
            self._decoded_before += stream.decode_cpu_s

    async def close(self) -> None:
        await anyio.to_thread.run_sync(self.close_stream)
