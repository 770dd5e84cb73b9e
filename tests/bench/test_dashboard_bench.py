"""bench/dashboard.py: one tiny real run (two phones, two browser feeds) keeps its output and
the dashboard's frame cap; the cap check itself fails on a browser that got too many."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.dashboard import browser_figures, spread


def _browser(frames: int, window_s: float) -> dict[str, object]:
    return {"frames": {"p1": frames}, "first": {"p1": 0.0}, "last": {"p1": window_s},
            "messages": frames, "window_s": window_s}


def test_the_cap_check_counts_frames_over_the_whole_connection() -> None:
    ok = browser_figures([_browser(11, 10.0)], 1, 1.0)  # one every second, both ends
    assert ok["cap_held"] and ok["fps_per_browser_phone_max"] == 1.0
    over = browser_figures([_browser(11, 10.0), _browser(30, 10.0)], 1, 1.0)
    assert not over["cap_held"] and over["cap_exceeded"] == ["p1: 30 frames in 10.0 s"]
    assert over["phones_seen_per_browser"] == "1/1"


def test_the_spread_over_pairs_is_a_median_and_a_t_interval() -> None:
    got = spread([0.01, -0.02, 0.04, None])
    assert got["pairs"] == 3 and got["median"] == 0.01 and got["mean"] == 0.01
    # mean +- t(2 df) * s / sqrt(3): s = 0.03, t = 4.303
    assert got["ci95"] == [round(0.01 - 4.303 * 0.03 / 3 ** 0.5, 4),
                           round(0.01 + 4.303 * 0.03 / 3 ** 0.5, 4)]
    assert spread([0.05])["ci95"] is None and spread([])["median"] is None


@pytest.mark.slow
@pytest.mark.needs_adb
def test_a_tiny_run_reports_per_n_and_keeps_the_cap(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    # No LLM delay and a low cap: the phones stream faster than the browsers may be sent.
    done = subprocess.run(
        [sys.executable, str(root / "bench" / "dashboard.py"), "--phones", "2", "--browsers",
         "2", "--steps", "4", "--llm-delay", "0", "--max-fps", "0.5", "--sim-procs", "1",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=280, check=False, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(last) == {"2"}
    got = last["2"]
    assert set(got) == {"dashboard_cpu_s_per_s", "dashboard_cpu_s_per_min",
                        "dashboard_cpu_ms_per_frame", "fps_per_browser_phone_mean",
                        "fps_per_browser_phone_max", "max_fps", "cap_held",
                        "frames_dropped_stale",
                        "bus_fps_per_phone", "ratio_without", "ratio_with", "ratio_cost",
                        "ratio_cost_per_pair", "ratio_cost_spread",
                        "fleet_cpu_ms_per_step_without", "fleet_cpu_ms_per_step_with",
                        "fleet_cpu_cost", "errors"}
    assert got["errors"] == 0 and got["max_fps"] == 0.5 and got["cap_held"] is True
    assert got["dashboard_cpu_s_per_s"] > 0 and got["ratio_without"] > 0 < got["ratio_with"]
    assert got["dashboard_cpu_ms_per_frame"] > 0
    # The fleet's own CPU was counted in both arms (this process and the phones' process).
    assert got["fleet_cpu_ms_per_step_without"] > 0 < got["fleet_cpu_ms_per_step_with"]
    assert got["fleet_cpu_cost"]["pairs"] == 1 and got["fleet_cpu_cost"]["ci95"] is None
    res = json.loads((tmp_path / "dashboard.json").read_text())["results"]
    assert set(res) == {"1-phone baseline", "2"}
    two = res["2"]
    assert two["phones_seen_per_browser"] == "2/2"  # every browser saw every phone's screen
    assert two["repeats"] == 1 and len(two["ratio_cost_per_pair"]) == 1
    dash = two["runs"][0]["dashboard"]
    assert dash["feeds"] == 2 and dash["frames_in"] >= 2 * 4  # a Frame per step at least
    # Every frame a browser got went through the server's gate (the last few may still have
    # been on their way when the browsers closed).
    assert 0 < two["frames_received"] <= dash["frames_sent"]
