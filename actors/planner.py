"""The planner actor: the next operation, from a ``Policy``.

``Policy`` is the seam: ``LLMPolicy`` is Mobile-Agent's planner (the role prompts of
``models/llm/prompts/`` and the planner family's of ``models/llm/families/``, over any
``ChatModel``, ``LLMClient`` in production; ``RoleSetup`` is what it needs of the ``[llm]``
settings); anything else with the same three methods can be injected (the benchmark's
oracle, which replays a task's reference operations, lives in bench/ because actors may
not see the simulator). A reply that does
not parse is re-asked at most N times and never executed: ``decide`` then returns a
``Decision`` with ``operation=None`` and the parse error.

Two optional capabilities, Mobile-Agent-v2's other agents: ``ActionJudge`` (the reflection
agent: an LLM verdict on one action's before and after screens, ``agent.reflection``) and
``ProgressPlanner`` (the planning agent: the progress summary by its own call,
``agent.planning = "call"``). ``LLMPolicy`` has both; a policy without them gets the pixel
reflection and no progress call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import structlog

from models.llm import ChatModel, LLMReply, LLMSettings, UnparsableReply
from models.llm.families import Family, get_family
from models.llm.families.answers import answer_format
from models.llm.families.planning import plan_step
from models.llm.prompts.chooser import choose_box
from models.llm.prompts.completion import check_completion
from models.llm.prompts.judge import judge_action
from models.llm.prompts.planner import PlannerInput
from models.llm.prompts.progress import update_progress
from models.llm.prompts.shared import PastStep
from models.llm.replytext import kept_memory
from protocol.operations import Operation

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Decision:
    observation: str
    thought: str
    action: str  # as written by the policy
    operation: Operation | None  # None: unusable (parse_error says why); never executed
    parse_error: str = ""
    replies: tuple[LLMReply, ...] = ()  # every LLM call made, for LlmUsage events
    progress: str = ""  # the reply's progress field (agent.planning = "inline"), "" if none
    memory: str = ""  # the reply's memory field: content to keep, "" if none
    dropped: tuple[str, ...] = ()  # actions the reply carried after the first: not run


@dataclass(frozen=True)
class Judgement:
    """The LLM judge on one action: ``ok`` | ``wrong_page`` | ``unchanged`` (None: no
    usable verdict; the pixel verdict stands)."""

    verdict: str | None
    reason: str
    replies: tuple[LLMReply, ...] = ()


@dataclass(frozen=True)
class ProgressUpdate:
    text: str | None  # None: no usable answer; the progress stays as it was
    replies: tuple[LLMReply, ...] = ()


@dataclass(frozen=True)
class Choice:
    index: int | None  # the chosen candidate, None for "none of them"
    replies: tuple[LLMReply, ...] = ()


@dataclass(frozen=True)
class Completion:
    complete: bool
    reason: str
    replies: tuple[LLMReply, ...] = ()


@dataclass(frozen=True)
class StepContext:
    """What a policy gets each step."""

    instruction: str
    screenshot: bytes
    history: tuple[PastStep, ...] = ()
    feedback: tuple[str, ...] = ()
    ocr_hints: tuple[str, ...] = ()
    step: int = 1
    task: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    # At most this many re-asks of an unusable reply this step (the episode's remaining
    # agent.max_unusable_replies); None: the policy's own limit.
    max_reasks: int | None = None
    # The device screen (width, height): a coordinate family's points are mapped to it.
    # None: the screenshot's own size.
    screen: tuple[int, int] | None = None
    # The episode's memory (actors/episode.py): the running progress, the notes kept, and
    # what the reply is asked for (agent.planning = "inline", agent.notes).
    progress: str = ""
    notes: tuple[str, ...] = ()
    reply_progress: bool = False
    reply_memory: bool = False
    history_thoughts: bool = True
    # This step's Thought, once the planner has decided (the chooser and the judge get it).
    thought: str = ""
    # Earlier screens the completion check sees besides the last one.
    check_screens: int = 0


class Policy(Protocol):
    name: str

    async def decide(self, ctx: StepContext) -> Decision: ...

    async def choose(
        self, ctx: StepContext, target: str, image: bytes, labels: Sequence[int],
        texts: Sequence[str], points: Sequence[tuple[int, int]] = (), reason: str = "",
        crops: Sequence[bytes] = (),
    ) -> Choice: ...

    async def check_completion(self, ctx: StepContext) -> Completion: ...


@runtime_checkable
class ActionJudge(Protocol):
    """A policy that can judge one action on its before and after screens."""

    async def judge_action(self, ctx: StepContext, op: Operation, before: bytes, after: bytes,
                           result: str = "") -> Judgement: ...


@runtime_checkable
class ProgressPlanner(Protocol):
    """A policy that can update the progress summary after a step by its own call."""

    async def update_progress(self, ctx: StepContext, step: PastStep) -> ProgressUpdate: ...


@dataclass(frozen=True)
class RoleSetup:
    """What ``LLMPolicy`` needs of the ``[llm]`` settings: the planner's family, the
    families the chooser and the reflector answer in (``llm.family.*``, ``auto`` from the
    role's model), the planner prompt's bound (``llm.max_prompt_tokens``, 0: none), and the
    planner role's screenshot view (max side, JPEG quality; None: not known)."""

    planner: Family
    chooser: str = "react"
    reflector: str = "react"
    max_prompt_tokens: int = 0
    image_view: tuple[int, int] | None = None

    @classmethod
    def from_settings(cls, settings: LLMSettings, *, planner: Family | None = None) -> RoleSetup:
        """The roles as ``settings`` configure them (``planner``: this family instead).
        An unknown family name raises ``ValueError``."""
        rc = settings.role("planner")
        if planner is None:
            # The planner role's image size: the family's coordinates refer to that image.
            planner = get_family(settings.family.planner, rc.model,
                                 max_image_side=rc.max_image_side)
        limitation = str(getattr(planner, "limitation", ""))
        if limitation:  # a grounding-only model named as the planner: say what it cannot do
            log.warning("planner_cannot_navigate", model=rc.model, family=planner.name,
                        problem=f"the planner is {limitation}")
        return cls(
            planner,
            chooser=get_family(settings.family.chooser, settings.model_for("chooser")).name,
            reflector=get_family(settings.family.reflector, settings.model_for("reflector")).name,
            max_prompt_tokens=settings.max_prompt_tokens,
            image_view=(rc.max_image_side, rc.jpeg_quality),
        )


class LLMPolicy:
    """Mobile-Agent's planner, chooser and completion check on an OpenAI-compatible model:
    ``LLMPolicy(llm, RoleSetup.from_settings(llm.settings))``."""

    name = "llm"

    def __init__(self, llm: ChatModel, setup: RoleSetup, *, keep_screenshots: int = 1,
                 max_reasks: int = 2) -> None:
        self.llm = llm
        self.setup = setup
        self.keep_screenshots = keep_screenshots
        self.max_reasks = max_reasks

    @property
    def family(self) -> Family:
        """The planner's family."""
        return self.setup.planner

    @property
    def max_prompt_tokens(self) -> int:
        return self.setup.max_prompt_tokens

    @property
    def image_view(self) -> tuple[int, int] | None:
        """(max side, JPEG quality) of the screenshots the LLM gets, when known: capture
        then encodes that view once, and the client sends it as it is."""
        return self.setup.image_view

    async def decide(self, ctx: StepContext) -> Decision:
        view = self.image_view
        inp = PlannerInput(
            instruction=ctx.instruction, screenshot=ctx.screenshot, history=ctx.history,
            ocr_hints=ctx.ocr_hints, feedback=ctx.feedback, progress=ctx.progress,
            notes=ctx.notes, reply_progress=ctx.reply_progress, reply_memory=ctx.reply_memory,
            history_thoughts=ctx.history_thoughts, max_prompt_tokens=self.max_prompt_tokens,
            max_image_side=view[0] if view else 1024,
        )
        reasks = self.max_reasks if ctx.max_reasks is None else min(self.max_reasks,
                                                                    ctx.max_reasks)
        try:
            parsed = await plan_step(self.llm, self.family, inp, screen=ctx.screen,
                                     keep_screenshots=self.keep_screenshots, max_reasks=reasks)
        except UnparsableReply as exc:
            last = exc.replies[-1].text if exc.replies else ""
            return Decision("", "", last.strip()[-300:], None, parse_error=exc.errors[-1],
                            replies=exc.replies)
        r = parsed.value
        return Decision(r.observation, r.thought, r.action_text, r.action, replies=parsed.replies,
                        progress=r.progress.strip(), memory=kept_memory(r.memory),
                        dropped=r.dropped)

    async def choose(
        self, ctx: StepContext, target: str, image: bytes, labels: Sequence[int],
        texts: Sequence[str], points: Sequence[tuple[int, int]] = (), reason: str = "",
        crops: Sequence[bytes] = (),
    ) -> Choice:
        try:
            parsed = await choose_box(
                self.llm, instruction=ctx.instruction, target=target, image=image, labels=labels,
                texts=texts, reason=reason, crops=crops, max_reasks=self.max_reasks,
                thought=ctx.thought,
                answer=answer_format(self.setup.chooser, "choice", labels),
            )
        except UnparsableReply as exc:
            return Choice(None, exc.replies)
        return Choice(parsed.value, parsed.replies)

    async def check_completion(self, ctx: StepContext) -> Completion:
        try:
            parsed = await check_completion(
                self.llm, instruction=ctx.instruction, history=ctx.history,
                screenshot=ctx.screenshot, max_reasks=self.max_reasks, progress=ctx.progress,
                notes=ctx.notes, earlier_screens=ctx.check_screens,
                answer=answer_format(self.setup.reflector, "completion"),
            )
        except UnparsableReply as exc:
            # No usable verdict: do not end the episode on a guess.
            return Completion(False, f"the completion check gave no usable answer ({exc.errors[-1]})",
                              exc.replies)
        return Completion(parsed.value.complete, parsed.value.reason, parsed.replies)

    async def judge_action(self, ctx: StepContext, op: Operation, before: bytes, after: bytes,
                           result: str = "") -> Judgement:
        try:
            parsed = await judge_action(
                self.llm, instruction=ctx.instruction, operation=op, thought=ctx.thought,
                before=before, after=after, result=result, progress=ctx.progress,
                notes=ctx.notes, max_reasks=self.max_reasks,
                answer=answer_format(self.setup.reflector, "judgement"),
            )
        except UnparsableReply as exc:
            return Judgement(None, f"the judge gave no usable answer ({exc.errors[-1]})",
                             exc.replies)
        return Judgement(parsed.value.verdict, parsed.value.reason, parsed.replies)

    async def update_progress(self, ctx: StepContext, step: PastStep) -> ProgressUpdate:
        try:
            parsed = await update_progress(
                self.llm, instruction=ctx.instruction, progress=ctx.progress, step=step,
                notes=ctx.notes, max_reasks=self.max_reasks,
                # the planner role's call: the planner's family decides its form
                answer=answer_format(self.family.name, "progress"),
            )
        except UnparsableReply as exc:
            return ProgressUpdate(None, exc.replies)
        return ProgressUpdate(parsed.value, parsed.replies)


class ScriptedPolicy:
    """Issues fixed operations in order, then Stop; chooses the first candidate; always
    complete. The oracle planner is this with a task's reference operations."""

    name = "scripted"

    def __init__(self, operations: Sequence[Operation], name: str = "scripted") -> None:
        from protocol.operations import Stop

        self.ops = [*operations, Stop()]
        self.name = name
        self._i = 0

    async def decide(self, ctx: StepContext) -> Decision:
        from protocol.operations import Stop, format_operation

        op = self.ops[self._i] if self._i < len(self.ops) else Stop()
        self._i += 1
        return Decision("", f"{self.name} step {self._i}", format_operation(op), op)

    async def choose(
        self, ctx: StepContext, target: str, image: bytes, labels: Sequence[int],
        texts: Sequence[str], points: Sequence[tuple[int, int]] = (), reason: str = "",
        crops: Sequence[bytes] = (),
    ) -> Choice:
        exact = [n for n, t in zip(labels, texts, strict=False) if t.strip() == target.strip()]
        return Choice(exact[0] if exact else (labels[0] if labels else None))

    async def check_completion(self, ctx: StepContext) -> Completion:
        return Completion(True, f"{self.name}: the reference operations are done")
