"""``mobagent serve``: the host runtime with the agent on every phone the adb server lists.

runtime/ cannot import actors/, so this command is a plug-in (entry point ``serve`` in the
``mobagent.commands`` group); it replaces the runtime's bare ``serve``, which stays
reachable as ``serve --runtime-only``. What it runs:

- ``host.runner.agent_host``: the host runtime (broker or URL, bus with the host's last
  will, the instruction gate) and a ``FleetManager`` configured by ``[fleet]``: discovery
  through adb's ``track_devices`` (``devices.discovery.AdbDevices``), one supervised group
  per phone, status, queues, Cancel;
- per phone, ``host.fleet_worker.agent_worker``: a ``DeviceAgent`` built from the config's
  ``[agent]`` and ``[device]`` sections, with the LLM policy of ``[llm]``;
- shared by all phones of the host: one ``PerceptionEngine`` (one model set, a bounded pool
  of ``agent.perception_workers``; none with ``--perception remote``, where ``mobagent
  perceive`` workers serve it) and one ``LLMClient``, whose rate limiter
  (``llm.max_concurrent``, ``llm.requests_per_minute``) is therefore per host;
- with ``--record DIR``, the recorder (``mobagent report DIR`` renders what it wrote).

The fleet announces every episode (``EpisodeStarted``, one ``EpisodeFinished``) and the
phones' status; the agent publishes its steps.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import anyio
import msgspec
import structlog
from anyio.abc import TaskStatus

from actors.planner import LLMPolicy, Policy, RoleSetup
from host.host_runtime import serve as serve_runtime
from host.runner import AgentHostConfig, agent_host
from models.llm import LLMClient, LLMConfigError
from protocol.messages import Instruction
from runtime import topics
from runtime.cli import EXIT_OK, EXIT_USAGE, prepare, run_until_signalled
from runtime.config import RuntimeConfig

log = structlog.get_logger(__name__)

NO_KEY_HELP = (
    "mobagent serve drives every phone with the LLM planner ([llm] in the config), so it needs "
    "an API key:\n"
    "  export OPENAI_API_KEY=sk-...            (or MOBAGENT_LLM__API_KEY, or api_key in [llm])\n"
    "For a local OpenAI-compatible server (vLLM, Ollama) no key is needed; point at it with\n"
    "  --set llm.base_url=http://127.0.0.1:8000/v1\n"
    "Without any LLM, `mobagent demo` runs the agent on simulated phones with the oracle planner."
)


async def serve_agents(
    cfg: AgentHostConfig, *, record_dir: Path | None = None,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> int:
    """Run the host with the agent on every phone until cancelled.

    ``LLMConfigError`` (no API key for a host that needs one) is raised before anything
    connects; ``task_status.started`` gets the broker URL.
    """
    llm = LLMClient(cfg.llm)  # checks the key first: nothing is started without one

    def policy_for(_serial: str, _instr: Instruction) -> Policy:
        return LLMPolicy(llm, RoleSetup.from_settings(cfg.llm),
                         keep_screenshots=cfg.agent.keep_screenshots,
                         max_reasks=cfg.agent.max_reasks)

    async with llm:
        log.info("agent_serve_starting", planner=cfg.llm.model_for("planner"),
                 llm=cfg.llm.base_url, serials=list(cfg.fleet.serials) or "all",
                 record_dir=str(record_dir) if record_dir else None)
        await agent_host(cfg, policy_for, record_dir=record_dir, llm=llm).run(
            task_status=task_status)
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    if args.runtime_only:
        runtime_cfg = prepare(args, RuntimeConfig)
        return run_until_signalled(lambda: serve_runtime(runtime_cfg), interrupted=EXIT_OK)
    cfg = prepare(args, AgentHostConfig)
    try:
        cfg.llm.resolve_api_key()
    except LLMConfigError as exc:
        print(f"mobagent serve: {exc}.\n{NO_KEY_HELP}", file=sys.stderr)
        return EXIT_USAGE
    serials = list(args.serial or [])
    for serial in serials:
        try:
            topics.check_name(serial, "device")
        except topics.TopicError as exc:
            print(f"mobagent serve: --serial: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if serials:
        cfg = msgspec.structs.replace(cfg, fleet=msgspec.structs.replace(cfg.fleet, serials=serials))
    if args.perception:
        cfg = msgspec.structs.replace(cfg, agent=msgspec.structs.replace(
            cfg.agent, perception=args.perception))
    record_dir = Path(args.record) if args.record else None
    return run_until_signalled(lambda: serve_agents(cfg, record_dir=record_dir),
                               interrupted=EXIT_OK)  # a stop request is not a failure


def register(sub: Any) -> None:
    """Entry point (group ``mobagent.commands``, name ``serve``)."""
    p = sub.add_parser(
        "serve", help="drive every phone adb lists with the agent (embedded broker unless bus.url)",
        description="Run the host: discover the phones through the adb server (hot-plug), "
                    "run each phone's instructions with the LLM agent, one episode at a time "
                    "per phone, and publish status and every step as events. Configured by "
                    "[fleet], [llm], [agent], [perception] and [device]; stop with Ctrl-C.")
    p.add_argument("--serial", action="append", metavar="SERIAL",
                   help="only this phone (repeatable; same as --set fleet.serials=[...])")
    p.add_argument("--record", metavar="DIR",
                   help="record every episode under DIR (`mobagent report DIR` renders it)")
    p.add_argument("--perception", choices=("local", "remote"),
                   help="remote: load no models here; `mobagent perceive` workers on the same "
                        "broker ground and read the frames (same as --set agent.perception=...)")
    p.add_argument("--runtime-only", action="store_true",
                   help="the host runtime alone (broker, bus, host status), no phones or agents")
    p.set_defaults(func=cmd_serve)
