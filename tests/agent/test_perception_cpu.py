"""Perception's CPU per phone and stage (issue 32): the thread CPU of the work done for each
phone's frames, charged to that phone whatever else runs beside it, and a grounding that
never waits for a speculative read of another phone's frame."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import anyio.lowlevel
import cv2
import numpy as np
import pytest

from actors.capture import Captured
from actors.perception import PerceptionEngine
from models.grounding import Perception, PerceptionSettings
from models.ocr import OcrResult, OcrSettings
from protocol.messages import Box, Frame, Grounded, GroundRequest
from protocol.operations import ClickText
from runtime.cpu_ledger import STAGES, CpuLedger, charging, note, stage

pytestmark = pytest.mark.anyio


def burn(seconds: float) -> None:
    """Spend about ``seconds`` of this thread's CPU."""
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        x += 1


def test_stages_are_exclusive_and_add_up_to_the_charged_region() -> None:
    ledger = CpuLedger()
    t0 = time.thread_time()
    with charging(ledger, "a"):
        burn(0.02)  # in no stage: other
        with stage("detect"):
            burn(0.03)
            with stage("recognize"):  # nested: not part of detect's own time
                burn(0.04)
                note("rec_lines", 3)
        with charging(ledger, "b"):  # inside a region: still a's
            with stage("band_diff"):
                burn(0.01)
    took = time.thread_time() - t0
    got = ledger.stages("a")
    assert set(got) == {"other", "detect", "recognize", "band_diff"} and set(got) <= set(STAGES)
    assert got["detect"] == pytest.approx(0.03, abs=0.01)
    assert got["recognize"] == pytest.approx(0.04, abs=0.01)
    assert got["other"] == pytest.approx(0.02, abs=0.01)
    assert ledger.total("a") == pytest.approx(sum(got.values()))
    assert ledger.total("a") <= took and ledger.stages("b") == {}
    assert ledger.counts("a") == {"rec_lines": 3}
    with stage("detect"):  # outside any region: nothing recorded
        burn(0.005)
    note("rec_lines", 1)
    assert ledger.stages("a") == got and ledger.devices() == ["a"]


