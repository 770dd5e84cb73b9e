"""A chaos soak: ``mobagent serve`` on simulated phones while the broker, phones and model fail.

What runs, all real but the model:

- ``host.serve.serve_agents`` in this process, on ``--phones`` SimFleet phones reached through
  a private adb server, with ``bus.url`` on a real mosquitto (persistence on);
- the model is a BENCHMARK STAND-IN on the loopback OpenAI server (``bench/openai_loopback.py``):
  the planner gets the task's reference operations, one per step (the step is found from the
  history in the prompt), the chooser the box whose text matches the target (else the first),
  the completion check "yes". A seeded share of its answers are 500s, 429s with Retry-After,
  slow replies and replies past ``llm.timeout_s``;
- a client that keeps one instruction outstanding per phone (``task.setup`` on the phone first,
  through the test API) and counts starts and finishes per (instruction_id, episode_id) from the
  device events;
- faults at seeded times: the broker stopped with SIGTERM and started again after a few
  seconds (``--broker-restarts``), or SIGKILLed, so that it loses what it had not saved
  (``--broker-kills``); a phone whose ADB transport drops every connection, then comes back
  (``fleet.restart``); with ``--perception remote`` the host runs no perception and
  ``--workers`` ``mobagent perceive`` processes serve it, ``--worker-kills`` of them
  SIGKILLed mid-run and started again (the host re-sends what a dead worker held);
- the client's side of the contract: an instruction whose outcome has not come after
  ``--resend-s`` is sent again with its id (the host drops a copy it has seen, and answers
  one it has finished with its outcome again: what a broker SIGKILL lost).

After ``--minutes`` no new instruction is sent; the outstanding ones are waited for (each at
most 20 s per step of its budget, plus a minute: past that it counts as lost), then the host is
cancelled and what is left running is counted.

The report: instructions sent (acknowledged by the broker), finished, lost (acknowledged and never
finished), run twice (more than one episode id), SU of the finished ones, leftover asyncio tasks
and threads, RSS peak in the first and in the last minute. The last printed line is one JSON
object. ``python -m bench.soak --minutes 2 --phones 4`` (or ``mobagent bench soak ...``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import random
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
import tracemalloc
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from bench.mosquitto import MOSQUITTO, MosquittoBroker, free_port
from bench.openai_loopback import (
    Behaviour,
    RecordedRequest,
    completion_reply,
    planner_reply,
    task_state,
)
from models.llm.prompts.chooser import CHOOSER_SYSTEM
from models.llm.prompts.completion import COMPLETION_SYSTEM
from models.llm.prompts.judge import JUDGE_SYSTEM
from models.llm.prompts.progress import PROGRESS_SYSTEM
from protocol.operations import format_operation
from runtime.memory import bound_malloc

# ---------------------------------------------------------------- the stand-in model


def _one_line(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Job:
    """One instruction as the stand-in model sees it."""

    instruction: str  # one line, as the prompts show it
    reference: list[str]  # the reference operations, formatted as the agent writes them
    # the completion check's answer, read from the task's own check on the phone (done, why
    # not); None: "yes" on trust
    state: Callable[[], tuple[bool, str]] | None = None


# "3. Click text (Save) -> not found; not checked": the verdict is one word of a known set, as
# a loop's reason after it has "; " of its own
_STEP_RE = re.compile(r"^(\d+)\. (.*?) -> (.*?); (ok|unchanged|wrong_page|loop|incomplete|"
                      r"complete|not checked)\b", re.MULTILINE)
_HIDDEN_RE = re.compile(r"\((\d+) earlier steps not shown")
_TARGET_RE = re.compile(r"The target to tap: (.*)")
_NUMBERS_RE = re.compile(r"The boxes are numbered ([\d, ]+)\.")
_READ_RE = re.compile(r'(\d+): "([^"]*)"')
_UNDONE = ("wrong_page", "loop")


class StandInModel:
    """BENCHMARK-ONLY STAND-IN for a model: answers from each job's reference operations,
    with a seeded share of failures (``faults`` is the share of each kind)."""

    def __init__(self, *, seed: int, faults: float, delay_s: float, timeout_s: float) -> None:
        self.rng = random.Random(f"soak-model/{seed}")
        self.faults = faults
        self.delay_s = delay_s
        self.timeout_s = timeout_s
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self.stats: Counter[str] = Counter()

    def add(self, key: str, job: Job) -> bool:
        """``key``'s job from now on; False (nothing changed) when another key has a job with
        this instruction, as requests are told apart by their instruction."""
        with self._lock:
            if any(j.instruction == job.instruction for k, j in self._jobs.items() if k != key):
                return False
            self._jobs[key] = job
            return True

    def _job_for(self, text: str) -> Job | None:
        with self._lock:
            found = [j for j in self._jobs.values() if j.instruction in text]
        return max(found, key=lambda j: len(j.instruction)) if found else None

    def answer(self, req: RecordedRequest) -> Behaviour:
        texts = req.texts()
        system, text = (texts[0] if texts else ""), "\n".join(texts[1:])
        with self._lock:
            roll = self.rng.random()
            fault = (None if roll >= 4 * self.faults else
                     ("500", "429", "slow", "timeout")[int(roll / self.faults)])
        self.stats[fault or "ok"] += 1
        if fault == "500":
            return Behaviour.error(500, "The server had an error (stand-in)")
        if fault == "429":
            return Behaviour.error(429, "Rate limit reached (stand-in)",
                                   headers={"Retry-After": "1"})
        if fault == "timeout":
            return Behaviour.reply("(too late)", delay_s=self.timeout_s + 1.0)
        delay = self.delay_s * (4 if fault == "slow" else 1)
        if system.startswith(CHOOSER_SYSTEM[:40]):
            return Behaviour.reply(self._choose(text), delay_s=delay)
        if system.startswith(COMPLETION_SYSTEM[:40]):
            # From the phone's real state (a Stop before the task is done hears what is
            # missing), not "yes" on trust: that made episodes "succeed" whose check failed.
            asked = self._job_for(_one_line(text))
            ok, why = ((True, "every step is done") if asked is None or asked.state is None
                       else asked.state())
            self.stats["complete_yes" if ok else "complete_no"] += 1
            return Behaviour.reply(completion_reply(ok, why), delay_s=delay)
        if system.startswith(JUDGE_SYSTEM[:40]):
            return Behaviour.reply("Verdict: A\nReason: it did what was meant.", delay_s=delay)
        if system.startswith(PROGRESS_SYSTEM[:40]):
            return Behaviour.reply("Progress: the steps so far are done.", delay_s=delay)
        job = self._job_for(_one_line(text))
        if job is None:
            self.stats["unknown_job"] += 1
            return Behaviour.error(400, "stand-in: no job has this instruction")
        done = self._done(job, text)
        action = job.reference[done] if done < len(job.reference) else "Stop"
        self.stats["plan_stop" if action == "Stop" else "plan_step"] += 1
        return Behaviour.reply(planner_reply(action), delay_s=delay)

    @staticmethod
    def _done(job: Job, text: str) -> int:
        """How many reference steps the history shows done (hidden steps count as done)."""
        m = _HIDDEN_RE.search(text)
        done = int(m.group(1)) if m else 0
        for step in _STEP_RE.finditer(text):
            action, result, verdict = step.group(2), step.group(3), step.group(4)
            if (done < len(job.reference) and _one_line(action) == job.reference[done]
                    and verdict not in _UNDONE and "not found" not in result.lower()):
                done += 1
        return done

    @staticmethod
    def _choose(text: str) -> str:
        numbers = _NUMBERS_RE.search(text)
        labels = [n.strip() for n in numbers.group(1).split(",")] if numbers else ["1"]
        target = _TARGET_RE.search(text)
        want = target.group(1).strip().lower() if target else ""
        for n, read in _READ_RE.findall(text):
            if want and read.strip().lower() in want:
                return f"Box: {n}"
        return f"Box: {labels[0]}"


class TaskPicker:
    """The soak's next task for a phone: one whose instruction no other phone has now,
    registered with the stand-in model.

    A task is made for the phones' own seed (``phone_seed``), as ``host/eval.py`` and
    ``bench/fleet.py`` do: a task's reference operations are worked out on a phone of the
    task's seed (a seed shuffles the Settings lists, the TikTok feed, the fonts), so a
    reference made for another seed pages past ``Network & internet`` on these phones, or
    likes the wrong video, and the stand-in, which plays the reference blindly, fails.
    """

    def __init__(self, pool: Sequence[type[Any]], model: StandInModel, rng: random.Random,
                 *, phone_seed: int) -> None:
        self.pool = list(pool)
        self.model = model
        self.rng = rng
        self.phone_seed = phone_seed

    def pick(self, serial: str, phone: Any) -> Any:
        """``phone``'s state answers the stand-in's completion check for the task."""
        for cls in self.rng.sample(self.pool, len(self.pool)):
            task = cls(self.phone_seed)
            job = Job(_one_line(task.instruction),
                      [_one_line(format_operation(op)) for op in task.reference],
                      functools.partial(task_state, task, phone))
            if self.model.add(serial, job):
                return task
        return None


# ---------------------------------------------------------------- the client's book-keeping


@dataclass
class Book:
    sent: list[str] = field(default_factory=list)  # acknowledged by the broker
    unacknowledged: int = 0  # the publish failed: not counted as sent
    started: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    finished: dict[tuple[str, str], int] = field(default_factory=Counter)
    outcomes: dict[str, str] = field(default_factory=dict)  # instruction id -> status
    reasons: dict[str, str] = field(default_factory=dict)  # instruction id -> why not succeeded
    succeeded_su: int = 0  # finished and the task checks out on the phone
    misses: dict[str, str] = field(default_factory=dict)  # succeeded, check fails: id -> task
    checked: int = 0
    resent: int = 0  # instructions sent again (same id): no EpisodeStarted within --resend-s
    resent_started: int = 0  # sent again after its episode started: no outcome yet
    resends: dict[str, int] = field(default_factory=dict)
    sent_at: dict[str, float] = field(default_factory=dict)  # instruction id -> first send, s
    task_of: dict[str, str] = field(default_factory=dict)  # instruction id -> task id
    changed: anyio.Event = field(default_factory=anyio.Event)

    def finished_ids(self) -> set[str]:
        return {iid for iid, _ in self.finished}

    def poke(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


# ---------------------------------------------------------------- the soak


async def soak(args: argparse.Namespace, adb_port: int, broker: MosquittoBroker,
               base_url: str, model: StandInModel, fleet: Any,
               workers: list[Any]) -> dict[str, Any]:
    """``workers``: the ``mobagent perceive`` processes (``--perception remote``), restarted
    in place when the chaos kills one."""
    import msgspec

    from bench.perception_workers import WorkerProcess
    from host.runner import load_host_config
    from host.serve import serve_agents
    from protocol.messages import CODEC, EpisodeFinished, EpisodeStarted, Instruction
    from runtime import topics
    from runtime.bus import Bus, parse_broker_url
    from runtime.config import default_config_path
    from sim.eval.tasks import TASKS

    cfg = load_host_config(default_config_path(), overrides=[
        f"bus.url={broker.url}", f"llm.base_url={base_url}", "llm.api_key=soak-stand-in",
        f"llm.timeout_s={args.llm_timeout}", "llm.requests_per_minute=6000",
        f"llm.max_concurrent={max(4, args.phones)}", f"fleet.adb_port={adb_port}",
        "agent.settle_s=0.1", "log.level=error",
        *(["agent.perception=remote", "agent.perception_resend_s=5"]
          if args.perception == "remote" else [])])
    cfg = msgspec.structs.replace(cfg, fleet=msgspec.structs.replace(
        cfg.fleet, serials=list(fleet.serials)))
    rng = random.Random(f"soak/{args.seed}")
    book = Book()
    rss: list[tuple[float, float]] = []
    faults: list[dict[str, Any]] = []
    t0 = time.monotonic()
    deadline = t0 + args.minutes * 60
    picker = TaskPicker([t for t in TASKS if t.tier in (1, 2)], model, rng,
                        phone_seed=fleet.seed)

    snapshots: dict[str, Any] = {}

    async def sample_rss() -> None:
        while True:
            rss.append((time.monotonic() - t0, rss_mb()))
            if (args.tracemalloc and "minute_1" not in snapshots
                    and time.monotonic() - t0 >= 60):
                snapshots["minute_1"] = tracemalloc.take_snapshot()
            await anyio.sleep(1.0)

    async def pump(bus: Bus) -> None:
        async for _topic, msg in bus.messages():
            if isinstance(msg, EpisodeStarted):
                book.started[msg.instruction_id].add(msg.episode_id)
            elif isinstance(msg, EpisodeFinished):
                book.finished[(msg.instruction_id, msg.episode_id)] += 1
                book.outcomes[msg.instruction_id] = msg.status
                if msg.status != "succeeded":
                    book.reasons[msg.instruction_id] = f"{msg.status}: {msg.reason}"[:200]
            book.poke()

    async def phone_loop(bus: Bus, serial: str, index: int) -> None:
        phone = fleet.phone(serial)
        k = 0
        while time.monotonic() < deadline:
            k += 1
            task = picker.pick(serial, phone)  # picked and registered with no await between
            while task is None:  # every instruction is another phone's now: wait for one
                await anyio.sleep(0.5)
                task = picker.pick(serial, phone)
            await anyio.to_thread.run_sync(task.setup, phone)
            iid = f"soak-{index:02d}-{k:04d}"
            instruction = Instruction(id=iid, text=task.instruction, max_steps=task.step_budget)
            try:
                with anyio.fail_after(cfg.bus.publish_timeout_s + 5):
                    await bus.publish(topics.device_instructions(serial), instruction)
            except Exception:  # not acknowledged: never counted as sent
                book.unacknowledged += 1
                await anyio.sleep(1.0)
                continue
            book.sent.append(iid)
            book.task_of[iid] = task.task_id()
            book.sent_at[iid] = time.monotonic() - t0
            # Bounded after the sending stops, so that the soak ends by itself: an
            # instruction still unfinished `--drain-s` after the deadline counts as lost.
            budget = min(task.step_budget * 20 + 60,
                         max(1.0, deadline + args.drain_s - time.monotonic()))
            with anyio.move_on_after(budget):
                while iid not in book.finished_ids():
                    with anyio.move_on_after(args.resend_s):
                        await book.changed.wait()
                    # The client's side of the contract (docs/fleet.md): an instruction
                    # whose outcome has not come is sent again with its id. Not started: a
                    # broker SIGKILLed with it unsaved lost it (the host drops a copy it has
                    # seen). Started: its outcome may be what the broker lost (a host that
                    # has finished it publishes the outcome again; a running one says
                    # nothing).
                    if (iid not in book.finished_ids()
                            and time.monotonic() - t0 - book.sent_at[iid]
                            >= args.resend_s * (book.resends.get(iid, 0) + 1)):
                        with anyio.move_on_after(cfg.bus.publish_timeout_s + 5):
                            await bus.publish(topics.device_instructions(serial), instruction)
                            if iid in book.started:
                                book.resent_started += 1
                            else:
                                book.resent += 1
                            book.resends[iid] = book.resends.get(iid, 0) + 1
            if iid in book.finished_ids():
                book.checked += 1
                ok = await anyio.to_thread.run_sync(task.is_successful, phone)
                book.succeeded_su += int(ok and book.outcomes.get(iid) == "succeeded")
                if not ok and book.outcomes.get(iid) == "succeeded":
                    book.misses[iid] = task.task_id()

    async def chaos() -> None:
        span = max(args.minutes * 60 - 10, 5)
        kills = args.worker_kills if workers else 0
        plan = sorted([("broker", rng.uniform(5, span)) for _ in range(args.broker_restarts)]
                      + [("broker_kill", rng.uniform(5, span)) for _ in range(args.broker_kills)]
                      + [("phone", rng.uniform(5, span)) for _ in range(args.phone_drops)]
                      + [("worker", rng.uniform(5, span)) for _ in range(kills)],
                      key=lambda p: p[1])
        for kind, at in plan:
            await anyio.sleep(max(0.0, t0 + at - time.monotonic()))
            down = round(rng.uniform(2, 5), 1)
            at_s = round(time.monotonic() - t0, 1)
            if kind == "broker":
                await anyio.to_thread.run_sync(functools.partial(broker.restart, down_s=down))
                faults.append({"kind": "broker_restart", "at_s": at_s, "down_s": down})
            elif kind == "broker_kill":  # no save on the way down: what was unsaved is gone
                await anyio.to_thread.run_sync(functools.partial(
                    broker.restart, sig=signal.SIGKILL, down_s=down))
                faults.append({"kind": "broker_kill", "at_s": at_s, "down_s": down})
            elif kind == "worker":  # SIGKILL mid-run; the hosts re-send what it held
                i = rng.randrange(len(workers))
                await anyio.to_thread.run_sync(workers[i].kill)
                await anyio.sleep(down)
                workers[i] = WorkerProcess(broker.url, f"perceive-{i}")
                await workers[i].wait_ready()
                faults.append({"kind": "worker_kill", "worker": i, "at_s": at_s,
                               "down_s": down})
            else:
                serial = rng.choice(fleet.serials)
                phone = fleet.phone(serial)
                phone.faults.drop_connections = True
                await anyio.sleep(down)
                phone.faults.drop_connections = False
                await anyio.to_thread.run_sync(fleet.restart, serial)
                faults.append({"kind": "phone_drop", "serial": serial, "at_s": at_s,
                               "down_s": down})

    address = parse_broker_url(broker.url)
    async with anyio.create_task_group() as outer:
        outer.start_soon(sample_rss)
        async with anyio.create_task_group() as host_tg:
            await host_tg.start(functools.partial(
                serve_agents, cfg, record_dir=Path(args.record) if args.record else None))
            async with Bus(cfg.bus, address, client_id="soak-client", persistent=True,
                           codec=CODEC) as bus, anyio.create_task_group() as client_tg:
                for kind in ("episode_started", "episode_finished"):
                    await bus.subscribe(topics.device_events_filter(None, kind))
                client_tg.start_soon(pump, bus)
                async with anyio.create_task_group() as work:
                    work.start_soon(chaos)
                    for i, serial in enumerate(fleet.serials):
                        work.start_soon(phone_loop, bus, serial, i)
                client_tg.cancel_scope.cancel()
            host_tg.cancel_scope.cancel()
        outer.cancel_scope.cancel()
    me = asyncio.current_task()
    left = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
    grown = (grown_since(snapshots["minute_1"], tracemalloc.take_snapshot())
             if args.tracemalloc and "minute_1" in snapshots else [])
    elapsed = time.monotonic() - t0
    first = [m for t, m in rss if t <= 60] or [0.0]
    second = [m for t, m in rss if 60 < t <= 120] or [0.0]
    last = [m for t, m in rss if t >= rss[-1][0] - 60] if rss else [0.0]
    sent = set(book.sent)
    finished = book.finished_ids()
    lost = sorted(sent - finished)
    kills = [f["at_s"] for f in faults if f["kind"] == "broker_kill"]
    twice = sorted(i for i in sent if len(book.started.get(i, ())) > 1
                   or len({e for j, e in book.finished if j == i}) > 1)
    outcomes = Counter(book.outcomes[i] for i in sent & finished)
    return {
        "phones": args.phones, "minutes": args.minutes, "seed": args.seed,
        "phone_seed": args.phone_seed,
        "elapsed_s": round(elapsed, 1),
        "sent": len(sent), "unacknowledged": book.unacknowledged,
        "finished": len(sent & finished), "lost": len(lost), "lost_ids": lost[:20],
        # lost, but sent in the 60 s before a broker SIGKILL (what it had not saved), and
        # lost after their episode started (its outcome event is what went missing)
        "lost_near_broker_kill": sum(1 for i in lost if any(
            0 <= k - book.sent_at.get(i, -1e9) <= 60 for k in kills)),
        "lost_started": sum(1 for i in lost if i in book.started),
        "resent": book.resent, "resent_started": book.resent_started,
        "perception": args.perception,
        "twice": len(twice), "twice_ids": twice[:20],
        "outcomes": dict(outcomes), "not_succeeded": {i: f"{book.task_of.get(i)}: {r}"
                          for i, r in sorted(book.reasons.items())[:20]},
        "succeeded_but_check_failed": dict(sorted(book.misses.items())[:20]),
        "su": round(book.succeeded_su / book.checked, 3) if book.checked else None,
        "faults": faults, "model_answers": dict(model.stats),
        "leftover_asyncio_tasks": len(left),
        "leftover_asyncio_task_names": sorted({t.get_name() for t in left})[:20],
        "rss_peak_first_minute_mb": round(max(first), 1),
        "rss_peak_last_minute_mb": round(max(last), 1),
        "rss_mb_per_30s": [round(max(m for t, m in rss if k * 30 <= t < (k + 1) * 30), 1)
                           for k in range(int(rss[-1][0] // 30) + 1)
                           if any(k * 30 <= t < (k + 1) * 30 for t, _ in rss)] if rss else [],
        "rss_growth": round(max(last) / max(first) - 1, 3) if max(first) else None,
        # from the second minute's peak: the caches (onnxruntime's per-shape buffers, the
        # per-frame LRUs) take about 90 s to fill, so the first minute's peak is before them
        "rss_peak_second_minute_mb": round(max(second), 1),
        "rss_growth_from_second_minute": round(max(last) / max(second) - 1, 3)
        if max(second) else None,
        "tracemalloc_growth_top": grown,
    }


def grown_since(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot,
                top: int = 15) -> list[dict[str, Any]]:
    """The Python allocation sites that grew most between two snapshots (by line), to tell
    a leak (a site that keeps growing with the run's length) from caches filling up."""
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__),
              tracemalloc.Filter(False, "<frozen importlib._bootstrap*>")]
    stats = after.filter_traces(ignore).compare_to(before.filter_traces(ignore), "lineno")
    return [{"where": f"{Path(s.traceback[0].filename).name}:{s.traceback[0].lineno}",
             "file": s.traceback[0].filename.split("site-packages/")[-1][-80:],
             "kb": round(s.size_diff / 1024, 1), "count": s.count_diff}
            for s in stats[:top] if s.size_diff > 0]


