"""Idempotency: QoS 1 means "at least once", so a handler remembers what it has seen."""

from __future__ import annotations

from collections import OrderedDict


class SeenIds:
    """The last ``capacity`` ids, oldest forgotten first."""

    def __init__(self, capacity: int = 10_000) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._ids: OrderedDict[str, None] = OrderedDict()

    def first_time(self, id_: str) -> bool:
        """True the first time ``id_`` is seen (and remembers it); False for a repeat."""
        if id_ in self._ids:
            self._ids.move_to_end(id_)
            return False
        self._ids[id_] = None
        if len(self._ids) > self.capacity:
            self._ids.popitem(last=False)
        return True

    def __contains__(self, id_: object) -> bool:
        return id_ in self._ids

    def __len__(self) -> int:
        return len(self._ids)
