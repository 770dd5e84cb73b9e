"""The MCP server's side of the bus: one connection, what it has seen, what it sends.

``Link.run`` keeps one bus connection (a clean session, its own client id), retrying
with backoff while the broker is down, so the MCP server starts and answers without one
(each tool then says the broker is unreachable, and how to fix it). It folds every phone's
status, events and control into the dashboard's ``FleetState`` (the phones' tiles), keeps
each phone's last events, and follows the instructions this server sent as ``Track``
values, which the tools wait on. The episodes it sent are recorded (``Recorder``) with
their frames, and each gets an HTML report when it ends. The hosts put a frame's bytes on
the bus only for a reader that says so: while it takes a phone's frames the link keeps a
frames lease on that phone (``Watching``, actors/watching.py), and its screenshot request
asks for the bytes (``FrameRequest.data``).

Nothing here knows MCP: the tools (``host/mcp/server.py``) read tracks and call
``submit``, ``control`` and ``screenshot``.
"""

from __future__ import annotations

import os
import re
import uuid
from collections import OrderedDict, defaultdict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from actors.watching import Interest
from host.dashboard.state import FleetState
from host.mcp.config import McpConfig
from protocol.messages import (
    CODEC,
    ActionDone,
    DeviceStatus,
    EpisodeFinished,
    EpisodeStarted,
    Error,
    Frame,
    FrameRequest,
    Instruction,
    LlmUsage,
    Msg,
    Plan,
    Question,
    Screen,
)
from protocol.operations import format_operation
from recording.events import message_event
from recording.recorder import Recorder, safe_name
from runtime import topics
from runtime.broker import configured_address
from runtime.bus import Backoff, BrokerAddress, Bus, BusError
from runtime.errors import MobagentError
from runtime.log import redactor

log = structlog.get_logger(__name__)

APPROVAL = re.compile(r"^awaiting approval \(step (\d+)\): (.*)$", re.S)
TRACKS_KEPT = 2000  # instructions remembered (running ones are never dropped)


class LinkError(MobagentError):
    """The bus cannot do what a tool asked; ``str`` says what and how to fix it."""


@dataclass(frozen=True)
class StepNote:
    """One planned step, as a progress notification tells it."""

    step: int
    thought: str
    operation: str

    def as_json(self) -> dict[str, Any]:
        return {"step": self.step, "thought": self.thought, "operation": self.operation}


