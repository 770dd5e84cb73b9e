"""Mobile-Eval-sim on simulated phones, through the real agent: what ``mobagent demo`` and
``mobagent bench mobile_eval`` run.

Every episode runs on the host's one runner (``host.runner.agent_host``: the fleet on a
fixed list of phones, a ``DeviceAgent`` per phone): capture, perception (real OCR and icon
grounding), the actuator through the adb server, the reflector, and the recorder.
The phones are simulated (``sim.fleet.SimFleet``, one fleet of N phones per seed, since a
phone's seed is fixed at boot); phone i of N takes tasks i, i+N, ..., so N episodes run at
once on one host with one shared perception pool. The phones keep spinners and toasts on
a step clock (``sim/phone/clock.py``): the same seed, planner and N take the same steps.
The planner is the oracle (``host/oracle.py``, benchmark stand-in) unless the caller
passes another.

Scoring (definitions in ``sim/eval/metrics.py``). SU is the task's ``is_successful`` on the
phone's own state after the episode. The steps are read back from the recorder's
``events.jsonl``: each ``ActionDone`` with ``ok`` is one step, an operation performed on
the phone. The milestone flags after a step are read from the phone's state by a probe
wrapped around the policy, at the start of the next step (after the settle wait and the
next frame) or at the end of the episode; the policy never sees them.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import msgspec

from actors.config import AgentConfig
from actors.episode import EpisodeOutcome
from actors.perception import PerceptionEngine, engine_for
from actors.planner import Choice, Completion, Decision, Policy, StepContext
from devices.discovery import FixedDevices
from host.fleet import FleetHost
from host.runner import AgentHostConfig, agent_host
from models.llm.messages import ChatModel
from protocol.messages import Instruction
from protocol.operations import Operation, Wait
from recording.reader import read_events
from recording.recorder import safe_name
from sim.eval.metrics import EpisodeScore, StepRecord, score_episode
from sim.eval.report import EpisodeResult, summary, table_by_app_and_tier
from sim.eval.task import Task
from sim.eval.tasks import TASKS, get_task
from sim.fleet import SimFleet
from sim.phone import SimPhone
from sim.phone_api import DeviceState

PHASES = ("capture", "perception", "llm", "act", "reflection")
RECORDER_WAIT_S = 15.0  # for the recorder to write an episode's last events
Flags = tuple[bool, ...]
MakePolicy = Callable[[Task, SimPhone], Policy]


# ---- scoring from the recorded events -------------------------------------------------------


class MilestoneProbe:
    """A policy wrapper that reads the task's milestone flags from the phone at each step.

    The flags at the start of step k are the state after step k-1 (nothing acts on the
    phone in between). The benchmark's view only: the wrapped policy never sees them.
    """

    def __init__(self, inner: Policy, task: Task, phone: SimPhone) -> None:
        self.inner = inner
        self.name = inner.name
        self.task = task
        self.phone = phone
        self.flags_at: dict[int, Flags] = {}  # step -> flags when that step began

    async def decide(self, ctx: StepContext) -> Decision:
        self.flags_at.setdefault(ctx.step, self.task.milestone_flags(self.phone))
        decision = await self.inner.decide(ctx)
        if isinstance(decision.operation, Wait) and self.phone.device_state.streams:
            # The phone's step clock moves per screencap on adb and per action on the stream
            # (sim/adb/scrcpy_server.py); a Wait is neither, yet a step passes on the phone.
            self.phone.screen_read()
        return decision

    async def choose(
        self, ctx: StepContext, target: str, image: bytes, labels: Sequence[int],
        texts: Sequence[str], points: Sequence[tuple[int, int]] = (), reason: str = "",
        crops: Sequence[bytes] = (),
    ) -> Choice:
        return await self.inner.choose(ctx, target, image, labels, texts, points, reason=reason,
                                       crops=crops)

    async def check_completion(self, ctx: StepContext) -> Completion:
        return await self.inner.check_completion(ctx)


def steps_from_events(events: Sequence[dict[str, Any]], flags_at: dict[int, Flags],
                      final: Flags) -> list[StepRecord]:
    """The episode's steps (ok ActionDone events, by step) with the flags after each one."""
    done = sorted((ev for ev in events if ev.get("event") == "action_done" and ev.get("ok")),
                  key=lambda ev: int(ev.get("step") or 0))
    later = sorted(flags_at.items())
    out = []
    for ev in done:
        step = int(ev.get("step") or 0)
        after = next((flags for k, flags in later if k > step), final)
        out.append(StepRecord(msgspec.convert(ev["operation"], Operation), after))
    return out


