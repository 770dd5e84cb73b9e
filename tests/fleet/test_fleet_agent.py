"""The fleet driving the real agent loop (actors.episode.DeviceAgent) on rendered SimPhones.

The adapter below is what ``serve`` needs: one DeviceAgent per phone generation (kept in
``handle.state``), Cancel forwarded from the fleet's ``EpisodeControl``, and the fleet in
``lifecycle_events="worker"`` mode because the agent announces its own episodes and status.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable

import anyio
import pytest

from actors.config import AgentSettings
from actors.episode import DeviceAgent
from actors.fleet_worker import RunEpisode
from actors.fleet_worker import agent_worker as fleet_worker
from actors.perception import PerceptionActor
from actors.planner import LLMPolicy
from models.llm import LLMClient, LLMSettings, RoleModels
from runtime.bus import parse_broker_url
from runtime.fleet import FleetConfig
from runtime.messages import Instruction
from sim.fleet import SimFleet
from tests.fixtures.mosquitto import MosquittoBroker
from tests.fixtures.openai_server import Behaviour, OpenAIServer, RecordedRequest, planner_reply
from tests.fleet.helpers import fleet_client, fleet_host

pytestmark = pytest.mark.anyio


def agent_worker(llm: LLMClient, perception: PerceptionActor, settings: AgentSettings
                 ) -> RunEpisode:
    return fleet_worker(lambda handle: DeviceAgent(
        handle.bus, handle.device, settings=settings, perception=perception,
        policy_for=lambda _i: LLMPolicy(llm), host=handle.host))


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
        async with LLMClient(llm_cfg) as llm:
            work = agent_worker(llm, PerceptionActor(), settings)
            cfg = FleetConfig(serials=fleet.serials, lifecycle_events="worker")
            async with fleet_host(address, fleet.serials, work, config=cfg) as fm, \
                    fleet_client(address) as client:
                for i, serial in enumerate(fleet.serials):
                    await client.instruct(serial, Instruction(id=f"agent-{i}",
                                                              text=f"Do job-{i} please"))
                await client.wait_finished(["agent-0", "agent-1"], timeout_s=60)
                await anyio.sleep(0.5)
                assert fm.stats.finished == {"succeeded": 2}
    fin = client.finished_ids()
    for i, serial in enumerate(fleet.serials):
        assert fin[f"agent-{i}"].status == "succeeded", fin[f"agent-{i}"]
        assert fin[f"agent-{i}"].device == serial
        assert fin[f"agent-{i}"].steps == 2
    # Worker mode: the agent announced each episode once; the fleet did not repeat it.
    assert Counter(f.instruction_id for f in client.finished) == {"agent-0": 1, "agent-1": 1}
    assert Counter(s.instruction_id for s in client.started) == {"agent-0": 1, "agent-1": 1}
    assert calls == {"job-0": 2, "job-1": 2}
