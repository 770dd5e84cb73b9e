"""One device's agent (the planner) and its step loop: Mobile-Agent's loop, as messages.

``DeviceAgent`` is the planner actor for one phone. Its inbox is the device's control
topic (Cancel, Approve, Answer, Steer); the host's fleet (``host/fleet.py``, the one
scheduler) calls ``run_episode`` with each instruction, one episode at a time, and owns the
episode's lifecycle: it publishes ``EpisodeStarted`` / ``EpisodeFinished`` and the busy/idle
status (``announce=False``). A lone agent (tests, tools) announces its own episodes.

The other step actors are host-level services on the bus (``actors/services.py``): the
planner publishes a request on ``mobagent/v1/devices/{serial}/requests/{kind}`` and awaits
the step event carrying the same ``request_id`` on ``devices/{serial}/events/{kind}``
(``actors/rpc.py``: ``Requests`` publishes and waits under a timeout, the host's
``ReplyRouter`` matches replies by id; an ``Error`` reply or no reply fails the episode
with the reason). Each step, for device ``d``:

1. ``FrameRequest`` -> capture -> ``Frame`` (hashed, flagged, encoded once; with the OCR
   lines for the prompt's hints when ``ocr_hints`` is on, and on the first frame the
   foreground app); perception sees the ``Frame`` event and starts speculative OCR on it;
2. the policy (``actors/planner.py``) decides -> ``LlmUsage`` per call, ``Plan``;
3. a target to tap -> ``GroundRequest`` -> perception -> ``Grounded`` | ``Ambiguous`` (one
   chooser call here, published as the planner's ``Chosen``) | ``NotFound`` (feedback for
   the next prompt, nothing executed);
4. sensitive operations wait for ``Approve`` on the control topic when approval is on;
   ``Ask`` publishes a ``Question`` there and waits for an ``Answer``;
5. ``ActRequest`` (operation + grounded point) -> actuator -> ``ActionDone``;
6. ``FrameRequest`` for the after-frame, then ``ReflectRequest`` (before/after frame ids)
   -> reflector -> ``Reflection`` (ok | unchanged | wrong_page); then ``StepTiming``.

``Stop`` triggers the completion check; "not complete" continues with the reason in the
prompt. The loop guard (``actors/loop_guard.py``), the step budget and the completion check
are the planner's own. The planner never calls a device or a model engine itself: capture,
perception, actuation and reflection are reached only through their requests, and each
event kind has one producer (the planner publishes only its own kinds). What the planner
settles itself still goes through the owner of the kind: a step it ends without the phone
(target not found, not approved, an Ask answered) is an ``ActRequest`` with ``given``,
answered by the actuator's ``ActionDone``; its own verdicts (loop guard, completion check,
unusable reply, LLM judge) are a ``ReflectRequest`` with ``given``, answered by the
reflector's ``Reflection``.

The host registers each phone with its ``AgentServices`` (the services own the per-device
state); an agent whose phone its services do not serve fails the episode with that reason.

Pixels travel the bus as ``Frame.data``; within one host the services share decoded
frames through a ``FrameStore`` (a local fast path, see ``actors/rpc.py``). The planner
itself only needs the encoded frame (for the LLM) and its hash.

Without host services on its bus (``services=None``: unit tests, one-off tools) an agent
runs a private set in-process through a loopback router: the same requests, actors and
replies, no broker hop (``AgentServices.loopback``). Every message carries device,
episode_id and step; events go out on ``mobagent/v1/devices/{serial}/events/{kind}``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Literal, TypeVar

import anyio
import msgspec
import structlog

from actors.actuator import ActionFailed, is_sensitive
from actors.config import AgentSettings, episode_settings
from actors.loop_guard import LoopGuard
from actors.perception import PerceptionEngine, candidate_point
from actors.planner import ActionJudge, Decision, Policy, ProgressPlanner, StepContext
from actors.rpc import RequestError, new_request_id
from actors.services import AgentServices
from actors.telemetry import Tracing, set_outcome, span_ids
from devices.adb import Device, DeviceError
from models.llm import (
    CostCap,
    LLMBadResponse,
    LLMCostCapReached,
    LLMError,
    LLMReply,
    spending_cap,
)
from models.llm.react import (
    StepRecord,
    incomplete_feedback,
    judge_feedback,
    not_found_feedback,
    reflection_feedback,
)
from protocol.messages import (
    ActionDone,
    ActRequest,
    Ambiguous,
    Answer,
    Approve,
    Cancel,
    Chosen,
    DeviceStatus,
    EpisodeFinished,
    EpisodeStarted,
    EpisodeStatus,
    Error,
    Frame,
    FrameRequest,
    GivenOutcome,
    GivenVerdict,
    Grounded,
    GroundRequest,
    Instruction,
    LlmUsage,
    Msg,
    NoteKept,
    NotFound,
    Plan,
    Progress,
    Question,
    Reflection,
    ReflectRequest,
    Steer,
    StepTiming,
    Verdict,
    kind_of,
)
from protocol.operations import (
    GROUNDED_OPS,
    Ask,
    Back,
    ClickIcon,
    Note,
    Operation,
    Stop,
    format_operation,
)
from runtime import topics
from runtime.actor import Actor, Publisher
from runtime.errors import MobagentError

log = structlog.get_logger(__name__)

PolicyFactory = Callable[[Instruction], Policy]
M = TypeVar("M", bound=Msg)
REQUEST_MARGIN_S = 5.0  # a request waits this much longer than its service may take


@dataclass(frozen=True)
class Ids:
    device: str
    episode_id: str
    correlation_id: str

    def stamp(self, msg: M, step: int) -> M:
        return msgspec.structs.replace(msg, device=self.device, episode_id=self.episode_id,
                                       correlation_id=self.correlation_id, step=step,
                                       **span_ids())


@dataclass(frozen=True)
class EpisodeOutcome:
    episode_id: str
    instruction_id: str
    status: EpisodeStatus
    reason: str
    steps: int
    operations: tuple[Operation, ...]  # executed operations, in order
    cost_usd: float = 0.0  # what the episode's LLM calls cost (0 when no model is priced)


# The purpose a call's LlmUsage names when only its role is known (a call answered in a
# step that the cost cap ended before the step published it).
_PURPOSE_OF_ROLE = {"planner": "plan", "chooser": "choose", "reflector": "reflect"}


class _Finish(MobagentError):
    def __init__(self, status: EpisodeStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class DeviceAgent(Actor):
    """The per-device planner: control inbox, one episode at a time, steps as requests."""

    name = "agent"

    def __init__(
        self,
        bus: Publisher,
        device: Device,
        *,
        settings: AgentSettings,
        perception: PerceptionEngine | None,
        policy_for: PolicyFactory,
        host: str = "",
        publish_timeout_s: float = 15.0,
        services: AgentServices | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        super().__init__(bus)
        self.tracing = tracing or Tracing()  # off unless the host configured telemetry
        self.device = device
        self.serial = device.serial
        self.settings = settings
        self.perception = perception
        self.policy_for = policy_for
        self.host = host
        self.publish_timeout_s = publish_timeout_s
        self.inbox = (topics.device_control(self.serial),)
        # Host services on the bus (the host registered the phone with them), or a
        # private loopback set serving this phone (see the module docstring).
        self.services = services or AgentServices.loopback(bus, perception,
                                                           devices=[(device, settings)])
        self._scope: anyio.CancelScope | None = None
        self._cancel_reason = ""
        self._episode_id = ""
        self._approvals: list[Approve] = []
        self._answers: list[Answer] = []
        self._steers: list[str] = []
        self._control_event = anyio.Event()
        self.outcomes: list[EpisodeOutcome] = []
        self.busy = False
        # In-process listeners, called with every message before it is published and with
        # every reply received (the benchmark reads the simulator's state right after each
        # ActionDone this way).
        self.observers: list[Callable[[Msg], None]] = []
        self._one_at_a_time = anyio.Lock()

    # ---- the bus side -----------------------------------------------------------------

    def _observe(self, msg: Msg) -> None:
        for observe in self.observers:
            try:
                observe(msg)
            except Exception as exc:  # an observer's bug must not stop the episode
                log.warning("observer_failed", error=str(exc))

    async def emit(self, msg: Msg) -> None:
        """Publish one event; a bus problem is logged, never fatal to the episode."""
        self._observe(msg)
        try:
            with anyio.fail_after(self.publish_timeout_s):
                await self.bus.publish(topics.device_event(self.serial, msg), msg)
        except Exception as exc:
            log.warning("event_publish_failed", kind=type(msg).__name__,
                        error=f"{type(exc).__name__}: {exc}")

    async def call(self, req: Msg, expect: tuple[type[Msg], ...], timeout_s: float, *,
                   resend_after_s: float | None = None) -> Msg:
        """One request to a host service (a span of its own); the reply (observed), or
        ``RequestError``."""
        with self.tracing.request(kind_of(type(req)), {"mobagent.step": req.step}):
            req = msgspec.structs.replace(req, **span_ids())
            reply = await self.services.requests.call(req, timeout_s=timeout_s, expect=expect,
                                                      resend_after_s=resend_after_s)
        self._observe(reply)
        return reply

    async def request_frame(self, *, episode_id: str = "", step: int = 0,
                            correlation_id: str = "", purpose: str = "step",
                            view: tuple[int, int] | None = None, app: bool = False,
                            ocr: bool = False) -> Frame:
        req = FrameRequest(request_id=new_request_id(), purpose=purpose,  # type: ignore[arg-type]
                           device=self.serial, episode_id=episode_id, step=step,
                           correlation_id=correlation_id, view_side=view[0] if view else 0,
                           view_quality=view[1] if view else 85, app=app, ocr=ocr)
        got = await self.call(req, (Frame,),
                              self.services.capture.serve_timeout_s + REQUEST_MARGIN_S)
        assert isinstance(got, Frame)
        return got

    async def status(self, state: str, detail: str = "") -> None:
        msg = DeviceStatus(device=self.serial, episode_id=self._episode_id,
                           state=state, host=self.host, detail=detail[:500])  # type: ignore[arg-type]
        try:
            with anyio.fail_after(self.publish_timeout_s):
                await self.bus.publish(topics.device_status(self.serial), msg, retain=True)
        except Exception as exc:
            log.warning("status_publish_failed", error=str(exc))

    async def ask_question(self, msg: Question) -> None:
        """The ``Ask``: a ``Question`` on the device's control topic (best effort)."""
        try:
            with anyio.fail_after(self.publish_timeout_s):
                await self.bus.publish(topics.device_control(self.serial), msg)
        except Exception as exc:
            log.warning("question_publish_failed", error=str(exc))

    async def handle(self, topic: str, msg: Msg) -> None:
        if isinstance(msg, Question):
            return  # our own question, echoed by the broker
        if msg.episode_id and self._episode_id and msg.episode_id != self._episode_id:
            return  # meant for another episode
        if isinstance(msg, Cancel):
            if self._scope is not None:
                self._cancel_reason = msg.reason or "cancelled"
                self._scope.cancel()
        elif isinstance(msg, Approve):
            self._approvals.append(msg)
        elif isinstance(msg, Answer):
            self._answers.append(msg)
        elif isinstance(msg, Steer):
            self._steers.append(msg.text)
        self._control_event.set()

    @asynccontextmanager
    async def _services_running(self) -> AsyncIterator[None]:
        if self.services.is_loopback:  # re-entrant: shared loopback services run once
            async with self.services.running_locally():
                yield
        else:
            yield

    async def main(self) -> None:
        # Every log line of this agent (and of the tasks it starts) names the phone.
        structlog.contextvars.bind_contextvars(device=self.serial)
        await self.status("idle")
        async with self._services_running():
            await self.stream_frames()
            await anyio.sleep_forever()  # the control inbox is served by the actor base

    async def stream_frames(self) -> None:
        """Frames between episodes every ``stream_interval_s`` (for ``watch`` and the
        dashboard); returns at once when that is 0."""
        while self.settings.stream_interval_s > 0:
            await anyio.sleep(self.settings.stream_interval_s)
            if self.busy:
                continue
            try:
                await self.request_frame(purpose="stream")  # capture publishes the Frame
            except Exception as exc:
                log.debug("stream_capture_failed", error=str(exc))

    async def _wait_control(self, pick: Callable[[], Msg | None], timeout_s: float) -> Msg | None:
        with anyio.move_on_after(timeout_s):
            while True:
                got = pick()
                if got is not None:
                    return got
                self._control_event = anyio.Event()
                await self._control_event.wait()
        return None

    # ---- one episode ------------------------------------------------------------------

    async def run_episode(self, instr: Instruction, *, announce: bool = True) -> EpisodeOutcome:
        """Run one episode to its end; episodes on one device never overlap.

        ``announce=False`` under the host's fleet, which publishes the episode's start, its
        one outcome and the phone's busy/idle status itself.
        """
        async with self._one_at_a_time, self._services_running():
            episode_id = instr.episode_id or f"ep-{new_request_id()[:12]}"
            # Every log line inside the episode names the phone and the episode (bound once).
            with structlog.contextvars.bound_contextvars(device=self.serial, episode=episode_id), \
                    self.tracing.episode(self.serial, episode_id, instr.id, instr.task) as span:
                outcome = await self._episode(instr, episode_id, announce)
                set_outcome(span, outcome.status, outcome.reason, outcome.steps)
                return outcome

    async def _episode(self, instr: Instruction, episode_id: str,
                       announce: bool) -> EpisodeOutcome:
        self._episode_id = episode_id
        self._cancel_reason = ""
        self._approvals.clear()
        self._answers.clear()
        self._steers.clear()
        self.busy = True
        ids = Ids(self.serial, episode_id, instr.id)
        budget = instr.max_steps or self.settings.max_steps
        run = _Episode(self, instr, episode_id, budget, ids)
        if announce:
            await self.status("busy", f"episode {episode_id}")
            bound = getattr(run.policy, "max_prompt_tokens", 0)
            await self.emit(ids.stamp(EpisodeStarted(
                instruction_id=instr.id, text=instr.text, task=instr.task,
                settings=episode_settings(self.settings,
                                          bound if isinstance(bound, int) else 0)), 0))
        status: EpisodeStatus = "failed"
        reason = ""
        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                await run.loop()
            except _Finish as fin:
                status, reason = fin.status, fin.reason
            except (DeviceError, LLMError, TimeoutError, ActionFailed, RequestError) as exc:
                status, reason = "failed", f"{type(exc).__name__}: {exc}"
                await self.emit(ids.stamp(Error(
                    topic=topics.device_event(self.serial, "error"),
                    reason="episode failed", detail=reason[:2000]), run.step))
        self._scope = None
        if scope.cancelled_caught or self._cancel_reason:
            status, reason = "cancelled", self._cancel_reason or "cancelled"
        if announce:
            with anyio.CancelScope(shield=True):
                await self.emit(ids.stamp(EpisodeFinished(
                    instruction_id=instr.id, status=status, reason=reason[:2000],
                    steps=run.step, cost_usd=run.cost_usd), run.step))
                await self.status("idle", f"last episode {episode_id}: {status}")
        self.busy = False
        outcome = EpisodeOutcome(episode_id, instr.id, status, reason, run.step,
                                 tuple(run.executed), run.cost_usd)
        self.outcomes.append(outcome)
        log.info("episode_finished", status=status,
                 steps=run.step, reason=reason[:200])
        return outcome


