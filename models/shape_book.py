"""The input shapes a model has run, kept on disk, so that a later process prepares them when
perception starts instead of on its first steps.

OpenVINO prepares its CPU kernels once per input shape, and a shape's first run costs 1.5-3
times a later one (a 48x320 line 27 ms against 14 ms, a 960x448 frame 132 ms against 79 ms,
one thread). The compiled model itself is kept by OpenVINO's own cache (``CACHE_DIR``), but
the per-shape preparation is not: each process paid it again on its first few dozen steps,
which is what made a short run (`mobagent demo`, a host's first hour) cost more per step
than a long one. Prepared on one thread, a shape is prepared for every thread's requests
(the kernels are the compiled model's, not the request's).

One book per model file: a line per shape, appended the first time that shape runs (a
write per new shape, a set lookup per run). Several processes may append to the same file;
a shape written twice is read once. The book stops growing at ``MAX_SHAPES``."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import structlog

log = structlog.get_logger(__name__)

Shape = tuple[tuple[str, tuple[int, ...]], ...]  # (input name, dims) per input, in feed order

MAX_SHAPES = 512  # a book past this stops recording (settings that keep changing shapes)


def shape_of(feed: Mapping[str, np.ndarray]) -> Shape:
    return tuple((name, tuple(int(d) for d in np.shape(x))) for name, x in feed.items())


class ShapeBook:
    """The shapes one model has run (``path`` None: kept in memory only)."""

    def __init__(self, path: Path | None, seeds: Iterable[Shape] = ()) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._recorded: dict[Shape, None] = dict.fromkeys(self._load())  # ordered, unique
        # shapes worth preparing though never run here yet (a fresh install's): not written
        self._seeds = [s for s in seeds if s not in self._recorded]
        self._writable = path is not None

    def _load(self) -> list[Shape]:
        if self.path is None:
            return []
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        except OSError as exc:
            log.info("shape_book_unreadable", path=str(self.path), error=str(exc))
            return []
        shapes: list[Shape] = []
        for line in text.splitlines():
            try:  # a line cut short by a crash is skipped, not fatal
                got = json.loads(line)
                shapes.append(tuple((str(n), tuple(int(d) for d in dims)) for n, dims in got))
            except (ValueError, TypeError):
                continue
        return shapes

    def __len__(self) -> int:
        return len(self._recorded)

    def to_prepare(self) -> list[Shape]:
        """The recorded shapes in the order they were first run, then the seeds."""
        with self._lock:
            return [*self._recorded, *self._seeds]

    def note(self, feed: Mapping[str, np.ndarray]) -> None:
        """Record the feed's shape if it is new (called on every run: a dict lookup)."""
        shape = shape_of(feed)
        if shape in self._recorded:
            return
        with self._lock:
            if shape in self._recorded or len(self._recorded) >= MAX_SHAPES:
                return
            self._recorded[shape] = None
            if not self._writable:
                return
            assert self.path is not None
            line = json.dumps([[n, list(d)] for n, d in shape]) + "\n"
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # one short write in append mode: lines from several processes do not mix
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, line.encode())
                finally:
                    os.close(fd)
            except OSError as exc:  # a read-only cache: prepared from memory only
                self._writable = False
                log.info("shape_book_unwritable", path=str(self.path), error=str(exc))
