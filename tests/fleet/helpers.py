"""Shared pieces of the fleet tests: a host (bus + FleetManager), a client, a scripted worker.

The worker (``ScriptedWork``) is a small deterministic ``run_episode``: each step taps a
point derived from the instruction id and types a token through adbutils on the phone, with a
safe point (``control.check()``) before each step. The simulated phones record what they got,
so a test can check that each phone shows only its own instructions' effects.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import msgspec

from devices.discovery import DeviceSource
from host.fleet import DeviceHandle, EpisodeControl, FleetConfig, FleetManager, run_fleet
from host.host_runtime import VERSION
from protocol.messages import (
    CODEC,
    ActionDone,
    DeviceStatus,
    EpisodeFinished,
    EpisodeStarted,
    Error,
    HostStatus,
    Instruction,
    Message,
)
from protocol.operations import TypeText
from runtime import topics
from runtime.bus import BrokerAddress, Bus
from runtime.config import BusConfig

MAX_PAYLOAD = 64 * 1024
FAST = BusConfig(reconnect_min_s=0.05, reconnect_max_s=0.5, connect_timeout_s=10.0,
                 publish_timeout_s=10.0, keepalive_s=10)


def tap_point(instruction_id: str, step: int) -> tuple[int, int]:
    """A point on a 1080x2400 screen that names the instruction and the step."""
    h = zlib.crc32(instruction_id.encode())
    return 10 + (h % 1000), 10 + step * 100 + (h >> 16) % 50


def token(instruction_id: str, step: int) -> str:
    return f"{instruction_id}.{step}"


@dataclass
class ScriptedWork:
    """``run_episode`` for tests: ``steps`` x (safe point, tap, type, sleep ``step_s``)."""

    steps: int = 2
    step_s: float = 0.05
    ran: list[tuple[str, str, int]] = field(default_factory=list)  # (serial, id, generation)
    started: dict[str, anyio.Event] = field(default_factory=lambda: defaultdict(anyio.Event))
    ignore_cancel: bool = False

    async def __call__(self, handle: DeviceHandle, instr: Instruction,
                       control: EpisodeControl) -> EpisodeFinished:
        self.ran.append((handle.serial, instr.id, handle.generation))
        self.started[instr.id].set()
        dev = handle.adb_device()
        steps = instr.max_steps or self.steps
        for step in range(1, steps + 1):
            if not self.ignore_cancel:
                control.check()
            x, y = tap_point(instr.id, step)
            with anyio.fail_after(10):
                await anyio.to_thread.run_sync(dev.click, x, y, abandon_on_cancel=True)
            with anyio.fail_after(10):
                await anyio.to_thread.run_sync(dev.send_keys, token(instr.id, step),
                                               abandon_on_cancel=True)
            await handle.emit(ActionDone(operation=TypeText(text=token(instr.id, step)), x=x, y=y,
                                         device=handle.serial,
                                         episode_id=control.episode_id, step=step,
                                         correlation_id=instr.id))
            await anyio.sleep(self.step_s)
        return EpisodeFinished(instruction_id=instr.id, status="succeeded", steps=steps)


def bus_for(address: BrokerAddress, client_id: str, *, persistent: bool = True,
            username: str = "", password: str = "", will: tuple[str, HostStatus] | None = None,
            cfg: BusConfig = FAST, reject_topic: str | None = None) -> Bus:
    if username:
        cfg = msgspec.structs.replace(cfg, username=username, password=password)
    return Bus(cfg, address, client_id=client_id, persistent=persistent, will=will,
               max_payload_bytes=MAX_PAYLOAD, reject_topic=reject_topic, codec=CODEC)


@asynccontextmanager
async def fleet_host(
    address: BrokerAddress, serials: list[str], work: ScriptedWork | Callable[..., object], *,
    host: str = "h1", config: FleetConfig | None = None, username: str = "",
    password: str = "", wait_idle: bool = True, source: DeviceSource | None = None,
) -> AsyncIterator[FleetManager]:
    """A host: its bus (with the host's last will), a FleetManager on ``serials``, its gate."""
    cfg = config or FleetConfig(serials=serials, cancel_grace_s=2.0, adb_timeout_s=10.0)
    if not cfg.serials:
        cfg = msgspec.structs.replace(cfg, serials=serials)
    will = (topics.host_status(host), HostStatus(host=host, state="offline", version=VERSION))
    async with bus_for(address, f"fleet-test-{host}", username=username, password=password,
                       will=will, reject_topic=topics.host_event(host, "error")) as bus, \
            anyio.create_task_group() as tg:
        await bus.publish(topics.host_status(host),
                          HostStatus(host=host, state="online", version=VERSION), retain=True)
        fleet = FleetManager(bus, run_episode=work, host=host, config=cfg,  # type: ignore[arg-type]
                             max_instruction_chars=200, source=source)
        tg.start_soon(run_fleet, bus, fleet)
        if wait_idle:
            with anyio.fail_after(30):
                idle = sorted(serials)
                while sorted(s for s, st in fleet.devices().items() if st == "idle") != idle:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
        try:
            yield fleet
        finally:
            tg.cancel_scope.cancel()


@dataclass
class Client:
    """A user of the fleet: publishes instructions and control, collects events and status."""

    bus: Bus
    started: list[EpisodeStarted] = field(default_factory=list)
    finished: list[EpisodeFinished] = field(default_factory=list)
    errors: list[Error] = field(default_factory=list)
    actions: list[ActionDone] = field(default_factory=list)
    status: list[tuple[str, DeviceStatus, float]] = field(default_factory=list)
    changed: anyio.Event = field(default_factory=anyio.Event)

    def finished_ids(self) -> dict[str, EpisodeFinished]:
        return {f.instruction_id: f for f in self.finished}

    def last_status(self, serial: str) -> str | None:
        states = [s.state for who, s, _ in self.status if who == serial]
        return states[-1] if states else None

    async def instruct(self, serial: str | None, instr: Instruction) -> None:
        topic = topics.device_instructions(serial) if serial else topics.fleet_instructions()
        await self.bus.publish(topic, instr)

    async def wait_finished(self, ids: set[str] | list[str], timeout_s: float = 30.0) -> None:
        want = set(ids)
        with anyio.fail_after(timeout_s):
            while not want <= set(self.finished_ids()):
                await self._wait_change()

    async def wait_finished_on(self, serial: str, n: int, timeout_s: float = 30.0
                               ) -> EpisodeFinished:
        """The phone's n-th EpisodeFinished (for instructions whose ids the test did not pick,
        e.g. submitted from a web page)."""
        def seen() -> list[EpisodeFinished]:
            return [f for f in self.finished if f.device == serial]

        with anyio.fail_after(timeout_s):
            while len(seen()) < n:
                await self._wait_change()
        return seen()[n - 1]

    async def wait_actions(self, instruction_id: str, count: int, timeout_s: float = 30.0) -> None:
        """Until ``count`` performed actions of the instruction's episode have been seen."""
        with anyio.fail_after(timeout_s):
            while sum(1 for a in self.actions
                      if a.correlation_id == instruction_id and a.ok) < count:
                await self._wait_change()

    async def wait_status(self, serial: str, state: str, timeout_s: float = 15.0) -> float:
        with anyio.fail_after(timeout_s):
            while self.last_status(serial) != state:
                await self._wait_change()
        return [t for who, _, t in self.status if who == serial][-1]

    async def _wait_change(self) -> None:
        ev = self.changed
        with anyio.move_on_after(0.2):
            await ev.wait()

    def _on(self, topic: str, msg: Message) -> None:
        if isinstance(msg, EpisodeStarted):
            self.started.append(msg)
        elif isinstance(msg, EpisodeFinished):
            self.finished.append(msg)
        elif isinstance(msg, Error):
            self.errors.append(msg)
        elif isinstance(msg, ActionDone):
            self.actions.append(msg)
        elif isinstance(msg, DeviceStatus):
            serial = topics.serial_of(topic)
            if serial:
                self.status.append((serial, msg, anyio.current_time()))
        self.changed.set()
        self.changed = anyio.Event()


@asynccontextmanager
async def fleet_client(address: BrokerAddress, name: str = "client", *, username: str = "",
                       password: str = "") -> AsyncIterator[Client]:
    async with bus_for(address, f"fleet-test-{name}", username=username,
                       password=password) as bus, anyio.create_task_group() as tg:
        client = Client(bus)
        for kind in ("episode_started", "episode_finished", "error", "action_done"):
            await bus.subscribe(topics.device_events_filter(None, kind))
        await bus.subscribe(topics.host_events_filter())
        await bus.subscribe(topics.all_device_status_filter())

        async def pump() -> None:
            async for topic, msg in bus.messages():
                client._on(topic, msg)

        tg.start_soon(pump)
        try:
            yield client
        finally:
            tg.cancel_scope.cancel()


def typed_tokens(phone: object) -> list[str]:
    """What a RecordingPhone was typed, in order."""
    calls = phone.calls_of("type_text")  # type: ignore[attr-defined]
    return [str(c[0]) for c in calls]


def tapped(phone: object) -> list[tuple[int, int]]:
    calls = phone.calls_of("tap")  # type: ignore[attr-defined]
    return [(int(c[0]), int(c[1])) for c in calls]
