"""Where perception's CPU goes: thread CPU time per device and stage (``CpuLedger``).

The work is done in worker threads, several phones' at once, so a process clock or a
wall-clock share cannot say whose it was. Instead the thread that does a piece of work for
a phone opens ``charging(ledger, device)`` around it, and the code inside marks its parts
with ``stage(name)``: each part's ``time.thread_time()`` (the CPU this thread used, not the
time it waited for a core) goes to that device and stage. Stages nest and are exclusive: a
stage's own time leaves out the stages inside it, and time inside ``charging`` but in no
stage is ``other``, so a device's stages add up to exactly what its charged regions cost.
Outside ``charging`` ``stage`` costs one thread-local look-up and records nothing.

``note(name, amount)`` adds a count to the device's tally (lines recognised, detector input
pixels) beside the seconds. onnxruntime runs a model on the calling thread only with one
intra-op thread (``perception.ocr.threads = 1``); with more, its pool threads' CPU is not
counted here.

Stages used: ``detect`` (the text detector, its input resize included), ``recognize`` (line
crops, classifier and recogniser), ``band_diff`` (comparing a frame with the phone's
previous one and merging the kept lines), ``icons`` (icon proposals), ``match`` (matching a
query against lines or icons), ``encode`` (hashing and encoding a captured frame, encoding
for a grounder or a chooser), ``decode`` (a frame's bytes to pixels) and ``other``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

STAGES = ("detect", "recognize", "band_diff", "icons", "match", "encode", "decode", "other")


class CpuLedger:
    """Running totals of thread CPU seconds per (device, stage), and counts per (device,
    name); thread-safe. A reader takes differences between two ``snapshot``s."""

    def __init__(self) -> None:
        self._seconds: dict[str, dict[str, float]] = {}
        self._counts: dict[str, dict[str, float]] = {}
        self._lock = threading.Lock()

    def add(self, device: str, stage: str, seconds: float) -> None:
        with self._lock:
            per = self._seconds.setdefault(device, {})
            per[stage] = per.get(stage, 0.0) + seconds

    def count(self, device: str, name: str, amount: float) -> None:
        with self._lock:
            per = self._counts.setdefault(device, {})
            per[name] = per.get(name, 0.0) + amount

    def stages(self, device: str) -> dict[str, float]:
        """The device's CPU seconds so far, by stage (a copy)."""
        with self._lock:
            return dict(self._seconds.get(device, {}))

    def counts(self, device: str) -> dict[str, float]:
        with self._lock:
            return dict(self._counts.get(device, {}))

    def total(self, device: str) -> float:
        """The device's CPU seconds so far, all stages."""
        with self._lock:
            return sum(self._seconds.get(device, {}).values())

    def devices(self) -> list[str]:
        with self._lock:
            return list(self._seconds)

    def snapshot(self) -> dict[str, dict[str, float]]:
        """Every device's seconds by stage (copies)."""
        with self._lock:
            return {d: dict(per) for d, per in self._seconds.items()}


class _Open:
    """A stage being timed: when it started, and the seconds of the stages inside it."""

    __slots__ = ("start", "inner")

    def __init__(self) -> None:
        self.start = time.thread_time()
        self.inner = 0.0


class _Charge:
    """The open ``charging`` region of a thread: its ledger, device and stage stack."""

    __slots__ = ("ledger", "device", "stack")

    def __init__(self, ledger: CpuLedger, device: str) -> None:
        self.ledger = ledger
        self.device = device
        self.stack: list[_Open] = []


_local = threading.local()


def _current() -> _Charge | None:
    return getattr(_local, "charge", None)


@contextmanager
def charging(ledger: CpuLedger | None, device: str) -> Iterator[None]:
    """Charge this thread's CPU inside the block to ``device`` on ``ledger`` (None: do
    nothing). A region opened inside another one is part of it (the outer one's device)."""
    if ledger is None or _current() is not None:
        yield
        return
    charge = _Charge(ledger, device)
    _local.charge = charge
    try:
        with stage("other"):
            yield
    finally:
        _local.charge = None


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Mark the block as stage ``name`` of the current charge (outside one: nothing)."""
    charge = _current()
    if charge is None:
        yield
        return
    opened = _Open()
    charge.stack.append(opened)
    try:
        yield
    finally:
        took = time.thread_time() - opened.start
        charge.stack.pop()
        charge.ledger.add(charge.device, name, max(0.0, took - opened.inner))
        if charge.stack:
            charge.stack[-1].inner += took


def note(name: str, amount: float) -> None:
    """Add ``amount`` to the current charge's count ``name`` (outside one: nothing)."""
    charge = _current()
    if charge is not None:
        charge.ledger.count(charge.device, name, amount)
