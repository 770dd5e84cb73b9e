"""The phone's clock for what lasts a while on screen: a loading spinner, a toast.

On the wall clock (the default) a spinner of 0.4 s ends while the agent is still settling
or capturing, or just after: whether the agent sees it, and whether its next tap lands on
it, depends on how busy the host was. That made two runs of one seed take different steps
(12 of 43 episodes of seed 1 differed). ``StepClock`` is the repeatable one: the phone's
time moves only when its screen is read through adb (``screencap``), by ``frame_s`` each
time, one agent step's wait (``agent.settle_s``) and capture. The same actions and reads
then show the same screens, whatever the host's load. It is what the benchmarks use.
"""

from __future__ import annotations

import threading

# One agent step between two screen reads: the 0.3 s settle after an action and a
# capture, on the simulated phone.
FRAME_S = 0.5


class StepClock:
    """Phone time in screen reads: ``clock()`` is ``reads × frame_s``."""

    def __init__(self, frame_s: float = FRAME_S) -> None:
        if frame_s <= 0:
            raise ValueError(f"frame_s must be positive, not {frame_s}")
        self.frame_s = frame_s
        self._reads = 0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._reads * self.frame_s

    def tick(self) -> None:
        """One screen read."""
        with self._lock:
            self._reads += 1
