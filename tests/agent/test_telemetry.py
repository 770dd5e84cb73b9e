"""OpenTelemetry traces of a real episode (loopback LLM server, simulated phone over real
adb, real mosquitto), exported with the SDK's OTLP/HTTP exporter to a receiver on
loopback, directly and through a real collector (rotel, tests/fixtures/otlp.py): one trace
per episode, a span per step, children per request and LLM call, the ids in the bus
events, and no secret in any attribute."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest

from actors.episode import DeviceAgent
from actors.perception import PerceptionEngine
from actors.planner import LLMPolicy, RoleSetup
from actors.services import AgentServices
from actors.telemetry import TelemetrySettings, Tracing, span_ids
from devices.adb import AdbDevice
from protocol.messages import ActionDone, EpisodeStarted, Instruction, LlmUsage, Msg, Plan
from runtime import topics
from runtime.actor import run_actors
from sim.eval.tasks import get_task
from tests.agent.conftest import SECRET, SimDevice, bus_for, fast_settings, llm_client
from tests.agent.test_episode_llm import DARK_MODE, YES
from tests.fixtures.mosquitto import MosquittoBroker
from tests.fixtures.openai_server import OpenAIServer
from tests.fixtures.otlp import Collector, OtlpReceiver

pytestmark = [pytest.mark.anyio, pytest.mark.needs_adb, pytest.mark.needs_mosquitto]
HEADER_SECRET = "Basic bW9iYWdlbnQ6aHVudGVyMg=="


async def traced_episode(broker: MosquittoBroker, device: AdbDevice, policy: Any,
                         perception: PerceptionEngine, tracing: Tracing,
                         text: str) -> tuple[Any, list[Msg]]:
    events: list[Msg] = []
    settings = fast_settings()
    async with bus_for(broker, "agent") as bus, bus_for(broker, "watch") as watch:
        await watch.subscribe(topics.device_events_filter(device.serial))
        services = AgentServices(bus, perception)
        services.register(device, settings)
        agent = DeviceAgent(bus, device, settings=settings, perception=perception,
                            policy_for=lambda _i: policy, services=services, tracing=tracing)

        async def collect() -> None:
            async for _, msg in watch.messages():
                events.append(msg)

        async with anyio.create_task_group() as tg:
            tg.start_soon(collect)
            await tg.start(run_actors, bus, [*services.actors(), agent])
            with anyio.fail_after(120):
                outcome = await agent.run_episode(Instruction(id="i-1", text=text))
                while not any(getattr(m, "status", "") == "succeeded" for m in events):  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    await anyio.to_thread.run_sync(tracing.shutdown)  # flush: every span is exported
    return outcome, events


@pytest.mark.parametrize("via", ["direct", "collector"])
async def test_an_episode_is_one_trace_with_its_steps_requests_and_llm_calls(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine, otlp_receiver: OtlpReceiver,
    request: pytest.FixtureRequest, via: str,
) -> None:
    collector: Collector | None = (request.getfixturevalue("rotel_collector")
                                   if via == "collector" else None)
    endpoint = otlp_receiver.endpoint if collector is None else collector.endpoint
    task = get_task("settings-1")(0)
    task.setup(sim_device.phone)
    openai_server.script(*DARK_MODE, YES)
    tracing = Tracing(TelemetrySettings(otlp_endpoint=endpoint,
                                        headers={"authorization": HEADER_SECRET},
                                        service_name="mobagent-test"))
    async with llm_client(openai_server) as llm:
        outcome, events = await traced_episode(
            mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)), shared_perception,
            tracing, task.instruction)
    assert outcome.status == "succeeded"
    if collector is None:
        assert otlp_receiver.headers[0]["authorization"] == HEADER_SECRET  # the exporter's
    else:
        # The spans came through the collector: it accepted every export (a refused one
        # would leave spans missing below) and sent them on itself, batched.
        with anyio.fail_after(20):
            while not any(s["name"] == "episode" for s in otlp_receiver.spans):  # noqa: ASYNC110
                await anyio.sleep(0.1)
        await anyio.sleep(0.5)  # a last batch still on its way
        assert all("rotel" in h.get("user-agent", "").lower() for h in otlp_receiver.headers)
        assert collector.proc.poll() is None, collector.log.read_text()[-2000:]
    spans = otlp_receiver.spans
    by_id = {s["span_id"]: s for s in spans}
    (root,) = [s for s in spans if s["name"] == "episode"]
    assert root["parent"] == "" and root["resource"]["service.name"] == "mobagent-test"
    assert {s["trace_id"] for s in spans} == {root["trace_id"]}  # one trace for the episode
    assert root["attributes"]["mobagent.device"] == sim_device.serial
    assert root["attributes"]["mobagent.episode_id"] == outcome.episode_id
    assert root["attributes"]["mobagent.status"] == "succeeded"
    assert root["attributes"]["mobagent.steps"] == 4

    steps = sorted((s for s in spans if s["name"] == "step"),
                   key=lambda s: s["attributes"]["mobagent.step"])
    assert [s["attributes"]["mobagent.step"] for s in steps] == [1, 2, 3, 4]
    assert all(s["parent"] == root["span_id"] for s in steps)
    step_of = {s["span_id"]: s["attributes"]["mobagent.step"] for s in steps}

    def children(step: int) -> Counter[str]:
        return Counter(s["name"] for s in spans if step_of.get(s["parent"]) == step)

    # Open app (no grounding), Click text x2 (grounded), then Stop with the completion check.
    assert children(1) == Counter({"chat plan-m": 1, "action": 1, "capture": 1, "reflection": 1})
    for n in (2, 3):
        assert children(n) == Counter({"chat plan-m": 1, "perception": 1, "action": 1,
                                       "capture": 1, "reflection": 1})
    # The completion check's verdict goes out through the reflector: a request of its own.
    assert children(4) == Counter({"chat plan-m": 1, "chat reflect-m": 1, "reflection": 1})
    first_capture = [s for s in spans if s["name"] == "capture" and s["parent"] == root["span_id"]]
    assert len(first_capture) == 1  # the episode's first frame, before step 1
    for s in spans:
        assert s["start"] <= s["end"]
        if s["parent"]:
            assert s["parent"] in by_id, f"{s['name']}'s parent was not exported"

    llm_spans = [s for s in spans if s["name"].startswith("chat ")]
    for s in llm_spans:
        a = s["attributes"]
        assert a["gen_ai.request.model"] in ("plan-m", "reflect-m")
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert a["mobagent.llm.family"] == "react"
        assert a["mobagent.llm.purpose"] in ("plan", "reflect")
        assert "mobagent.llm.cost_usd" in a and a["openinference.span.kind"] == "LLM"

    # The bus events name their span: Plan its step's, LlmUsage its call's, ActionDone its
    # action request's; EpisodeStarted the episode's.
    (started,) = [m for m in events if isinstance(m, EpisodeStarted)]
    assert (started.trace_id, started.span_id) == (root["trace_id"], root["span_id"])
    for m in events:
        assert m.trace_id == root["trace_id"], type(m).__name__
    for plan in [m for m in events if isinstance(m, Plan)]:
        assert step_of[plan.span_id] == plan.step
    for usage in [m for m in events if isinstance(m, LlmUsage)]:
        assert by_id[usage.span_id]["name"] == f"chat {usage.model}"
    for done in [m for m in events if isinstance(m, ActionDone)]:
        span = by_id[done.span_id]
        assert span["name"] == "action" and step_of[span["parent"]] == done.step

    # No secret in any attribute: not the LLM key, not the exporter's header.
    for s in spans:
        for value in [*s["attributes"].values(), *s["resource"].values()]:
            assert SECRET not in str(value) and HEADER_SECRET not in str(value)


def test_tracing_is_off_by_default_and_stamps_nothing() -> None:
    tracing = Tracing()
    assert not tracing.enabled
    with tracing.episode("p1", "e1", "i1", None), tracing.span("step"):
        assert span_ids() == {"trace_id": "", "span_id": ""}
    tracing.shutdown()
