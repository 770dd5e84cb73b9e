"""The host's one runner: every phone of its ``DeviceSource``, one episode at a time each.

``FleetManager`` is generic over the per-phone work: it is given ``run_episode(handle,
instruction, control)`` and never imports the agent (host/runner.py plugs the agent in).
It runs every command's episodes: ``serve`` (the adb server's phones, hot-plugged), and
``run``, ``demo`` and the Mobile-Eval runner (a fixed list of phones, ``FleetHost.run_on``).

- **Discovery:** the ``DeviceSource`` (``devices/discovery.py``): its listing, then its
  changes (adb's ``track-devices`` for ``AdbDevices``; none for ``FixedDevices``); when the
  changes end (the adb server went away) the fleet lists again after a backoff.
- **Per-phone group:** each phone that is ``device`` in adb gets its own supervised task
  group (a generation); when it drops, the group is cancelled, and a new one starts when it
  returns. Nothing is shared between groups but the bus; every adb call the fleet makes is
  scoped to one serial.
- **Preflight:** ``devices/preflight.py`` when a phone comes online and before each
  episode (``[fleet] preflight``): a sleeping phone is woken, a lock screen without a PIN
  dismissed; a phone that still cannot work is ``attention`` (the summary and its fix in
  the status detail and the log) and its episodes fail without starting, saying why. A
  phone adb lists as ``unauthorized``, ``no permissions`` or ``offline``, online or never,
  gets a status and a log line with its fix.
- **Status:** a retained ``DeviceStatus`` (idle | busy | offline | attention) per phone; the host's
  retained ``HostStatus`` lists its phones, and its last will (set by ``HostRuntime``) says
  ``offline`` when the host dies, which also marks its phones unreachable.
- **One active episode per phone,** a bounded per-phone queue, then rejection (an ``Error``
  and an ``EpisodeFinished(failed, "rejected: ...")``).
- **Cancel** (device control topic) asks the running episode to stop at its next safe point
  (``EpisodeControl``), and stops it hard after a grace period; a queued one is removed.
- **Idempotent ids:** an instruction id is run at most once by this host, also when the
  broker redelivers it after a reconnect.
- **Fleet-wide instructions** go to the first free phone (queued while none is free); on an
  MQTT 5 broker hosts share them through ``$share/...`` so each is taken by one host.
- **A phone that drops mid-episode** ends that episode with
  ``EpisodeFinished(failed, reason="device offline")``; other phones are not touched.
- **The episode's one owner:** the fleet publishes ``EpisodeStarted`` and
  ``EpisodeFinished`` (exactly once per accepted or rejected instruction) and the busy/idle
  status; the work publishes only its step events.

``FleetHost`` runs all of this inside ``HostRuntime`` (every command); ``serve_fleet(cfg,
run_episode)`` is a ``FleetHost`` with plain work; ``run_fleet(bus, fleet)`` runs a fleet on
a bus you already have (tests, benchmarks).
"""

from __future__ import annotations

import uuid
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Literal, Protocol, runtime_checkable

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.telemetry import Tracing, traces_flushed
from devices.adb import AdbDevice, adb_server_port
from devices.discovery import (
    ABSENT,
    AdbDevices,
    DeviceSource,
    DeviceSourceError,
    WifiConnector,
    is_network_serial,
)
from devices.identity import SHARED_SERIAL_FIX, PhoneIdentity, phone_identity
from devices.preflight import Preflight, adb_check, preflight, ready_phone
from host.host_runtime import VERSION, HostRuntime, InstructionGate, instruction_problem
from protocol.messages import (
    Answer,
    Approve,
    Cancel,
    DeviceStatus,
    EpisodeFinished,
    EpisodeStarted,
    EpisodeStatus,
    Error,
    HostStatus,
    Instruction,
    Msg,
    Steer,
)
from runtime import topics
from runtime.actor import Actor, BusLike, Publisher, restart_with_backoff, root_cause, run_actors
from runtime.bus import Backoff, Bus
from runtime.config import Port, Positive, RuntimeConfig, Section
from runtime.dedupe import SeenIds
from runtime.errors import MobagentError

if TYPE_CHECKING:
    import adbutils

log = structlog.get_logger(__name__)

class FleetConfig(Section):
    """``[fleet]``: how ``mobagent serve`` finds and drives the phones (host/fleet.py)."""

    max_queued_per_device: Annotated[int, msgspec.Meta(ge=0, le=10_000)] = 4
    max_fleet_queue: Annotated[int, msgspec.Meta(ge=0, le=100_000)] = 64
    cancel_grace_s: Positive = 5.0  # Cancel -> hard stop when no safe point came in time
    episode_timeout_s: Positive = 1800.0
    adb_host: str = "127.0.0.1"
    adb_port: Port = 0  # 0: $ANDROID_ADB_SERVER_PORT, else 5037
    adb_timeout_s: Positive = 15.0
    startup_wait_s: Positive = 10.0  # instructions wait this long for the first listing
    serials: list[str] = []  # only these phones (empty: every phone adb lists)
    publish_timeout_s: Positive = 60.0  # terminal events and status retry this long
    offline_poll_s: Positive = 0.5  # after a device-offline failure, how often to re-check it
    # devices/preflight.py before each episode and when a phone comes online: a phone that
    # sleeps or shows a plain lock screen is woken and unlocked; one that cannot work gets
    # the status ``attention`` (with the fix) and its episodes fail without starting.
    preflight: bool = True
    need_keyboard: bool = False  # the ADB Keyboard must be there (non-ASCII typing)
    stay_awake: bool = False  # `svc power stayon usb` when a phone comes online
    recheck_s: Positive = 30.0  # how often a phone that needs attention is checked again
    # Phones on Wi-Fi, "host:port" (":5555" when left out): `adb connect`ed at start and
    # again after a drop (checked every connect_check_s, retries backing off up to
    # reconnect_max_s). A phone adb lists twice (USB and Wi-Fi: the same ro.serialno and
    # boot id) is driven once, through USB; the other serial shows as its duplicate.
    connect: list[str] = []
    connect_check_s: Positive = 5.0
    reconnect_max_s: Positive = 30.0


