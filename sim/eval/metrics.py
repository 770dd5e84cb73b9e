"""Mobile-Eval's four per-episode metrics, computed from a recorded trajectory.

Mobile-Agent (Wang et al. 2024, §3.1) judged SU, PS, RE and CR by hand. Here every task
has an ordered list of milestones (predicates on app state), each worth a number of
reference steps; the reference solution is those segments concatenated. The definitions:

- **SU (success)**: ``is_successful`` on the final state. 1.0 or 0.0.
- **CR (completion rate)**: the reference steps of the milestones reached, over all
  reference steps. Milestones are reached in order: milestone *k* counts only once
  milestones 0..k-1 were reached (at the same step or earlier), and once reached it stays
  reached even if its predicate later turns false (a keyboard that closes again). As in
  the paper ("if the instruction is completed, this metric will be equal to 1"), a
  successful episode has CR = 1.
- **PS (process score)**: the steps that were *correct*, over the steps taken. A step is
  correct when it reached at least one new milestone, or when its operation equals the
  reference operation expected at that point. "Expected at that point" is a cursor into
  the current milestone's reference segment: it starts at the segment's first operation,
  moves one on every matching step, and jumps to the next segment's start when a milestone
  is reached. Operations compare by their canonical text, case- and space-insensitively.
- **RE (relative efficiency)**: reference steps over agent steps, for successful episodes
  only (None otherwise). Above 1 means the agent was shorter than the reference.

A "step" is one operation the agent issued on the phone. The terminal ``Stop`` is not a
step (the reference solutions do not contain it either), so stopping at the right moment
costs nothing and stopping early shows up as SU = 0. An episode with no steps has PS = 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protocol.operations import Operation, Stop, format_operation


@dataclass(frozen=True)
class StepRecord:
    """One agent step: the operation and which milestone predicates held after it."""

    op: Operation
    satisfied: tuple[bool, ...]


@dataclass(frozen=True)
class EpisodeScore:
    su: float
    ps: float
    re: float | None
    cr: float
    steps: int
    reference_steps: int
    milestones_reached: int


def same_operation(a: Operation, b: Operation) -> bool:
    """Equal canonical text, ignoring case and runs of spaces."""
    return _norm(format_operation(a)) == _norm(format_operation(b))


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def score_episode(
    segments: Sequence[Sequence[Operation]],
    steps: Sequence[StepRecord],
    success: bool,
    initial: Sequence[bool] | None = None,
) -> EpisodeScore:
    """Score one episode.

    ``segments[k]`` is milestone k's slice of the reference solution (its length is the
    milestone's reference steps); ``steps`` are the agent's steps in order; ``initial`` is
    which predicates held before the first step (reached for free, credited to no step).
    """
    n = len(segments)
    if n == 0:
        raise ValueError("a task needs at least one milestone")
    if any(len(seg) == 0 for seg in segments):
        raise ValueError("every milestone must take at least one reference step")
    for i, step in enumerate(steps):
        if len(step.satisfied) != n:
            raise ValueError(
                f"step {i}: {len(step.satisfied)} milestone flags for {n} milestones"
            )
    if initial is not None and len(initial) != n:
        raise ValueError(f"initial: {len(initial)} milestone flags for {n} milestones")

    real_steps = [s for s in steps if not isinstance(s.op, Stop)]
    reached = _advance(0, initial) if initial is not None else 0
    cursor = 0  # index into segments[reached]
    correct = 0
    for step in real_steps:
        matched = False
        if reached < n and cursor < len(segments[reached]):
            matched = same_operation(step.op, segments[reached][cursor])
        new_reached = _advance(reached, step.satisfied)
        if new_reached > reached:
            reached, cursor = new_reached, 0
            correct += 1
        elif matched:
            cursor += 1
            correct += 1

    total_ref = sum(len(seg) for seg in segments)
    reached_ref = sum(len(seg) for seg in segments[:reached])
    n_steps = len(real_steps)
    return EpisodeScore(
        su=1.0 if success else 0.0,
        ps=correct / n_steps if n_steps else 0.0,
        re=(total_ref / n_steps if n_steps else None) if success else None,
        cr=1.0 if success else reached_ref / total_ref,
        steps=n_steps,
        reference_steps=total_ref,
        milestones_reached=n if success else reached,
    )


def _advance(reached: int, satisfied: Sequence[bool]) -> int:
    """Reach milestones in order, as many as hold now."""
    while reached < len(satisfied) and satisfied[reached]:
        reached += 1
    return reached


@dataclass(frozen=True)
class Aggregate:
    """Means over episodes; RE averages successful episodes only (None if there are none)."""

    n_episodes: int
    su: float
    ps: float
    re: float | None
    cr: float

    def as_dict(self) -> dict[str, float | int | None]:
        return {"n_episodes": self.n_episodes, "SU": self.su, "PS": self.ps,
                "RE": self.re, "CR": self.cr}


def aggregate(scores: Sequence[EpisodeScore]) -> Aggregate:
    if not scores:
        return Aggregate(0, 0.0, 0.0, None, 0.0)
    res = [s.re for s in scores if s.re is not None]
    k = len(scores)
    return Aggregate(
        n_episodes=k,
        su=sum(s.su for s in scores) / k,
        ps=sum(s.ps for s in scores) / k,
        re=sum(res) / len(res) if res else None,
        cr=sum(s.cr for s in scores) / k,
    )
