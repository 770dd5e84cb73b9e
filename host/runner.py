"""The agent on the host's one runner: ``agent_host`` is a ``FleetHost`` (host/fleet.py)
whose per-phone work is a ``DeviceAgent``, with the host's agent services (capture,
perception, actuator, reflector and the reply router: ``actors/services.py``), the
recorder and a progress view on the host's bus.

Every command that runs the agent builds one: ``serve`` (the adb server's phones, found and
hot-plugged by ``AdbDevices``), ``run``, ``demo`` and the Mobile-Eval runner (a
``FixedDevices`` list, instructions given in-process through ``FleetHost.run_on``, which
waits for the outcome). Instructions over the bus (``mobagent submit`` -> the gate -> the
fleet) are queued the same way; the fleet runs one episode at a time per phone and owns
each episode's lifecycle events.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import msgspec
import structlog

from actors.config import AgentConfig, DeviceSettings, episode_settings
from actors.episode import DeviceAgent
from actors.perception import PerceptionEngine, engine_for
from actors.perception_remote import RemoteTimes
from actors.planner import Policy
from actors.services import AgentServices
from actors.telemetry import Tracing
from devices.adb import AdbDevice
from devices.discovery import DeviceSource
from devices.scrcpy import ScrcpyError, server_jar
from devices.streamed import StreamedDevice
from host.fleet import DeviceHandle, FleetConfig, FleetHost, RunEpisode
from host.fleet_worker import agent_worker
from models.llm.messages import ChatModel
from protocol.messages import (
    ActionDone,
    EpisodeFinished,
    EpisodeStarted,
    Error,
    Instruction,
    Msg,
    NotFound,
    Plan,
    Reflection,
)
from recording.events import human_line
from recording.recorder import Recorder
from runtime import topics
from runtime.actor import Actor, Publisher
from runtime.bus import Bus
from runtime.config import load_config

log = structlog.get_logger(__name__)

PolicyFor = Callable[[str, Instruction], Policy]


class AgentHostConfig(AgentConfig):
    """The agent's sections plus the host's ``[fleet]`` (host/fleet.py): what ``serve``,
    ``run``, ``demo`` and the Mobile-Eval runner load. The fleet section lives here, not in
    runtime/ or actors/: finding phones through adb is the host's business."""

    fleet: FleetConfig = msgspec.field(default_factory=FleetConfig)


def load_host_config(path: str | Path | None, *, overrides: list[str] | None = None,
                     env: Any = None) -> AgentHostConfig:
    """``AgentHostConfig`` from a file (other packages' sections skipped), env, overrides."""
    return load_config(path, AgentHostConfig, overrides=overrides or [], env=env,
                       unknown_sections="ignore")  # (serial, instruction) -> policy
SHOWN = (EpisodeStarted, Plan, NotFound, ActionDone, Reflection, EpisodeFinished, Error)


class ProgressPrinter(Actor):
    """The live view: one line per plan, action, verdict and outcome (no frames)."""

    name = "progress"

    def __init__(self, bus: Publisher, out: TextIO | None = None) -> None:
        super().__init__(bus)
        self.inbox = (topics.device_events_filter(None),)
        self.out = out or sys.stdout

    async def handle(self, topic: str, msg: Msg) -> None:
        if isinstance(msg, SHOWN):
            print(human_line(topic, msg), file=self.out, flush=True)


def agent_host(
    cfg: AgentConfig,
    policy_for: PolicyFor,
    *,
    source: DeviceSource | None = None,
    perception: PerceptionEngine | None = None,
    record_dir: str | Path | None = None,
    progress: TextIO | bool = False,
    fleet_config: FleetConfig | None = None,
    tracing: Tracing | None = None,
    llm: ChatModel | None = None,
) -> FleetHost:
    """A host running the agent on every phone of ``source`` (default: the adb server's).

    ``perception`` is shared by all phones of the host (one model set, a bounded pool;
    none with ``agent.perception = "remote"``: ``mobagent perceive`` workers serve it);
    ``progress`` prints a line per step (True: to stdout); ``tracing`` defaults to
    ``cfg.telemetry``'s (off unless an OTLP endpoint is set), flushed when the host stops;
    ``llm`` serves the grounder role when ``perception.*_grounding`` asks for it.
    """
    remote = (RemoteTimes.of(cfg.perception.timeout_s, cfg.agent.perception_resend_s)
              if cfg.agent.perception == "remote" else None)
    engine = None if remote is not None else perception or engine_for(cfg, llm)
    traces = tracing or Tracing(cfg.telemetry)

    def work(bus: Bus) -> tuple[RunEpisode, Sequence[Actor]]:
        services = AgentServices(bus, engine, remote_perception=remote)

        def make_agent(handle: DeviceHandle) -> DeviceAgent:
            device = device_for(cfg.device, AdbDevice(
                handle.serial, client=handle.adb, capture=cfg.device.capture,
                timeout_s=cfg.device.timeout_s))
            if isinstance(device, StreamedDevice):  # the phone gone: its stream with it
                handle.closers.append(device.close_stream)
            return DeviceAgent(handle.bus, device, settings=cfg.agent, perception=engine,
                               policy_for=lambda instr: policy_for(handle.serial, instr),
                               host=handle.host, services=services,
                               tracing=traces)

        actors: list[Actor] = [*services.actors()]
        if record_dir is not None:
            actors.append(Recorder(bus, Path(record_dir)))
            # It reads every frame's bytes from the bus: a lease for as long as the host runs.
            services.leases.hold("recorder", frames=True)
        if progress is not False:
            actors.append(ProgressPrinter(bus, None if progress is True else progress))
        return agent_worker(make_agent), actors

    return FleetHost(cfg, work, source=source, fleet_config=fleet_config,
                     episode_settings=episode_settings(cfg.agent, cfg.llm.max_prompt_tokens),
                     tracing=traces)


def device_for(settings: DeviceSettings, adb: AdbDevice) -> AdbDevice | StreamedDevice:
    """The phone as ``device.transport`` says: the scrcpy stream with adb beside it, or adb
    alone. A missing or wrong server file never fails the run: the phone works on adb,
    and the log says why and what to do (``mobagent doctor`` too)."""
    if settings.transport == "adb":
        return adb
    try:
        jar = server_jar(settings.scrcpy_server)
    except ScrcpyError as exc:
        say = log.warning if settings.transport == "scrcpy" else log.info
        say("scrcpy_unavailable", device=adb.serial, error=str(exc), using="adb")
        return adb
    return StreamedDevice(adb, jar)
