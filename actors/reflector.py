"""Reflection: did the last action do anything, and is the agent on track?

``ReflectorEngine`` (one per phone) holds the pixel checks and one episode's memory of
screens seen. On the frames before and after an action, cheapest first:

- **unchanged**: the pixel difference outside the status bar (its clock changes on its
  own) is below a few dozen pixels;
- **wrong_page**: the foreground app fell back to the launcher although the operation
  should not leave it, or the same screen (masked, coarsened hash) has been seen
  ``revisit_guard`` times.

A ``PixelVerdict`` says ``unsure`` when pixels cannot confirm the action did what was meant
(a tap that changed the screen, a revisited screen): then ``agent.reflection = "both"``
asks the planner's LLM judge. The pixel diff runs in a thread under the host's CPU
limiter, on OpenCV's ``absdiff`` when available (about 20x the numpy form at 1080x2400).

``ReflectorService`` answers ``ReflectRequest`` with a ``Reflection`` (and the app read
after) and is its one producer: a verdict the planner reached itself (loop guard,
completion check, unusable reply, LLM judge) comes with ``given`` and is published as is.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Protocol

import anyio
import numpy as np

from actors.capture import Captured
from actors.frames import FrameStore
from actors.rpc import Entries, Registered, ServiceActor
from devices.adb import Device
from protocol.messages import Msg, Reflection, ReflectRequest, Verdict
from protocol.operations import (
    GROUNDED_OPS,
    Back,
    Exit,
    OpenApp,
    Operation,
    SwipePoints,
    Wait,
    format_operation,
)
from runtime.actor import Publisher

try:  # opencv-python-headless is a dependency (rapidocr); numpy is the fallback
    import cv2

    HAVE_CV2 = True
except ImportError:  # pragma: no cover
    HAVE_CV2 = False

STATUS_BAR_FRAC = 0.04  # the top 4 % of the screen: clock, battery, notifications
DIFF_LEVEL = 24  # a channel difference above this counts the pixel as changed
UNCHANGED_MAX_PIXELS = 32  # at most this many changed pixels: "unchanged"
LAUNCHERS = ("launcher", "nexuslauncher", "launcher3")
# Operations whose right effect pixels cannot confirm (which page a tap opens).
TAPS: tuple[type, ...] = (*GROUNDED_OPS, SwipePoints)


def masked(rgb: np.ndarray) -> np.ndarray:
    return rgb[int(rgb.shape[0] * STATUS_BAR_FRAC):]


def changed_pixels(before: np.ndarray, after: np.ndarray) -> int:
    """Pixels that differ outside the status bar; a size change counts as all changed."""
    if before.shape != after.shape:
        return int(after.shape[0] * after.shape[1])
    if before is after:
        return 0
    if HAVE_CV2 and before.ndim == 3 and before.dtype == np.uint8:
        d = cv2.absdiff(np.ascontiguousarray(masked(before)),
                        np.ascontiguousarray(masked(after)))
        px = d.reshape(-1, d.shape[2])
        m = px[:, 0]
        for c in range(1, px.shape[1]):
            m = np.maximum(m, px[:, c])
        return int(np.count_nonzero(m > DIFF_LEVEL))
    a = masked(before).astype(np.int16)
    b = masked(after).astype(np.int16)
    return int((np.abs(a - b).max(axis=2) > DIFF_LEVEL).sum())


def screen_key(rgb: np.ndarray) -> str:
    """A hash of the screen without its status bar, coarsened so a blinking cursor or
    anti-aliasing noise does not make a revisited screen look new."""
    small = masked(rgb)[::8, ::8] // 32
    return hashlib.blake2b(np.ascontiguousarray(small).data, digest_size=12).hexdigest()


@dataclass(frozen=True)
class PixelVerdict:
    """What the pixel checks conclude about one step (a ``Reflection`` carries it)."""

    verdict: Verdict  # ok | unchanged | wrong_page
    reason: str = ""
    # Pixels cannot say whether the action did what was meant: a tap that changed the
    # screen may have opened the wrong page, and a revisited screen may be a fine detour.
    # agent.reflection = "both" asks the LLM judge then.
    unsure: bool = False


class ReflectorEngine:
    name = "reflector"

    def __init__(self, *, revisit_guard: int = 4,
                 limiter: anyio.CapacityLimiter | None = None) -> None:
        self.revisit_guard = revisit_guard
        self.limiter = limiter
        self._screens: Counter[str] = Counter()

    def reset(self) -> None:
        self._screens.clear()

    async def reflect(
        self, before: Captured, after: Captured, op: Operation, *,
        app_before: str = "", app_after: str = "",
    ) -> PixelVerdict:
        n, key = await self.measure(before, after)
        return self.judge(n, key, op, app_before=app_before, app_after=app_after)

    async def measure(self, before: Captured, after: Captured) -> tuple[int, str]:
        """(changed pixels, the after screen's key), off the loop."""
        def work() -> tuple[int, str]:
            same = before.frame.sha256 == after.frame.sha256 and bool(before.frame.sha256)
            n = 0 if same else changed_pixels(before.rgb, after.rgb)
            return n, screen_key(after.rgb)

        return await anyio.to_thread.run_sync(work, limiter=self.limiter)

    def judge(self, n: int, key: str, op: Operation, *, app_before: str = "",
              app_after: str = "") -> PixelVerdict:
        """The verdict for a measured step (and the screen counted as seen once more)."""
        self._screens[key] += 1
        if n <= UNCHANGED_MAX_PIXELS and not isinstance(op, Wait):
            return PixelVerdict("unchanged", f"the screen did not change after "
                                             f"{format_operation(op)} ({n} pixels differ)")
        if (app_before and app_after and app_before != app_after
                and not isinstance(op, OpenApp | Back | Exit)
                and any(s in app_after.lower() for s in LAUNCHERS)):
            return PixelVerdict("wrong_page", f"the app {app_before} was left for the home "
                                              "screen unexpectedly")
        if self._screens[key] >= self.revisit_guard:
            return PixelVerdict("wrong_page", f"this screen has now been seen "
                                              f"{self._screens[key]} times; the agent may be "
                                              "going in circles", unsure=True)
        return PixelVerdict("ok", f"{n} pixels changed", unsure=isinstance(op, TAPS))


class ReflectorEntry(Registered, Protocol):
    """What the reflector uses of a registered phone."""

    device: Device
    reflector: ReflectorEngine
    episode_id: str


class ReflectorService(ServiceActor[ReflectorEntry]):
    """Host-level: answers ``ReflectRequest`` with a ``Reflection`` (and the app after)."""

    name = "reflector"
    kinds = (ReflectRequest,)
    serve_timeout_s = 45.0

    def __init__(self, bus: Publisher, registry: Entries[ReflectorEntry], frames: FrameStore, *,
                 concurrency: int | None = None) -> None:
        super().__init__(bus, registry, concurrency=concurrency)
        self.frames = frames

    async def serve(self, entry: ReflectorEntry, req: Msg) -> Msg:
        assert isinstance(req, ReflectRequest)
        if entry.episode_id != req.episode_id:
            entry.reflector.reset()  # its memory (screens seen) is per episode
            entry.episode_id = req.episode_id
        if req.given is not None:  # the planner's own verdict: published as it is
            g = req.given
            return Reflection(verdict=g.verdict, reason=g.reason[:2000], source=g.source)
        if req.operation is None:
            raise ValueError("a ReflectRequest without a given verdict needs its operation")
        before_f, before = await self.frames.rgb(req.before_frame_id, req.device)
        after_f, after = await self.frames.rgb(req.after_frame_id, req.device)
        app_after = ""

        async def read_app() -> None:
            nonlocal app_after
            app_after = await entry.device.current_app()

        async with anyio.create_task_group() as tg:  # the adb call alongside the pixel diff
            tg.start_soon(read_app)
            n, key = await entry.reflector.measure(Captured(before_f, before, 0.0, 0.0),
                                                   Captured(after_f, after, 0.0, 0.0))
        verdict = entry.reflector.judge(n, key, req.operation, app_before=req.app_before,
                                        app_after=app_after)
        return Reflection(verdict=verdict.verdict, reason=verdict.reason[:2000],
                          app=app_after, source="pixels", unsure=verdict.unsure)
