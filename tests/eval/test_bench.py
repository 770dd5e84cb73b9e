"""bench/mobile_eval.py: arguments, the table and summary, scoring from recorded events, and
real episodes through the agent (host.runner.agent_host / DeviceAgent) on simulated phones behind adb."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench.mobile_eval import main, parse_ints, steps_from_events
from protocol.operations import ClickText, OpenApp
from sim.eval.metrics import EpisodeScore, score_episode
from sim.eval.report import EpisodeResult, summary, table_by_app_and_tier
from tests.fixtures.openai_server import OpenAIServer, planner_reply


def test_parse_ints() -> None:
    assert parse_ints("0-4", "seed") == [0, 1, 2, 3, 4]
    assert parse_ints("3,1,1-2", "seed") == [1, 2, 3]
    for bad in ("", "a", "4-1", "-1", "1,,x"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_ints(bad, "seed")


def _result(app: str, tier: int, su: float, steps: int, ref: int) -> EpisodeResult:
    score = EpisodeScore(su, 1.0 if su else 0.5, ref / steps if su else None, 1.0 if su else 0.5,
                         steps, ref, 1)
    return EpisodeResult(f"{app}-{tier}", app, tier, 0, score)


def test_table_and_summary_shapes() -> None:
    rs = [_result("Notes", 1, 1.0, 4, 3), _result("Notes", 2, 0.0, 2, 5),
          _result("Gmail", 1, 0.0, 3, 6)]
    table = table_by_app_and_tier(rs, [1, 2])
    lines = table.splitlines()
    assert "INSTRUCTION 1" in lines[0] and "INSTRUCTION 2" in lines[0]
    # paper's row order: Gmail before Notes; an Avg. row last
    assert lines[3].startswith("Gmail") and lines[4].startswith("Notes") and lines[5].startswith("Avg.")
    assert "4.0/3.0" in lines[4] and "0.75" in lines[4]
    s = summary(rs, [1, 2])
    assert s["n_episodes"] == 3
    assert s["tiers"]["1"]["SU"] == 0.5  # type: ignore[index]
    assert s["tiers"]["2"]["RE"] is None  # type: ignore[index]


def _done(step: int, op: dict[str, str], ok: bool = True) -> dict[str, object]:
    return {"event": "action_done", "step": step, "ok": ok, "operation": op}


def test_steps_and_scores_come_from_the_recorded_events() -> None:
    """Steps are the performed actions (ok ActionDone), in step order; the flags after step
    k are those read when step k+1 began, or the final ones after the last step."""
    events = [
        {"event": "episode_started", "step": 0},
        _done(2, {"op": "click_text", "text": "Display"}),  # arrival order is not step order
        _done(1, {"op": "open_app", "name": "Settings"}),
        {"event": "plan", "step": 3},  # a step whose target was not found: no ActionDone
        _done(4, {"op": "click_text", "text": "Dark mode"}, ok=False),  # failed: not a step
        _done(5, {"op": "click_text", "text": "Dark mode"}),
        {"event": "episode_finished", "step": 5},  # the step budget ended it after step 5
    ]
    flags_at = {1: (False, False), 2: (True, False), 3: (True, False), 4: (True, False),
                5: (True, False)}
    steps = steps_from_events(events, flags_at, final=(True, True))
    assert [s.op for s in steps] == [OpenApp("Settings"), ClickText("Display"),
                                     ClickText("Dark mode")]
    assert [s.satisfied for s in steps] == [(True, False), (True, False), (True, True)]
    segments = [[OpenApp("Settings")], [ClickText("Display"), ClickText("Dark mode")]]
    score = score_episode(segments, steps, success=True, initial=(False, False))
    assert (score.su, score.ps, score.re, score.cr, score.steps) == (1.0, 1.0, 1.0, 1.0, 3)
    # Without the last flags the episode reached only the first milestone.
    partial = score_episode(segments, steps_from_events(events, flags_at, (True, False)),
                            success=False, initial=(False, False))
    assert partial.cr == pytest.approx(1 / 3) and partial.re is None


def test_llm_planner_without_a_key_says_how(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("MOBAGENT_LLM__API_KEY", raising=False)
    monkeypatch.delenv("MOBAGENT_LLM__BASE_URL", raising=False)
    assert main(["--planner", "llm", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY" in err and "--planner oracle" in err


def test_unknown_task_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--tasks", "facebook-1", "--out", str(tmp_path)]) == 2
    assert "no task matches" in capsys.readouterr().err
    assert main(["--devices", "0", "--out", str(tmp_path)]) == 2
    assert main(["--set", "agent.max_steps=many", "--out", str(tmp_path)]) == 2
    assert "agent.max_steps" in capsys.readouterr().err


@pytest.mark.needs_adb
def test_oracle_through_the_agent_at_one_and_two_phones(
    adb_server: object, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """Two tasks through DeviceAgent with real OCR, on 1 and then 2 phones at once: the
    same per-task success, scores from each episode's events.jsonl, tasks/hour reported."""
    rc = main(["--planner", "oracle", "--tasks", "settings-1,notes-1", "--seeds", "0",
               "--devices", "1,2", "--out", str(tmp_path),
               "--set", "agent.speculative_ocr=false"])
    out = capsys.readouterr().out
    assert rc == 0, out
    result = json.loads(out.strip().splitlines()[-1])
    assert result["same_success"] is True and result["success_differences"] == []
    assert set(result["tasks_per_hour"]) == {"1", "2"}
    for n in ("1", "2"):
        run = result["by_devices"][n]
        assert run["n_episodes"] == 2 and run["n_errors"] == 0
        assert run["overall"]["SU"] == 1.0 and run["overall"]["CR"] == 1.0
        assert run["tasks_per_hour"] > 0
        saved = json.loads((tmp_path / f"devices-{n}" / "results.json").read_text())
        for ep in saved["episodes"]:
            assert ep["status"] == "succeeded" and ep["steps"] == ep["reference_steps"] == 3
            events = Path(ep["events"]).read_text()
            assert events.count('"action_done"') == 3 and '"episode_finished"' in events
    by_device = {json.loads((tmp_path / "devices-2" / "results.json").read_text())
                 ["episodes"][i]["device"] for i in range(2)}
    assert len(by_device) == 2  # the two episodes ran on two phones
    assert "tasks/hour" in out and "Settings" in out


