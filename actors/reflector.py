"""The reflector actor: did the last action do anything, and is the agent on track?

Deterministic checks, cheapest first, on the frames before and after an action:

- **unchanged**: the pixel difference outside the status bar (its clock changes on its
  own) is below a few dozen pixels;
- **loop**: the same operation chosen on the same frame ``loop_guard`` times;
- **wrong_page**: the foreground app changed although the operation should not leave it,
  or the same screen (masked pixel hash) has been seen ``revisit_guard`` times.

The completion check on ``Stop`` (one LLM call, through the policy) is also run from
here. Every verdict becomes a ``Reflection`` event and, when it is not ``ok``, feedback in
the planner's next prompt.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass

import anyio
import numpy as np

from actors.capture import Captured
from runtime.operations import Back, Exit, OpenApp, Operation, Wait, format_operation

STATUS_BAR_FRAC = 0.04  # the top 4 % of the screen: clock, battery, notifications
DIFF_LEVEL = 24  # a channel difference above this counts the pixel as changed
UNCHANGED_MAX_PIXELS = 32  # at most this many changed pixels: "unchanged"
LAUNCHERS = ("launcher", "nexuslauncher", "launcher3")


def masked(rgb: np.ndarray) -> np.ndarray:
    return rgb[int(rgb.shape[0] * STATUS_BAR_FRAC):]


def changed_pixels(before: np.ndarray, after: np.ndarray) -> int:
    """Pixels that differ outside the status bar; a size change counts as all changed."""
    if before.shape != after.shape:
        return int(after.shape[0] * after.shape[1])
    a = masked(before).astype(np.int16)
    b = masked(after).astype(np.int16)
    return int((np.abs(a - b).max(axis=2) > DIFF_LEVEL).sum())


def screen_key(rgb: np.ndarray) -> str:
    """A hash of the screen without its status bar, coarsened so a blinking cursor or
    anti-aliasing noise does not make a revisited screen look new."""
    small = masked(rgb)[::8, ::8] // 32
    return hashlib.blake2b(np.ascontiguousarray(small).data, digest_size=12).hexdigest()


@dataclass(frozen=True)
class Verdict:
    verdict: str  # ok | unchanged | wrong_page | loop
    reason: str = ""


class ReflectorActor:
    name = "reflector"

    def __init__(self, *, loop_guard: int = 3, revisit_guard: int = 4) -> None:
        self.loop_guard = loop_guard
        self.revisit_guard = revisit_guard
        self._choices: Counter[tuple[str, str]] = Counter()
        self._screens: Counter[str] = Counter()

    def reset(self) -> None:
        self._choices.clear()
        self._screens.clear()

    def note_choice(self, frame: Captured, op: Operation) -> int:
        """Count ``op`` chosen on ``frame``; returns how many times so far."""
        key = (frame.frame.sha256, format_operation(op))
        self._choices[key] += 1
        return self._choices[key]

    def loop_verdict(self, count: int, op: Operation) -> Verdict | None:
        if count >= self.loop_guard:
            return Verdict("loop", f"{format_operation(op)} was chosen {count} times on the "
                                   "same screen without progress; try something else")
        return None

    async def reflect(
        self, before: Captured, after: Captured, op: Operation, *,
        app_before: str = "", app_after: str = "",
    ) -> Verdict:
        def work() -> tuple[int, str]:
            return changed_pixels(before.rgb, after.rgb), screen_key(after.rgb)

        n, key = await anyio.to_thread.run_sync(work)
        self._screens[key] += 1
        if n <= UNCHANGED_MAX_PIXELS and not isinstance(op, Wait):
            return Verdict("unchanged", f"the screen did not change after "
                                        f"{format_operation(op)} ({n} pixels differ)")
        if (app_before and app_after and app_before != app_after
                and not isinstance(op, OpenApp | Back | Exit)
                and any(s in app_after.lower() for s in LAUNCHERS)):
            return Verdict("wrong_page", f"the app {app_before} was left for the home screen "
                                         "unexpectedly")
        if self._screens[key] >= self.revisit_guard:
            return Verdict("wrong_page", f"this screen has now been seen {self._screens[key]} "
                                         "times; the agent may be going in circles")
        return Verdict("ok", f"{n} pixels changed")