def step_timings(events: Sequence[dict[str, Any]]) -> list[dict[str, float]]:
    return [dict(ev.get("phases") or {}) for ev in events if ev.get("event") == "step_timing"]


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


# ---- running the suite ----------------------------------------------------------------------


@dataclass
class Episode:
    """One scored episode and what the runner saw of it."""

    result: EpisodeResult
    serial: str
    status: str  # the agent's own outcome: succeeded | failed | cancelled
    reason: str
    wall_s: float
    directory: str
    timings: list[dict[str, float]] = field(default_factory=list)
    # how its frames and actions reached the phone: {"captures": {"stream": n, "png": m},
    # "actions": {"stream": n, "adb": m}} (from the recorded Frame and ActionDone events)
    paths: dict[str, dict[str, int]] = field(default_factory=dict)


def paths_of(events: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    captures: Counter[str] = Counter(str(ev.get("capture_path") or "?") for ev in events
                                     if ev.get("event") == "frame")
    actions: Counter[str] = Counter(str(ev.get("path") or "?") for ev in events
                                    if ev.get("event") == "action_done" and ev.get("ok")
                                    and ev.get("path") != "")
    return {"captures": dict(captures), "actions": dict(actions)}


def stream_share(episodes: Sequence[Episode]) -> dict[str, float | None]:
    """The share of the suite's captures and of its actions that went through the scrcpy
    stream (None: there were none)."""
    out: dict[str, float | None] = {}
    for kind in ("captures", "actions"):
        total: Counter[str] = Counter()
        for e in episodes:
            total.update(e.paths.get(kind, {}))
        n = sum(total.values())
        out[kind] = round(total["stream"] / n, 3) if n else None
    return out


@dataclass
class SuiteResult:
    episodes: list[Episode]
    wall_s: float
    devices: int
    out_dir: Path
    report: Path | None = None

    @property
    def results(self) -> list[EpisodeResult]:
        return [e.result for e in self.episodes]

    @property
    def timings(self) -> list[dict[str, float]]:
        return [t for e in self.episodes for t in e.timings]

    @property
    def tasks_per_hour(self) -> float:
        return len(self.episodes) * 3600.0 / self.wall_s if self.wall_s > 0 else 0.0


def oracle_policy(task: Task, phone: SimPhone) -> Policy:
    from host.oracle import OraclePolicy

    return OraclePolicy(task, phone)


async def run_suite(
    tasks: Sequence[type[Task]], seeds: Sequence[int], *, devices: int, out_dir: Path,
    cfg: AgentConfig | None = None, make_policy: MakePolicy = oracle_policy,
    step_lines: bool = False, on_episode: Callable[[Episode], None] | None = None,
    report: bool = False, planner: str = "oracle",
    device_profiles: Sequence[str] = ("sim",), states: Sequence[DeviceState] = (),
    llm: ChatModel | None = None,
) -> SuiteResult:
    """Every (task, seed) through the real agent on ``devices`` simulated phones at once;
    ``device_profiles`` and ``states`` are handed to the phones in turn (a mixed fleet);
    ``llm`` serves the grounder role when ``perception.*_grounding`` asks for it."""
    cfg = cfg or AgentHostConfig()
    if not cfg.bus.url:  # an embedded broker on a free port: never collide with a running one
        cfg = msgspec.structs.replace(cfg, broker=msgspec.structs.replace(cfg.broker, port=0))
    await anyio.Path(out_dir).mkdir(parents=True, exist_ok=True)
    episodes: list[Episode] = []
    perception = (engine_for(cfg, llm)
                  if cfg.agent.perception == "local" else None)  # remote: workers serve it
    t0 = time.perf_counter()
    for seed in dict.fromkeys(seeds):
        queue = [task_cls(seed) for task_cls in tasks]
        # the step clock: the same seed, planner and phone count take the same steps
        fleet = await anyio.to_thread.run_sync(SimFleet(
            devices, seed=seed, device_profile=list(device_profiles), state=list(states) or None,
            step_clock=True).start)
        try:
            await _run_seed(fleet, queue, cfg, perception, out_dir, make_policy, step_lines,
                            episodes, on_episode)
        finally:
            await anyio.to_thread.run_sync(fleet.stop)
        await write_results(out_dir, episodes, time.perf_counter() - t0, devices, planner)
    res = SuiteResult(episodes, time.perf_counter() - t0, devices, out_dir)
    await write_results(out_dir, episodes, res.wall_s, devices, planner)
    if report:
        try:
            from recording.report import render_report

            res.report = render_report(out_dir)
        except Exception as exc:  # the report is a bonus; the run itself completed
            print(f"(no HTML report: {type(exc).__name__}: {exc})", file=sys.stderr)
    return res


async def _run_seed(
    fleet: SimFleet, queue: list[Task], cfg: AgentConfig, perception: PerceptionEngine | None,
    out_dir: Path, make_policy: MakePolicy, step_lines: bool, episodes: list[Episode],
    on_episode: Callable[[Episode], None] | None,
) -> None:
    probes: dict[str, MilestoneProbe] = {}
    current: dict[str, Task] = {}

    def policy_for(serial: str, instr: Instruction) -> Policy:
        task, phone = current[serial], fleet.phone(serial)
        assert isinstance(phone, SimPhone)
        probes[serial] = MilestoneProbe(make_policy(task, phone), task, phone)
        return probes[serial]

    host = agent_host(cfg, policy_for, source=FixedDevices(fleet.serials), record_dir=out_dir,
                      perception=perception, progress=step_lines)

    # Phone i runs tasks i, i+N, i+2N...: a phone's popups and spinners follow the launches
    # it has seen, so a shared queue (first free phone takes the next task) would make
    # the steps depend on which phone was free first.
    shares = {serial: queue[i::len(fleet.serials)] for i, serial in enumerate(fleet.serials)}

    async def worker(serial: str) -> None:
        for task in shares[serial]:
            current[serial] = task
            ep = await run_episode(host, serial, task, fleet.phone(serial), probes, out_dir)
            episodes.append(ep)
            if on_episode is not None:
                on_episode(ep)

    async with anyio.create_task_group() as tg:
        await tg.start(host.run)  # started: every actor is subscribed
        async with anyio.create_task_group() as workers:
            for serial in fleet.serials:
                workers.start_soon(worker, serial)
        tg.cancel_scope.cancel()


async def run_episode(host: FleetHost, serial: str, task: Task, phone: Any,
                      probes: dict[str, MilestoneProbe], record_dir: Path) -> Episode:
    episode_id = f"{task.task_id()}-s{task.seed}"
    ep_dir = record_dir / safe_name(episode_id)
    if ep_dir.exists():  # a rerun into the same directory replaces the episode
        await anyio.to_thread.run_sync(shutil.rmtree, ep_dir)
    await anyio.to_thread.run_sync(task.setup, phone)
    initial = task.milestone_flags(phone)
    instr = Instruction(id=f"{episode_id}-{os.urandom(3).hex()}", text=task.instruction,
                        task=task.task_id(), device=serial, max_steps=task.step_budget,
                        episode_id=episode_id)
    t0 = time.perf_counter()
    error: str | None = None
    status, reason, executed = "failed", "", -1
    try:
        got = await host.run_on(serial, instr)
        status, reason = got.finished.status, got.finished.reason
        if isinstance(got.result, EpisodeOutcome):  # the agent ran it: its operations
            executed = len(got.result.operations)
        else:
            error = f"the episode never reached the agent: {reason}"
    except Exception as exc:  # the runner's own failure, not the agent's
        error = f"{type(exc).__name__}: {exc}"
    wall = time.perf_counter() - t0
    success = await anyio.to_thread.run_sync(task.is_successful, phone)
    final = task.milestone_flags(phone)
    events = await recorded_events(ep_dir / "events.jsonl", executed)
    probe = probes.pop(serial, None)
    segments = [m.steps for m in task.milestones()]
    try:
        steps = steps_from_events(events, probe.flags_at if probe else {}, final)
        if executed >= 0 and len(steps) != executed and error is None:
            error = f"recorder: {len(steps)} of {executed} actions in events.jsonl"
        score = score_episode(segments, steps, success, initial)
    except (ValueError, KeyError, msgspec.ValidationError) as exc:
        error = error or f"scoring: {type(exc).__name__}: {exc}"
        score = EpisodeScore(1.0 if success else 0.0, 0.0, None, 0.0, 0,
                             sum(map(len, segments)), 0)
    result = EpisodeResult(task.task_id(), task.app, task.tier, task.seed, score, error)
    return Episode(result, serial, status, reason, wall, str(ep_dir), step_timings(events),
                   paths_of(events))


async def recorded_events(path: Path, executed: int) -> list[dict[str, Any]]:
    """The episode's events once the recorder has its outcome and ``executed`` performed
    actions (or after ``RECORDER_WAIT_S``: then what it has)."""
    events: list[dict[str, Any]] = []
    with anyio.move_on_after(RECORDER_WAIT_S):
        while True:
            # A line still being written, or no file yet, is skipped (a note, not an error).
            events, _ = await anyio.to_thread.run_sync(read_events, path, path.name)
            finished = any(ev.get("event") == "episode_finished" for ev in events)
            actions = sum(1 for ev in events if ev.get("event") == "action_done" and ev.get("ok"))
            if finished and actions >= executed:
                break
            await anyio.sleep(0.1)
    return events


# ---- results ----------------------------------------------------------------------------------


def suite_summary(res: SuiteResult, tiers: Sequence[int]) -> dict[str, Any]:
    summ = summary(res.results, tiers)
    summ.update({"tasks_per_hour": round(res.tasks_per_hour, 1), "devices": res.devices,
                 "wall_s": round(res.wall_s, 1), "stream_share": stream_share(res.episodes)})
    return summ


async def write_results(out_dir: Path, episodes: Sequence[Episode], wall: float, devices: int,
                        planner: str, extra: dict[str, Any] | None = None) -> None:
    """``results.json``, rewritten after every seed so an interrupted run keeps its scores."""
    res = SuiteResult(list(episodes), wall, devices, out_dir)
    tiers = sorted({e.result.tier for e in episodes})
    doc = {
        "config": {"planner": planner, "devices": devices, **(extra or {})},
        "summary": suite_summary(res, tiers),
        "episodes": [
            {"task": e.result.task_id, "app": e.result.app, "tier": e.result.tier,
             "seed": e.result.seed, "SU": e.result.score.su, "PS": e.result.score.ps,
             "RE": e.result.score.re, "CR": e.result.score.cr, "steps": e.result.score.steps,
             "reference_steps": e.result.score.reference_steps, "status": e.status,
             "reason": e.reason, "device": e.serial, "wall_s": round(e.wall_s, 2),
             "events": str(Path(e.directory) / "events.jsonl"), "error": e.result.error,
             "paths": e.paths}
            for e in episodes
        ],
        "latency_s": latency_table(res.timings),
    }
    await anyio.Path(out_dir / "results.json").write_text(json.dumps(doc, indent=1))


def print_results(res: SuiteResult, out: Any = None) -> None:
    """The paper's table, per-step latencies, throughput and where the results are."""
    out = out or sys.stdout
    tiers = sorted({r.tier for r in res.results})
    print(file=out)
    print(table_by_app_and_tier(res.results, tiers), file=out)
    print(file=out)
    lat = latency_table(res.timings)
    print("per-step latency (s):  " + "  ".join(
        f"{k} p50 {v['p50']:.3f} p95 {v['p95']:.3f}" for k, v in lat.items()), file=out)
    print(f"{len(res.episodes)} episodes on {res.devices} phone(s) in {res.wall_s:.0f} s: "
          f"{res.tasks_per_hour:.1f} tasks/hour; results: {res.out_dir / 'results.json'}",
          file=out)
    for e in [e for e in res.episodes if e.result.error][:5]:
        print(f"runner error in {e.result.task_id} seed {e.result.seed}: {e.result.error}",
              file=sys.stderr)
    if res.report is not None:
        print(f"report: {res.report}", file=out)


# ---- the demo ---------------------------------------------------------------------------


# The README's demo set: one task per app family that the oracle solves on seed 0, with
# every operation kind the simulator exercises (open, text, icon, type, page down).
DEMO_TASKS = ("settings-1", "notes-2", "google-play-1", "google-maps-2", "amazon-music-1",
              "tiktok-1")


def select_tasks(spec: str) -> list[type[Task]]:
    if spec == "all":
        return list(TASKS)
    if spec == "demo":
        return [get_task(t) for t in DEMO_TASKS]
    return [get_task(t.strip()) for t in spec.split(",") if t.strip()]


def show_episode(ep: Episode) -> None:
    sc = ep.result.score
    print(f"== {ep.serial} {ep.result.task_id} seed {ep.result.seed}: SU {sc.su:.0f} "
          f"PS {sc.ps:.2f} CR {sc.cr:.2f} steps {sc.steps}/{sc.reference_steps}"
          + (f" ERROR {ep.result.error}" if ep.result.error else ""), flush=True)


async def run_demo(
    tasks: Sequence[type[Task]], seeds: Sequence[int], *, phones: int, out_dir: Path,
    cfg: AgentConfig | None = None, progress: bool = True, report: bool = True,
) -> SuiteResult:
    """``mobagent demo``: the suite with every step printed and the HTML report at the end."""
    return await run_suite(tasks, seeds, devices=phones, out_dir=out_dir, cfg=cfg,
                           step_lines=progress, on_episode=show_episode if progress else None,
                           report=report)


def default_out(prefix: str) -> Path:
    return Path("runs") / f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"
