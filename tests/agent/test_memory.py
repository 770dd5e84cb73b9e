"""Memory and planning in real episodes: the real openai client against the loopback server,
a real SimPhone through the real adb server, real OCR, a real mosquitto broker.

What is checked is what the model is sent (the recorded requests) and what the episode does
with what it answers: the Observation/Thought of earlier steps, the progress and the notes
in every later prompt; the Thought in the chooser's prompt; the LLM judge's verdicts driving
Back and retry; the planning call."""

from __future__ import annotations

import pytest

from actors.perception import PerceptionEngine
from actors.planner import LLMPolicy, RoleSetup
from devices.adb import AdbDevice
from protocol.messages import (
    ActionDone,
    Chosen,
    EpisodeStarted,
    LlmUsage,
    NoteKept,
    NotFound,
    Progress,
    Reflection,
)
from protocol.operations import Back, ClickText, OpenApp
from sim.eval.tasks import get_task
from tests.agent.conftest import SimDevice, fast_settings, llm_client, run_episode
from tests.fixtures.mosquitto import MosquittoBroker
from tests.fixtures.openai_server import OpenAIServer, planner_reply

pytestmark = [pytest.mark.anyio, pytest.mark.needs_adb, pytest.mark.needs_mosquitto]

YES = "Complete: yes\nReason: dark mode is on."


def _reply(action: str, thought: str, progress: str = "", memory: str = "",
           observation: str = "The screen.") -> str:
    text = f"Observation: {observation}\nThought: {thought}\nAction: {action}"
    if progress:
        text += f"\nProgress: {progress}"
    if memory:
        text += f"\nMemory: {memory}"
    return text


def _text(server: OpenAIServer, k: int) -> str:
    return "\n".join(server.requests[k].texts())


async def test_prompts_carry_thoughts_progress_and_notes(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    task = get_task("settings-1")(0)
    task.setup(sim_device.phone)
    openai_server.script(
        _reply("Open app (Settings)", "THOUGHT-ONE dark mode is a setting",
               progress="PROGRESS-ONE Settings opened; Display and dark mode remain",
               memory="None", observation="OBS-ONE the home screen"),
        _reply("Click text (Display)", "THOUGHT-TWO dark mode is under Display",
               progress="PROGRESS-TWO Display opened; dark mode remains",
               memory="MEMORY-KEPT the battery shows 85%"),
        _reply("Note (NOTE-OP dark mode sits on the Display page)", "THOUGHT-THREE keep it"),
        _reply("Click text (Dark mode)", "THOUGHT-FOUR turn it on",
               progress="PROGRESS-FOUR dark mode turned on; nothing remains"),
        _reply("Stop", "done"),
        YES,
    )
    async with llm_client(openai_server) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(check_screens=2), shared_perception,
                                task.instruction)
    assert run.outcome is not None and run.outcome.status == "succeeded", run.outcome
    assert task.is_successful(sim_device.phone)
    # The Note touched nothing: the phone saw the three taps only.
    assert run.outcome.operations == (OpenApp("Settings"), ClickText("Display"),
                                      ClickText("Dark mode"))
    assert all(a.step != 3 for a in run.of(ActionDone))

    # Every later prompt carries the earlier steps' Observation and Thought ...
    second, third, fifth = _text(openai_server, 1), _text(openai_server, 2), _text(openai_server, 4)
    assert "OBS-ONE" in second and "THOUGHT-ONE" in second
    assert "THOUGHT-ONE" in fifth and "THOUGHT-TWO" in fifth and "THOUGHT-FOUR" in fifth
    # ... the latest progress (replacing the one before) ...
    assert "Progress so far: PROGRESS-ONE" in second
    assert "PROGRESS-TWO" in third and "PROGRESS-ONE" not in third
    assert "PROGRESS-FOUR" in fifth
    # ... and the notes, from the Memory: field and from Note, never the "None" memory.
    assert "MEMORY-KEPT" in third and "NOTE-OP" not in third
    assert "MEMORY-KEPT" in fifth and "NOTE-OP" in fifth
    assert "- None" not in second
    # the reply format asks for the fields, and teaches Note
    system = openai_server.requests[0].body["messages"][0]["content"]  # type: ignore[index]
    system_text = system if isinstance(system, str) else " ".join(p["text"] for p in system)
    assert "Progress:" in system_text and "Memory:" in system_text and "Note (text)" in system_text

    # notes and progress are events; the episode's settings are recorded
    notes = run.of(NoteKept)
    assert [(n.text, n.origin) for n in notes] == [
        ("MEMORY-KEPT the battery shows 85%", "field"),
        ("NOTE-OP dark mode sits on the Display page", "operation")]
    assert [p.text.split()[0] for p in run.of(Progress)] == [
        "PROGRESS-ONE", "PROGRESS-TWO", "PROGRESS-FOUR"]
    assert {p.origin for p in run.of(Progress)} == {"inline"}
    started = run.of(EpisodeStarted)[0]
    assert started.settings["planning"] == "inline" and started.settings["notes"] == "true"
    assert started.settings["reflection"] == "pixels"
    assert int(started.settings["max_prompt_tokens"]) > 0

    # the completion check: instruction, progress, notes, the last screens
    check = openai_server.requests[5]
    assert check.model == "reflect-m"
    check_text = _text(openai_server, 5)
    assert task.instruction[:30] in check_text
    assert "PROGRESS-FOUR" in check_text and "MEMORY-KEPT" in check_text and "NOTE-OP" in check_text
    assert len(check.images()) == 1 + 2  # two earlier screens, then the final one


