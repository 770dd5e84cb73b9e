"""Fleet throughput: N simulated phones driven through the fleet manager and the bus.

    python bench/fleet.py --devices 1,2,4,8,16,32 --llm-delay 3 --out DIR [--steps 8]
    python bench/fleet.py --workload mobile-eval --devices 1,4,16 --llm-delay 3 --out DIR

For each N: N simulated phones (the realistic latency profile) behind a private adb server,
a broker (mosquitto when installed, else the embedded one), one ``FleetManager`` with its
instruction gate, and one instruction per phone of ``--steps`` steps. The loopback
OpenAI-compatible server answers every call with a scripted planner reply after a fixed
delay (``--llm-delay``).

``--workload swipes`` (the default) is a scripted back-and-forth of swipes and a Stop, OCR
off. ``--workload mobile-eval`` runs Mobile-Eval-sim tasks (``--tasks``, ``--episodes`` per
phone; at N = 1 every task once at least) through the same agent loop with real perception
(speculative OCR on, ``--perception-workers`` frames at once, ``--ocr-threads`` onnxruntime
threads each) and the default settle wait; the model is the benchmark's STAND-IN
(``StandInModel``): the loopback server answers with what ``host/oracle.py`` decides
(reference operations, its perfect chooser). Its phones run in this process, because the
oracle and the scoring read their state; each phone's clock is a minute after the previous
one's, so two phones on the same task do not take identical frames that the host reads once
for both (``--same-clock``: they do). Its step rate is each phone's steps over its own
busy time (episode set-up excluded), summed; the overhead also leaves out a chooser call's
LLM time and the settle wait. It adds per N: perception CPU seconds per step (p50, mean:
the thread CPU of the work done for the phone's frames since its previous step, speculative
reads included, from ``runtime.cpu_ledger``; and a table of the run's CPU per step by stage:
detector, recognition, band diff, icon proposals, matching, capture's encoding, decoding,
with the detector's input Mpx, lines and recognised kpx per step), OCR
reads per step (whole frame, changed bands only, unchanged frame, frame already read),
grounding latency (p50, p95, at the perception service) and SU; and the tasks whose SU
differs from N = 1. ``--levers default,whole,none,lazy,priority,both,cache,lazy+cache,lazy+first,onnxruntime,rects,f32,bf16``
runs each N once per perception lever variant, side by side (``default``: the agent's
defaults, the speculative read at low priority and the OCR line cache on; ``priority``: the
low priority alone; ``lazy``: ``agent.lazy_ocr`` on, the pool one FIFO queue; ``both``: lazy
and priority; ``cache``: the line cache alone (``perception.ocr.rec_cache``);
``lazy+cache``: all three; ``onnxruntime``: the defaults with OCR's models on onnxruntime
(``perception.ocr.runtime``; ``auto``, the default, takes OpenVINO on a CPU-only host);
``rects``: the defaults with changed places re-read as rectangles, not full-width bands
(``perception.ocr_cache.rects``); ``f32`` / ``bf16``: the defaults with OpenVINO's arithmetic
for the detector set (``perception.ocr.det_precision``); ``whole``: the defaults with a
grounding that finds no read of its frame reading it whole (``perception.query_first`` off);
``lazy+first``: lazy, priority, the line cache and query_first; ``none``: none, as before
the levers, query_first too); the rows and the
last line's keys are then
``VARIANT/N``, each variant's ratio against its own N = 1. The models are loaded and run
once before the clock starts (a one-off per process, not a step's cost).

``--loop agent`` (the default) runs the agent loop: ``actors.episode.DeviceAgent`` per phone
under the fleet, its capture, actuator and reflector requests answered by the host's agent
services on the same bus (``actors.services.AgentServices`` beside the fleet: every request
and reply crosses the broker), LLMPolicy through ``models.llm``, with no settle sleep
(swipes). ``--loop own`` is the benchmark's own minimal loop instead: a screenshot
through adbutils, the frame downscaled and JPEG-encoded, one chat-completions call with
the image, the reply's ``Tap (x, y)`` parsed, a tap, a StepTiming event.

``--capture png,raw,auto`` runs each N once per screenshot path (devices/adb.py; default
``png`` alone), side by side; with ``--capture-cost usb2`` the simulated phones charge a
real phone's own cost (sim/device_cost.py: the phone's PNG or raw encode per pixel,
``input``'s process start, and one USB 2.0 hub's bandwidth shared by all of them, so their
phones run in one process and the flat screencap and input delays are off). A table then gives per path and N the capture time
(p50, p95: the agent's screenshot call, adb included), steps/s, and for ``auto`` how often
both paths were timed (``--remeasure-every``, 200 as in the agent) and which the phones
took at the end.

Reported per N: steps/s; the ideal steps/s (N / one phone's step time, measured at N = 1
as wall time per step);
their ratio; the per-step overhead outside the LLM and the device (step wall time minus
the server's fixed delay (agent loop) or the LLM call's wall time (own loop), minus the
wall time of the step's device calls), p50 and p95, with the LLM and device times
themselves; CPU use (this process, all threads: the simulated phones run here too); errors
and fairness (fewest/most steps per phone). Writes DIR/fleet.json and DIR/fleet.png; the
last printed line is one JSON object: per N ``ratio`` and ``overhead_p95_s``, and with
mobile-eval ``perception_cpu_s_mean``, ``perception_cpu_s_p50``, ``ground_p95_s`` and ``SU``.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
import msgspec  # noqa: E402

from devices.adb import REMEASURE_EVERY  # noqa: E402 (no adbutils yet: it comes later)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from anyio.abc import TaskGroup

    from host.fleet import FleetManager
    from runtime.bus import Bus

CAPTURE_PATHS = ("png", "raw", "auto")
ACTION_RE = re.compile(r"Action:\s*Tap\s*\((\d+),\s*(\d+)\)")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    xs = sorted(values)
    k = min(len(xs) - 1, max(0, round(q / 100 * (len(xs) - 1))))
    return xs[k]


@dataclass
class RunStats:
    n: int
    steps: int = 0
    errors: list[str] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)
    overhead_s: list[float] = field(default_factory=list)
    device_s: list[float] = field(default_factory=list)
    llm_s: list[float] = field(default_factory=list)
    phase_sums: dict[str, float] = field(default_factory=dict)  # agent loop: StepTiming phases
    per_phone: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    sim_cpu_s: float = 0.0
    screenshots: int = 0  # the phones' CPU per screenshot is sim_cpu_s / screenshots
    # --workload mobile-eval
    perception_cpu_s: list[float] = field(default_factory=list)  # per step
    # per step, by stage (runtime.cpu_ledger.STAGES): the thread CPU of the work done for
    # the phone's frames since its previous step, speculative reads included
    stage_cpu_s: dict[str, list[float]] = field(default_factory=dict)
    stage_total_s: dict[str, float] = field(default_factory=dict)  # the run's, all phones
    work_counts: dict[str, float] = field(default_factory=dict)  # det_px, rec_lines, rec_px
    # full | band | unchanged | cached | deferred (lazy OCR left a whole-frame read undone)
    ocr_runs: dict[str, int] = field(default_factory=dict)
    ground_s: list[float] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)  # task, SU, status, steps
    busy_s: dict[str, float] = field(default_factory=dict)  # per phone: wall minus task set-up
    speculated: int = 0
    speculation_skipped: int = 0
    speculation_dropped: int = 0  # queued reads given up: a newer frame, a plan needing no text
    ground_overflows: int = 0  # groundings that started beside a speculative read
    levers: str = ""  # mobile-eval: the --levers variant this run is
    rec_lines: int = 0  # text lines the recogniser was asked for
    rec_reused: int = 0  # of them, answered from its crop cache (perception.ocr.rec_cache)
    capture: str = "png"  # --capture: the screenshot path of this run
    capture_s: list[float] = field(default_factory=list)  # per screenshot (the agent's call)
    devices: list[Any] = field(default_factory=list)  # the AdbDevices (auto: what they chose)
    # mobile-eval: perception's start (PerceptionEngine.prepare_report: wall_s, cpu_s,
    # shapes), and which start this run is (--starts: fresh, second, warm)
    prepare: dict[str, Any] = field(default_factory=dict)
    start: str = ""


# --passes: the Ocr engine of a process's first pass, which its later passes reuse
_KEPT_OCR: list[Any] = []


# --levers: the perception levers each variant runs with (agent.lazy_ocr, speculation
# priority, perception.ocr.rec_cache on, perception.ocr.runtime, perception.ocr_cache.rects
# on, perception.ocr.det_precision, perception.query_first); "default" is the agent's
# defaults; "onnxruntime" is them with OCR on onnxruntime (the defaults before OpenVINO);
# "rects" is them with changed places re-read as rectangles; "whole" is them with every
# grounding reading the whole frame (query_first off), "lazy" variants leave a frame's
# read to the grounding that needs it; "none" is as before the levers
class Levers(NamedTuple):
    """One --levers variant; the fields' defaults are the agent's."""

    lazy_ocr: bool = False
    speculation_priority: bool = True
    rec_cache: bool = True
    ocr_runtime: str = "auto"
    ocr_rects: bool = False
    ocr_det_precision: str = ""  # "": the default precision
    query_first: bool = True


_BEFORE = Levers(speculation_priority=False, rec_cache=False, query_first=False)
LEVERS: dict[str, Levers] = {
    "default": Levers(),
    "whole": Levers(query_first=False),
    "priority": _BEFORE._replace(speculation_priority=True),
    "none": _BEFORE,
    "lazy": _BEFORE._replace(lazy_ocr=True),
    "both": _BEFORE._replace(lazy_ocr=True, speculation_priority=True),
    "cache": _BEFORE._replace(rec_cache=True),
    "lazy+cache": Levers(lazy_ocr=True, query_first=False),
    "lazy+first": Levers(lazy_ocr=True),
    "onnxruntime": Levers(ocr_runtime="onnxruntime"),
    "rects": Levers(ocr_rects=True),
    "f32": Levers(ocr_det_precision="f32"),
    "bf16": Levers(ocr_det_precision="bf16")}


class TimedDevice:
    """The phone as the agent sees it, adding each call's wall time to ``acc[serial]``."""

    def __init__(self, device: Any, acc: dict[str, float], stats: RunStats | None = None) -> None:
        self._device = device
        self._acc = acc
        self._stats = stats
        self.serial = device.serial

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._device, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        async def timed(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return await attr(*a, **kw)
            finally:
                took = time.perf_counter() - t
                self._acc[self.serial] = self._acc.get(self.serial, 0.0) + took
                if name == "screenshot" and self._stats is not None:
                    self._stats.screenshots += 1
                    self._stats.capture_s.append(took)

        return timed


class TimingBus:
    """The agent's publisher: on each StepTiming, the step's overhead outside LLM and device."""

    def __init__(self, bus: Any, acc: dict[str, float], stats: RunStats, llm_delay: float,
                 ledger: Any = None, settle_s: float = 0.0) -> None:
        self._bus = bus
        self._acc = acc
        self._stats = stats
        self._delay = llm_delay
        # runtime.cpu_ledger.CpuLedger: the CPU of each phone's frames by stage (mobile-eval)
        self._ledger = ledger
        self._settle = settle_s
        self._cpu_seen: dict[str, dict[str, float]] = {}

    async def publish(self, topic: str, msg: Any, *, qos: int = 1, retain: bool = False) -> None:
        from protocol.messages import EpisodeStarted, StepTiming

        if isinstance(msg, EpisodeStarted):
            self._acc[msg.device] = 0.0
        elif isinstance(msg, StepTiming):
            device_s = self._acc.get(msg.device, 0.0)
            self._acc[msg.device] = 0.0
            s = self._stats
            s.steps += 1
            s.per_phone[msg.device] = s.per_phone.get(msg.device, 0) + 1
            if self._ledger is not None:  # the work done for this phone since its last step
                from runtime.cpu_ledger import STAGES

                now = self._ledger.stages(msg.device)
                seen = self._cpu_seen.get(msg.device, {})
                step = {k: now.get(k, 0.0) - seen.get(k, 0.0) for k in STAGES}
                s.perception_cpu_s.append(sum(step.values()))
                for k, v in step.items():
                    s.stage_cpu_s.setdefault(k, []).append(v)
                self._cpu_seen[msg.device] = now
            if msg.step > 1:  # step 1's first frame is taken before its timer starts
                s.step_s.append(msg.total_s)
                s.device_s.append(device_s)
                llm = msg.phases.get("llm", 0.0)
                s.llm_s.append(llm)
                if self._ledger is None:  # swipes: one LLM call of the server's fixed delay
                    s.overhead_s.append(max(0.0, msg.total_s - self._delay - device_s))
                else:  # a chooser call adds a second one; a performed action, the settle
                    settle = self._settle if "act" in msg.phases else 0.0
                    s.overhead_s.append(max(0.0, msg.total_s - llm - device_s - settle))
                for k, v in msg.phases.items():
                    s.phase_sums[k] = s.phase_sums.get(k, 0.0) + v
        await self._bus.publish(topic, msg, qos=qos, retain=retain)


def agent_worker(llm: Any, services: Any, stats: RunStats, llm_delay: float, steps: int,
                 capture: Literal["png", "raw", "auto"] = "png", *, settings: Any = None,
                 policy_for: Any = None, ledger: Any = None, remeasure_every: int = 0) -> Any:
    """``run_episode`` running the agent's DeviceAgent (actors/) on one phone, its step
    requests served by the host's ``services`` on the bus."""
    from actors.config import AgentSettings
    from actors.episode import DeviceAgent
    from actors.planner import LLMPolicy, RoleSetup
    from devices.adb import AdbDevice
    from host.fleet import DeviceHandle
    from host.fleet_worker import agent_worker as fleet_worker

    # swipes: no OCR (the scripted actions need no grounding; OCR would measure rapidocr,
    # not the fleet), no completion check, no settle sleep, and guards that a scripted
    # back-and-forth does not trip.
    settings = settings or AgentSettings(
        settle_s=0.0, speculative_ocr=False, ocr_hints=False, completion_check=False,
        max_steps=steps + 5, loop_guard=1000, revisit_guard=1000)
    acc: dict[str, float] = {}

    def make_agent(handle: DeviceHandle) -> DeviceAgent:
        device = AdbDevice(handle.serial, client=handle.adb, capture=capture, timeout_s=30.0)
        if remeasure_every:
            device.remeasure_every = remeasure_every
        stats.devices.append(device)
        return DeviceAgent(
            TimingBus(handle.bus, acc, stats, llm_delay, ledger, settings.settle_s),
            TimedDevice(device, acc, stats),
            settings=settings, perception=services.perception_engine,
            policy_for=policy_for or (
                lambda _i: LLMPolicy(llm, RoleSetup.from_settings(llm.settings))),
            host=handle.host,
            services=services)

    return fleet_worker(make_agent)


class SwipesScript:
    """The swipes workload's scripted model: per job, ``steps`` alternating swipes, then Stop,
    each after ``delay_s``. ``reset()`` forgets the jobs (a rerun reuses their ids)."""

    JOB = re.compile(r"job (bench-\d+-\d+)")

    def __init__(self, steps: int, delay_s: float) -> None:
        self.steps, self.delay_s = steps, delay_s
        self.per_job: dict[str, int] = {}

    def reset(self) -> None:
        self.per_job.clear()

    def answer(self, req: Any) -> Any:
        from bench.openai_loopback import Behaviour, planner_reply

        m = self.JOB.search("\n".join(req.texts()))
        job = m.group(1) if m else "?"
        k = self.per_job[job] = self.per_job.get(job, 0) + 1
        action = "Stop" if k > self.steps else ("Swipe (left)" if k % 2 else "Swipe (right)")
        return Behaviour.reply(planner_reply(action), delay_s=self.delay_s)


# ---- --workload mobile-eval: the stand-in model -----------------------------------------

JOB_RE = re.compile(r"\(job (bench-[\w-]+)\)")


class StandInModel:
    """THE BENCHMARK'S STAND-IN FOR THE LLM (mobile-eval workload): the loopback server
    answers each call after ``--llm-delay`` with what ``host/oracle.py``'s OraclePolicy
    decided for that episode (the task's reference operations; among ambiguous grounding
    candidates its perfect chooser, which reads the simulator's ground truth). The agent's
    own LLMPolicy still builds the prompt, sends the frame over HTTP and parses the reply.
    Calls are matched to episodes by the ``(job ...)`` tag in the instruction."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.pending: dict[str, str] = {}  # job -> the reply its next call gets
        self.unmatched = 0

    def answer(self, req: Any) -> Any:
        from bench.openai_loopback import Behaviour

        m = JOB_RE.search("\n".join(req.texts()))
        reply = self.pending.pop(m.group(1), None) if m else None
        if reply is None:
            self.unmatched += 1
            return Behaviour.error(500, "bench stand-in: no answer pending for this call")
        return Behaviour.reply(reply, delay_s=self.delay_s)


class StandInPolicy:
    """LLMPolicy on the stand-in model, told each step what the oracle would do."""

    name = "stand-in (oracle via the loopback LLM)"

    def __init__(self, oracle: Any, llm_policy: Any, model: StandInModel, job: str,
                 errors: list[str]) -> None:
        self.oracle, self.llm, self.model, self.job = oracle, llm_policy, model, job
        self.errors = errors

    @property
    def image_view(self) -> tuple[int, int] | None:
        """The LLM policy's view: capture encodes it once, as on a host that runs that
        policy (without it every step made and sent the full frame)."""
        view = self.llm.image_view
        return view if isinstance(view, tuple) else None

    async def decide(self, ctx: Any) -> Any:
        from bench.openai_loopback import planner_reply

        want = await self.oracle.decide(ctx)
        self.model.pending[self.job] = planner_reply(want.action, thought=want.thought)
        got = await self.llm.decide(ctx)
        if got.operation != want.operation:
            self.errors.append(f"{self.job}: parsed {got.action!r}, oracle said {want.action!r}")
        return got

    async def choose(self, ctx: Any, target: str, image: bytes, labels: Any, texts: Any,
                     points: Any = (), reason: str = "", crops: Any = ()) -> Any:
        want = await self.oracle.choose(ctx, target, image, labels, texts, points, reason, crops)
        self.model.pending[self.job] = f"Box: {'none' if want.index is None else want.index}"
        return await self.llm.choose(ctx, target, image, labels, texts, points, reason=reason,
                                     crops=crops)

    async def check_completion(self, ctx: Any) -> Any:
        return await self.oracle.check_completion(ctx)  # agent.completion_check is off


def sim_cpu(procs: list[subprocess.Popen[str]]) -> float:
    """CPU seconds used so far by the simulated-phone processes (0 without psutil)."""
    try:
        import psutil
    except ImportError:
        return 0.0
    total = 0.0
    for proc in procs:
        try:
            t = psutil.Process(proc.pid).cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


class Mosquitto:
    """A throwaway anonymous mosquitto on a free loopback port (or None when not installed)."""

    def __init__(self) -> None:
        exe = shutil.which("mosquitto") or ("/usr/sbin/mosquitto"
                                            if Path("/usr/sbin/mosquitto").exists() else None)
        if exe is None:
            raise FileNotFoundError("mosquitto")
        self.dir = Path(tempfile.mkdtemp(prefix="mobagent-bench-mq-"))
        self.port = free_port()
        conf = self.dir / "m.conf"
        conf.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\n"
                        "max_queued_messages 100000\nmax_inflight_messages 100\n"
                        "set_tcp_nodelay true\n")  # as configs/mosquitto/mosquitto.conf
        self.proc = subprocess.Popen([exe, "-c", str(conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        import socket

        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("mosquitto did not start")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


async def start_fleet(tg: TaskGroup, hbus: Bus, cbus: Bus, worker: Any, serials: list[str],
                      adb_port: int, extra_actors: Sequence[Any]) -> FleetManager:
    """The bench's fleet on ``serials``, run in ``tg``, with ``cbus`` subscribed to episode
    outcomes; returns once every phone is idle."""
    from host.fleet import FleetConfig, FleetManager, run_fleet
    from runtime import topics

    fm = FleetManager(hbus, run_episode=worker, host="bench",
                      config=FleetConfig(serials=serials, adb_port=adb_port),
                      max_instruction_chars=2000)
    tg.start_soon(lambda: run_fleet(hbus, fm, extra_actors=extra_actors))
    await cbus.subscribe(topics.device_events_filter(None, "episode_finished"))
    with anyio.fail_after(60):
        while sum(1 for st in fm.devices().values() if st == "idle") < len(serials):  # noqa: ASYNC110 (polling)
            await anyio.sleep(0.05)
    return fm


def sim_latency(args: argparse.Namespace) -> Any:
    """The simulated phones' latency: the realistic profile's flat delays, or with
    ``--capture-cost usb2`` its device-cost model (one hub for this run's phones)."""
    from sim.phone_api import LatencyProfile

    profile = LatencyProfile.named("realistic")
    if args.capture_cost != "usb2":
        profile.cost = None
    return profile


async def start_sim_procs(n: int, args: argparse.Namespace, adb_port: int,
                          procs: list[subprocess.Popen[str]]) -> list[str]:
    """The phones in their own processes, as real phones have their own CPUs: their
    rendering must not hold this process's GIL. Returns their serials."""
    k = 1 if args.capture_cost == "usb2" else min(args.sim_procs, n)  # one hub: one process
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(adb_port), "ADB_EMU": "0"}
    cost = ["--capture-cost", args.capture_cost]
    serials: list[str] = []
    for i in range(k):
        count = n // k + (1 if i < n % k else 0)
        procs.append(subprocess.Popen(  # noqa: ASYNC220 (a quick fork, once per N)
            [sys.executable, "-m", "sim.cli", "sim", "--count", str(count),
             "--profile", "realistic", *cost], cwd=ROOT, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
    for i, proc in enumerate(procs):
        out = proc.stdout
        assert out is not None
        want = n // k + (1 if i < n % k else 0)
        with anyio.fail_after(180):
            for _ in range(want):
                line = await anyio.to_thread.run_sync(out.readline)
                if not line:
                    raise RuntimeError("a simulated-phone process exited early")
                serials.append(line.strip())
    return serials


async def run_n(n: int, args: argparse.Namespace, adb_port: int, llm_url: str,
                broker_url: str, capture: str = "png") -> RunStats:
    import msgspec
    import numpy as np
    import openai
    from PIL import Image

    from devices.codecs import encode_jpeg
    from host.fleet import DeviceHandle, EpisodeControl
    from protocol.messages import CODEC, EpisodeFinished, Instruction, StepTiming
    from runtime import topics
    from runtime.bus import Bus, parse_broker_url
    from runtime.config import BusConfig
    from sim.fleet import SimFleet

    factory = None
    if args.phone == "stand-in":
        from sim.stand_in import recording_phone

        factory = recording_phone
    profile = sim_latency(args)
    stats = RunStats(n, capture=capture)
    fleet_sim: SimFleet | None = None
    procs: list[subprocess.Popen[str]] = []
    serials: list[str] = []
    if args.sim_procs and factory is None:
        serials = await start_sim_procs(n, args, adb_port, procs)
    else:
        fleet_sim = await anyio.to_thread.run_sync(lambda: SimFleet(
            n, profile=profile, adb_port=adb_port, phone_factory=factory).start())
        serials = fleet_sim.serials
    llm = openai.AsyncOpenAI(base_url=llm_url, api_key="bench-key", timeout=args.llm_delay + 30,
                             max_retries=0)

    async def episode(handle: DeviceHandle, instr: Instruction,
                      control: EpisodeControl) -> EpisodeFinished:
        dev = handle.adb_device()
        steps = args.steps
        for step in range(1, steps + 1):
            control.check()
            t0 = time.perf_counter()
            with anyio.fail_after(30):
                img = await anyio.to_thread.run_sync(dev.screenshot)
            stats.screenshots += 1
            stats.capture_s.append(time.perf_counter() - t0)

            def encode(im: Image.Image = img) -> str:
                im = im.convert("RGB")
                im = im.reduce(max(1, -(-max(im.size) // 1024)))  # to at most 1024 px
                return base64.b64encode(encode_jpeg(np.asarray(im), 80)).decode()

            t_enc = time.perf_counter()
            b64 = await anyio.to_thread.run_sync(encode)
            enc_s = time.perf_counter() - t_enc
            t_llm = time.perf_counter()
            cap_s = t_llm - t0 - enc_s
            reply = await llm.chat.completions.create(model="bench", messages=[
                {"role": "user", "content": [
                    {"type": "text", "text": f"{instr.text}\nstep {step}"},
                    {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{b64}"}},
                ]}])
            llm_s = time.perf_counter() - t_llm
            text = reply.choices[0].message.content or ""
            m = ACTION_RE.search(text)
            if m is None:
                raise RuntimeError(f"unparsable reply: {text[:100]!r}")
            x, y = int(m.group(1)), int(m.group(2))
            t_tap = time.perf_counter()
            with anyio.fail_after(30):
                await anyio.to_thread.run_sync(dev.click, x, y)
            tap_s = time.perf_counter() - t_tap
            total = time.perf_counter() - t0
            stats.steps += 1
            stats.per_phone[handle.serial] = stats.per_phone.get(handle.serial, 0) + 1
            stats.step_s.append(total)
            # Outside the LLM call and the two adb calls (whose time includes the simulated
            # phone's own work and the adb transport): dispatch, encoding, threads, the bus.
            stats.overhead_s.append(max(0.0, total - llm_s - cap_s - tap_s))
            stats.device_s.append(cap_s + tap_s)
            stats.llm_s.append(llm_s)
            await handle.emit(StepTiming(
                phases={"llm": round(llm_s, 4), "total": round(total, 4)}, total_s=round(total, 4),
                device=handle.serial, episode_id=control.episode_id, step=step,
                correlation_id=instr.id))
        return EpisodeFinished(instruction_id=instr.id, status="succeeded", steps=steps)

    worker: Any = episode
    llm_client: Any = None
    perception: Any = None
    if args.loop == "agent":
        from actors.perception import PerceptionEngine
        from models.llm import LLMClient, LLMSettings, RoleModels

        llm_client = LLMClient(LLMSettings(
            base_url=llm_url, api_key="bench-key",
            models=RoleModels(planner="bench", chooser="bench", reflector="bench"),
            timeout_s=args.llm_delay + 30, max_retries=1, max_concurrent=4 * n + 4,
            requests_per_minute=1_000_000))
        await llm_client.__aenter__()
        perception = PerceptionEngine()
    cfg = BusConfig(connect_timeout_s=10, publish_timeout_s=30)
    address = parse_broker_url(broker_url)
    done: dict[str, EpisodeFinished] = {}
    try:
        async with Bus(cfg, address, client_id=f"bench-host-{n}", persistent=False,
                    codec=CODEC) as hbus, \
                Bus(cfg, address, client_id=f"bench-client-{n}", persistent=False,
                    codec=CODEC) as cbus, \
                anyio.create_task_group() as tg:
            extra: list[Any] = []
            if args.loop == "agent":
                from actors.services import AgentServices

                services = AgentServices(hbus, perception)
                worker = agent_worker(llm_client, services, stats, args.llm_delay, args.steps,
                                      capture,  # type: ignore[arg-type]
                                      remeasure_every=args.remeasure_every)
                extra = services.actors()
            await start_fleet(tg, hbus, cbus, worker, serials, adb_port, extra)

            async def collect() -> None:
                async for _, msg in cbus.messages():
                    if isinstance(msg, EpisodeFinished):
                        done[msg.instruction_id] = msg

            tg.start_soon(collect)
            sim_cpu0 = sim_cpu(procs)
            cpu0, t0 = time.process_time(), time.perf_counter()
            for i, serial in enumerate(serials):
                await cbus.publish(topics.device_instructions(serial), Instruction(
                    id=f"bench-{n}-{i}", text=f"Browse the home screens (job bench-{n}-{i})",
                    max_steps=args.steps + 5))
            with anyio.fail_after(args.steps * (args.llm_delay + 5) * 3 + 60):
                while len(done) < n:  # noqa: ASYNC110 (polling)
                    await anyio.sleep(0.05)
            stats.wall_s = time.perf_counter() - t0
            stats.cpu_s = time.process_time() - cpu0
            stats.sim_cpu_s = sim_cpu(procs) - sim_cpu0
            tg.cancel_scope.cancel()
    finally:
        if fleet_sim is not None:
            await anyio.to_thread.run_sync(fleet_sim.stop)
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                await anyio.to_thread.run_sync(proc.wait, 20)
            except subprocess.TimeoutExpired:
                proc.kill()
        await llm.close()
        if llm_client is not None:
            await llm_client.__aexit__(None, None, None)
    for fin in done.values():
        if fin.status != "succeeded":
            stats.errors.append(f"{fin.device}: {fin.status}: {fin.reason}")
    _ = msgspec
    return stats


def assignments(tasks: list[Any], serials: list[str], per_phone: int) -> dict[str, list[Any]]:
    """Phone i's tasks: tasks[(i + j*N) % T] for j < per_phone; with one phone, every task
    once at least (N = 1 is the SU and step-time baseline)."""
    n, t = len(serials), len(tasks)
    k = max(per_phone, t) if n == 1 else per_phone
    return {serial: [tasks[(i + j * n) % t] for j in range(k)] for i, serial in enumerate(serials)}


async def run_n_eval(n: int, args: argparse.Namespace, adb_port: int, llm_url: str,
                     broker_url: str, model: StandInModel, levers: str = "priority") -> RunStats:
    """--workload mobile-eval: Mobile-Eval-sim tasks through the real actors with real
    perception on N in-process simulated phones (the oracle and the scoring read their
    state), the stand-in model answering."""
    from actors.config import AgentSettings
    from actors.perception import PerceptionEngine
    from actors.planner import LLMPolicy, RoleSetup
    from actors.services import AgentServices
    from host.eval import select_tasks
    from host.oracle import OraclePolicy
    from models.grounding import Perception, PerceptionSettings
    from models.llm import LLMClient, LLMSettings, RoleModels
    from models.ocr import OcrCacheSettings, OcrSettings
    from protocol.messages import CODEC, EpisodeFinished, Instruction
    from runtime import topics
    from runtime.bus import Bus, parse_broker_url
    from runtime.config import BusConfig
    from sim.fleet import SimFleet

    stats = RunStats(n, levers=levers)
    lazy, priority, rec_cache, runtime, rects, precision, first = LEVERS[levers]
    tasks = [cls(args.seed) for cls in select_tasks(args.tasks)]
    fleet_sim = await anyio.to_thread.run_sync(lambda: SimFleet(
        n, seed=args.seed, profile="realistic", adb_port=adb_port).start())
    serials = fleet_sim.serials
    if not args.same_clock:
        # Phones of one seed show the same clock, so two on the same task take identical
        # frames, which the host's frame cache then reads once for both: a shared read no
        # real fleet gets. A minute apart, each phone's frames are its own (the status bar
        # differs; OCR skips it, the date and the tasks do not change).
        for i, serial in enumerate(serials):
            phone = fleet_sim.phone(serial)
            phone.perturbation = dataclasses.replace(  # type: ignore[attr-defined]
                phone.perturbation,  # type: ignore[attr-defined]
                now=phone.perturbation.now + timedelta(minutes=i))  # type: ignore[attr-defined]
    plan = assignments(tasks, serials, args.episodes)
    settings = AgentSettings(completion_check=False, ocr_hints=False,
                             speculative_ocr=not args.no_speculation, lazy_ocr=lazy,
                             perception_workers=args.perception_workers)
    kept = _KEPT_OCR[0] if _KEPT_OCR else None  # --passes: the process's own engine
    if kept is not None:
        kept.forget_lines()  # its crop cache is the earlier pass's: a warm pass reads anew
    perception = PerceptionEngine(Perception(PerceptionSettings(
        ocr=msgspec.structs.replace(  # "": the default precision
            OcrSettings(threads=args.ocr_threads, rec_cache=4096 if rec_cache else 0,
                        runtime=runtime),  # type: ignore[arg-type]
            **({"det_precision": precision} if precision else {})),
        ocr_cache=OcrCacheSettings(rects=rects), query_first=first), ocr=kept),
        workers=args.perception_workers, speculation_priority=priority)
    # A host loads the models and prepares their recorded input shapes when perception
    # starts (PerceptionEngine.start_preparing), while its phones connect; here the clock
    # starts once that is done, and what it cost is reported as the start's (prepare_*).
    perception.start_preparing()
    await perception.wait_prepared(600)
    if args.passes > 1 and not _KEPT_OCR:
        _KEPT_OCR.append(perception.perception.ocr_engine)
    stats.prepare = msgspec.structs.asdict(perception.prepare_report) \
        if perception.prepare_report is not None else {}
    llm_client = LLMClient(LLMSettings(
        base_url=llm_url, api_key="bench-key",
        models=RoleModels(planner="bench", chooser="bench", reflector="bench"),
        timeout_s=args.llm_delay + 30, max_retries=1, max_concurrent=4 * n + 4,
        requests_per_minute=1_000_000))
    jobs: dict[str, tuple[Any, Any]] = {}  # instruction id -> (task, phone)
    finished: dict[str, anyio.Event] = {}
    done: dict[str, EpisodeFinished] = {}

    def policy_for(instr: Instruction) -> Any:
        task, phone = jobs[instr.id]
        inner = LLMPolicy(llm_client, RoleSetup.from_settings(llm_client.settings))
        return StandInPolicy(OraclePolicy(task, phone), inner, model, instr.id,
                             stats.errors)

    cfg = BusConfig(connect_timeout_s=10, publish_timeout_s=30)
    address = parse_broker_url(broker_url)
    await llm_client.__aenter__()
    try:
        async with Bus(cfg, address, client_id=f"bench-host-{n}", persistent=False,
                       codec=CODEC) as hbus, \
                Bus(cfg, address, client_id=f"bench-client-{n}", persistent=False,
                    codec=CODEC) as cbus, \
                anyio.create_task_group() as tg:
            services = AgentServices(hbus, perception)
            worker = agent_worker(llm_client, services, stats, args.llm_delay, 0, args.capture[0],
                                  settings=settings, policy_for=policy_for,
                                  ledger=services.cpu_ledger)
            await start_fleet(tg, hbus, cbus, worker, serials, adb_port, services.actors())

            async def collect() -> None:
                async for _, msg in cbus.messages():
                    if isinstance(msg, EpisodeFinished) and msg.instruction_id in finished:
                        done[msg.instruction_id] = msg
                        finished[msg.instruction_id].set()

            async def drive(i: int, serial: str) -> None:
                phone = fleet_sim.phone(serial)
                t_start, setup_s = time.perf_counter(), 0.0
                for j, task in enumerate(plan[serial]):
                    t = time.perf_counter()
                    await anyio.to_thread.run_sync(task.setup, phone)
                    setup_s += time.perf_counter() - t
                    iid = f"bench-{n}-{i}-{j}"
                    jobs[iid] = (task, phone)
                    finished[iid] = anyio.Event()
                    await cbus.publish(topics.device_instructions(serial), Instruction(
                        id=iid, text=f"{task.instruction} (job {iid})", task=task.task_id(),
                        max_steps=task.step_budget))
                    with anyio.fail_after(task.step_budget * (2 * args.llm_delay + 20) + 60):
                        await finished[iid].wait()
                    su = await anyio.to_thread.run_sync(task.is_successful, phone)
                    fin = done[iid]
                    stats.episodes.append({"task": task.task_id(), "seed": task.seed,
                                           "device": serial, "SU": 1.0 if su else 0.0,
                                           "status": fin.status, "steps": fin.steps,
                                           "reason": fin.reason[:200]})
                stats.busy_s[serial] = time.perf_counter() - t_start - setup_s

            tg.start_soon(collect)
            runs0 = dict(perception.perception.ocr_runs)
            engine = perception.perception.ocr_engine
            rec0 = (engine.rec_lines, engine.rec_reused)
            cpu0, t0 = time.process_time(), time.perf_counter()
            async with anyio.create_task_group() as phones:
                for i, serial in enumerate(serials):
                    phones.start_soon(drive, i, serial)
            stats.wall_s = time.perf_counter() - t0
            stats.cpu_s = time.process_time() - cpu0
            # a copy first: a speculative read may still be counting in a worker thread
            for (dev, kind), count in dict(perception.perception.ocr_runs).items():
                stats.ocr_runs[kind] = stats.ocr_runs.get(kind, 0) + count - runs0.get(
                    (dev, kind), 0)
            stats.rec_lines = engine.rec_lines - rec0[0]
            stats.rec_reused = engine.rec_reused - rec0[1]
            stats.ground_s = list(perception.meter.ground_s)
            for dev in services.cpu_ledger.devices():
                for k, v in services.cpu_ledger.stages(dev).items():
                    stats.stage_total_s[k] = stats.stage_total_s.get(k, 0.0) + v
                for k, v in services.cpu_ledger.counts(dev).items():
                    stats.work_counts[k] = stats.work_counts.get(k, 0.0) + v
            assert services.perception is not None  # the benchmark's perception is local
            stats.speculated = services.perception.speculated
            stats.speculation_skipped = services.perception.skipped
            stats.speculation_dropped = perception.dropped
            stats.ground_overflows = perception.pool.overflows
            tg.cancel_scope.cancel()
    finally:
        await anyio.to_thread.run_sync(fleet_sim.stop)
        await llm_client.__aexit__(None, None, None)
    return stats


def plot(results: list[dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ns = [r["n"] for r in results]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    a1.plot(ns, [r["steps_per_s"] for r in results], "o-", label="measured")
    a1.plot(ns, [r["ideal_steps_per_s"] for r in results], "--", label="ideal (N / step time at N=1)")
    a1.set_xscale("log", base=2)
    a1.set_xlabel("phones (N)")
    a1.set_ylabel("steps/s")
    a1.set_title("fleet throughput")
    a1.legend()
    a2.plot(ns, [r["overhead_p50_s"] for r in results], "o-", label="p50")
    a2.plot(ns, [r["overhead_p95_s"] for r in results], "s-", label="p95")
    a2.axhline(0.3, color="grey", ls=":", label="target p95 0.3 s")
    a2.set_xscale("log", base=2)
    a2.set_xlabel("phones (N)")
    a2.set_ylabel("seconds per step")
    a2.set_title("overhead outside LLM and device")
    a2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", default="1,2,4,8,16,32", help="comma-separated N values")
    p.add_argument("--llm-delay", type=float, default=3.0, help="seconds per LLM answer")
    p.add_argument("--steps", type=int, default=8, help="steps per phone per N")
    p.add_argument("--phone", choices=("sim", "stand-in"), default="sim",
                   help="the rendered simulated phone, or a cheap solid-colour stand-in")
    p.add_argument("--loop", choices=("agent", "own"), default="agent",
                   help="the agent's actors (default), or the benchmark's own minimal loop")
    p.add_argument("--capture", default="png",
                   help="the screenshot path the agent loop takes (devices/adb.py): png "
                        "(default), raw or auto; several, comma-separated, run side by side "
                        "at each N (swipes workload)")
    p.add_argument("--capture-cost", choices=("off", "usb2"), default="off",
                   help="the simulated phones charge a real phone's own cost "
                        "(sim/device_cost.py: encode per pixel, input's process start, one "
                        "USB 2.0 hub shared)")
    p.add_argument("--remeasure-every", type=int, default=REMEASURE_EVERY,
                   help=f"auto capture: time both paths again every this many frames "
                        f"(default {REMEASURE_EVERY}, as the agent)")
    p.add_argument("--sim-procs", type=int, default=2,
                   help="run the phones in this many separate processes (0: in this process)")
    p.add_argument("--workload", choices=("swipes", "mobile-eval"), default="swipes",
                   help="swipes: the scripted back-and-forth, OCR off (default); mobile-eval: "
                        "Mobile-Eval-sim tasks with real perception and the stand-in model")
    p.add_argument("--tasks", default="demo",
                   help="mobile-eval: task ids, comma-separated, 'demo' (the demo's six, which "
                        "the oracle solves; the default) or 'all'")
    p.add_argument("--episodes", type=int, default=2,
                   help="mobile-eval: episodes per phone (N = 1 runs every task once at least)")
    p.add_argument("--seed", type=int, default=0, help="mobile-eval: the phones' and tasks' seed")
    p.add_argument("--perception-workers", type=int, default=2,
                   help="mobile-eval: frames perceived at once (agent.perception_workers)")
    p.add_argument("--ocr-threads", type=int, default=1,
                   help="mobile-eval: onnxruntime threads per OCR run (perception.ocr.threads; "
                        "1 lets the bench count all of perception's CPU)")
    p.add_argument("--no-speculation", action="store_true",
                   help="mobile-eval: agent.speculative_ocr off")
    p.add_argument("--same-clock", action="store_true",
                   help="mobile-eval: every phone shows the same clock, so phones on the same "
                        "task take identical frames and share their reads (by default each "
                        "phone's clock is a minute after the previous one's)")
    p.add_argument("--levers", default="default",
                   help="mobile-eval: perception lever variants, comma-separated, each run at "
                        "every N (interleaved): default (the agent's: priority and the line "
                        "cache), priority (the speculative read at low priority), lazy "
                        "(agent.lazy_ocr, FIFO pool), both (lazy and priority), cache (the "
                        "OCR line cache alone), lazy+cache (all three, query_first off), none, "
                        "onnxruntime "
                        "(the defaults with OCR on onnxruntime), rects (the defaults with "
                        "perception.ocr_cache.rects on: changed places re-read as "
                        "rectangles, not full-width bands), f32 / bf16 (the defaults with "
                        "perception.ocr.det_precision set), whole (the defaults, "
                        "perception.query_first off), lazy+first (lazy+cache with "
                        "query_first)")
    p.add_argument("--starts", default="",
                   help="mobile-eval: fresh,second,warm: the same N = 1 run in a process "
                        "with an empty OCR cache (a fresh install), then in a second process "
                        "on the cache the first left, then again in that process (warmed "
                        "up), side by side (each start a child process)")
    p.add_argument("--passes", type=int, default=1,
                   help="run the N values this many times in this process, later passes "
                        "on the first pass's OCR engine (its crop cache emptied)")
    p.add_argument("--start-label", default="", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, default=Path("bench-out/fleet"))
    args = p.parse_args(argv)
    eval_load = args.workload == "mobile-eval"
    if args.starts:
        if not eval_load:
            p.error("--starts: only with --workload mobile-eval")
        if args.starts.replace(" ", "") != "fresh,second,warm":
            p.error("--starts: fresh,second,warm (the three are one sequence)")
        return run_starts(args, sys.argv[1:] if argv is None else argv)
    if args.passes < 1:
        p.error("--passes must be >= 1")
    if eval_load and (args.loop != "agent" or args.phone != "sim"):
        p.error("--workload mobile-eval runs the agent loop on rendered simulated phones")
    variants = [v.strip() for v in args.levers.split(",") if v.strip()]
    if not variants or any(v not in LEVERS for v in variants) or len(set(variants)) < len(variants):
        p.error(f"--levers: distinct names from {', '.join(LEVERS)}, not {args.levers!r}")
    if len(variants) > 1 and not eval_load:
        p.error("--levers: only with --workload mobile-eval")
    args.capture = [c.strip() for c in args.capture.split(",") if c.strip()]
    if not args.capture or any(c not in CAPTURE_PATHS for c in args.capture) \
            or len(set(args.capture)) < len(args.capture):
        p.error(f"--capture: distinct paths from {', '.join(CAPTURE_PATHS)}")
    if len(args.capture) > 1 and (eval_load or args.loop != "agent"):
        p.error("--capture: several paths only with the swipes workload's agent loop")
    if args.remeasure_every < 1:
        p.error("--remeasure-every must be >= 1")
    if not eval_load:
        variants = args.capture  # swipes: the capture paths side by side

    def variant(r: dict[str, Any]) -> str:  # mobile-eval: the levers; swipes: the capture
        return str(r["levers"] if eval_load else r["capture"])

    def label(r: dict[str, Any]) -> str:  # N, and the variant when there are several
        return f"{variant(r)}/{r['n']}" if len(variants) > 1 else str(r["n"])
    if args.episodes < 1 or args.perception_workers < 1 or args.ocr_threads < 0:
        p.error("--episodes and --perception-workers must be >= 1, --ocr-threads >= 0")
    try:
        ns = sorted({int(x) for x in args.devices.split(",") if x.strip()})
    except ValueError:
        p.error(f"--devices: expected numbers like 1,2,4, not {args.devices!r}")
    if not ns or ns[0] < 1 or ns[-1] > 64:
        p.error("--devices: each N must be between 1 and 64")
    if args.steps < 1 or args.llm_delay < 0:
        p.error("--steps must be >= 1 and --llm-delay >= 0")
    if 1 not in ns:
        ns = [1, *ns]  # the ideal is measured at N = 1
    args.out.mkdir(parents=True, exist_ok=True)
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    import logging

    logging.getLogger("mqtt").setLevel(logging.CRITICAL)

    # A private adb server, set before adbutils is imported anywhere.
    adb_port = free_port()
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(adb_port)
    os.environ["ADB_EMU"] = "0"
    from bench.openai_loopback import (
        Behaviour,
        OpenAIServer,
        RecordedRequest,
        planner_reply,
    )
    from sim.fleet import ensure_adb_server, stop_adb_server

    ensure_adb_server(adb_port)
    counter = {"i": 0}
    model = StandInModel(args.llm_delay)

    swipes = SwipesScript(args.steps, args.llm_delay)

    def policy(req: RecordedRequest) -> Behaviour:
        counter["i"] += 1
        if eval_load:
            return model.answer(req)
        if args.loop == "own":
            x, y = 100 + counter["i"] % 800, 300 + counter["i"] % 1500
            return Behaviour.reply(planner_reply(f"Tap ({x}, {y})"), delay_s=args.llm_delay)
        return swipes.answer(req)

    if eval_load:
        print("the phones run Mobile-Eval-sim tasks through the agent loop with real "
              "perception; NOTE: the model is the benchmark's STAND-IN, the loopback server "
              "answering with host/oracle.py's operations (its perfect chooser reads the "
              f"simulator) after {args.llm_delay:g} s; completion check off; the phones run "
              "in this process (the oracle and the scoring read their state)", flush=True)
    elif args.loop == "own":
        print("NOTE: --loop own: the phones are driven by this benchmark's own minimal step "
              "loop (capture -> LLM -> tap), not the agent's actors.", flush=True)
    else:
        print("the phones are driven by the agent loop (actors.episode.DeviceAgent, LLMPolicy "
              "through models.llm) under the fleet manager; OCR off, settle 0", flush=True)
    try:
        broker: Mosquitto | None = Mosquitto()
        broker_url = f"mqtt://127.0.0.1:{broker.port}"  # type: ignore[union-attr]
    except FileNotFoundError:
        broker, broker_url = None, ""
    results: list[dict[str, Any]] = []
    try:
        with OpenAIServer(policy=policy) as srv:

            async def all_runs() -> None:
                import anyio.to_thread as tt

                tt.current_default_thread_limiter().total_tokens = max(40, 4 * ns[-1])
                url = broker_url
                if not url:
                    from runtime.broker import embedded_broker
                    from runtime.config import BrokerConfig

                    async with embedded_broker(BrokerConfig(port=0)) as addr:
                        await every(addr.url)
                    return
                await every(url)

            async def every(url: str) -> None:
                for k in range(args.passes):
                    first = len(results)
                    for n in ns:  # the variants side by side at each N: the same machine load
                        for v in variants:
                            # Its own N = 1 run (of this pass) is the baseline.
                            same = [r for r in results[first:] if variant(r) == v]
                            stats = await one(n, url, v)
                            stats.start = args.start_label if k == 0 else "warm"
                            results.append(summarise(stats, same, several=len(variants) > 1))

            async def one(n: int, url: str, levers: str) -> RunStats:
                if eval_load:
                    return await run_n_eval(n, args, adb_port, srv.base_url, url, model, levers)
                swipes.reset()  # each capture path's run reuses the jobs' ids
                return await run_n(n, args, adb_port, srv.base_url, url, levers)

            anyio.run(all_runs)
    finally:
        if broker is not None:
            broker.stop()
        stop_adb_server(adb_port)

    print(f"{'N':>10} {'steps/s':>8} {'ideal':>8} {'ratio':>6} {'ovh p50':>8} {'ovh p95':>8} "
          f"{'cpu%':>6} {'sim%':>6} {'ms/shot':>7} {'errors':>6} {'fair(min/max)':>13}")
    for r in results:
        print(f"{label(r):>10} {r['steps_per_s']:>8.3f} {r['ideal_steps_per_s']:>8.3f} "
              f"{r['ratio']:>6.3f} {r['overhead_p50_s']:>8.3f} {r['overhead_p95_s']:>8.3f} "
              f"{r['cpu_percent']:>6.0f} {r['sim_cpu_percent']:>6.0f} "
              f"{r['phone_cpu_ms_per_shot'] or float('nan'):>7.1f} {r['errors']:>6} "
              f"{r['fairness']:>13}")
    if eval_load:
        print(f"\n{'N':>10} {'perc cpu p50':>12} {'mean':>6} {'OCR/step: full':>14} {'band':>5} "
              f"{'unch':>5} {'cached':>6} {'defer':>5} {'first':>5} {'ground p95':>10} {'SU':>5} "
              f"{'episodes':>8}")
        for r in results:
            o = r["ocr_runs_per_step"]
            print(f"{label(r):>10} {r['perception_cpu_s_p50']:>12.3f} "
                  f"{r['perception_cpu_s_mean']:>6.3f} {o['full']:>14.2f} {o['band']:>5.2f} "
                  f"{o['unchanged']:>5.2f} {o['cached']:>6.2f} {o['deferred']:>5.2f} "
                  f"{o.get('first', 0.0):>5.2f} {r['ground_p95_s']:>10.3f} {r['SU']:>5.2f} {r['episodes']:>8} "
                  f"lines read {r['rec_lines']}, {r['rec_reused']} from the crop cache")
        from runtime.cpu_ledger import STAGES

        print(f"\nthread CPU s per step by stage (the run's, all phones, over its steps; "
              f"runtime.cpu_ledger)\n{'N':>10} " + " ".join(f"{k:>9}" for k in STAGES)
              + f" {'total':>7} {'det Mpx':>7} {'lines':>6} {'rec kpx':>7}")
        for r in results:
            st, w = r["stage_cpu_s_per_step"], r["work_per_step"]
            print(f"{label(r):>10} " + " ".join(f"{st.get(k, 0.0):>9.4f}" for k in STAGES)
                  + f" {r['cpu_s_per_step']:>7.4f} {w.get('det_px', 0) / 1e6:>7.3f} "
                  f"{w.get('rec_lines', 0):>6.1f} {w.get('rec_px', 0) / 1e3:>7.1f}")
        for r in results:
            base = next((b for b in results if b["n"] == 1 and b["levers"] == r["levers"]), None)
            if base is not None and r is not base:
                diff = su_differences(base, r)
                if diff:
                    print(f"SU differs at N={label(r)} from N=1: {'; '.join(diff)}")
    if len(args.capture) > 1 or args.capture_cost != "off":
        print(capture_table(results, args))
    meta = {"workload": args.workload, "llm_delay_s": args.llm_delay,
            "steps_per_phone": None if eval_load else args.steps, "phone": args.phone,
            "broker": "mosquitto" if broker_url else "embedded amqtt",
            "step_loop": ("bench's own minimal loop (capture -> LLM -> tap), not the agent actors"
                          if args.loop == "own" else "the agent loop (actors.episode.DeviceAgent)"),
            "cores": os.cpu_count(), "sim_procs": args.sim_procs,
            "load_average_at_end": os.getloadavg(), "capture": args.capture,
            "capture_cost": args.capture_cost, "remeasure_every": args.remeasure_every}
    if eval_load:
        meta.update({"model": "STAND-IN: the loopback server answers with host/oracle.py's "
                              "operations and perfect chooser", "tasks": args.tasks,
                     "episodes_per_phone": args.episodes, "seed": args.seed,
                     "perception_workers": args.perception_workers,
                     "ocr_threads": args.ocr_threads, "speculative_ocr": not args.no_speculation,
                     "same_clock": args.same_clock,
                     "levers": {v: LEVERS[v]._asdict()
                                for v in variants},
                     "sim_procs": 0, "stand_in_unmatched_calls": model.unmatched})
    (args.out / "fleet.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    plotted = plot(results, args.out / "fleet.png")
    print(f"wrote {args.out / 'fleet.json'}" + (f" and {args.out / 'fleet.png'}" if plotted
                                                 else " (no plot: matplotlib not installed)"))
    keys = ("ratio", "overhead_p95_s") + (
        ("perception_cpu_s_mean", "perception_cpu_s_p50", "ground_p95_s", "SU") if eval_load
        else ("capture_p50_s", "capture_p95_s", "steps_per_s") if len(args.capture) > 1
        else ())
    print(json.dumps({label(r): {k: r[k] for k in keys} for r in results}))
    return 0


def capture_table(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """Per capture path and N: capture time p50/p95, steps/s, and what auto did."""
    lines = [f"\ncapture paths (--capture-cost {args.capture_cost}; auto re-measures every "
             f"{args.remeasure_every} frames)",
             f"{'path':>5} {'N':>3} {'cap p50 ms':>10} {'cap p95 ms':>10} {'steps/s':>8}  auto"]
    for r in sorted(results, key=lambda r: (CAPTURE_PATHS.index(r["capture"]), r["n"])):
        auto = r["auto"]
        what = (f"measured {auto['measurements']}x, took {auto['chosen']}"
                if r["capture"] == "auto" else "")
        lines.append(f"{r['capture']:>5} {r['n']:>3} {1000 * r['capture_p50_s']:>10.0f} "
                     f"{1000 * r['capture_p95_s']:>10.0f} {r['steps_per_s']:>8.3f}  {what}")
    return "\n".join(lines)


def su_differences(base: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """Tasks whose mean SU differs between two runs (over the tasks both ran)."""
    def by_task(r: dict[str, Any]) -> dict[str, float]:
        out: dict[str, list[float]] = {}
        for e in r["episode_results"]:
            out.setdefault(e["task"], []).append(e["SU"])
        return {k: statistics.mean(v) for k, v in out.items()}

    a, b = by_task(base), by_task(other)
    return [f"{t} {a[t]:.2f} -> {b[t]:.2f}" for t in sorted(a.keys() & b.keys()) if a[t] != b[t]]


def auto_summary(devices: list[Any]) -> dict[str, Any]:
    """What the phones' auto capture did: how often it timed both paths (all phones), which
    path each took at the end (``raw: 3, png: 1``), and the last timings seen (ms)."""
    chosen: dict[str, int] = {}
    for d in devices:
        chosen[str(d.chosen)] = chosen.get(str(d.chosen), 0) + 1
    last: dict[str, float | None] = next(
        (d.timings for d in reversed(devices) if d.timings), {})
    return {"measurements": sum(d.measurements for d in devices),
            "chosen": ", ".join(f"{k} {v}" for k, v in sorted(chosen.items())) or "-",
            "last_ms": {k: round(1000 * v, 1) for k, v in last.items() if v is not None}}


def summarise(s: RunStats, previous: list[dict[str, Any]], several: bool = False
              ) -> dict[str, Any]:
    base = next((r for r in previous if r["n"] == 1), None)
    rate = s.steps / s.wall_s if s.wall_s else 0.0
    if s.busy_s:  # mobile-eval: each phone's steps over its own busy time (no idle tail,
        # no task set-up): episodes differ in length, so phones finish at different times
        rate = sum(s.per_phone.get(d, 0) / b for d, b in s.busy_s.items() if b > 0)
    # One phone's step time, as the N = 1 run saw it (wall time per step, start to finish).
    one_rate = rate if s.n == 1 else (base["steps_per_s"] if base else float("nan"))
    ideal = s.n * one_rate
    counts = sorted(s.per_phone.values()) or [0]
    r = {
        "n": s.n, "steps": s.steps, "wall_s": round(s.wall_s, 3),
        "steps_per_s": round(rate, 4), "ideal_steps_per_s": round(ideal, 4),
        "ratio": round(rate / ideal, 4) if ideal else 0.0,
        "step_mean_s": round(statistics.mean(s.step_s), 4) if s.step_s else None,
        "overhead_p50_s": round(pct(s.overhead_s, 50), 4),
        "overhead_p95_s": round(pct(s.overhead_s, 95), 4),
        "cpu_percent": round(100 * s.cpu_s / s.wall_s, 1) if s.wall_s else 0.0,
        "sim_cpu_percent": round(100 * s.sim_cpu_s / s.wall_s, 1) if s.wall_s else 0.0,
        # all the phone processes' CPU (render, encode, input, ADB) per screenshot taken
        "phone_cpu_ms_per_shot": (round(1000 * s.sim_cpu_s / s.screenshots, 1)
                                  if s.screenshots and s.sim_cpu_s else None),
        "device_p50_s": round(pct(s.device_s, 50), 4),
        "device_p95_s": round(pct(s.device_s, 95), 4),
        "llm_p50_s": round(pct(s.llm_s, 50), 4),
        "llm_p95_s": round(pct(s.llm_s, 95), 4),
        "phases_mean_s": {k: round(v / max(1, len(s.step_s)), 4)
                          for k, v in sorted(s.phase_sums.items())},
        "errors": len(s.errors), "error_samples": s.errors[:5],
        "capture": s.capture, "capture_p50_s": round(pct(s.capture_s, 50), 4),
        "capture_p95_s": round(pct(s.capture_s, 95), 4),
        "auto": auto_summary(s.devices),
        "fairness": f"{counts[0]}/{counts[-1]}",
    }
    if s.busy_s:
        n_steps = max(1, len(s.perception_cpu_s))
        r.update({
            "perception_cpu_s_p50": round(pct(s.perception_cpu_s, 50), 4),
            "perception_cpu_s_mean": round(statistics.mean(s.perception_cpu_s), 4)
            if s.perception_cpu_s else None,
            "ocr_runs_per_step": {k: round(s.ocr_runs.get(k, 0) / n_steps, 3)
                                  for k in ("full", "band", "unchanged", "cached", "deferred",
                                            "first")},
            "ground_p50_s": round(pct(s.ground_s, 50), 4),
            "ground_p95_s": round(pct(s.ground_s, 95), 4), "groundings": len(s.ground_s),
            "SU": round(statistics.mean(e["SU"] for e in s.episodes), 4) if s.episodes else None,
            "episodes": len(s.episodes),
            "episode_outcomes": {st: sum(1 for e in s.episodes if e["status"] == st)
                                 for st in sorted({e["status"] for e in s.episodes})},
            "speculated": s.speculated, "speculation_skipped": s.speculation_skipped,
            "speculation_dropped": s.speculation_dropped, "ground_overflows": s.ground_overflows,
            "rec_lines": s.rec_lines, "rec_reused": s.rec_reused,
            # the run's thread CPU by stage (runtime.cpu_ledger), all phones, over its steps
            # (the work after a phone's last step included); p50: of the per-step figures
            "stage_cpu_s_per_step": {k: round(v / n_steps, 4)
                                     for k, v in sorted(s.stage_total_s.items())},
            "stage_cpu_s_p50": {k: round(pct(v, 50), 4) for k, v in sorted(s.stage_cpu_s.items())},
            "cpu_s_per_step": round(sum(s.stage_total_s.values()) / n_steps, 4),
            "work_per_step": {k: round(v / n_steps, 1) for k, v in sorted(s.work_counts.items())},
            "levers": s.levers,
            "prepare": s.prepare, "start": s.start,
            "episode_results": s.episodes,
        })
    tag = s.levers or (s.capture if several else "")
    print(f"N={s.n}{f' ({tag})' if tag else ''}: {r['steps_per_s']} steps/s, ratio {r['ratio']}, overhead p95 "
          f"{r['overhead_p95_s']} s, errors {r['errors']}", flush=True)
    return r


STARTS_TABLE = ("start", "prepare s", "prepare CPU s", "shapes", "perc CPU mean", "p50",
                "detect", "recognize", "encode", "decode", "steps", "SU")


def run_starts(args: argparse.Namespace, argv: list[str]) -> int:
    """--starts: the N = 1 run as a fresh install (an empty OCR cache), a second process on
    the cache the first left, and that process again once warmed up; each process is a
    child of this one, with ``MOBAGENT_OCR_CACHE`` pointing at one new folder."""
    from models.ocr import CACHE_ENV

    keep: list[str] = []
    skip = {"--starts", "--out", "--devices", "--passes", "--start-label"}
    it = iter(argv)
    for a in it:
        if a.split("=", 1)[0] in skip:
            if "=" not in a:
                next(it, None)
            continue
        keep.append(a)
    args.out.mkdir(parents=True, exist_ok=True)
    cache = args.out / "ocr-cache"
    if cache.exists():
        shutil.rmtree(cache)  # a fresh install's: nothing compiled, no shapes recorded
    env = {**os.environ, CACHE_ENV: str(cache.resolve())}
    rows: list[dict[str, Any]] = []
    for label, passes in (("fresh", 1), ("second", 2)):
        out = args.out / label
        cmd = [sys.executable, str(Path(__file__).resolve()), *keep, "--devices", "1",
               "--passes", str(passes), "--start-label", label, "--out", str(out)]
        print(f"--- {label} start: {' '.join(cmd[1:])}", flush=True)
        if subprocess.run(cmd, env=env, check=False).returncode != 0:
            print(f"the {label} start failed", file=sys.stderr)
            return 1
        rows += json.loads((out / "fleet.json").read_text())["results"]
    print("\nperception's start and a step's perception CPU (s), one phone (runtime.cpu_ledger)")
    print(" ".join(f"{h:>13}" for h in STARTS_TABLE))
    summary: dict[str, Any] = {}
    for r in rows:
        st, prep = r["stage_cpu_s_per_step"], r["prepare"]
        print(" ".join(f"{v:>13}" for v in (
            r["start"], f"{prep.get('wall_s', 0):.2f}", f"{prep.get('cpu_s', 0):.2f}",
            prep.get("shapes", 0), f"{r['perception_cpu_s_mean']:.4f}",
            f"{r['perception_cpu_s_p50']:.4f}", *(f"{st.get(k, 0.0):.4f}" for k in (
                "detect", "recognize", "encode", "decode")), r["steps"], r["SU"])))
        summary[r["start"]] = {"perception_cpu_s_mean": r["perception_cpu_s_mean"],
                               "perception_cpu_s_p50": r["perception_cpu_s_p50"],
                               "prepare": prep, "SU": r["SU"]}
    (args.out / "starts.json").write_text(json.dumps({"results": rows}, indent=2))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
