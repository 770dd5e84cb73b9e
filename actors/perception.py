"""Perception on the bus: grounding requests answered from the host's shared models.

``PerceptionEngine`` wraps one ``models.grounding.Perception`` for every phone of a host,
behind a pool of ``workers`` slots (OCR is CPU-bound; more threads than cores only queue)
where grounding goes first (``actors/priority.py``). Results are cached per frame, so the
speculative OCR started on each new frame while the planner waits for the LLM makes the
later grounding of that frame nearly free. A speculative read starts only on a free slot
with no grounding waiting, and one still queued is dropped when a newer frame of its
phone arrives or the phone's plan needs no text; with ``agent.lazy_ocr`` a whole-frame
read is left to the grounding that needs it.

``PerceptionService`` answers ``GroundRequest`` with ``Grounded`` | ``Ambiguous`` |
``NotFound`` and starts the speculative read itself when it sees a new episode ``Frame``
(when the phone's settings ask for it). Pixels come from the host's ``FrameStore``.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol, TypeVar

import anyio
import msgspec
import numpy as np
import structlog

from actors.capture import Captured
from actors.config import AgentConfig, AgentSettings
from actors.frames import FrameStore
from actors.priority import PriorityPool
from actors.rpc import Entries, Registered, ServiceActor
from devices.codecs import encode_png
from models.grounding import (
    GroundingMode,
    Perception,
    PerceptionSettings,
    grounder_result,
    icon_disagreement,
    merge_grounder,
    pixel_box,
)
from models.llm.budget import CostCap, spending_cap
from models.llm.errors import LLMCostCapReached, LLMError, LLMTimeout
from models.llm.grounder import GrounderAnswer, ModelGrounder
from models.llm.messages import ChatModel, LLMReply
from models.providers import ProviderError
from protocol.messages import (
    Ambiguous,
    Frame,
    Grounded,
    GroundRequest,
    GroundResult,
    LlmCall,
    Msg,
    NotFound,
    Plan,
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
from runtime.cpu_ledger import CpuLedger, charging, stage

log = structlog.get_logger(__name__)

T = TypeVar("T")


def needs_text(op: Operation) -> bool:
    """Whether grounding ``op`` reads the frame's OCR (a point snaps to the lines too)."""
    return isinstance(op, ClickText | LongPress | TapPoint | LongPressPoint)


class Grounder(Protocol):
    """A grounding model (``models.llm.grounder.ModelGrounder``, the ``grounder`` role)."""

    timeout_s: float

    async def locate(self, description: str, screenshot: bytes, screen: tuple[int, int], *,
                     thought: str = "") -> GrounderAnswer | None: ...


def grounding_mode(op: Operation, settings: PerceptionSettings) -> GroundingMode:
    """Who grounds ``op``'s target (``perception.text_grounding`` / ``icon_grounding``); a
    planner's own point is always checked against OCR."""
    if isinstance(op, ClickText | LongPress):
        return settings.text_grounding
    if isinstance(op, ClickIcon):
        return settings.icon_grounding
    return "ocr"


def grounder_target(op: Operation) -> str:
    """What the grounder is asked to find for ``op``."""
    if isinstance(op, ClickIcon):
        where = f" (in the {op.position} of the screen)" if op.position != "center" else ""
        return f"the icon: {op.description}{where}"
    return f'the element showing the text "{getattr(op, "text", "")}"'


def llm_call(reply: LLMReply) -> LlmCall:
    """What a grounding answer tells its asker of one answered call (``LlmCall``)."""
    return LlmCall(model=reply.model, role=reply.role, prompt_tokens=reply.prompt_tokens,
                   completion_tokens=reply.completion_tokens,
                   cached_tokens=reply.cached_tokens, latency_s=reply.latency_s,
                   cost_usd=reply.cost_usd, attempts=reply.attempts)


def request_cap(req: GroundRequest) -> CostCap:
    """The cost cap the request's grounder calls run under: the episode's, at what it has
    spent (none: an unbounded one, which still collects the answered calls)."""
    if req.max_cost_usd > 0:
        return CostCap(req.max_cost_usd, req.cost_usd)
    return CostCap(math.inf)


def serve_timeout_for(timeout_s: float) -> float:
    """How long a grounding request may take, for a model call limit of ``timeout_s``: the
    frame's own read it may wait for, then its grounding."""
    return timeout_s * 2 + 5.0


PREPARE_ENV = "MOBAGENT_PREPARE"  # "0": perception does not prepare when it starts

