"""Grounder calls count like the episode's own LLM calls: each is published as
``LlmUsage(purpose="ground")`` by the planner, adds to the episode's cost, ends it past
``agent.max_cost_usd``, and is refused unsent when its worst cost would pass the cap; the
recorder's, the report's and the dashboard's totals include it. A hybrid text grounding
whose target OCR does not find asks the grounding model (the loopback server)."""

from __future__ import annotations

from typing import Any

import pytest

from actors.perception import PerceptionEngine
from actors.planner import LLMPolicy, RoleSetup
from devices.adb import AdbDevice
from host.dashboard.state import FleetState
from models.grounding import Perception, PerceptionSettings
from models.llm import LLMClient, ModelPrice, RoleModels, Roles, RoleSettings
from models.llm.grounder import ModelGrounder
from protocol.messages import ActionDone, EpisodeFinished, Error, Grounded, GroundRequest, LlmUsage
from recording.events import message_event
from recording.recorder import EpisodeSummary
from recording.report import Episode
from tests.agent.conftest import Run, SimDevice, fast_settings, llm_client, run_episode
from tests.fixtures.mosquitto import MosquittoBroker
from tests.fixtures.openai_server import Behaviour, OpenAIServer, planner_reply

pytestmark = [pytest.mark.anyio, pytest.mark.needs_adb, pytest.mark.needs_mosquitto]

GROUNDER = "Qwen3-VL-8B-Instruct"
TARGET = "Click text (Quantum gizmo)"  # on no screen: OCR finds nothing, the grounder is asked
POINT = '[{"point_2d": [500, 500], "label": "gizmo"}]'


def grounder_client(server: OpenAIServer, prices: dict[str, ModelPrice],
                    grounder_max_tokens: int | None = None) -> LLMClient:
    return llm_client(server, prices=prices,
                      models=RoleModels(planner="plan-m", chooser="choose-m",
                                        reflector="reflect-m", grounder=GROUNDER),
                      roles=Roles(grounder=RoleSettings(max_tokens=grounder_max_tokens)))


def hybrid_engine(shared: PerceptionEngine, llm: LLMClient) -> PerceptionEngine:
    p = Perception(PerceptionSettings(text_grounding="hybrid"), ocr=shared.perception.ocr_engine)
    return PerceptionEngine(p, grounder=ModelGrounder.from_settings(llm, llm.settings))


async def episode(server: OpenAIServer, sim: SimDevice, broker: MosquittoBroker,
                  shared: PerceptionEngine, prices: dict[str, ModelPrice], *,
                  grounder_max_tokens: int | None = None, **settings: Any) -> Run:
    sim.phone.key(3)
    async with grounder_client(server, prices, grounder_max_tokens) as llm:
        return await run_episode(broker, AdbDevice(sim.serial),
                                 LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                 fast_settings(**settings), hybrid_engine(shared, llm),
                                 "Tap the quantum gizmo.")


