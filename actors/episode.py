"""The planner actor of one phone, ``DeviceAgent``, and the episode it runs step by step.

The agent serves the phone's control topic (Cancel, Approve, Answer, Steer) and runs one
episode at a time; ``_Episode`` holds an episode's state, and each step is a short sequence
of stages (plan, then ground, approve, act and reflect, or the path of Stop, Ask and Note).
The planner reaches capture, perception, actuation and reflection only through their
requests on the bus (``actors/rpc.py``), and publishes only its own event kinds. The
messages of one step are drawn in docs/architecture.md ("One step, as messages").

Without host services on its bus (``services=None``: unit tests, one-off tools) an agent
runs a private set in-process through a loopback router (``AgentServices.loopback``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from typing import Literal, TypeVar

import anyio
import msgspec
import structlog

from actors.actuator import is_sensitive
from actors.config import AgentSettings, episode_settings
from actors.control import ControlInbox
from actors.loop_guard import LoopGuard
from actors.perception import PerceptionEngine, candidate_point
from actors.planner import ActionJudge, Decision, Policy, ProgressPlanner, StepContext
from actors.rpc import RequestError, new_request_id
from actors.services import AgentServices
from actors.telemetry import Tracing, set_outcome, span_ids
from devices.adb import Device
from models.llm import (
    CostCap,
    LLMBadResponse,
    LLMCostCapReached,
    LLMReply,
    spending_cap,
)
from models.llm.messages import ROLES
from models.llm.prompts.planner import (
    dropped_feedback,
    incomplete_feedback,
    judge_feedback,
    not_found_feedback,
    reflection_feedback,
)
from models.llm.prompts.shared import PastStep
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
    LlmCall,
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
_PURPOSE_OF_ROLE = {"planner": "plan", "chooser": "choose", "reflector": "reflect",
                    "grounder": "ground"}


def grounder_reply(call: LlmCall) -> LLMReply:
    """A grounder call perception made (``LlmCall``) as the episode accounts it."""
    role = call.role if call.role in ROLES else "grounder"
    return LLMReply(text="", role=role, model=call.model,
                    prompt_tokens=call.prompt_tokens, completion_tokens=call.completion_tokens,
                    cost_usd=call.cost_usd, cached_tokens=call.cached_tokens,
                    latency_s=call.latency_s, queued_s=0.0, attempts=call.attempts)


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
        self.control = ControlInbox()  # approvals, answers and steers for the episode
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
        elif isinstance(msg, Approve | Answer):
            self.control.add(msg)
        elif isinstance(msg, Steer):
            self.control.add(msg.text)

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
        self.control.clear()
        self.busy = True
        # Between episodes the phone was changed behind this device's back (the fleet's wake
        # and unlock, a task's set-up): a streamed phone's first frame must come from after
        # now, not be the last one it showed (devices/streamed.py).
        expect_change = getattr(self.device, "expect_change", None)
        if expect_change is not None:
            expect_change()
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
            except (MobagentError, TimeoutError) as exc:  # what the phone, model or bus raised
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


def frame_notes(flags: list[str]) -> list[str]:
    """What the model is told about a frame capture flagged (actors/capture.py)."""
    if "wake_failed" in flags:
        return ["The phone's screen is off and did not wake up: the screenshot is black. "
                "Ask the user to wake the phone."]
    notes = []
    if "display_off" in flags:
        notes.append("The phone's screen was off (the phone was asleep): it was woken before "
                     "this screenshot. If a lock screen shows, unlock it or Ask the user.")
    if "black" in flags:
        notes.append("The app area of the screenshot is black while the phone is on: the app "
                     "shows a secure window (FLAG_SECURE) that screenshots cannot capture. "
                     "Go Back, or Ask the user.")
    return notes


class _PhaseClock:
    """Where one step's time went (capture, llm, perception, approval, act, reflection),
    published once as its ``StepTiming``."""

    def __init__(self, first_capture_s: float) -> None:
        self.started = time.perf_counter()
        # Each frame is counted once: the first in step 1, then each step's after-frame.
        self.first_capture_s = first_capture_s
        self.phases: dict[str, float] = {"capture": first_capture_s}

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Add the time the block takes to ``phase``."""
        t = time.perf_counter()
        try:
            yield
        finally:
            self.phases[phase] = self.phases.get(phase, 0.0) + time.perf_counter() - t

    def timing(self) -> StepTiming:
        total = time.perf_counter() - self.started + self.first_capture_s
        return StepTiming(phases={k: round(v, 4) for k, v in self.phases.items()},
                          total_s=round(total, 4))


