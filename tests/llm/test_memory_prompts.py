"""The memory parts of the prompts: thoughts in the history under a token bound, progress and
notes, the Note operation and Memory: field in each family that has a place for them, the
judge's and the planning call's parsers."""

from __future__ import annotations

import pytest

from models.llm import ChatMessage, ImageInput
from models.llm.budget import estimate_tokens, image_tokens, text_tokens
from models.llm.errors import ParseError
from models.llm.families import get_family
from models.llm.families.react import parse_operation, parse_planner_reply, react_planner_messages
from models.llm.prompts.chooser import chooser_messages
from models.llm.prompts.completion import completion_messages
from models.llm.prompts.judge import judge_messages, parse_judgement
from models.llm.prompts.planner import PlannerInput
from models.llm.prompts.progress import parse_progress
from models.llm.prompts.shared import PastStep
from models.llm.replytext import kept_memory
from protocol.operations import ClickText, Note, OpenApp, format_operation
from tests.llm.conftest import png_screen


def _long_history(n: int, shot: bytes) -> tuple[PastStep, ...]:
    return tuple(
        PastStep(action=ClickText(f"item {i}"), result="done", verdict="ok",
                   observation=f"OBS-{i} " + "a list of things on the screen " * 6,
                   thought=f"THOUGHT-{i} " + "the next thing to do is this one " * 6,
                   screenshot=shot)
        for i in range(n)
    )


def _text(msgs: list[ChatMessage]) -> str:
    return "".join(p for m in msgs for p in m.content if isinstance(p, str))


def test_token_estimate_is_the_documented_rule() -> None:
    assert text_tokens("") == 0 and text_tokens("abcd") == 1 and text_tokens("abcde") == 2
    # 1080x2400 at a 1024 side -> 461x1024: 1 x 2 tiles
    assert image_tokens(png_screen(1080, 2400), 1024) == 85 + 170 * 2
    assert image_tokens(png_screen(200, 400), 1024) == 85 + 170
    msgs = [ChatMessage.text("system", "x" * 40), ChatMessage("user", ("abcd", ImageInput(
        png_screen(200, 400))))]
    assert estimate_tokens(msgs) == (4 + 10) + (4 + 1 + 255)


def test_history_carries_observation_and_thought_and_the_bound_holds() -> None:
    shot = png_screen(1080, 2400, seed=1)
    history = _long_history(60, shot)
    inp = PlannerInput(instruction="Do a long job", screenshot=shot, history=history,
                       progress="PROGRESS steps 0-59 done; the report remains",
                       notes=("NOTE the price is $12.99",))
    unbounded = react_planner_messages(inp, keep_screenshots=1)
    text = _text(unbounded)
    assert "OBS-59" in text and "THOUGHT-59" in text and "THOUGHT-30" in text
    assert "Progress so far: PROGRESS" in text and "- NOTE the price is $12.99" in text
    big = estimate_tokens(unbounded)

    for bound in (big - 1, 6000, 3000, 1500):
        msgs = react_planner_messages(PlannerInput(**{**_fields(inp), "max_prompt_tokens": bound}),
                                keep_screenshots=1)
        assert estimate_tokens(msgs) <= bound, bound
        t = _text(msgs)
        # what must stay: the instruction, the memory, the latest step, the current screen
        assert "Do a long job" in t and "PROGRESS" in t and "NOTE the price" in t
        assert "the progress above sums them up" in t
        if bound >= 3000:
            assert "60. Click text (item 59)" in t
        assert isinstance(msgs[1].content[-2], ImageInput) and msgs[1].content[-2].data == shot
    tight = _text(react_planner_messages(PlannerInput(**{**_fields(inp), "max_prompt_tokens": 3000}),
                                   keep_screenshots=1))
    assert "THOUGHT-59" in tight and "THOUGHT-0 " not in tight  # older thoughts go first
    assert "earlier steps not shown; the progress above sums them up" in tight


def _fields(inp: PlannerInput) -> dict[str, object]:
    return {f: getattr(inp, f) for f in inp.__struct_fields__}


def test_history_thoughts_off_lists_actions_only() -> None:
    shot = png_screen(200, 400)
    inp = PlannerInput(instruction="x", screenshot=shot, history=_long_history(3, shot),
                       history_thoughts=False)
    text = _text(react_planner_messages(inp))
    assert "THOUGHT-" not in text and "OBS-" not in text and "3. Click text (item 2)" in text


def test_reply_fields_are_asked_for_only_when_on() -> None:
    shot = png_screen(200, 400)
    plain = react_planner_messages(PlannerInput(instruction="x", screenshot=shot))[0].content[0]
    both = react_planner_messages(PlannerInput(instruction="x", screenshot=shot, reply_progress=True,
                                         reply_memory=True))[0].content[0]
    assert isinstance(plain, str) and isinstance(both, str)
    assert "Progress:" not in plain and "Memory:" not in plain and "Note (text)" not in plain
    assert "Progress:" in both and "Memory:" in both and "Note (text)" in both


