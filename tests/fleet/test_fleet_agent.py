"""The fleet driving the real agent loop (actors.episode.DeviceAgent) on rendered SimPhones.

The adapter below is what ``serve`` needs: one DeviceAgent per phone generation (kept in
``handle.state``), Cancel forwarded from the fleet's ``EpisodeControl``; the fleet announces
each episode and its one outcome. The host's agent services (capture, perception, actuator,
reflector, reply router) run on the host's bus next to the fleet, so every step's requests
and replies cross the broker. The last test runs the assembled host (``agent_host``, as
``serve`` builds it) and drops a phone mid-episode.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import pytest

from actors.config import AgentSettings
from actors.episode import DeviceAgent
from actors.perception import PerceptionEngine
from actors.planner import LLMPolicy, RoleSetup, ScriptedPolicy
from actors.services import AgentServices
from host.fleet import OFFLINE_REASON, FleetConfig, FleetManager, run_fleet
from host.fleet_worker import RunEpisode
from host.fleet_worker import agent_worker as fleet_worker
from host.runner import AgentHostConfig, agent_host
from models.llm import LLMClient, LLMSettings, RoleModels
from protocol.messages import CODEC, ActRequest, Frame, FrameRequest, Instruction, ReflectRequest
from protocol.operations import Back
from runtime import topics
from runtime.bus import BrokerAddress, Bus, parse_broker_url
from runtime.config import BusConfig, HostConfig
from sim.fleet import SimFleet
from tests.fixtures.adb import AdbServer
from tests.fixtures.mosquitto import MosquittoBroker
from tests.fixtures.openai_server import Behaviour, OpenAIServer, RecordedRequest, planner_reply
from tests.fleet.helpers import FAST, fleet_client

pytestmark = pytest.mark.anyio


def agent_worker(llm: LLMClient, services: AgentServices, settings: AgentSettings
                 ) -> RunEpisode:
    return fleet_worker(lambda handle: DeviceAgent(
        handle.bus, handle.device, settings=settings, perception=services.perception_engine,
        policy_for=lambda _i: LLMPolicy(llm, RoleSetup.from_settings(llm.settings)), host=handle.host, services=services))


@asynccontextmanager
async def agent_fleet_host(address: BrokerAddress, serials: list[str], llm: LLMClient,
                           settings: AgentSettings
                           ) -> AsyncIterator[tuple[FleetManager, AgentServices]]:
    """A host: its bus, the fleet with the agent worker, and the agent services beside it."""
    async with Bus(FAST, address, client_id="agent-fleet-host", persistent=False, codec=CODEC) as bus, \
            anyio.create_task_group() as tg:
        services = AgentServices(bus, PerceptionEngine())
        fleet = FleetManager(bus, run_episode=agent_worker(llm, services, settings), host="h1",
                             config=FleetConfig(serials=serials))
        tg.start_soon(lambda: run_fleet(bus, fleet, extra_actors=services.actors()))
        with anyio.fail_after(30):
            while sorted(s for s, st in fleet.devices().items() if st == "idle") != sorted(serials):  # noqa: ASYNC110
                await anyio.sleep(0.05)
        try:
            yield fleet, services
        finally:
            tg.cancel_scope.cancel()


async def test_fleet_runs_the_real_agent_loop_on_two_phones(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet]
) -> None:
    fleet = sim_fleet(count=2)  # rendered SimPhones
    calls: dict[str, int] = defaultdict(int)

    def policy(req: RecordedRequest) -> Behaviour:
        text = "\n".join(req.texts())
        m = re.search(r"job-\d", text)
        key = m.group(0) if m else "?"
        calls[key] += 1
        return Behaviour.reply(planner_reply("Back" if calls[key] == 1 else "Stop"))

    settings = AgentSettings(settle_s=0.05, wait_s=0.1, max_steps=5, speculative_ocr=False,
                             completion_check=False)
    address = parse_broker_url(mosquitto.url)
    with OpenAIServer(policy=policy) as srv:
        llm_cfg = LLMSettings(base_url=srv.base_url, api_key="sk-fleet-test",
                              models=RoleModels(planner="p", chooser="c", reflector="r"),
                              timeout_s=10.0, max_retries=1, max_concurrent=8)
        async with LLMClient(llm_cfg) as llm, \
                Bus(FAST, address, client_id="request-watch", persistent=False, codec=CODEC) as watch:
            await watch.subscribe(topics.device_requests_filter(None))
            await watch.subscribe(topics.device_events_filter(None, "frame"))
            seen: list[tuple[str, object]] = []

            async def collect() -> None:
                async for topic, msg in watch.messages():
                    seen.append((topic, msg))

            async with anyio.create_task_group() as watching, \
                    agent_fleet_host(address, fleet.serials, llm, settings) as (fm, services), \
                    fleet_client(address) as client:
                watching.start_soon(collect)
                for i, serial in enumerate(fleet.serials):
                    await client.instruct(serial, Instruction(id=f"agent-{i}",
                                                              text=f"Do job-{i} please"))
                await client.wait_finished(["agent-0", "agent-1"], timeout_s=60)
                await anyio.sleep(0.5)
                assert fm.stats.finished == {"succeeded": 2}
                assert all(s in services.registry for s in fleet.serials)
                watching.cancel_scope.cancel()
            # The fleet stopped: each phone's group ended and its agent left the services.
            assert len(services.registry) == 0
    fin = client.finished_ids()
    for i, serial in enumerate(fleet.serials):
        assert fin[f"agent-{i}"].status == "succeeded", fin[f"agent-{i}"]
        assert fin[f"agent-{i}"].device == serial
        assert fin[f"agent-{i}"].steps == 2
    # The fleet announced each episode once; the agent did not repeat it.
    assert Counter(f.instruction_id for f in client.finished) == {"agent-0": 1, "agent-1": 1}
    assert Counter(s.instruction_id for s in client.started) == {"agent-0": 1, "agent-1": 1}
    assert calls == {"job-0": 2, "job-1": 2}
    # The steps went over the broker as requests and replies, each on its own phone's topics.
    for serial in fleet.serials:
        kinds = Counter(type(m).__name__ for t, m in seen if topics.serial_of(t) == serial)
        assert kinds["FrameRequest"] == kinds["Frame"] == 2, kinds  # the first and one after Back
        assert kinds["ActRequest"] == 1 and kinds["ReflectRequest"] == 1, kinds
    assert all(getattr(m, "device", serial) == topics.serial_of(t) for t, m in seen)
    assert {type(m) for _, m in seen} == {FrameRequest, Frame, ActRequest, ReflectRequest}


async def test_a_phone_dropped_mid_episode_ends_it_once_with_device_offline(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet], adb_server: AdbServer
) -> None:
    """The agent on the assembled host (``agent_host``: the fleet on the adb server's phones,
    the agent services, the gate): the phone stops answering after two actions. The episode
    ends exactly once, ``failed: device offline``; the phone comes back and works again."""
    fleet = sim_fleet(count=1)
    victim = fleet.serials[0]
    settings = AgentSettings(settle_s=0.05, wait_s=0.1, max_steps=60, speculative_ocr=False,
                             ocr_hints=False, completion_check=False, loop_guard=1000,
                             revisit_guard=1000)
    cfg = AgentHostConfig(bus=BusConfig(url=mosquitto.url), host=HostConfig(name="drop-host"),
                          agent=settings,
                          fleet=FleetConfig(serials=[victim], adb_port=adb_server.port,
                                            adb_timeout_s=5.0, publish_timeout_s=10.0))

    def policy_for(_serial: str, instr: Instruction) -> ScriptedPolicy:
        return ScriptedPolicy([Back()] * (50 if instr.id == "doomed" else 1))

    host = agent_host(cfg, policy_for, perception=PerceptionEngine())
    address = parse_broker_url(mosquitto.url)
    async with anyio.create_task_group() as tg, fleet_client(address) as client:
        await tg.start(host.run)
        await client.wait_status(victim, "idle", timeout_s=30)
        await client.instruct(victim, Instruction(id="doomed", text="Press back many times."))
        await client.wait_actions("doomed", 2)
        fleet.phone(victim).faults.drop_connections = True
        await client.wait_finished(["doomed"], timeout_s=60)
        await client.wait_status(victim, "offline", timeout_s=30)

        fleet.phone(victim).faults.drop_connections = False
        await anyio.to_thread.run_sync(fleet.restart, victim)
        await client.wait_status(victim, "idle", timeout_s=30)
        await client.instruct(victim, Instruction(id="after", text="Press back once."))
        await client.wait_finished(["after"], timeout_s=60)
        tg.cancel_scope.cancel()

    doomed = [f for f in client.finished if f.instruction_id == "doomed"]
    assert len(doomed) == 1, doomed  # one owner, one outcome
    assert (doomed[0].status, doomed[0].reason, doomed[0].device) == (
        "failed", OFFLINE_REASON, victim)
    assert Counter(s.instruction_id for s in client.started) == {"doomed": 1, "after": 1}
    after = client.finished_ids()["after"]
    assert after.status == "succeeded", after
    assert [f.instruction_id for f in client.finished].count("after") == 1
