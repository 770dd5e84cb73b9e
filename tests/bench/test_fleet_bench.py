"""bench/fleet.py: --workload mobile-eval (the stand-in model, one small real run) and the
swipes workload's output kept."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench.fleet import JOB_RE, StandInModel, assignments, su_differences
from tests.fixtures.openai_server import RecordedRequest


def test_one_phone_runs_every_task_and_more_phones_share_them() -> None:
    tasks = ["a", "b", "c"]
    assert assignments(tasks, ["p"], 2) == {"p": ["a", "b", "c"]}
    plan = assignments(tasks, ["p", "q"], 2)
    assert plan == {"p": ["a", "c"], "q": ["b", "a"]}


def _req(text: str) -> RecordedRequest:
    return RecordedRequest(path="/v1/chat/completions", headers={},
                           body={"model": "bench", "messages": [{"role": "user",
                                                                 "content": text}]},
                           received_at=0.0)


def test_the_stand_in_answers_only_the_episode_it_was_told_about() -> None:
    model = StandInModel(0.5)
    model.pending["bench-1-0-0"] = "Action: Back"
    other = model.answer(_req("Open Settings (job bench-1-0-1)"))
    assert other.status == 500 and model.unmatched == 1
    got = model.answer(_req("Open Settings (job bench-1-0-0)"))
    assert got.text == "Action: Back" and got.delay_s == 0.5
    assert model.answer(_req("Open Settings (job bench-1-0-0)")).status == 500  # used once
    assert JOB_RE.search("x (job bench-16-3-1) y").group(1) == "bench-16-3-1"  # type: ignore[union-attr]


def test_su_differences_names_the_tasks() -> None:
    one = {"episode_results": [{"task": "a", "SU": 1.0}, {"task": "b", "SU": 1.0}]}
    many = {"episode_results": [{"task": "a", "SU": 1.0}, {"task": "a", "SU": 0.0},
                                {"task": "c", "SU": 0.0}]}
    assert su_differences(one, many) == ["a 1.00 -> 0.50"]


@pytest.mark.slow
@pytest.mark.needs_adb
def test_a_mobile_eval_run_on_one_phone_with_the_levers_off_and_on(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(root / "bench" / "fleet.py"), "--workload", "mobile-eval",
         "--devices", "1", "--tasks", "settings-1", "--episodes", "1", "--llm-delay", "0",
         "--levers", "none,both", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=400, check=False, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "STAND-IN" in done.stdout
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(last) == {"none/1", "both/1"}
    for variant in last.values():
        assert variant["SU"] == 1.0 and variant["ratio"] == 1.0
        assert variant["perception_cpu_s_mean"] > 0  # settings-1 clicks text: OCR ran
    results = json.loads((tmp_path / "fleet.json").read_text())["results"]
    runs = {}
    for res in results:
        assert res["errors"] == 0 and res["episodes"] == 1 and res["groundings"] >= 1
        runs[res["levers"]] = res["ocr_runs_per_step"]
        assert res["rec_lines"] >= res["rec_reused"] >= 0
        # the ledger's stages (runtime.cpu_ledger): the reads and capture's encoding ran
        st = res["stage_cpu_s_per_step"]
        assert st["detect"] > 0 and st["recognize"] > 0 and st["encode"] > 0
        assert res["cpu_s_per_step"] == pytest.approx(sum(st.values()), abs=1e-3)
        assert res["work_per_step"]["rec_lines"] > 0
    assert set(runs["both"]) == {"full", "band", "unchanged", "cached", "deferred", "first"}
    # lazy OCR: the whole-frame reads of steps that click no text are left undone
    assert runs["none"]["full"] > 0 and runs["none"]["deferred"] == 0
    assert runs["both"]["deferred"] > 0


@pytest.mark.slow
@pytest.mark.needs_adb
def test_the_swipes_workload_keeps_its_output(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(root / "bench" / "fleet.py"), "--devices", "1,2", "--steps", "2",
         "--llm-delay", "0", "--sim-procs", "1", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(last["1"]) == {"ratio", "overhead_p95_s"} and last["1"]["ratio"] == 1.0
    # N = 2 is measured against this run's N = 1 (a ratio, not NaN for want of a baseline).
    assert math.isfinite(last["2"]["ratio"]) and last["2"]["ratio"] > 0, last
    meta = json.loads((tmp_path / "fleet.json").read_text())["meta"]
    assert meta["workload"] == "swipes" and "perception_workers" not in meta


def test_the_capture_option_takes_paths_side_by_side_and_refuses_others() -> None:
    from bench.fleet import main

    for bad in (["--capture", "jpeg"], ["--capture", "png,png"],
                ["--capture", "png,raw", "--loop", "own"],
                ["--capture", "png,raw", "--workload", "mobile-eval"]):
        with pytest.raises(SystemExit) as exc:
            main(bad)
        assert exc.value.code == 2, bad


@pytest.mark.slow
@pytest.mark.needs_adb
def test_png_raw_and_auto_side_by_side_with_the_capture_cost(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(root / "bench" / "fleet.py"), "--devices", "1", "--steps", "3",
         "--llm-delay", "0", "--phone", "stand-in", "--capture", "png,raw,auto",
         "--capture-cost", "usb2", "--remeasure-every", "2", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "capture paths (--capture-cost usb2; auto re-measures every 2 frames)" in done.stdout
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(last) == {"png/1", "raw/1", "auto/1"}
    for row in last.values():
        assert row["capture_p95_s"] >= row["capture_p50_s"] > 0 and row["steps_per_s"] > 0
    results = {r["capture"]: r for r in json.loads((tmp_path / "fleet.json").read_text())
               ["results"]}
    assert all(r["errors"] == 0 for r in results.values())
    auto = results["auto"]["auto"]
    assert auto["measurements"] >= 2  # timed again after its first choice
    assert auto["chosen"] in ("png 1", "raw 1") and set(auto["last_ms"]) == {"png", "raw"}
    assert results["png"]["auto"]["measurements"] == 0
