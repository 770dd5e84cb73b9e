"""What the dashboard shows, folded from the bus: one tile per phone, the header's figures,
each phone's running episode as a timeline, its queue and its past episodes.

``FleetState.apply(topic, msg)`` takes every message the dashboard subscribes to (device
events, status and control, instructions, host status and events) and returns what
changed, as ``Change`` values the feeds (``feed.py``) mark dirty; nothing here does I/O.
Event content comes through ``recording.events.message_event``, so bytes are summarised
and secrets redacted exactly as the recorder writes them. Time for the per-minute figures
comes from an injectable clock.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from protocol.messages import (
    ActionDone,
    Answer,
    Approve,
    DeviceStatus,
    EpisodeFinished,
    EpisodeStarted,
    Error,
    Frame,
    Grounded,
    HostStatus,
    Instruction,
    LlmUsage,
    Msg,
    Plan,
    Question,
    StepTiming,
)
from protocol.operations import format_operation
from recording.events import message_event
from runtime import topics
from runtime.log import Redactor

Status = Literal["idle", "busy", "offline", "waiting", "attention"]
STATUSES: tuple[Status, ...] = ("idle", "busy", "waiting", "attention", "offline")
MINUTE_S = 60.0
ERROR_WINDOW_S = 300.0
TEXT_MAX = 400  # thought / instruction characters a tile carries


@dataclass(frozen=True)
class Change:
    """What ``apply`` changed: a tile, the header, one timeline step, or a phone's lists."""

    what: Literal["tile", "header", "step", "lists"]
    serial: str = ""
    step: int = 0


@dataclass
class Tile:
    serial: str
    host: str = ""
    model: str = ""  # ro.product.model, from the fleet's DeviceStatus
    state: str = "offline"  # the retained DeviceStatus: idle | busy | offline | attention
    detail: str = ""
    episode_id: str = ""
    instruction_id: str = ""
    instruction: str = ""
    task: str = ""
    step: int = 0
    action: str = ""
    thought: str = ""
    tokens: int = 0
    cost_usd: float = 0.0
    question: str = ""  # an Ask waiting for its Answer
    last_outcome: str = ""  # "succeeded" | "failed" | "cancelled" of the last episode
    frame_id: str = ""

    @property
    def waiting_for(self) -> str:
        """"approval" or "question" when the episode waits for a person, else ""."""
        if self.state != "busy":
            return ""
        if self.detail.startswith("awaiting approval"):
            return "approval"
        if self.question or self.detail.startswith("question"):
            return "question"
        return ""

    @property
    def status(self) -> Status:
        if self.state in ("offline", "attention"):  # attention: the detail says the fix
            return self.state  # type: ignore[return-value]
        if self.waiting_for:
            return "waiting"
        return "busy" if self.state == "busy" else "idle"

    def as_json(self) -> dict[str, Any]:
        return {
            "serial": self.serial, "host": self.host, "model": self.model,
            "status": self.status,
            "waiting_for": self.waiting_for, "detail": self.detail[:TEXT_MAX],
            "episode_id": self.episode_id, "instruction": self.instruction[:TEXT_MAX],
            "task": self.task, "step": self.step, "action": self.action,
            "thought": self.thought[:TEXT_MAX], "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 6), "question": self.question[:TEXT_MAX],
            "last_outcome": self.last_outcome,
        }


@dataclass
class Timeline:
    """One episode's events (as the recorder writes them), grouped into steps later."""

    episode_id: str
    instruction: str = ""
    status: str = "running"
    events: list[dict[str, Any]] = field(default_factory=list)
    frames: dict[str, dict[str, Any]] = field(default_factory=dict)  # frame_id -> event

    def steps(self) -> list[int]:
        return sorted({int(e.get("step") or 0) for e in self.events
                       if e.get("event") not in ("episode_started", "episode_finished")})


@dataclass
class Phone:
    tile: Tile
    timeline: Timeline | None = None
    past: deque[dict[str, Any]] = field(default_factory=deque)


@dataclass
class Queued:
    instruction_id: str
    serial: str | None  # None: fleet-wide
    text: str
    ts: float


