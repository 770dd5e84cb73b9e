"""A bounded pool of worker slots in which urgent work goes first.

Perception's pool: grounding is urgent (a planner waits for it), a speculative read is
background work (it only saves a later cache miss). A read cannot be interrupted once it
runs in a worker thread, so "gives way" means: background work starts only on a free slot
with no urgent work waiting, and urgent work never waits behind background work: when
every slot is taken and some by background work, it takes one slot more (the thread pool
is briefly one over) rather than queue behind a read it does not need.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio


class PriorityPool:
    """``size`` slots; ``priority=False`` is one FIFO queue for all (a plain semaphore)."""

    def __init__(self, size: int, *, priority: bool = True) -> None:
        self.size = max(1, size)
        self.priority = priority
        self.running = {True: 0, False: 0}  # by urgent
        self.overflows = 0  # urgent work that started beside background work over ``size``
        self._waiting: deque[tuple[bool, anyio.Event]] = deque()

    @property
    def busy(self) -> int:
        return self.running[True] + self.running[False]

    async def acquire(self, urgent: bool) -> None:
        item = (urgent, anyio.Event())
        self._waiting.append(item)
        self._dispatch()
        try:
            await item[1].wait()
        except BaseException:  # cancelled: withdraw, or hand back a slot granted meanwhile
            if item[1].is_set():
                self.release(urgent)
            else:
                self._waiting.remove(item)
            raise

    def release(self, urgent: bool) -> None:
        self.running[urgent] -= 1
        self._dispatch()

    @asynccontextmanager
    async def slot(self, urgent: bool) -> AsyncIterator[None]:
        await self.acquire(urgent)
        try:
            yield
        finally:
            self.release(urgent)

    def _grant(self, item: tuple[bool, anyio.Event]) -> None:
        self._waiting.remove(item)
        self.running[item[0]] += 1
        item[1].set()

    def _dispatch(self) -> None:
        if not self.priority:
            while self._waiting and self.busy < self.size:
                self._grant(self._waiting[0])
            return
        for item in [w for w in self._waiting if w[0]]:
            if self.running[True] >= self.size:
                break
            if self.busy >= self.size:
                self.overflows += 1
            self._grant(item)
        if any(urgent for urgent, _ in self._waiting):
            return
        while self._waiting and self.busy < self.size:
            self._grant(self._waiting[0])
