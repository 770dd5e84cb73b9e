"""Idempotency: QoS 1 means "at least once", so a handler remembers what it has seen."""

from __future__ import annotations

from cachetools import LRUCache


class SeenIds:
    """The last ``capacity`` ids, least recently seen forgotten first (a bounded set, not a
    cache of values: cachetools' LRU map does the bookkeeping)."""

    def __init__(self, capacity: int = 10_000) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._ids: LRUCache[str, None] = LRUCache(capacity)

    def first_time(self, id_: str) -> bool:
        """True the first time ``id_`` is seen (and remembers it); False for a repeat."""
        if id_ in self._ids:
            self._ids[id_]  # a repeat counts as recent use
            return False
        self._ids[id_] = None
        return True

    def __contains__(self, id_: object) -> bool:
        return id_ in self._ids

    def __len__(self) -> int:
        return len(self._ids)