async def test_a_grounder_call_is_published_and_counted_in_every_total(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    openai_server.script(
        planner_reply(TARGET),
        Behaviour.reply(POINT, prompt_tokens=1000, completion_tokens=50, cached_tokens=100),
        planner_reply("Stop"),
        "Complete: yes\nReason: tapped.",
    )
    prices = {GROUNDER: ModelPrice(prompt_per_mtok=10.0, completion_per_mtok=20.0,
                                   cached_per_mtok=1.0)}
    cost = (900 * 10.0 + 100 * 1.0 + 50 * 20.0) / 1e6
    run = await episode(openai_server, sim_device, mosquitto, shared_perception, prices)
    assert run.outcome is not None and run.outcome.status == "succeeded", run.outcome
    (grounded,) = run.of(Grounded)
    assert grounded.source == "grounder" and len(grounded.llm_calls) == 1
    (ground,) = [u for u in run.of(LlmUsage) if u.purpose == "ground"]
    assert (ground.model, ground.role, ground.prompt_tokens, ground.completion_tokens,
            ground.cached_tokens) == (GROUNDER, "grounder", 1000, 50, 100)
    assert ground.cost_usd == pytest.approx(cost) and ground.latency_s > 0
    assert ground.step == 1 and ground.episode_id == run.outcome.episode_id
    assert [u.purpose for u in run.of(LlmUsage)] == ["plan", "ground", "plan", "reflect"]
    assert {u.role for u in run.of(LlmUsage)} == {"planner", "grounder", "reflector"}
    # the planner's models have no price: the episode's cost is the grounder's
    (fin,) = run.of(EpisodeFinished)
    assert fin.cost_usd == pytest.approx(cost) == run.outcome.cost_usd
    # the recorder's summary, the report and the dashboard count it
    summary = EpisodeSummary(run.outcome.episode_id, "ep")
    report = Episode("ep")
    board = FleetState()
    for topic, msg in run.events:
        summary.add(msg, type(msg).__name__)
        report.events.append(message_event(topic, msg))
        board.apply(topic, msg)
    assert summary.llm_calls == 4 and summary.prompt_tokens >= 1000
    assert summary.cost_usd == pytest.approx(cost)
    assert report.cost_usd == pytest.approx(cost)
    assert report.tokens[2] == 4 and report.tokens[0] == summary.prompt_tokens
    tile = board.phones[sim_device.serial].tile
    assert tile.cost_usd == pytest.approx(cost)
    assert tile.tokens == summary.prompt_tokens + summary.completion_tokens


async def test_the_grounders_cost_can_be_what_reaches_the_cap(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    # The server counts far more prompt tokens than the client's estimate: the grounder's
    # call passes the check before it, and its real cost ($0.40) passes the $0.30 cap.
    openai_server.script(
        planner_reply(TARGET),
        Behaviour.reply(POINT, prompt_tokens=40000, completion_tokens=10),
        planner_reply("Stop"),  # never asked
    )
    prices = {GROUNDER: ModelPrice(prompt_per_mtok=10.0, completion_per_mtok=0.0)}
    run = await episode(openai_server, sim_device, mosquitto, shared_perception, prices,
                        max_cost_usd=0.3)
    assert run.outcome is not None and run.outcome.status == "failed"
    assert run.outcome.reason == "cost cap of $0.3 reached: the LLM calls cost $0.4000"
    assert len(openai_server.requests) == 2 and openai_server.pending == 1
    # the grounder's request carried the cap; its point was not tapped
    (req,) = run.of(GroundRequest)
    assert req.max_cost_usd == pytest.approx(0.3) and req.cost_usd == 0.0
    assert not run.of(ActionDone)
    assert [(u.purpose, u.cost_usd) for u in run.of(LlmUsage)] == [
        ("plan", 0.0), ("ground", pytest.approx(0.4))]
    (fin,) = run.of(EpisodeFinished)
    assert fin.cost_usd == pytest.approx(0.4) == run.outcome.cost_usd


async def test_a_grounder_call_that_could_pass_the_cap_is_not_made(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    # Output tokens only are priced: the planner's call cost $0.02, and the grounder's worst
    # is its 1024-token limit, $0.01024: over the $0.025 cap, so perception never sends it.
    openai_server.script(
        Behaviour.reply(planner_reply(TARGET), completion_tokens=2000),
        POINT,  # never asked
    )
    prices = {"plan-m": ModelPrice(prompt_per_mtok=0.0, completion_per_mtok=10.0),
              GROUNDER: ModelPrice(prompt_per_mtok=0.0, completion_per_mtok=10.0)}
    run = await episode(openai_server, sim_device, mosquitto, shared_perception, prices,
                        grounder_max_tokens=1024, max_cost_usd=0.025)
    assert run.outcome is not None and run.outcome.status == "failed"
    assert len(openai_server.requests) == 1 and openai_server.pending == 1
    assert run.outcome.reason.startswith(
        "cost cap of $0.025 would be passed: the next grounder call "
        f"({GROUNDER}) may cost up to $0.0102 (~")
    assert run.outcome.reason.endswith(
        "prompt + 1024 output tokens) and the LLM calls cost $0.0200 so far; not sent")
    (req,) = run.of(GroundRequest)
    assert (req.max_cost_usd, req.cost_usd) == (pytest.approx(0.025), pytest.approx(0.02))
    assert not run.of(ActionDone) and not run.of(Error)
    assert [u.purpose for u in run.of(LlmUsage)] == ["plan"]
    (fin,) = run.of(EpisodeFinished)
    assert fin.cost_usd == pytest.approx(0.02) and fin.reason == run.outcome.reason