class Window:
    """Values seen in the last ``span_s`` seconds (per-minute rates, recent errors)."""

    def __init__(self, span_s: float, clock: Callable[[], float]) -> None:
        self.span_s = span_s
        self.clock = clock
        self._items: deque[tuple[float, float]] = deque()

    def add(self, value: float = 1.0) -> None:
        self._items.append((self.clock(), value))

    def total(self) -> float:
        cutoff = self.clock() - self.span_s
        while self._items and self._items[0][0] < cutoff:
            self._items.popleft()
        return sum(v for _, v in self._items)


class FleetState:
    def __init__(self, *, past_episodes: int = 20, timeline_steps: int = 60,
                 redact: Redactor | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.phones: dict[str, Phone] = {}
        self.hosts: dict[str, dict[str, Any]] = {}
        self.queued: dict[str, Queued] = {}
        self.past_episodes = past_episodes
        self.timeline_steps = timeline_steps
        self.redact = redact
        self.steps = Window(MINUTE_S, clock)
        self.tokens = Window(MINUTE_S, clock)
        self.errors = Window(ERROR_WINDOW_S, clock)
        # Grounded answers by source (exact, word, fuzzy, icon, chooser, grounder, ...)
        self.grounded_by: Counter[str] = Counter()

    # ---- reading -----------------------------------------------------------------------

    def phone(self, serial: str) -> Phone:
        if serial not in self.phones:
            self.phones[serial] = Phone(Tile(serial), past=deque(maxlen=self.past_episodes))
        return self.phones[serial]

    def tiles(self) -> list[dict[str, Any]]:
        return [self.phones[s].tile.as_json() for s in sorted(self.phones)]

    def header(self) -> dict[str, Any]:
        by_status = {s: 0 for s in STATUSES}
        for p in self.phones.values():
            by_status[p.tile.status] += 1
        running = sum(1 for p in self.phones.values()
                      if p.timeline is not None and p.timeline.status == "running")
        return {
            "phones": len(self.phones), "by_status": by_status, "running": running,
            "queued": len(self.queued), "steps_per_min": int(self.steps.total()),
            "tokens_per_min": int(self.tokens.total()), "errors_5min": int(self.errors.total()),
            "grounded_by": dict(sorted(self.grounded_by.items())),
            "hosts": [self.hosts[h] for h in sorted(self.hosts)],
        }

    def queue_of(self, serial: str) -> list[dict[str, Any]]:
        return [{"instruction_id": q.instruction_id, "text": q.text[:TEXT_MAX],
                 "fleet": q.serial is None}
                for q in sorted(self.queued.values(), key=lambda q: q.ts)
                if q.serial in (serial, None)]

    # ---- folding -----------------------------------------------------------------------

    def apply(self, topic: str, msg: Msg) -> list[Change]:
        try:
            info = topics.parse(topic)
        except topics.TopicError:
            return []
        if isinstance(msg, HostStatus):
            self.hosts[msg.host] = {"host": msg.host, "state": msg.state,
                                    "devices": len(msg.devices), "version": msg.version}
            return [Change("header")]
        if isinstance(msg, Error):
            self.errors.add()
            out = [Change("header")]
            if msg.correlation_id in self.queued:  # a refused instruction leaves the queue
                q = self.queued.pop(msg.correlation_id)
                out.append(Change("lists", q.serial or ""))
        else:
            out = []
        if info.scope == "fleet" and isinstance(msg, Instruction):
            self.queued[msg.id] = Queued(msg.id, None, msg.text, msg.ts)
            return [Change("header"), Change("lists", "")]
        serial = info.serial
        if serial is None:
            return out
        if isinstance(msg, Instruction):
            self.queued[msg.id] = Queued(msg.id, serial, msg.text, msg.ts)
            self.phone(serial)
            return [Change("header"), Change("lists", serial), Change("tile", serial)]
        phone = self.phone(serial)
        tile = phone.tile
        if isinstance(msg, DeviceStatus):
            tile.state, tile.detail = msg.state, msg.detail
            tile.host = msg.host or tile.host
            tile.model = msg.model or tile.model  # the episode's own statuses do not carry it
            if msg.state != "busy":
                tile.question = ""
            return [*out, Change("tile", serial), Change("header")]
        if info.channel == "control":
            return [*out, *self._control(phone, msg)]
        if info.channel != "events":
            return out
        return [*out, *self._event(phone, topic, msg)]

    def _control(self, phone: Phone, msg: Msg) -> list[Change]:
        tile = phone.tile
        if isinstance(msg, Question) and msg.episode_id in ("", tile.episode_id):
            tile.question = msg.text
        elif isinstance(msg, Answer):
            tile.question = ""
        elif not isinstance(msg, Approve):
            return []
        return [Change("tile", tile.serial), Change("header")]

    def _event(self, phone: Phone, topic: str, msg: Msg) -> list[Change]:
        tile = phone.tile
        serial = tile.serial
        changes = [Change("tile", serial)]
        if isinstance(msg, EpisodeStarted):
            self.queued.pop(msg.instruction_id, None)
            tile.episode_id, tile.instruction_id = msg.episode_id, msg.instruction_id
            tile.instruction, tile.task = msg.text, msg.task or ""
            tile.step, tile.action, tile.thought, tile.question = 0, "", "", ""
            tile.tokens, tile.cost_usd = 0, 0.0
            phone.timeline = Timeline(msg.episode_id, msg.text)
            changes += [Change("header"), Change("lists", serial)]
        elif isinstance(msg, EpisodeFinished):
            self.queued.pop(msg.instruction_id, None)
            tile.last_outcome = msg.status
            tile.question = ""
            if phone.timeline is not None and phone.timeline.episode_id == msg.episode_id:
                phone.timeline.status = msg.status
            phone.past.appendleft({
                "episode_id": msg.episode_id, "instruction_id": msg.instruction_id,
                "instruction": (tile.instruction if tile.episode_id == msg.episode_id
                                else "")[:TEXT_MAX],
                "status": msg.status, "reason": msg.reason[:TEXT_MAX], "steps": msg.steps,
                "tokens": tile.tokens if tile.episode_id == msg.episode_id else 0,
            })
            changes += [Change("header"), Change("lists", serial)]
        elif isinstance(msg, Plan):
            tile.thought = msg.thought
            tile.action = format_operation(msg.operation) if msg.operation else msg.action
        elif isinstance(msg, ActionDone):
            tile.action = format_operation(msg.operation) + ("" if msg.ok else " (failed)")
        elif isinstance(msg, LlmUsage):
            n = msg.prompt_tokens + msg.completion_tokens
            tile.tokens += n
            tile.cost_usd += msg.cost_usd
            self.tokens.add(n)
            changes.append(Change("header"))
        elif isinstance(msg, StepTiming):
            self.steps.add()
            changes.append(Change("header"))
        elif isinstance(msg, Frame):
            tile.frame_id = msg.frame_id
        elif isinstance(msg, Grounded):
            self.grounded_by[msg.source or "?"] += 1
            changes.append(Change("header"))
        if msg.step and msg.episode_id == tile.episode_id:
            tile.step = max(tile.step, msg.step)
        changes += self._timeline(phone, topic, msg)
        return changes

    def _timeline(self, phone: Phone, topic: str, msg: Msg) -> list[Change]:
        tl = phone.timeline
        if tl is None or not msg.episode_id or msg.episode_id != tl.episode_id:
            return []
        if isinstance(msg, EpisodeStarted | EpisodeFinished):
            return []
        event = message_event(topic, msg, self.redact)
        if isinstance(msg, Frame):
            if msg.frame_id in tl.frames:
                return []  # a redelivery
            tl.frames[msg.frame_id] = event
        tl.events.append(event)
        steps = tl.steps()
        if len(steps) > self.timeline_steps:  # the oldest steps go first
            keep = set(steps[-self.timeline_steps:])
            tl.events = [e for e in tl.events if int(e.get("step") or 0) in keep]
        return [Change("step", phone.tile.serial, msg.step)]

    def set_image(self, serial: str, frame_id: str, src: str) -> list[Change]:
        """The downscaled frame is ready: the tile shows it, the timeline draws it."""
        phone = self.phones.get(serial)
        if phone is None:
            return []
        tl = phone.timeline
        event = tl.frames.get(frame_id) if tl is not None else None
        if event is None:
            return []
        event["_src"] = src
        return [Change("step", serial, int(event.get("step") or 0))]
