"""``mobagent serve``: the host runtime with the agent on every phone the adb server lists.

runtime/ cannot import actors/, so this command is a plug-in (entry point ``serve`` in the
``mobagent.commands`` group); it replaces the runtime's bare ``serve``, which stays
reachable as ``serve --runtime-only``. What it runs:

- ``host.fleet.serve_fleet``: the host runtime (broker or URL, bus with the host's last
  will, the instruction gate) and a ``FleetManager`` configured by ``[fleet]``: discovery
  through adb's ``track_devices``, one supervised group per phone, status, queues, Cancel;
- per phone, ``host.fleet_worker.agent_worker``: a ``DeviceAgent`` built from the config's
  ``[agent]`` and ``[device]`` sections, with the LLM policy of ``[llm]``;
- shared by all phones of the host: one ``PerceptionActor`` (one model set, a bounded pool
  of ``agent.perception_workers``) and one ``LLMClient``, whose rate limiter
  (``llm.max_concurrent``, ``llm.requests_per_minute``) is therefore per host;
- with ``--record DIR``, the recorder (``mobagent report DIR`` renders what it wrote).

The agent announces its own episodes and busy/idle status, so the fleet runs with
``lifecycle_events = "worker"`` whatever the config says.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec
import structlog
from anyio.abc import TaskStatus

from actors.config import AgentConfig
from actors.episode import DeviceAgent
from actors.perception import PerceptionActor
from actors.planner import LLMPolicy, Policy
from actors.services import AgentServices
from actors.telemetry import Tracing, traces_flushed
from devices.adb import AdbDevice
from host.fleet import DeviceHandle, serve_fleet
from host.fleet_worker import agent_worker
from host.host_runtime import serve as serve_runtime
from models.llm import ChatModel, LLMClient, LLMConfigError
from protocol.messages import Instruction
from recording.recorder import Recorder
from runtime import topics
from runtime.actor import Actor
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


def agent_factory(
    cfg: AgentConfig, llm: ChatModel, perception: PerceptionActor,
    services: Callable[[], AgentServices | None] = lambda: None,
    tracing: Tracing | None = None,
) -> Callable[[DeviceHandle], DeviceAgent]:
    """One ``DeviceAgent`` per phone generation, its adb calls scoped to the phone's serial.

    ``services()`` gives the host's agent services on the bus once the bus is up (the step
    requests then travel through the broker); None runs them in-process.
    """

    def policy_for(_instr: Instruction) -> Policy:
        return LLMPolicy(llm, keep_screenshots=cfg.agent.keep_screenshots,
                         max_reasks=cfg.agent.max_reasks)

    def make(handle: DeviceHandle) -> DeviceAgent:
        device = AdbDevice(handle.serial, client=handle.adb, capture=cfg.device.capture,
                           timeout_s=cfg.device.timeout_s)
        return DeviceAgent(handle.bus, device, settings=cfg.agent, perception=perception,
                           policy_for=policy_for, host=handle.host, services=services(),
                           tracing=tracing)

    return make


async def serve_agents(
    cfg: AgentConfig, *, record_dir: Path | None = None,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> int:
    """Run the host with the agent on every phone until cancelled.

    ``LLMConfigError`` (no API key for a host that needs one) is raised before anything
    connects; ``task_status.started`` gets the broker URL.
    """
    llm = LLMClient(cfg.llm)  # checks the key first: nothing is started without one
    perception = PerceptionActor(settings=cfg.perception, workers=cfg.agent.perception_workers)
    fleet_cfg = msgspec.structs.replace(cfg.fleet, lifecycle_events="worker")

    holder: list[AgentServices] = []

    def extra_actors(bus: Any) -> Sequence[Actor]:
        services = AgentServices(bus, perception)
        holder[:] = [services]
        recorder = [Recorder(bus, record_dir)] if record_dir is not None else []
        return [*services.actors(), *recorder]

    tracing = Tracing(cfg.telemetry)
    async with llm, traces_flushed(tracing):
        log.info("agent_serve_starting", planner=cfg.llm.model_for("planner"),
                 llm=cfg.llm.base_url, serials=list(fleet_cfg.serials) or "all",
                 record_dir=str(record_dir) if record_dir else None)
        await serve_fleet(cfg, agent_worker(agent_factory(cfg, llm, perception,
                                                                lambda: holder[0] if holder else None,
                                                                tracing)),
                          fleet_config=fleet_cfg, extra_actors=extra_actors,
                          task_status=task_status)
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    if args.runtime_only:
        runtime_cfg = prepare(args, RuntimeConfig)
        return run_until_signalled(lambda: serve_runtime(runtime_cfg), interrupted=EXIT_OK)
    cfg = prepare(args, AgentConfig)
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
    p.add_argument("--runtime-only", action="store_true",
                   help="the host runtime alone (broker, bus, host status), no phones or agents")
    p.set_defaults(func=cmd_serve)
