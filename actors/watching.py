"""Who reads the watchers' screens and the full frames: leases, declared by the watchers.

Capture's ``encode`` stage made two things on every frame that only watchers read: the small
JPEG of ``Screen`` (the dashboard's tiles and timeline) and the full encoding of
``Frame.data`` (a recorder's files, a client's screenshot). MQTT cannot tell a publisher who
subscribes, so a watcher says what it reads: a ``Watching`` lease on ``fleet/watching``,
published when it opens, renewed before the lease ends and ended (``lease_s`` 0) when it
closes; a watcher that dies without a word is forgotten when its lease runs out.

- ``Leases`` (host side): the live leases by (watcher, phone), on the host's own clock (the
  watcher's may differ); ``screens(serial)`` and ``frames(serial)`` say whether to make
  them. ``hold`` is a lease without an end, for a reader in the host's own process (the
  recorder ``mobagent run --record`` runs beside the agent).
- ``WatchingActor``: takes the leases off the bus; a lease that starts a watcher's screens
  calls ``on_screens``, so capture shows that watcher every phone at once from the frames
  the host already holds (a dashboard opened after the phones ran is not blank until
  their next capture).
- ``Interest`` (watcher side): the lease kept alive from a watcher's own bus, renewed each
  third of it, and sent again at once when ``renew`` is called (a host came online).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
import structlog

from protocol.messages import Msg, Watching
from runtime import topics
from runtime.actor import Actor, Publisher

log = structlog.get_logger(__name__)

Clock = Callable[[], float]
LEASE_S = 30.0  # a watcher's lease; renewed each third of it, so one lost renewal costs nothing


@dataclass
class _Lease:
    screens: bool
    frames: bool
    until: float


class Leases:
    """The live leases of one host, by (watcher, phone); phone "" is every phone."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self._leases: dict[tuple[str, str], _Lease] = {}

    def take(self, msg: Watching) -> bool:
        """Keep (or end) ``msg``'s lease; True when it starts screens for its watcher (none
        live before for that watcher and phone): the watcher has no screens yet."""
        key = (msg.watcher, msg.device)
        now = self.clock()
        old = self._leases.get(key)
        had_screens = old is not None and old.screens and old.until > now
        if msg.lease_s <= 0 or not (msg.screens or msg.frames):
            self._leases.pop(key, None)
            return False
        self._leases[key] = _Lease(msg.screens, msg.frames, now + msg.lease_s)
        return msg.screens and not had_screens

    def hold(self, watcher: str, *, screens: bool = False, frames: bool = False) -> None:
        """A lease without an end, for a reader in this process (the host's own recorder)."""
        self._leases[(watcher, "")] = _Lease(screens, frames, math.inf)

    def release(self, watcher: str) -> None:
        for key in [k for k in self._leases if k[0] == watcher]:
            del self._leases[key]

    def screens(self, serial: str) -> bool:
        """Whether a live lease reads ``serial``'s screens."""
        return self._live(serial, "screens")

    def frames(self, serial: str) -> bool:
        """Whether a live lease reads ``serial``'s full frames (``Frame.data``)."""
        return self._live(serial, "frames")

    def _live(self, serial: str, what: str) -> bool:
        now = self.clock()
        expired = [k for k, lease in self._leases.items() if lease.until <= now]
        for key in expired:  # a watcher gone without a word: its lease ran out
            del self._leases[key]
        return any(getattr(lease, what) for (_, device), lease in self._leases.items()
                   if device in ("", serial))

    def __len__(self) -> int:
        return len(self._leases)


OnScreens = Callable[[str], Awaitable[None]]
"""Called with the phone a new screens lease names ("" every phone)."""


class WatchingActor(Actor):
    """Takes the watchers' ``Watching`` leases into ``leases``; a new screens lease calls
    ``on_screens`` (capture's catch-up: each phone's latest screen)."""

    name = "watching"

    def __init__(self, bus: Publisher, leases: Leases, on_screens: OnScreens | None = None) -> None:
        super().__init__(bus)
        self.inbox = (topics.fleet_watching(),)
        self.leases = leases
        self.on_screens = on_screens

    async def handle(self, topic: str, msg: Msg) -> None:
        if not isinstance(msg, Watching):
            return
        if msg.device:
            try:
                topics.check_name(msg.device)
            except topics.TopicError:
                return  # no phone of any host has that name
        started = self.leases.take(msg)
        log.debug("watching", watcher=msg.watcher, device=msg.device or "*",
                  screens=msg.screens, frames=msg.frames, lease_s=msg.lease_s)
        if started and self.on_screens is not None:
            await self.on_screens(msg.device)


END_TIMEOUT_S = 1.0  # the lease's end, sent on the way out: a closing watcher waits no longer


class Interest:
    """A watcher's lease, kept alive (``run``) on its own bus: published at once, renewed
    each third of ``lease_s``, and ended when ``run`` is cancelled. The end is best effort
    (QoS 0, briefly): a watcher cancelled with its bus has no connection left to say it
    on, and its lease then runs out. ``renew`` sends it again now (a host that just came
    online learns it before the next renewal)."""

    def __init__(self, bus: Publisher, watcher: str, *, screens: bool = False,
                 frames: bool = False, device: str = "", lease_s: float = LEASE_S,
                 publish_timeout_s: float = 10.0) -> None:
        self.bus = bus
        self.lease = Watching(watcher=watcher, device=device, screens=screens, frames=frames,
                              lease_s=lease_s)
        self.publish_timeout_s = publish_timeout_s
        self.sent = 0
        self._now = anyio.Event()

    def renew(self) -> None:
        self._now.set()

    async def run(self) -> None:
        try:
            while True:
                await self._send(self.lease)
                with anyio.move_on_after(self.lease.lease_s / 3):
                    await self._now.wait()
                self._now = anyio.Event()
        finally:
            with anyio.CancelScope(shield=True):
                await self._send(Watching(watcher=self.lease.watcher, device=self.lease.device,
                                          lease_s=0), qos=0,
                                 timeout_s=min(END_TIMEOUT_S, self.publish_timeout_s))

    async def _send(self, msg: Watching, *, qos: int = 1, timeout_s: float | None = None) -> None:
        try:
            with anyio.fail_after(timeout_s or self.publish_timeout_s):
                await self.bus.publish(topics.fleet_watching(), msg, qos=qos)
            self.sent += 1
        except Exception as exc:  # the next renewal tries again; the lease covers the gap
            log.info("watching_publish_failed", error=f"{type(exc).__name__}: {exc}")