async def test_memory_off_sends_none_of_it(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.key(3)
    openai_server.script(
        _reply("Open app (Settings)", "THOUGHT-ONE", progress="PROGRESS-ONE",
               memory="MEMORY-ONE"),
        _reply("Stop", "done"), YES,
    )
    async with llm_client(openai_server) as llm:
        run = await run_episode(
            mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
            fast_settings(planning="off", notes=False, history_thoughts=False),
            shared_perception, "Open the settings.")
    assert run.outcome is not None and run.outcome.status == "succeeded", run.outcome
    second = _text(openai_server, 1)
    assert "THOUGHT-ONE" not in second and "PROGRESS-ONE" not in second
    assert "MEMORY-ONE" not in second
    assert not run.of(NoteKept) and not run.of(Progress)
    assert run.of(EpisodeStarted)[0].settings["planning"] == "off"


async def test_the_chooser_gets_the_thought(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    phone = sim_device.phone
    phone.open("com.mobagent.notes", "edit")
    phone.settle()
    openai_server.script(
        # the field's label and its hint: two places read "Note"
        _reply("Click text (Note)", "THOUGHT-CHOOSE the empty body field, not its label"),
        "Box: 1",
        _reply("Stop", "done"),
        YES,
    )
    async with llm_client(openai_server) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(), shared_perception, "Write a note.")
    assert run.outcome is not None and run.outcome.status == "succeeded", run.outcome
    assert run.of(Chosen)
    chooser = openai_server.requests[1]
    assert chooser.model == "choose-m"
    assert "THOUGHT-CHOOSE the empty body field" in _text(openai_server, 1)


async def test_llm_reflection_goes_back_on_a_wrong_page_and_retries_on_no_effect(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    task = get_task("settings-1")(0)
    task.setup(sim_device.phone)
    openai_server.script(
        planner_reply("Open app (Settings)"),
        "Verdict: A\nReason: Settings is open.",
        _reply("Click text (Network & internet)", "THOUGHT-WRONG maybe dark mode is here"),
        "Verdict: B (wrong page)\nReason: JUDGE-WRONG this is the network page.",
        # Back was done by the agent: Display is on the screen again
        planner_reply("Click text (Display)"),
        "Verdict: C\nReason: JUDGE-NOEFFECT nothing changed that matters.",
        planner_reply("Click text (Dark mode)"),
        "Verdict: correct\nReason: dark mode is on.",
        planner_reply("Stop"),
        YES,
    )
    async with llm_client(openai_server) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(reflection="llm"), shared_perception,
                                task.instruction)
    assert run.outcome is not None and run.outcome.status == "succeeded", run.outcome
    assert task.is_successful(sim_device.phone)
    # the judge saw the before and after screens of each action, and the Thought
    judge = openai_server.requests[3]
    assert judge.model == "reflect-m" and len(judge.images()) == 2
    assert "THOUGHT-WRONG" in _text(openai_server, 3)
    # wrong page -> the agent pressed Back itself, in the same step, and said so
    backs = [a for a in run.of(ActionDone) if a.operation == Back()]
    assert len(backs) == 1 and backs[0].ok and backs[0].step == 2
    assert run.outcome.operations == (OpenApp("Settings"), ClickText("Network & internet"),
                                      Back(), ClickText("Display"), ClickText("Dark mode"))
    assert not run.of(NotFound)  # Display was on the screen it came back to
    after_wrong = _text(openai_server, 4)
    assert "led to a wrong page" in after_wrong and "undone with Back" in after_wrong
    assert "JUDGE-WRONG" in after_wrong
    # no effect -> the next prompt says to try again another way
    after_none = _text(openai_server, 6)
    assert "had no effect" in after_none and "JUDGE-NOEFFECT" in after_none
    assert "Try again" in after_none
    # the verdicts are events, with who judged
    llm_verdicts = [(r.step, r.verdict) for r in run.of(Reflection) if r.source == "llm"]
    assert llm_verdicts == [(1, "ok"), (2, "wrong_page"), (3, "unchanged"), (4, "ok")]
    assert all(r.source == "pixels" for r in run.of(Reflection)
               if r.verdict in ("ok", "unchanged") and r.source != "llm")
    assert sum(1 for u in run.of(LlmUsage) if u.purpose == "judge") == 4
    assert run.of(EpisodeStarted)[0].settings["reflection"] == "llm"


async def test_both_asks_the_judge_only_when_pixels_are_unsure(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    task = get_task("settings-1")(0)
    task.setup(sim_device.phone)
    openai_server.script(
        planner_reply("Open app (Settings)"),  # its effect is the app: pixels are sure
        planner_reply("Click text (Display)"),  # which page a tap opens: unsure
        "Verdict: A\nReason: the Display page.",
        planner_reply("Click text (Dark mode)"),
        "Verdict: A\nReason: dark mode is on.",
        planner_reply("Stop"),
        YES,
    )
    async with llm_client(openai_server) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(reflection="both"), shared_perception,
                                task.instruction)
    assert run.outcome is not None and run.outcome.status == "succeeded", run.outcome
    pixels = [r for r in run.of(Reflection) if r.source == "pixels"]
    assert [r.unsure for r in pixels] == [False, True, True]
    assert [r.step for r in run.of(Reflection) if r.source == "llm"] == [2, 3]
    assert [r.model for r in openai_server.requests] == [
        "plan-m", "plan-m", "reflect-m", "plan-m", "reflect-m", "plan-m", "reflect-m"]


async def test_the_planning_call_updates_the_progress(
    sim_device: SimDevice, mosquitto: MosquittoBroker, openai_server: OpenAIServer,
    shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.key(3)
    openai_server.script(
        # the reply's own Progress: is not used with planning = "call"
        _reply("Open app (Settings)", "THOUGHT-ONE open it", progress="INLINE-IGNORED"),
        "Progress: CALLED-PROGRESS Settings is open; nothing remains.",
        planner_reply("Stop"),
        YES,
    )
    async with llm_client(openai_server) as llm:
        run = await run_episode(mosquitto, AdbDevice(sim_device.serial), LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
                                fast_settings(planning="call"), shared_perception,
                                "Open the settings.")
    assert run.outcome is not None and run.outcome.status == "succeeded", run.outcome
    call = _text(openai_server, 1)
    assert "Open app (Settings)" in call and "THOUGHT-ONE" in call
    assert "Progress:" not in "\n".join(
        m["content"] if isinstance(m["content"], str) else ""
        for m in openai_server.requests[0].body["messages"][:1])  # type: ignore[index]
    assert "Progress so far: CALLED-PROGRESS" in _text(openai_server, 2)
    assert "INLINE-IGNORED" not in _text(openai_server, 2)
    assert [(p.text.split()[0], p.origin) for p in run.of(Progress)] == [
        ("CALLED-PROGRESS", "call")]
    assert [u.purpose for u in run.of(LlmUsage)] == ["plan", "progress", "plan", "reflect"]
