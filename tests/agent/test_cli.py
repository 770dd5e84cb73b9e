"""``mobagent run`` / ``demo`` / ``replay`` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from host.commands import recorded_actions
from runtime.cli import main
from sim.eval.tasks import get_task
from tests.agent.conftest import SimDevice
from tests.fixtures.adb import AdbServer

pytestmark = [pytest.mark.needs_adb]


def _mobagent(*args: str, env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runtime.cli", *args], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False,
                          cwd=Path(__file__).resolve().parents[2])


def _env(adb: AdbServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k != "OPENAI_API_KEY" and not k.startswith("MOBAGENT_")}
    env.update(adb.env)
    return env


def test_run_without_a_key_says_how(adb_server: AdbServer) -> None:
    res = _mobagent("run", "Turn on dark mode", env=_env(adb_server), timeout=60)
    assert res.returncode == 2, res.stderr
    assert "OPENAI_API_KEY" in res.stderr
    assert "--planner oracle --task" in res.stderr
    res = _mobagent("run", "--planner", "oracle", "x", env=_env(adb_server), timeout=60)
    assert res.returncode == 2 and "--task" in res.stderr


def test_demo_then_replay(adb_server: AdbServer, sim_device: SimDevice, tmp_path: Path) -> None:
    out = tmp_path / "demo"
    res = _mobagent("demo", "--tasks", "settings-1", "--phones", "1", "--quiet", "--out",
                    str(out), env=_env(adb_server))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Settings" in res.stdout and "SU" in res.stdout
    assert f"report: {out / 'report.html'}" in res.stdout
    assert (out / "report.html").is_file()
    results = json.loads((out / "results.json").read_text())
    assert results["summary"]["overall"]["SU"] == 1.0
    assert set(results["latency_s"]) >= {"capture", "perception", "act", "reflection", "total"}
    episodes = [p for p in out.iterdir() if (p / "events.jsonl").is_file()]
    assert len(episodes) == 1
    actions = recorded_actions(episodes[0])
    assert [a["operation"]["op"] for a in actions] == ["open_app", "click_text", "click_text"]

    # the recorded actions, at the recorded points, redo the task on another phone
    task = get_task("settings-1")(0)
    task.setup(sim_device.phone)
    assert not task.is_successful(sim_device.phone)
    rc = main(["replay", str(episodes[0]), "--device", sim_device.serial])
    assert rc == 0
    assert task.is_successful(sim_device.phone)


def test_replay_refuses_a_bad_directory(tmp_path: Path) -> None:
    assert main(["replay", str(tmp_path)]) == 2


def test_run_with_the_llm_on_a_simulated_phone(adb_server: AdbServer, tmp_path: Path) -> None:
    from tests.fixtures.openai_server import OpenAIServer, planner_reply

    with OpenAIServer() as srv:
        srv.script(planner_reply("Open app (Settings)"), planner_reply("Click text (Display)"),
                   planner_reply("Click text (Dark mode)"), planner_reply("Stop"),
                   "Complete: yes\nReason: dark mode is on.")
        res = _mobagent("--set", f"llm.base_url={srv.base_url}", "--set", "llm.api_key=sk-x",
                        "run", "--task", "settings-1", "--out", str(tmp_path / "run"),
                        env=_env(adb_server))
        assert res.returncode == 0, res.stderr[-3000:]
        assert srv.pending == 0
    assert "succeeded after 4 steps" in res.stdout
    assert "task settings-1: success" in res.stdout, res.stdout
    assert "sk-x" not in res.stdout + res.stderr
