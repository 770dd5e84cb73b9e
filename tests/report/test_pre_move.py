"""A recording written before the house was rearranged (commit 6f8f7f6) still renders and
still replays: the events format did not change with the move, and this keeps it so."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from host.commands import recorded_actions
from recording.reader import episode_events_file, read_events
from runtime.cli import main

# One Mobile-Eval-sim episode (settings-1, oracle planner) recorded by the pre-move code;
# frames 2 and 3 were dropped to keep the fixture small, frames 1 and 4 are real JPEGs.
PRE_MOVE = Path(__file__).parent.parent / "fixtures" / "recordings" / "pre-move"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    # `report` writes report.html into the run dir: render a copy, not the repository.
    return Path(shutil.copytree(PRE_MOVE, tmp_path / "pre-move"))


def test_report_command_renders_a_pre_move_recording(
        run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(run_dir)]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == str(run_dir / "report.html")
    assert "1 episode, 4 steps" in out.err
    page = (run_dir / "report.html").read_text()
    steps = re.findall(r'<section class="step" id="ep0-s(\d+)" data-step="(\d+)" '
                       r'data-episode="settings-1-s0"', page)
    assert [int(n) for _, n in steps] == [1, 2, 3, 4]
    assert "Turn on the dark mode." in page and 'data-status="succeeded"' in page
    assert "Open app (Settings)" in page  # step 1's plan, as recorded
    # the kept frames are shown by relative path, the dropped ones are noted as missing
    shown = re.findall(r'<img src="([^"]+)" alt="screen at step (\d+)"', page)
    assert shown == [("settings-1-s0/frames/1-4d939561acda-31.jpg", "1"),
                     ("settings-1-s0/frames/4-5bc3158f313d-34.jpg", "4")]
    assert all((run_dir / src).is_file() for src, _ in shown)
    assert page.count("screenshot missing") == 2
    assert "frame image frames/2-0fb5dd1a9edc-32.jpg is missing" in page


def test_replay_reads_a_pre_move_recording(run_dir: Path) -> None:
    actions = recorded_actions(run_dir / "settings-1-s0")
    assert [a["operation"]["op"] for a in actions] == ["open_app", "click_text", "click_text"]
    assert recorded_actions(run_dir) == actions  # a run dir with one episode names it


def test_one_reader_notes_bad_lines(tmp_path: Path) -> None:
    good = (PRE_MOVE / "settings-1-s0" / "events.jsonl").read_bytes()
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"{not json\n" + good + b'{"event": "plan", "st')
    events, notes = read_events(path, "ep")
    assert len(events) == 34
    assert notes == ["ep line 1: not valid JSON (Expecting property name enclosed in double "
                     "quotes at column 2); skipped",
                     "ep line 36: truncated line (the file ends mid-line); skipped"]
    assert read_events(tmp_path / "nope.jsonl", "nope")[1][0].startswith("nope: cannot read")


def test_episode_events_file_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no events.jsonl"):
        episode_events_file(tmp_path)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "events.jsonl").write_text("")
    with pytest.raises(ValueError, match="holds 2 episodes"):
        episode_events_file(tmp_path)
