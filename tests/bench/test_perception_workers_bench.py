"""bench/perception_workers.py, tiny: two real ``mobagent perceive`` processes on a real
mosquitto, one SIGKILLed mid-run, and every request still answered."""

from __future__ import annotations

import json
from pathlib import Path

from bench.perception_workers import main
from tests.fixtures.mosquitto import MosquittoBroker


def test_worker_processes_serve_and_a_killed_one_loses_no_request(
    mosquitto: MosquittoBroker, tmp_path: Path,
) -> None:
    out = tmp_path / "pw.json"
    assert main(["--url", mosquitto.url, "--requests", "4", "--concurrency", "4",
                 "--resend-s", "2", "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    for run in ("one_worker", "two_workers", "two_workers_one_killed"):
        r = got[run]
        assert r["answered"] == r["requests"] and r["lost"] == 0 and not r["failed"], r
        assert r["mis_grounded"] == 0
    assert got["one_worker"]["resent"] == 0  # no re-send without a death (patient timeout)
