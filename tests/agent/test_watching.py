"""Nothing made that nobody reads: capture makes the watchers' ``Screen`` only under a
screens lease and the full encoding of ``Frame.data`` only under a frames lease (or for an
asker elsewhere); a reader on the host gets the bytes from the frame store, made once and
charged to ``encode``; a new watcher gets every phone's latest screen at once; a lease that
runs out stops the screens; the watcher's side renews its lease and ends it on close."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
import numpy as np
import pytest

import actors.capture as capture_mod
from actors.capture import Captured, CaptureEngine, CaptureService
from actors.frames import FrameStore, encode_frame
from actors.rpc import DeviceRegistry
from actors.watching import Interest, Leases, WatchingActor
from devices.adb import Screenshot
from devices.codecs import decode_rgb
from protocol.messages import Frame, FrameRequest, Msg, Screen, TextLine, Watching
from runtime import topics
from runtime.cpu_ledger import CpuLedger

pytestmark = pytest.mark.anyio
W, H, SIDE = 270, 600, 120


def screen_of(seed: int) -> np.ndarray:
    """A phone-shaped image with some structure (a JPEG of noise would be all noise)."""
    rng = np.random.default_rng(seed)
    rgb = np.full((H, W, 3), 40 * seed % 255, np.uint8)
    for _ in range(12):
        y, x = int(rng.integers(0, H - 40)), int(rng.integers(0, W - 40))
        rgb[y:y + 40, x:x + 40] = rng.integers(0, 255, 3, dtype=np.uint8)
    return rgb


@dataclass
class Phone:
    serial: str
    rgb: np.ndarray

    async def screenshot(self) -> Screenshot:
        return Screenshot(self.rgb.copy(), "raw")


@dataclass
class Entry:
    serial: str
    device: Any
    capture: CaptureEngine
    latest_frame: str = ""


class NoText:
    async def read_lines(self, captured: Captured, device: str = "") -> list[TextLine]:
        return []


@dataclass
class Published:
    """A publisher that keeps what goes out."""

    sent: list[tuple[str, Msg]] = field(default_factory=list)

    async def publish(self, topic: str, msg: Msg, *, qos: int = 1, retain: bool = False) -> None:
        self.sent.append((topic, msg))

    def screens(self) -> list[Screen]:
        return [m for _, m in self.sent if isinstance(m, Screen)]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Host:
    bus: Published
    service: CaptureService
    store: FrameStore
    leases: Leases
    clock: Clock
    ledger: CpuLedger
    phones: dict[str, Phone]

    async def shoot(self, serial: str, step: int = 1, **kw: Any) -> Frame:
        entry = self.service.registry.get(serial)
        assert entry is not None
        return await self.service.serve(entry, FrameRequest(  # type: ignore[return-value]
            request_id=f"r-{serial}-{step}", device=serial, step=step, **kw))


def make_host(*serials: str) -> Host:
    bus, clock, ledger = Published(), Clock(), CpuLedger()
    store = FrameStore(4, ledger=ledger)
    leases = Leases(clock)
    registry: DeviceRegistry[Entry] = DeviceRegistry()
    phones = {}
    for i, serial in enumerate(serials):
        phones[serial] = phone = Phone(serial, screen_of(i + 1))
        registry.put(Entry(serial, phone, CaptureEngine(
            phone, screen_side=SIDE, ledger=ledger)))  # type: ignore[arg-type]
    service = CaptureService(bus, registry, store, NoText(), leases=leases)
    return Host(bus, service, store, leases, clock, ledger, phones)


def count_full_encodings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    made: list[int] = []
    real = capture_mod.encode_frame

    def counting(rgb: np.ndarray, fmt: Any, quality: int = 80) -> bytes:
        made.append(rgb.shape[0])
        return real(rgb, fmt, quality)

    monkeypatch.setattr(capture_mod, "encode_frame", counting)
    return made


async def test_with_no_watcher_capture_makes_no_screen_and_no_full_encoding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = count_full_encodings(monkeypatch)
    host = make_host("p1")
    frame = await host.shoot("p1")
    assert frame.data == b"" and host.bus.screens() == [] and made == []
    encode_before = host.ledger.stages("p1").get("encode", 0.0)
    # A reader on the host (the chooser, the LLM without a view) gets the bytes from the
    # store: made once from the pixels, on the phone's encode CPU, then kept.
    got = await host.store.encoded(frame.frame_id, "p1")
    assert got.data == encode_frame(host.phones["p1"].rgb, "jpeg", 80)
    assert (await host.store.encoded(frame.frame_id, "p1")).data == got.data
    assert host.store.encoded_lazily == 1
    assert host.ledger.stages("p1")["encode"] > encode_before


async def test_a_screens_lease_makes_screens_until_it_runs_out() -> None:
    host = make_host("p1", "p2")
    host.leases.take(Watching(watcher="dash", screens=True, lease_s=30))
    f1 = await host.shoot("p1")
    f2 = await host.shoot("p2")
    got = {s.device: s for s in host.bus.screens()}
    assert set(got) == {"p1", "p2"} and got["p1"].frame_id == f1.frame_id
    small = decode_rgb(got["p2"].data)
    assert max(small.shape[:2]) == SIDE and (got["p2"].width, got["p2"].height) == (W, H)
    assert f1.data == f2.data == b""  # screens only: the full frames stay unmade
    host.clock.now += 20  # renewed before its end: it holds on
    host.leases.take(Watching(watcher="dash", screens=True, lease_s=30))
    host.clock.now += 20
    await host.shoot("p1", 2)
    assert len(host.bus.screens()) == 3
    host.clock.now += 11  # the watcher went without a word: its lease ran out
    await host.shoot("p1", 3)
    await host.shoot("p2", 3)
    assert len(host.bus.screens()) == 3 and len(host.leases) == 0


async def test_a_lease_is_per_phone_and_ends_when_the_watcher_says_so() -> None:
    leases = Leases(Clock())
    assert leases.take(Watching(watcher="mcp", device="p1", frames=True, lease_s=30)) is False
    assert leases.frames("p1") and not leases.frames("p2") and not leases.screens("p1")
    assert leases.take(Watching(watcher="dash", screens=True, lease_s=30)) is True
    assert leases.take(Watching(watcher="dash", screens=True, lease_s=30)) is False  # renewal
    assert leases.screens("p2")
    leases.take(Watching(watcher="dash", lease_s=0))
    leases.take(Watching(watcher="mcp", device="p1", lease_s=0))
    assert not leases.screens("p2") and not leases.frames("p1") and len(leases) == 0
    leases.hold("recorder", frames=True)  # the host's own recorder: no end
    leases.clock.now += 1e6  # type: ignore[attr-defined]
    assert leases.frames("p9")


async def test_a_frames_lease_or_an_asker_elsewhere_gets_the_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = count_full_encodings(monkeypatch)
    host = make_host("p1", "p2")
    want = encode_frame(host.phones["p1"].rgb, "jpeg", 80)
    asked = await host.shoot("p1", data=True)  # mobagent mcp's screenshot, say
    assert asked.data == want and len(made) == 1
    host.leases.take(Watching(watcher="rec", device="p1", frames=True, lease_s=30))
    leased = await host.shoot("p1", 2)
    other = await host.shoot("p2", 2)
    assert leased.data == want and other.data == b""
    assert host.bus.screens() == []  # frames only: no screens
    # the same pixels as the frame before: its bytes were made once, not again
    assert len(made) == 1


async def test_a_new_watcher_gets_every_phones_latest_screen_at_once() -> None:
    host = make_host("p1", "p2")
    watching = WatchingActor(host.bus, host.leases, host.service.show_latest)
    latest = {s: (await host.shoot(s, 5)).frame_id for s in ("p1", "p2")}
    assert host.bus.screens() == []
    topic = topics.fleet_watching()
    await watching.handle(topic, Watching(watcher="dash-1", screens=True, lease_s=30))
    shown = host.bus.screens()
    assert {s.device: s.frame_id for s in shown} == latest
    assert all(t == topics.device_screen(m.device) for t, m in host.bus.sent
               if isinstance(m, Screen))
    small = decode_rgb(shown[0].data)
    assert max(small.shape[:2]) == SIDE
    await watching.handle(topic, Watching(watcher="dash-1", screens=True, lease_s=30))
    assert len(host.bus.screens()) == 2  # a renewal: that watcher has them already
    await watching.handle(topic, Watching(watcher="dash-2", screens=True, lease_s=30,
                                          device="p2"))
    assert [s.device for s in host.bus.screens()[2:]] == ["p2"]  # a second one, its phone
    assert host.service.screens_caught_up == 3


async def test_reads_do_not_push_out_a_steps_pixels() -> None:
    """The actuator's launcher reads (purpose "read") come and go; a step's "before"
    frame, made without bytes, keeps its pixels for the reflector."""
    host = make_host("p1")
    before = await host.shoot("p1", 1)
    for k in range(10):
        host.phones["p1"].rgb = screen_of(10 + k)
        await host.shoot("p1", 1 + 100 * (k + 1), purpose="read")
    got, rgb = await host.store.rgb(before.frame_id, "p1")
    assert got.frame_id == before.frame_id and rgb.shape == (H, W, 3)
    held = host.store.latest("p1")
    assert held is not None and np.array_equal(held[1], host.phones["p1"].rgb)


async def test_interest_renews_its_lease_and_ends_it_on_close() -> None:
    bus = Published()
    interest = Interest(bus, "dash-x", screens=True, lease_s=0.3)
    async with anyio.create_task_group() as tg:
        tg.start_soon(interest.run)
        await anyio.sleep(0.25)  # sent at once, then each 0.1 s
        n = len(bus.sent)
        interest.renew()  # a host came online: sent again now
        await anyio.sleep(0.02)
        assert len(bus.sent) == n + 1
        tg.cancel_scope.cancel()
    sent = [m for _, m in bus.sent]
    assert n >= 3 and all(t == topics.fleet_watching() for t, _ in bus.sent)
    assert all(isinstance(m, Watching) and m.screens and m.lease_s == 0.3 for m in sent[:-1])
    last = sent[-1]
    assert isinstance(last, Watching) and last.lease_s == 0 and last.watcher == "dash-x"