class _Episode:
    """The state of one running episode (history, feedback, counters) and its steps.

    A step is a short sequence of stages (``_stages``): plan, then the operation's own path
    (stop, loop guard, ask, note, or ground, approve, act and reflect). Each stage returns
    its outcome; a stage that ends the step early returns the frame the next step plans on.
    """

    def __init__(self, agent: DeviceAgent, instr: Instruction, episode_id: str, budget: int,
                 ids: Ids) -> None:
        self.agent = agent
        self.settings = agent.settings
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
        self.guard = LoopGuard(self.settings.loop_guard)
        self.history: list[PastStep] = []
        self.feedback: list[str] = []
        # The next prompt's line on the actions the last reply carried after its first.
        self.dropped_note = ""
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
        max_cost = self.settings.max_cost_usd
        self.cap = CostCap(max_cost) if max_cost > 0 else None
        self.first_capture_s = 0.0
        svc = agent.services
        self.t_ground = svc.ground_timeout_s + REQUEST_MARGIN_S
        self.t_act = svc.actuator.serve_timeout_s + REQUEST_MARGIN_S
        self.t_reflect = svc.reflector.serve_timeout_s + REQUEST_MARGIN_S

    # ---- the episode ------------------------------------------------------------------

    async def loop(self) -> None:
        agent = self.agent
        if not agent.services.serves(agent.serial):
            raise RequestError(f"{agent.serial} is not served by this host's agent services "
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
                with spending_cap(self.cap), anyio.fail_after(self.settings.step_timeout_s), \
                        agent.tracing.span("step", {"mobagent.step": self.step}):
                    before, app_before = await self.one_step(before, app_before)
            except LLMCostCapReached as exc:
                # The calls this step made before the refused one (re-asks, the planner's
                # before the chooser's) are published and counted first.
                for r in tuple(self.cap.answered if self.cap else ()):
                    await self.usage((r,), _PURPOSE_OF_ROLE[r.role], check_cap=False)
                raise _Finish("failed", str(exc)) from None
            self.step += 1

    async def one_step(self, before: Frame, app_before: str) -> tuple[Frame, str]:
        """One step, its ``StepTiming`` published however it ends; the frame (and the
        foreground app) the next step plans on."""
        first = self.step == 1 and not self.history
        clock = _PhaseClock(self.first_capture_s if first else 0.0)
        try:
            return await self._stages(before, app_before, clock)
        finally:
            with anyio.CancelScope(shield=True):  # bounded: emit has its own timeout
                await self.send(clock.timing())

    async def _stages(self, before: Frame, app_before: str,
                      clock: _PhaseClock) -> tuple[Frame, str]:
        ctx, op = await self.plan(before, clock)
        if op is None:  # unusable: nothing executed, the next step asks again
            return before, app_before
        if isinstance(op, Stop):
            await self.stop(ctx, before, clock)
            return before, app_before
        if await self.caught_in_loop(op, before):
            return before, app_before
        if isinstance(op, Ask):
            await self.ask(op, before)
            # The answer may have taken minutes: plan the next step on the screen as it is now.
            return await self.fresh_frame(clock), app_before
        if isinstance(op, Note):
            await self.note(op, before)
            return before, app_before
        point: tuple[int, int] | None = None
        if isinstance(op, GROUNDED_OPS):
            with clock.timed("perception"):
                point = await self.ground(op, ctx, before, clock)
            if point is None:
                return before, app_before
        if not await self.approved(op, before, clock):
            return before, app_before
        done = await self.act(op, point, before, clock)
        if not done.ok:
            # A failed action may still have touched the screen (the launcher fallback pressed
            # HOME and swiped): the next step plans and grounds on a fresh frame.
            return await self.fresh_frame(clock), app_before
        self.executed.append(op)
        return await self.reflect_on(ctx, op, done, before, app_before, clock)

    # ---- the stages -------------------------------------------------------------------

    async def plan(self, before: Frame,
                   clock: _PhaseClock) -> tuple[StepContext, Operation | None]:
        """The policy's decision, published as a ``Plan``; the step's context (with the
        Thought, for the chooser and the judge) and its operation, None when unusable."""
        # The frame's OCR lines came with it from the capture service (``ocr_hints``).
        hints = tuple(ln.text for ln in before.lines) if self.settings.ocr_hints else ()
        ctx = self.context(before, hints)
        with clock.timed("llm"):
            try:
                decision = await self.policy.decide(ctx)
            except LLMBadResponse as exc:
                # A 200 with no usable completion: this step is retried like an unusable
                # reply (and counted as one); transient HTTP failures were retried by the client.
                decision = Decision("", "", "", None, parse_error=str(exc))
        await self.usage(decision.replies, "plan", check_cap=False)
        op = decision.operation
        await self.send(Plan(observation=decision.observation[:4000],
                             thought=decision.thought[:4000], action=decision.action[:1000],
                             operation=op, parse_error=decision.parse_error[:1000],
                             dropped=tuple(d[:1000] for d in decision.dropped[:20])))
        # The reply that reached the cap is on record (its Plan), and never executed.
        self.check_cost_cap()
        self.feedback = []
        self.observation, self.thought = decision.observation, decision.thought
        if op is None:
            await self.refuse_unusable(decision, before)
            return ctx, None
        self.unusable = 0
        if decision.dropped:
            # One action a step: the first runs, the model hears which did not.
            log.info("actions_dropped", episode=self.episode_id, run=decision.action[:200],
                     dropped=[d[:200] for d in decision.dropped])
            self.dropped_note = dropped_feedback(decision.action, decision.dropped)
        if self.settings.notes and decision.memory:
            await self.keep_note(decision.memory, "field")
        if self.settings.planning == "inline" and decision.progress:
            await self.set_progress(decision.progress, "inline")
        return replace(ctx, thought=decision.thought), op

    async def refuse_unusable(self, decision: Decision, before: Frame) -> None:
        """An unusable reply: nothing is executed, and past agent.max_unusable_replies in a
        row the episode fails."""
        limit = self.settings.max_unusable_replies
        self.unusable += max(1, len(decision.replies))
        if self.unusable >= limit:
            raise _Finish("failed", f"{self.unusable} unusable replies in a row "
                                    f"(agent.max_unusable_replies={limit}); "
                                    f"last parse error: {decision.parse_error}; last reply: "
                                    f"{decision.action[-300:]!r}")
        self.feedback = [f"Your last reply could not be used ({decision.parse_error}); "
                         "nothing was done. Answer in the required format."]
        await self.reflect("unchanged", f"unusable reply, nothing executed: "
                                        f"{decision.parse_error}", None, before)

    async def caught_in_loop(self, op: Operation, before: Frame) -> bool:
        """True when the loop guard refuses ``op`` on this frame (the episode fails once it
        is chosen twice more after the warning)."""
        count = self.guard.note_choice(before, op)
        loop = self.guard.verdict(count, op)
        if loop is None:
            return False
        await self.reflect("loop", loop, op, before)
        if count >= self.settings.loop_guard + 2:
            raise _Finish("failed", f"loop guard: {format_operation(op)} chosen {count} "
                                    "times on the same screen")
        self.feedback = [reflection_feedback("loop", loop)]
        self.record(op, "not done: repeated without effect", before, "loop", loop)
        return True

    async def note(self, op: Note, before: Frame) -> None:
        """A Note is kept (agent.notes); nothing touches the phone (no ActionDone)."""
        if self.settings.notes:
            await self.keep_note(op.text, "operation")
            self.record(op, "kept as a note", before)
        else:
            self.record(op, "not kept: notes are off (agent.notes)", before)
            self.feedback = ["Notes are off: Note does nothing here. Choose another action."]

    async def ground(self, op: Operation, ctx: StepContext, before: Frame,
                     clock: _PhaseClock) -> tuple[int, int] | None:
        """The point to act on, from perception (and the chooser on an ``Ambiguous``); None
        when the target is not on the screen (the step then ends, recorded as not found)."""
        svc = self.agent.services
        # A worker elsewhere gets the frame with it, bytes and all (made here if capture
        # made none: nobody on the bus read them).
        carried = (await svc.frames.encoded(before.frame_id, before.device)
                   if svc.remote_perception else None)
        req = self.request(GroundRequest(
            frame_id=before.frame_id, operation=op, snap_radius_px=self.settings.snap_radius_px,
            thought=ctx.thought[:2000], frame=carried,
            max_cost_usd=self.cap.max_usd if self.cap else 0.0,
            cost_usd=max(self.cost_usd, self.cap.spent_usd) if self.cap else 0.0))
        ans = await self.agent.call(req, (Grounded, Ambiguous, NotFound), self.t_ground,
                                    resend_after_s=svc.ground_resend_s)
        assert isinstance(ans, Grounded | Ambiguous | NotFound)
        await self.grounder_usage(ans)
        if isinstance(ans, Grounded):
            return ans.x, ans.y
        if isinstance(ans, Ambiguous):
            point = await self.choose(op, ans, ctx, before, clock)
            if point is not None:
                return point
            closest = [c.text for c in ans.candidates if c.text]
        else:
            assert isinstance(ans, NotFound)
            closest = list(ans.closest)
        self.feedback = [not_found_feedback(op, closest)]
        await self.conclude_without_phone(op, False, "target not found on the screen",
                                          time.perf_counter(), before)
        self.record(op, "not found", before)
        return None

    async def choose(self, op: Operation, ans: Ambiguous, ctx: StepContext, before: Frame,
                     clock: _PhaseClock) -> tuple[int, int] | None:
        """The chooser's pick among ``ans``'s marked candidates, published as the planner's
        ``Chosen``; None when it picked none."""
        target = op.description if isinstance(op, ClickIcon) else getattr(op, "text", "")
        labels = [c.index for c in ans.candidates]
        with clock.timed("llm"):
            image = ans.marked_image or (await self.agent.services.frames.encoded(
                before.frame_id, before.device)).data
            choice = await self.policy.choose(ctx, target, image,
                                              labels, [c.text for c in ans.candidates],
                                              [c.box.center for c in ans.candidates],
                                              reason=ans.reason,
                                              crops=[c.crop for c in ans.candidates])
        await self.usage(choice.replies, "choose")
        pt = candidate_point(ans, choice.index) if choice.index is not None else None
        box = next((c.box for c in ans.candidates if c.index == choice.index), None)
        # The planner's own kind: Grounded / NotFound stay perception's.
        await self.send(Chosen(frame_id=before.frame_id, query=target,
                               index=choice.index if pt is not None else None,
                               x=pt[0] if pt else None, y=pt[1] if pt else None,
                               box=box if pt is not None else None))
        return pt

    async def approved(self, op: Operation, before: Frame, clock: _PhaseClock) -> bool:
        """False when ``op`` is sensitive (agent.approval) and the user did not approve it:
        the step then ends, recorded as skipped."""
        settings = self.settings
        if not settings.approval or (pattern := is_sensitive(op, settings.sensitive_patterns)) is None:
            return True
        with clock.timed("approval"):
            ok, note = await self.approval(op, pattern)
        if ok:
            return True
        await self.conclude_without_phone(op, False, f"skipped: not approved ({note})",
                                          time.perf_counter(), before)
        self.record(op, f"skipped: not approved{f' ({note})' if note else ''}", before)
        self.feedback = [f"The user did not approve {format_operation(op)}"
                         + (f": {note}" if note else "") + ". Do something else or Stop."]
        return False

    async def act(self, op: Operation, point: tuple[int, int] | None, before: Frame,
                  clock: _PhaseClock) -> ActionDone:
        """The actuator's ``ActionDone`` for ``op`` (at ``point``); a failure is recorded
        with its feedback."""
        with clock.timed("act"):
            done = await self.agent.call(self.request(ActRequest(
                request_id="-", operation=op, frame_id=before.frame_id,
                x=point[0] if point else None, y=point[1] if point else None,
                width=before.width, height=before.height)), (ActionDone,), self.t_act)
        assert isinstance(done, ActionDone)
        if not done.ok:
            self.record(op, f"failed: {done.detail}", before)
            self.feedback = [f"{format_operation(op)} failed: {done.detail}"]
        return done

    async def reflect_on(self, ctx: StepContext, op: Operation, done: ActionDone, before: Frame,
                         app_before: str, clock: _PhaseClock) -> tuple[Frame, str]:
        """The after-frame, the reflector's verdict (and the LLM judge's, agent.reflection),
        the step's history record and feedback; the frame and app the next step starts on."""
        settings = self.settings
        after = await self.fresh_frame(clock)
        with clock.timed("reflection"):
            ref = await self.agent.call(self.request(ReflectRequest(
                request_id="-", before_frame_id=before.frame_id, after_frame_id=after.frame_id,
                operation=op, app_before=app_before)), (Reflection,), self.t_reflect)
            assert isinstance(ref, Reflection)
            verdict: str = ref.verdict
            reason = ref.reason
            judged = None
            if settings.reflection == "llm" or (settings.reflection == "both" and ref.unsure):
                judged = await self.judge(ctx, op, before, after, done.detail)
                if judged is not None:
                    verdict, reason = judged
        if judged is not None and verdict == "wrong_page" and settings.back_on_wrong_page:
            # The judge says the action led astray: undo it (Mobile-Agent-v2), then re-plan
            # on the screen it came back to.
            self.record(op, f"{done.detail}; led to a wrong page, undone with Back", before,
                        verdict, reason)
            self.feedback = [judge_feedback(op, verdict, reason, undone=True)]
            after = await self.undo(after, clock)
            await self.track_progress(ctx)
            return after, app_before
        self.record(op, done.detail, before, verdict, reason)
        if verdict != "ok":
            self.feedback = [judge_feedback(op, verdict, reason) if judged is not None
                             else reflection_feedback(verdict, reason)]
        await self.track_progress(ctx)
        return after, ref.app or app_before

    async def stop(self, ctx: StepContext, before: Frame, clock: _PhaseClock) -> None:
        """``Stop``: the completion check (agent.completion_check) ends the episode, or
        the reason it is not complete goes into the next prompt."""
        if not self.settings.completion_check:
            raise _Finish("succeeded", "the planner chose Stop")
        with clock.timed("reflection"):
            comp = await self.policy.check_completion(ctx)
        await self.usage(comp.replies, "reflect")
        if comp.complete:
            await self.reflect("complete", comp.reason, Stop(), before)
            raise _Finish("succeeded", comp.reason or "complete")
        self.not_complete += 1
        await self.reflect("incomplete", comp.reason, Stop(), before)
        self.record(Stop(), "not complete", before, "incomplete", comp.reason)
        self.feedback = [incomplete_feedback(comp.reason or "no reason given")]
        if self.not_complete > self.settings.max_not_complete:
            raise _Finish("failed", f"Stop was judged not complete {self.not_complete} times: "
                                    f"{comp.reason}")

    async def ask(self, op: Ask, before: Frame) -> None:
        """``Ask``: a ``Question`` on the control topic, then the user's ``Answer`` (or
        none within agent.ask_timeout_s), recorded as the operation's outcome."""
        agent = self.agent
        t = time.perf_counter()
        await agent.ask_question(self.ids.stamp(Question(text=op.question), self.step))
        await agent.status("busy", f"question (step {self.step}): {op.question}")
        got = await agent.control.answer(self.settings.ask_timeout_s)
        await agent.status("busy", f"episode {self.episode_id}")
        if got is None:
            result = f"no answer within {self.settings.ask_timeout_s:g}s"
        else:
            result = f"answered: {got.text}"
        await self.conclude_without_phone(op, got is not None, result, t, before)
        self.record(op, result, before)
        self.executed.append(op)

    # ---- what the stages share --------------------------------------------------------

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

    async def undo(self, after: Frame, clock: _PhaseClock) -> Frame:
        """Back, as its own action, and the frame it leads to."""
        with clock.timed("act"):
            res = await self.agent.call(self.request(ActRequest(
                request_id="-", operation=Back(), frame_id=after.frame_id,
                width=after.width, height=after.height)), (ActionDone,), self.t_act)
        assert isinstance(res, ActionDone)
        if res.ok:
            self.executed.append(Back())
        return await self.fresh_frame(clock)

    async def fresh_frame(self, clock: _PhaseClock) -> Frame:
        """The next step's frame, taken now (after the agent.settle_s wait for the screen)."""
        if self.settings.settle_s:
            await anyio.sleep(self.settings.settle_s)
        with clock.timed("capture"):
            return await self.frame(self.step + 1)

    async def track_progress(self, ctx: StepContext) -> None:
        """agent.planning = "call": the planning call after the step just recorded."""
        if self.settings.planning != "call" or not isinstance(self.policy, ProgressPlanner):
            return
        ctx = replace(ctx, progress=self.progress, notes=tuple(self.notes))
        upd = await self.policy.update_progress(ctx, self.history[-1])
        await self.usage(upd.replies, "progress")
        if upd.text:
            await self.set_progress(upd.text, "call")

    async def approval(self, op: Operation, pattern: str) -> tuple[bool, str]:
        """The user's ``Approve`` for ``op`` (False after agent.approval_timeout_s)."""
        agent = self.agent
        await agent.status("busy", f"awaiting approval (step {self.step}): {format_operation(op)}")
        got = await agent.control.approval(self.step, self.settings.approval_timeout_s)
        await agent.status("busy", f"episode {self.episode_id}")
        if got is None:
            return False, f"no approval within {self.settings.approval_timeout_s:g}s"
        return got.approved, got.note

    async def send(self, msg: Msg) -> None:
        await self.agent.emit(self.ids.stamp(msg, self.step))

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
            self.cap.account(replies)
        for r in replies:
            total += r.latency_s
            cost = r.cost_usd or 0.0
            self.cost_usd += cost
            with self.agent.tracing.llm_call(
                    model=r.model, purpose=purpose, family=self.family, cost_usd=cost,
                    prompt_tokens=r.prompt_tokens, completion_tokens=r.completion_tokens,
                    cached_tokens=r.cached_tokens, latency_s=r.latency_s, attempts=r.attempts):
                await self.send(LlmUsage(model=r.model, prompt_tokens=r.prompt_tokens,
                                         completion_tokens=r.completion_tokens,
                                         latency_s=r.latency_s, purpose=purpose,
                                         cost_usd=cost, cached_tokens=r.cached_tokens,
                                         role=r.role))
        if check_cap:
            self.check_cost_cap()
        return total

    async def grounder_usage(self, ans: Grounded | Ambiguous | NotFound) -> None:
        """The grounder calls perception made for this step's request, counted like the
        episode's own: published (purpose ``ground``), charged to the cap; the episode ends
        past ``agent.max_cost_usd`` or when the cap refused a grounder call."""
        replies = tuple(grounder_reply(c) for c in ans.llm_calls)
        if self.cap is not None:
            self.cap.spent_usd += sum(r.cost_usd or 0.0 for r in replies)
        await self.usage(replies, "ground", check_cap=False)
        if ans.cost_capped:
            raise _Finish("failed", ans.cost_capped)
        self.check_cost_cap()

    def check_cost_cap(self) -> None:
        cap = self.settings.max_cost_usd
        if cap > 0 and self.cost_usd >= cap:
            raise _Finish("failed", f"cost cap of ${cap:g} reached: the LLM calls cost "
                                    f"${self.cost_usd:.4f}")

    async def reflect(self, verdict: Verdict, reason: str, op: Operation | None, before: Frame,
                      after: Frame | None = None, *, source: Literal["", "llm"] = "") -> None:
        """A verdict the planner reached itself, published by the reflector service (the one
        producer of ``Reflection``) as a ``ReflectRequest`` with ``given``."""
        await self.agent.call(self.request(ReflectRequest(
            request_id="-", before_frame_id=before.frame_id,
            after_frame_id=(after or before).frame_id, operation=op,
            given=GivenVerdict(verdict=verdict, reason=reason[:2000], source=source))),
            (Reflection,), self.t_reflect)

    async def conclude_without_phone(self, op: Operation, ok: bool, detail: str, t0: float,
                                     before: Frame) -> None:
        """An operation's outcome decided without the phone (not found, not approved, an
        Ask answered), published by the actuator service (the one producer of
        ``ActionDone``) as an ``ActRequest`` with ``given``: nothing is performed."""
        await self.agent.call(self.request(ActRequest(
            request_id="-", operation=op, frame_id=before.frame_id, width=before.width,
            height=before.height, given=GivenOutcome(ok=ok, detail=detail[:2000],
                                                     duration_s=time.perf_counter() - t0))),
            (ActionDone,), self.t_act)

    async def frame(self, step: int, *, app: bool = False) -> Frame:
        """A step frame from the capture service, with its OCR lines when hints are on;
        without an LLM-sized view (the policy names none) its full encoding is made here
        now, if capture made none, for ``screenshot``."""
        frame = await self.agent.request_frame(episode_id=self.episode_id, step=step,
                                               correlation_id=self.ids.correlation_id,
                                               view=self.view, app=app,
                                               ocr=self.settings.ocr_hints)
        frames = self.agent.services.frames
        if not frame.data and not frames.view(frame.frame_id, frame.device):
            return await frames.encoded(frame.frame_id, frame.device)
        return frame

    def screenshot(self, frame: Frame) -> bytes:
        """The frame as the LLM gets it: capture's LLM-sized view on this host, else its
        full encoding (the LLM client then scales it itself)."""
        return self.agent.services.frames.view(frame.frame_id, frame.device) or frame.data

    def context(self, before: Frame, hints: tuple[str, ...] = ()) -> StepContext:
        steers = self.agent.control.take_steers()
        feedback = [*self.feedback, *(f"The user says: {t}" for t in steers)]
        if self.dropped_note:  # said once, in the prompt right after the reply that had them
            feedback.append(self.dropped_note)
            self.dropped_note = ""
        feedback.extend(frame_notes(before.flags))
        settings = self.settings
        return StepContext(
            instruction=self.instr.text, screenshot=self.screenshot(before),
            history=tuple(self.history),
            feedback=tuple(feedback), ocr_hints=hints, step=self.step, task=self.instr.task,
            # The re-asks this step may still make before max_unusable_replies is reached.
            max_reasks=max(0, settings.max_unusable_replies - self.unusable - 1),
            screen=(int(before.width), int(before.height)),
            progress=self.progress if settings.planning != "off" else "",
            notes=tuple(self.notes), reply_progress=settings.planning == "inline",
            reply_memory=settings.notes, history_thoughts=settings.history_thoughts,
            check_screens=settings.check_screens,
        )

    def record(self, op: Operation, result: str, before: Frame,
               verdict: str | None = None, reason: str | None = None) -> None:
        self.history.append(PastStep(action=op, result=result, verdict=verdict, reason=reason,
                                     screenshot=self.screenshot(before),
                                     observation=self.observation, thought=self.thought))

    async def keep_note(self, text: str, origin: str) -> None:
        """One note more (the oldest goes past agent.max_notes), published as an event."""
        text = " ".join(text.split())[:1000]
        if not text or text in self.notes:
            return
        self.notes = [*self.notes, text][-self.settings.max_notes:]
        await self.send(NoteKept(text=text, origin=origin))  # type: ignore[arg-type]

    async def set_progress(self, text: str, origin: str) -> None:
        text = " ".join(text.split())[:2000]
        if text and text != self.progress:
            self.progress = text
            await self.send(Progress(text=text, origin=origin))  # type: ignore[arg-type]
