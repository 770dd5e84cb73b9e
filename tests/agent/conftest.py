"""Helpers for the agent tests: a simulated phone through the real adb server, one shared
Perception (the real rapidocr models, loaded once), a real mosquitto broker, and a harness
that runs a DeviceAgent with the host's agent services on the bus (requests and replies
through the broker) and collects every event and request."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from actors.config import AgentSettings
from actors.episode import DeviceAgent, EpisodeOutcome
from actors.perception import PerceptionEngine
from actors.planner import Policy
from actors.services import AgentServices
from devices.adb import AdbDevice
from models.llm import LLMClient, LLMSettings, RoleModels
from protocol.messages import CODEC, DeviceStatus, Instruction, Message, Msg
from runtime import topics
from runtime.actor import run_actors
from runtime.bus import BrokerAddress, Bus
from runtime.config import BusConfig
from sim.fleet import SimFleet
from sim.phone import SimPhone
from tests.fixtures.adb import AdbServer
from tests.fixtures.mosquitto import MosquittoBroker
from tests.fixtures.openai_server import OpenAIServer

SECRET = "sk-agent-test-NEVER-LOGGED-123"


@dataclass
class SimDevice:
    serial: str
    phone: SimPhone
    fleet: SimFleet


@pytest.fixture
def sim_device(adb_server: AdbServer) -> Iterator[SimDevice]:
    """One real rendered SimPhone (seed 0) behind the real adb server."""
    with SimFleet(1, seed=0, adb_port=adb_server.port) as fleet:
        serial = fleet.serials[0]
        phone = fleet.phone(serial)
        assert isinstance(phone, SimPhone)
        yield SimDevice(serial, phone, fleet)


@pytest.fixture(scope="session")
def shared_perception() -> PerceptionEngine:
    return PerceptionEngine()


def fast_settings(**kw: Any) -> AgentSettings:
    base: dict[str, Any] = dict(settle_s=0.05, wait_s=0.1, max_steps=12, speculative_ocr=True)
    base.update(kw)
    return AgentSettings(**base)


def llm_settings(server: OpenAIServer, **kw: Any) -> LLMSettings:
    base: dict[str, Any] = dict(
        base_url=server.base_url, api_key=SECRET,
        models=RoleModels(planner="plan-m", chooser="choose-m", reflector="reflect-m"),
        timeout_s=5.0, max_retries=3, backoff_base_s=0.01, backoff_max_s=0.05,
    )
    base.update(kw)
    return LLMSettings(**base)


@dataclass
class Run:
    outcome: EpisodeOutcome | None = None
    events: list[tuple[str, Message]] = field(default_factory=list)

    def of(self, cls: type[Msg]) -> list[Any]:
        return [m for _, m in self.events if isinstance(m, cls)]

    def kinds(self) -> set[str]:
        return {type(m).__name__ for _, m in self.events}


def bus_for(broker: MosquittoBroker, prefix: str) -> Bus:
    cfg = BusConfig(connect_timeout_s=10.0, publish_timeout_s=10.0)
    return Bus(cfg, BrokerAddress(broker.host, broker.port),
               client_id=f"{prefix}-{uuid.uuid4().hex[:8]}", persistent=False, codec=CODEC)


@asynccontextmanager
async def agent_on_bus(
    broker: MosquittoBroker, device: AdbDevice, policy: Policy,
    settings: AgentSettings, perception: PerceptionEngine,
) -> AsyncIterator[tuple[DeviceAgent, Run, Bus]]:
    """A DeviceAgent running on a real broker, and a second client collecting its events.

    Yields (agent, run, control_bus): publish control messages with control_bus."""
    run = Run()
    async with bus_for(broker, "agent") as bus, bus_for(broker, "watch") as watch:
        await watch.subscribe(topics.device_events_filter(device.serial))
        await watch.subscribe(topics.device_requests_filter(device.serial))
        await watch.subscribe(topics.device_status(device.serial))
        services = AgentServices(bus, perception)
        services.register(device, settings)
        agent = DeviceAgent(bus, device, settings=settings, perception=perception,
                            policy_for=lambda _i: policy, services=services)

        async def collect() -> None:
            async for topic, msg in watch.messages():
                run.events.append((topic, msg))

        async with anyio.create_task_group() as tg:
            tg.start_soon(collect)
            tg.start_soon(run_actors, bus, [*services.actors(), agent])
            await anyio.sleep(0.3)  # the control subscription is in place
            yield agent, run, watch
            tg.cancel_scope.cancel()


async def run_episode(
    broker: MosquittoBroker, device: AdbDevice, policy: Policy, settings: AgentSettings,
    perception: PerceptionEngine, text: str, *, timeout_s: float = 120.0,
    during: Callable[[DeviceAgent, Run, Bus], Coroutine[Any, Any, None]] | None = None,
) -> Run:
    async with agent_on_bus(broker, device, policy, settings, perception) as (agent, run, ctl):
        with anyio.fail_after(timeout_s):
            async with anyio.create_task_group() as tg:
                if during is not None:
                    tg.start_soon(during, agent, run, ctl)
                run.outcome = await agent.run_episode(Instruction(id=uuid.uuid4().hex, text=text))
                tg.cancel_scope.cancel()
        await anyio.sleep(0.3)  # the last events reach the collector
    return run


async def wait_for_status(run: Run, needle: str, timeout_s: float = 60.0) -> DeviceStatus:
    with anyio.fail_after(timeout_s):
        while True:
            for m in run.of(DeviceStatus):
                if needle in m.detail:
                    return m
            await anyio.sleep(0.05)


def llm_client(server: OpenAIServer, **kw: Any) -> LLMClient:
    return LLMClient(llm_settings(server, **kw))