class FleetHostConfig(RuntimeConfig):
    """The runtime's sections plus ``[fleet]``: what a plain fleet host (``serve_fleet``)
    loads. The agent's host adds the same section to the agent's (``host.runner``)."""

    fleet: FleetConfig = msgspec.field(default_factory=FleetConfig)


def fleet_section(cfg: RuntimeConfig) -> FleetConfig:
    """``cfg``'s ``[fleet]`` when its schema has one (``FleetHostConfig``,
    ``AgentHostConfig``), else the defaults."""
    fleet = getattr(cfg, "fleet", None)
    return fleet if isinstance(fleet, FleetConfig) else FleetConfig()


DeviceState = Literal["idle", "busy", "offline", "attention"]
OFFLINE_REASON = "device offline"
OUTCOMES_KEPT = 10_000  # as many as the ids SeenIds remembers (a reason is at most 2000 chars)


# ---- what the per-phone work is given ---------------------------------------------------


class EpisodeCancelled(MobagentError):
    """Raised by ``EpisodeControl.check`` at a safe point after a ``Cancel``."""


class EpisodeControl:
    """The running episode's link to the fleet: cancellation and the control messages."""

    def __init__(self, episode_id: str, instruction_id: str) -> None:
        self.episode_id = episode_id
        self.instruction_id = instruction_id
        self.reason = ""
        self._cancelled = anyio.Event()
        self.hard_scope: anyio.CancelScope | None = None
        self.forced = False  # stopped hard after the grace period
        self._closed = False
        self._done = anyio.Event()
        # Approve / Answer / Steer for this episode, in arrival order (a bounded buffer).
        self._send: MemoryObjectSendStream[Msg]
        self.inbox: MemoryObjectReceiveStream[Msg]
        self._send, self.inbox = anyio.create_memory_object_stream[Msg](64)

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self, reason: str = "cancelled") -> None:
        if not self.cancelled:
            self.reason = reason or "cancelled"
            self._cancelled.set()

    async def wait_cancelled(self) -> None:
        await self._cancelled.wait()

    def check(self) -> None:
        """A safe point: raise ``EpisodeCancelled`` when a Cancel has arrived."""
        if self.cancelled:
            raise EpisodeCancelled(self.reason)

    def deliver(self, msg: Msg) -> bool:
        try:
            self._send.send_nowait(msg)
            return True
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False

    @property
    def closed(self) -> bool:
        return self._closed

    async def wait_closed(self) -> None:
        await self._done.wait()

    def close(self) -> None:
        self._closed = True
        self._done.set()
        self._send.close()
        self.inbox.close()


@dataclass
class DeviceHandle:
    """One phone, for one generation of its group (it is rebuilt when the phone returns)."""

    serial: str
    host: str
    generation: int
    adb: adbutils.AdbClient
    bus: Publisher
    device: AdbDevice
    state: dict[str, object] = field(default_factory=dict)  # per-generation scratch space
    # Called (newest first) when this generation's group ends: the phone dropped, or the
    # fleet stops. The work registers its per-phone clean-up here.
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        while self.closers:
            closer = self.closers.pop()
            try:
                closer()
            except Exception as exc:  # one failing clean-up must not skip the others
                log.warning("fleet_closer_failed", error=f"{type(exc).__name__}: {exc}")

    def adb_device(self) -> adbutils.AdbDevice:
        """The adbutils device, scoped to this serial (blocking: call it off the loop)."""
        return self.adb.device(self.serial)

    async def emit(self, msg: Msg, *, timeout_s: float = 15.0) -> None:
        """Publish a step event on this phone's events topic (best effort, logged)."""
        try:
            with anyio.fail_after(timeout_s):
                await self.bus.publish(topics.device_event(self.serial, msg), msg)
        except Exception as exc:
            log.warning("fleet_emit_failed", kind=type(msg).__name__,
                        error=f"{type(exc).__name__}: {exc}")


class EpisodeResult(Protocol):
    """What the work returns: the agent's ``EpisodeOutcome``, or an ``EpisodeFinished``."""

    @property
    def status(self) -> EpisodeStatus: ...
    @property
    def reason(self) -> str: ...
    @property
    def steps(self) -> int: ...


RunEpisode = Callable[[DeviceHandle, Instruction, EpisodeControl], Awaitable[EpisodeResult | None]]
"""The per-phone work: run ``instruction`` on the phone; return the outcome (None = succeeded).

Raise ``EpisodeCancelled`` (``control.check()``) at a safe point after a Cancel; any other
exception fails the episode with its message (or ``device offline`` when adb lost the phone).
The fleet publishes EpisodeStarted / EpisodeFinished and the status; the work publishes its
step events (``handle.emit``).
"""


@runtime_checkable
class BetweenEpisodes(Protocol):
    """Work that also has something to do while its phone waits for a job (the agent's
    frame stream); the fleet runs it in the phone's group, cancelled when the phone goes."""

    async def between_episodes(self, handle: DeviceHandle) -> None: ...


@dataclass
class Job:
    instr: Instruction
    episode_id: str
    fleet: bool  # came from the fleet-wide topic
    queued_at: float
    done: anyio.Event = field(default_factory=anyio.Event)
    finished: EpisodeFinished | None = None  # what the fleet published as its outcome
    result: EpisodeResult | None = None  # what the work returned

    def finish(self, fin: EpisodeFinished) -> None:
        self.finished = fin
        self.done.set()


@dataclass(frozen=True)
class JobOutcome:
    """An in-process run's end (``FleetManager.run_on``): the one ``EpisodeFinished`` the fleet
    published, and what the work returned (None when the episode never reached it)."""

    finished: EpisodeFinished
    result: EpisodeResult | None


