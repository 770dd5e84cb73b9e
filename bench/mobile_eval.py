"""Mobile-Eval-sim: the 33 Mobile-Eval tasks and the tier-4 ones (Mobile-Eval-E style: a value
read in one app needed in another, long jobs) on simulated phones, through the real agent.

    .venv/bin/python -m bench.mobile_eval --planner oracle --seeds 0-4 --tiers 1,2,3,4 \\
        --devices 4 --out runs/mobile-eval [--tasks notes-1,Gmail,...] [--set agent.x=...]

The runner is ``host/eval.py`` (shared with ``mobagent demo``). Every episode runs through the fleet (``host.runner.agent_host``) and ``DeviceAgent``: capture, perception (real OCR
and icon grounding), the actuator through the adb server, the reflector, and the recorder.
The phones are simulated (``sim.fleet.SimFleet``, one fleet of N phones per seed, since a
phone's seed is fixed at boot); the N phones of a seed share one queue of tasks, so N
episodes run at once on one host with one shared perception pool. The planner is
- ``oracle``: ``host/oracle.py``'s ``OraclePolicy``, each task's reference solution issued
  step by step (benchmark-only; its one use of ground truth is the PERFECT CHOOSER among
  ambiguous grounding candidates, labelled there), so it measures everything but the LLM;
- ``llm``: the agent's ``LLMPolicy`` on the ``[llm]`` endpoint of the config.

Scoring (definitions in ``sim/eval/metrics.py``). SU is the task's ``is_successful`` on the
phone's own state after the episode. The steps are read back from the recorder's
``events.jsonl``: each ``ActionDone`` with ``ok`` is one step, an operation performed on
the phone. The milestone flags after a step are read from the phone's state by a probe
wrapped around the policy, at the start of the next step (after the settle wait and the
next frame) or at the end of the episode; the policy never sees them.

``--devices 1,4`` runs the selection once per N (under DIR/devices-N/) and checks that every
(task, seed) has the same SU at every N; a difference is printed and the exit status is 1.

Output: a progress bar; the paper's table (per app and tier: SU, PS, RE, CR); per-step
latencies; tasks per hour; DIR/results.json; DIR/<task>-s<seed>/ (the recorder's
events.jsonl and frames; ``mobagent report DIR`` renders them); and, last, one JSON line with
n_episodes, overall and per-tier SU/PS/RE/CR, tasks_per_hour and devices.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio  # noqa: E402
import msgspec  # noqa: E402

from actors.config import AgentConfig  # noqa: E402
from actors.planner import Policy  # noqa: E402
from host.eval import (  # noqa: E402
    Episode,
    MakePolicy,
    SuiteResult,
    oracle_policy,
    print_results,
    run_suite,
    steps_from_events,
    suite_summary,
)
from host.runner import load_host_config  # noqa: E402
from runtime.config import ConfigError, default_config_path  # noqa: E402
from runtime.log import configure_logging  # noqa: E402
from sim.eval.task import Task  # noqa: E402
from sim.eval.tasks import TASKS  # noqa: E402
from sim.phone import SimPhone  # noqa: E402
from sim.phone_api import DeviceState  # noqa: E402

__all__ = ["main", "parse_ints", "steps_from_events", "success_differences"]


def success_differences(runs: dict[int, SuiteResult]) -> list[str]:
    """(task, seed) pairs whose SU differs between device counts, described."""
    su: dict[tuple[str, int], dict[int, float]] = {}
    for n, res in runs.items():
        for r in res.results:
            su.setdefault((r.task_id, r.seed), {})[n] = r.score.su
    return [f"{tid} seed {seed}: " + ", ".join(f"SU {v:.0f} at N={n}" for n, v in sorted(by.items()))
            for (tid, seed), by in sorted(su.items())
            if len(set(by.values())) > 1 or len(by) != len(runs)]


# ---- command line -----------------------------------------------------------------------------


def parse_ints(text: str, what: str) -> list[int]:
    """'0-4' or '0,2,3' or '1-2,5' -> a sorted list of distinct ints."""
    out: set[int] = set()
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                a, b = part.split("-", 1)
                lo, hi = int(a), int(b)
                if lo > hi:
                    raise ValueError
                out.update(range(lo, hi + 1))
            elif part:
                out.add(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad {what} list {text!r} (e.g. 0-4 or 0,2,3)") from None
    if not out or min(out) < 0:
        raise argparse.ArgumentTypeError(f"bad {what} list {text!r}: need non-negative numbers")
    return sorted(out)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench/mobile_eval.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--planner", choices=("oracle", "llm"), default="oracle")
    p.add_argument("--seeds", type=lambda s: parse_ints(s, "seed"), default=[0])
    p.add_argument("--tiers", type=lambda s: parse_ints(s, "tier"), default=[1, 2, 3, 4],
                   help="1-3: the paper's 33 tasks; 4: the Mobile-Eval-E style ones (default all)")
    p.add_argument("--tasks", default="", help="comma-separated task ids or app rows (default all)")
    p.add_argument("--devices", type=lambda s: parse_ints(s, "device count"), default=[1],
                   help="phones driven at once (default 1); a list (1,4) runs the suite at each "
                        "N and checks that every task's success is the same")
    p.add_argument("--out", type=Path, required=True, help="results directory")
    p.add_argument("--settle-s", type=float, default=None,
                   help="wait after each action before the next frame (default: agent.settle_s)")
    p.add_argument("--config", help="agent config (default: $MOBAGENT_CONFIG or configs/default.toml)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one config value (repeatable)")
    p.add_argument("--report", action="store_true", help="render the HTML report at the end")
    p.add_argument("--device-profiles", default="sim",
                   help="comma-separated simulated phone profiles handed to the phones in turn "
                        "(sim, pixel-14, samsung-13, xiaomi-hyperos, foldable-14, android-10; "
                        "default sim)")
    p.add_argument("--states", default="",
                   help="comma-separated starting states handed to the phones in turn: "
                        f"{', '.join(START_STATES)} (default: awake). Every phone is set up as "
                        "the README says (a Xiaomi's USB debugging (Security settings) on)")
    p.add_argument("--adb-keyboard", choices=("as-state", "absent"), default="as-state",
                   help="absent: the ADB Keyboard is not installed on any phone, whatever "
                        "--states says (with device.transport=scrcpy text goes by the "
                        "clipboard and a paste; on adb, non-ASCII text then fails)")
    return p


# The states a phone may start an episode run in; the agent's preflight must bring each to
# a working phone (wake it, dismiss a keyguard with no PIN, enable the keyboard).
START_STATES = {
    "awake": DeviceState(usb_security=True),
    "asleep": DeviceState(awake=False, usb_security=True),
    "locked": DeviceState(locked=True, usb_security=True),
    "keyboard-disabled": DeviceState(adb_keyboard="disabled", usb_security=True),
}


def _states(text: str, adb_keyboard: str = "as-state") -> list[DeviceState]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in START_STATES]
    if unknown:
        raise SystemExit(f"bench/mobile_eval.py: unknown state(s) {', '.join(unknown)}: "
                         f"use {', '.join(START_STATES)}")
    states = [START_STATES[n] for n in names]
    if adb_keyboard == "absent":  # every phone, whatever its state: no ADB Keyboard at all
        states = [dataclasses.replace(st, adb_keyboard="absent")
                  for st in states or [START_STATES["awake"]]]
    return states


def _select(args: argparse.Namespace) -> list[type[Task]]:
    wanted = {w.strip() for w in args.tasks.split(",") if w.strip()} or None
    return [t for t in TASKS if t.tier in args.tiers
            and (wanted is None or t.task_id() in wanted or t.app in wanted)]


def _llm_policy(cfg: AgentConfig, llm: Any) -> MakePolicy:
    from actors.planner import LLMPolicy, RoleSetup

    def make(_task: Task, _phone: SimPhone) -> Policy:
        return LLMPolicy(llm, RoleSetup.from_settings(cfg.llm),
                         keep_screenshots=cfg.agent.keep_screenshots,
                         max_reasks=cfg.agent.max_reasks)

    return make


async def _run_all(args: argparse.Namespace, cfg: AgentConfig, chosen: list[type[Task]]
                   ) -> dict[int, SuiteResult]:
    from contextlib import AsyncExitStack

    runs: dict[int, SuiteResult] = {}
    async with AsyncExitStack() as stack:
        make_policy: MakePolicy = oracle_policy
        if args.planner == "llm":
            from models.llm import LLMClient

            llm = await stack.enter_async_context(LLMClient(cfg.llm))  # one client and limiter
            make_policy = _llm_policy(cfg, llm)
        for n in args.devices:
            out = args.out if len(args.devices) == 1 else args.out / f"devices-{n}"
            total = len(chosen) * len(args.seeds)
            bar = _progress_bar(total, f"N={n}")

            def tick(_ep: Episode, bar: Callable[..., None] = bar) -> None:
                bar()

            try:
                runs[n] = await run_suite(
                    chosen, args.seeds, devices=n, out_dir=out, cfg=cfg, make_policy=make_policy,
                    on_episode=tick, report=args.report, planner=args.planner,
                    device_profiles=[d.strip() for d in args.device_profiles.split(",")],
                    states=_states(args.states, args.adb_keyboard))
            finally:
                bar(close=True)
    return runs


def _progress_bar(total: int, label: str) -> Callable[..., None]:
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is a dependency, but a bar is not worth a crash

        def nothing(close: bool = False) -> None:
            return None

        return nothing
    bar = tqdm(total=total, unit="episode", desc=label, file=sys.stderr, dynamic_ncols=True)

    def tick(close: bool = False) -> None:
        bar.close() if close else bar.update()

    return tick


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.settle_s is not None and not 0 <= args.settle_s <= 10:
        print("bench/mobile_eval.py: --settle-s must be between 0 and 10 seconds", file=sys.stderr)
        return 2
    if any(not 1 <= n <= 64 for n in args.devices):
        print("bench/mobile_eval.py: --devices must be 1..64", file=sys.stderr)
        return 2
    if any(t not in (1, 2, 3, 4) for t in args.tiers):
        print("bench/mobile_eval.py: tiers are 1, 2, 3 and 4", file=sys.stderr)
        return 2
    chosen = _select(args)
    if not chosen:
        print(f"bench/mobile_eval.py: no task matches --tasks {args.tasks!r} and --tiers",
              file=sys.stderr)
        return 2
    overrides = list(args.set)
    if args.settle_s is not None:
        overrides.append(f"agent.settle_s={args.settle_s}")
    try:
        cfg = load_host_config(args.config or default_config_path(), overrides=overrides)
    except ConfigError as exc:
        print(f"bench/mobile_eval.py: config error: {exc}", file=sys.stderr)
        return 2
    if args.planner == "llm":
        from models.llm import LLMConfigError

        try:
            cfg.llm.resolve_api_key()
        except LLMConfigError as exc:
            print(f"bench/mobile_eval.py: --planner llm: {exc} (or --set llm.base_url=... for a "
                  "local OpenAI-compatible server); --planner oracle needs no key",
                  file=sys.stderr)
            return 2
    configure_logging(msgspec.structs.replace(cfg.log, level="warning"))
    runs = anyio.run(_run_all, args, cfg, chosen)
    tiers = args.tiers
    for n, res in runs.items():
        if len(runs) > 1:
            print(f"\n== {n} phone(s) ==")
        print_results(res)
    if len(runs) == 1:
        (res,) = runs.values()
        summ = suite_summary(res, tiers)
        summ.update({"planner": args.planner, "seeds": args.seeds})
        print(json.dumps(summ))
        return 0
    diffs = success_differences(runs)
    print("\ntasks/hour: " + ", ".join(f"N={n}: {r.tasks_per_hour:.1f}" for n, r in runs.items()))
    print("same per-task success at every N" if not diffs else
          "per-task success differs:\n  " + "\n  ".join(diffs))
    first = next(iter(runs.values()))
    summ = suite_summary(first, tiers)
    summ.update({"planner": args.planner, "seeds": args.seeds, "devices": list(runs),
                 "tasks_per_hour": {str(n): round(r.tasks_per_hour, 1) for n, r in runs.items()},
                 "by_devices": {str(n): suite_summary(r, tiers) for n, r in runs.items()},
                 "same_success": not diffs, "success_differences": diffs})
    print(json.dumps(summ))
    return 0 if not diffs else 1


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
