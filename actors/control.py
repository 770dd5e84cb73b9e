"""What the user sends a running agent on its control topic: approvals, answers and steers.

The agent files each control message here as it arrives; the episode takes them out through
this small surface (a steer once, an approval for its step, the oldest answer), waiting at
most a given time for one that has not come yet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio

from protocol.messages import Answer, Approve

T = TypeVar("T")


class ControlInbox:
    """The control messages of one episode, in arrival order."""

    def __init__(self) -> None:
        self._approvals: list[Approve] = []
        self._answers: list[Answer] = []
        self._steers: list[str] = []
        self._arrived = anyio.Event()

    def clear(self) -> None:
        """Forget what an earlier episode left unread."""
        self._approvals.clear()
        self._answers.clear()
        self._steers.clear()

    def add(self, msg: Approve | Answer | str) -> None:
        """File one message (a steer is its text) and wake a waiting episode."""
        if isinstance(msg, Approve):
            self._approvals.append(msg)
        elif isinstance(msg, Answer):
            self._answers.append(msg)
        else:
            self._steers.append(msg)
        self._arrived.set()

    def take_steers(self) -> list[str]:
        """Every steer sent since the last call, oldest first."""
        steers, self._steers = self._steers, []
        return steers

    async def approval(self, step: int, timeout_s: float) -> Approve | None:
        """The first approval for ``step`` (or for any step: ``step`` 0), or None after
        ``timeout_s``."""
        def pick() -> Approve | None:
            for msg in self._approvals:
                if msg.step in (0, step):
                    self._approvals.remove(msg)
                    return msg
            return None
        return await self._wait(pick, timeout_s)

    async def answer(self, timeout_s: float) -> Answer | None:
        """The oldest unread answer, or None after ``timeout_s``."""
        return await self._wait(lambda: self._answers.pop(0) if self._answers else None,
                                timeout_s)

    async def _wait(self, pick: Callable[[], T | None], timeout_s: float) -> T | None:
        with anyio.move_on_after(timeout_s):
            while (got := pick()) is None:
                self._arrived = anyio.Event()
                await self._arrived.wait()
            return got
        return None
