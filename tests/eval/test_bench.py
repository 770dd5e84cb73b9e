"""bench/mobile_eval.py: argument parsing, the table and summary, and one real oracle episode."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench.mobile_eval import main, package_map, parse_ints
from sim.eval.metrics import EpisodeScore
from sim.eval.report import EpisodeResult, summary, table_by_app_and_tier


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


def test_llm_planner_says_what_it_needs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--planner", "llm", "--out", str(tmp_path)]) == 2
    assert "issue 6" in capsys.readouterr().err


def test_unknown_task_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--tasks", "facebook-1", "--out", str(tmp_path), "--transport", "inprocess"]) == 2
    assert "no task matches" in capsys.readouterr().err


def test_package_map_knows_the_paper_names() -> None:
    m = package_map()
    assert m["google maps"] == m["maps"] and m["google play"] == m["play store"]


def test_one_oracle_episode_through_perception(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Real OCR on real rendered frames: Settings -> Display -> Dark mode, seed 0."""
    rc = main(["--planner", "oracle", "--tasks", "settings-1", "--seeds", "0", "--settle-s", "0",
               "--transport", "inprocess", "--out", str(tmp_path)])  # seed 0: no spinners
    assert rc == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    result = json.loads(last)
    assert result["n_episodes"] == 1 and result["n_errors"] == 0
    assert result["overall"]["SU"] == 1.0
    traj = json.loads((tmp_path / "episodes" / "settings-1_seed0" / "trajectory.json").read_text())
    assert traj["steps"][0]["action"] == "Open app (Settings)"
    assert traj["success"] is True
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["episodes"][0]["task"] == "settings-1"


@pytest.mark.needs_adb
def test_one_oracle_episode_through_adb(adb_server: object, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The real path: SimFleet phones behind a private adb server, driven with adbutils."""
    rc = main(["--planner", "oracle", "--tasks", "settings-2", "--seeds", "0", "--settle-s", "0",
               "--transport", "adb", "--out", str(tmp_path)])
    assert rc == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["transport"] == "adb" and result["n_errors"] == 0
    assert result["overall"]["SU"] == 1.0