# The preparing thread's niceness: the steps' reads and groundings run first on a busy host.
PREPARE_NICE = 10


class PrepareReport(msgspec.Struct, frozen=True):
    """What ``PerceptionEngine.start_preparing`` did: its time, and the input shapes it
    prepared (and those the model refused)."""

    wall_s: float
    cpu_s: float
    shapes: int
    failed: int


class PerceptionMeter:
    """The latency of recent grounding requests (their CPU, per device and stage, is in the
    engine's ``ledger``)."""

    def __init__(self, keep: int = 4096) -> None:
        self.ground_s: deque[float] = deque(maxlen=keep)

    def add_ground(self, seconds: float) -> None:
        self.ground_s.append(seconds)


class PerceptionEngine:
    """Shared per host: ``ground`` answers a GroundRequest, ``speculate`` pre-reads a frame."""

    name = "perception"

    def __init__(
        self, perception: Perception | None = None, *,
        settings: PerceptionSettings | None = None, workers: int = 1,
        speculation_priority: bool = True, grounder: Grounder | None = None,
    ) -> None:
        try:
            self.perception = perception or Perception(settings)
        except ProviderError as exc:  # perception.providers names a missing accelerator
            raise ConfigError(str(exc)) from exc
        self.timeout_s = self.perception.settings.timeout_s
        # A grounding answers within this, whatever it waits on, so that it always reaches
        # its asker (who waits serve_timeout_for(timeout_s) plus a margin) with the grounder
        # calls it made: an answer lost to a timeout would leave them uncharged.
        self.answer_within_s = serve_timeout_for(self.timeout_s)
        if grounder is None and self.perception.settings.grounder_needed():
            raise ConfigError('perception.text_grounding / icon_grounding = "model" or '
                              '"hybrid" need a grounding model: set [llm.roles.grounder]')
        self.grounder = grounder
        self.grounder_calls = 0
        self.grounder_overruled = 0  # grounder points OCR's exact text match outranked
        self.grounder_failed = 0  # calls that failed (hybrid: OCR's answer stood)
        self.grounder_disputed = 0  # icons the matcher placed elsewhere (both to the chooser)
        # speculation_priority=False: one FIFO queue (the old semaphore), for benchmarks
        self.pool = PriorityPool(workers, priority=speculation_priority)
        self._queued: dict[str, tuple[str, int, anyio.CancelScope]] = {}  # device -> (episode, step, scope)
        self._reading: dict[str, anyio.Event] = {}  # frame sha -> its speculative read, running
        self.speculated = 0  # speculative reads done
        self.dropped = 0  # speculative reads given up while queued (superseded, not needed)
        self.meter = PerceptionMeter()
        # thread CPU per device and stage (runtime.cpu_ledger): the work done for each
        # phone's frames, speculative reads included, whoever's step waited for it
        self.ledger = CpuLedger()
        # the host's frames (set by AgentServices): the grounder's image when capture made
        # no encoding (nobody on the bus read it) is made there, once, as the bus had it
        self.frames: FrameStore | None = None
        self._preparing: threading.Thread | None = None
        self._stop_preparing = threading.Event()
        self.prepared = threading.Event()  # set when start_preparing's work has ended
        self.prepare_report: PrepareReport | None = None

    def start_preparing(self) -> None:
        """Load the OCR models and prepare the input shapes they ran before
        (``Perception.prepare``) in a thread of its own, below the steps' priority, so that
        the first steps meet them ready; once per engine. Its CPU is nobody's step's.
        ``$MOBAGENT_PREPARE`` = 0 leaves the models to the first step that needs them (a
        short-lived host that may never read text: the test suite's hosts and workers)."""
        if self._preparing is not None:
            return
        if os.environ.get(PREPARE_ENV, "1").strip() == "0":
            self.prepared.set()
            return
        self._preparing = threading.Thread(target=self._prepare, name="perception-prepare",
                                           daemon=True)
        self._preparing.start()

    def stop_preparing(self) -> None:
        self._stop_preparing.set()

    async def prepared_while_running(self) -> None:
        """A service's ``main``: preparing starts with the service (while phones connect,
        not in a step) and is told to stop when the service ends."""
        self.start_preparing()
        try:
            await anyio.sleep_forever()
        finally:
            self.stop_preparing()

    def _prepare(self) -> None:
        with contextlib.suppress(AttributeError, OSError):  # Linux: a thread's own niceness
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), PREPARE_NICE)
        t0, cpu0 = time.perf_counter(), time.thread_time()
        try:
            shapes = self.perception.prepare(self._stop_preparing)
        except Exception as exc:  # the first step loads the models again and reports it
            log.warning("perception_prepare_failed", error=f"{type(exc).__name__}: {exc}")
            shapes = {}
        self.prepare_report = PrepareReport(
            wall_s=time.perf_counter() - t0, cpu_s=time.thread_time() - cpu0,
            shapes=sum(done for done, _failed in shapes.values()),
            failed=sum(failed for _done, failed in shapes.values()))
        self.prepared.set()
        log.info("perception_prepared", **msgspec.structs.asdict(self.prepare_report))

    async def wait_prepared(self, timeout_s: float) -> bool:
        """Whether preparing ended within ``timeout_s`` (benches start their clock after)."""
        return await anyio.to_thread.run_sync(self.prepared.wait, timeout_s,
                                              abandon_on_cancel=True)

    async def _off_loop(self, device: str, fn: Callable[[], T]) -> T:
        """``fn`` in a worker thread under ``timeout_s`` (on timeout the thread is abandoned,
        not killed), its CPU time charged to ``device`` by stage on the ``ledger``. With
        ``perception.ocr.threads = 1`` that is all of it; with more, the OCR runtime's
        pool threads work uncounted."""

        def measured() -> T:
            with charging(self.ledger, device):
                return fn()

        with anyio.fail_after(self.timeout_s):
            return await anyio.to_thread.run_sync(measured, abandon_on_cancel=True)

    async def _own_frame_read(self, sha: str) -> None:
        """Wait for a speculative read of this very frame already running: its result is
        the cache hit, and reading the frame a second time beside it would cost twice."""
        running = self._reading.get(sha)
        if running is not None:
            with anyio.fail_after(self.timeout_s):
                await running.wait()

    async def read_lines(self, captured: Captured, device: str = "") -> list[TextLine]:
        """The OCR lines of the frame with their boxes, in the pool as urgent work (cached
        per frame, so a frame speculated on is read once)."""
        p, sha = self.perception, captured.frame.sha256
        await self._own_frame_read(sha)
        async with self.pool.slot(urgent=True):
            res = await self._off_loop(device, lambda: p.read_text(
                captured.rgb, frame_id=sha, device=device or None))
        return [TextLine(ln.text, pixel_box(ln.box)) for ln in res.lines]

    async def speculate(self, captured: Captured, device: str = "", *,
                        lazy: bool = False) -> bool:
        """OCR the frame as background work; whether it was read. While it waits for a slot
        ``drop_speculation`` gives it up; with ``lazy`` a whole-frame read is left to the
        grounding that needs it. Failures only cost the cache hit."""
        frame, p, sha = captured.frame, self.perception, captured.frame.sha256
        previous = self._queued.get(device)
        if previous is not None:  # one queued read per phone: the newest frame's
            previous[2].cancel()
        with anyio.CancelScope() as queued:
            self._queued[device] = (frame.episode_id, frame.step, queued)
            try:
                await self.pool.acquire(urgent=False)
            finally:
                mine = self._queued.get(device)
                if mine is not None and mine[2] is queued:
                    del self._queued[device]
        if queued.cancelled_caught:
            self.dropped += 1
            return False
        try:
            if sha in self._reading:
                return False  # this frame is being read already
            self._reading[sha] = done = anyio.Event()
            try:
                read = await self._off_loop(device, lambda: (
                    p.read_text_unless_full(captured.rgb, frame_id=sha, device=device) if lazy
                    else p.read_text(captured.rgb, frame_id=sha, device=device or None)))
            finally:
                del self._reading[sha]
                done.set()
        except Exception as exc:  # best effort: the real request reports its own error
            log.debug("speculative_ocr_failed", error=f"{type(exc).__name__}: {exc}")
            return False
        finally:
            self.pool.release(urgent=False)
        self.speculated += read is not None
        return read is not None

    def drop_speculation(self, device: str, episode_id: str = "", step: int = 0) -> bool:
        """Give up the phone's speculative read still waiting for a slot (of that episode
        step, when given); one already running finishes (a thread cannot be stopped)."""
        queued = self._queued.get(device)
        if queued is None or (step and (queued[0], queued[1]) != (episode_id, step)):
            return False
        queued[2].cancel()
        return True

    async def ground(self, req: GroundRequest, captured: Captured) -> GroundResult:
        """The answer to ``req`` on ``captured`` (which must be the frame it names), with
        the grounder calls it made (``llm_calls``), under the request's cost cap: a call it
        refuses ends the grounding as ``NotFound`` with ``cost_capped`` saying why, and so
        does running out of ``answer_within_s`` (its calls still carried)."""
        op = req.operation
        t0 = time.perf_counter()
        cap, capped = request_cap(req), ""
        result: GroundResult = NotFound(frame_id="", query=grounder_target(op))
        with spending_cap(cap), anyio.move_on_after(self.answer_within_s) as in_time:
            try:
                result = await self._answer(req, captured)
            except LLMCostCapReached as exc:
                capped = str(exc)
        if in_time.cancelled_caught:
            log.warning("grounding_out_of_time", device=req.device, s=self.answer_within_s,
                        grounder_calls=len(cap.answered))
            # what a cancelled call in flight cost is unknown: the provider has no answer to
            # give, so only answered calls are carried (and charged)
        took = time.perf_counter() - t0
        self.meter.add_ground(took)
        log.debug("grounded", op=type(op).__name__, s=round(took, 3))
        if isinstance(result, Ambiguous):
            result = msgspec.structs.replace(result, reason=result.reason[:500])
        return msgspec.structs.replace(result, frame_id=captured.frame_id, device=req.device,
                                       episode_id=req.episode_id, step=req.step,
                                       correlation_id=req.correlation_id,
                                       llm_calls=tuple(llm_call(r) for r in cap.answered),
                                       cost_capped=capped)

    async def _answer(self, req: GroundRequest, captured: Captured) -> GroundResult:
        op = req.operation
        mode = grounding_mode(op, self.perception.settings)
        if needs_text(op) and mode != "model":
            await self._own_frame_read(captured.frame.sha256)
        if mode == "model":
            return await self._model_only(op, captured, req.thought)
        async with self.pool.slot(urgent=True):
            result = await self._ground(op, captured, req.device, req.snap_radius_px)
        if mode == "hybrid" and (isinstance(op, ClickIcon) or not isinstance(result, Grounded)):
            result = await self._hybrid(op, captured, req, result)
        return result

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

    async def _locate(self, op: Operation, captured: Captured, thought: str) -> GrounderAnswer | None:
        """The grounder's answer for ``op``'s target on the frame (outside the CPU pool: it
        waits on the network); ``LLMError`` when the call fails."""
        assert self.grounder is not None
        frame = captured.frame
        h, w = captured.rgb.shape[:2]
        if not frame.data and self.frames is not None:
            try:
                frame = await self.frames.encoded(frame.frame_id, frame.device)
            except KeyError:
                pass  # not this host's frame (or too old): the PNG below
        if frame.data:
            data = frame.data
        else:
            data = await anyio.to_thread.run_sync(self._encode, frame.device, captured.rgb)
        self.grounder_calls += 1
        try:
            with anyio.fail_after(self.grounder.timeout_s + 1.0):
                return await self.grounder.locate(grounder_target(op), data, (w, h),
                                                  thought=thought)
        except TimeoutError:
            raise LLMTimeout(f"grounder: no answer within {self.grounder.timeout_s:g} s") from None

    def _encode(self, device: str, rgb: np.ndarray) -> bytes:
        """The frame as PNG for the grounder (a worker thread; ``encode`` on the ledger)."""
        with charging(self.ledger, device), stage("encode"):
            return encode_png(rgb)

    async def _model_only(self, op: Operation, captured: Captured, thought: str) -> GroundResult:
        """``model``: the grounder alone; NotFound when it finds nothing."""
        answer = await self._locate(op, captured, thought)
        if answer is None:
            return NotFound(frame_id="", query=grounder_target(op))
        return grounder_result(answer.point, answer.box)

    async def _hybrid(self, op: Operation, captured: Captured, req: GroundRequest,
                      first: GroundResult) -> GroundResult:
        """``hybrid``: the grounder asked after OCR / the matcher; its point snapped to the
        OCR line (text) or icon box (icon) it falls in; an exact text match outranks it; a
        confident icon match elsewhere makes both candidates for the chooser."""
        try:
            answer = await self._locate(op, captured, req.thought)
        except LLMCostCapReached:
            raise  # the episode's cap: it ends the episode, OCR's answer does not stand
        except LLMError as exc:
            self.grounder_failed += 1
            log.warning("grounder_failed", device=req.device, error=f"{type(exc).__name__}: {exc}")
            return first
        if answer is None:
            return first
        p, sha, rgb, dev = self.perception, captured.frame.sha256, captured.rgb, req.device
        exact: list[tuple[float, float, float, float]] = []
        if isinstance(op, ClickIcon):
            snap_to = await self._off_loop(dev, lambda: p.icon_boxes(rgb, frame_id=sha))
        else:
            text = getattr(op, "text", "")
            snap_to, exact = await self._off_loop(dev, lambda: p.text_boxes(
                rgb, text, frame_id=sha, device=dev or None))
        merged = merge_grounder(first, answer.point, answer.box, snap_to, exact)
        if isinstance(op, ClickIcon):
            if isinstance(merged, Grounded):
                placed = merged
                merged = await self._off_loop(dev, lambda: icon_disagreement(first, placed, rgb))
                self.grounder_disputed += not isinstance(merged, Grounded)
        elif merged is not first and not isinstance(merged, Grounded):  # OCR's exact match won
            self.grounder_overruled += 1
            log.info("grounder_overruled", device=dev, point=answer.point,
                     reason="an exact OCR text match elsewhere")
        return merged


