"""The ORACLE planner: a Mobile-Eval task's reference operations, through the real actors.

It stands in for the LLM only: every operation still goes through capture, perception
(real OCR and icon grounding), the actuator (real adb) and the reflector. Where the LLM
would pick one of several grounding candidates (the chooser), the oracle looks at the
simulator's ground truth and picks the candidate that lies on the matching element, as a
perfect chooser would (or answers "none" when no candidate lies on a tappable element
named like the target); and, like a careful script, it dismisses the
simulator's system pop-ups, waits out spinners, and repeats once an operation that found
nothing (after a Wait, so that it is grounded on a fresh frame) or changed nothing (never
a Type, which would type the text twice); a text still not found is looked for up to two
screens further down (a result list the seed ordered may put it below the fold). Each of
these costs a step, so PS and RE show them. It lives in host/, not actors/, because it reads
the simulator (sim/), which actors/ may not import.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence

from PIL import Image, ImageChops, UnidentifiedImageError

from actors.planner import Choice, Completion, Decision, StepContext
from protocol.operations import (
    GROUNDED_OPS,
    ClickText,
    Operation,
    PageDown,
    Stop,
    TypeText,
    Wait,
    format_operation,
)
from sim.eval.task import Task
from sim.phone import SimPhone

POPUP_DISMISS = ("Not now", "Don't allow")  # the simulator's system pop-ups
MAX_SCROLLS = 2  # screens scrolled down to look for a text target that was not found
MAX_STALE_WAITS = 2  # waits, per reference step, for a frame that shows the screen as it is
STALE_SHARE = 0.2  # the share of (downscaled) pixels that must differ for a frame to be stale
_COMPARE_SIZE = (54, 120)


class OraclePolicy:
    name = "oracle"

    def __init__(self, task: Task, phone: SimPhone | None = None) -> None:
        self.task = task
        self.phone = phone
        self.ops: list[Operation] = [*task.reference, Stop()]
        self._i = 0
        self._waits = 0
        self._retried = 0  # the reference index last retried
        self._waited_for = 0  # the reference index last waited for before its retry
        # How often a fix was used for a reference index: ("scroll" | "stale", index).
        self._used: Counter[tuple[str, int]] = Counter()

    async def decide(self, ctx: StepContext) -> Decision:
        extra = self._script_fixes(ctx)
        if extra is not None:
            op, why = extra
            return Decision(observation="(oracle: no observation)", thought=why,
                            action=format_operation(op), operation=op)
        op = self.ops[self._i] if self._i < len(self.ops) else Stop()
        self._i += 1
        n = len(self.ops) - 1
        thought = (f"reference step {self._i} of {n} for {self.task.task_id()}" if self._i <= n
                   else f"all {n} reference steps of {self.task.task_id()} are done")
        return Decision(observation="(oracle: no observation)", thought=thought,
                        action=format_operation(op), operation=op)

    def _script_fixes(self, ctx: StepContext) -> tuple[Operation, str] | None:
        """What a careful script does besides the reference steps (each costs a step):
        dismiss the simulator's system pop-ups, wait out a spinner, and issue an operation
        once more when it found nothing or changed nothing (a spinner ate the tap). Before
        retrying a target that was not found it waits once: the agent grounds a step on the
        last frame it took, and a frame taken during a spinner stays the last one until an
        action is performed, so without the wait the retry reads the same spinner again (and
        whether the first try saw the spinner depends on timing, e.g. on how many phones
        share the CPU)."""
        phone = self.phone
        if phone is not None:
            for text in POPUP_DISMISS:
                if phone.find(text=text, clickable=True):
                    return ClickText(text), f"dismiss the pop-up ({text})"
            if phone.loading() and self._waits < 3:
                self._waits += 1
                return Wait(), "the screen is loading"
        self._waits = 0
        nxt = self.ops[self._i] if self._i < len(self.ops) else None
        if (isinstance(nxt, GROUNDED_OPS) and self._used["stale", self._i] < MAX_STALE_WAITS
                and self._frame_is_stale(ctx.screenshot)):
            self._used["stale", self._i] += 1
            return Wait(), "the frame shows a screen that is gone (a spinner): wait"
        last = ctx.history[-1] if ctx.history else None
        if (last is not None and 0 < self._i <= len(self.ops) - 1 and self._retried < self._i
                and last.action == self.ops[self._i - 1]
                and (last.result == "not found"
                     # typing twice doubles the text: a script never retypes on a still frame
                     or (last.verdict == "unchanged" and not isinstance(last.action, TypeText)))):
            if last.result == "not found" and self._waited_for < self._i:
                self._waited_for = self._i
                return Wait(), "the target was not on the last frame: wait for a fresh one"
            self._retried = self._i
            return self.ops[self._i - 1], "the last step had no effect; once more"
        if (self._waited_for == self._i and self._retried < self._i and last is not None
                and isinstance(last.action, Wait)):
            self._retried = self._i
            return self.ops[self._i - 1], "after the wait, the step that found nothing; once more"
        # Still not found after the wait: a text target may lie below the fold (a result list
        # ordered by the seed). Scroll down and look again, twice at most, then move on.
        if (last is not None and 0 < self._i <= len(self.ops) - 1 and self._retried == self._i
                and isinstance(self.ops[self._i - 1], ClickText)):
            scrolls = self._used["scroll", self._i]
            if (last.action == self.ops[self._i - 1] and last.result == "not found"
                    and scrolls < MAX_SCROLLS):
                self._used["scroll", self._i] += 1
                return PageDown(), "the target is not on this screen: scroll down to look for it"
            if isinstance(last.action, PageDown) and scrolls:
                return self.ops[self._i - 1], "after scrolling, the step that found nothing"
        return None

    def _frame_is_stale(self, shot: bytes) -> bool:
        """Whether the frame the step is planned on no longer shows the phone's screen: a
        spinner that ended after the capture. A careful script looks at what the agent
        looked at, and would not aim a tap at a screen that is gone."""
        if self.phone is None or not shot:
            return False
        try:
            seen = Image.open(io.BytesIO(shot)).convert("L").resize(_COMPARE_SIZE)
        except (UnidentifiedImageError, OSError):
            return False
        now = self.phone.screenshot().convert("L").resize(_COMPARE_SIZE)
        diff = ImageChops.difference(seen, now).point(lambda v: 255 if v > 40 else 0)
        changed = diff.histogram()[255]
        return changed > STALE_SHARE * _COMPARE_SIZE[0] * _COMPARE_SIZE[1]

    async def choose(
        self, ctx: StepContext, target: str, image: bytes, labels: Sequence[int],
        texts: Sequence[str], points: Sequence[tuple[int, int]] = (), reason: str = "",
        crops: Sequence[bytes] = (),
    ) -> Choice:
        if not labels:
            return Choice(None)
        if self.phone is None or not points:
            exact = [n for n, t in zip(labels, texts, strict=False) if t.strip() == target.strip()]
            return Choice(exact[0] if exact else labels[0])
        want = target.strip().lower()
        # Icon candidates are mere boxes (no text); text ones are OCR matches.
        icon = not any(t.strip() for t in texts)
        best, best_score = labels[0], -1
        elements = self.phone.elements()
        for n, (x, y) in zip(labels, points, strict=False):
            tappable = named = False
            for el in elements:  # the point's elements: a row and the label inside it
                x0, y0, x1, y1 = el.bbox
                if not (x0 <= x <= x1 and y0 <= y <= y1):
                    continue
                # an icon's id is Material's ("thumb_up"), the model's word "thumb up"
                names = {el.desc.lower(), (el.icon or "").lower().replace("_", " ")}
                # a text target names an element whose text holds it whole (a long title
                # is cut short on screen, never in the ground truth); an icon, by name
                named = named or want in names or (
                    want == el.text.lower() if icon else want in el.text.lower())
                # Tapping the field one is typing into does nothing new: its text is not
                # the target (a search suggestion that repeats the query is).
                typing_into = el.editable and el.focused
                tappable = tappable or ((el.clickable or el.editable) and not typing_into)
            score = (2 if tappable else 0) + (1 if named else 0)
            if score > best_score:
                best, best_score = n, score
        # A perfect chooser taps a candidate that lies on a tappable element named like the
        # target, and answers "none" otherwise: an icon box on something else, the title
        # "New note" for the note's "Note" field while that field is not on the frame yet,
        # the query in the search bar for a result that has not loaded.
        if best_score < 3:
            return Choice(None)
        return Choice(best)

    async def check_completion(self, ctx: StepContext) -> Completion:
        return Completion(True, "oracle: the reference operations are done")

