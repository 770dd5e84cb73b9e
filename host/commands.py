"""``mobagent run`` / ``demo`` / ``replay``: the agent's commands (entry points).

They live in host/, the one place where the product may start simulated phones (sim/,
which actors/ may not import). ``run`` and ``demo`` run their episodes on the host's one
runner (``host.runner.agent_host``: a fleet on a fixed list of phones). Exit codes follow
runtime/cli.py: 0 ok, 1 failed, 2 usage, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import msgspec

from actors.config import AgentConfig
from actors.episode import EpisodeOutcome
from actors.planner import LLMPolicy, Policy, RoleSetup
from devices.adb import AdbDevice, DeviceError
from devices.discovery import FixedDevices
from host.runner import AgentHostConfig, agent_host
from models.llm import LLMClient, LLMConfigError
from protocol.messages import Instruction
from recording.reader import episode_events_file, read_events
from recording.recorder import safe_name
from runtime.cli import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_USAGE,
    _run_async,
    config_from_args,
    whole_number,
)
from runtime.config import secret_values
from runtime.log import configure_logging

Sub = Any  # argparse's private _SubParsersAction


def _config(args: argparse.Namespace) -> AgentHostConfig:
    cfg = config_from_args(args, AgentHostConfig, unknown_sections="ignore")
    level = getattr(args, "log_level", None) or "warning"
    configure_logging(msgspec.structs.replace(cfg.log, level=level), secret_values(cfg))
    if not cfg.bus.url:  # self-contained commands: an embedded broker on a free port
        cfg = msgspec.structs.replace(cfg, broker=msgspec.structs.replace(cfg.broker, port=0))
    return cfg


# ---- run -------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    cfg = _config(args)
    task = None
    if args.task:
        from sim.eval.tasks import get_task

        try:
            task = get_task(args.task)(args.seed)
        except KeyError as exc:
            print(f"mobagent run: {exc.args[0]}", file=sys.stderr)
            return EXIT_USAGE
    text = args.instruction or (task.instruction if task is not None else "")
    if not text.strip():
        print("mobagent run: give an instruction, or --task ID to use a Mobile-Eval task's",
              file=sys.stderr)
        return EXIT_USAGE
    if args.planner == "oracle" and (task is None or args.device):
        print("mobagent run: --planner oracle replays a task's reference solution on a simulated"
              " phone: give --task ID and no --device", file=sys.stderr)
        return EXIT_USAGE
    if args.planner == "llm":
        try:
            cfg.llm.resolve_api_key()
        except LLMConfigError as exc:
            print(f"mobagent run: {exc}.\nWithout a key you can still watch the agent on the "
                  "simulated phone with the oracle planner, e.g.:\n"
                  "  mobagent run --planner oracle --task settings-1", file=sys.stderr)
            return EXIT_USAGE
    out = Path(args.out) if args.out else Path("runs") / f"run-{time.strftime('%Y%m%d-%H%M%S')}"
    if args.max_steps:
        cfg = msgspec.structs.replace(
            cfg, agent=msgspec.structs.replace(cfg.agent, max_steps=args.max_steps))
    return _run_async(lambda: _run(cfg, args, text, task, out))


async def _run(cfg: AgentConfig, args: argparse.Namespace, text: str, task: Any,
               out: Path) -> int:
    from host.eval import recorded_events
    from sim.fleet import SimFleet  # only when no device is given

    async with AsyncExitStack() as stack:
        fleet = None
        if args.device:
            serial = args.device
            dev = AdbDevice(serial, capture=cfg.device.capture, timeout_s=cfg.device.timeout_s)
            try:
                await dev.window_size()
            except DeviceError as exc:
                print(f"mobagent run: device {serial!r} does not answer: {exc}", file=sys.stderr)
                return EXIT_FAIL
        else:
            fleet = await anyio.to_thread.run_sync(lambda: SimFleet(1, seed=args.seed).start())
            stack.callback(fleet.stop)
            serial = fleet.serials[0]
            phone = fleet.phone(serial)
            if task is not None:
                await anyio.to_thread.run_sync(task.setup, phone)
            print(f"no --device: started a simulated phone, {serial}", file=sys.stderr)

        # The grounder role (perception.*_grounding) needs the client even under the oracle.
        llm = (await stack.enter_async_context(LLMClient(cfg.llm))
               if args.planner != "oracle" or cfg.perception.grounder_needed() else None)
        if args.planner == "oracle":
            from host.oracle import OraclePolicy

            assert fleet is not None and task is not None
            policy: Policy = OraclePolicy(task, fleet.phone(serial))  # type: ignore[arg-type]
        else:
            assert llm is not None
            policy = LLMPolicy(llm, RoleSetup.from_settings(cfg.llm),
                         keep_screenshots=cfg.agent.keep_screenshots,
                               max_reasks=cfg.agent.max_reasks)

        host = agent_host(cfg, lambda _s, _i: policy, source=FixedDevices([serial]),
                          record_dir=out, progress=True, llm=llm)
        instr = Instruction(id=uuid.uuid4().hex[:12], text=text,
                            task=task.task_id() if task is not None else None, device=serial)
        async with anyio.create_task_group() as tg:
            await tg.start(host.run)
            got = await host.run_on(serial, instr)
            outcome = got.finished
            executed = len(got.result.operations) if isinstance(got.result, EpisodeOutcome) else 0
            await recorded_events(out / safe_name(outcome.episode_id) / "events.jsonl", executed)
            tg.cancel_scope.cancel()
        print(f"\nepisode {outcome.episode_id}: {outcome.status} after {outcome.steps} steps"
              + (f" ({outcome.reason})" if outcome.reason else ""))
        if task is not None and fleet is not None:
            ok = await anyio.to_thread.run_sync(task.is_successful, fleet.phone(serial))
            print(f"task {task.task_id()}: {'success' if ok else 'not successful'} "
                  "(judged on the simulator's state)")
        _report(out)
        return EXIT_OK if outcome.status == "succeeded" else EXIT_FAIL
    return EXIT_FAIL


def _report(out: Path) -> None:
    try:
        from recording.report import render_report

        print(f"report: {render_report(out)}")
    except Exception as exc:
        print(f"recorded in {out} (no HTML report: {type(exc).__name__}: {exc})")


# ---- demo ------------------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace) -> int:
    from host.eval import default_out, print_results, run_demo, select_tasks

    cfg = _config(args)
    try:
        tasks = select_tasks(args.tasks)
    except KeyError as exc:
        print(f"mobagent demo: {exc.args[0]}", file=sys.stderr)
        return EXIT_USAGE
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        print(f"mobagent demo: --seeds takes numbers, e.g. 0,1,2 (got {args.seeds!r})",
              file=sys.stderr)
        return EXIT_USAGE
    out = Path(args.out) if args.out else default_out("demo")
    print(f"demo: {len(tasks) * len(seeds)} Mobile-Eval-sim episodes on {args.phones} simulated "
          f"phones, oracle planner, real actors; recording to {out}", flush=True)

    async def go() -> int:
        async with AsyncExitStack() as stack:
            run_cfg = cfg
            if args.dashboard:  # the live page on the demo's broker; its URL is printed first
                from host.dashboard.server import demo_dashboard

                run_cfg = await stack.enter_async_context(demo_dashboard(cfg, args))
            res = await run_demo(tasks, seeds, phones=args.phones, out_dir=out, cfg=run_cfg,
                                 progress=not args.quiet)
            print_results(res)
            if args.keep:  # the fleet and the oracle stay up for an MCP client to drive
                from host.demo_keep import keep_serving

                port = config_from_args(args, AgentHostConfig,
                                        unknown_sections="ignore").broker.port
                await keep_serving(run_cfg, phones=args.phones, seed=seeds[0] if seeds else 0,
                                   out_dir=out, tasks=tasks, broker_port=port)
            if args.dashboard and sys.stdout.isatty():
                print("dashboard: still serving; Ctrl-C to stop", flush=True)
                await anyio.sleep_forever()
        return EXIT_OK

    return _run_async(go)


# ---- replay ----------------------------------------------------------------------------


def recorded_actions(path: Path) -> list[dict[str, Any]]:
    """The successful ActionDone events of a recorded episode, in order."""
    file = episode_events_file(path)
    events, _ = read_events(file, str(file))
    return [ev for ev in events if ev.get("event") == "action_done" and ev.get("ok")]


def cmd_replay(args: argparse.Namespace) -> int:
    cfg = _config(args)
    try:
        actions = recorded_actions(Path(args.dir))
    except (OSError, ValueError) as exc:
        print(f"mobagent replay: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not actions:
        print("mobagent replay: the recording has no performed actions", file=sys.stderr)
        return EXIT_FAIL
    return _run_async(lambda: _replay(cfg, args, actions))


async def _replay(cfg: AgentConfig, args: argparse.Namespace, actions: list[dict[str, Any]]) -> int:
    from actors.actuator import ActionFailed, ActuatorEngine
    from protocol.operations import GROUNDED_OPS, Operation
    from sim.fleet import SimFleet

    async with AsyncExitStack() as stack:
        if args.device:
            serial = args.device
        else:
            fleet = await anyio.to_thread.run_sync(lambda: SimFleet(1, seed=args.seed).start())
            stack.callback(fleet.stop)
            serial = fleet.serials[0]
            if args.task:
                from sim.eval.tasks import get_task

                task = get_task(args.task)(args.seed)
                phone = fleet.phone(serial)
                await anyio.to_thread.run_sync(lambda: task.setup(phone))  # type: ignore[arg-type]
            print(f"no --device: replaying on a simulated phone, {serial}", file=sys.stderr)
        dev = AdbDevice(serial, capture=cfg.device.capture, timeout_s=cfg.device.timeout_s)
        size = await dev.window_size()
        act = ActuatorEngine(dev, packages=cfg.agent.packages, wait_s=cfg.agent.wait_s)
        for i, ev in enumerate(actions, 1):
            op: Operation = msgspec.convert(ev["operation"], Operation)
            point = (int(ev["x"]), int(ev["y"])) if ev.get("x") is not None else None
            if isinstance(op, GROUNDED_OPS) and point is None:
                print(f"{i}. skipped {op!r}: no recorded point", file=sys.stderr)
                continue
            try:
                res = await act.perform(op, point=point, size=size)
            except (ActionFailed, DeviceError) as exc:
                print(f"{i}. FAILED: {exc}")
                return EXIT_FAIL
            print(f"{i}. {res.detail}")
            await anyio.sleep(cfg.agent.settle_s)
        return EXIT_OK
    return EXIT_FAIL


# ---- registration (entry points in the mobagent.commands group) -----------------------


def register_run(sub: Sub) -> None:
    p = sub.add_parser("run", help="run one instruction on a phone (a simulated one by default)",
                       description="Run one episode. With no --device a simulated phone is "
                                   "started; without an API key use --planner oracle --task ID.")
    p.add_argument("instruction", nargs="?", default="", help="what to do, in plain words")
    p.add_argument("--device", help="the phone's adb serial (default: start a simulated phone)")
    p.add_argument("--planner", choices=("llm", "oracle"), default="llm")
    p.add_argument("--task", help="a Mobile-Eval-sim task id (sets up the simulated phone)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--out", help="run directory for the recording and report")
    p.set_defaults(func=cmd_run)


def register_demo(sub: Sub) -> None:
    p = sub.add_parser("demo", help="Mobile-Eval-sim tasks on simulated phones, oracle planner",
                       description="The main job on embedded defaults: an embedded broker, "
                                   "simulated phones, Mobile-Eval-sim tasks through the real "
                                   "actors, a results table and an HTML report.")
    p.add_argument("--out", help="run directory (default runs/demo-<time>)")
    p.add_argument("--phones", type=whole_number(1, 16, "phones"), default=3, help="simulated phones (1-16)")
    p.add_argument("--tasks", default="demo", help="'demo', 'all' or comma-separated task ids")
    p.add_argument("--seeds", default="0")
    p.add_argument("--quiet", action="store_true", help="no per-step progress lines")
    p.add_argument("--dashboard", action="store_true",
                   help="watch the phones live in a browser (the URL is printed first)")
    p.add_argument("--keep", action="store_true",
                   help="afterwards keep the simulated phones and the oracle planner running "
                        "on the embedded broker (port broker.port, 1883), for `mobagent mcp` "
                        "or `mobagent submit` to drive; Ctrl-C stops")
    p.add_argument("--dashboard-port", type=whole_number(0, 65535, "port"), default=None,
                   help="the dashboard's port (default dashboard.port, 8765; 0: any free one)")
    p.set_defaults(func=cmd_demo)


def register_replay(sub: Sub) -> None:
    p = sub.add_parser("replay", help="re-run a recorded episode's actions on a device",
                       description="Perform a recorded episode's actions again, at the "
                                   "recorded points.")
    p.add_argument("dir", help="an episode directory (or its events.jsonl)")
    p.add_argument("--device", help="adb serial (default: a simulated phone)")
    p.add_argument("--task", help="set the simulated phone up for this task first")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_replay)