@dataclass
class Track:
    """One instruction this server sent, as its events arrive (updated by ``Link``)."""

    instruction_id: str
    text: str
    serial: str | None  # None: any free phone
    device: str = ""  # the phone running it (known from EpisodeStarted)
    episode_id: str = ""
    notes: list[StepNote] = field(default_factory=list)
    actions: int = 0  # performed operations (ActionDone ok)
    tokens: int = 0
    cost_usd: float = 0.0
    question: str = ""  # an Ask waiting for its Answer
    question_no: int = 0  # how many questions were asked (to tell a new one from the last)
    approval: str = ""  # an operation waiting for approval
    approval_step: int = 0
    refused: str = ""  # the fleet's reason for refusing the instruction
    finished: EpisodeFinished | None = None
    report: str = ""  # the HTML report's path, once written
    frames_on: str = ""  # the phone whose frames are taken for the recording
    changed: anyio.Event = field(default_factory=anyio.Event)

    def notify(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    @property
    def done(self) -> bool:
        return self.finished is not None

    @property
    def phone(self) -> str:
        return self.device or self.serial or ""


def default_record_dir() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "mobagent" / "mcp"


def subscriptions() -> list[str]:
    """Every device's events but the full frames (taken per phone while needed), status,
    control (the agent's questions), and the hosts' status and events."""
    from host.dashboard.server import EVENT_KINDS

    return [
        *(topics.device_events_filter(None, kind) for kind in EVENT_KINDS),
        topics.all_device_status_filter(), topics.all_control_filter(),
        topics.all_host_status_filter(), topics.host_events_filter(),
    ]


class Link:
    def __init__(self, cfg: McpConfig, *, address: BrokerAddress | None = None,
                 record_dir: Path | None = None) -> None:
        self.cfg = cfg
        self.settings = cfg.mcp
        self.address = address or configured_address(cfg)
        self.state = FleetState(past_episodes=20, timeline_steps=1, redact=redactor())
        self.recent: dict[str, deque[dict[str, Any]]] = defaultdict(
            lambda: deque(maxlen=self.settings.recent_events))
        self.tracks: OrderedDict[str, Track] = OrderedDict()
        self.by_episode: dict[str, Track] = {}
        self.record_dir = record_dir or (Path(self.settings.record_dir)
                                         if self.settings.record_dir else default_record_dir())
        self.bus: Bus | None = None
        self.error = ""  # why the bus is not connected ("" while it is, or still trying)
        self.tried = anyio.Event()  # the first connection attempt ended (either way)
        self.settled = anyio.Event()  # connected, and the retained status had time to come
        self.phones_changed = anyio.Event()
        self._frames: dict[str, Frame | Error] = {}
        self._frame_waiters: dict[str, anyio.Event] = {}
        self._frame_subs: dict[str, int] = defaultdict(int)
        self._leases: dict[str, anyio.CancelScope] = {}  # serial -> its frames lease, kept
        self._tg: TaskGroup | None = None  # the connection's tasks
        self._recorder: Recorder | None = None

    # ---- the connection -----------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep the bus connected until cancelled; ``started`` at once (the broker may be down)."""
        task_status.started()
        backoff = Backoff(0.5, 10.0)
        while True:
            bus = Bus(self.cfg.bus, self.address,
                      client_id=f"mobagent-mcp-{uuid.uuid4().hex[:10]}", persistent=False,
                      max_payload_bytes=self.cfg.limits.max_payload_bytes, codec=CODEC)
            try:
                async with bus:
                    for filter_ in subscriptions():
                        await bus.subscribe(filter_)
                    for serial, n in self._frame_subs.items():
                        if n:
                            await bus.subscribe(topics.device_events_filter(serial, "frame"))
                    self.bus, self.error = bus, ""
                    self._recorder = Recorder(bus, self.record_dir, redact=redactor())
                    self.tried.set()
                    backoff.reset()
                    log.info("mcp_bus_connected", broker=self.address.url)
                    async with anyio.create_task_group() as tg:
                        self._tg = tg
                        tg.start_soon(self._settle)
                        for serial, n in self._frame_subs.items():
                            if n:
                                self._lease_on(bus, serial)
                        async for topic, msg in bus.messages():
                            await self.apply(topic, msg)
            except BusError as exc:
                self.error = str(exc)
                log.warning("mcp_bus_unavailable", broker=self.address.url, error=self.error)
            finally:
                self.bus, self._tg = None, None
                self._leases.clear()  # their tasks ended with the connection
                self.tried.set()
            await anyio.sleep(backoff.next_delay())

    async def _settle(self) -> None:
        await anyio.sleep(self.settings.settle_s)
        self.settled.set()

    async def ready_bus(self) -> Bus:
        """The connected bus, or ``LinkError`` naming the fix (never waits long)."""
        with anyio.move_on_after(self.cfg.bus.connect_timeout_s + 1):
            await self.tried.wait()
        bus = self.bus
        if bus is None or not bus.connected:
            why = self.error or "no answer yet"
            raise LinkError(
                f"the broker at {self.address.url} does not answer ({why}). Fix: start the "
                "fleet's broker (`mobagent serve` or `mobagent demo --keep` run one; or "
                "mosquitto), or point this server at yours with --broker URL / bus.url")
        with anyio.move_on_after(self.settings.settle_s + 1):
            await self.settled.wait()
        return bus

    # ---- what the bus says ----------------------------------------------------------------

    async def apply(self, topic: str, msg: Msg) -> None:
        if isinstance(msg, Frame) and msg.request_id in self._frame_waiters:
            self._frames[msg.request_id] = msg
            self._frame_waiters[msg.request_id].set()
        elif isinstance(msg, Error) and msg.request_id in self._frame_waiters:
            self._frames[msg.request_id] = msg
            self._frame_waiters[msg.request_id].set()
        if not isinstance(msg, Frame | Screen):
            known = set(self.state.phones)
            self.state.apply(topic, msg)
            if set(self.state.phones) != known:
                self.phones_changed.set()
                self.phones_changed = anyio.Event()
        serial = topics.serial_of(topic) if topic.startswith(topics.ROOT) else None
        try:
            channel = topics.parse(topic).channel
        except topics.TopicError:
            return
        if serial and channel in ("events", "control") and not isinstance(msg, Frame):
            self.recent[serial].append(message_event(topic, msg, redactor()))
        track = self._track_of(msg)
        if track is not None:
            if msg.episode_id and self._recorder is not None and channel == "events":
                try:
                    await self._recorder.handle(topic, msg)
                except OSError as exc:
                    log.warning("mcp_record_failed", error=str(exc))
            self._fold(track, topic, msg)
        if isinstance(msg, DeviceStatus) and serial:
            for t in self.tracks.values():
                if not t.done and t.device == serial and t.episode_id == msg.episode_id:
                    self._status(t, msg)

    def _track_of(self, msg: Msg) -> Track | None:
        if isinstance(msg, DeviceStatus):
            return None
        track = self.tracks.get(msg.correlation_id) if msg.correlation_id else None
        if track is None and msg.episode_id:
            track = self.by_episode.get(msg.episode_id)
        return track

    def _fold(self, t: Track, topic: str, msg: Msg) -> None:
        if isinstance(msg, EpisodeStarted):
            t.device, t.episode_id = msg.device or t.device, msg.episode_id
            self.by_episode[msg.episode_id] = t
        elif isinstance(msg, Plan):
            op = format_operation(msg.operation) if msg.operation else msg.action
            t.notes.append(StepNote(msg.step, msg.thought, op))
        elif isinstance(msg, ActionDone):
            t.actions += 1 if msg.ok else 0
        elif isinstance(msg, LlmUsage):
            t.tokens += msg.prompt_tokens + msg.completion_tokens
            t.cost_usd += msg.cost_usd
        elif isinstance(msg, Question):
            t.question, t.question_no = msg.text, t.question_no + 1
        elif isinstance(msg, Error) and msg.reason == "instruction refused":
            t.refused = msg.detail or msg.reason
        elif isinstance(msg, EpisodeFinished):
            t.finished = msg
            t.device = msg.device or t.device
            t.episode_id = msg.episode_id or t.episode_id
            t.question = t.approval = ""
        else:
            return
        t.notify()

    def _status(self, t: Track, msg: DeviceStatus) -> None:
        m = APPROVAL.match(msg.detail)
        if m is not None:
            t.approval, t.approval_step = m.group(2), int(m.group(1))
        elif msg.detail.startswith("question"):
            return  # the Question itself says it
        else:
            if not (t.approval or t.question):
                return
            t.approval, t.question = "", ""  # answered (here or elsewhere), or timed out
        t.notify()

    # ---- sending --------------------------------------------------------------------------

    def known(self, serial: str) -> bool:
        return serial in self.state.phones

    def phone_list(self) -> list[str]:
        return sorted(self.state.phones)

    async def submit(self, text: str, serial: str | None, *, instruction_id: str = ""
                     ) -> Track:
        bus = await self.ready_bus()
        ident = instruction_id or uuid.uuid4().hex
        track = Track(ident, text, serial, device=serial or "")
        self.tracks[ident] = track
        self._forget_old()
        instr = Instruction(id=ident, text=text, device=serial or "", correlation_id=ident)
        if serial is not None:
            await self.track_frames(track)
        try:
            with anyio.fail_after(self.cfg.bus.publish_timeout_s + 1):
                await bus.publish(topics.device_instructions(serial) if serial
                                  else topics.fleet_instructions(), instr)
        except (BusError, TimeoutError) as exc:
            self.tracks.pop(ident, None)
            raise LinkError(f"could not send the instruction: {exc}. Fix: check the broker at "
                            f"{self.address.url} (`mobagent doctor`)") from None
        return track

    async def publish(self, topic: str, msg: Msg) -> None:
        bus = await self.ready_bus()
        try:
            with anyio.fail_after(self.cfg.bus.publish_timeout_s + 1):
                await bus.publish(topic, msg)
        except (BusError, TimeoutError) as exc:
            raise LinkError(f"the broker did not take the message: {exc}. Fix: check the "
                            f"broker at {self.address.url}") from None

    def _forget_old(self) -> None:
        while len(self.tracks) > TRACKS_KEPT:
            old = next((k for k, t in self.tracks.items() if t.done), None)
            if old is None:
                return
            t = self.tracks.pop(old)
            self.by_episode.pop(t.episode_id, None)

    async def finish_track(self, t: Track) -> None:
        """After the outcome: stop taking the phone's frames; write the episode's report."""
        if t.frames_on:
            serial, t.frames_on = t.frames_on, ""
            await self._frames_off(serial)
        if t.report or not t.episode_id:
            return
        ep_dir = self.record_dir / safe_name(t.episode_id)
        if not await anyio.Path(ep_dir / "events.jsonl").is_file():
            return
        try:
            from recording.report import render_report

            t.report = str(await anyio.to_thread.run_sync(render_report, ep_dir))
        except Exception as exc:  # the report is a bonus; the outcome stands
            log.warning("mcp_report_failed", episode=t.episode_id, error=str(exc))

    # ---- frames ---------------------------------------------------------------------------

    async def track_frames(self, t: Track) -> None:
        """Record the frames of ``t``'s phone from now until its outcome (a fleet-wide
        instruction's phone is known once its episode starts)."""
        bus = self.bus
        if t.frames_on or not t.device or t.done or bus is None:
            return
        t.frames_on = t.device
        await self._frames_on(bus, t.device)

    async def _frames_on(self, bus: Bus, serial: str) -> None:
        self._frame_subs[serial] += 1
        if self._frame_subs[serial] == 1:
            with anyio.move_on_after(self.cfg.bus.publish_timeout_s):
                await bus.subscribe(topics.device_events_filter(serial, "frame"))
            self._lease_on(bus, serial)

    def _lease_on(self, bus: Bus, serial: str) -> None:
        """Keep a frames lease on ``serial`` (its host then puts the bytes on the bus)."""
        tg = self._tg
        if tg is None or serial in self._leases:
            return
        scope = self._leases[serial] = anyio.CancelScope()
        interest = Interest(bus, bus.client_id, frames=True, device=serial,
                            publish_timeout_s=self.cfg.bus.publish_timeout_s)

        async def keep() -> None:
            with scope:
                await interest.run()

        tg.start_soon(keep)

    async def _frames_off(self, serial: str) -> None:
        self._frame_subs[serial] = max(0, self._frame_subs[serial] - 1)
        bus = self.bus
        if self._frame_subs[serial] == 0:
            self._frame_subs.pop(serial, None)
            scope = self._leases.pop(serial, None)
            if scope is not None:
                scope.cancel()  # the lease ends (``Interest`` says so on its way out)
            if bus is not None:
                with anyio.move_on_after(self.cfg.bus.publish_timeout_s):
                    await bus.unsubscribe(topics.device_events_filter(serial, "frame"))

    @asynccontextmanager
    async def frames_of(self, serial: str) -> AsyncIterator[Bus]:
        bus = await self.ready_bus()
        await self._frames_on(bus, serial)
        try:
            yield bus
        finally:
            with anyio.CancelScope(shield=True):
                await self._frames_off(serial)

    async def screenshot(self, serial: str, timeout_s: float) -> Frame:
        """A frame taken now by the phone's host (``FrameRequest``, purpose "read")."""
        rid = f"mcp-{uuid.uuid4().hex[:12]}"
        done = self._frame_waiters[rid] = anyio.Event()
        try:
            async with self.frames_of(serial) as bus:
                req = FrameRequest(request_id=rid, purpose="read", device=serial,
                                   correlation_id=rid, data=True)
                try:
                    with anyio.fail_after(timeout_s):
                        await bus.publish(topics.device_request(serial, req), req)
                        await done.wait()
                except (TimeoutError, BusError):
                    raise LinkError(
                        f"no frame from {serial} within {timeout_s:g}s. Fix: check that its "
                        "host runs (`mobagent serve`) and the phone answers adb "
                        "(`mobagent doctor`); list_phones shows its status") from None
            got = self._frames.pop(rid)
            if isinstance(got, Error):
                raise LinkError(f"{serial} could not take a screenshot: {got.reason}"
                                f"{': ' + got.detail if got.detail else ''}")
            return got
        finally:
            self._frame_waiters.pop(rid, None)
            self._frames.pop(rid, None)
