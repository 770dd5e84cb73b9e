"""Episodes with the LLM policy: the real openai client against the loopback server, a real
SimPhone through the real adb server, real OCR, a real mosquitto broker."""

from __future__ import annotations

import time

import pytest

from actors.perception import PerceptionEngine
from actors.planner import LLMPolicy, RoleSetup
from devices.adb import AdbDevice
from models.llm import ModelPrice, Roles, RoleSettings
from protocol.messages import (
    ActionDone,
    Ambiguous,
    Chosen,
    EpisodeFinished,
    EpisodeStarted,
    Error,
    Frame,
    Grounded,
    GroundRequest,
    LlmUsage,
    NotFound,
    Plan,
    Reflection,
    StepTiming,
)
from protocol.operations import ClickText, OpenApp
from sim.eval.tasks import get_task
from sim.phone.system import SystemSettings
from tests.agent.conftest import SECRET, SimDevice, fast_settings, llm_client, run_episode
from tests.fixtures.mosquitto import MosquittoBroker
from tests.fixtures.openai_server import Behaviour, OpenAIServer, RecordedRequest, planner_reply

pytestmark = [pytest.mark.anyio, pytest.mark.needs_adb, pytest.mark.needs_mosquitto]

DARK_MODE = [
    planner_reply("Open app (Settings)"),
    planner_reply("Click text (Display)"),
    planner_reply("Click text (Dark mode)"),
    planner_reply("Stop"),
]
YES = "Complete: yes\nReason: dark mode is on."


def _dark(sim: SimDevice) -> bool:
    return bool(sim.phone.state_as("com.android.settings", SystemSettings).dark_mode)


async def test_normal_episode_reaches_success(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    task = get_task("settings-1")(0)
    task.setup(sim_device.phone)
    assert not task.is_successful(sim_device.phone)
    openai_server.script(*DARK_MODE, YES)
    async with llm_client(openai_server) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(), shared_perception, task.instruction)
    assert run.outcome is not None and run.outcome.status == "succeeded", run.outcome
    assert task.is_successful(sim_device.phone)
    assert run.outcome.operations == (OpenApp("Settings"), ClickText("Display"),
                                      ClickText("Dark mode"))
    # every step's messages went out as events, stamped with device, episode and step
    for cls in (EpisodeStarted, Frame, Plan, GroundRequest, Grounded, ActionDone, Reflection,
                StepTiming, LlmUsage, EpisodeFinished):
        assert run.of(cls), f"no {cls.__name__} event"
    ep = run.outcome.episode_id
    for topic, msg in run.events:
        if isinstance(msg, Frame | Plan | ActionDone | Reflection | StepTiming | LlmUsage):
            assert msg.device == sim_device.serial and msg.episode_id == ep and msg.step >= 1
            assert topic.endswith("/events/" + topic.rsplit("/", 1)[1])
    assert [p.step for p in run.of(Plan)] == [1, 2, 3, 4]
    assert {u.purpose for u in run.of(LlmUsage)} == {"plan", "reflect"}
    assert [r.verdict for r in run.of(Reflection)][-1] == "complete"
    # Nobody on the bus reads the full frames (no frames lease): none is encoded for it;
    # the LLM got its own view from the host's frame store.
    assert all(f.format == "jpeg" and f.data == b"" for f in run.of(Frame))
    # the planner saw the screenshot; the key never reached an event
    assert openai_server.requests[0].images()
    assert all(SECRET not in repr(m) for _, m in run.events)


async def test_malformed_replies_are_reasked_and_never_executed(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.key(3)
    openai_server.script(
        # step 1: two unusable replies, then a good one (max_reasks=2)
        "I think I should open settings.",
        planner_reply("Click text (Display) now please"),
        planner_reply("Open app (Settings)"),
        # step 2: out of format three times: nothing may run
        "Action: Stop the world",
        "Observation: x\nThought: y\nAction: Fly to (Display)",
        "Observation: x\nThought: y\nAction: Click text (Display",
        # step 3: give up cleanly
        planner_reply("Stop"),
        YES,
    )
    async with llm_client(openai_server) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(max_unusable_replies=4), shared_perception,
                                "Open the settings.")
    assert run.outcome is not None and run.outcome.status == "succeeded"
    assert run.outcome.operations == (OpenApp("Settings"),)
    assert [a.operation for a in run.of(ActionDone)] == [OpenApp("Settings")]
    plans = run.of(Plan)
    assert plans[0].operation == OpenApp("Settings")
    assert plans[1].operation is None and plans[1].parse_error
    assert sim_device.phone.current_screen().startswith("com.android.settings/")
    # the re-ask carried the parse error back to the model
    reask = openai_server.requests[1].texts()
    assert any("could not be used" in t for t in reask)
    # the unusable step's feedback reached the next prompt
    assert any("could not be used" in t for t in openai_server.requests[6].texts())
    assert sum(1 for u in run.of(LlmUsage) if u.purpose == "plan") == 7


