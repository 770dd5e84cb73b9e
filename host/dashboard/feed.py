"""What each browser is sent, and when: coalesced, so a slow browser never builds a queue.

A ``ClientFeed`` keeps *what is dirty*, not messages: the tiles and lists that changed, the
timeline steps of the phone the browser is looking at, and per phone the newest screen not
yet sent (``FrameGate``: at most ``max_fps`` frames per phone; a newer frame replaces one
still waiting, which is counted as dropped). ``next_batch`` waits until something is due
and builds the messages from the state as it is then. ``Hub`` fans the state's changes and
the downscaled frames out to every feed.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio

from host.dashboard.state import Change, FleetState
from recording.report import step_html

Clock = Callable[[], float]


class FrameGate:
    """Per phone, at most one frame every ``1 / max_fps`` seconds; stale ones are dropped."""

    def __init__(self, max_fps: float, clock: Clock = time.monotonic) -> None:
        self.interval_s = 1.0 / max_fps
        self.clock = clock
        self.pending: dict[str, tuple[str, str]] = {}  # serial -> (frame_id, src)
        self.sent_at: dict[str, float] = {}
        self.sent = 0
        self.dropped = 0

    def offer(self, serial: str, frame_id: str, src: str) -> None:
        if serial in self.pending:
            self.dropped += 1  # never sent: the newer frame takes its place
        self.pending[serial] = (frame_id, src)

    def due(self) -> list[tuple[str, str, str]]:
        """The frames that may go now (and are no longer pending)."""
        now = self.clock()
        out = []
        for serial, (frame_id, src) in list(self.pending.items()):
            if now >= self.sent_at.get(serial, -math.inf) + self.interval_s:
                del self.pending[serial]
                self.sent_at[serial] = now
                self.sent += 1
                out.append((serial, frame_id, src))
        return out

    def next_due_in(self) -> float | None:
        """Seconds until the next pending frame may go; None when none is pending."""
        if not self.pending:
            return None
        now = self.clock()
        return max(0.0, min(self.sent_at.get(s, -math.inf) + self.interval_s - now
                            for s in self.pending))


class ClientFeed:
    """One browser's dirty set; ``next_batch`` turns it into messages."""

    def __init__(self, max_fps: float, clock: Clock = time.monotonic) -> None:
        self.frames = FrameGate(max_fps, clock)
        self.tiles: set[str] = set()
        self.header = False
        self.viewing: str | None = None
        self.full_view = False
        self.steps: set[tuple[str, int]] = set()
        self.lists = False
        self.notes: deque[dict[str, Any]] = deque(maxlen=64)  # acks, oldest dropped
        self._wake = anyio.Event()

    def mark(self, change: Change) -> None:
        if change.what == "tile":
            self.tiles.add(change.serial)
        elif change.what == "header":
            self.header = True
        elif self.viewing is not None and change.what == "step":
            if change.serial == self.viewing:
                self.steps.add((change.serial, change.step))
        elif self.viewing is not None and change.what == "lists":
            if change.serial in ("", self.viewing):  # "" is the fleet-wide queue
                self.lists = True
        else:
            return
        self._wake.set()

    def view(self, serial: str | None) -> None:
        """The browser opened a phone's view (None: back to the fleet)."""
        self.viewing = serial
        self.steps.clear()
        self.full_view = serial is not None
        self._wake.set()

    def note(self, msg: dict[str, Any]) -> None:
        self.notes.append(msg)
        self._wake.set()

    def offer_frame(self, serial: str, frame_id: str, src: str) -> None:
        self.frames.offer(serial, frame_id, src)
        self._wake.set()

    def drain(self, state: FleetState) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [*self.notes]
        self.notes.clear()
        for serial in sorted(self.tiles):
            out.append({"type": "tile", "tile": state.phone(serial).tile.as_json()})
        self.tiles.clear()
        if self.header:
            out.append({"type": "header", "header": state.header()})
            self.header = False
        viewing = self.viewing
        if viewing is not None and self.full_view:
            out.append(phone_view(state, viewing))
            self.full_view = self.lists = False
            self.steps.clear()
        elif viewing is not None:
            if self.lists:
                out.append(lists_message(state, viewing))
                self.lists = False
            tl = state.phone(viewing).timeline
            for s, n in sorted(self.steps):
                if tl is not None:
                    out.append({"type": "step", "serial": s, "episode_id": tl.episode_id,
                                "n": n, "html": step_html(tl.events, n)})
            self.steps.clear()
        for s, frame_id, src in self.frames.due():
            out.append({"type": "frame", "serial": s, "frame_id": frame_id, "src": src})
        return out

    async def next_batch(self, state: FleetState) -> list[dict[str, Any]]:
        """Wait until something is due for this browser; then what is due."""
        while True:
            out = self.drain(state)
            if out:
                return out
            delay = self.frames.next_due_in()
            self._wake = anyio.Event()
            with anyio.move_on_after(math.inf if delay is None else delay):
                await self._wake.wait()


def lists_message(state: FleetState, serial: str) -> dict[str, Any]:
    phone = state.phone(serial)
    return {"type": "lists", "serial": serial, "queue": state.queue_of(serial),
            "past": list(phone.past)}


def phone_view(state: FleetState, serial: str) -> dict[str, Any]:
    """Everything the phone view draws, for a browser that just opened it."""
    phone = state.phone(serial)
    tl = phone.timeline
    steps = [] if tl is None else [{"n": n, "html": step_html(tl.events, n)} for n in tl.steps()]
    episode = None if tl is None else {"episode_id": tl.episode_id,
                                       "instruction": tl.instruction, "status": tl.status}
    return {**lists_message(state, serial), "type": "phone", "episode": episode,
            "steps": steps, "tile": phone.tile.as_json()}


class Hub:
    """The state plus every connected browser's feed."""

    def __init__(self, state: FleetState, max_fps: float, clock: Clock = time.monotonic) -> None:
        self.state = state
        self.max_fps = max_fps
        self.clock = clock
        self.feeds: set[ClientFeed] = set()
        self.screens: dict[str, tuple[str, str]] = {}  # serial -> newest (frame_id, src)

    def connect(self) -> ClientFeed:
        feed = ClientFeed(self.max_fps, self.clock)
        self.feeds.add(feed)
        feed.tiles.update(self.state.phones)
        feed.header = True
        for serial, (frame_id, src) in self.screens.items():
            feed.offer_frame(serial, frame_id, src)
        return feed

    def disconnect(self, feed: ClientFeed) -> None:
        self.feeds.discard(feed)

    def changed(self, changes: list[Change]) -> None:
        for feed in self.feeds:
            for change in changes:
                feed.mark(change)

    def screen(self, serial: str, frame_id: str, src: str) -> None:
        """A downscaled frame: every tile shows it (each browser at its own pace)."""
        self.screens[serial] = (frame_id, src)
        self.changed(self.state.set_image(serial, frame_id, src))
        for feed in self.feeds:
            feed.offer_frame(serial, frame_id, src)
