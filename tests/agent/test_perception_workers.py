"""Perception workers that scale out (issue 16): ``PerceptionWorker``s on their own bus
connections share the requests of one host through an MQTT 5 shared subscription (real
mosquitto, real OCR), and a worker killed mid-run costs a re-send, never a request."""

from __future__ import annotations

from typing import Any

import anyio
import numpy as np
import pytest

from actors.capture import Captured, pixel_sha
from actors.episode import DeviceAgent
from actors.perception import PerceptionEngine
from actors.perception_remote import PerceptionWorker, RemotePerception, RemoteTimes
from actors.planner import ScriptedPolicy
from actors.rpc import ReplyRouter, Requests, new_request_id
from actors.services import AgentServices
from devices.adb import AdbDevice
from devices.codecs import encode_jpeg
from protocol.messages import Frame, Grounded, GroundRequest, Instruction, Msg
from protocol.operations import ClickText, Operation
from runtime.actor import run_actors
from runtime.bus import Bus
from sim.phone import SimPhone
from sim.phone.apps import notes
from sim.phone_api import DeviceInfo
from tests.agent.conftest import SimDevice, bus_for, fast_settings
from tests.fixtures.mosquitto import MosquittoBroker

pytestmark = pytest.mark.anyio

SERIAL = "w1"


def notes_screen() -> tuple[np.ndarray, tuple[int, int, int, int]]:
    phone = SimPhone(DeviceInfo(SERIAL))
    phone.launch(notes.PACKAGE)
    title = phone.find("Notes", kind="title")[0]
    return np.asarray(phone.screenshot().convert("RGB")), title.bbox