def leftover_threads(before: set[int | None], grace_s: float = 5.0) -> list[threading.Thread]:
    """Threads started during the run still alive after ``grace_s`` (anyio's idle workers
    are told to stop when the loop ends and need a moment to go)."""
    end = time.monotonic() + grace_s
    while True:
        left = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.1)


def where(thread: threading.Thread) -> str:
    """The innermost frames of a thread, for a report of what it is stuck in."""
    frame = sys._current_frames().get(thread.ident or -1)
    stack = traceback.extract_stack(frame)[-4:] if frame is not None else []
    return " < ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(stack))


def _idle(stack: str) -> bool:
    return (stack.startswith("thread.py:") and "_worker" in stack.split(" < ")[0]) or (
        stack.startswith("threading.py:") and " queue.py:" in stack)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mobagent bench soak", description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=2.0, help="how long instructions are sent")
    p.add_argument("--phones", type=int, default=4)
    p.add_argument("--seed", type=int, default=0, help="the faults, the tasks and the model's")
    p.add_argument("--phone-seed", type=int, default=0,
                   help="the phones' seed; not 0 perturbs their screens (themes, layout), which "
                        "the stand-in, following the reference blindly, does not see")
    p.add_argument("--broker-restarts", type=int, default=2, help="SIGTERM, then start again")
    p.add_argument("--broker-kills", type=int, default=1,
                   help="SIGKILL, then start again (the broker loses what it had not saved)")
    p.add_argument("--perception", choices=("local", "remote"), default="local",
                   help="remote: the host runs none; --workers `mobagent perceive` processes "
                        "serve it, and --worker-kills of them are SIGKILLed and started again")
    p.add_argument("--workers", type=int, default=2, help="with --perception remote")
    p.add_argument("--worker-kills", type=int, default=1, help="with --perception remote")
    p.add_argument("--drain-s", type=float, default=120.0,
                   help="after --minutes, how long unfinished instructions are waited for "
                        "before they count as lost")
    p.add_argument("--resend-s", type=float, default=20.0,
                   help="the client sends an instruction again (same id) when its outcome "
                        "has not come after this long, and again each time it passes")
    p.add_argument("--phone-drops", type=int, default=1)
    p.add_argument("--faults", type=float, default=0.03,
                   help="share of model answers of each failure kind (500, 429, slow, timeout)")
    p.add_argument("--llm-delay", type=float, default=0.5, help="the stand-in's think time, s")
    p.add_argument("--llm-timeout", type=float, default=6.0, help="llm.timeout_s")
    p.add_argument("--record", metavar="DIR",
                   help="record every episode under DIR, as `mobagent serve --record` does "
                        "(`mobagent report DIR` renders it): to read a failing episode's steps")
    p.add_argument("--malloc-default", action="store_true",
                   help="keep glibc's malloc defaults (runtime/memory.py: they let RSS grow)")
    p.add_argument("--tracemalloc", action="store_true",
                   help="trace Python allocations (slower): the sites that grew most between "
                        "the end of the first minute and the end go in the report")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    malloc_bounded = False if args.malloc_default else bound_malloc()  # as `mobagent` does
    if (not 1 <= args.phones <= 32 or args.minutes <= 0 or not 0 <= args.faults <= 0.25
            or args.phone_seed < 0 or not 1 <= args.workers <= 8 or args.resend_s <= 0
            or min(args.broker_restarts, args.broker_kills, args.phone_drops,
                   args.worker_kills) < 0):
        print("bench/soak.py: --phones 1..32, --minutes > 0, --faults 0..0.25, --phone-seed >= 0, "
              "--workers 1..8, --resend-s > 0, fault counts >= 0", file=sys.stderr)
        return 2
    if MOSQUITTO is None:
        print("bench/soak.py: mosquitto is not installed (apt-get install mosquitto)",
              file=sys.stderr)
        return 2
    # A private adb server, set before adbutils is imported anywhere.
    adb_port = free_port()
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(adb_port)
    os.environ["ADB_EMU"] = "0"
    import structlog

    from bench.openai_loopback import OpenAIServer
    from sim.fleet import SimFleet, ensure_adb_server, stop_adb_server

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    print("the model is a BENCHMARK STAND-IN (reference operations, seeded failures) on the "
          "loopback OpenAI server; the host, bus, broker, adb and phones are real", flush=True)
    ensure_adb_server(adb_port)
    broker = MosquittoBroker(workdir=Path(tempfile.mkdtemp(prefix="soak-mosquitto-")),
                             port=free_port())
    model = StandInModel(seed=args.seed, faults=args.faults, delay_s=args.llm_delay,
                         timeout_s=args.llm_timeout)
    from bench.perception_workers import WorkerProcess

    workers: list[WorkerProcess] = []
    try:
        broker.start()
        if args.perception == "remote":
            workers.extend(WorkerProcess(broker.url, f"perceive-{i}") for i in range(args.workers))
            for w in workers:
                anyio.run(w.wait_ready)
        with SimFleet(args.phones, seed=args.phone_seed, adb_port=adb_port) as fleet, \
                OpenAIServer(policy=model.answer, keep_requests=False) as srv:
            threads_before = {t.ident for t in threading.enumerate()}
            if args.tracemalloc:
                tracemalloc.start(1)
            result = anyio.run(soak, args, adb_port, broker, srv.base_url, model, fleet,
                               workers)
            phones = {f"sim-adb-{m.phone.info.serial}" for m in fleet}  # the bench's, restarted
            phones |= {f"{w.name}-reader" for w in workers}  # the bench's worker processes
            left = [t for t in leftover_threads(threads_before) if t.name not in phones]
            # A pool thread waiting for work (anyio's worker, asyncio's executor) is idle: the
            # phones' servers' own loops keep theirs, while this loop's are stopped when it
            # ends. One stuck inside a call (abandoned on cancel) is what is left running.
            idle = [t for t in left if _idle(where(t))]
            busy = [t for t in left if t not in idle]
            result["leftover_threads"] = len(busy)
            result["leftover_thread_names"] = sorted({t.name for t in busy})[:20]
            result["leftover_thread_where"] = [where(t) for t in busy][:20]
            result["idle_worker_threads"] = len(idle)
            result["broker_starts"] = broker.starts
            result["malloc_bounded"] = malloc_bounded
    finally:
        for w in workers:
            w.stop()
        broker.remove()  # and its temporary workdir (persistence, log)
        stop_adb_server(adb_port)
    print(f"sent {result['sent']}, finished {result['finished']}, lost {result['lost']}, "
          f"run twice {result['twice']}, SU {result['su']}, outcomes {result['outcomes']}")
    print(f"faults: {result['faults']}")
    print(f"left running: {result['leftover_asyncio_tasks']} asyncio tasks, "
          f"{result['leftover_threads']} threads {result['leftover_thread_names']}; RSS peak "
          f"{result['rss_peak_first_minute_mb']} MB (first minute) -> "
          f"{result['rss_peak_last_minute_mb']} MB (last minute)")
    print(json.dumps(result))
    return 0 if result["lost"] == 0 and result["twice"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
