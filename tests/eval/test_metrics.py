"""SU / PS / RE / CR on synthetic trajectories (sim/eval/metrics.py)."""

import pytest

from protocol.operations import Back, ClickIcon, ClickText, OpenApp, Stop, TypeText
from sim.eval.metrics import StepRecord, aggregate, same_operation, score_episode

# A three-milestone task: open (1 step), compose (2 steps), save (1 step): 4 reference steps.
SEGMENTS = [
    [OpenApp("Notes")],
    [ClickIcon("add", "bottom"), TypeText("hello")],
    [ClickText("Save")],
]
REFERENCE = [op for seg in SEGMENTS for op in seg]


def flags(k: int) -> tuple[bool, ...]:
    """The first k milestone predicates hold."""
    return tuple(i < k for i in range(3))


def test_reference_trajectory_scores_perfectly() -> None:
    steps = [
        StepRecord(REFERENCE[0], flags(1)),
        StepRecord(REFERENCE[1], flags(1)),
        StepRecord(REFERENCE[2], flags(2)),
        StepRecord(REFERENCE[3], flags(3)),
        StepRecord(Stop(), flags(3)),
    ]
    s = score_episode(SEGMENTS, steps, success=True)
    assert (s.su, s.ps, s.re, s.cr) == (1.0, 1.0, 1.0, 1.0)
    assert s.steps == 4 and s.reference_steps == 4 and s.milestones_reached == 3


def test_wasted_steps_lower_ps_and_re() -> None:
    steps = [
        StepRecord(OpenApp("Chrome"), flags(0)),  # wrong app: neither advances nor matches
        StepRecord(Back(), flags(0)),  # wrong
        StepRecord(OpenApp("notes"), flags(1)),  # case-insensitive match, advances
        StepRecord(ClickIcon("add", "bottom"), flags(1)),  # matches the cursor
        StepRecord(TypeText("hello"), flags(2)),
        StepRecord(ClickText("Save"), flags(3)),
    ]
    s = score_episode(SEGMENTS, steps, success=True)
    assert s.ps == pytest.approx(4 / 6)
    assert s.re == pytest.approx(4 / 6)
    assert s.cr == 1.0


def test_failed_episode_counts_reached_milestones_only() -> None:
    steps = [
        StepRecord(OpenApp("Notes"), flags(1)),
        StepRecord(ClickIcon("add", "bottom"), flags(1)),
    ]
    s = score_episode(SEGMENTS, steps, success=False)
    assert s.su == 0.0 and s.re is None
    assert s.cr == pytest.approx(1 / 4)  # milestone 0 (1 of 4 reference steps)
    assert s.ps == 1.0  # both steps were right, the agent just stopped early
    assert s.milestones_reached == 1


def test_milestones_are_reached_in_order_and_stay_reached() -> None:
    # Milestone 1's predicate holding before milestone 0's does not count;
    # milestone 0 going false again later does not un-reach it.
    steps = [
        StepRecord(Back(), (False, True, False)),
        StepRecord(OpenApp("Notes"), (True, False, False)),
        StepRecord(Back(), (False, False, False)),
    ]
    s = score_episode(SEGMENTS, steps, success=False)
    assert s.milestones_reached == 1
    assert s.cr == pytest.approx(1 / 4)
    assert s.ps == pytest.approx(1 / 3)


def test_one_step_can_reach_several_milestones() -> None:
    steps = [StepRecord(OpenApp("Notes"), flags(3))]
    s = score_episode(SEGMENTS, steps, success=True)
    assert s.ps == 1.0 and s.re == 4.0 and s.cr == 1.0


def test_matching_reference_op_without_progress_is_still_correct() -> None:
    # The agent clicks the right thing but a dialog swallowed it: PS credits the step.
    steps = [
        StepRecord(OpenApp("Notes"), flags(1)),
        StepRecord(ClickIcon("add", "bottom"), flags(1)),
        StepRecord(ClickIcon("add", "bottom"), flags(1)),  # cursor moved on: no longer matches
    ]
    s = score_episode(SEGMENTS, steps, success=False)
    assert s.ps == pytest.approx(2 / 3)


def test_initial_state_is_free() -> None:
    steps = [StepRecord(ClickIcon("add", "bottom"), flags(1))]
    s = score_episode(SEGMENTS, steps, success=False, initial=flags(1))
    assert s.ps == 1.0  # matched the cursor of segment 1
    assert s.cr == pytest.approx(1 / 4)


def test_stop_is_not_a_step_and_empty_episode() -> None:
    s = score_episode(SEGMENTS, [StepRecord(Stop(), flags(0))], success=False)
    assert s.steps == 0 and s.ps == 0.0 and s.cr == 0.0 and s.re is None


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="milestone flags"):
        score_episode(SEGMENTS, [StepRecord(Back(), (True,))], success=False)
    with pytest.raises(ValueError, match="at least one milestone"):
        score_episode([], [], success=False)
    with pytest.raises(ValueError, match="at least one reference step"):
        score_episode([[]], [], success=False)


def test_same_operation_normalises_text() -> None:
    assert same_operation(TypeText("Hello  World"), TypeText("hello world"))
    assert not same_operation(TypeText("hello"), ClickText("hello"))
    assert not same_operation(ClickIcon("add", "bottom"), ClickIcon("add", "top"))


def test_aggregate_means_and_re_over_successes() -> None:
    ok = score_episode(SEGMENTS, [StepRecord(OpenApp("Notes"), flags(3))], success=True)
    bad = score_episode(SEGMENTS, [StepRecord(Back(), flags(0))], success=False)
    agg = aggregate([ok, bad])
    assert agg.n_episodes == 2
    assert agg.su == 0.5 and agg.ps == 0.5 and agg.cr == 0.5
    assert agg.re == 4.0
    assert aggregate([]).re is None
    assert aggregate([bad]).re is None
