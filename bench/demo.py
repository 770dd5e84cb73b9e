"""``mobagent demo``: Mobile-Eval-sim tasks through the real actors, on embedded defaults.

A thin front on ``bench/mobile_eval.py``'s runner: several simulated phones behind the adb
server, an embedded broker, one ``AgentHost`` (the real capture, perception, actuator and
reflector actors), the ORACLE planner (``bench/oracle.py``) and a queue of (task, seed)
episodes shared by the phones, scored SU / PS / RE / CR from the recorded events. Unlike
the benchmark it defaults to a short demo set, prints every step, and renders the HTML
report at the end.

Run it: ``.venv/bin/python -m bench.demo --seeds 0,1,2 --tasks all --phones 2``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import msgspec

from actors.config import AgentConfig, load_agent_config
from bench.mobile_eval import Episode, SuiteResult, print_results
from bench.mobile_eval import run_suite as run_eval_suite
from runtime.config import default_config_path
from runtime.log import configure_logging
from sim.eval.task import Task
from sim.eval.tasks import TASKS, get_task

__all__ = ["DEMO_TASKS", "default_out", "print_results", "run_suite", "select_tasks"]

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


def _show(ep: Episode) -> None:
    sc = ep.result.score
    print(f"== {ep.serial} {ep.result.task_id} seed {ep.result.seed}: SU {sc.su:.0f} "
          f"PS {sc.ps:.2f} CR {sc.cr:.2f} steps {sc.steps}/{sc.reference_steps}"
          + (f" ERROR {ep.result.error}" if ep.result.error else ""), flush=True)


async def run_suite(
    tasks: Sequence[type[Task]], seeds: Sequence[int], *, phones: int, out_dir: Path,
    cfg: AgentConfig | None = None, progress: bool = True, report: bool = True,
) -> SuiteResult:
    return await run_eval_suite(tasks, seeds, devices=phones, out_dir=out_dir, cfg=cfg,
                                step_lines=progress, on_episode=_show if progress else None,
                                report=report)


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
