"""The agent's request/response over a real broker: replies matched by request id, a silent
service times out, an Error reply fails the request (and the episode, with the reason),
two phones served at once without cross-talk, duplicates served once; the Ask's Question
on the control topic; frame streaming for `watch`; the loopback fallback."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import numpy as np
import pytest

from actors.capture import encode_frame, pixel_sha
from actors.config import AgentSettings
from actors.episode import DeviceAgent
from actors.frames import FrameStore
from actors.perception import PerceptionEngine
from actors.planner import ScriptedPolicy
from actors.rpc import (
    DeviceRegistry,
    ReplyRouter,
    RequestFailed,
    Requests,
    RequestTimeout,
    ServiceActor,
    new_request_id,
)
from actors.services import AgentServices, DeviceEntry
from devices.adb import AdbDevice
from devices.codecs import decode_rgb
from protocol.messages import (
    ActionDone,
    ActRequest,
    Answer,
    EpisodeFinished,
    Error,
    Frame,
    FrameRequest,
    Instruction,
    Message,
    Msg,
    Question,
    Reflection,
    ReflectRequest,
    Screen,
)
from protocol.operations import Ask, Back, ClickText, OpenApp, TypeText
from runtime import topics
from runtime.actor import run_actors
from runtime.bus import Bus
from sim.fleet import SimFleet
from tests.agent.conftest import SimDevice, bus_for, fast_settings, run_episode
from tests.fixtures.mosquitto import MosquittoBroker

pytestmark = [pytest.mark.anyio, pytest.mark.needs_mosquitto]


class EchoFrames(ServiceActor):
    """A stand-in capture service: answers FrameRequests after ``delays[request step]``,
    fails on step 99, and remembers how many requests it served at once."""

    name = "echo"
    kinds = (FrameRequest,)

    def __init__(self, bus: Any, registry: Any, delays: dict[int, float]) -> None:
        super().__init__(bus, registry, concurrency=8)
        self.delays = delays
        self.max_in_flight = 0
        self.calls = 0

    async def serve(self, entry: DeviceEntry, req: Message) -> Msg:
        assert isinstance(req, FrameRequest)
        self.calls += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await anyio.sleep(self.delays.get(req.step, 0.0))
        if req.step == 99:
            raise RuntimeError("the screen is on fire")
        return Frame(frame_id=f"f-{req.device}-{req.step}", sha256="0" * 64, width=1, height=1,
                     format="png", data=b"")


@asynccontextmanager
async def echo_host(broker: MosquittoBroker, serials: list[str],
                    delays: dict[int, float] | None = None,
                    ) -> AsyncIterator[tuple[Requests, EchoFrames, ReplyRouter]]:
    """A host bus running a reply router and the stand-in service for ``serials``."""
    async with bus_for(broker, "rpc-host") as bus:
        registry = DeviceRegistry()
        for serial in serials:
            registry.put(DeviceEntry(serial, None, None, None, None, None))  # type: ignore[arg-type]
        replies = ReplyRouter(bus)
        echo = EchoFrames(bus, registry, delays or {})
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_actors, bus, [replies, echo])
            await anyio.sleep(0.3)  # subscriptions in place
            yield Requests(bus, replies), echo, replies
            tg.cancel_scope.cancel()


def frame_req(serial: str, step: int, rid: str | None = None) -> FrameRequest:
    return FrameRequest(request_id=rid or new_request_id(), device=serial, step=step)


async def test_replies_are_matched_by_request_id(mosquitto: MosquittoBroker) -> None:
    # The first request is answered last: each caller still gets its own reply.
    async with echo_host(mosquitto, ["p1"], delays={1: 0.6, 2: 0.0, 3: 0.3}) as (req, echo, rr):
        got: dict[int, Msg] = {}

        async def one(step: int) -> None:
            got[step] = await req.call(frame_req("p1", step), timeout_s=10, expect=(Frame,))

        async with anyio.create_task_group() as tg:
            for step in (1, 2, 3):
                tg.start_soon(one, step)
        assert {s: m.frame_id for s, m in got.items()} == {  # type: ignore[attr-defined]
            1: "f-p1-1", 2: "f-p1-2", 3: "f-p1-3"}
        assert echo.max_in_flight >= 2  # served concurrently, not one at a time
        assert rr.pending == 0


async def test_a_silent_service_times_out(mosquitto: MosquittoBroker) -> None:
    # "p2" is nobody's phone on this host: the service ignores it, nothing answers.
    async with echo_host(mosquitto, ["p1"]) as (req, echo, rr):
        with pytest.raises(RequestTimeout, match="frame_request .* for p2 within 0.5s"):
            await req.call(frame_req("p2", 1), timeout_s=0.5, expect=(Frame,))
        assert echo.ignored == 1 and echo.calls == 0 and rr.pending == 0


async def test_an_error_reply_fails_the_request(mosquitto: MosquittoBroker) -> None:
    async with echo_host(mosquitto, ["p1"]) as (req, echo, rr):
        with pytest.raises(RequestFailed, match="echo failed: RuntimeError: the screen is on fire"):
            await req.call(frame_req("p1", 99), timeout_s=10, expect=(Frame,))
        # ... and a reply of the wrong kind is refused too
        with pytest.raises(RequestFailed, match="answered by frame"):
            await req.call(frame_req("p1", 1), timeout_s=10, expect=(Reflection,))


async def test_a_duplicate_request_is_served_once(mosquitto: MosquittoBroker) -> None:
    async with echo_host(mosquitto, ["p1"]) as (req, echo, rr), \
            bus_for(mosquitto, "dup") as other:
        rid = new_request_id()
        first = await req.call(frame_req("p1", 1, rid), timeout_s=10, expect=(Frame,))
        # QoS 1 redelivery / another publisher repeating it: served once, the late copy's
        # answer (none) is not awaited by anyone.
        await other.publish(topics.device_request("p1", FrameRequest), frame_req("p1", 1, rid))
        await anyio.sleep(0.5)
        assert isinstance(first, Frame) and echo.calls == 1 and echo.duplicates == 1


async def test_two_phones_at_once_without_cross_talk(
    mosquitto: MosquittoBroker, sim_fleet: Any, shared_perception: PerceptionEngine,
) -> None:
    """Real capture and actuator services on two rendered phones, requests interleaved."""
    fleet: SimFleet = sim_fleet(count=2)
    a, b = fleet.serials
    fleet.phone(a).open("com.android.settings")  # type: ignore[attr-defined]
    fleet.phone(b).open("com.mobagent.notes")  # type: ignore[attr-defined]
    for s in (a, b):
        fleet.phone(s).settle()  # type: ignore[attr-defined]
    settings = fast_settings()
    async with bus_for(mosquitto, "two-host") as bus, bus_for(mosquitto, "two-watch") as watch:
        await watch.subscribe(topics.device_events_filter(None, "frame"))
        await watch.subscribe(topics.all_screens_filter())
        services = AgentServices(bus, shared_perception)
        for s in (a, b):
            services.register(AdbDevice(s), settings)
        # The watcher reads the screens and the full frames: it says so (its lease).
        services.leases.hold("two-watch", screens=True, frames=True)
        seen: list[tuple[str, Frame]] = []
        screens: dict[str, tuple[str, Screen]] = {}  # frame_id -> (topic, screen)

        async def collect() -> None:
            async for topic, msg in watch.messages():
                if isinstance(msg, Frame):
                    seen.append((topic, msg))
                elif isinstance(msg, Screen):
                    screens[msg.frame_id] = (topic, msg)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_actors, bus, services.actors())
            tg.start_soon(collect)
            await anyio.sleep(0.3)
            frames: dict[tuple[str, int], Frame] = {}

            async def shoot(serial: str, step: int) -> None:
                got = await services.requests.call(frame_req(serial, step), timeout_s=30,
                                                   expect=(Frame,))
                assert isinstance(got, Frame)
                frames[(serial, step)] = got

            async with anyio.create_task_group() as shots:
                for step in (1, 2, 3):
                    for s in (a, b):
                        shots.start_soon(shoot, s, step)
            # Each phone's frames are its own screen; the two screens differ.
            for s in (a, b):
                shas = {frames[(s, k)].sha256 for k in (1, 2, 3)}
                assert len(shas) == 1 and all(frames[(s, k)].device == s for k in (1, 2, 3))
            assert frames[(a, 1)].sha256 != frames[(b, 1)].sha256
            # An action for one phone lands on that phone only.
            done = await services.requests.call(ActRequest(
                request_id=new_request_id(), device=b, operation=Back(),
                width=frames[(b, 1)].width, height=frames[(b, 1)].height), timeout_s=30,
                expect=(ActionDone,))
            assert isinstance(done, ActionDone) and done.ok and done.device == b
            await anyio.sleep(0.3)
            assert fleet.phone(a).foreground() == "com.android.settings"  # type: ignore[attr-defined]
            # The reflector compares two stored frames of phone b; its verdict is b's.
            after = await services.requests.call(frame_req(b, 4), timeout_s=30, expect=(Frame,))
            assert isinstance(after, Frame)
            ref = await services.requests.call(ReflectRequest(
                request_id=new_request_id(), device=b, before_frame_id=frames[(b, 1)].frame_id,
                after_frame_id=after.frame_id, operation=Back()), timeout_s=30,
                expect=(Reflection,))
            assert isinstance(ref, Reflection) and ref.verdict == "ok" and ref.app
            # Without a verdict given, the reflector needs the operation: the asker gets why.
            with pytest.raises(RequestFailed, match="needs its operation"):
                await services.requests.call(ReflectRequest(
                    request_id=new_request_id(), device=b,
                    before_frame_id=frames[(b, 1)].frame_id, after_frame_id=after.frame_id),
                    timeout_s=30, expect=(Reflection,))
            tg.cancel_scope.cancel()
    # Every frame went over the broker, on its own phone's topic.
    assert len(seen) >= 7
    assert all(topics.serial_of(t) == m.device for t, m in seen)
    # ... and beside each, its small JPEG for watchers, on that phone's screen topic.
    side = settings.screen_side
    assert side > 0
    for _, frame in seen:
        topic, screen = screens[frame.frame_id]
        assert topic == topics.device_screen(frame.device) and screen.device == frame.device
        assert (screen.width, screen.height, screen.step) == (frame.width, frame.height,
                                                              frame.step)
        small = decode_rgb(screen.data)
        assert max(small.shape[:2]) == side and screen.data[:2] == b"\xff\xd8"  # a JPEG
        assert abs(small.shape[0] / small.shape[1] - frame.height / frame.width) < 0.02
        assert len(screen.data) < len(frame.data) / 5


async def test_a_failing_service_fails_the_episode_with_the_reason(
    sim_device: SimDevice, mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
) -> None:
    """The phone's screenshots break: the capture service answers an Error, the episode
    ends failed with that reason instead of hanging."""
    class Broken(AdbDevice):
        async def screenshot(self) -> Any:
            raise RuntimeError("no screen today")

    run = await run_episode(mosquitto, Broken(sim_device.serial), ScriptedPolicy([Back()]),
                            fast_settings(completion_check=False), shared_perception, "Go back.",
                            timeout_s=60)
    assert run.outcome is not None and run.outcome.status == "failed"
    assert "RequestFailed" in run.outcome.reason and "no screen today" in run.outcome.reason
    errors = run.of(Error)
    assert any(e.request_id and "no screen today" in e.detail for e in errors)


async def test_ask_publishes_a_question_and_an_answer_resumes(
    sim_device: SimDevice, mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
) -> None:
    serial = sim_device.serial
    questions: list[Question] = []

    async def answer(agent: DeviceAgent, run: Any, ctl: Bus) -> None:
        async with bus_for(mosquitto, "asker") as user:
            await user.subscribe(topics.device_control(serial))
            with anyio.fail_after(30):
                async for _, msg in user.messages():
                    if isinstance(msg, Question):
                        questions.append(msg)
                        break
            await user.publish(topics.device_control(serial), Answer(text="blue"))

    run = await run_episode(
        mosquitto, AdbDevice(serial), ScriptedPolicy([Ask("Which colour?")]),
        fast_settings(completion_check=False), shared_perception, "Pick a colour.",
        during=answer)
    assert len(questions) == 1 and questions[0].text == "Which colour?"
    assert questions[0].device == serial and questions[0].episode_id == run.outcome.episode_id  # type: ignore[union-attr]
    done = run.of(ActionDone)
    assert len(done) == 1 and done[0].ok and done[0].detail == "answered: blue"
    assert run.outcome is not None and run.outcome.status == "succeeded"


async def test_frames_stream_between_episodes_for_watch(
    sim_device: SimDevice, mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
) -> None:
    settings = fast_settings(stream_interval_s=0.2)
    async with bus_for(mosquitto, "stream-host") as bus, bus_for(mosquitto, "watcher") as watch:
        await watch.subscribe(topics.device_events_filter(sim_device.serial, "frame"))
        services = AgentServices(bus, shared_perception)
        services.register(AdbDevice(sim_device.serial), settings)
        agent = DeviceAgent(bus, AdbDevice(sim_device.serial), settings=settings,
                            perception=shared_perception, services=services,
                            policy_for=lambda _i: ScriptedPolicy([]))
        frames: list[Frame] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_actors, bus, [*services.actors(), agent])
            with anyio.fail_after(30):
                async for _, msg in watch.messages():
                    if isinstance(msg, Frame):
                        frames.append(msg)
                        if len(frames) == 3:
                            break
            tg.cancel_scope.cancel()
    assert all(f.device == sim_device.serial and not f.episode_id for f in frames)
    assert "identical" in frames[2].flags  # an idle phone's screen does not change
    assert agent.outcomes == []


async def test_without_services_on_the_bus_the_agent_runs_them_in_process(
    sim_device: SimDevice, shared_perception: PerceptionEngine,
) -> None:
    """A publish-only bus: the loopback services answer; every reply is still an event."""
    events: list[tuple[str, Msg]] = []

    class PublishOnly:
        async def publish(self, topic: str, msg: Msg, *, qos: int = 1,
                          retain: bool = False) -> None:
            events.append((topic, msg))

    agent = DeviceAgent(PublishOnly(), AdbDevice(sim_device.serial),
                        settings=fast_settings(completion_check=False),
                        perception=shared_perception,
                        policy_for=lambda _i: ScriptedPolicy([Back()]))
    outcome = await agent.run_episode(Instruction(id=uuid.uuid4().hex, text="Go back."))
    assert outcome.status == "succeeded" and outcome.operations == (Back(),)
    kinds = [type(m).__name__ for t, m in events if "/events/" in t]
    assert {"Frame", "ActionDone", "Reflection", "EpisodeFinished"} <= set(kinds)
    assert not any("/requests/" in t for t, _ in events)  # requests never leave the process
    assert agent.services.is_loopback and agent.services.replies.pending == 0
    assert any(isinstance(m, EpisodeFinished) for _, m in events)


async def test_frame_store_decodes_bus_bytes_once() -> None:
    rgb = np.zeros((40, 20, 3), np.uint8)
    rgb[10:20, 5:15] = (200, 10, 10)
    data = encode_frame(rgb, "png")
    store = FrameStore(per_device=2)
    frame = Frame(frame_id="f1", sha256=pixel_sha(rgb), width=20, height=40, format="png",
                  data=data, device="d1")
    store.put(frame)  # as received from the bus: bytes only
    _, got = await store.rgb("f1", "d1")
    assert np.array_equal(got, rgb) and store.decoded == 1
    _, again = await store.rgb("f1")
    assert again is got and store.decoded == 1
    store.put(Frame(frame_id="f2", sha256="x", width=1, height=1, format="png",
                    data=data, device="d1"))
    store.put(Frame(frame_id="f3", sha256="x", width=1, height=1, format="png",
                    data=data, device="d1"))
    # Past per_device the oldest keeps its bytes, not its pixels: decoded again when asked.
    _, third = await store.rgb("f1", "d1")
    assert np.array_equal(third, rgb) and third is not got and store.decoded == 2
    for i in range(4, 2 * FrameStore.KEPT_ENCODED + 2):  # bounded per device: oldest first
        store.put(Frame(frame_id=f"f{i}", sha256="x", width=1, height=1, format="png",
                        data=data, device="d1"))
    with pytest.raises(KeyError, match="not known on this host"):
        await store.rgb("f1", "d1")


def test_new_kinds_are_on_the_topic_scheme() -> None:
    from protocol.messages import decode, encode

    t = topics.device_request("p1", ActRequest)
    assert t == "mobagent/v1/devices/p1/requests/act_request"
    info = topics.parse(t)
    assert (info.channel, info.serial, info.kind) == ("requests", "p1", "act_request")
    assert topics.request_kind(t) == "act_request"  # a requests/{kind} topic carries that kind
    from protocol.messages import CODEC
    from runtime.messages import Rejected

    frame_req = encode(FrameRequest(request_id="r2"))
    with pytest.raises(Rejected, match="unexpected kind"):
        CODEC.decode_for(t, frame_req, expected_kind=topics.request_kind(t))
    assert Question in (topics.expected_kinds(topics.device_control("p1")) or ())
    req = ActRequest(request_id="r1", operation=Back(), x=3, y=4, width=10, height=20)
    assert decode(encode(req)) == req
    settings = AgentSettings()
    assert settings.stream_interval_s == 0.0  # streaming is opt-in


def test_watch_and_the_event_log_read_the_new_kinds() -> None:
    from protocol.messages import GroundRequest
    from protocol.operations import ClickText
    from recording.events import human_line, message_event
    from tests.runtime.samples import sample_messages

    new = [m for m in sample_messages()
           if isinstance(m, Question | FrameRequest | ActRequest | ReflectRequest)]
    assert len(new) == 4
    for msg in [*new, GroundRequest(frame_id="f", operation=ClickText("OK"), request_id="r")]:
        line = human_line(topics.device_event("p1", msg), msg)
        assert msg.device in line or "-" in line
        event = message_event(topics.device_request("p1", msg), msg)
        assert event["event"] == type(msg).__struct_config__.tag


async def test_each_event_kind_has_one_producer(
    sim_device: SimDevice, shared_perception: PerceptionEngine,
) -> None:
    """The planner publishes only its own kinds; frames, grounding answers and the launcher
    fallback's reads come from the services, whose replies each answer one request kind.
    What the planner settles itself (a miss, a refused approval, an unanswered Ask; the loop
    guard's and the completion check's verdicts) is still published by the actuator and the
    reflector, as the answer to a request."""
    published: list[tuple[str, str, Msg]] = []  # (producer, topic, message)

    class Tagged:
        def __init__(self, producer: str) -> None:
            self.producer = producer

        async def publish(self, topic: str, msg: Msg, *, qos: int = 1,
                          retain: bool = False) -> None:
            published.append((self.producer, topic, msg))

    phone = sim_device.phone
    phone.open("com.android.settings")
    phone.settle()
    device = AdbDevice(sim_device.serial)
    # ocr_hints: the frame replies carry OCR lines; Open app with no package known: the
    # actuator's launcher fallback asks capture for frames with lines. The loop guard fires
    # on the second miss; "send" waits for an approval that never comes, the Ask for an
    # answer; the completion check (the scripted policy's) accepts the Stop.
    settings = fast_settings(completion_check=True, ocr_hints=True, packages={}, loop_guard=2,
                             approval=True, approval_timeout_s=0.2, ask_timeout_s=0.2)
    services = AgentServices.loopback(Tagged("services"), shared_perception,
                                      devices=[(device, settings)])
    agent = DeviceAgent(Tagged("planner"), device, settings=settings,
                        perception=shared_perception, services=services,
                        policy_for=lambda _i: ScriptedPolicy(
                            [ClickText("Frobnicate widget"), ClickText("Frobnicate widget"),
                             TypeText("send it"), Ask("Which one?"), Back(),
                             OpenApp("TikTok")]))
    # TikTok: its package (com.zhiliaoapp.musically) does not name it, so the launcher is read.
    outcome = await agent.run_episode(Instruction(id=uuid.uuid4().hex, text="Open TikTok."))
    assert outcome.status == "succeeded", outcome.reason
    producers: dict[str, set[str]] = {}
    for producer, topic, msg in published:
        if "/events/" in topic:
            producers.setdefault(type(msg).__name__, set()).add(producer)
    service_kinds = {"Frame", "NotFound"}
    planner_kinds = {"EpisodeStarted", "Plan", "StepTiming", "EpisodeFinished"}
    for kind in service_kinds:
        assert producers.get(kind) == {"services"}, (kind, producers.get(kind))
    for kind in planner_kinds:
        assert producers.get(kind) == {"planner"}, (kind, producers.get(kind))
    assert not {"Grounded", "Ambiguous", "NotFound", "Frame"} & {
        k for k, p in producers.items() if "planner" in p}
    # ActionDone only from the actuator, Reflection only from the reflector: every one
    # answers a request, those the planner settled included.
    assert producers.get("ActionDone") == {"services"}, producers.get("ActionDone")
    assert producers.get("Reflection") == {"services"}, producers.get("Reflection")
    assert not {k for k, p in producers.items() if len(p) > 1}, producers
    answers = [m for _, t, m in published if isinstance(m, ActionDone | Reflection)]
    assert all(m.request_id for m in answers), answers
    settled = [(d.operation, d.ok, d.detail) for d in answers
               if isinstance(d, ActionDone) and not d.ok]
    assert settled == [
        (ClickText("Frobnicate widget"), False, "target not found on the screen"),
        (TypeText("send it"), False, "skipped: not approved (no approval within 0.2s)"),
        (Ask("Which one?"), False, "no answer within 0.2s"),
    ], settled
    verdicts = [(r.verdict, r.source) for r in answers if isinstance(r, Reflection)]
    assert ("loop", "") in verdicts and verdicts[-1] == ("complete", ""), verdicts
    assert {s for v, s in verdicts if v in ("ok", "unchanged", "wrong_page")} == {"pixels"}
    # The launcher fallback's frames came from the capture service, with their OCR lines.
    frames = [m for p, _, m in published if isinstance(m, Frame)]
    assert frames and all(f.lines for f in frames)
    assert frames[0].app == "com.android.settings"  # the first frame says the app
    done = [m for _, _, m in published if isinstance(m, ActionDone) and m.ok]
    assert any("launcher icon" in d.detail for d in done), [d.detail for d in done]
    # One answer per request id: no reply kind was published twice for one request.
    rids = [getattr(m, "request_id", "") for p, t, m in published
            if p == "services" and "/events/" in t]
    assert rids and len(rids) == len(set(rids))


async def test_log_lines_inside_an_episode_name_the_device_and_episode(
    sim_device: SimDevice, shared_perception: PerceptionEngine,
) -> None:
    """Nobody passes device= or episode=: the episode binds them into contextvars once."""
    import io
    import json
    import logging

    import structlog

    from runtime.config import LogConfig
    from runtime.log import configure_logging

    class PublishOnly:
        async def publish(self, topic: str, msg: Msg, *, qos: int = 1,
                          retain: bool = False) -> None:
            pass

    def broken_observer(msg: Msg) -> None:
        raise RuntimeError("observer bug")  # logged as observer_failed, inside the episode

    out = io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    configure_logging(LogConfig(format="json", level="info"), stream=out)
    try:
        agent = DeviceAgent(PublishOnly(), AdbDevice(sim_device.serial),
                            settings=fast_settings(completion_check=False),
                            perception=shared_perception,
                            policy_for=lambda _i: ScriptedPolicy([]))
        agent.observers.append(broken_observer)
        outcome = await agent.run_episode(Instruction(id=uuid.uuid4().hex, text="Stop."))
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        structlog.reset_defaults()
    lines = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    failed = [ln for ln in lines if ln["event"] == "observer_failed"]
    assert failed and all(ln["device"] == sim_device.serial
                          and ln["episode"] == outcome.episode_id for ln in failed)
    finished = [ln for ln in lines if ln["event"] == "episode_finished"]
    assert finished and finished[0]["episode"] == outcome.episode_id
    assert "device" not in structlog.contextvars.get_contextvars()  # unbound after it
