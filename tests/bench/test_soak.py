"""bench/soak.py: the stand-in model's answers, and one brief soak with a broker restart, a
broker SIGKILL, a phone that drops and returns and a perception worker SIGKILLed (nothing
lost, nothing run twice, nothing left running)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from bench.mosquitto import MOSQUITTO
from bench.soak import Job, StandInModel
from models.llm.prompts.chooser import CHOOSER_SYSTEM
from models.llm.prompts.completion import COMPLETION_SYSTEM
from tests.fixtures.openai_server import RecordedRequest

ROOT = Path(__file__).resolve().parents[2]


def _req(system: str, user: str) -> RecordedRequest:
    return RecordedRequest(path="/v1/chat/completions", headers={}, received_at=0.0, body={
        "model": "m", "messages": [{"role": "system", "content": system},
                                   {"role": "user", "content": user}]})


def test_the_planner_gets_the_next_reference_step_the_history_does_not_show_done() -> None:
    model = StandInModel(seed=0, faults=0.0, delay_s=0.0, timeout_s=5.0)
    model.add("p1", Job("Open Settings and turn on Wi-Fi",
                        ["Open app (Settings)", "Click text (Wi-Fi)"]))
    first = model.answer(_req("planner", "Instruction: Open Settings and turn on Wi-Fi\n"
                                         "No steps yet: this is the first action."))
    assert first.status == 200 and first.text is not None
    assert first.text.endswith("Action: Open app (Settings)")
    history = ("Instruction: Open Settings and turn on Wi-Fi\nSteps so far (action -> result; "
               "check):\n1. Open app (Settings) -> done; ok\n")
    assert model.answer(_req("planner", history)).text.endswith("Action: Click text (Wi-Fi)")  # type: ignore[union-attr]
    undone = history.replace("; ok", "; wrong_page")  # an undone step is asked for again
    assert model.answer(_req("planner", undone)).text.endswith("Action: Open app (Settings)")  # type: ignore[union-attr]
    looped = history + ("2. Click text (Wi-Fi) -> not done: repeated without effect; loop "
                        "(Click text (Wi-Fi) was chosen 3 times; try something else)\n")
    assert model.answer(_req("planner", looped)).text.endswith("Action: Click text (Wi-Fi)")  # type: ignore[union-attr]
    both = history + "2. Click text (Wi-Fi) -> done; ok\n"
    assert model.answer(_req("planner", both)).text.endswith("Action: Stop")  # type: ignore[union-attr]
    assert model.answer(_req("planner", "Instruction: something else")).status == 400
    # two phones with one instruction could not be told apart: the second is refused
    assert not model.add("p2", Job("Open Settings and turn on Wi-Fi", ["Back"]))
    assert model.add("p1", Job("Open Settings and turn on Wi-Fi", ["Back"]))  # its own: fine


def test_the_chooser_picks_the_box_whose_text_is_the_target() -> None:
    model = StandInModel(seed=0, faults=0.0, delay_s=0.0, timeout_s=5.0)
    user = ('The target to tap: Wi-Fi\nThe boxes are numbered 1, 2. Which box is the target?\n'
            'Text read in the boxes: 1: "Bluetooth"; 2: "Wi-Fi"\n')
    assert model.answer(_req(CHOOSER_SYSTEM, user)).text == "Box: 2"


def test_the_completion_check_is_answered_from_the_jobs_state() -> None:
    model = StandInModel(seed=0, faults=0.0, delay_s=0.0, timeout_s=5.0)
    state = {"done": False}
    model.add("p", Job("Open Settings and turn on Wi-Fi", ["Open app (Settings)"],
                       lambda: (state["done"], "not yet: Wi-Fi on")))
    ask = "The user's instruction: Open Settings and turn on Wi-Fi\nThe agent's steps:\n(none)\n"
    assert model.answer(_req(COMPLETION_SYSTEM, ask)).text == (
        "Complete: no\nReason: not yet: Wi-Fi on")
    state["done"] = True
    assert model.answer(_req(COMPLETION_SYSTEM, ask)).text.startswith("Complete: yes")  # type: ignore[union-attr]
    assert model.stats["complete_no"] == 1 and model.stats["complete_yes"] == 1


def test_a_share_of_answers_fail_in_each_way() -> None:
    model = StandInModel(seed=1, faults=0.2, delay_s=0.0, timeout_s=5.0)
    model.add("p", Job("Go home", ["Home"]))
    got = [model.answer(_req("planner", "Instruction: Go home")) for _ in range(400)]
    assert {b.status for b in got} == {200, 429, 500}
    assert all(b.headers.get("Retry-After") for b in got if b.status == 429)
    assert any(b.delay_s > 5.0 for b in got)  # past llm.timeout_s
    assert {"ok", "500", "429", "slow", "timeout", "plan_step"} <= set(model.stats)


@pytest.mark.skipif(MOSQUITTO is None, reason="mosquitto is not installed")
def test_a_brief_soak_loses_nothing_and_runs_nothing_twice(tmp_path: Path) -> None:
    # Its own TMPDIR (under /tmp, open to the mosquitto user, unlike pytest's): the broker's
    # workdir must be gone at the end.
    tmp = Path(tempfile.mkdtemp(prefix="soak-test-tmp-"))
    tmp.chmod(0o755)
    try:
        _brief_soak(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _brief_soak(tmp: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.soak", "--phones", "2", "--minutes", "0.75",
         "--broker-restarts", "1", "--broker-kills", "1", "--phone-drops", "1", "--seed", "3",
         "--perception", "remote", "--workers", "2", "--worker-kills", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "TMPDIR": str(tmp)})
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-3000:]
    out = json.loads(lines[-1])
    assert out["lost"] == 0 and out["twice"] == 0, out
    assert done.returncode == 0, done.stderr[-3000:]
    assert out["sent"] >= 2 and out["finished"] == out["sent"]
    assert sorted(f["kind"] for f in out["faults"]) == [
        "broker_kill", "broker_restart", "phone_drop", "worker_kill"]
    assert out["broker_starts"] == 3 and out["perception"] == "remote"
    assert out["leftover_asyncio_tasks"] == 0, out["leftover_asyncio_task_names"]
    assert out["leftover_threads"] == 0, out["leftover_thread_where"]
    assert sum(out["outcomes"].values()) == out["finished"]
    for key in ("su", "unacknowledged", "rss_peak_first_minute_mb", "rss_peak_last_minute_mb",
                "model_answers", "elapsed_s", "resent", "lost_near_broker_kill",
                "rss_growth_from_second_minute"):
        assert key in out
    assert not list(tmp.glob("soak-mosquitto-*")), "the broker's workdir was left behind"


@pytest.mark.parametrize("phone_seed", [0, 3])
def test_each_task_the_soak_picks_is_solved_by_its_reference_on_the_soaks_phones(
        phone_seed: int) -> None:
    """The stand-in plays a task's reference blindly, so the reference must be the one for
    the phones the soak runs (a task made for another seed pages past Settings' `Network &
    internet` on them: the loop-guard failures of the first 16-phone soak)."""
    import random

    from bench.soak import TaskPicker
    from sim.eval.ground_truth import run_reference
    from sim.eval.tasks import TASKS
    from sim.phone import SimPhone
    from sim.phone_api import DeviceInfo

    pool = [t for t in TASKS if t.tier in (1, 2)]
    picker = TaskPicker(pool, StandInModel(seed=0, faults=0.0, delay_s=0.0, timeout_s=5.0),
                        random.Random(1), phone_seed=phone_seed)
    phone = SimPhone(DeviceInfo("soak-phone"), seed=phone_seed)
    failed: dict[str, list[str]] = {}
    for _ in range(3 * len(pool)):  # each task several times: the picker's draws vary
        task = picker.pick("p", phone)
        task.setup(phone)
        trace = run_reference(phone, task.reference)
        if not task.is_successful(phone):
            failed.setdefault(task.task_id(), trace.failures or ["ran, task not done"])
    assert not failed, failed
