"""Capture: one phone's screenshots as ``Frame`` messages, and the service that takes them.

``CaptureEngine`` (one per phone) takes a screenshot through the ``Device`` (raw path by
default, PNG fallback: ``devices/adb.py``), hashes the pixels, flags a frame identical to
the previous one, and encodes it once (JPEG or PNG, off the loop) when asked: the bytes of
``Frame.data`` and the watchers' ``Screen`` are made only while something reads them
(``CaptureService``, actors/watching.py). A frame whose pixels are the previous one's
(compared whole: ``same_pixels``) takes its digest and encodings instead of making them
again, and makes only what it wants that the previous one lacked (a phone waiting, or
streaming between episodes, costs a comparison, not a hash and three JPEGs);
this relies on a frame's pixels not being written after capture, which nothing does (the
``FrameStore`` shares them with perception and the reflector, keyed by the digest).

A black frame is told apart (``black_area``): the app area black under drawn system bars,
or the whole frame black while the phone says its display is on, is a secure window
(FLAG_SECURE), flagged ``black``; a whole black frame from a phone that says it sleeps is a
display that is off: the phone is woken (KEYCODE_WAKEUP) and captured again, and that frame
is flagged ``display_off`` (with ``wake_failed`` when it did not wake).
``small_views`` makes the LLM's view and the watchers' ``Screen`` from the pixels capture
already holds.

``CaptureService`` answers ``FrameRequest`` with a ``Frame``: it keeps the decoded pixels in
the host's ``FrameStore`` (so perception and the reflector never decode that frame again)
and, when asked, adds the foreground app and the OCR lines (read through ``TextReader``,
under perception's worker limit), so no other service reaches a device or OCR for them.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace
from typing import Literal, Protocol, runtime_checkable

import anyio
import cv2
import msgspec
import numpy as np
import structlog

from actors.frames import FrameStore, encode_frame
from actors.rpc import Entries, Registered, ServiceActor
from actors.watching import Leases
from devices.adb import Device
from devices.adb_output import Wakefulness
from devices.codecs import encode_jpeg, shrink
from protocol.messages import Frame, FrameRequest, Msg, Screen, TextLine
from runtime import topics
from runtime.actor import Publisher
from runtime.cpu_ledger import CpuLedger, charging, stage

log = structlog.get_logger(__name__)

BLACK_MEAN = 6.0  # mean brightness below this (and almost no variation) is a black frame
# The app area, as fractions of the frame's height: below the status bar (24 dp, about 3 %
# of a phone's height), above the navigation bar (48 dp with buttons, about 5 %; 16 dp with
# gestures). The bars are read in the strips above and below it.
APP_TOP, APP_BOTTOM = 0.06, 0.92
BAR_TOP, BAR_BOTTOM = 0.035, 0.94
KEY_WAKEUP = 224  # wakes a sleeping phone, does nothing to an awake one
WAKE_SETTLE_S = 0.5  # from the wake key to a frame the display has drawn
BlackArea = Literal["frame", "app"]


@dataclass(frozen=True)
class Captured:
    """A frame as the step loop uses it: the bus message plus the pixels."""

    frame: Frame
    rgb: np.ndarray
    capture_s: float
    encode_s: float
    view: bytes = b""  # the frame as the LLM gets it (see ``small_views``), when asked for
    screen: bytes = b""  # the small JPEG for watchers (``Screen``), when ``screen_side`` > 0

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


def is_black(img: np.ndarray, step: int = 8) -> bool:
    """Mean brightness below ``BLACK_MEAN`` and almost no variation, over every ``step``-th
    pixel each way, all channels alike. OpenCV's one-pass statistics per channel,
    combined: numpy's mean and std took three passes over the sample."""
    sample = img[::step, ::step] if step > 1 else img
    means, stds = (v.ravel() for v in cv2.meanStdDev(sample))
    mean = float(means.mean())
    var = float((stds ** 2 + means ** 2).mean()) - mean ** 2
    return mean < BLACK_MEAN and var < 16.0  # std < 4


