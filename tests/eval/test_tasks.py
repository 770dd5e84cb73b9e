"""Every Mobile-Eval task is solvable by its reference and its check rejects wrong runs.

The reference solutions run in-process with ground-truth aim (sim/eval/ground_truth.py):
no screenshots, no OCR, so every task x 5 seeds takes seconds.
"""

from __future__ import annotations

import pytest

from protocol.operations import ClickIcon, ClickText, Operation, PageDown, TypeText
from sim.eval.episode import run_episode
from sim.eval.ground_truth import GroundTruthExecutor
from sim.eval.instructions import INSTRUCTIONS, LONG_INSTRUCTIONS
from sim.eval.task import Task
from sim.eval.tasks import TASKS, get_task
from sim.phone import SimPhone
from sim.phone_api import DeviceInfo

SEEDS = range(5)
IDS = [t.task_id() for t in TASKS]


def phone_for(seed: int) -> SimPhone:
    return SimPhone(DeviceInfo(f"eval-{seed}"), seed=seed)


def run(task: Task, ops: list[Operation], seed: int) -> tuple[bool, SimPhone]:
    phone = phone_for(seed)
    task.setup(phone)
    ex = GroundTruthExecutor(phone)
    for op in ops:
        ex.run(op)
    return task.is_successful(phone), phone


def test_all_33_tasks_and_the_tier_4_ones_are_registered_once() -> None:
    classic = [t for t in TASKS if t.tier < 4]
    assert len(classic) == 33
    assert {(t.app, t.tier) for t in classic} == set(INSTRUCTIONS)
    long = [t for t in TASKS if t.tier == 4]
    assert len(long) >= 10 and {t.name for t in long} == set(LONG_INSTRUCTIONS)
    assert len(set(IDS)) == len(TASKS)


@pytest.mark.parametrize("task_id", IDS)
def test_reference_solves_task_on_seeds_0_to_4(task_id: str) -> None:
    cls = get_task(task_id)
    for seed in SEEDS:
        task = cls(seed)
        phone = phone_for(seed)
        task.setup(phone)
        assert not task.is_successful(phone), f"seed {seed}: solved before any step"
        ex = GroundTruthExecutor(phone)

        def perform(op: Operation, ex: GroundTruthExecutor = ex) -> tuple[bool, str, list[Operation]]:
            o = ex.run(op)
            return o.ok, o.detail, o.extra

        log = run_episode(task, phone, task.reference, perform)
        failed = [f"{s.op!r}: {s.detail}" for s in log.steps if not s.ok]
        assert not failed, f"seed {seed}: {failed}"
        assert log.success, f"seed {seed}: reference ran but {task_id} is not successful"
        assert not phone.crashes, f"seed {seed}: an app crashed: {phone.crashes[-1]}"
        score = log.score(task)
        assert score.su == 1.0 and score.cr == 1.0
        # Every milestone was reached in order along the way, not only at the end.
        assert all(log.steps[-1].satisfied) or task.is_successful(phone)
        if not any(s.recovery for s in log.steps):
            assert score.ps == 1.0 and score.re == 1.0, f"seed {seed}: {score}"


@pytest.mark.parametrize("task_id", IDS)
def test_stopping_one_step_early_fails(task_id: str) -> None:
    for seed in (0, 3):
        task = get_task(task_id)(seed)
        ok, _ = run(task, task.reference[:-1], seed)
        assert not ok, f"seed {seed}: {task_id} succeeded without its last step"


def _unfocused(ops: list[Operation]) -> list[Operation] | None:
    """The reference with the tap that focuses the first typed-in field removed."""
    for i, op in enumerate(ops):
        if isinstance(op, TypeText):
            for j in range(i - 1, -1, -1):
                if isinstance(ops[j], ClickText | ClickIcon):
                    return ops[:j] + ops[j + 1:]
    return None


TYPING = [t.task_id() for t in TASKS if any(isinstance(o, TypeText) for o in t(0).reference)]


@pytest.mark.parametrize("task_id", TYPING)
def test_typing_into_an_unfocused_field_fails(task_id: str) -> None:
    task = get_task(task_id)(0)
    wrong = _unfocused(task.reference)
    assert wrong is not None
    ok, _ = run(task, wrong, 0)
    assert not ok, f"{task_id} succeeded though its text was typed into no field"


WRONG_TURNS: dict[str, list[Operation]] = {
    # the right app and gestures, the wrong item
    "tiktok-1": [ClickIcon("heart", "right")],  # likes the first video: a dance, not a cat
    "tiktok-3": [PageDown(), PageDown(), ClickIcon("heart", "right"), PageDown(), PageDown(),
                 ClickIcon("heart", "right")],  # only two cats
    "google-maps-1": [ClickText("Search here"), TypeText("Hangzhou West Lake"),
                      ClickText("West Lake Cultural Square"), ClickText("Directions"),
                      ClickText("Start")],
    "settings-2": [ClickText("Network & internet"), ClickText("Wi-Fi")],
    "google-play-1": [ClickText("Search apps & games"), TypeText("WhatsApp"),
                      ClickText("WhatsApp Business"), ClickText("Install")],
    "amazon-music-3": [ClickText("Workout Beats"), ClickText("Play")],
}


@pytest.mark.parametrize("task_id", sorted(WRONG_TURNS))
def test_a_wrong_turn_fails(task_id: str) -> None:
    task = get_task(task_id)(0)
    ops = [task.reference[0], *WRONG_TURNS[task_id]]
    ok, _ = run(task, ops, 0)
    assert not ok


def test_gmail_to_the_wrong_address_fails() -> None:
    task = get_task("gmail-2")(1)
    ops = [TypeText("someone.else@example.com") if isinstance(o, TypeText) and "@" in o.text else o
           for o in task.reference]
    ok, phone = run(task, ops, 1)
    assert not ok
    assert phone.state("com.google.android.gm").sent, "the mail itself was sent"


def test_editing_an_existing_note_is_not_a_new_note() -> None:
    task = get_task("notes-2")(0)
    ops = [task.reference[0], ClickText("Shopping list"), ClickText("Milk, eggs, bread, coffee"),
           TypeText(" Hello, this is a note"), ClickText("Save")]
    ok, _ = run(task, ops, 0)
    assert not ok


def test_multi_app_note_needs_the_right_date() -> None:
    task = get_task("multi-app-1")(2)
    ops = [TypeText("Today is January 1, 1999") if isinstance(o, TypeText) else o
           for o in task.reference]
    ok, _ = run(task, ops, 2)
    assert not ok
    assert "{today's date}" in task.instruction  # the agent must read it off the phone


def test_instruction_placeholders_are_filled_per_seed() -> None:
    a, b = get_task("gmail-1")(0), get_task("gmail-1")(1)
    assert "{address}" not in a.instruction
    assert a.params["address"] in a.instruction and a.instruction != b.instruction


def test_bad_seed_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="seed"):
        get_task("notes-1")(-1)
    with pytest.raises(KeyError, match="no Mobile-Eval task"):
        get_task("facebook-1")
