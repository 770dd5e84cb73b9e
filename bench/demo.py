"""Mobile-Eval-sim through the real actors: ``mobagent demo`` and the agent figures.

Several simulated phones behind the adb server, an embedded broker, one ``AgentHost``
(the real capture, perception, actuator and reflector actors), the ORACLE planner
(``bench/oracle.py``) and a queue of (task, seed) episodes shared by the phones. After
each action the simulator's milestone flags are read (the benchmark's view, never the
agent's) so each episode is scored SU / PS / RE / CR (``sim/eval/metrics.py``). At the
end: the results table, ``results.json``, per-phase step latencies, and the HTML report.

Run the figures: ``.venv/bin/python -m bench.demo --seeds 0,1,2 --tasks all --phones 2``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import msgspec

from actors.config import AgentConfig, load_agent_config
from actors.host import AgentHost
from actors.perception import PerceptionActor
from actors.planner import Policy
from bench.oracle import OraclePolicy
from runtime.config import default_config_path
from runtime.device import AdbDevice
from runtime.log import configure_logging
from runtime.messages import ActionDone, Instruction, Msg, StepTiming
from sim.eval.metrics import EpisodeScore, StepRecord, score_episode
from sim.eval.report import EpisodeResult, summary, table_by_app_and_tier
from sim.eval.task import Task
from sim.eval.tasks import TASKS, get_task
from sim.fleet import SimFleet
from sim.phone import SimPhone

# The README's demo set: one task per app family that the oracle solves on seed 0, with
# every operation kind the simulator exercises (open, text, icon, type, page down).
DEMO_TASKS = ("settings-1", "notes-2", "google-play-1", "google-maps-2", "amazon-music-1",
              "tiktok-1")
PHASES = ("capture", "perception", "llm", "act", "reflection")


@dataclass
class Slot:
    """What one phone is doing now, for the oracle and the milestone tracker."""

    phone: SimPhone
    task: Task | None = None
    steps: list[StepRecord] = field(default_factory=list)
    timings: list[dict[str, float]] = field(default_factory=list)

    def observe(self, msg: Msg) -> None:
        if self.task is None:
            return
        if isinstance(msg, ActionDone) and msg.ok:
            self.steps.append(StepRecord(msg.operation, self.task.milestone_flags(self.phone)))
        elif isinstance(msg, StepTiming):
            self.timings.append(dict(msg.phases))


@dataclass
class SuiteResult:
    results: list[EpisodeResult]
    timings: list[dict[str, float]]
    wall_s: float
    out_dir: Path
    report: Path | None = None


def select_tasks(spec: str) -> list[type[Task]]:
    if spec == "all":
        return list(TASKS)
    if spec == "demo":
        return [get_task(t) for t in DEMO_TASKS]
    return [get_task(t.strip()) for t in spec.split(",") if t.strip()]


def latency_table(timings: Sequence[dict[str, float]]) -> dict[str, dict[str, float]]:
    """p50 / p95 seconds per phase over all steps (a phase a step skipped counts as 0)."""
    out: dict[str, dict[str, float]] = {}
    for phase in (*PHASES, "total"):
        vals = sorted(sum(t.values()) if phase == "total" else t.get(phase, 0.0)
                      for t in timings)
        if not vals:
            continue
        q = statistics.quantiles(vals, n=20, method="inclusive") if len(vals) > 1 else vals * 19
        out[phase] = {"p50": round(statistics.median(vals), 4), "p95": round(q[18], 4)}
    return out


async def run_suite(
    tasks: Sequence[type[Task]], seeds: Sequence[int], *, phones: int, out_dir: Path,
    cfg: AgentConfig | None = None, progress: bool = True, report: bool = True,
) -> SuiteResult:
    cfg = cfg or AgentConfig()
    # An in-process broker on a free port: the demo must not collide with a running one.
    if not cfg.bus.url:
        cfg = msgspec.structs.replace(cfg, broker=msgspec.structs.replace(cfg.broker, port=0))
    await anyio.Path(out_dir).mkdir(parents=True, exist_ok=True)
    results: list[EpisodeResult] = []
    timings: list[dict[str, float]] = []
    t0 = time.perf_counter()
    perception = PerceptionActor(settings=cfg.perception, workers=cfg.agent.perception_workers)
    for seed in dict.fromkeys(seeds):
        # A phone's seed (its perturbations: pop-ups, spinners, theme...) is fixed at boot:
        # one fleet per seed.
        queue = [task_cls(seed) for task_cls in tasks]
        fleet = await anyio.to_thread.run_sync(SimFleet(phones, seed=seed).start)
        try:
            await _run_fleet(fleet, queue, cfg, perception, out_dir, progress, results,
                             timings, t0, phones)
        finally:
            await anyio.to_thread.run_sync(fleet.stop)
    wall = time.perf_counter() - t0
    await write_results(out_dir, results, timings, wall, phones)
    res = SuiteResult(results, timings, wall, out_dir)
    if report:
        try:
            from runtime.report import render_report

            res.report = render_report(out_dir)
        except Exception as exc:  # the report is a bonus; the run itself completed
            print(f"(no HTML report: {type(exc).__name__}: {exc})", file=sys.stderr)
    return res


async def _run_fleet(
    fleet: SimFleet, queue: list[Task], cfg: AgentConfig, perception: PerceptionActor,
    out_dir: Path, progress: bool, results: list[EpisodeResult],
    timings: list[dict[str, float]], t0: float, phones: int,
) -> None:
    slots: dict[str, Slot] = {}
    for serial in fleet.serials:
        phone = fleet.phone(serial)
        assert isinstance(phone, SimPhone)
        slots[serial] = Slot(phone)

    def policy_for(serial: str, instr: Instruction) -> Policy:
        slot = slots[serial]
        assert slot.task is not None, "an instruction outside the suite"
        return OraclePolicy(slot.task, slot.phone)

    devices = [AdbDevice(s, capture=cfg.device.capture, timeout_s=cfg.device.timeout_s)
               for s in fleet.serials]
    host = AgentHost(cfg, devices, policy_for, record_dir=out_dir, progress=progress,
                     perception=perception)

    async def worker(serial: str) -> None:
        slot = slots[serial]
        host.agents[serial].observers.append(slot.observe)
        while queue:
            task = queue.pop(0)
            result = await run_one(host, serial, slot, task)
            results.append(result)
            timings.extend(slot.timings)
            await write_results(out_dir, results, timings, time.perf_counter() - t0, phones)
            if progress:
                sc = result.score
                print(f"== {serial} {task.task_id()} seed {task.seed}: SU {sc.su:.0f} "
                      f"PS {sc.ps:.2f} CR {sc.cr:.2f} steps {sc.steps}/{sc.reference_steps}"
                      + (f" ERROR {result.error}" if result.error else ""), flush=True)

    async with anyio.create_task_group() as tg:
        await tg.start(host.run)
        await anyio.sleep(0.2)  # the agents' subscriptions are in place
        async with anyio.create_task_group() as workers:
            for serial in fleet.serials:
                workers.start_soon(worker, serial)
        await anyio.sleep(1.0)  # the recorder writes the last events
        tg.cancel_scope.cancel()


async def write_results(out_dir: Path, results: Sequence[EpisodeResult],
                        timings: Sequence[dict[str, float]], wall: float, phones: int) -> None:
    """``results.json``, rewritten after every episode so an interrupted run keeps its scores."""
    tiers = sorted({r.tier for r in results})
    doc = {
        "summary": summary(results, tiers),
        "episodes": [
            {"task_id": r.task_id, "app": r.app, "tier": r.tier, "seed": r.seed,
             "error": r.error, "score": {"SU": r.score.su, "PS": r.score.ps, "RE": r.score.re,
                                         "CR": r.score.cr, "steps": r.score.steps,
                                         "reference_steps": r.score.reference_steps}}
            for r in results
        ],
        "latency_s": latency_table(timings),
        "wall_s": round(wall, 2),
        "phones": phones,
        "planner": "oracle",
    }
    await anyio.Path(out_dir / "results.json").write_text(json.dumps(doc, indent=2))


async def run_one(host: AgentHost, serial: str, slot: Slot, task: Task) -> EpisodeResult:
    phone = slot.phone
    await anyio.to_thread.run_sync(task.setup, phone)
    initial = task.milestone_flags(phone)
    slot.task, slot.steps, slot.timings = task, [], []
    instr = Instruction(id=f"{task.task_id()}-s{task.seed}-{uuid.uuid4().hex[:6]}",
                        text=task.instruction, task=task.task_id(), device=serial,
                        max_steps=task.step_budget)
    error = None
    try:
        outcome = await host.run_on(serial, instr)
        if outcome.status != "succeeded":
            error = None  # the agent's failure is in the score, not a runner error
    except Exception as exc:  # the runner's own failure
        error = f"{type(exc).__name__}: {exc}"
    success = await anyio.to_thread.run_sync(task.is_successful, phone)
    segments = [m.steps for m in task.milestones()]
    try:
        score = score_episode(segments, slot.steps, success, initial)
    except ValueError as exc:
        error = error or f"scoring: {exc}"
        score = EpisodeScore(0.0, 0.0, None, 0.0, len(slot.steps), sum(map(len, segments)), 0)
    slot.task = None
    return EpisodeResult(task.task_id(), task.app, task.tier, task.seed, score, error)


def print_results(res: SuiteResult, out: Any = None) -> None:
    out = out or sys.stdout
    tiers = sorted({r.tier for r in res.results})
    print(file=out)
    print(table_by_app_and_tier(res.results, tiers), file=out)
    print(file=out)
    lat = latency_table(res.timings)
    print("per-step latency (s):  " + "  ".join(
        f"{k} p50 {v['p50']:.3f} p95 {v['p95']:.3f}" for k, v in lat.items()), file=out)
    print(f"{len(res.results)} episodes in {res.wall_s:.1f}s; results: "
          f"{res.out_dir / 'results.json'}", file=out)
    if res.report is not None:
        print(f"report: {res.report}", file=out)
    else:
        print(f"run directory: {res.out_dir}", file=out)


def default_out(prefix: str) -> Path:
    return Path("runs") / f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Mobile-Eval-sim through the real actors (oracle).")
    p.add_argument("--tasks", default="demo", help="'demo', 'all', or task ids, comma-separated")
    p.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    p.add_argument("--phones", type=int, default=2)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    tasks = select_tasks(args.tasks)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    # configs/default.toml, then MOBAGENT_SECTION__KEY variables (e.g.
    # MOBAGENT_AGENT__SPECULATIVE_OCR=false: with the instant oracle it only adds CPU load)
    cfg = load_agent_config(default_config_path())
    configure_logging(msgspec.structs.replace(cfg.log, level="warning"))
    res = anyio.run(lambda: run_suite(tasks, seeds, phones=args.phones, cfg=cfg,
                                      out_dir=args.out or default_out("eval"),
                                      progress=not args.quiet))
    print_results(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