async def test_429_and_500_then_success(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.key(3)
    openai_server.script(
        Behaviour.error(429, headers={"retry-after": "0"}), Behaviour.error(500),
        planner_reply("Open app (Settings)"),
        Behaviour.error(503), planner_reply("Stop"), YES,
    )
    async with llm_client(openai_server) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(), shared_perception, "Open the settings.")
    assert run.outcome is not None and run.outcome.status == "succeeded"
    assert run.outcome.operations == (OpenApp("Settings"),)
    assert len(openai_server.requests) == 6
    assert openai_server.pending == 0


async def test_llm_hang_past_timeout_fails_the_episode_cleanly(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    openai_server.script(Behaviour(hang=True))
    t0 = time.monotonic()
    async with llm_client(openai_server, timeout_s=1.0, max_retries=0) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(), shared_perception, "Open the settings.")
    assert time.monotonic() - t0 < 30
    assert run.outcome is not None and run.outcome.status == "failed"
    assert "Timeout" in run.outcome.reason or "timed out" in run.outcome.reason
    assert not run.of(ActionDone)
    assert any(e.reason == "episode failed" for e in run.of(Error))
    fin = run.of(EpisodeFinished)
    assert len(fin) == 1 and fin[0].status == "failed"


async def test_not_complete_continues_with_the_reason(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    task = get_task("settings-1")(0)
    task.setup(sim_device.phone)
    reason = "the Display page is open but dark mode is still off"
    openai_server.script(
        planner_reply("Open app (Settings)"),
        planner_reply("Click text (Display)"),
        planner_reply("Stop"),
        f"Complete: no\nReason: {reason}",
        planner_reply("Click text (Dark mode)"),
        planner_reply("Stop"),
        YES,
    )
    async with llm_client(openai_server) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(), shared_perception, task.instruction)
    assert run.outcome is not None and run.outcome.status == "succeeded"
    assert task.is_successful(sim_device.phone)
    verdicts = [r.verdict for r in run.of(Reflection)]
    assert "incomplete" in verdicts and verdicts[-1] == "complete"
    # the reason reached the very next planner prompt
    nxt = openai_server.requests[4]
    assert nxt.model == "plan-m"
    assert any(reason in t for t in nxt.texts())


async def test_loop_guard_fires(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.open("com.android.settings")
    sim_device.phone.settle()
    sim_device.phone.faults.frozen = True  # taps do nothing: the same frame every step
    openai_server.script(*[planner_reply("Click text (Display)")] * 5)
    async with llm_client(openai_server) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(loop_guard=3), shared_perception, "Open display.")
    sim_device.phone.faults.frozen = False
    assert run.outcome is not None and run.outcome.status == "failed"
    assert "loop" in run.outcome.reason
    verdicts = [r.verdict for r in run.of(Reflection)]
    assert verdicts[:2] == ["unchanged", "unchanged"]
    assert "loop" in verdicts[2:]
    assert len(run.of(ActionDone)) == 2  # the repeats after the guard fired were not executed
    assert any("chosen 3 times" in t for t in openai_server.requests[3].texts())


