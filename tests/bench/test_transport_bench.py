"""bench/transport.py: adb against scrcpy at one phone, its one JSON line's shape."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench.transport import KEYS


@pytest.mark.needs_adb
def test_one_phone_on_both_transports_gives_the_five_numbers(tmp_path: Path) -> None:
    from devices.scrcpy import ScrcpyError, server_jar

    try:
        server_jar()
    except ScrcpyError as exc:
        pytest.skip(str(exc))
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "bench.transport", "--devices", "1", "--steps", "3",
         "--think-s", "0.1", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    line = done.stdout.strip().splitlines()[-1]
    result = json.loads(line)
    assert set(result) == {"adb", "scrcpy"}
    for transport in ("adb", "scrcpy"):
        assert set(result[transport]) == {"1"}
        row = result[transport]["1"]
        assert tuple(row) == KEYS
        assert all(isinstance(v, float) and math.isfinite(v) and v >= 0 for v in row.values())
        assert row["fresh_frame_p95_s"] >= row["fresh_frame_p50_s"] > 0
    # the device cost is on: adb's `input` starts a process, scrcpy's control does not
    assert result["adb"]["1"]["tap_p95_s"] >= 0.3 > result["scrcpy"]["1"]["tap_p95_s"]
    assert json.loads((tmp_path / "transport.json").read_text()) == result
    details = json.loads((tmp_path / "transport_details.json").read_text())
    assert details["runs"]["scrcpy"]["1"]["fell_back_to_adb"] == 0