def engine_for(cfg: AgentConfig, llm: ChatModel | None = None) -> PerceptionEngine:
    """The host's (or a perception worker's) engine for ``cfg``; when a grounding mode asks
    for the grounder, it calls ``llm.roles.grounder`` through ``llm`` (an ``LLMClient`` of
    ``cfg.llm``: the same retries, rate limits and prices as the other roles)."""
    grounder = None
    if cfg.perception.grounder_needed():
        if llm is None:
            raise ConfigError("perception.text_grounding / icon_grounding need the grounder "
                              "role, and this command has no LLM client for it")
        grounder = ModelGrounder.from_settings(llm, cfg.llm)
    return PerceptionEngine(settings=cfg.perception, workers=cfg.agent.perception_workers,
                            grounder=grounder)


def candidate_point(amb: Ambiguous, index: int) -> tuple[int, int] | None:
    for c in amb.candidates:
        if c.index == index:
            return c.box.center
    return None


class PerceptionEntry(Registered, Protocol):
    """What perception uses of a registered phone."""

    settings: AgentSettings
    latest_frame: str


class PerceptionService(ServiceActor[PerceptionEntry]):
    """Host-level: answers ``GroundRequest``; speculative OCR on each new episode frame."""

    name = "perception"
    kinds = (GroundRequest,)

    def __init__(self, bus: Publisher, registry: Entries[PerceptionEntry], frames: FrameStore,
                 engine: PerceptionEngine, *, concurrency: int | None = None,
                 max_speculating: int = 4) -> None:
        super().__init__(bus, registry, concurrency=concurrency)
        self.inbox = (topics.device_requests_filter(None), topics.device_events_filter(None))
        self.frames = frames
        self.engine = engine
        self.serve_timeout_s = serve_timeout_for(engine.timeout_s)
        self.handler_timeout_s = self.serve_timeout_s + 5.0
        self.max_speculating = max_speculating
        self.speculating = 0
        self.speculated = 0
        self.skipped = 0  # frames not speculated on: stale, or too many already queued

    async def main(self) -> None:
        await self.engine.prepared_while_running()

    def wants(self, msg: Msg) -> bool:
        if isinstance(msg, Frame):
            self._maybe_speculate(msg)
            return False
        if isinstance(msg, Plan):
            # A read still queued when the plan comes is no longer ahead of anything: a step
            # that reads no text needs none, and a grounding reads what it needs itself (with
            # query_first only the lines that can be its query).
            if msg.operation is not None \
                    and self.engine.drop_speculation(msg.device, msg.episode_id, msg.step):
                log.debug("speculative_ocr_dropped", reason="the plan needs no text"
                          if not needs_text(msg.operation) else "the grounding reads its own")
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

    async def _speculate(self, entry: PerceptionEntry, frame: Frame) -> None:
        try:
            if entry.latest_frame and entry.latest_frame != frame.frame_id:
                self.skipped += 1
                return  # a newer frame of this phone is what will be grounded
            got, rgb = await self.frames.rgb(frame.frame_id, frame.device)
            with anyio.fail_after(self.serve_timeout_s):
                read = await self.engine.speculate(Captured(got, rgb, 0.0, 0.0), frame.device,
                                                   lazy=entry.settings.lazy_ocr)
            self.speculated += read
        except Exception as exc:  # best effort: the real request reports its own error
            log.debug("speculative_ocr_failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            self.speculating -= 1

    async def serve(self, entry: PerceptionEntry, req: Msg) -> Msg:
        assert isinstance(req, GroundRequest)
        frame, rgb = await self.frames.rgb(req.frame_id, req.device)
        return await self.engine.ground(req, Captured(frame, rgb, 0.0, 0.0))
