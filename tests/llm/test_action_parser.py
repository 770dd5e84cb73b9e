"""The strict operation grammar and the Observation/Thought/Action reply parser."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.llm.errors import ParseError
from models.llm.families.react import parse_operation, parse_planner_reply
from models.llm.replytext import SPECIAL_TOKENS, normalize_punctuation
from protocol.operations import (
    DIRECTIONS,
    POSITIONS,
    Ask,
    Back,
    ClickIcon,
    ClickText,
    Exit,
    LongPress,
    OpenApp,
    Operation,
    PageDown,
    PageUp,
    Stop,
    Swipe,
    TypeText,
    Wait,
    format_operation,
    operation_problem,
)


@pytest.mark.parametrize(
    ("text", "op"),
    [
        ("Open app (Settings)", OpenApp("Settings")),
        ("Click text (Stop)", ClickText("Stop")),  # the seed's substring trap
        ("Click text (Back)", ClickText("Back")),
        ("Type (Stop)", TypeText("Stop")),
        ("Click icon (search, top)", ClickIcon("search", "top")),
        ("Click icon (red, round button, bottom right)", ClickIcon("red, round button", "bottom right")),
        ("Click icon (gear)", ClickIcon("gear", "center")),
        ("click icon (gear, Top-Left)", ClickIcon("gear", "top left")),
        ("Type (Hello, world (again))", TypeText("Hello, world (again))"[:-1])),
        ("Type (:-))", TypeText(":-)")),
        ("Type ((()", TypeText("((")),
        ("Long press (Photo 1)", LongPress("Photo 1")),
        ("Swipe (left)", Swipe("left")),
        ("Swipe ( UP )", Swipe("up")),
        ("Ask (Which account, work or home?)", Ask("Which account, work or home?")),
        ("Page up", PageUp()),
        ("page   DOWN", PageDown()),
        ("Back", Back()),
        ("Exit", Exit()),
        ("Wait", Wait()),
        ("Stop", Stop()),
        ("CLICK TEXT(Wi-Fi)", ClickText("Wi-Fi")),
        ("  Click text ( padded )  ", ClickText("padded")),
        # Cosmetics models add: wrapping backticks or bold, one trailing period.
        ("`Click text (OK)`", ClickText("OK")),
        ("**Back**", Back()),
        ("Stop.", Stop()),
        ("Click text (Mr. Smith).", ClickText("Mr. Smith")),
        ("Type ('; rm -rf / #)", TypeText("'; rm -rf / #")),
        ("Type ($(reboot) `id` && echo)", TypeText("$(reboot) `id` && echo")),
        ("Type (你好，世界 👋)", TypeText("你好，世界 👋")),
    ],
)
def test_valid_actions(text: str, op: Operation) -> None:
    assert parse_operation(text) == op


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Stop now", "takes no argument"),
        ("Back to the list", "takes no argument"),
        ("Stop (done)", "takes no argument"),
        ("Page down twice", "takes no argument"),
        ("Stopped", "unknown operation"),
        ("Typed (x)", "unknown operation"),
        ("I will Click text (Save)", "unknown operation"),  # no substring matching
        ("Click text (Save) then Stop", "after the closing"),
        ("Swipe (up) twice", "after the closing"),
        ("Click text (Save", "missing"),
        ("Click text Save", "expected '\\('"),
        ("Click text", "needs its argument"),
        ("Type ()", "empty argument"),
        ("Type (   )", "empty argument"),
        ("Click icon (search, middle-ish)", "unknown position"),
        ("Click icon (Hello, world)", "unknown position"),
        ("Click icon (, top)", "description is empty"),
        ("Swipe (sideways)", "unknown direction"),
        ("", "empty"),
        ("``", "unknown operation"),
        ("Type (a\nb)", "one line"),
    ],
)
def test_invalid_actions_say_why(text: str, why: str) -> None:
    with pytest.raises(ParseError, match=why) as err:
        parse_operation(text)
    # The message is meant for the model: it names the allowed forms or the fix.
    assert len(str(err.value)) > 20


def test_unknown_operation_lists_the_syntax() -> None:
    with pytest.raises(ParseError) as err:
        parse_operation("Scroll (down)")
    msg = str(err.value)
    for syntax in ("Open app (name)", "Click icon (description, position)", "Swipe (direction)", "Stop"):
        assert syntax in msg


REPLY = """Observation: The Settings app is open; the list shows Wi-Fi and Bluetooth.
It also shows a Stop button.
Thought: Wi-Fi is what the user asked for. I must not Stop yet.
Action: Click text (Stop)"""


def test_reply_sections_and_the_substring_trap() -> None:
    r = parse_planner_reply(REPLY)
    assert r.action == ClickText("Stop")
    assert r.observation.endswith("It also shows a Stop button.")
    assert r.thought.startswith("Wi-Fi is what")
    assert r.action_text == "Click text (Stop)"


@pytest.mark.parametrize(
    "reply",
    [
        "**Observation:** home\n**Thought:** open it\n**Action:** Open app (Clock)",
        "### Observation: home\n### Thought: open it\n### Action: Open app (Clock)",
        "Sure, here is my answer.\nObservation: home\nThought: open it\nAction:\nOpen app (Clock)\n\n",
        "```\nObservation: home\nThoughts: open it\nAction: `Open app (Clock)`\n```",
        "observation: home\nthought: open it\naction: open app (Clock)",
    ],
)
def test_reply_format_variants(reply: str) -> None:
    assert parse_planner_reply(reply).action == OpenApp("Clock")


@pytest.mark.parametrize("op", [OpenApp("<THINK>"), TypeText("<tool_call>x</tool_call>"),
                                ClickText("</think>"), LongPress("<answer>")])
def test_a_tag_inside_the_parentheses_is_the_operations_text(op: Operation) -> None:
    # Found by hypothesis: wrapper and think tags were stripped inside the argument too.
    reply = f"Thought: <think>why</think> tap it\nAction: {format_operation(op)}"
    assert parse_planner_reply(reply).action == op


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("Observation: x\nThought: y", "no 'Action:'"),
        ("Observation: x\nAction: Back\nThought: y", "after the action"),
        ("Observation: x\nThought: y\nAction: Back\nThen I will stop.", "after the action"),
        ("Observation: x\nThought: y\nAction:", "empty"),
        ("Observation: x Thought: y Action: Stop", "no 'Action:'"),  # labels start lines
        ("Observation: x\nThought: y\nAction: Stop the app", "takes no argument"),
        ("", "no 'Action:'"),
    ],
)
def test_bad_replies(reply: str, why: str) -> None:
    with pytest.raises(ParseError, match=why):
        parse_planner_reply(reply)


# -- round trip: parse(format(op)) == op for every op with a canonical form

FULL_WIDTH = "".join(c for c in map(chr, range(0x2000, 0x10000)) if normalize_punctuation(c) != c)
# Without the full-width punctuation the parser normalises: an argument made of it alone
# ("Open app (）)") is ambiguous; full-width punctuation inside text is tested below.
texts = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters=FULL_WIDTH),
    min_size=1, max_size=40,
).map(str.strip).filter(lambda t: t != "" and operation_problem(TypeText(t)) is None
                        # a quoted argument is read unquoted (models quote what they type)
                        and not (len(t) >= 2 and t[0] in "\"'`" and t[-1] == t[0])
                        # a model's special tokens are removed wherever they appear
                        and not any(tok in t for tok in SPECIAL_TOKENS))

operations: st.SearchStrategy[Operation] = st.one_of(
    texts.map(OpenApp),
    texts.map(ClickText),
    st.builds(ClickIcon, texts, st.sampled_from(POSITIONS)),
    texts.map(LongPress),
    texts.map(TypeText),
    st.sampled_from(DIRECTIONS).map(Swipe),
    texts.map(Ask),
    st.sampled_from([PageUp(), PageDown(), Back(), Exit(), Wait(), Stop()]),
)


@settings(max_examples=400, deadline=None)
@given(operations)
def test_round_trip(op: Operation) -> None:
    assert parse_operation(format_operation(op)) == op


@settings(max_examples=200, deadline=None)
@given(operations, texts, texts)
def test_round_trip_through_a_reply(op: Operation, obs: str, thought: str) -> None:
    # Free text has no line breaks here, so it cannot forge a label at a line start.
    reply = f"Observation: {obs}\nThought: {thought}\nAction: {format_operation(op)}"
    assert parse_planner_reply(reply).action == op


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_arbitrary_text_parses_or_raises_parse_error(text: str) -> None:
    try:
        op = parse_operation(text)
    except ParseError:
        return
    assert operation_problem(op) is None


def test_operation_problem() -> None:
    assert operation_problem(TypeText(" x")) is not None
    assert operation_problem(TypeText("a\u2028b")) is not None
    assert operation_problem(ClickIcon("x", "nowhere")) is not None  # type: ignore[arg-type]
    assert operation_problem(TypeText("a (b, c)")) is None


@pytest.mark.parametrize(
    "hostile",
    [
        "Action" + " " * 20000 + "x",
        "Click text (" + "(" * 20000,
        "Observation:" + " \t" * 10000 + "\nThought:" + "*" * 10000 + "\nAction: Box" + " " * 10000,
        "Box" + " " * 20000 + "#" + " " * 20000 + "x",
        "\u2028".join(["Action: Stop"] * 500),
    ],
)
def test_hostile_inputs_fail_cleanly(hostile: str) -> None:
    """Each parser gives a valid operation or a ParseError whose message (re-asked to the
    model) is short; any other exception fails the test."""
    for parse in (parse_operation, parse_planner_reply):
        try:
            got = parse(hostile)
        except ParseError as exc:
            assert exc.message and len(exc.message) <= 1000, (parse.__name__, len(exc.message))
            assert exc.text and exc.text in hostile  # what failed, as given, for the log
            continue
        op = got if not hasattr(got, "action") else got.action
        assert isinstance(op, Operation) and operation_problem(op) is None, parse.__name__


@pytest.mark.parametrize(
    ("text", "position"),
    [("Click icon (x, upper right)", "top right"), ("Click icon (x, Middle)", "center"),
     ("Click icon (x, lower_left)", "bottom left"), ("Click icon (x,centre)", "center")],
)
def test_position_synonyms(text: str, position: str) -> None:
    assert parse_operation(text) == ClickIcon("x", position)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reply", "op"),
    [
        ("Action: Type (你好，世界。)", TypeText("你好，世界。")),
        ("Action：Type（＂你好，世界＂）", TypeText("你好，世界")),
        ("Action: Open app (\u201c微信\u201d)", OpenApp("微信")),
        ("Action: Click text (Terms；Privacy)", ClickText("Terms；Privacy")),
    ],
)
def test_full_width_punctuation_inside_text_is_kept(reply: str, op: Operation) -> None:
    # The grammar's punctuation may be full-width; the text the user typed or named keeps it.
    assert parse_planner_reply(reply).action == op
