"""Perception that costs little per step (issue 16): the pool where grounding goes first, the
speculative read that gives way and is dropped, and lazy OCR for steps that read no text."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import msgspec
import numpy as np
import pytest

from actors.capture import Captured, CaptureEngine
from actors.frames import FrameStore
from actors.perception import PerceptionEngine, PerceptionService
from actors.planner import ScriptedPolicy
from actors.priority import PriorityPool
from actors.rpc import DeviceRegistry
from devices.adb import AdbDevice
from protocol.messages import ActionDone, Frame, Grounded, GroundRequest, Plan
from protocol.operations import Back, ClickText, OpenApp
from tests.agent.conftest import SimDevice, fast_settings, run_episode
from tests.fixtures.mosquitto import MosquittoBroker

pytestmark = pytest.mark.anyio


async def _settle() -> None:
    for _ in range(20):
        await anyio.lowlevel.checkpoint()


@pytest.mark.parametrize("priority", [True, False])
async def test_urgent_work_does_not_queue_behind_background_work(priority: bool) -> None:
    pool = PriorityPool(1, priority=priority)
    order: list[str] = []
    release_bg = anyio.Event()

    async def background(name: str) -> None:
        async with pool.slot(urgent=False):
            order.append(f"{name} start")
            await release_bg.wait()
        order.append(f"{name} end")

    async def urgent() -> None:
        async with pool.slot(urgent=True):
            order.append("urgent")

    async with anyio.create_task_group() as tg:
        tg.start_soon(background, "bg1")
        await _settle()
        tg.start_soon(background, "bg2")  # queued: the one slot is taken
        await _settle()
        tg.start_soon(urgent)
        await _settle()
        release_bg.set()
    if priority:  # beside the running read (one over), before the queued one
        assert order[:2] == ["bg1 start", "urgent"] and pool.overflows == 1
        assert order.index("bg2 start") > order.index("bg1 end")
    else:  # FIFO: behind both reads
        assert order.index("urgent") > order.index("bg2 start")
    assert pool.busy == 0


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    pool = PriorityPool(1)
    await pool.acquire(urgent=False)
    with anyio.move_on_after(0.05):
        await pool.acquire(urgent=False)
    assert not pool._waiting
    pool.release(urgent=False)
    async with pool.slot(urgent=False):
        assert pool.busy == 1
    assert pool.busy == 0


@pytest.mark.needs_adb
async def test_a_queued_speculative_read_is_dropped_and_grounding_does_not_wait_for_it(
    sim_device: SimDevice, shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.open("com.android.settings")
    sim_device.phone.settle()
    cap = CaptureEngine(AdbDevice(sim_device.serial))
    first = await cap.capture(episode_id="e", step=1)
    actor = PerceptionEngine(shared_perception.perception, workers=1)
    runs = shared_perception.perception.ocr_runs
    before = dict(runs)
    await actor.pool.acquire(urgent=False)  # another phone's read holds the one slot
    got: list[bool] = []

    async def speculate(c: Captured) -> None:
        got.append(await actor.speculate(c, "lever-phone"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(speculate, first)
        await _settle()
        tg.start_soon(speculate, first)  # a newer frame of the phone supersedes it
        await _settle()
        assert got == [False] and actor.dropped == 1
        # the phone's plan for that step needs no text: the queued read is given up
        assert not actor.drop_speculation("lever-phone", "e", 2)
        assert actor.drop_speculation("lever-phone", "e", 1)
        await _settle()
        assert got == [False, False] and actor.dropped == 2
        # grounding goes on while the slot is still held by the other read
        req = GroundRequest(frame_id=first.frame_id, operation=ClickText("Display"),
                            device="lever-phone")
        with anyio.fail_after(60):
            answer = await actor.ground(req, first)
        assert isinstance(answer, Grounded) and actor.pool.overflows == 1
        actor.pool.release(urgent=False)
    after = dict(runs)
    # the one read was the grounding's own: nothing was read speculatively
    assert sum(after.values()) - sum(before.values()) == 1 and actor.speculated == 0


async def test_the_plan_event_drops_the_queued_read_of_its_step(
    shared_perception: PerceptionEngine,
) -> None:
    """A read still queued when its step's plan comes: a step that reads no text needs
    none, and a grounding reads its own lines; a plan with no operation leaves it."""
    actor = PerceptionEngine(shared_perception.perception, workers=1)
    service = PerceptionService(None, DeviceRegistry(), FrameStore(2), actor)  # type: ignore[arg-type]
    frame = Frame(device="p", episode_id="e", step=3, frame_id="f-1", sha256="f", width=8,
                  height=8, format="png", data=b"")
    plan = Plan(device="p", episode_id="e", step=3, observation="", thought="", action="")
    await actor.pool.acquire(urgent=False)
    got: list[bool] = []

    async def speculate() -> None:
        got.append(await actor.speculate(Captured(frame, np.zeros((8, 8, 3), np.uint8), 0, 0),
                                         "p"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(speculate)
        await _settle()
        assert not service.wants(msgspec.structs.replace(plan, operation=None))  # unparsed
        assert not service.wants(msgspec.structs.replace(plan, step=2, operation=Back()))
        await _settle()
        assert got == [] and actor.dropped == 0
        assert not service.wants(msgspec.structs.replace(plan, operation=Back()))
        await _settle()
        assert got == [False] and actor.dropped == 1
        tg.start_soon(speculate)
        await _settle()
        assert not service.wants(msgspec.structs.replace(plan, operation=ClickText("Display")))
        await _settle()
        assert got == [False, False] and actor.dropped == 2
    actor.pool.release(urgent=False)


@pytest.mark.needs_adb
@pytest.mark.needs_mosquitto
@pytest.mark.parametrize("lazy", [True, False])
async def test_lazy_ocr_reads_no_whole_frame_for_steps_that_read_no_text(
    sim_device: SimDevice, mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
    lazy: bool,
) -> None:
    """Open app (by package) and Back read no text: with lazy OCR the only whole-frame read
    is the one Click text needs, and it still grounds."""
    actor = PerceptionEngine()  # its own cache: the frames are new to it
    policy = ScriptedPolicy([OpenApp("Settings"), Back(), OpenApp("Settings"),
                             ClickText("Display")])
    run = await run_episode(mosquitto, AdbDevice(sim_device.serial), policy,
                            fast_settings(completion_check=False, lazy_ocr=lazy), actor,
                            "Open display settings.")
    assert run.outcome is not None and run.outcome.status == "succeeded", run.outcome
    done = run.of(ActionDone)
    assert [d.ok for d in done] == [True] * 4 and isinstance(done[-1].operation, ClickText)
    assert sim_device.phone.current_screen().endswith("/display")
    runs = {kind: n for (dev, kind), n in actor.perception.ocr_runs.items()
            if dev == sim_device.serial}
    # the grounding's own read: "first" (perception.query_first: "Display" read exactly
    # among the lines that can be it), or "full" (the whole frame) when a read came first
    reads = runs.get("full", 0) + runs.get("first", 0)
    if lazy:
        assert reads == 1 and runs.get("deferred", 0) >= 3, runs
    else:  # the speculative reads do whole frames the steps never use
        assert runs.get("deferred", 0) == 0 and reads >= 2, runs