def frame_of(rgb: np.ndarray, n: int) -> Frame:
    """Frame ``n``: the screen with one corner pixel changed, so no two share an OCR cache."""
    rgb = rgb.copy()
    rgb[-1, -1] = (n % 256, n // 256 % 256, 7)
    sha = pixel_sha(rgb)
    h, w = rgb.shape[:2]
    return Frame(device=SERIAL, episode_id="e1", step=n, frame_id=f"{sha[:12]}-{n}",
                 sha256=sha, width=w, height=h, format="jpeg", data=encode_jpeg(rgb, 85))


class TracedWorker(PerceptionWorker):
    """Notes which frames it started and which it answered."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.started: set[str] = set()
        self.answered: set[str] = set()
        self.busy = anyio.Event()  # set when it starts a request
        self.started_ops: list[Operation] = []
        self.reads = 0

    async def serve_carried(self, req: Msg) -> Msg:
        self.started.add(getattr(req, "frame_id", ""))
        self.busy.set()
        if isinstance(req, GroundRequest):
            self.started_ops.append(req.operation)
        else:
            self.reads += 1
        reply = await super().serve_carried(req)
        self.answered.add(getattr(req, "frame_id", ""))
        return reply


class Worker:
    """One worker on its own connection, killable (its connection and tasks cancelled)."""

    def __init__(self, broker: MosquittoBroker, engine: PerceptionEngine, name: str) -> None:
        self.broker, self.engine, self.name = broker, engine, name
        self.scope = anyio.CancelScope()
        self.actor: TracedWorker | None = None
        self.stopped = anyio.Event()

    async def run(self, *, task_status: anyio.abc.TaskStatus[TracedWorker]) -> None:
        try:
            with self.scope:
                async with bus_for(self.broker, self.name) as bus:
                    self.actor = TracedWorker(bus, self.engine, concurrency=4)
                    async with anyio.create_task_group() as tg:
                        await tg.start(run_actors, bus, [self.actor])
                        task_status.started(self.actor)
        finally:
            self.stopped.set()


async def ground_all(requests: Requests, frames: list[Frame], times: RemoteTimes,
                     results: dict[str, tuple[int, int]]) -> None:
    async def one(frame: Frame) -> None:
        req = GroundRequest(device=SERIAL, episode_id="e1", step=frame.step,
                            frame_id=frame.frame_id, operation=ClickText(text="Notes"),
                            request_id=new_request_id(), frame=frame)
        got = await requests.call(req, timeout_s=times.timeout_s, expect=(Grounded,),
                                  resend_after_s=times.resend_after_s)
        assert isinstance(got, Grounded) and got.request_id == req.request_id
        assert frame.frame_id not in results  # one answer per request
        results[frame.frame_id] = (got.x, got.y)

    async with anyio.create_task_group() as tg:
        for frame in frames:
            tg.start_soon(one, frame)


async def test_two_workers_split_the_requests_and_a_killed_one_loses_none(
    mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
) -> None:
    rgb, (x0, y0, x1, y1) = notes_screen()
    frames = [frame_of(rgb, n) for n in range(16)]
    patient = RemoteTimes(timeout_s=60.0, resend_after_s=50.0)  # no re-send: a clean split
    times = RemoteTimes(timeout_s=60.0, resend_after_s=3.0)
    # one model set (loaded once per test session), a perception pool per worker
    a = Worker(mosquitto, PerceptionEngine(shared_perception.perception), "worker-a")
    b = Worker(mosquitto, PerceptionEngine(shared_perception.perception), "worker-b")
    host: Bus
    async with bus_for(mosquitto, "host") as host, anyio.create_task_group() as tg:
        replies = ReplyRouter(host)
        requests = Requests(host, replies)
        await tg.start(run_actors, host, [replies])
        wa = await tg.start(a.run)
        wb = await tg.start(b.run)

        # Both alive: each request reaches one worker, and both get some.
        results: dict[str, tuple[int, int]] = {}
        with anyio.fail_after(60):
            await ground_all(requests, frames[:6], patient, results)
        assert wa.served + wb.served == 6 and wa.served > 0 and wb.served > 0
        assert requests.resent == 0

        # A dies holding a request: its share goes to B after one re-send.
        async def kill_a_when_busy() -> None:
            await wa.busy.wait()
            a.scope.cancel()

        served_b = wb.served
        wa.busy = anyio.Event()
        with anyio.fail_after(60):
            async with anyio.create_task_group() as run:
                run.start_soon(kill_a_when_busy)
                await ground_all(requests, frames[6:], times, results)
        await a.stopped.wait()
        assert len(results) == len(frames)
        for x, y in results.values():  # every answer is the title, not just any answer
            assert x0 <= x <= x1 and y0 <= y <= y1
        held = wa.started - wa.answered
        assert held and held <= results.keys()  # what A died with was answered all the same
        assert requests.resent >= 1
        assert wb.served > served_b
        assert replies.pending == 0
        tg.cancel_scope.cancel()


async def test_ocr_reads_for_capture_go_to_a_worker(
    mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
) -> None:
    rgb, _ = notes_screen()
    frame = frame_of(rgb, 999)
    w = Worker(mosquitto, PerceptionEngine(shared_perception.perception), "worker-ocr")
    async with bus_for(mosquitto, "host") as host, anyio.create_task_group() as tg:
        replies = ReplyRouter(host)
        await tg.start(run_actors, host, [replies])
        worker = await tg.start(w.run)
        remote = RemotePerception(Requests(host, replies), RemoteTimes.of(10.0, 5.0))
        with anyio.fail_after(30):
            lines = await remote.read_lines(Captured(frame, rgb, 0.0, 0.0))
        assert any(ln.text == "Notes" for ln in lines) and worker.served == 1
        tg.cancel_scope.cancel()


async def test_a_request_without_its_frame_is_answered_with_a_clear_error(
    mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
) -> None:
    from actors.rpc import RequestFailed

    w = Worker(mosquitto, PerceptionEngine(shared_perception.perception), "worker-err")
    async with bus_for(mosquitto, "host") as host, anyio.create_task_group() as tg:
        replies = ReplyRouter(host)
        await tg.start(run_actors, host, [replies])
        await tg.start(w.run)
        req = GroundRequest(device=SERIAL, frame_id="f-1", operation=ClickText(text="x"),
                            request_id=new_request_id())
        with pytest.raises(RequestFailed, match="carries no frame"):
            await Requests(host, replies).call(req, timeout_s=20, expect=(Grounded,))
        tg.cancel_scope.cancel()


@pytest.mark.needs_adb
async def test_a_host_without_perception_runs_an_episode_on_workers(
    sim_device: SimDevice, mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
) -> None:
    """``agent.perception = "remote"``: the host has no perception service; the episode's
    grounding and capture's OCR reads (ocr_hints) reach a worker with their frame."""
    sim_device.phone.open("com.android.settings")
    sim_device.phone.settle()
    device = AdbDevice(sim_device.serial)
    settings = fast_settings(completion_check=False, ocr_hints=True)
    w = Worker(mosquitto, PerceptionEngine(shared_perception.perception), "worker-e2e")
    async with bus_for(mosquitto, "remote-host") as bus, anyio.create_task_group() as tg:
        services = AgentServices(bus, remote_perception=RemoteTimes.of(10.0, 5.0))
        assert services.remote_perception and services.perception_engine is None
        services.register(device, settings)
        agent = DeviceAgent(bus, device, settings=settings, perception=None,
                            policy_for=lambda _i: ScriptedPolicy([ClickText("Display")]),
                            services=services)
        worker = await tg.start(w.run)
        await tg.start(run_actors, bus, [*services.actors(), agent])
        with anyio.fail_after(90):
            outcome = await agent.run_episode(Instruction(id="i-remote", text="Open display"))
        assert outcome.status == "succeeded", outcome
        assert sim_device.phone.current_screen() == "com.android.settings/display"
        assert {"ClickText"} <= {type(r).__name__ for r in worker.started_ops}
        assert worker.reads >= 1  # the planner's OCR hints came from the worker
        tg.cancel_scope.cancel()
