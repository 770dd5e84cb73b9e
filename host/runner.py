"""A host running agents: the runtime's host (broker, bus, instruction gate) plus one
``DeviceAgent`` (planner) per phone, the host's agent services on the bus (capture,
perception, actuator, reflector and the reply router: ``actors/services.py``), the
recorder and a progress view.

Instructions reach an agent two ways: over the bus (``mobagent submit`` -> the gate ->
``dispatch``), or in-process (``run_on``, which the CLI and the benchmark use, and which
waits for the outcome). Either way the agent runs one episode at a time.

This is the single-host, fixed-device-list runner (``mobagent run``, ``demo``, the
Mobile-Eval benchmark). ``mobagent serve`` uses ``host.fleet.FleetManager`` instead
(discovery, hot-plug, per-phone queues and rejection) through
``host.fleet_worker.agent_worker``; both build ``DeviceAgent``s on the same
``AgentServices``. AgentHost still queues in ``DeviceAgent.submit`` because ``run_on`` must
run an instruction in-process on a device the caller names and return its outcome.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

import anyio
import msgspec
from anyio.abc import TaskStatus

from actors.config import AgentConfig
from actors.episode import DeviceAgent, EpisodeOutcome
from actors.perception import PerceptionActor
from actors.planner import Policy
from actors.services import AgentServices
from actors.telemetry import Tracing, traces_flushed
from devices.adb import Device
from host.host_runtime import HostRuntime
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

PolicyFor = Callable[[str, Instruction], Policy]  # (serial, instruction) -> policy
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


class AgentHost:
    def __init__(
        self,
        cfg: AgentConfig,
        devices: Sequence[Device],
        policy_for: PolicyFor,
        *,
        record_dir: str | Path | None = None,
        perception: PerceptionActor | None = None,
        progress: TextIO | None | bool = True,
    ) -> None:
        self.cfg = cfg
        self.devices = list(devices)
        self.policy_for = policy_for
        self.record_dir = Path(record_dir) if record_dir is not None else None
        self.perception = perception or PerceptionActor(
            settings=cfg.perception, workers=cfg.agent.perception_workers)
        self.progress = progress
        self.agents: dict[str, DeviceAgent] = {}
        self.services: AgentServices | None = None
        self.recorder: Recorder | None = None
        self.runtime = HostRuntime(cfg, on_instruction=self.dispatch, actors=self._actors)
        self.tracing = Tracing(cfg.telemetry)

    def _actors(self, bus: Bus) -> list[Actor]:
        services = self.services = AgentServices(bus, self.perception)
        actors: list[Actor] = [*services.actors()]
        for dev in self.devices:
            services.register(dev, self.cfg.agent)  # the services own the phone's state
            agent = DeviceAgent(
                bus, dev, settings=self.cfg.agent, perception=self.perception,
                policy_for=self._policy_factory(dev.serial), host=self.runtime.host,
                services=services, tracing=self.tracing,
            )
            self.agents[dev.serial] = agent
            actors.append(agent)
        if self.record_dir is not None:
            self.recorder = Recorder(bus, self.record_dir)
            actors.append(self.recorder)
        if self.progress is not False:
            out = None if self.progress is True or self.progress is None else self.progress
            actors.append(ProgressPrinter(bus, out))
        return actors

    def _policy_factory(self, serial: str) -> Callable[[Instruction], Policy]:
        def make(instr: Instruction) -> Policy:
            return self.policy_for(serial, instr)

        return make

    async def dispatch(self, serial: str | None, instr: Instruction) -> None:
        """The gate's callback: the named phone, or the first idle one for fleet instructions."""
        if serial is None:
            idle = [a for a in self.agents.values() if not a.busy]
            agent = (idle or list(self.agents.values()))[0] if self.agents else None
        else:
            agent = self.agents.get(serial)
        if agent is None:
            return
        await agent.submit(msgspec.structs.replace(instr, device=agent.serial))

    async def run(self, *, task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
        async with traces_flushed(self.tracing):
            await self.runtime.run(task_status=task_status)

    async def run_on(self, serial: str, instr: Instruction) -> EpisodeOutcome:
        """Run one instruction on ``serial`` now (in-process) and return its outcome."""
        return await self.agents[serial].run_episode(instr)
