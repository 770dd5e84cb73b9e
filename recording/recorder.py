"""The recorder: every episode's events on disk, as the HTML report reads them.

Layout under the run directory::

    DIR/<episode_id>/events.jsonl        one JSON object per message (arrival order)
    DIR/<episode_id>/frames/<step>-<frame_id>.<ext>          Frame images
    DIR/<episode_id>/frames/<step>-<frame_id>-marked.<ext>   Ambiguous marked images
    DIR/<episode_id>/episode.json        a summary, (re)written on EpisodeFinished
    DIR/unassigned.jsonl                 events that belong to no episode (no images)

An event line is ``recording.events.message_event`` (bytes summarised as their size,
secrets redacted) plus ``file`` / ``marked_file``: the image's path relative to the
episode directory. The image is written before its line, so a line never names a missing
file. QoS 1 redelivers: a message identical to one already recorded is dropped. Messages
may arrive out of order (an event after EpisodeFinished, a step before EpisodeStarted);
the recorder writes whatever arrives and the summary is recomputed from everything seen.
Ids from the bus become file names only after sanitising (no ``..``, no ``/``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import structlog

from protocol.messages import (
    Ambiguous,
    EpisodeFinished,
    EpisodeStarted,
    Frame,
    LlmUsage,
    Msg,
    encode,
)
from recording.events import message_event
from runtime import topics
from runtime.actor import Actor, Publisher
from runtime.dedupe import SeenIds
from runtime.log import Redactor, redactor

log = structlog.get_logger(__name__)

EXTENSIONS = {"png": "png", "jpeg": "jpg", "webp": "webp"}
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
UNASSIGNED = "unassigned.jsonl"


def safe_name(raw: str, max_len: int = 80) -> str:
    """``raw`` as one safe path component; a changed name gets a short hash (no collisions)."""
    name = _SAFE.sub("_", raw)[:max_len].lstrip(".")
    if name != raw or not name:
        name = f"{name or 'id'}-{hashlib.sha256(raw.encode()).hexdigest()[:8]}"
    return name


def message_key(msg: Msg) -> str:
    """Identity of a message for dedupe: a redelivered message encodes to the same bytes."""
    return hashlib.sha256(encode(msg)).hexdigest()


@dataclass
class EpisodeSummary:
    """What ``episode.json`` says; rebuilt incrementally from every recorded event."""

    episode_id: str
    dirname: str
    device: str = ""
    instruction_id: str = ""
    instruction: str = ""
    task: str | None = None
    status: str = "running"
    reason: str = ""
    steps: int = 0
    started_ts: float | None = None
    finished_ts: float | None = None
    first_ts: float | None = None
    last_ts: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls: int = 0
    cost_usd: float = 0.0
    events: int = 0
    frames: int = 0
    max_step: int = 0
    finished: bool = False
    kinds: dict[str, int] = field(default_factory=dict)

    def add(self, msg: Msg, kind: str) -> None:
        self.events += 1
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.device = self.device or msg.device
        self.first_ts = msg.ts if self.first_ts is None else min(self.first_ts, msg.ts)
        self.last_ts = msg.ts if self.last_ts is None else max(self.last_ts, msg.ts)
        self.max_step = max(self.max_step, msg.step)
        if isinstance(msg, EpisodeStarted):
            self.instruction_id, self.instruction, self.task = msg.instruction_id, msg.text, msg.task
            self.started_ts = msg.ts
        elif isinstance(msg, EpisodeFinished):
            self.instruction_id = self.instruction_id or msg.instruction_id
            self.status, self.reason, self.steps = msg.status, msg.reason, msg.steps
            self.finished_ts = msg.ts
            self.finished = True
        elif isinstance(msg, LlmUsage):
            self.prompt_tokens += msg.prompt_tokens
            self.completion_tokens += msg.completion_tokens
            self.llm_calls += 1
            self.cost_usd += msg.cost_usd
        elif isinstance(msg, Frame):
            self.frames += 1

    def as_json(self, redact: Redactor | None = None) -> dict[str, Any]:
        start = self.started_ts if self.started_ts is not None else self.first_ts
        end = self.finished_ts if self.finished_ts is not None else self.last_ts
        out: dict[str, Any] = {
            "episode_id": self.episode_id,
            "device": self.device,
            "instruction_id": self.instruction_id,
            "instruction": self.instruction,
            "task": self.task,
            "status": self.status,
            "reason": self.reason,
            "steps": self.steps if self.finished else self.max_step,
            "started_ts": start,
            "finished_ts": self.finished_ts,
            "duration_s": (end - start) if start is not None and end is not None else None,
            "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens,
                       "total": self.prompt_tokens + self.completion_tokens,
                       "calls": self.llm_calls},
            "cost_usd": round(self.cost_usd, 6),
            "events": self.events,
            "frames": self.frames,
            "kinds": dict(sorted(self.kinds.items())),
        }
        red = (redact or redactor()).value(out)
        assert isinstance(red, dict)
        return red


class Recorder(Actor):
    """Writes the events of one device (``serial``) or of every device to ``out_dir``."""

    name = "recorder"
    handler_timeout_s = 60.0

    def __init__(
        self,
        bus: Publisher,
        out_dir: str | Path,
        serial: str | None = None,
        *,
        redact: Redactor | None = None,
        dedupe_capacity: int = 100_000,
        max_open_episodes: int = 10_000,
    ) -> None:
        super().__init__(bus)
        self.out_dir = Path(out_dir)
        # Requests too (the report shows a ground request left unanswered); their answers
        # are events.
        self.inbox = (topics.device_events_filter(serial), topics.device_requests_filter(serial))
        self.redact = redact
        self.seen = SeenIds(dedupe_capacity)
        self.duplicates = 0
        self.recorded = 0
        self._episodes: OrderedDict[str, EpisodeSummary] = OrderedDict()
        self._dirnames: dict[str, str] = {}
        self._max_episodes = max_open_episodes

    def episode_dir(self, episode_id: str) -> Path:
        """Where ``episode_id`` is recorded (a sanitised, collision-free directory name)."""
        name = self._dirnames.get(episode_id)
        if name is None:
            name = safe_name(episode_id)
            if name == UNASSIGNED:
                name = safe_name("_" + episode_id)
            self._dirnames[episode_id] = name
        return self.out_dir / name

    async def handle(self, topic: str, msg: Msg) -> None:
        key = message_key(msg)
        if key in self.seen:
            self.duplicates += 1
            return
        event = message_event(topic, msg, self.redact)
        kind = str(event.get("event", ""))
        if not msg.episode_id:
            if isinstance(msg, Frame):
                return  # a streamed frame for `watch`, not part of an episode
            await anyio.to_thread.run_sync(
                _append_line, self.out_dir / UNASSIGNED, _dumps(event)
            )
            self._done(key)
            return
        ep_dir = self.episode_dir(msg.episode_id)
        images: list[tuple[Path, bytes]] = []
        if isinstance(msg, Frame) and msg.data:  # none: its host made no bytes (no lease)
            rel = f"frames/{msg.step}-{safe_name(msg.frame_id)}.{EXTENSIONS[msg.format]}"
            event["file"] = rel
            images.append((ep_dir / rel, msg.data))
        elif isinstance(msg, Ambiguous) and msg.marked_image:
            rel = (f"frames/{msg.step}-{safe_name(msg.frame_id or 'ambiguous')}-"
                   f"{key[:8]}-marked.{EXTENSIONS[msg.image_format]}")
            event["marked_file"] = rel
            images.append((ep_dir / rel, msg.marked_image))
        summary = self._summary(msg.episode_id, ep_dir.name)
        summary.add(msg, kind)
        summary_json = _dumps(summary.as_json(self.redact), indent=True) if summary.finished else ""
        await anyio.to_thread.run_sync(
            _write_event, ep_dir, images, _dumps(event), summary_json
        )
        self._done(key)

    def _done(self, key: str) -> None:
        # Remembered only once written: a failed write (disk full) is retried on redelivery.
        self.seen.first_time(key)
        self.recorded += 1

    def _summary(self, episode_id: str, dirname: str) -> EpisodeSummary:
        summary = self._episodes.get(episode_id)
        if summary is None:
            summary = EpisodeSummary(episode_id=episode_id, dirname=dirname)
            self._episodes[episode_id] = summary
            if len(self._episodes) > self._max_episodes:
                # The oldest episode is long over; forget it (its files stay).
                old, _ = self._episodes.popitem(last=False)
                self._dirnames.pop(old, None)
        else:
            self._episodes.move_to_end(episode_id)
        return summary

    def summary(self, episode_id: str) -> dict[str, Any] | None:
        """The current summary of a recorded episode (what ``episode.json`` holds)."""
        s = self._episodes.get(episode_id)
        return None if s is None else s.as_json(self.redact)


def _dumps(obj: Any, indent: bool = False) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2 if indent else None, default=str)


def _append_line(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _write_event(ep_dir: Path, images: list[tuple[Path, bytes]], line: str, summary: str) -> None:
    """Images first, then the line that names them, then the summary (off the loop)."""
    for path, data in images:
        _write_atomic(path, data)
    _append_line(ep_dir / "events.jsonl", line)
    if summary:
        _write_atomic(ep_dir / "episode.json", (summary + "\n").encode())