@pytest.mark.needs_adb
def test_llm_planner_through_the_loopback_server(
    adb_server: object, openai_server: OpenAIServer, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    openai_server.script(planner_reply("Open app (Settings)"), planner_reply("Click text (Display)"),
                         planner_reply("Click text (Dark mode)"), planner_reply("Stop"),
                         "Complete: yes\nReason: dark mode is on.")
    rc = main(["--planner", "llm", "--tasks", "settings-1", "--seeds", "0", "--out", str(tmp_path),
               "--set", f"llm.base_url={openai_server.base_url}", "--set", "llm.api_key=sk-x",
               "--set", "agent.speculative_ocr=false"])
    assert rc == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["planner"] == "llm" and result["n_errors"] == 0
    assert result["overall"]["SU"] == 1.0 and result["overall"]["PS"] == 1.0
    assert openai_server.pending == 0


@pytest.mark.needs_adb
def test_one_seed_run_twice_takes_the_same_steps(
    adb_server: object, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """Seed 1 has spinners and pop-ups, and a phone's pop-ups follow the launches it has
    seen. Run twice on two phones, once with no settle wait and once with a long one (a
    fast host and a slow one): each phone runs the same tasks, and they take the same
    steps, task by task."""
    steps: list[dict[str, int]] = []
    for n, settle in enumerate(("0", "0.6")):
        out_dir = tmp_path / f"run{n}"
        rc = main(["--planner", "oracle", "--tasks", "settings-1,notes-1,gmail-1",
                   "--seeds", "1", "--devices", "2", "--out", str(out_dir),
                   "--settle-s", settle])
        out = capsys.readouterr().out
        assert rc == 0, out
        saved = json.loads((out_dir / "results.json").read_text())
        steps.append({ep["task"]: ep["steps"] for ep in saved["episodes"]})
        assert all(ep["SU"] == 1.0 for ep in saved["episodes"])
        # phone i runs tasks i, i+N...: not whichever phone is free first
        device = {ep["task"]: ep["device"] for ep in saved["episodes"]}
        assert device["settings-1"] == device["gmail-1"] != device["notes-1"]
    assert len(steps[0]) == 3 and steps[0] == steps[1]
    # the seed's perturbations cost steps beyond the reference: the case is not trivial
    assert sum(steps[0].values()) > 9
