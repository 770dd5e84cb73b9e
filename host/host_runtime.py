"""The host runtime (``mobagent serve``): broker, bus, host status, inbound gate, actors.

``HostRuntime`` connects (an embedded broker when no URL is configured), publishes a
retained ``online`` HostStatus with a last will saying ``offline``, and runs its actors.
``InstructionGate`` checks every inbound instruction (size limit, device consistency,
duplicates by instruction id) and hands accepted ones to ``on_instruction``; rejected ones
become ``Error`` events on the device's event topic, correlated with the instruction id.
The fleet passes its own ``on_instruction`` (which must return promptly: queue the episode,
do not run it there) and actors. ``limits.handler_timeout_s`` caps every actor's handler
timeout.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

import anyio
import structlog
from anyio.abc import TaskStatus

from protocol.messages import CODEC, Error, HostStatus, Instruction, Msg
from recording.events import EventFile, EventRecorder
from runtime import topics
from runtime.actor import Actor, Publisher, run_actors
from runtime.broker import broker_for
from runtime.bus import Bus, BusError
from runtime.config import RuntimeConfig
from runtime.dedupe import SeenIds

log = structlog.get_logger(__name__)

InstructionHandler = Callable[[str | None, Instruction], Awaitable[None]]
"""Called with (serial, instruction); serial is None for fleet-wide instructions."""

VERSION = "0.1.0"


def instruction_problem(text: str, *, max_chars: int) -> str | None:
    """Why an instruction's text cannot be run (blank, too long), or None: the one check
    the gate, the fleet and ``mobagent submit`` share."""
    if not text.strip():
        return "instruction text is blank"
    if len(text) > max_chars:
        return f"instruction text has {len(text)} characters; the limit is {max_chars}"
    return None


def host_name(cfg: RuntimeConfig) -> str:
    name = cfg.host.name or socket.gethostname() or "host"
    return topics.check_name(name, "host")


class InstructionGate(Actor):
    """Validates inbound instructions; accepted ones go to ``on_instruction`` exactly once."""

    name = "instruction_gate"

    def __init__(
        self,
        bus: Publisher,
        *,
        max_chars: int,
        on_instruction: InstructionHandler | None = None,
        on_duplicate: InstructionHandler | None = None,
        host: str = "",
        seen: SeenIds | None = None,
    ) -> None:
        super().__init__(bus)
        self.inbox = (topics.all_instructions_filter(), topics.shared_fleet_instructions())
        self.max_chars = max_chars
        self.on_instruction = on_instruction
        self.on_duplicate = on_duplicate  # a re-send: the fleet answers it with the outcome
        self.seen = seen if seen is not None else SeenIds()
        self.accepted = 0
        self.duplicates = 0
        self.refused = 0
        self.error_topic = topics.host_event(host, "error") if host else ""

    async def handle(self, topic: str, msg: Msg) -> None:
        if not isinstance(msg, Instruction):
            return  # the bus already rejects other kinds on instruction topics
        serial = topics.parse(topic).serial
        # Every log line about this instruction names its phone (None: fleet-wide).
        with structlog.contextvars.bound_contextvars(device=serial):
            await self._take(topic, serial, msg)

    async def _take(self, topic: str, serial: str | None, msg: Instruction) -> None:
        problem = self._problem(serial, msg)
        if problem is not None:
            self.refused += 1
            await self._refuse(topic, serial, msg, problem)
            return
        if not self.seen.first_time(msg.id):
            self.duplicates += 1
            log.info("instruction_duplicate", id=msg.id)
            if self.on_duplicate is not None:
                await self.on_duplicate(serial, msg)
            return
        self.accepted += 1
        log.info("instruction_accepted", id=msg.id, chars=len(msg.text))
        if self.on_instruction is None:
            log.info("instruction_unhandled", id=msg.id, hint="no fleet is attached to this host")
            return
        await self.on_instruction(serial, msg)

    def _problem(self, serial: str | None, msg: Instruction) -> str | None:
        problem = instruction_problem(msg.text, max_chars=self.max_chars)
        if problem is not None:
            return problem
        if serial is not None and msg.device and msg.device != serial:
            return f"instruction names device {msg.device!r} but was sent to {serial!r}"
        return None

    async def _refuse(self, topic: str, serial: str | None, msg: Instruction, why: str) -> None:
        log.warning("instruction_refused", id=msg.id, reason=why)
        err = Error(
            topic=topic, reason="instruction refused", detail=why, device=serial or msg.device,
            episode_id=msg.episode_id, correlation_id=msg.id,
        )
        target = topics.device_event(serial, err) if serial else self.error_topic
        if target:
            with anyio.fail_after(10):
                await self.bus.publish(target, err)


class HostRuntime:
    """Everything ``mobagent serve`` runs; ``run`` returns when cancelled."""

    def __init__(
        self,
        cfg: RuntimeConfig,
        *,
        on_instruction: InstructionHandler | None = None,
        on_duplicate: InstructionHandler | None = None,
        actors: Callable[[Bus], Sequence[Actor]] | None = None,
    ) -> None:
        self.cfg = cfg
        self.host = host_name(cfg)
        self.on_instruction = on_instruction
        self.on_duplicate = on_duplicate
        self.make_actors = actors
        self.bus: Bus | None = None
        self.gate: InstructionGate | None = None

    def status(self, state: Literal["online", "offline"], devices: Sequence[str] = ()) -> HostStatus:
        return HostStatus(host=self.host, state=state, devices=list(devices), version=VERSION)

    async def run(self, *, task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; ``task_status.started`` gets the broker URL."""
        cfg = self.cfg
        status_topic = topics.host_status(self.host)
        async with broker_for(cfg) as address:
            embedded = not cfg.bus.url
            bus = Bus(
                cfg.bus, address,
                client_id=cfg.bus.client_id or f"mobagent-host-{self.host}"[:64],
                will=(status_topic, self.status("offline")),
                max_payload_bytes=cfg.limits.max_payload_bytes,
                reject_topic=topics.host_event(self.host, "error"),
                protocol="3.1.1" if embedded else None, codec=CODEC,
            )
            async with bus:
                self.bus = bus
                await bus.publish(status_topic, self.status("online"), retain=True)
                self.gate = InstructionGate(
                    bus, max_chars=cfg.limits.max_instruction_chars,
                    on_instruction=self.on_instruction, on_duplicate=self.on_duplicate,
                    host=self.host,
                )
                actors: list[Actor] = [self.gate]
                event_file = None
                if cfg.log.events_jsonl:
                    event_file = EventFile(cfg.log.events_jsonl)
                    event_file.open()
                    actors.append(EventRecorder(bus, event_file))
                if self.make_actors is not None:
                    actors.extend(self.make_actors(bus))
                for actor in actors:
                    actor.handler_timeout_s = min(actor.handler_timeout_s,
                                                  cfg.limits.handler_timeout_s)
                    if not actor.error_topic:
                        actor.error_topic = topics.host_event(self.host, "error")
                try:
                    async with anyio.create_task_group() as tg:
                        # Started only once every inbox is subscribed: an instruction sent
                        # right after start is not lost.
                        await tg.start(run_actors, bus, actors)
                        log.info("host_serving", host=self.host, broker=address.url,
                                 embedded=embedded, protocol=bus.protocol)
                        task_status.started(address.url)
                finally:
                    if event_file is not None:
                        event_file.close()


async def serve(cfg: RuntimeConfig) -> int:
    """``mobagent serve``: run the host runtime until interrupted."""
    runtime = HostRuntime(cfg)
    try:
        await runtime.run()
    except BusError as exc:
        log.error("serve_failed", error=str(exc))
        return 1
    return 0
