"""One scored episode: operations applied to a phone, milestones read after every step.

The policy is anything that performs an operation and says what it actually did (the
ground-truth executor in tests, the perception-driven oracle in the benchmark). Scoring
reads app state through the test API only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protocol.operations import Operation, format_operation
from sim.eval.metrics import EpisodeScore, StepRecord, score_episode
from sim.eval.task import Task

if TYPE_CHECKING:
    from sim.phone import SimPhone


@dataclass
class StepLog:
    op: Operation
    ok: bool
    detail: str
    satisfied: tuple[bool, ...]
    recovery: bool = False  # an extra action the executor took (a dialog dismissed, a scroll)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return {"action": format_operation(self.op), "ok": self.ok, "detail": self.detail,
                "milestones": list(self.satisfied), "recovery": self.recovery,
                "seconds": round(self.seconds, 4)}


@dataclass
class EpisodeLog:
    task_id: str
    seed: int
    instruction: str
    reference: list[str]
    milestones: list[str]
    initial: tuple[bool, ...]
    steps: list[StepLog] = field(default_factory=list)
    success: bool = False

    def score(self, task: Task) -> EpisodeScore:
        segments = [m.steps for m in task.milestones()]
        return score_episode(segments, [StepRecord(s.op, s.satisfied) for s in self.steps],
                             self.success, initial=self.initial)

    def as_dict(self) -> dict[str, object]:
        return {"task": self.task_id, "seed": self.seed, "instruction": self.instruction,
                "reference": self.reference, "milestones": self.milestones,
                "initial": list(self.initial), "success": self.success,
                "steps": [s.as_dict() for s in self.steps]}


# perform(op) -> (ok, detail, recovery operations performed before it)
Perform = Callable[[Operation], tuple[bool, str, Sequence[Operation]]]


def run_episode(task: Task, phone: SimPhone, ops: Sequence[Operation], perform: Perform,
                clock: Callable[[], float] | None = None) -> EpisodeLog:
    """Apply ops (already set up: ``task.setup(phone)`` ran) and log milestones per step."""
    import time

    now = clock or time.perf_counter
    log = EpisodeLog(task.task_id(), task.seed, task.instruction,
                     [format_operation(o) for o in task.reference],
                     [m.name for m in task.milestones()], task.milestone_flags(phone))
    for op in ops:
        before = task.milestone_flags(phone)
        t0 = now()
        ok, detail, recovery = perform(op)
        dt = now() - t0
        for r in recovery:
            log.steps.append(StepLog(r, True, "recovery", before, recovery=True))
        log.steps.append(StepLog(op, ok, detail, task.milestone_flags(phone), seconds=dt))
    log.success = task.is_successful(phone)
    return log
