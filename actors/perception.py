"""The perception actor: grounds ``Click text`` / ``Click icon`` / ``Long press`` targets.

One ``Perception`` (models/grounding.py) serves every device of a host; a semaphore
bounds how many frames it works on at once (OCR is CPU-bound; more threads than cores
only queue). Results are cached per frame (Perception caches OCR and proposals by frame
id), so the speculative OCR started on each new frame while the planner waits for the LLM
makes the later grounding of that frame nearly free.

``PerceptionActor`` is the engine; ``PerceptionService`` is the host-level actor on the bus.
It answers each ``GroundRequest`` (``devices/{serial}/requests/ground_request``) with
``Grounded`` | ``Ambiguous`` | ``NotFound`` carrying the request id, and starts the
speculative OCR itself when it sees a new episode ``Frame`` event (when the device's
settings ask for it), skipping a frame that a newer one has already replaced. Pixels come
from the host's ``FrameStore`` (decoded from ``Frame.data`` only when capture ran elsewhere).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TypeVar

import anyio
import msgspec
import structlog

from actors.capture import Captured
from actors.frames import FrameStore
from actors.rpc import DeviceEntry, DeviceRegistry, ServiceActor
from models.grounding import Ambiguous as GAmbiguous
from models.grounding import Grounded as GGrounded
from models.grounding import GroundResult, Perception, PerceptionSettings
from models.providers import ProviderError
from protocol.messages import (
    Ambiguous,
    Box,
    Candidate,
    Frame,
    Grounded,
    GroundRequest,
    Msg,
    NotFound,
    TextLine,
)
from protocol.operations import (
    ClickIcon,
    ClickText,
    LongPress,
    LongPressPoint,
    Operation,
    TapPoint,
)
from runtime import topics
from runtime.actor import Publisher
from runtime.config import ConfigError

log = structlog.get_logger(__name__)

GroundAnswer = Grounded | Ambiguous | NotFound
T = TypeVar("T")


def _box(b: tuple[float, float, float, float]) -> Box:
    return Box(max(0, int(b[0])), max(0, int(b[1])), max(0, int(b[2])), max(0, int(b[3])))


class PerceptionMeter:
    """What perception cost: CPU seconds per device (running totals: a reader takes
    differences) and the latency of recent grounding requests."""

    def __init__(self, keep: int = 4096) -> None:
        self.cpu_s: dict[str, float] = {}
        self.ground_s: deque[float] = deque(maxlen=keep)
        self._lock = threading.Lock()  # added to from worker threads

    def add_cpu(self, device: str, seconds: float) -> None:
        with self._lock:
            self.cpu_s[device] = self.cpu_s.get(device, 0.0) + seconds

    def add_ground(self, seconds: float) -> None:
        self.ground_s.append(seconds)


class PerceptionActor:
    """Shared per host: ``ground`` answers a GroundRequest, ``speculate`` pre-reads a frame."""

    name = "perception"

    def __init__(
        self, perception: Perception | None = None, *,
        settings: PerceptionSettings | None = None, workers: int = 1,
    ) -> None:
        try:
            self.perception = perception or Perception(settings)
        except ProviderError as exc:  # perception.providers names a missing accelerator
            raise ConfigError(str(exc)) from exc
        self.timeout_s = self.perception.settings.timeout_s
        self._slots = anyio.Semaphore(max(1, workers))
        self.speculated = 0
        self.meter = PerceptionMeter()

    async def _off_loop(self, device: str, fn: Callable[[], T]) -> T:
        """``fn`` in a worker thread under ``timeout_s`` (on timeout the thread is abandoned,
        not killed), its CPU time added to ``device``'s meter. With ``perception.ocr.threads
        = 1`` that is all of it; with more, onnxruntime's pool threads work uncounted."""

        def measured() -> T:
            t = time.thread_time()
            try:
                return fn()
            finally:
                self.meter.add_cpu(device, time.thread_time() - t)

        with anyio.fail_after(self.timeout_s):
            return await anyio.to_thread.run_sync(measured, abandon_on_cancel=True)

    async def read_lines(self, captured: Captured, device: str = "") -> list[TextLine]:
        """The OCR lines of the frame with their boxes, under the worker limit (cached per
        frame, so a frame speculated on is read once)."""
        p, sha = self.perception, captured.frame.sha256
        async with self._slots:
            res = await self._off_loop(device, lambda: p.read_text(
                captured.rgb, frame_id=sha, device=device or None))
        return [TextLine(ln.text, _box(ln.box)) for ln in res.lines]

    async def speculate(self, captured: Captured, device: str = "") -> None:
        """OCR the frame now, off the critical path; failures only cost the cache hit."""
        try:
            await self.read_lines(captured, device)
            self.speculated += 1
        except Exception as exc:  # best effort: the real request reports its own error
            log.debug("speculative_ocr_failed", error=f"{type(exc).__name__}: {exc}")

    async def ground(self, req: GroundRequest, captured: Captured) -> GroundAnswer:
        """The answer to ``req`` on ``captured`` (which must be the frame it names)."""
        op = req.operation
        t0 = time.perf_counter()
        async with self._slots:
            result = await self._ground(op, captured, req.device, req.snap_radius_px)
        took = time.perf_counter() - t0
        self.meter.add_ground(took)
        log.debug("grounded", op=type(op).__name__, s=round(took, 3))
        fid = captured.frame_id
        answer = self._answer(result, fid)
        return msgspec.structs.replace(answer, device=req.device, episode_id=req.episode_id,
                                       step=req.step, correlation_id=req.correlation_id)

    @staticmethod
    def _answer(result: GroundResult, fid: str) -> GroundAnswer:
        if isinstance(result, GGrounded):
            return Grounded(frame_id=fid, x=max(0, int(result.point[0])),
                            y=max(0, int(result.point[1])), box=_box(result.box),
                            source=result.method, score=float(result.score))
        if isinstance(result, GAmbiguous):
            return Ambiguous(
                frame_id=fid, image_format="jpeg", marked_image=result.marked_jpeg,
                reason=result.reason[:500],
                candidates=[Candidate(index=c.number, box=_box(c.box), text=c.label,
                                      crop=c.crop_png) for c in result.candidates])
        return NotFound(frame_id=fid, query=result.query, closest=list(result.closest))

    async def _ground(self, op: Operation, captured: Captured, device: str,
                      radius: float = 24) -> GroundResult:
        p = self.perception
        sha, rgb, dev = captured.frame.sha256, captured.rgb, device or None
        if isinstance(op, ClickText | LongPress):
            text = op.text
            return await self._off_loop(device, lambda: p.ground_text(
                rgb, text, frame_id=sha, device=dev))
        if isinstance(op, ClickIcon):
            desc, pos = op.description, op.position
            return await self._off_loop(device, lambda: p.ground_icon(
                rgb, desc, position=pos, frame_id=sha))
        if isinstance(op, TapPoint | LongPressPoint):
            pt = (op.x, op.y)
            return await self._off_loop(device, lambda: p.ground_point(
                rgb, pt, radius=radius, frame_id=sha, device=dev))
        raise ValueError(f"{type(op).__name__} has no target to ground")