def test_progress_and_memory_fields_are_read_after_or_before_the_action() -> None:
    r = parse_planner_reply("Observation: o\nThought: t\nAction: Click text (OK)\n"
                            "Progress: opened the app; the form remains\nMemory: $12.99")
    assert r.action == ClickText("OK") and r.thought == "t"
    assert r.progress == "opened the app; the form remains" and r.memory == "$12.99"
    r = parse_planner_reply("Observation: o\nThought: t\nProgress: p\nMemory: None\n"
                            "Action: Open app (Notes)")
    assert r.action == OpenApp("Notes") and r.thought == "t" and r.progress == "p"
    assert r.memory == ""
    assert kept_memory("Nothing.") == "" and kept_memory(" 21 °C ") == "21 °C"
    with pytest.raises(ParseError):
        parse_planner_reply("Observation: o\nThought: t\nAction: Back\nAction: Stop now")


def test_note_round_trips_through_the_grammar() -> None:
    op = parse_operation("Note (the meeting is at 10:30, room 4)")
    assert op == Note("the meeting is at 10:30, room 4")
    assert parse_operation(format_operation(op)) == op
    with pytest.raises(ParseError):
        parse_operation("Note ()")


@pytest.mark.parametrize(("family", "text", "tool_calls"), [
    ("json", '{"thought": "t", "op": "note", "args": {"text": "K"}, "progress": "P", '
             '"memory": "M"}', ()),
    ("tools", "keep it\nProgress: P\nMemory: M", (("note", '{"text": "K"}'),)),
])
def test_json_and_tools_families_keep_notes_and_progress(
    family: str, text: str, tool_calls: tuple[tuple[str, str], ...],
) -> None:
    from models.llm.families.base import ToolCall

    fam = get_family(family)
    geom = fam.geometry(1080, 2400)
    r = fam.parse(text, geom, tuple(ToolCall(n, a) for n, a in tool_calls))
    assert r.operation == Note("K") and r.progress == "P" and r.memory == "M"
    shot = png_screen(1080, 2400)
    msgs = fam.planner_messages(PlannerInput(instruction="x", screenshot=shot,
                                             reply_progress=True, reply_memory=True,
                                             notes=("N1",), progress="P0"), geom)
    system = msgs[0].content[0]
    assert isinstance(system, str) and "progress" in system.lower() and "memory" in system.lower()
    assert "- N1" in _text(msgs[1:]) and "Progress so far: P0" in _text(msgs[1:])


def test_coordinate_families_get_the_memory_in_the_prompt_but_no_new_fields() -> None:
    shot = png_screen(1080, 2400)
    fam = get_family("uitars")
    geom = fam.geometry(1080, 2400)
    history = (PastStep(action=ClickText("a"), thought="THOUGHT-U"),)
    msgs = fam.planner_messages(PlannerInput(instruction="x", screenshot=shot, history=history,
                                             notes=("N1",), reply_memory=True), geom)
    system = msgs[0].content[0]
    assert isinstance(system, str) and "Memory:" not in system
    assert "THOUGHT-U" in _text(msgs[1:]) and "- N1" in _text(msgs[1:])


def test_chooser_completion_and_judge_prompts_carry_the_memory() -> None:
    shot = png_screen(200, 400)
    chooser = _text(chooser_messages(instruction="reply to Bob", target="Reply", image=shot,
                                     labels=[1, 2], thought="THOUGHT the Reply under Bob's mail"))
    assert "THOUGHT the Reply under Bob's mail" in chooser
    history = tuple(PastStep(action=ClickText(f"s{i}"), screenshot=png_screen(200, 400, seed=i))
                    for i in range(4))
    comp = completion_messages(instruction="i", history=history, screenshot=shot,
                               progress="PROG", notes=("NOTE",), earlier_screens=2)
    images = [p for p in comp[1].content if isinstance(p, ImageInput)]
    assert [i.data for i in images] == [history[2].screenshot, history[3].screenshot, shot]
    assert "PROG" in _text(comp) and "NOTE" in _text(comp)
    judge = judge_messages(instruction="i", operation=ClickText("Display"), thought="WHY",
                           before=shot, after=png_screen(200, 400, seed=5), progress="PROG")
    assert len([p for p in judge[1].content if isinstance(p, ImageInput)]) == 2
    assert "WHY" in _text(judge) and "Click text (Display)" in _text(judge)


@pytest.mark.parametrize(("reply", "verdict"), [
    ("Verdict: A\nReason: fine", "ok"), ("**Verdict:** B (wrong page)", "wrong_page"),
    ("I looked.\nVerdict: no effect\nReason: same screen", "unchanged"),
    ("Verdict: correct", "ok"), ("Verdict: C.", "unchanged"),
])
def test_judge_replies(reply: str, verdict: str) -> None:
    assert parse_judgement(reply).verdict == verdict


def test_unusable_judge_and_progress_replies_are_errors() -> None:
    for bad in ("it went well", "Verdict: maybe"):
        with pytest.raises(ParseError):
            parse_judgement(bad)
    assert parse_progress("Progress: a done; b remains") == "a done; b remains"
    with pytest.raises(ParseError):
        parse_progress("all good")