async def test_not_found_is_feedback_and_ambiguous_is_one_chooser_call(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    phone = sim_device.phone
    phone.open("com.mobagent.notes", "edit")
    phone.settle()
    openai_server.script(
        planner_reply("Click text (Frobnicate widget)"),  # nothing like it on screen
        planner_reply("Click text (Note)"),  # the field's label and its hint: two places
        "Box: 1",
        planner_reply("Stop"),
        YES,
    )
    async with llm_client(openai_server) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(), shared_perception, "Write a note.")
    assert run.outcome is not None and run.outcome.status == "succeeded"
    nf = run.of(NotFound)
    assert nf and nf[0].step == 1 and nf[0].query == "Frobnicate widget"
    done = run.of(ActionDone)
    assert not done[0].ok and done[0].step == 1  # nothing was tapped for it
    # the miss and what the screen does say reached the next prompt
    second = openai_server.requests[1].texts()
    assert any("Frobnicate widget" in t and "found" in t for t in second)
    amb = run.of(Ambiguous)
    assert amb and amb[0].step == 2 and len(amb[0].candidates) >= 2 and amb[0].marked_image
    chooser = openai_server.requests[2]
    assert chooser.model == "choose-m" and chooser.images()
    # the screen with the boxes drawn, then a close-up of each box
    assert all(c.crop.startswith(b"\x89PNG") for c in amb[0].candidates)
    assert len(chooser.images()) == 1 + len(amb[0].candidates)
    assert f"Box {amb[0].candidates[-1].index} close up:" in " ".join(chooser.texts())
    assert amb[0].reason  # perception says why it could not pick, and the chooser hears it
    assert f"Why these boxes: {amb[0].reason}" in " ".join(chooser.texts())
    chosen = run.of(Chosen)  # the planner's kind; Grounded stays perception's
    assert chosen and chosen[0].index == amb[0].candidates[0].index
    assert (chosen[0].x, chosen[0].y) == amb[0].candidates[0].box.center
    assert not [g for g in run.of(Grounded) if g.step == amb[0].step]
    assert any(u.purpose == "choose" for u in run.of(LlmUsage))


async def test_unusable_replies_in_a_row_end_the_episode(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.key(3)
    openai_server.script(
        planner_reply("Open app (Settings)"),
        "I would rather chat.", "Still chatting.", "Action: Frobnicate",
        planner_reply("Stop"),  # never asked for: the episode ended first
    )
    async with llm_client(openai_server) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial),
                                LLMPolicy(llm, RoleSetup.from_settings(llm.settings), max_reasks=5),
                                fast_settings(max_unusable_replies=3), shared_perception,
                                "Open the settings.")
    assert run.outcome is not None and run.outcome.status == "failed"
    reason = run.outcome.reason
    assert "3 unusable replies in a row" in reason and "Frobnicate" in reason
    assert "last parse error" in reason
    # max_reasks=5, yet step 2 stopped re-asking at the third unusable reply
    assert len(openai_server.requests) == 4 and openai_server.pending == 1
    fin = run.of(EpisodeFinished)
    assert len(fin) == 1 and fin[0].status == "failed" and "Frobnicate" in fin[0].reason
    assert run.of(Plan)[-1].parse_error


async def test_cost_is_published_and_the_cap_ends_the_episode(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.key(3)
    # The server counts far more prompt tokens than the client's estimate (~1-2k): each
    # call's worst cost passes the check before it, and its real cost reaches the cap after.
    priced = dict(prompt_tokens=20000, completion_tokens=100, cached_tokens=200)
    openai_server.script(
        Behaviour.reply(planner_reply("Open app (Settings)"), **priced),
        Behaviour.reply(planner_reply("Click text (Display)"), **priced),
        Behaviour.reply(planner_reply("Stop"), **priced),
    )
    prices = {"plan-m": ModelPrice(prompt_per_mtok=10.0, completion_per_mtok=10.0,
                                   cached_per_mtok=5.0)}
    per_call = (19800 * 10.0 + 200 * 5.0 + 100 * 10.0) / 1e6  # $0.200
    async with llm_client(openai_server, prices=prices) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(max_cost_usd=0.3), shared_perception,
                                "Open the display settings.")
    assert run.outcome is not None and run.outcome.status == "failed"
    assert run.outcome.reason.startswith("cost cap of $0.3 reached")
    usage = run.of(LlmUsage)
    assert [u.cost_usd for u in usage] == [pytest.approx(per_call)] * 2
    assert all(u.cached_tokens == 200 for u in usage)
    assert len(openai_server.requests) == 2  # no call after the cap
    assert run.outcome.operations == (OpenApp("Settings"),)
    # the episode's spend is published with its end, and is its calls' sum
    (fin,) = run.of(EpisodeFinished)
    assert fin.cost_usd == pytest.approx(2 * per_call) == run.outcome.cost_usd
    assert fin.reason == f"cost cap of $0.3 reached: the LLM calls cost ${2 * per_call:.4f}"
    # the reply that reached the cap is recorded as its step's plan, and was not executed
    assert [p.operation for p in run.of(Plan)] == [OpenApp("Settings"), ClickText("Display")]
    assert [a.operation for a in run.of(ActionDone)] == [OpenApp("Settings")]