@dataclass
class DeviceSlot:
    serial: str
    online: bool = False
    generation: int = 0
    state: DeviceState | None = None
    detail: str = ""  # the last status's detail
    checked_at: float = 0.0  # the last preflight (anyio's clock)
    queue: deque[Job] = field(default_factory=deque)
    current: tuple[Job, EpisodeControl] | None = None
    scope: anyio.CancelScope | None = None
    tg: TaskGroup | None = None
    done: anyio.Event | None = None
    episodes: int = 0
    adb_state: str = ""  # adb's last word on it (device, offline, absent, ...)
    identity: PhoneIdentity = PhoneIdentity()  # the phone itself: one for USB and Wi-Fi
    duplicate_of: str = ""  # the serial the same phone is driven through instead


@dataclass
class FleetStats:
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    ignored: int = 0  # for phones this host does not have
    finished: dict[str, int] = field(default_factory=dict)
    group_starts: int = 0
    group_crashes: int = 0


class FleetManager(Actor):
    """Drives every phone of one host; its inbox is the devices' control topics.

    Instructions arrive through ``submit`` (the host's ``InstructionGate`` calls it after
    validating them) or ``run_on`` (in-process, waiting for the outcome); ``main`` runs
    discovery and the per-phone groups. ``source`` defaults to the adb server of
    ``config`` (``adb_host``, ``adb_port``).
    """

    name = "fleet"

    def __init__(
        self,
        bus: Publisher,
        *,
        run_episode: RunEpisode,
        host: str,
        config: FleetConfig | None = None,
        max_instruction_chars: int = 2000,
        adb_client: adbutils.AdbClient | None = None,
        source: DeviceSource | None = None,
        episode_settings: dict[str, str] | None = None,
    ) -> None:
        super().__init__(bus)
        self.run_episode = run_episode
        # The work's episode-level choices, recorded in each EpisodeStarted (runs compare).
        self.episode_settings = dict(episode_settings or {})
        self.host = topics.check_name(host, "host")
        self.config = config or FleetConfig()
        self.max_instruction_chars = max_instruction_chars
        self.inbox = (topics.all_control_filter(),)
        self.handler_timeout_s = 30.0
        self.stats = FleetStats()
        self._adb_port = self.config.adb_port or adb_server_port()
        self._adb = adb_client
        self.source: DeviceSource = source or AdbDevices(
            self.config.adb_host, self._adb_port, timeout_s=self.config.adb_timeout_s)
        self._slots: dict[str, DeviceSlot] = {}
        # The outcomes published lately, by instruction id, with the phone they went out on:
        # a re-sent instruction id gets its outcome again (repeat_outcome).
        self._outcomes: OrderedDict[str, tuple[str | None, EpisodeFinished]] = OrderedDict()
        self._fleet_queue: deque[Job] = deque()
        self._seen = SeenIds()
        self._ready = anyio.Event()
        self._work = anyio.Event()
        self._tg: TaskGroup | None = None
        self._host_devices: tuple[str, ...] | None = None
        self.connector = WifiConnector(
            self.adb_client, self.config.connect, self.source.present,
            timeout_s=self.config.adb_timeout_s, check_s=self.config.connect_check_s,
            max_backoff_s=self.config.reconnect_max_s) if self.config.connect else None
        # only these phones (none named: every phone), the Wi-Fi ones to connect among them
        self._wanted = set(self.config.serials)
        if self._wanted and self.connector is not None:
            self._wanted.update(self.connector.addresses)
        self._stop_requested = False
        self._stopped = anyio.Event()  # main has ended and said so on every phone's status

    # ---- public view -----------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def devices(self) -> dict[str, DeviceState | None]:
        return {s: slot.state for s, slot in sorted(self._slots.items())}

    def queued(self, serial: str | None = None) -> list[str]:
        """Instruction ids waiting (on one phone, or fleet-wide when ``serial`` is None)."""
        q = self._fleet_queue if serial is None else self._slots[serial].queue
        return [j.instr.id for j in q]

    def running(self, serial: str) -> str | None:
        cur = self._slots[serial].current if serial in self._slots else None
        return cur[0].instr.id if cur else None

    def adb_client(self) -> adbutils.AdbClient:
        if self._adb is None:
            import adbutils  # late: ANDROID_ADB_SERVER_PORT must be set before the first use

            self._adb = adbutils.AdbClient(host=self.config.adb_host, port=self._adb_port,
                                           socket_timeout=self.config.adb_timeout_s)
        return self._adb

    # ---- instructions ----------------------------------------------------------------

    async def submit(self, serial: str | None, instr: Instruction) -> None:
        """Take an accepted instruction: for ``serial``, or fleet-wide when it is None."""
        await self._accept(serial, instr)

    async def repeat_outcome(self, serial: str | None, instr: Instruction) -> None:
        """An instruction id seen before, sent again: publish its outcome again if it has one.

        A broker SIGKILLed before its autosave loses the subscribers' sessions, so an outcome
        published once it is back, before the submitter has subscribed again, reaches nobody
        (its publish was acknowledged all the same). The submitter re-sends an instruction
        whose outcome it has not seen, as it does one whose episode has not started; this
        answers it, with the same episode id. One still queued or running says nothing: its
        outcome is still to come.
        """
        kept = self._outcomes.get(instr.id)
        if kept is None or (serial is not None and kept[0] not in (serial, None)):
            return  # not finished here (yet), or another phone's id
        log.info("fleet_outcome_repeated", id=instr.id, status=kept[1].status)
        await self._publish_event(kept[0], kept[1], terminal=True)

    async def run_on(self, serial: str, instr: Instruction) -> JobOutcome:
        """Run ``instr`` on ``serial`` (queued like any other) and wait for its outcome.

        ``KeyError`` for a phone this fleet does not have, ``ValueError`` for an instruction
        id it has already taken; a refused instruction returns its ``rejected: ...`` outcome.
        """
        taken = await self._accept(serial, instr)
        if taken is None:
            if serial not in self._slots:
                raise KeyError(f"this host has no phone {serial!r} "
                               f"(it has {', '.join(sorted(self._slots)) or 'none'})")
            raise ValueError(f"instruction id {instr.id!r} was already taken by this host")
        if isinstance(taken, EpisodeFinished):
            return JobOutcome(taken, None)
        await taken.done.wait()
        assert taken.finished is not None
        return JobOutcome(taken.finished, taken.result)

    async def _accept(self, serial: str | None, instr: Instruction
                      ) -> Job | EpisodeFinished | None:
        """Queue ``instr``: its job, its rejection, or None (a duplicate, or not ours)."""
        # Every log line about this instruction names its phone (None: fleet-wide).
        with structlog.contextvars.bound_contextvars(device=serial):
            return await self._queue(serial, instr)

    async def _queue(self, serial: str | None, instr: Instruction
                     ) -> Job | EpisodeFinished | None:
        if not self._ready.is_set():
            with anyio.move_on_after(self.config.startup_wait_s):
                await self._ready.wait()
        slot = self._slots.get(serial) if serial is not None else None
        if serial is not None and slot is None:
            # Device topics are subscribed with a wildcard: another host may own this phone.
            self.stats.ignored += 1
            log.info("fleet_instruction_not_ours", id=instr.id)
            return None
        problem = instruction_problem(instr.text, max_chars=self.max_instruction_chars)
        if problem is None and slot is not None and slot.duplicate_of:
            problem = (f"device {serial} is the same phone as {slot.duplicate_of}: send it "
                       f"to {slot.duplicate_of}")
        if problem is not None:
            return await self._reject(serial, instr, problem)
        if instr.id in self._seen:
            self.stats.duplicates += 1
            log.info("fleet_instruction_duplicate", id=instr.id)
            return None
        job = Job(instr, instr.episode_id or f"ep-{uuid.uuid4().hex[:12]}",
                  fleet=serial is None, queued_at=anyio.current_time())
        if slot is None:
            if len(self._fleet_queue) >= self.config.max_fleet_queue and not self._free_slot():
                return await self._reject(None, instr, f"the fleet queue is full "
                                                       f"({self.config.max_fleet_queue} waiting)")
            self._seen.first_time(instr.id)
            self._fleet_queue.append(job)
        else:
            busy = slot.current is not None or not slot.online
            if busy and len(slot.queue) >= self.config.max_queued_per_device:
                return await self._reject(
                    serial, instr, f"device {serial} is busy and its queue is full "
                                   f"({self.config.max_queued_per_device} waiting)")
            self._seen.first_time(instr.id)
            slot.queue.append(job)
        self.stats.accepted += 1
        log.info("fleet_instruction_queued", id=instr.id, fleet=serial is None,
                 episode=job.episode_id)
        self._notify()
        return job

    def _free_slot(self) -> bool:
        return any(s.online and s.current is None and not s.queue and s.state != "attention"
                   for s in self._slots.values())

    async def _reject(self, serial: str | None, instr: Instruction, why: str) -> EpisodeFinished:
        self.stats.rejected += 1
        log.warning("fleet_instruction_rejected", id=instr.id, reason=why)
        source = topics.device_instructions(serial) if serial else topics.fleet_instructions()
        err = Error(topic=source, reason="instruction refused", detail=why,
                    device=serial or "", correlation_id=instr.id, episode_id=instr.episode_id)
        fin = EpisodeFinished(instruction_id=instr.id, status="failed", reason=f"rejected: {why}",
                              device=serial or "", correlation_id=instr.id,
                              episode_id=instr.episode_id)
        await self._publish_event(serial, err)
        await self._publish_event(serial, fin, terminal=True)
        return fin

    # ---- control -----------------------------------------------------------------------

    async def handle(self, topic: str, msg: Msg) -> None:
        serial = topics.serial_of(topic)
        slot = self._slots.get(serial) if serial else None
        if slot is None:
            return  # another host's phone
        with structlog.contextvars.bound_contextvars(device=slot.serial):
            if isinstance(msg, Cancel):
                await self._cancel(slot, msg)
            elif isinstance(msg, Approve | Answer | Steer):
                cur = slot.current
                if cur is not None and self._matches(msg, cur[0]):
                    cur[1].deliver(msg)

    @staticmethod
    def _matches(msg: Msg, job: Job) -> bool:
        if msg.correlation_id and msg.correlation_id != job.instr.id:
            return False
        return not (msg.episode_id and msg.episode_id != job.episode_id)

    async def _cancel(self, slot: DeviceSlot, msg: Cancel) -> None:
        reason = msg.reason or "cancelled"
        cur = slot.current
        if cur is not None and self._matches(msg, cur[0]):
            job, control = cur
            log.info("fleet_cancel_running", id=job.instr.id)
            control.cancel(reason)
            if slot.tg is not None:
                slot.tg.start_soon(self._hard_stop_after_grace, control)
            return
        targeted = bool(msg.correlation_id or msg.episode_id)
        if not targeted:
            log.info("fleet_cancel_nothing_running")
            return
        for queue, serial in ((slot.queue, slot.serial), (self._fleet_queue, None)):
            for job in list(queue):
                if self._matches(msg, job):
                    queue.remove(job)
                    log.info("fleet_cancel_queued", id=job.instr.id, fleet=serial is None)
                    fin = EpisodeFinished(
                        instruction_id=job.instr.id, status="cancelled",
                        reason=f"{reason} (while queued)", device=serial or "",
                        episode_id=job.episode_id, correlation_id=job.instr.id)
                    self._count(fin.status)
                    await self._publish_event(serial, fin, terminal=True)
                    job.finish(fin)
                    return
        log.info("fleet_cancel_unknown", id=msg.correlation_id, episode=msg.episode_id)

    async def _hard_stop_after_grace(self, control: EpisodeControl) -> None:
        with anyio.move_on_after(self.config.cancel_grace_s):
            await control.wait_closed()
            return  # the episode reached a safe point in time
        if control.hard_scope is not None:
            control.forced = True
            log.warning("fleet_cancel_hard", episode=control.episode_id,
                        grace_s=self.config.cancel_grace_s)
            control.hard_scope.cancel()

    # ---- the main loop: discovery and groups ----------------------------------------------

    async def main(self) -> None:
        for slot in self._slots.values():  # a restart of this actor: rediscover everything
            slot.online, slot.scope, slot.tg, slot.done = False, None, None, None
        if self._stop_requested:
            self._stopped.set()
            return
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                if self.connector is not None:
                    tg.start_soon(self.connector.run)
                await self._discover()
        finally:
            self._tg = None
            with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                for slot in list(self._slots.values()):
                    await self._set_status(slot, "offline", "host stopped")
            self._stopped.set()

    async def stop(self, timeout_s: float = 15.0) -> None:
        """An orderly stop while the bus is still up: end every phone's group (a running
        episode finishes as ``failed: host stopping``) and mark each phone offline.

        Cancelling the host instead tears the bus down at the same time, and those last
        messages can be lost; ``serve_fleet`` calls this first.
        """
        self._stop_requested = True
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
        elif not self._ready.is_set():
            return  # main never ran: nothing to say
        with anyio.move_on_after(timeout_s):
            await self._stopped.wait()

    async def _discover(self) -> None:
        backoff = Backoff(0.5, 10.0)
        while True:
            try:
                await self._reconcile(await self.source.present())
                backoff.reset()
            except DeviceSourceError as exc:
                log.warning("fleet_listing_failed", source=self.source.describe(),
                            error=str(exc))
            self._ready.set()  # no adb server yet: do not hold instructions for it
            async with self.source.changes() as changes:
                async for change in changes:
                    await self._on_device(change.serial, change.state)
            delay = backoff.next_delay()
            log.warning("fleet_tracker_restart", source=self.source.describe(),
                        retry_in_s=round(delay, 2))
            await anyio.sleep(delay)

    async def _reconcile(self, listing: dict[str, str]) -> None:
        for serial, slot in list(self._slots.items()):
            if serial not in listing and slot.state != "offline":
                await self._on_device(serial, "absent")
        for serial, state in listing.items():
            await self._on_device(serial, state)

    def _is_wanted(self, serial: str) -> bool:
        if self._wanted and serial not in self._wanted:
            return False
        try:
            topics.check_name(serial)
        except topics.TopicError as exc:
            log.warning("fleet_serial_unusable", serial=serial, error=str(exc))
            return False
        return True

    async def _on_device(self, serial: str, state: str) -> None:
        if not self._is_wanted(serial):
            return
        with structlog.contextvars.bound_contextvars(device=serial):
            await self._device_changed(serial, state)

    async def _device_changed(self, serial: str, state: str) -> None:
        slot = self._slots.get(serial)
        if slot is None:
            if state == ABSENT:
                return  # never seen: nothing to report
            slot = self._slots[serial] = DeviceSlot(serial)  # shown even if never online
        slot.adb_state = state
        if state == "device":
            await self._go_online(slot)
            return
        if self.connector is not None:
            self.connector.wake(serial)
        slot.duplicate_of = ""
        check = adb_check(state)
        if state != ABSENT:
            log.warning("fleet_device_unusable", adb_state=state, fix=check.fix)
        await self._go_offline(slot, f"{check.value} — {check.fix}",
                               state="offline" if state in (ABSENT, "offline") else "attention")
        for dup in list(self._slots.values()):  # the same phone's other serial takes over
            if dup.duplicate_of == serial and dup.adb_state == "device":
                log.info("fleet_duplicate_takes_over", duplicate=dup.serial, of=serial)
                dup.duplicate_of = ""
                await self._go_online(dup)

    async def _go_online(self, slot: DeviceSlot) -> None:
        if slot.online or self._tg is None:
            return
        twin = self._slots.get(slot.duplicate_of)
        if twin is not None and twin.online:
            return  # still the same phone's other serial, driven there
        slot.duplicate_of = ""
        if not await self._keep_over_twin(slot):
            return
        await self._wait_group_exit(slot)
        slot.online = True
        slot.generation += 1
        self.stats.group_starts += 1
        log.info("fleet_device_online", generation=slot.generation)
        await self._tg.start(self._device_group, slot)
        await self._publish_host_status()

    async def _keep_over_twin(self, slot: DeviceSlot) -> bool:
        """One phone, one agent: a phone adb lists twice (USB and Wi-Fi) says it is the
        same phone through both (``devices/identity.py``: its ``ro.serialno`` and its boot
        id). The serial online first stays, unless the new one is USB and the other on the
        network and idle; the serial not kept shows as a duplicate. Phones that only share
        a factory serial are both driven, with a warning. True: ``slot`` is the one to drive."""
        slot.identity = await self._read_identity(slot.serial)
        online = [s for s in self._slots.values() if s is not slot and s.online]
        for other in online:
            if slot.identity.shares_serial(other.identity):
                log.warning("fleet_serialno_shared", other=other.serial,
                            serialno=slot.identity.serialno,
                            fix="two phones, both driven; " + SHARED_SERIAL_FIX)
        twin = next((s for s in online if slot.identity.same_phone(s.identity)), None)
        if twin is None:
            return True
        swap = (not is_network_serial(slot.serial) and is_network_serial(twin.serial)
                and twin.current is None)
        keep, dup = (slot, twin) if swap else (twin, slot)
        log.warning("fleet_device_duplicate", duplicate=dup.serial, of=keep.serial,
                    serialno=slot.identity.serialno, boot_id=slot.identity.boot_id)
        detail = (f"duplicate of {keep.serial}: the same phone (ro.serialno "
                  f"{slot.identity.serialno}, the same boot id), driven through {keep.serial}")
        if swap:
            await self._go_offline(twin, detail)
        else:
            await self._set_status(slot, "offline", detail)
        dup.duplicate_of = keep.serial
        return swap

    async def _read_identity(self, serial: str) -> PhoneIdentity:
        """The phone's ``ro.serialno`` and boot id (empty when unread: never a duplicate)."""
        return await phone_identity(AdbDevice(serial, client=self.adb_client(),
                                              timeout_s=self.config.adb_timeout_s))

    async def _go_offline(self, slot: DeviceSlot, detail: str,
                          state: DeviceState = "offline") -> None:
        if not slot.online:
            if slot.state != state or slot.detail != detail:
                await self._set_status(slot, state, detail)
            return
        slot.online = False
        log.info("fleet_device_offline", detail=detail)
        if slot.scope is not None:
            slot.scope.cancel()
        await self._wait_group_exit(slot)
        await self._set_status(slot, state, detail)
        await self._publish_host_status()

    async def _wait_group_exit(self, slot: DeviceSlot) -> None:
        if slot.done is not None:
            with anyio.move_on_after(self.config.adb_timeout_s):
                await slot.done.wait()

    # ---- one phone's group ---------------------------------------------------------------

    async def _device_group(self, slot: DeviceSlot, *, task_status: TaskStatus[None]) -> None:
        # Every log line of this phone's group (its episodes, its work, its clean-up) names
        # the phone: bound once, in this task's own context.
        structlog.contextvars.bind_contextvars(device=slot.serial)
        done = slot.done = anyio.Event()
        handle = DeviceHandle(
            serial=slot.serial, host=self.host, generation=slot.generation,
            adb=self.adb_client(), bus=self.bus,
            device=AdbDevice(slot.serial, client=self.adb_client(),
                             timeout_s=self.config.adb_timeout_s),
        )

        async def loop() -> None:
            try:
                async with anyio.create_task_group() as tg:
                    slot.tg = tg
                    if isinstance(self.run_episode, BetweenEpisodes):
                        tg.start_soon(self.run_episode.between_episodes, handle)
                    await self._device_loop(slot, handle)
            finally:
                slot.tg = None

        async def crashed(cause: BaseException, _restarts: int, delay: float) -> None:
            # A bug in the loop: this phone's group restarts, the others are not touched.
            self.stats.group_crashes += 1
            log.error("fleet_device_group_crashed", error=f"{type(cause).__name__}: {cause}",
                      retry_in_s=round(delay, 2))
            await self.report(topics.device_status(slot.serial), None,
                              "device group crashed", f"{slot.serial}: {cause}")

        try:
            with anyio.CancelScope() as scope:
                slot.scope = scope
                task_status.started()
                await restart_with_backoff(loop, crashed, healthy_after_s=30.0)
        finally:
            handle.close()
            slot.scope = None
            done.set()

    async def _device_loop(self, slot: DeviceSlot, handle: DeviceHandle) -> None:
        await self._check_phone(slot, handle, first=True)
        while True:
            job = self._take(slot)
            if job is None:
                work = self._work
                recheck_at = slot.checked_at + self.config.recheck_s
                with anyio.move_on_after(recheck_at - anyio.current_time()
                                         if slot.state == "attention" else float("inf")):
                    await work.wait()
                if slot.state == "attention" and anyio.current_time() >= recheck_at:
                    await self._check_phone(slot, handle, wake=False)
                continue
            if not await self._check_phone(slot, handle):
                if job.fleet:  # another phone may take it; this one waits for its fix
                    self._fleet_queue.appendleft(job)
                    self._notify()
                else:
                    await self._refuse(slot, job)
                continue
            outcome = await self._run_job(slot, handle, job)
            if outcome.reason == OFFLINE_REASON:
                await self._await_device_back(slot)

    async def _check_phone(self, slot: DeviceSlot, handle: DeviceHandle, *, first: bool = False,
                           wake: bool = True) -> bool:
        """The phone's preflight (woken and unlocked where it can be, unless ``wake`` is
        False); the status says ``attention`` and why when it cannot work, ``idle`` again
        when it can. True: an episode may start."""
        if not self.config.preflight:
            if first:
                await self._set_status(slot, "idle", f"generation {handle.generation}")
            return True
        pre = await self._preflight(handle, wake=wake, stay_awake=first and self.config.stay_awake)
        slot.checked_at = anyio.current_time()
        if not pre.ready:
            log.warning("fleet_device_needs_attention", summary=pre.summary,
                        failing=[c.name for c in pre.attention], done=pre.done)
            if (slot.state, slot.detail) != ("attention", pre.summary):
                await self._set_status(slot, "attention", pre.summary)
            return False
        log.info("fleet_preflight_ready", took_s=pre.took_s, done=pre.done,
                 unknown=[c.name for c in pre.checks if c.ok is None])
        if first or slot.state == "attention":
            await self._set_status(slot, "idle", f"generation {handle.generation}: ready"
                                   + (f" ({', '.join(pre.done)})" if pre.done else ""))
        return True

    async def _preflight(self, handle: DeviceHandle, *, wake: bool, stay_awake: bool
                         ) -> Preflight:
        need = self.config.need_keyboard
        try:
            with anyio.fail_after(self.config.adb_timeout_s * 2):
                if not wake:
                    return await preflight(handle.device, need_keyboard=need)
                return await ready_phone(handle.device, need_keyboard=need, stay_awake=stay_awake)
        except TimeoutError:
            return Preflight(serial=handle.serial, checks=[adb_check(
                "device", f"the preflight took over {self.config.adb_timeout_s * 2:g}s")])

    async def _refuse(self, slot: DeviceSlot, job: Job) -> None:
        """A job taken while the phone needs attention: it fails without starting."""
        instr = job.instr
        fin = EpisodeFinished(instruction_id=instr.id, status="failed",
                              reason=f"not started: {slot.serial} {slot.detail}"[:2000],
                              device=slot.serial, episode_id=job.episode_id,
                              correlation_id=instr.id)
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.config.publish_timeout_s):
            await self._finish(slot, job, fin, idle=False)

    def _take(self, slot: DeviceSlot) -> Job | None:
        if slot.queue:
            return slot.queue.popleft()
        if self._fleet_queue and slot.state != "attention":
            return self._fleet_queue.popleft()
        return None

    def _notify(self) -> None:
        self._work.set()
        self._work = anyio.Event()

    async def _await_device_back(self, slot: DeviceSlot) -> None:
        """After a device-offline failure that adb has not reported yet: hold the queue."""
        if await self._device_ok(slot.serial):
            return
        await self._set_status(slot, "offline", OFFLINE_REASON)
        while True:
            await anyio.sleep(self.config.offline_poll_s)
            if await self._device_ok(slot.serial):
                break
        await self._set_status(slot, "idle", "back")

    async def _device_ok(self, serial: str) -> bool:
        """Listed as usable by the source and answering: really there."""
        return await self.source.ready(serial)

    async def _run_job(self, slot: DeviceSlot, handle: DeviceHandle, job: Job) -> EpisodeFinished:
        """The job's episode, announced and finished here, once (the work only steps)."""
        instr = job.instr
        control = EpisodeControl(job.episode_id, instr.id)
        slot.current = (job, control)
        dev, ep, cid = slot.serial, job.episode_id, instr.id
        finished: EpisodeFinished | None = None
        try:
            await self._set_status(slot, "busy", f"episode {job.episode_id}")
            await self._publish_event(slot.serial, EpisodeStarted(
                instruction_id=instr.id, text=instr.text, task=instr.task,
                settings=self.episode_settings, device=dev, episode_id=ep, correlation_id=cid))
            status, reason, steps = await self._execute(slot, handle, job, control)
            finished = EpisodeFinished(instruction_id=instr.id, status=status,
                                       reason=reason[:2000], steps=steps,
                                       device=dev, episode_id=ep, correlation_id=cid)
        finally:
            slot.current = None
            control.close()
            slot.episodes += 1
            if finished is None:
                # Cancelled from outside: the phone dropped (its group was cancelled), or the
                # host is stopping. Say so once, shielded, before the cancellation goes on.
                why = OFFLINE_REASON if not slot.online else "host stopping"
                finished = EpisodeFinished(instruction_id=instr.id, status="failed",
                                           reason=why, device=dev, episode_id=ep,
                                           correlation_id=cid)
                limit = self.config.publish_timeout_s if why == OFFLINE_REASON else 5.0
                with anyio.CancelScope(shield=True), anyio.move_on_after(limit):
                    await self._finish(slot, job, finished, idle=False)
        # Shielded: a phone dropping right now must not swallow this outcome.
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.config.publish_timeout_s):
            await self._finish(slot, job, finished,
                               idle=finished.reason != OFFLINE_REASON and slot.online)
        return finished

    async def _finish(self, slot: DeviceSlot, job: Job, fin: EpisodeFinished, *,
                      idle: bool) -> None:
        self._count(fin.status)
        log.info("fleet_episode_finished", id=fin.instruction_id, status=fin.status,
                 reason=fin.reason[:200], steps=fin.steps)
        try:
            await self._publish_event(slot.serial, fin, terminal=True)
            if idle:
                await self._set_status(slot, "idle",
                                       f"last episode {fin.episode_id}: {fin.status}")
        finally:
            job.finish(fin)  # an in-process caller learns the outcome whatever the bus did

    def _count(self, status: str) -> None:
        self.stats.finished[status] = self.stats.finished.get(status, 0) + 1

    async def _execute(
        self, slot: DeviceSlot, handle: DeviceHandle, job: Job, control: EpisodeControl
    ) -> tuple[EpisodeStatus, str, int]:
        instr = job.instr
        if not instr.episode_id:  # one episode id for the fleet's events and the work's
            instr = msgspec.structs.replace(instr, episode_id=job.episode_id)
        try:
            with anyio.CancelScope() as hard:
                control.hard_scope = hard
                with anyio.fail_after(self.config.episode_timeout_s):
                    result = job.result = await self.run_episode(handle, instr, control)
            if hard.cancelled_caught:
                return "cancelled", f"{control.reason} (stopped after "\
                                    f"{self.config.cancel_grace_s:g}s grace)", 0
        except TimeoutError:
            return "failed", f"episode timed out after {self.config.episode_timeout_s:g}s", 0
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            cause = root_cause(exc)
            if isinstance(cause, EpisodeCancelled):
                return "cancelled", control.reason or str(cause) or "cancelled", 0
            if isinstance(cause, TimeoutError):
                return "failed", f"episode timed out after {self.config.episode_timeout_s:g}s", 0
            if not await self._device_ok(slot.serial):
                log.warning("fleet_episode_device_lost", error=str(cause))
                return "failed", OFFLINE_REASON, 0
            if isinstance(cause, MobagentError | OSError):  # the phone, model or bus failed
                log.warning("fleet_episode_failed", error=f"{type(cause).__name__}: {cause}")
            else:  # a bug: the phone goes on with its queue, the traceback goes to the log
                log.exception("fleet_episode_crashed", error=f"{type(cause).__name__}: {cause}")
            return "failed", f"{type(cause).__name__}: {cause}", 0
        if result is None:
            return ("cancelled", control.reason, 0) if control.cancelled else ("succeeded", "", 0)
        if result.status == "failed" and not await self._device_ok(slot.serial):
            log.warning("fleet_episode_device_lost", error=result.reason)
            return "failed", OFFLINE_REASON, result.steps  # the work saw an adb error
        return result.status, result.reason, result.steps

    # ---- publishing -----------------------------------------------------------------------

    async def _set_status(self, slot: DeviceSlot, state: DeviceState, detail: str = "") -> None:
        slot.state, slot.detail = state, detail
        msg = DeviceStatus(state=state, host=self.host, detail=detail[:500], device=slot.serial,
                           model=slot.identity.model,
                           episode_id=slot.current[0].episode_id if slot.current else "")
        await self._publish(topics.device_status(slot.serial), msg, retain=True, terminal=True)

    async def _publish_host_status(self) -> None:
        online = tuple(s for s, slot in sorted(self._slots.items()) if slot.online)
        if online == self._host_devices:
            return
        self._host_devices = online
        msg = HostStatus(host=self.host, state="online", devices=list(online), version=VERSION)
        await self._publish(topics.host_status(self.host), msg, retain=True, terminal=True)

    async def _publish_event(self, serial: str | None, msg: Msg, *, terminal: bool = False) -> None:
        if isinstance(msg, EpisodeFinished):
            self._outcomes[msg.instruction_id] = (serial, msg)
            self._outcomes.move_to_end(msg.instruction_id)
            while len(self._outcomes) > OUTCOMES_KEPT:
                self._outcomes.popitem(last=False)
        topic = topics.device_event(serial, msg) if serial else topics.host_event(self.host, msg)
        await self._publish(topic, msg, terminal=terminal)

    async def _publish(self, topic: str, msg: Msg, *, retain: bool = False,
                       terminal: bool = False) -> None:
        """Publish; terminal messages (outcomes, status) retry through a broker outage."""
        deadline = anyio.current_time() + (self.config.publish_timeout_s if terminal else 15.0)
        while True:
            try:
                with anyio.fail_after(max(0.1, deadline - anyio.current_time())):
                    await self.bus.publish(topic, msg, retain=retain)
                return
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:
                if anyio.current_time() >= deadline:
                    log.error("fleet_publish_failed", topic=topic, kind=type(msg).__name__,
                              error=f"{type(exc).__name__}: {exc}")
                    return
                await anyio.sleep(0.2)