def black_area(img: np.ndarray, step: int = 8) -> BlackArea | None:
    """``frame``: all of it black; ``app``: the app area black while a system bar is drawn
    (what a FLAG_SECURE window looks like in a screenshot); None: not black.

    ``img`` is the frame, read at every ``step``-th pixel (the bars at every ``step // 4``-th),
    or a view shrunk from it (area-averaged: every pixel counts), read whole with ``step``
    1: capture decides on the LLM's view when it makes one (``encode_capture``)."""
    if is_black(img, step):
        return "frame"
    h = img.shape[0]
    if not is_black(img[int(h * APP_TOP):int(h * APP_BOTTOM)], step):
        return None
    bar = max(1, step // 4)
    top, bottom = img[:max(1, int(h * BAR_TOP)):bar, ::bar], img[int(h * BAR_BOTTOM)::bar, ::bar]
    return "app" if not (is_black(top, 1) and is_black(bottom, 1)) else "frame"


@runtime_checkable
class Wakeable(Protocol):
    """A device that says whether its display is on, and takes a key (``AdbDevice``)."""

    async def wakefulness(self) -> Wakefulness | None: ...
    async def key(self, keycode: int) -> None: ...


SCREEN_QUALITY = 70  # the watchers' small JPEG: a tile or a timeline image, not for reading


def small_views(rgb: np.ndarray, view_side: int, view_quality: int,
                screen_side: int) -> tuple[bytes, bytes]:
    """The LLM's view (``view_side`` > 0) and the watchers' screen (``screen_side`` > 0).

    Both are made here, from pixels capture already holds, so no watcher decodes a full
    frame to show it small (a dashboard took 8-10 ms per JPEG frame, 25-28 ms per PNG one;
    bench/dashboard.py prints both). Beside a view at least as large, the screen is
    resized from the view's pixels with a plain bilinear step (about 0.1 ms: the view is
    already area-averaged, so the last < 3x step hardly aliases); else it is area-averaged
    from the frame (``shrink``, about 2.5 ms on a 1080x2400 frame)."""
    view, screen, _ = views_and_pixels(rgb, view_side, view_quality, screen_side)
    return view, screen


def views_and_pixels(rgb: np.ndarray, view_side: int, view_quality: int,
                     screen_side: int) -> tuple[bytes, bytes, np.ndarray | None]:
    """``small_views``, and the view's pixels (None without a view)."""
    view = screen = b""
    small: np.ndarray | None = None
    if view_side > 0:
        small = shrink(rgb, view_side)
        view = encode_jpeg(small, view_quality)
    if screen_side > 0:
        if small is not None and max(small.shape[:2]) >= screen_side:
            h, w = small.shape[:2]
            scale = screen_side / max(h, w)
            size = (max(1, round(w * scale)), max(1, round(h * scale)))
            thumb = cv2.resize(small, size, interpolation=cv2.INTER_LINEAR)
        else:
            thumb = shrink(rgb, screen_side)
        screen = encode_jpeg(thumb, SCREEN_QUALITY)
    return view, screen, small


SAME_ROWS_STEP = 64  # same_pixels' first look: every 64th row
SAME_BAND = 64  # ... then the whole frame, this many rows at a time


def same_pixels(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two frames hold exactly the same pixels. A changed screen almost always
    differs in one of every 64th row, which costs about 0.03 ms on a 1080x2400 frame to
    compare; only frames that pass that are compared whole (about 1.7 ms, a third of
    hashing them), band by band, stopping at the first difference."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not np.array_equal(a[::SAME_ROWS_STEP], b[::SAME_ROWS_STEP]):
        return False
    return all(np.array_equal(a[i:i + SAME_BAND], b[i:i + SAME_BAND])
               for i in range(0, a.shape[0], SAME_BAND))


@dataclass(frozen=True)
class Encoded:
    """What capture's ``encode`` stage makes of a frame (``encode_capture``)."""

    sha: str
    dark: BlackArea | None
    data: bytes
    view: bytes
    screen: bytes


def encode_capture(rgb: np.ndarray, png: bytes, *, fmt: Literal["png", "jpeg"], quality: int,
                   view_side: int, view_quality: int, screen_side: int,
                   data: bool = True) -> Encoded:
    """A captured frame's digest, black area, encoding (``png``: the phone's PNG, when it
    sent one, is already that; else made only with ``data``) and small views: capture's
    ``encode`` stage. The black area is read on the LLM's view when there is one (every
    pixel of a 1024-px image, area-averaged: a third of the full frame's sampled read); else
    on the frame. ``bench/codecs.py`` (job ``capture``) times this against the former stage.

    Tried and left: converting a JPEG frame to OpenCV's order once (BGRA) for all its
    JPEGs made the same bytes and measured 3 % less alone, but in the fleet benchmark
    (frames fresh from the phone, OCR on the other core) the conversion took 2.2 ms
    instead of 0.5 and the stage grew from 15.9 to 17.9 ms per frame."""
    sha = pixel_sha(rgb)
    encoded = png if fmt == "png" and png else encode_frame(rgb, fmt, quality) if data else b""
    view, screen, small = views_and_pixels(rgb, view_side, view_quality, screen_side)
    dark = black_area(rgb) if small is None else black_area(small, 1)
    return Encoded(sha, dark, encoded, view, screen)


def completed(enc: Encoded, rgb: np.ndarray, *, fmt: Literal["png", "jpeg"], quality: int,
              screen_side: int, data: bool) -> Encoded:
    """``enc`` (a frame with the same pixels) with what this capture wants and it lacks:
    the encoding (``data``) or the screen (``screen_side`` > 0); the rest is reused."""
    if data and not enc.data:
        enc = replace(enc, data=encode_frame(rgb, fmt, quality))
    if screen_side > 0 and not enc.screen:
        enc = replace(enc, screen=views_and_pixels(rgb, 0, 0, screen_side)[1])
    return enc


class CaptureEngine:
    """Frames of one device on request (``capture``); ``previous`` is the last one taken."""

    name = "capture"

    def __init__(
        self, device: Device, *, fmt: Literal["png", "jpeg"] = "jpeg", quality: int = 80,
        timeout_s: float = 20.0, limiter: anyio.CapacityLimiter | None = None,
        screen_side: int = 0, ledger: CpuLedger | None = None,
    ) -> None:
        self.device = device
        self.ledger = ledger  # hashing and encoding each frame: its ``encode`` CPU
        self.screen_side = screen_side  # > 0: a capture asked for it makes a ``Screen`` JPEG
        self.limiter = limiter  # bounds the hashing/encoding threads shared by many phones
        self.fmt = fmt
        self.quality = quality
        self.timeout_s = timeout_s
        self.previous: Captured | None = None
        # The last frame's pixels, how it was encoded and what that made: a frame with the
        # same pixels, encoded the same way, takes it instead of being hashed and encoded.
        self._last: tuple[np.ndarray, tuple[object, ...], Encoded] | None = None
        self.count = 0
        self.wake_settle_s = WAKE_SETTLE_S
        self._decoded = 0.0  # the device's decode CPU already on the ledger

    async def capture(self, *, episode_id: str = "", step: int = 0, view_side: int = 0,
                      view_quality: int = 85, wake: bool = True, screen: bool = True,
                      data: bool = True) -> Captured:
        """A frame of the phone; a black one is told apart (see the module's doc), and a
        sleeping phone woken, unless ``wake`` is False (the idle stream between episodes
        leaves a phone asleep: its black frame is flagged ``black`` unasked). ``screen``:
        make the watchers' ``Screen`` JPEG (with ``screen_side``); ``data``: the encoding in
        ``Frame.data`` (a phone's PNG, which costs nothing, is kept either way)."""
        take = (episode_id, step, view_side, view_quality, screen, data)
        cap, dark = await self._take(*take)
        device = self.device
        if not wake or dark != "frame" or not isinstance(device, Wakeable) \
                or await self._display(device) in (None, "awake"):
            return cap  # not black, or black with the display on: a secure window
        log.info("capture_display_off", device=device.serial)
        with anyio.fail_after(self.timeout_s):
            await device.key(KEY_WAKEUP)
        await anyio.sleep(self.wake_settle_s)
        cap, dark = await self._take(*take)
        flags = [*cap.frame.flags, "display_off"]
        if dark == "frame" and await self._display(device) not in (None, "awake"):
            flags = [f for f in flags if f != "black"] + ["wake_failed"]
        cap = replace(cap, frame=msgspec.structs.replace(cap.frame, flags=flags))
        self.previous = cap
        return cap

    async def _display(self, device: Wakeable) -> Wakefulness | None:
        """The phone's word on its display (None when it cannot say)."""
        try:
            with anyio.fail_after(self.timeout_s):
                return await device.wakefulness()
        except Exception as exc:
            log.info("capture_wakefulness_unknown", error=f"{type(exc).__name__}: {exc}")
            return None

    async def _take(self, episode_id: str, step: int, view_side: int, view_quality: int,
                    screen: bool, data: bool) -> tuple[Captured, BlackArea | None]:
        t0 = time.perf_counter()
        with anyio.fail_after(self.timeout_s):
            shot = await self.device.screenshot()
        t1 = time.perf_counter()
        rgb = shot.rgb
        # The host's decode of the phone's screen (a PNG's, or every frame of its stream,
        # decoded in the stream's own thread) on the ledger as ``decode``, since the last look.
        decoded = getattr(self.device, "decode_cpu_s", None)
        if self.ledger is not None and isinstance(decoded, float) and decoded > self._decoded:
            self.ledger.add(self.device.serial, "decode", decoded - self._decoded)
            self._decoded = decoded

        how = (self.fmt, self.quality, view_side, view_quality)
        last = self._last
        screen_side = self.screen_side if screen else 0

        def work() -> Encoded:
            with charging(self.ledger, self.device.serial), stage("encode"):
                if last is not None and last[1] == how and same_pixels(last[0], rgb):
                    # the same pixels encode to the same bytes: made once, what this capture
                    # wants more (a watcher came) made now
                    return completed(last[2], rgb, fmt=self.fmt, quality=self.quality,
                                     screen_side=screen_side, data=data)
                return encode_capture(rgb, shot.png, fmt=self.fmt, quality=self.quality,
                                      view_side=view_side, view_quality=view_quality,
                                      screen_side=screen_side, data=data)

        with anyio.fail_after(self.timeout_s):
            enc = await anyio.to_thread.run_sync(work, limiter=self.limiter)
        self._last = (rgb, how, enc)
        sha, dark, view = enc.sha, enc.dark, enc.view
        flags: list[str] = []
        if self.previous is not None and self.previous.frame.sha256 == sha:
            flags.append("identical")
        if dark is not None:
            flags.append("black")
        self.count += 1
        frame = Frame(
            device=self.device.serial, episode_id=episode_id, step=step,
            frame_id=f"{sha[:12]}-{self.count}", sha256=sha, width=shot.width,
            height=shot.height, format=self.fmt, data=enc.data, flags=flags,
            capture_path=shot.path,
        )
        captured = Captured(frame, rgb, t1 - t0, time.perf_counter() - t1, view,
                            enc.screen if screen else b"")
        self.previous = captured
        return captured, dark


class TextReader(Protocol):
    """Where capture gets a frame's OCR lines: the host's ``PerceptionEngine``, or
    ``RemotePerception`` (workers elsewhere, ``actors/perception_remote.py``)."""

    async def read_lines(self, captured: Captured, device: str = "") -> list[TextLine]: ...


class CaptureEntry(Registered, Protocol):
    """What capture uses of a registered phone."""

    device: Device
    capture: CaptureEngine
    latest_frame: str


class CaptureService(ServiceActor[CaptureEntry]):
    """Host-level: answers ``FrameRequest`` with a ``Frame`` from the device's engine.

    What only watchers read is made only while one reads it (``leases``,
    actors/watching.py): the ``Screen`` while a screens lease names the phone, the encoding
    in the published ``Frame.data`` while a frames lease does or the asker says it needs it
    (``FrameRequest.data``: it is not on this host). The frame store keeps the pixels, so a
    reader on this host gets the bytes from there when it needs them (``FrameStore.encoded``).
    """

    name = "capture"
    kinds = (FrameRequest,)
    serve_timeout_s = 45.0
    screen_timeout_s = 2.0

    def __init__(self, bus: Publisher, registry: Entries[CaptureEntry], frames: FrameStore,
                 perception: TextReader, *, concurrency: int | None = None,
                 app_timeout_s: float = 15.0, leases: Leases | None = None) -> None:
        super().__init__(bus, registry, concurrency=concurrency)
        self.frames = frames
        self.perception = perception
        self.app_timeout_s = app_timeout_s
        self.leases = leases if leases is not None else Leases()
        self.screens_caught_up = 0  # screens published for a new watcher from held frames

    async def serve(self, entry: CaptureEntry, req: Msg) -> Msg:
        assert isinstance(req, FrameRequest)
        app = ""
        failed: list[Exception] = []  # raised as themselves, not as a task group's group

        async def read_app() -> None:
            nonlocal app
            try:
                with anyio.fail_after(self.app_timeout_s):
                    app = await entry.device.current_app()
            except Exception as exc:
                failed.append(exc)

        cap: Captured | None = None
        screen = entry.capture.screen_side > 0 and self.leases.screens(req.device)
        data = req.data or self.leases.frames(req.device)
        async with anyio.create_task_group() as tg:  # the adb call alongside the screenshot
            if req.app:
                tg.start_soon(read_app)
            try:
                cap = await entry.capture.capture(episode_id=req.episode_id, step=req.step,
                                                  view_side=req.view_side,
                                                  view_quality=req.view_quality,
                                                  wake=req.purpose != "stream",
                                                  screen=screen, data=data)
            except Exception as exc:
                failed.insert(0, exc)
                tg.cancel_scope.cancel()
        if failed:
            raise failed[0]
        assert cap is not None
        # Kept before the read: a remote reader's request takes its bytes from the store.
        self.frames.put(cap.frame, cap.rgb, cap.view, quality=entry.capture.quality,
                        transient=req.purpose == "read")
        lines = await self.perception.read_lines(cap, req.device) if req.ocr else []
        frame = msgspec.structs.replace(cap.frame, app=app, lines=lines)
        self.frames.put(frame)
        entry.latest_frame = frame.frame_id
        if cap.screen:
            await self.publish_screen(frame, cap.screen)
        # A phone's PNG kept while nobody reads it stays here: the bus copy goes without it.
        return frame if data or not frame.data else msgspec.structs.replace(frame, data=b"")

    async def show_latest(self, device: str = "") -> None:
        """A new watcher's screens at once: the ``Screen`` of each phone's latest frame
        ("": every phone this host holds one of), made from the pixels the frame store
        holds, so a dashboard opened after the phones ran shows every one at once."""
        for serial in [device] if device else self.frames.devices():
            entry = self.registry.get(serial)
            held = self.frames.latest(serial)
            if entry is None or held is None or entry.capture.screen_side <= 0:
                continue
            frame, rgb = held
            engine = entry.capture

            def small(rgb: np.ndarray = rgb, engine: CaptureEngine = engine) -> bytes:
                with charging(engine.ledger, engine.device.serial), stage("encode"):
                    return views_and_pixels(rgb, 0, 0, engine.screen_side)[1]

            with anyio.fail_after(engine.timeout_s):
                data = await anyio.to_thread.run_sync(small, limiter=engine.limiter)
            await self.publish_screen(frame, data)
            self.screens_caught_up += 1

    async def publish_screen(self, frame: Frame, data: bytes) -> None:
        """The frame's ``Screen`` for watchers: QoS 0 and best effort (a watcher misses one
        screen at worst; the step never waits on it for long, nor fails by it)."""
        screen = Screen(device=frame.device, episode_id=frame.episode_id, step=frame.step,
                        correlation_id=frame.correlation_id, trace_id=frame.trace_id,
                        span_id=frame.span_id, frame_id=frame.frame_id, width=frame.width,
                        height=frame.height, data=data, flags=frame.flags)
        try:
            with anyio.fail_after(self.screen_timeout_s):
                await self.bus.publish(topics.device_screen(frame.device), screen, qos=0)
        except Exception as exc:
            log.debug("screen_publish_failed", device=frame.device,
                      error=f"{type(exc).__name__}: {exc}")