async def test_a_call_that_could_pass_the_cost_cap_is_not_made(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.key(3)
    # Output tokens only are priced: a call's worst cost is its 1024-token limit, $0.01024.
    openai_server.script(
        Behaviour.reply(planner_reply("Open app (Settings)"), completion_tokens=1000),
        Behaviour.reply("Frobnicate the screen", completion_tokens=1000),  # re-asked...
        Behaviour.reply(planner_reply("Stop"), completion_tokens=1000),  # ...never sent
    )
    prices = {"plan-m": ModelPrice(prompt_per_mtok=0.0, completion_per_mtok=10.0)}
    async with llm_client(openai_server, prices=prices, max_tokens=1024) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(max_cost_usd=0.025), shared_perception,
                                "Open the display settings.")
    assert run.outcome is not None and run.outcome.status == "failed"
    # $0.02 spent, and the re-ask could cost $0.01024 more: over $0.025, so never sent
    assert len(openai_server.requests) == 2 and openai_server.pending == 1
    assert run.outcome.reason == (
        "cost cap of $0.025 would be passed: the next planner call (plan-m) may cost up to "
        f"$0.0102 (~{run.outcome.reason.split('(~')[1].split(' ')[0]} prompt + 1024 output "
        "tokens) and the LLM calls cost $0.0200 so far; not sent")
    assert run.outcome.operations == (OpenApp("Settings"),)
    # the unusable reply of the ended step is still published and counted
    usage = run.of(LlmUsage)
    assert [(u.purpose, u.cost_usd) for u in usage] == [("plan", pytest.approx(0.01))] * 2
    (fin,) = run.of(EpisodeFinished)
    assert fin.cost_usd == pytest.approx(0.02) == run.outcome.cost_usd
    assert fin.reason == run.outcome.reason
    assert not run.of(Error)  # a clean end, not a failure of the model


async def test_a_stream_of_429s_inside_the_budget_then_success(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.key(3)
    # Counted, not timed: a loaded machine must not turn the 429 stream into fewer retries.
    limited = 6
    replies = [planner_reply("Open app (Settings)"), planner_reply("Stop"), YES]

    def quota(req: RecordedRequest) -> Behaviour:
        nonlocal limited
        if limited > 0:
            limited -= 1
            return Behaviour.error(429, "TPM limit", headers={"Retry-After": "0.25"})
        return Behaviour.reply(replies.pop(0))

    openai_server.policy = quota
    openai_server.script(Behaviour(hang=True), Behaviour.error(500))  # a timeout and a 500 first
    async with llm_client(openai_server, timeout_s=0.5, retry_budget_s=5.0,
                          max_retries=None) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(), shared_perception, "Open the settings.")
    assert run.outcome is not None and run.outcome.status == "succeeded", run.outcome
    assert run.outcome.operations == (OpenApp("Settings"),)
    assert len(openai_server.requests) == 2 + 6 + 3 and not replies and limited == 0


async def test_429s_past_the_budget_fail_the_episode_naming_the_endpoint(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    openai_server.policy = lambda req: Behaviour.error(429, "Rate limit reached",
                                                       headers={"Retry-After": "0.2"})
    async with llm_client(openai_server, retry_budget_s=0.7, max_retries=None) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(), shared_perception, "Open the settings.")
    assert run.outcome is not None and run.outcome.status == "failed"
    reason = run.outcome.reason
    assert f"127.0.0.1:{openai_server.port}" in reason and "HTTP 429" in reason
    assert "Rate limit reached" in reason and "retry budget" in reason
    assert SECRET not in reason and not run.of(ActionDone)


async def test_a_response_without_content_retries_the_step(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.key(3)
    openai_server.script(Behaviour(text=None), planner_reply("Open app (Settings)"),
                         planner_reply("Stop"), YES)
    async with llm_client(openai_server) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(), shared_perception, "Open the settings.")
    assert run.outcome is not None and run.outcome.status == "succeeded", run.outcome
    assert run.of(Plan)[0].operation is None and "no text content" in run.of(Plan)[0].parse_error
    assert run.outcome.operations == (OpenApp("Settings"),)


async def test_the_reflector_goes_to_its_own_server(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.key(3)
    with OpenAIServer() as judge:
        openai_server.script(planner_reply("Open app (Settings)"), planner_reply("Stop"))
        judge.script(YES)
        roles = Roles(reflector=RoleSettings(base_url=judge.base_url, model="judge-m"))
        async with llm_client(openai_server, roles=roles) as llm:
            run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                    fast_settings(), shared_perception, "Open the settings.")
        assert run.outcome is not None and run.outcome.status == "succeeded", run.outcome
        assert [r.model for r in openai_server.requests] == ["plan-m", "plan-m"]
        assert [r.model for r in judge.requests] == ["judge-m"]
        assert judge.requests[0].images()  # the completion check saw the screen
