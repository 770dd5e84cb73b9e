"""The planner's loop guard: the same operation chosen on the same frame, again and again.

This is the planner's own check, made before anything is executed (the reflector judges
executed actions from their before/after frames; it never sees a choice that was not
carried out). It publishes nothing: the planner hands a verdict to the reflector (a
``ReflectRequest`` with ``given``), which publishes it as the ``Reflection``.
"""

from __future__ import annotations

from collections import Counter

from protocol.messages import Frame
from protocol.operations import Operation, format_operation


class LoopGuard:
    """Counts (frame pixels, operation) choices within one episode."""

    def __init__(self, limit: int = 3) -> None:
        self.limit = limit
        self._choices: Counter[tuple[str, str]] = Counter()

    def note_choice(self, frame: Frame, op: Operation) -> int:
        """Count ``op`` chosen on ``frame``; returns how many times so far."""
        key = (frame.sha256, format_operation(op))
        self._choices[key] += 1
        return self._choices[key]

    def verdict(self, count: int, op: Operation) -> str | None:
        """Why ``op``, chosen ``count`` times on one screen, is a loop; None if it is not."""
        if count >= self.limit:
            return (f"{format_operation(op)} was chosen {count} times on the same screen "
                    "without progress; try something else")
        return None