def test_threads_running_side_by_side_are_charged_their_own_work() -> None:
    """Two phones' work interleaved on the GIL: each is charged only what its thread ran,
    not a share of the wall time they overlapped."""
    ledger = CpuLedger()
    start = threading.Barrier(2)

    def work(device: str, seconds: float) -> None:
        start.wait()
        with charging(ledger, device), stage("recognize"):
            burn(seconds)

    threads = [threading.Thread(target=work, args=("a", 0.03)),
               threading.Thread(target=work, args=("b", 0.15))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ledger.total("a") == pytest.approx(0.03, abs=0.015)
    assert ledger.total("b") == pytest.approx(0.15, abs=0.03)


def text_frame(w: int, h: int, lines: int) -> np.ndarray:
    rgb = np.full((h, w, 3), 255, np.uint8)
    for i in range(lines):
        cv2.putText(rgb, f"Entry number {i}", (30, 120 + i * 70),
                    cv2.FONT_HERSHEY_SIMPLEX, 1.2, (0, 0, 0), 3)
    return rgb


def captured(device: str, rgb: np.ndarray, step: int = 1, sha: str = "") -> Captured:
    sha = sha or f"{device}-{step}-{rgb.shape[0]}"
    frame = Frame(device=device, episode_id="e", step=step, frame_id=f"{sha}-1", sha256=sha,
                  width=rgb.shape[1], height=rgb.shape[0], format="png", data=b"")
    return Captured(frame, rgb, 0.0, 0.0)


@pytest.fixture(scope="module")
def counted_perception() -> Perception:
    """Real OCR on one onnxruntime thread, so all of a read's CPU is the calling thread's."""
    p = Perception(PerceptionSettings(ocr=OcrSettings(threads=1, rec_cache=0)))
    p.warm((360, 640))
    return p


async def test_each_phone_is_charged_the_reads_of_its_own_frames(
    counted_perception: Perception,
) -> None:
    engine = PerceptionEngine(counted_perception, workers=2)
    small = captured("a", text_frame(720, 1280, 1))  # one short line
    large = captured("b", text_frame(1080, 2400, 28))  # a full page of text
    got: dict[str, Any] = {}

    async def phone(cap: Captured, query: str) -> None:
        await engine.speculate(cap, cap.frame.device)
        req = GroundRequest(frame_id=cap.frame_id, operation=ClickText(query),
                            device=cap.frame.device)
        got[cap.frame.device] = await engine.ground(req, cap)

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:  # both phones' reads at once
            tg.start_soon(phone, large, "Entry number 21")
            tg.start_soon(phone, small, "Entry number 0")
    assert isinstance(got["a"], Grounded) and isinstance(got["b"], Grounded)
    led = engine.ledger
    for dev in ("a", "b"):
        stages = led.stages(dev)
        assert stages["detect"] > 0 and stages["recognize"] > 0 and stages["match"] > 0
        assert led.total(dev) == pytest.approx(sum(stages.values()))
    # what each recogniser run read, counted where it ran: a's one line, b's page
    assert led.counts("a")["rec_lines"] == 1
    assert led.counts("b")["rec_lines"] >= 20
    assert led.counts("a")["rec_px"] < led.counts("b")["rec_px"] / 10
    # b's page ran beside a's line: a wall-clock share would give a about half of it all
    assert led.stages("a")["recognize"] < led.stages("b")["recognize"] / 5
    assert led.total("a") < led.total("b") * 2 / 3


class BlockingReads:
    """A Perception stand-in: phone ``blocked``'s reads hold their worker thread until
    ``release`` is set; every other read answers at once."""

    def __init__(self, blocked: str) -> None:
        self.settings = PerceptionSettings()
        self.blocked = blocked
        self.release = threading.Event()
        self.reading = threading.Event()
        self.reads: list[str] = []

    def read_text(self, image: Any, *, frame_id: str | None = None,
                  device: str | None = None) -> OcrResult:
        self.reads.append(device or "")
        if device == self.blocked:
            self.reading.set()
            self.release.wait(30)
        return OcrResult(width=8, height=8, lines=())

    def ground_text(self, image: Any, text: str, *, position: str | None = None,
                    frame_id: str | None = None, device: str | None = None) -> Grounded:
        self.read_text(image, frame_id=frame_id, device=device)
        return Grounded(frame_id="", x=1, y=1, box=Box(0, 0, 2, 2), source="ocr")


@pytest.mark.parametrize("same_pixels", [False, True])
async def test_grounding_never_waits_for_another_phones_speculative_read(
    same_pixels: bool,
) -> None:
    """Every slot held by phone b's speculative reads (one running, stuck; one queued):
    phone a's grounding still answers at once. With ``same_pixels`` b's running read is of
    a frame pixel for pixel a's (the same sha): a waits for that read alone, whose result
    is its cache hit; here that read is stuck, so a's grounding runs once it is let go."""
    fake = BlockingReads("b")
    engine = PerceptionEngine(fake, workers=1)  # type: ignore[arg-type]
    rgb = np.zeros((8, 8, 3), np.uint8)
    b1, b2 = captured("b", rgb, 1), captured("b", rgb, 2)
    a1 = captured("a", rgb, 1, sha=b1.frame.sha256 if same_pixels else "")
    answered = anyio.Event()

    async def ground_a() -> None:
        req = GroundRequest(frame_id=a1.frame_id, operation=ClickText("x"), device="a")
        assert isinstance(await engine.ground(req, a1), Grounded)
        answered.set()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(engine.speculate, b1, "b")
            await anyio.to_thread.run_sync(fake.reading.wait, 5)  # b's read is running
            tg.start_soon(engine.speculate, b2, "b")  # queued behind it: the slot is held
            for _ in range(20):
                await anyio.lowlevel.checkpoint()
            assert engine.pool.busy == 1 and engine._queued
            tg.start_soon(ground_a)
            with anyio.move_on_after(2):
                await answered.wait()
            assert answered.is_set() != same_pixels
            fake.release.set()
            await answered.wait()
    assert fake.reads.count("a") == 1
    if not same_pixels:  # beside b's stuck read, one slot over
        assert engine.pool.overflows == 1