class _Episode:
    """The state of one running episode (history, feedback, counters) and its loop."""

    def __init__(self, agent: DeviceAgent, instr: Instruction, episode_id: str, budget: int,
                 ids: Ids) -> None:
        self.a = agent
        self.s = agent.settings
        self.instr = instr
        self.episode_id = episode_id
        self.budget = budget
        self.ids = ids
        self.policy: Policy = agent.policy_for(instr)
        self.family = str(getattr(getattr(self.policy, "family", None), "name", ""))
        # The LLM's image size, when the policy says: capture encodes that view once.
        view = getattr(self.policy, "image_view", None)
        self.view: tuple[int, int] | None = view if isinstance(view, tuple) else None
        # The loop guard is the planner's: which operation it chose on which frame.
        self.guard = LoopGuard(self.s.loop_guard)
        self.history: list[StepRecord] = []
        self.feedback: list[str] = []
        # The memory (Mobile-Agent-v2): the running progress and the notes kept, in every
        # prompt; this step's Observation and Thought go into its history record.
        self.progress = ""
        self.notes: list[str] = []
        self.observation = ""
        self.thought = ""
        self.executed: list[Operation] = []
        self.step = 0
        self.not_complete = 0
        self.unusable = 0  # unusable planner replies in a row, re-asks included
        self.cost_usd = 0.0  # what this episode's LLM calls cost so far
        # agent.max_cost_usd, checked by the LLM client before each call too (at the call's
        # worst cost), so that one call cannot overshoot it.
        self.cap = CostCap(self.s.max_cost_usd) if self.s.max_cost_usd > 0 else None
        self.first_capture_s = 0.0
        svc = agent.services
        self.t_ground = svc.ground_timeout_s + REQUEST_MARGIN_S
        self.t_act = svc.actuator.serve_timeout_s + REQUEST_MARGIN_S
        self.t_reflect = svc.reflector.serve_timeout_s + REQUEST_MARGIN_S

    async def send(self, msg: Msg) -> None:
        await self.a.emit(self.ids.stamp(msg, self.step))

    def request(self, msg: M) -> M:
        """``msg`` with this episode's ids and a fresh request id."""
        return msgspec.structs.replace(self.ids.stamp(msg, self.step),
                                       request_id=new_request_id())

    async def usage(self, replies: tuple[LLMReply, ...], purpose: str, *,
                    check_cap: bool = True) -> float:
        """Publish one ``LlmUsage`` per call; past ``agent.max_cost_usd`` the episode ends
        (``check_cap=False``: the caller checks, with ``check_cost_cap``, once it has
        published what the calls answered)."""
        total = 0.0
        if self.cap is not None:
            self.cap.settle(replies)
        for r in replies:
            total += r.latency_s
            cost = r.cost_usd or 0.0
            self.cost_usd += cost
            with self.a.tracing.llm_call(
                    model=r.model, purpose=purpose, family=self.family, cost_usd=cost,
                    prompt_tokens=r.prompt_tokens, completion_tokens=r.completion_tokens,
                    cached_tokens=r.cached_tokens, latency_s=r.latency_s, attempts=r.attempts):
                await self.send(LlmUsage(model=r.model, prompt_tokens=r.prompt_tokens,
                                         completion_tokens=r.completion_tokens,
                                         latency_s=r.latency_s, purpose=purpose,
                                         cost_usd=cost, cached_tokens=r.cached_tokens))
        if check_cap:
            self.check_cost_cap()
        return total

    def check_cost_cap(self) -> None:
        cap = self.s.max_cost_usd
        if cap > 0 and self.cost_usd >= cap:
            raise _Finish("failed", f"cost cap of ${cap:g} reached: the LLM calls cost "
                                    f"${self.cost_usd:.4f}")

    async def reflect(self, verdict: Verdict, reason: str, op: Operation | None, before: Frame,
                      after: Frame | None = None, *, source: Literal["", "llm"] = "") -> None:
        """A verdict the planner reached itself, published by the reflector service (the one
        producer of ``Reflection``) as a ``ReflectRequest`` with ``given``."""
        await self.a.call(self.request(ReflectRequest(
            request_id="-", before_frame_id=before.frame_id,
            after_frame_id=(after or before).frame_id, operation=op,
            given=GivenVerdict(verdict=verdict, reason=reason[:2000], source=source))),
            (Reflection,), self.t_reflect)

    async def frame(self, step: int, *, app: bool = False) -> Frame:
        """A step frame from the capture service, with its OCR lines when hints are on."""
        return await self.a.request_frame(episode_id=self.episode_id, step=step,
                                          correlation_id=self.ids.correlation_id, view=self.view,
                                          app=app, ocr=self.s.ocr_hints)

    def screenshot(self, frame: Frame) -> bytes:
        """The frame as the LLM gets it: capture's LLM-sized view on this host, else the
        bus encoding (the LLM client then scales it itself)."""
        return self.a.services.frames.view(frame.frame_id, frame.device) or frame.data

    def context(self, before: Frame, hints: tuple[str, ...] = ()) -> StepContext:
        feedback = [*self.feedback, *(f"The user says: {t}" for t in self.a._steers)]
        if "black" in before.flags:
            feedback.append("The screenshot is all black: the app shows a secure window that "
                            "cannot be captured. Go Back, or Ask the user.")
        self.a._steers.clear()
        return StepContext(
            instruction=self.instr.text, screenshot=self.screenshot(before),
            history=tuple(self.history),
            feedback=tuple(feedback), ocr_hints=hints, step=self.step, task=self.instr.task,
            # The re-asks this step may still make before max_unusable_replies is reached.
            max_reasks=max(0, self.s.max_unusable_replies - self.unusable - 1),
            screen=(int(before.width), int(before.height)),
            progress=self.progress if self.s.planning != "off" else "",
            notes=tuple(self.notes), reply_progress=self.s.planning == "inline",
            reply_memory=self.s.notes, history_thoughts=self.s.history_thoughts,
            check_screens=self.s.check_screens,
        )

    def record(self, op: Operation, result: str, before: Frame,
               verdict: str | None = None, reason: str | None = None) -> None:
        self.history.append(StepRecord(action=op, result=result, verdict=verdict, reason=reason,
                                       screenshot=self.screenshot(before),
                                       observation=self.observation, thought=self.thought))

    async def keep_note(self, text: str, origin: str) -> None:
        """One note more (the oldest goes past agent.max_notes), published as an event."""
        text = " ".join(text.split())[:1000]
        if not text or text in self.notes:
            return
        self.notes = [*self.notes, text][-self.s.max_notes:]
        await self.send(NoteKept(text=text, origin=origin))  # type: ignore[arg-type]

    async def set_progress(self, text: str, origin: str) -> None:
        text = " ".join(text.split())[:2000]
        if text and text != self.progress:
            self.progress = text
            await self.send(Progress(text=text, origin=origin))  # type: ignore[arg-type]

    async def settle(self, op: Operation, ok: bool, detail: str, t0: float,
                     before: Frame) -> None:
        """An operation settled without the phone (not found, not approved, an Ask answered),
        published by the actuator service (the one producer of ``ActionDone``) as an
        ``ActRequest`` with ``given``: nothing is performed."""
        await self.a.call(self.request(ActRequest(
            request_id="-", operation=op, frame_id=before.frame_id, width=before.width,
            height=before.height, given=GivenOutcome(ok=ok, detail=detail[:2000],
                                                     duration_s=time.perf_counter() - t0))),
            (ActionDone,), self.t_act)

    async def loop(self) -> None:
        s = self.s
        if not self.a.services.serves(self.a.serial):
            raise RequestError(f"{self.a.serial} is not served by this host's agent services "
                               "(the host registers a phone when it adds it)")
        self.step = 1
        t = time.perf_counter()
        # The foreground app once at the start (in the frame reply); each Reflection
        # reports it afterwards.
        before = await self.frame(1, app=True)
        self.first_capture_s = time.perf_counter() - t
        app_before = before.app
        while True:
            if self.step > self.budget:
                self.step = self.budget
                await self.reflect("incomplete", f"the step budget of {self.budget} is spent",
                                   None, before)
                raise _Finish("failed", f"step budget of {self.budget} steps exhausted")
            try:
                with spending_cap(self.cap), anyio.fail_after(s.step_timeout_s), \
                        self.a.tracing.span("step", {"mobagent.step": self.step}):
                    before, app_before = await self.one_step(before, app_before)
            except LLMCostCapReached as exc:
                # The calls this step made before the refused one (re-asks, the planner's
                # before the chooser's) are published and counted first.
                for r in tuple(self.cap.answered if self.cap else ()):
                    await self.usage((r,), _PURPOSE_OF_ROLE[r.role], check_cap=False)
                raise _Finish("failed", str(exc)) from None
            self.step += 1

    async def one_step(self, before: Frame, app_before: str) -> tuple[Frame, str]:
        a, s = self.a, self.s
        t_step = time.perf_counter()
        # Each frame is counted once: the first in step 1, then each step's after-frame.
        first = self.step == 1 and not self.history
        first_capture = self.first_capture_s if first else 0.0
        phases: dict[str, float] = {"capture": first_capture}

        # The frame's OCR lines came with it from the capture service (``ocr_hints``).
        hints = tuple(ln.text for ln in before.lines) if s.ocr_hints else ()
        ctx = self.context(before, hints)

        t = time.perf_counter()
        try:
            decision = await self.policy.decide(ctx)
        except LLMBadResponse as exc:
            # A 200 with no usable completion: this step is retried like an unusable reply
            # (and counted as one); transient HTTP failures were retried by the client.
            decision = Decision("", "", "", None, parse_error=str(exc))
        phases["llm"] = time.perf_counter() - t
        await self.usage(decision.replies, "plan", check_cap=False)
        op = decision.operation
        await self.send(Plan(observation=decision.observation[:4000],
                             thought=decision.thought[:4000], action=decision.action[:1000],
                             operation=op, parse_error=decision.parse_error[:1000]))
        # The reply that reached the cap is on record (its Plan), and never executed.
        self.check_cost_cap()
        self.feedback = []
        self.observation, self.thought = decision.observation, decision.thought
        ctx = replace(ctx, thought=decision.thought)  # the chooser and the judge get it
        if op is not None:
            if s.notes and decision.memory:
                await self.keep_note(decision.memory, "field")
            if s.planning == "inline" and decision.progress:
                await self.set_progress(decision.progress, "inline")

        async def timing() -> None:
            total = time.perf_counter() - t_step + first_capture
            await self.send(StepTiming(phases={k: round(v, 4) for k, v in phases.items()},
                                       total_s=round(total, 4)))

        if op is None:
            self.unusable += max(1, len(decision.replies))
            if self.unusable >= s.max_unusable_replies:
                await timing()
                raise _Finish("failed", f"{self.unusable} unusable replies in a row "
                                        f"(agent.max_unusable_replies={s.max_unusable_replies}); "
                                        f"last parse error: {decision.parse_error}; last reply: "
                                        f"{decision.action[-300:]!r}")
            self.feedback = [f"Your last reply could not be used ({decision.parse_error}); "
                             "nothing was done. Answer in the required format."]
            await self.reflect("unchanged", f"unusable reply, nothing executed: "
                                            f"{decision.parse_error}", None, before)
            await timing()
            return before, app_before
        self.unusable = 0

        if isinstance(op, Stop):
            await self.stop(ctx, before, phases)
            await timing()
            return before, app_before

        count = self.guard.note_choice(before, op)
        loop = self.guard.verdict(count, op)
        if loop is not None:
            await self.reflect("loop", loop, op, before)
            if count >= s.loop_guard + 2:
                await timing()
                raise _Finish("failed", f"loop guard: {format_operation(op)} chosen {count} "
                                        "times on the same screen")
            self.feedback = [reflection_feedback("loop", loop)]
            self.record(op, "not done: repeated without effect", before, "loop", loop)
            await timing()
            return before, app_before

        if isinstance(op, Ask):
            await self.ask(op, before)
            # The answer may have taken minutes: plan the next step on the screen as it is now.
            after = await self.fresh_frame(phases)
            await timing()
            return after, app_before

        if isinstance(op, Note):  # kept, nothing touches the phone (no ActionDone)
            if s.notes:
                await self.keep_note(op.text, "operation")
                self.record(op, "kept as a note", before)
            else:
                self.record(op, "not kept: notes are off (agent.notes)", before)
                self.feedback = ["Notes are off: Note does nothing here. Choose another action."]
            await timing()
            return before, app_before

        point: tuple[int, int] | None = None
        if isinstance(op, GROUNDED_OPS):
            t = time.perf_counter()
            point = await self.ground(op, ctx, before, phases)
            phases["perception"] = phases.get("perception", 0.0) + time.perf_counter() - t
            if point is None:
                await timing()
                return before, app_before

        if s.approval and (pattern := is_sensitive(op, s.sensitive_patterns)) is not None:
            t = time.perf_counter()
            approved, note = await self.approval(op, pattern)
            phases["approval"] = time.perf_counter() - t
            if not approved:
                await self.settle(op, False, f"skipped: not approved ({note})",
                                  time.perf_counter(), before)
                self.record(op, f"skipped: not approved{f' ({note})' if note else ''}", before)
                self.feedback = [f"The user did not approve {format_operation(op)}"
                                 + (f": {note}" if note else "") + ". Do something else or Stop."]
                await timing()
                return before, app_before

        t = time.perf_counter()
        act = self.request(ActRequest(
            request_id="-", operation=op, frame_id=before.frame_id,
            x=point[0] if point else None, y=point[1] if point else None,
            width=before.width, height=before.height))
        res = await a.call(act, (ActionDone,), self.t_act)
        assert isinstance(res, ActionDone)
        phases["act"] = time.perf_counter() - t
        if not res.ok:
            self.record(op, f"failed: {res.detail}", before)
            self.feedback = [f"{format_operation(op)} failed: {res.detail}"]
            # A failed action may still have touched the screen (the launcher fallback pressed
            # HOME and swiped): the next step plans and grounds on a fresh frame.
            after = await self.fresh_frame(phases)
            await timing()
            return after, app_before
        self.executed.append(op)

        if s.settle_s:
            await anyio.sleep(s.settle_s)
        t = time.perf_counter()
        after = await self.frame(self.step + 1)
        phases["capture"] += time.perf_counter() - t
        t = time.perf_counter()
        ref = await a.call(self.request(ReflectRequest(
            request_id="-", before_frame_id=before.frame_id, after_frame_id=after.frame_id,
            operation=op, app_before=app_before)), (Reflection,), self.t_reflect)
        assert isinstance(ref, Reflection)
        verdict: str = ref.verdict
        reason = ref.reason
        judged = None
        if s.reflection == "llm" or (s.reflection == "both" and ref.unsure):
            judged = await self.judge(ctx, op, before, after, res.detail)
            if judged is not None:
                verdict, reason = judged
        phases["reflection"] = time.perf_counter() - t
        if judged is not None and verdict == "wrong_page" and s.back_on_wrong_page:
            # The judge says the action led astray: undo it (Mobile-Agent-v2), then re-plan
            # on the screen it came back to.
            self.record(op, f"{res.detail}; led to a wrong page, undone with Back", before,
                        verdict, reason)
            self.feedback = [judge_feedback(op, verdict, reason, undone=True)]
            after = await self.undo(after, phases)
            await self.track_progress(ctx)
            await timing()
            return after, app_before
        self.record(op, res.detail, before, verdict, reason)
        if verdict != "ok":
            self.feedback = [judge_feedback(op, verdict, reason) if judged is not None
                             else reflection_feedback(verdict, reason)]
        await self.track_progress(ctx)
        await timing()
        return after, ref.app or app_before

    async def judge(self, ctx: StepContext, op: Operation, before: Frame, after: Frame,
                    result: str) -> tuple[str, str] | None:
        """The LLM judge on the before and after screens (agent.reflection), published as a
        ``Reflection`` with source "llm"; None when the policy has no judge or no verdict."""
        if not isinstance(self.policy, ActionJudge):
            return None
        j = await self.policy.judge_action(ctx, op, self.screenshot(before),
                                           self.screenshot(after), result)
        await self.usage(j.replies, "judge")
        if j.verdict not in ("ok", "wrong_page", "unchanged"):
            log.warning("judge_unusable", reason=j.reason[:200])
            return None
        await self.reflect(j.verdict, j.reason, op, before, after, source="llm")  # type: ignore[arg-type]
        return j.verdict, j.reason

    async def undo(self, after: Frame, phases: dict[str, float]) -> Frame:
        """Back, as its own action, and the frame it leads to."""
        t = time.perf_counter()
        res = await self.a.call(self.request(ActRequest(
            request_id="-", operation=Back(), frame_id=after.frame_id,
            width=after.width, height=after.height)), (ActionDone,), self.t_act)
        assert isinstance(res, ActionDone)
        phases["act"] = phases.get("act", 0.0) + time.perf_counter() - t
        if res.ok:
            self.executed.append(Back())
        return await self.fresh_frame(phases)

    async def fresh_frame(self, phases: dict[str, float]) -> Frame:
        """The next step's frame, taken now (after the settle wait)."""
        if self.s.settle_s:
            await anyio.sleep(self.s.settle_s)
        t = time.perf_counter()
        frame = await self.frame(self.step + 1)
        phases["capture"] = phases.get("capture", 0.0) + time.perf_counter() - t
        return frame

    async def track_progress(self, ctx: StepContext) -> None:
        """agent.planning = "call": the planning call after the step just recorded."""
        if self.s.planning != "call" or not isinstance(self.policy, ProgressPlanner):
            return
        ctx = replace(ctx, progress=self.progress, notes=tuple(self.notes))
        upd = await self.policy.update_progress(ctx, self.history[-1])
        await self.usage(upd.replies, "progress")
        if upd.text:
            await self.set_progress(upd.text, "call")

    async def stop(self, ctx: StepContext, before: Frame, phases: dict[str, float]) -> None:
        if not self.s.completion_check:
            raise _Finish("succeeded", "the planner chose Stop")
        t = time.perf_counter()
        comp = await self.policy.check_completion(ctx)
        phases["reflection"] = time.perf_counter() - t
        await self.usage(comp.replies, "reflect")
        if comp.complete:
            await self.reflect("complete", comp.reason, Stop(), before)
            raise _Finish("succeeded", comp.reason or "complete")
        self.not_complete += 1
        await self.reflect("incomplete", comp.reason, Stop(), before)
        self.record(Stop(), "not complete", before, "incomplete", comp.reason)
        self.feedback = [incomplete_feedback(comp.reason or "no reason given")]
        if self.not_complete > self.s.max_not_complete:
            raise _Finish("failed", f"Stop was judged not complete {self.not_complete} times: "
                                    f"{comp.reason}")

    async def ground(self, op: Operation, ctx: StepContext, before: Frame,
                     phases: dict[str, float]) -> tuple[int, int] | None:
        a = self.a
        svc = a.services
        req = self.request(GroundRequest(  # a worker elsewhere gets the frame with it
            frame_id=before.frame_id, operation=op, snap_radius_px=self.s.snap_radius_px,
            frame=before if svc.remote_perception else None))
        ans = await a.call(req, (Grounded, Ambiguous, NotFound), self.t_ground,
                           resend_after_s=svc.ground_resend_s)
        if isinstance(ans, Grounded):
            return ans.x, ans.y
        if isinstance(ans, Ambiguous):
            target = op.description if isinstance(op, ClickIcon) else getattr(op, "text", "")
            labels = [c.index for c in ans.candidates]
            t = time.perf_counter()
            choice = await self.policy.choose(ctx, target, ans.marked_image or before.data,
                                              labels, [c.text for c in ans.candidates],
                                              [c.box.center for c in ans.candidates],
                                              reason=ans.reason,
                                              crops=[c.crop for c in ans.candidates])
            phases["llm"] = phases.get("llm", 0.0) + time.perf_counter() - t
            await self.usage(choice.replies, "choose")
            pt = candidate_point(ans, choice.index) if choice.index is not None else None
            box = next((c.box for c in ans.candidates if c.index == choice.index), None)
            # The planner's own kind: Grounded / NotFound stay perception's.
            await self.send(Chosen(frame_id=before.frame_id, query=target,
                                   index=choice.index if pt is not None else None,
                                   x=pt[0] if pt else None, y=pt[1] if pt else None,
                                   box=box if pt is not None else None))
            if pt is not None:
                return pt
            closest = [c.text for c in ans.candidates if c.text]
        else:
            assert isinstance(ans, NotFound)
            closest = list(ans.closest)
        self.feedback = [not_found_feedback(op, closest)]
        await self.settle(op, False, "target not found on the screen", time.perf_counter(), before)
        self.record(op, "not found", before)
        return None

    async def approval(self, op: Operation, pattern: str) -> tuple[bool, str]:
        a = self.a
        await a.status("busy", f"awaiting approval (step {self.step}): {format_operation(op)}")

        def pick() -> Msg | None:
            for msg in list(a._approvals):
                if msg.step in (0, self.step):
                    a._approvals.remove(msg)
                    return msg
            return None

        got = await a._wait_control(pick, self.s.approval_timeout_s)
        await a.status("busy", f"episode {self.episode_id}")
        if got is None:
            return False, f"no approval within {self.s.approval_timeout_s:g}s"
        assert isinstance(got, Approve)
        return got.approved, got.note

    async def ask(self, op: Ask, before: Frame) -> None:
        a = self.a
        t = time.perf_counter()
        await a.ask_question(self.ids.stamp(Question(text=op.question), self.step))
        await a.status("busy", f"question (step {self.step}): {op.question}")

        def pick() -> Msg | None:
            return a._answers.pop(0) if a._answers else None

        got = await a._wait_control(pick, self.s.ask_timeout_s)
        await a.status("busy", f"episode {self.episode_id}")
        if got is None:
            result = f"no answer within {self.s.ask_timeout_s:g}s"
        else:
            assert isinstance(got, Answer)
            result = f"answered: {got.text}"
        await self.settle(op, got is not None, result, t, before)
        self.record(op, result, before)
        self.executed.append(op)