# ---- wiring -------------------------------------------------------------------------------


async def run_fleet(
    bus: BusLike, fleet: FleetManager, *, extra_actors: Sequence[Actor] = ()
) -> None:
    """Run ``fleet`` on a connected bus with its own instruction gate, until cancelled."""
    gate = InstructionGate(bus, max_chars=fleet.max_instruction_chars,
                           on_instruction=fleet.submit, on_duplicate=fleet.repeat_outcome,
                           host=fleet.host)
    await run_actors(bus, [gate, fleet, *extra_actors])


Work = Callable[[Bus], tuple[RunEpisode, Sequence[Actor]]]
"""Built on the host's bus once it is up: the per-phone work and the actors it needs there
(the agent's services, the recorder, a progress view)."""


class FleetHost:
    """The host runtime (broker, bus, gate) with a ``FleetManager`` on ``source``.

    ``run`` serves until cancelled; ``run_on`` runs one instruction in-process and returns
    its outcome. A stop is orderly: the fleet ends its phones' groups and publishes their
    outcomes and offline status while the bus is still connected, and only then is the host
    (bus, broker) cancelled. On a 3.1.1 broker (the embedded one) fleet-wide instructions
    are dispatched locally, which is right for a single host only.
    """

    def __init__(self, cfg: RuntimeConfig, work: Work, *, source: DeviceSource | None = None,
                 fleet_config: FleetConfig | None = None,
                 episode_settings: dict[str, str] | None = None,
                 tracing: Tracing | None = None) -> None:
        self.cfg = cfg
        self.work = work
        self.episode_settings = episode_settings
        self.tracing = tracing or Tracing()  # the work's traces, flushed when the host stops
        self.source = source
        self.fleet_config = fleet_config or fleet_section(cfg)
        self.fleet: FleetManager | None = None  # built with the host's bus
        self.runtime = HostRuntime(cfg, on_instruction=self._submit,
                                   on_duplicate=self._repeat_outcome, actors=self._actors)

    def _actors(self, bus: Bus) -> list[Actor]:
        run_episode, extra = self.work(bus)
        self.fleet = FleetManager(bus, run_episode=run_episode, host=self.runtime.host,
                                  config=self.fleet_config, source=self.source,
                                  max_instruction_chars=self.cfg.limits.max_instruction_chars,
                                  episode_settings=self.episode_settings)
        if self.source is None and bus.protocol != "5":
            log.warning("fleet_local_dispatch", protocol=bus.protocol,
                        hint="MQTT 3.1.1 has no shared subscriptions: run one host per broker")
        return [self.fleet, *extra]

    async def _submit(self, serial: str | None, instr: Instruction) -> None:
        if self.fleet is not None:  # the gate only passes instructions once actors run
            await self.fleet.submit(serial, instr)

    async def _repeat_outcome(self, serial: str | None, instr: Instruction) -> None:
        if self.fleet is not None:
            await self.fleet.repeat_outcome(serial, instr)

    async def run_on(self, serial: str, instr: Instruction) -> JobOutcome:
        """Run ``instr`` on ``serial`` now and wait for its outcome (``FleetManager.run_on``)."""
        if self.fleet is None:
            raise RuntimeError("the host is not running: start FleetHost.run first")
        return await self.fleet.run_on(serial, instr)

    async def run(self, *, task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; ``task_status.started`` gets the broker URL."""
        async with traces_flushed(self.tracing):
            await self._run(task_status)

    async def _run(self, task_status: TaskStatus[str]) -> None:
        # Not shielded while starting (a stop then just cancels it); shielded once started,
        # so that our caller's cancellation reaches the fleet first (below).
        host_scope = anyio.CancelScope()
        host_done = anyio.Event()

        async def run_host(*, task_status: TaskStatus[str]) -> None:
            try:
                with host_scope:
                    await self.runtime.run(task_status=task_status)
            finally:
                host_done.set()

        async with anyio.create_task_group() as tg:
            url = await tg.start(run_host)
            host_scope.shield = True
            try:
                task_status.started(url)
                await host_done.wait()  # the host only ends by itself on an error (raised by tg)
            finally:
                with anyio.CancelScope(shield=True):
                    if self.fleet is not None and not host_done.is_set():
                        await self.fleet.stop()
                    host_scope.cancel()
                    with anyio.move_on_after(30):
                        await host_done.wait()


async def serve_fleet(
    cfg: RuntimeConfig,
    run_episode: RunEpisode,
    *,
    fleet_config: FleetConfig | None = None,
    extra_actors: Callable[[Bus], Sequence[Actor]] | None = None,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """A ``FleetHost`` on the adb server's phones with ``run_episode`` as the work (and
    ``extra_actors(bus)`` beside it); returns when cancelled."""
    def work(bus: Bus) -> tuple[RunEpisode, Sequence[Actor]]:
        return run_episode, (extra_actors(bus) if extra_actors is not None else ())

    await FleetHost(cfg, work, fleet_config=fleet_config).run(task_status=task_status)
