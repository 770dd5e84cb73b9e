"""``mobagent serve`` as a process: the agent on every phone of a private adb server.

Real parts only: mosquitto, the adb server with rendered SimPhones behind it, the loopback
OpenAI-compatible server answering Mobile-Eval-sim's settings-1 (turn on dark mode), real
OCR in the serve process. ``mobagent submit`` (another process) sends the instruction; a
watcher on the broker sees the episode and the phone's retained status go idle -> busy ->
idle, and the simulated phone's state says the task is done.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from protocol.messages import EpisodeFinished
from runtime.bus import parse_broker_url
from sim.eval.tasks import get_task
from sim.fleet import SimFleet
from tests.fixtures.adb import AdbServer
from tests.fixtures.mosquitto import MosquittoBroker
from tests.fixtures.openai_server import Behaviour, OpenAIServer, RecordedRequest, planner_reply
from tests.fleet.helpers import fleet_client

pytestmark = [pytest.mark.anyio, pytest.mark.needs_adb, pytest.mark.needs_mosquitto]

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "runtime.cli"]
SECRET = "sk-serve-test-NEVER-LOGGED-42"
DARK_MODE = ["Open app (Settings)", "Click text (Display)", "Click text (Dark mode)", "Stop"]


def _llm(script: list[str]) -> Callable[[RecordedRequest], Behaviour]:
    """Planner calls get the script in order; the completion check says yes."""
    plans = iter(script)

    def answer(req: RecordedRequest) -> Behaviour:
        if req.model == "reflect-m":
            return Behaviour.reply("Complete: yes\nReason: dark mode is on.")
        if req.model == "plan-m":
            return Behaviour.reply(planner_reply(next(plans, "Stop")))
        return Behaviour.error(400, f"unexpected model {req.model!r}")

    return answer


def _env(srv: OpenAIServer, adb_server: AdbServer, **extra: str) -> dict[str, str]:
    return {
        **os.environ, "ANDROID_ADB_SERVER_PORT": str(adb_server.port), "ADB_EMU": "0",
        "MOBAGENT_LLM__BASE_URL": srv.base_url, "MOBAGENT_LLM__API_KEY": SECRET,
        "MOBAGENT_LLM__MODELS__PLANNER": "plan-m", "MOBAGENT_LLM__MODELS__CHOOSER": "choose-m",
        "MOBAGENT_LLM__MODELS__REFLECTOR": "reflect-m", "MOBAGENT_LOG__FORMAT": "json",
        **extra,
    }


async def test_serve_runs_the_agent_on_the_phone_an_instruction_names(
    mosquitto: MosquittoBroker, adb_server: AdbServer, sim_fleet: Callable[..., SimFleet],
    tmp_path: Path,
) -> None:
    fleet = sim_fleet(count=2)
    target, other = fleet.serials
    task = get_task("settings-1")(0)
    task.setup(fleet.phone(target))  # type: ignore[arg-type]
    assert not task.is_successful(fleet.phone(target))  # type: ignore[arg-type]
    address = parse_broker_url(mosquitto.url)
    with OpenAIServer(policy=_llm(DARK_MODE)) as srv:
        env = _env(srv, adb_server, MOBAGENT_HOST__NAME="serve-host",
                   # the [fleet] section, through the environment
                   MOBAGENT_FLEET__SERIALS=json.dumps(fleet.serials))
        args = [*CLI, "--broker", mosquitto.url, "--set", "agent.settle_s=0.05",
                "--set", "agent.speculative_ocr=false", "--set", "device.capture=png",
                "--set", "fleet.cancel_grace_s=2", "serve", "--record", str(tmp_path / "rec")]
        async with fleet_client(address, "serve-watch") as client:
            with (tmp_path / "serve.log").open("wb") as logf:
                proc = await anyio.open_process(args, cwd=ROOT, env=env, stdout=logf,
                                                stderr=subprocess.STDOUT)
            try:
                # both phones discovered and idle (the fleet's retained status)
                for serial in (target, other):
                    await client.wait_status(serial, "idle", timeout_s=60)
                done = await anyio.run_process(
                    [*CLI, "--broker", mosquitto.url, "submit", target, task.instruction,
                     "--id", "serve-1", "--task", task.task_id(), "--json", "--timeout", "240"],
                    cwd=ROOT, env=env, check=False)
                out = done.stdout.decode()
                assert done.returncode == 0, (out, done.stderr.decode()[-2000:],
                                              (tmp_path / "serve.log").read_text()[-4000:])
                outcome = json.loads(out.strip().splitlines()[-1])
                assert outcome["status"] == "succeeded" and outcome["instruction_id"] == "serve-1"
                await client.wait_status(target, "idle", timeout_s=20)
            finally:
                if proc.returncode is None:
                    proc.send_signal(signal.SIGTERM)
                with anyio.fail_after(30):
                    await proc.wait()
            # a clean stop says so on each phone's retained status
            await client.wait_status(target, "offline", timeout_s=10)
    log = (tmp_path / "serve.log").read_text()
    assert proc.returncode == 0, log[-3000:]
    assert "Traceback" not in log and SECRET not in log
    # The task is done on the phone's own state; the other phone was not touched.
    assert task.is_successful(fleet.phone(target))  # type: ignore[arg-type]
    assert not [s for s, st, _ in client.status if s == other and st.state == "busy"]
    # On the events topic: the agent announced the episode once, and it succeeded.
    fin = [f for f in client.finished if f.instruction_id == "serve-1"]
    assert len(fin) == 1 and isinstance(fin[0], EpisodeFinished)
    assert fin[0].status == "succeeded" and fin[0].device == target and fin[0].steps == 4
    assert [s.instruction_id for s in client.started] == ["serve-1"]
    # The retained status: idle (discovered) -> busy (the episode) -> idle, from this host.
    states = [st.state for s, st, _ in client.status if s == target]
    compact = [x for i, x in enumerate(states) if i == 0 or states[i - 1] != x]
    assert compact[-4:] == ["idle", "busy", "idle", "offline"], states
    assert all(st.host == "serve-host" for s, st, _ in client.status if s == target)
    # --record: the recorder wrote the episode's events.
    events = list((tmp_path / "rec").glob("*/events.jsonl"))
    assert len(events) == 1 and "episode_finished" in events[0].read_text()
    # The step's actors answered each other through the broker (the recorder saw requests).
    kinds = {json.loads(line)["event"] for line in events[0].read_text().splitlines()}
    assert {"frame_request", "ground_request", "act_request", "reflect_request"} <= kinds, kinds
    assert SECRET not in events[0].read_text()
    assert srv.requests and all(r.headers.get("authorization") == f"Bearer {SECRET}"
                                for r in srv.requests)


def test_serve_without_an_api_key_says_how_to_set_one() -> None:
    env = {k: v for k, v in os.environ.items()
           if k != "OPENAI_API_KEY" and not k.startswith("MOBAGENT_LLM__")}
    res = subprocess.run([*CLI, "--set", "broker.port=1", "serve"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert "OPENAI_API_KEY" in res.stderr and "llm.base_url" in res.stderr
    assert "Traceback" not in res.stderr


def test_serve_help_names_its_options() -> None:
    res = subprocess.run([*CLI, "serve", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0
    for opt in ("--serial", "--record", "--runtime-only", "--perception"):
        assert opt in res.stdout


async def test_stopping_serve_fleet_reports_the_running_episode_and_offline(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet],
) -> None:
    """Cancelling ``serve_fleet`` (what SIGTERM does) is orderly: the running episode ends
    ``failed: host stopping`` and the phone goes ``offline`` while the bus is still up."""
    from host.fleet import FleetHostConfig, serve_fleet
    from protocol.messages import Instruction
    from runtime.config import load_config
    from tests.fleet.helpers import ScriptedWork

    fleet = sim_fleet(count=1, stand_in=True)
    (serial,) = fleet.serials
    cfg = load_config(None, FleetHostConfig, env={}, overrides={
        "bus.url": mosquitto.url, "host.name": "stop-host", "fleet.serials": [serial],
        "fleet.adb_port": fleet.adb_port})
    work = ScriptedWork(steps=50, step_s=0.2)
    async with fleet_client(parse_broker_url(mosquitto.url), "stop-watch") as client:
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: serve_fleet(cfg, work, task_status=task_status))
            await client.wait_status(serial, "idle", timeout_s=30)
            await client.instruct(serial, Instruction(id="long-1", text="a long job"))
            await client.wait_status(serial, "busy", timeout_s=30)
            tg.cancel_scope.cancel()
        await client.wait_finished(["long-1"], timeout_s=10)
        await client.wait_status(serial, "offline", timeout_s=10)
    fin = client.finished_ids()["long-1"]
    assert fin.status == "failed" and fin.reason == "host stopping"
    assert client.status[-1][1].detail == "host stopped"


async def test_serve_with_remote_perception_grounds_on_a_perceive_worker(
    mosquitto: MosquittoBroker, adb_server: AdbServer, sim_fleet: Callable[..., SimFleet],
    tmp_path: Path,
) -> None:
    """``serve --perception remote`` beside a ``mobagent perceive`` process: the host loads
    no models, its ground requests carry their frames to the worker, the task gets done."""
    fleet = sim_fleet(count=1)
    (target,) = fleet.serials
    task = get_task("settings-1")(0)
    task.setup(fleet.phone(target))  # type: ignore[arg-type]
    address = parse_broker_url(mosquitto.url)
    with OpenAIServer(policy=_llm(DARK_MODE)) as srv:
        env = _env(srv, adb_server, MOBAGENT_HOST__NAME="remote-host")
        common = [*CLI, "--broker", mosquitto.url, "--set", "agent.settle_s=0.05",
                  "--set", "device.capture=png"]
        async with fleet_client(address, "remote-watch") as client:
            with (tmp_path / "perceive.log").open("wb") as wlog:
                worker = await anyio.open_process([*common, "perceive"], cwd=ROOT, env=env,
                                                  stdout=wlog, stderr=subprocess.STDOUT)
            with (tmp_path / "serve.log").open("wb") as logf:
                proc = await anyio.open_process(
                    [*common, "serve", "--perception", "remote", "--record",
                     str(tmp_path / "rec")], cwd=ROOT, env=env, stdout=logf,
                    stderr=subprocess.STDOUT)
            try:
                await client.wait_status(target, "idle", timeout_s=60)
                with anyio.fail_after(60):  # the worker's subscription is in place (its log)
                    while "perceive_ready" not in (tmp_path / "perceive.log").read_text():  # noqa: ASYNC110
                        await anyio.sleep(0.2)
                done = await anyio.run_process(
                    [*CLI, "--broker", mosquitto.url, "submit", target, task.instruction,
                     "--id", "remote-1", "--json", "--timeout", "240"],
                    cwd=ROOT, env=env, check=False)
                assert done.returncode == 0, ((tmp_path / "serve.log").read_text()[-3000:],
                                              (tmp_path / "perceive.log").read_text()[-3000:])
            finally:
                for p in (proc, worker):
                    if p.returncode is None:
                        p.send_signal(signal.SIGTERM)
                with anyio.fail_after(30):
                    await proc.wait()
                    await worker.wait()
    assert task.is_successful(fleet.phone(target))  # type: ignore[arg-type]
    events = next((tmp_path / "rec").glob("*/events.jsonl")).read_text().splitlines()
    grounds = [json.loads(e) for e in events if '"ground_request"' in e]
    assert grounds and all(g.get("frame") for g in grounds)  # carried, not by reference
    assert any('"grounded"' in e for e in events)
    for log in ("serve.log", "perceive.log"):
        assert "Traceback" not in (tmp_path / log).read_text()
