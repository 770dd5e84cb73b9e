"""Actors: handler timeouts and failures become Error events; supervision; isolation."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import msgspec
import pytest

from protocol.messages import CODEC, Error, Message, Msg, Steer
from runtime import topics
from runtime.actor import Actor, Router, run_actors, supervise
from runtime.bus import Backoff, Bus, parse_broker_url
from tests.fixtures.mosquitto import MosquittoFactory
from tests.runtime.conftest import FAST, eventually

ERRORS = "mobagent/v1/hosts/h/events/error"


class Recorder:
    """The publishing side of a bus, recording what actors publish."""

    def __init__(self) -> None:
        self.published: list[tuple[str, Msg]] = []

    async def publish(self, topic: str, msg: Msg, *, qos: int = 1, retain: bool = False) -> None:
        self.published.append((topic, msg))


class Picky(Actor):
    name = "picky"
    inbox = ("mobagent/v1/devices/+/control",)
    handler_timeout_s = 0.2
    error_topic = ERRORS

    def __init__(self, bus: Recorder) -> None:
        super().__init__(bus)
        self.seen: list[str] = []

    async def handle(self, topic: str, msg: Message) -> None:
        assert isinstance(msg, Steer)
        if msg.text == "slow":
            await anyio.sleep(5)
        if msg.text == "boom":
            raise ValueError("cannot steer that way")
        self.seen.append(msg.text)


def steer(text: str, device: str = "d1") -> tuple[str, Steer]:
    return topics.device_control(device), Steer(text=text, device=device, episode_id="e", step=2,
                                                correlation_id="c")


@pytest.mark.anyio
async def test_failures_and_timeouts_become_error_events_and_the_actor_goes_on() -> None:
    bus = Recorder()
    actor = Picky(bus)
    router = Router()
    async with anyio.create_task_group() as tg:
        tg.start_soon(supervise, actor, router)
        await anyio.lowlevel.checkpoint()
        for text in ("a", "boom", "b", "slow", "c"):
            assert await router.dispatch(*steer(text)) == 1
        assert await router.dispatch("mobagent/v1/devices/d1/events/plan", Steer(text="x")) == 0
        await eventually(lambda: len(actor.seen) >= 3, 5)
        router.close()
    assert actor.seen == ["a", "b", "c"]
    assert (actor.handled, actor.failed) == (3, 2)
    errors = [m for t, m in bus.published if t == ERRORS]
    assert [e.reason for e in errors] == ["picky: handler failed", "picky: handler timed out"]  # type: ignore[union-attr]
    first = errors[0]
    assert isinstance(first, Error) and "ValueError: cannot steer that way" in first.detail
    assert (first.device, first.episode_id, first.step, first.correlation_id) == ("d1", "e", 2, "c")
    assert first.topic == topics.device_control("d1")


class Crashy(Actor):
    name = "crashy"
    inbox = ("#",)
    error_topic = ERRORS

    def __init__(self, bus: Recorder, crashes: int) -> None:
        super().__init__(bus)
        self.crashes_left = crashes
        self.runs = 0
        self.seen: list[Message] = []

    async def handle(self, topic: str, msg: Message) -> None:
        self.seen.append(msg)

    async def main(self) -> None:
        self.runs += 1
        if self.crashes_left:
            self.crashes_left -= 1
            raise RuntimeError(f"main loop died (run {self.runs})")


@pytest.mark.anyio
async def test_supervisor_restarts_a_crashed_actor_with_backoff() -> None:
    bus = Recorder()
    actor = Crashy(bus, crashes=3)
    router = Router()
    started = anyio.current_time()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: supervise(actor, router, backoff=Backoff(0.05, 0.2)))
        await eventually(lambda: actor.runs >= 4, 5)
        assert await router.dispatch(*steer("still alive")) == 1
        await eventually(lambda: bool(actor.seen), 5)
        router.close()
    assert anyio.current_time() - started >= 0.05 / 2 + 0.1 / 2  # it waited between restarts
    crashes = [m for _, m in bus.published if isinstance(m, Error)]
    assert [c.reason for c in crashes] == ["crashy: actor crashed"] * 3
    assert "main loop died (run 1)" in crashes[0].detail


@pytest.mark.anyio
async def test_supervisor_gives_up_after_max_restarts() -> None:
    actor = Crashy(Recorder(), crashes=10)
    with pytest.raises(RuntimeError, match="main loop died"):
        await supervise(actor, Router(), backoff=Backoff(0.01, 0.01), max_restarts=2)
    assert actor.runs == 3


class Device(Actor):
    """One device's actor; device "bad" fails at everything, including staying alive."""

    error_topic = ERRORS
    handler_timeout_s = 0.5

    def __init__(self, bus: Bus, serial: str) -> None:
        super().__init__(bus)
        self.serial = serial
        self.name = f"device-{serial}"
        self.inbox = (topics.device_control(serial),)
        self.seen: list[str] = []

    async def handle(self, topic: str, msg: Message) -> None:
        assert isinstance(msg, Steer)
        if self.serial == "bad":
            if msg.text.endswith("0"):
                raise RuntimeError("bad device")
            await anyio.sleep(60)  # stuck: its inbox fills up
        self.seen.append(msg.text)

    async def main(self) -> None:
        if self.serial == "bad":
            await anyio.sleep(0.3)
            raise RuntimeError("bad device's loop died")


@pytest.mark.anyio
async def test_one_devices_failure_never_affects_another(mosquitto_factory: MosquittoFactory) -> None:
    address = parse_broker_url(mosquitto_factory().url)
    n = 200
    async with Bus(FAST, address, codec=CODEC) as host, Bus(FAST, address, codec=CODEC) as pub, Bus(FAST, address, codec=CODEC) as watcher:
        await watcher.subscribe(ERRORS)
        good, bad = Device(host, "good"), Device(host, "bad")
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: run_actors(host, [good, bad], buffer=8))
            await anyio.sleep(0.2)
            for i in range(n):
                await pub.publish(topics.device_control("bad"), Steer(text=f"b{i}", device="bad"))
                await pub.publish(topics.device_control("good"), Steer(text=f"g{i}", device="good"))
            await eventually(lambda: len(good.seen) >= n, 20)
            tg.cancel_scope.cancel()
        errors: list[str] = []
        with anyio.move_on_after(1):
            async for _, err in watcher.messages():
                assert isinstance(err, Error)
                errors.append(err.reason)
    assert good.seen == [f"g{i}" for i in range(n)] and good.failed == 0
    assert "device-bad: actor crashed" in errors
    assert "device-bad: inbox full" in errors
    assert not any(r.startswith("device-good") for r in errors)


def test_topic_matching_rules() -> None:
    from runtime.actor import topic_matches

    assert topic_matches("a/b/c", "a/+/c") and topic_matches("a/b/c", "#")
    assert topic_matches("a/b/c", "$share/g/a/#") and not topic_matches("a/b", "a/b/c")
    assert not topic_matches("a/b/c", "a/b") and not topic_matches("a", "$share/g")
    assert msgspec.json.decode(b"1") == 1