def candidate_point(amb: Ambiguous, index: int) -> tuple[int, int] | None:
    for c in amb.candidates:
        if c.index == index:
            return c.box.center
    return None


class PerceptionService(ServiceActor):
    """Host-level: answers ``GroundRequest``; speculative OCR on each new episode frame."""

    name = "perception"
    kinds = (GroundRequest,)

    def __init__(self, bus: Publisher, registry: DeviceRegistry, frames: FrameStore,
                 engine: PerceptionActor, *, concurrency: int | None = None,
                 max_speculating: int = 4) -> None:
        super().__init__(bus, registry, concurrency=concurrency)
        self.inbox = (topics.device_requests_filter(None), topics.device_events_filter(None))
        self.frames = frames
        self.engine = engine
        self.serve_timeout_s = engine.timeout_s * 2 + 5.0
        self.handler_timeout_s = self.serve_timeout_s + 5.0
        self.max_speculating = max_speculating
        self.speculating = 0
        self.speculated = 0
        self.skipped = 0  # frames not speculated on: stale, or too many already queued

    def wants(self, msg: Msg) -> bool:
        if isinstance(msg, Frame):
            self._maybe_speculate(msg)
            return False
        return isinstance(msg, GroundRequest)

    def _maybe_speculate(self, frame: Frame) -> None:
        entry = self.registry.get(frame.device)
        if (entry is None or not frame.episode_id or not entry.settings.speculative_ocr
                or self._tg is None):
            return
        if self.speculating >= self.max_speculating:
            self.skipped += 1
            return
        self.speculating += 1
        self._tg.start_soon(self._speculate, entry, frame)

    async def _speculate(self, entry: DeviceEntry, frame: Frame) -> None:
        try:
            if entry.latest_frame and entry.latest_frame != frame.frame_id:
                self.skipped += 1
                return  # a newer frame of this phone is what will be grounded
            got, rgb = await self.frames.rgb(frame.frame_id, frame.device)
            with anyio.fail_after(self.serve_timeout_s):
                await self.engine.speculate(Captured(got, rgb, 0.0, 0.0), frame.device)
            self.speculated += 1
        except Exception as exc:  # best effort: the real request reports its own error
            log.debug("speculative_ocr_failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            self.speculating -= 1

    async def serve(self, entry: DeviceEntry, req: Msg) -> Msg:
        assert isinstance(req, GroundRequest)
        frame, rgb = await self.frames.rgb(req.frame_id, req.device)
        return await self.engine.ground(req, Captured(frame, rgb, 0.0, 0.0))
