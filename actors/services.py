"""The host's agent services, built and run together: ``AgentServices``.

One ``AgentServices`` per host serves every phone of that host: the capture, perception,
actuator and reflector services, the reply router, the shared ``FrameStore`` and the
``DeviceRegistry`` of ``DeviceEntry`` (a phone with its engines). The host calls
``register`` when it adds a phone and ``unregister`` when it leaves (hot-plug), while the
subscriptions made once at start stay; a ``DeviceAgent`` only sends requests. With
``remote_perception`` the host runs no perception: ``mobagent perceive`` workers serve it
(``actors/perception_remote.py``). Which request each service answers: docs/architecture.md.

Two ways to run them:

- **on the bus** (``mobagent serve``, ``host.runner.agent_host``, the fleet benchmark): pass
  ``actors()`` to ``run_actors`` / ``run_fleet(extra_actors=...)`` / ``HostRuntime`` with the
  host's ``Bus`` as ``bus``; requests and replies go through the broker.
- **loopback** (``AgentServices.loopback(publisher, ...)``): for a ``DeviceAgent`` on a
  publisher that cannot deliver (unit tests, one-off tools), the same actors run in-process
  behind a ``runtime.actor.Router``; events still go out on the publisher.

Blocking pixel work (hashing, JPEG encoding, decoding, diffs) from every phone shares one
``CapacityLimiter`` (``cpu_threads``), so 16 phones cannot pile 16 CPU-bound threads onto
2 cores and starve the event loop; adb calls keep anyio's default thread pool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

from actors.actuator import ActuatorEngine, ActuatorService
from actors.capture import CaptureEngine, CaptureService, TextReader
from actors.config import AgentSettings
from actors.frames import FrameStore
from actors.perception import PerceptionEngine, PerceptionService
from actors.perception_remote import RemotePerception, RemoteTimes
from actors.reflector import ReflectorEngine, ReflectorService
from actors.rpc import DeviceRegistry, LoopbackBus, ReplyRouter, Requests
from actors.watching import Leases, WatchingActor
from devices.adb import Device
from runtime.actor import Actor, Publisher, Router
from runtime.cpu_ledger import CpuLedger


@dataclass
class DeviceEntry:
    """One phone as the services see it: the device and its per-device engines (each
    service types what it uses of it: ``CaptureEntry``, ``ActuatorEntry``, ...)."""

    serial: str
    device: Device
    settings: AgentSettings
    capture: CaptureEngine
    actuator: ActuatorEngine
    reflector: ReflectorEngine
    episode_id: str = ""  # the episode the reflector's per-episode memory belongs to
    latest_frame: str = ""  # the newest frame id (speculative OCR skips older ones)


class AgentServices:
    """Every agent service of one host, its device registry, frame store and reply router."""

    def __init__(
        self, bus: Publisher, perception: PerceptionEngine | None = None, *,
        remote_perception: RemoteTimes | None = None,
        concurrency: int = 32, cpu_threads: int = 2, frames_per_device: int = 4,
        _router: Router | None = None,
    ) -> None:
        self.cpu = anyio.CapacityLimiter(max(1, cpu_threads))
        # the CPU of each phone's frames by stage (runtime.cpu_ledger): perception's own
        # ledger when it runs here, so capture's encoding and its reads add up in one place
        self.cpu_ledger = (perception.ledger if perception is not None and remote_perception
                           is None else CpuLedger())
        self.registry: DeviceRegistry[DeviceEntry] = DeviceRegistry()
        self.frames = FrameStore(frames_per_device, limiter=self.cpu, ledger=self.cpu_ledger)
        self._router = _router
        self.bus: Publisher = LoopbackBus(bus, _router) if _router is not None else bus
        self.replies = ReplyRouter(self.bus, self.frames)
        self.requests = Requests(self.bus, self.replies)
        # Perception here (an engine and its service), or in workers elsewhere
        # (``remote_perception``: requests carry the frame and are sent again per try).
        self.perception_engine: PerceptionEngine | None = None
        self.perception: PerceptionService | None = None
        self.ground_resend_s: float | None = None
        reader: TextReader
        if remote_perception is None:
            self.perception_engine = reader = perception or PerceptionEngine()
            self.perception_engine.ledger = self.cpu_ledger
            self.perception_engine.frames = self.frames
            self.perception = PerceptionService(self.bus, self.registry, self.frames,
                                                self.perception_engine, concurrency=concurrency)
            self.ground_timeout_s = self.perception.serve_timeout_s
        else:
            reader = RemotePerception(self.requests, remote_perception, self.frames)
            self.ground_timeout_s = remote_perception.timeout_s
            self.ground_resend_s = remote_perception.resend_after_s
        # What the watchers read (screens, full frames): capture makes only that.
        self.leases = Leases()
        self.capture = CaptureService(self.bus, self.registry, self.frames, reader,
                                      concurrency=concurrency, leases=self.leases)
        self.watching = WatchingActor(self.bus, self.leases, self.capture.show_latest)
        self.actuator = ActuatorService(
            self.bus, self.registry, self.requests, concurrency=concurrency,
            frame_timeout_s=self.capture.serve_timeout_s + self.ground_timeout_s)
        self.reflector = ReflectorService(self.bus, self.registry, self.frames,
                                          concurrency=concurrency)
        self._local_users = 0

    @classmethod
    def loopback(cls, publisher: Publisher, perception: PerceptionEngine | None = None,
                 devices: Sequence[tuple[Device, AgentSettings]] = (), *,
                 concurrency: int = 32, cpu_threads: int = 2) -> AgentServices:
        """Services delivered in-process (run them with ``running_locally``), serving
        ``devices`` (phone, settings) from the start."""
        services = cls(publisher, perception, concurrency=concurrency,
                       cpu_threads=cpu_threads, _router=Router())
        for device, settings in devices:
            services.register(device, settings)
        return services

    @property
    def remote_perception(self) -> bool:
        """Whether perception runs in workers elsewhere (requests then carry the frame)."""
        return self.perception is None

    @property
    def is_loopback(self) -> bool:
        return self._router is not None

    def actors(self) -> list[Actor]:
        """What to run on the host's bus (``run_actors``), reply router first."""
        local = [self.perception] if self.perception is not None else []
        return [self.replies, self.capture, *local, self.actuator, self.reflector,
                self.watching]

    def register(self, device: Device, settings: AgentSettings) -> DeviceEntry:
        """Serve a phone (the host calls this when it adds one; again when it comes back
        after a hot-plug, which starts fresh engines); built from the agent's settings."""
        entry = DeviceEntry(
            serial=device.serial, device=device, settings=settings,
            capture=CaptureEngine(device, fmt=settings.frame_format,
                                  quality=settings.jpeg_quality, limiter=self.cpu,
                                  screen_side=settings.screen_side, ledger=self.cpu_ledger),
            actuator=ActuatorEngine(device, packages=settings.packages, wait_s=settings.wait_s,
                                    launcher_pages=settings.launcher_pages),
            reflector=ReflectorEngine(revisit_guard=settings.revisit_guard, limiter=self.cpu),
        )
        self.registry.put(entry)
        return entry

    def serves(self, serial: str) -> bool:
        return serial in self.registry

    def unregister(self, serial: str, entry: DeviceEntry | None = None) -> None:
        """Stop serving a phone (it left); ``entry`` only if it still is the current one."""
        self.registry.remove(serial, entry)
        if serial not in self.registry:
            self.frames.forget(serial)

    @asynccontextmanager
    async def running_locally(self) -> AsyncIterator[None]:
        """Loopback services: run the actors in-process for the block (re-entrant)."""
        router = self._router
        if router is None:
            raise RuntimeError("these services run on the bus, not locally")
        if self._local_users:
            self._local_users += 1
            try:
                yield
            finally:
                self._local_users -= 1
            return
        self._local_users = 1
        try:
            async with anyio.create_task_group() as tg:
                inboxes = [(actor, router.attach(actor)) for actor in self.actors()]
                for actor, inbox in inboxes:
                    tg.start_soon(actor.run, inbox)
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()
                    for _, inbox in inboxes:
                        router.detach(inbox)
        finally:
            self._local_users = 0
