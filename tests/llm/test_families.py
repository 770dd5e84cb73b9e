"""Each model family on a corpus of replies in its format, as real models write them: the
parsed operation and the point mapped to device pixels. Degenerate replies are unusable."""

from __future__ import annotations

import pytest

from models.llm.errors import ParseError
from models.llm.families import (
    Geometry,
    ToolCall,
    auto_family_name,
    get_family,
    smart_resize,
)
from protocol.operations import (
    Ask,
    Back,
    ClickIcon,
    ClickText,
    Enter,
    Exit,
    LongPressPoint,
    OpenApp,
    Operation,
    PageDown,
    PageUp,
    Stop,
    Swipe,
    SwipePoints,
    TapPoint,
    TypeText,
    Wait,
)

W, H = 1080, 2400


def parse(family: str, text: str, model: str = "", tool_calls: tuple[ToolCall, ...] = ()) -> Operation:
    fam = get_family(family, model)
    return fam.parse(text, fam.geometry(W, H), tool_calls).operation


# -- geometry


def test_smart_resize_rounds_to_the_factor_and_bounds_the_pixels() -> None:
    assert smart_resize(2400, 1080) == (1484, 672)  # over 1280*28*28: scaled down, multiples of 28
    h, w = smart_resize(2400, 1080, factor=28, min_pixels=100 * 28 * 28, max_pixels=16384 * 28 * 28)
    assert (h, w) == (2408, 1092) and h % 28 == 0 and w % 28 == 0
    h, w = smart_resize(100, 50, factor=32, min_pixels=256 * 32 * 32, max_pixels=10**8)
    assert h % 32 == 0 and w % 32 == 0 and h * w >= 256 * 32 * 32


def test_points_outside_the_image_are_unusable() -> None:
    g = Geometry(W, H, 1092, 2408, "image")
    assert g.to_device(546, 1204) == (540, 1200)
    with pytest.raises(ParseError, match="outside"):
        g.to_device(5000, 10)
    with pytest.raises(ParseError, match="0..1000"):
        Geometry(W, H, W, H, "relative").to_device(1500, 10)


# -- react

REACT = [
    ("Observation: home\nThought: open it\nAction: Open app (Clock)", OpenApp("Clock")),
    # a think block that mentions an Action line
    ("<think>Maybe Action: Back? No.</think>\nObservation: x\nThought: y\nAction: Click text (Save)",
     ClickText("Save")),
    # markdown headings, Mobile-Agent-v2 style
    ("### Observation ###\nA list\n### Thought ###\nSave it\n### Action ###\nClick text (Save)",
     ClickText("Save")),
    ("**Observation:** a\n**Thought:** b\n**Action:** Back", Back()),
    # the last Action wins over one mentioned in prose
    ("Observation: x\nThought: the Action: Back would be wrong\nAction: Stop", Stop()),
    ("Thought: I said Action: Back before.\nAction: Home", Exit()),
    # trailing Summary / Progress kept as fields
    ("Observation: x\nThought: y\nAction: Page down\nSummary: scrolled the list", PageDown()),
    # JSON action objects
    ('{"thought": "t", "action": "Click text (Send)"}', ClickText("Send")),
    ('Observation: x\nThought: y\nAction: {"action": "type", "text": "hi"}', TypeText("hi")),
    ('```json\n{"action": "open_app", "args": {"name": "Maps"}}\n```', OpenApp("Maps")),
    # the op/args vocabulary of llm parse and the json family
    ('Thought: y\nAction: {"op": "open_app", "args": {"name": "Maps"}}', OpenApp("Maps")),
    ('<think>Action: Back</think>\n{"op": "click_text", "args": {"text": "OK"}}', ClickText("OK")),
    # full-width punctuation and CJK
    ("Observation：主屏幕\nThought：打开\nAction：Open app（微信）", OpenApp("微信")),
    # synonyms
    ("Action: Click the text (Wi-Fi)", ClickText("Wi-Fi")),
    ("Action: Tap (Save)", ClickText("Save")),
    ("Action: Scroll down", PageDown()),
    ("Action: Scroll up", PageUp()),
    ("Action: Swipe up", Swipe("up")),
    ("Action: Go back", Back()),
    ("Action: Home", Exit()),
    ("Action: Press enter", Enter()),
    ("Action: Click on the icon (gear, top right)", ClickIcon("gear", "top right")),
    # quotes around typed text removed
    ('Action: Type ("hello")', TypeText("hello")),
    ("Action: Type ('hello world')", TypeText("hello world")),
    ("Action: Type (pizza) + Enter", TypeText("pizza", submit=True)),
    # coordinate operations (pixels of the screenshot; here as captured)
    ("Action: Tap (540, 1200)", TapPoint(540, 1200)),
    ("Action: Long press (100, 200)", LongPressPoint(100, 200)),
    ("Action: Swipe (540, 2000, 540, 400)", SwipePoints(540, 2000, 540, 400)),
    ("Action: Wait", Wait()),
]


@pytest.mark.parametrize(("reply", "op"), REACT)
def test_react_corpus(reply: str, op: Operation) -> None:
    assert parse("react", reply) == op


def test_react_keeps_summary_and_maps_points_from_a_downscaled_image() -> None:
    fam = get_family("react", max_image_side=1200)
    geom = fam.geometry(W, H)
    assert (geom.image_w, geom.image_h) == (540, 1200)
    r = fam.parse("Observation: x\nThought: y\nAction: Tap (270, 600)\nSummary: tapped", geom)
    assert r.operation == TapPoint(540, 1200) and r.summary == "tapped" and r.thought == "y"


# -- uitars

UITARS_15 = [  # absolute pixels of the smart-resized image: 1092x2408 for 1080x2400
    ("Thought: tap Save\nAction: click(start_box='<|box_start|>(546,1204)<|box_end|>')", TapPoint(540, 1200)),
    ("Action: click(start_box='(546,1204)')", TapPoint(540, 1200)),
    ("Thought: the button at (10,10) is a decoy\nAction: click(start_box='(546,1204)')", TapPoint(540, 1200)),
    ("Action: click(start_box='<bbox>500 1100 592 1308</bbox>')", TapPoint(540, 1200)),
    ("Action: click(point='<point>546 1204</point>')", TapPoint(540, 1200)),
    ("Action: long_press(start_box='(546,1204)', time='')", LongPressPoint(540, 1200)),
    ("Action: type(content='hello')", TypeText("hello")),
    ("Action: type(content='pizza\\n')", TypeText("pizza", submit=True)),
    ("Action: scroll(start_box='(546,1204)', direction='down')", PageDown()),
    ("Action: scroll(direction='up')", PageUp()),
    ("Action: scroll(start_box='(546,2000)', end_box='(546,400)')", SwipePoints(540, 1993, 540, 399)),
    ("Action: drag(start_box='(546,2000)', end_box='(546,400)')", SwipePoints(540, 1993, 540, 399)),
    ("Action: open_app(app_name='微信')", OpenApp("微信")),
    ("Action: press_home()", Exit()),
    ("Action: press_back()", Back()),
    ("Action: wait()", Wait()),
    ('Action: finished(content="The "Alarm" is set")', Stop()),
    ("<think>click(start_box='(1,1)')</think>\nAction: press_back()", Back()),
    ("Thought：好的\nAction：click(start_box＝'(546，1204)')", TapPoint(540, 1200)),
]


@pytest.mark.parametrize(("reply", "op"), UITARS_15)
def test_uitars_15_corpus(reply: str, op: Operation) -> None:
    assert parse("uitars", reply, "UI-TARS-1.5-7B") == op


def test_uitars_10_is_relative_1000() -> None:
    assert parse("uitars", "Action: click(start_box='(500,500)')", "UI-TARS-7B-SFT") == TapPoint(540, 1200)
    assert parse("uitars", "Action: click(start_box='[480,490,520,510]')", "ui-tars-72b-dpo") == TapPoint(540, 1200)


# -- qwen

QWEN25 = [  # Qwen2.5-VL: absolute pixels of the smart-resized image (1092x2408 for 1080x2400)
    ('<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [546, 1204]}}\n</tool_call>',
     TapPoint(540, 1200)),
    ('<think>maybe (10, 10)</think>\n<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [1, 1]}}</tool_call>'
     '\n<tool_call>{"name": "mobile_use", "arguments": {"action": "long_press", "coordinate": [546, 1204], "time": 2}}</tool_call>',
     LongPressPoint(540, 1200)),
    ('<tool_call>{"name": "mobile_use", "arguments": {"action": "swipe", "coordinate": [546, 2000], "coordinate2": [546, 400]}}',
     SwipePoints(540, 1993, 540, 399)),
    ('<tool_call>{"name": "mobile_use", "arguments": {"action": "type", "text": "hello"}}</tool_call>', TypeText("hello")),
    ('<tool_call>{"name": "mobile_use", "arguments": {"action": "system_button", "button": "Back"}}</tool_call>', Back()),
    ('<tool_call>{"name": "mobile_use", "arguments": {"action": "system_button", "button": "Home"}}</tool_call>', Exit()),
    ('<tool_call>{"name": "mobile_use", "arguments": {"action": "key", "text": "enter"}}</tool_call>', Enter()),
    ('<tool_call>{"name": "mobile_use", "arguments": {"action": "open", "text": "设置"}}</tool_call>', OpenApp("设置")),
    ('<tool_call>{"name": "mobile_use", "arguments": {"action": "wait", "time": 2}}</tool_call>', Wait()),
    ('<tool_call>{"name": "mobile_use", "arguments": {"action": "terminate", "status": "success"}}</tool_call>', Stop()),
    ('<tool_call>{"name": "mobile_use", "arguments": {"action": "answer", "text": "42"}}</tool_call>', Stop()),
    ('Action: <tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [546, 1204]}}</tool_call>',
     TapPoint(540, 1200)),
]


@pytest.mark.parametrize(("reply", "op"), QWEN25)
def test_qwen25_corpus(reply: str, op: Operation) -> None:
    assert parse("qwen", reply, "Qwen2.5-VL-7B-Instruct") == op


def test_qwen_tool_calls_and_qwen3_relative() -> None:
    call = ToolCall("mobile_use", '{"action": "click", "coordinate": [500, 500]}')
    assert parse("qwen", "", "Qwen3-VL-8B-Instruct", (call,)) == TapPoint(540, 1200)
    # GUI-Owl 1.0: absolute pixels of the smart-resize, as Qwen2.5-VL (see qwen.py's docstring)
    assert parse("qwen", "", "GUI-Owl-7B", (call,)) == parse("qwen", "", "qwen2.5-vl-7b", (call,))
    assert parse("qwen", "", "qwen2.5-vl-7b", (call,)) == TapPoint(495, 498)


# -- autoglm

AUTOGLM = [  # 0-999 relative
    ('<think>tap the button at [1, 1]? no</think><answer>do(action="Tap", element=[500,500])</answer>', TapPoint(540, 1200)),
    ('do(action="Tap", element=[500,500])</answer>', TapPoint(540, 1200)),  # closed, never opened
    ('<answer>do(action="Long Press", element=[500, 500])', LongPressPoint(540, 1200)),  # never closed
    ('do(action="Double Tap", element=[500,500])', TapPoint(540, 1200)),
    ('do(action="Swipe", start=[500,800], end=[500,200])', SwipePoints(540, 1920, 540, 480)),
    ('do(action="Type", text="hello")', TypeText("hello")),
    ('do(action="Launch", app="微信")', OpenApp("微信")),
    ('do(action="Back")', Back()),
    ('do(action="Home")', Exit()),
    ('do(action="Wait", duration="2 seconds")', Wait()),
    ('do(action="Take_over", message="Please log in")', Ask("Please log in")),
    ('finish(message="Opened the "Clock" app, alarm set")', Stop()),
    ('<|begin_of_box|>do(action="Tap", element=[500,500])<|end_of_box|>', TapPoint(540, 1200)),
    ('do（action＝"Tap"，element＝[500，500]）', TapPoint(540, 1200)),
]


@pytest.mark.parametrize(("reply", "op"), AUTOGLM)
def test_autoglm_corpus(reply: str, op: Operation) -> None:
    assert parse("autoglm", reply) == op


# -- tools / json


def test_tools_calls_and_schema() -> None:
    fam = get_family("tools")
    opts = fam.request_options()
    assert opts["tool_choice"] == "required"
    names = {t["function"]["name"] for t in opts["tools"]}
    assert {"click_text", "tap_point", "swipe", "stop"} <= names
    assert parse("tools", "", tool_calls=(ToolCall("click_text", '{"text": "Save"}'),)) == ClickText("Save")
    assert parse("tools", "", tool_calls=(ToolCall("tap_point", '{"x": 10, "y": 20}'),)) == TapPoint(10, 20)
    assert parse("tools", "", tool_calls=(ToolCall("back", ""),)) == Back()
    # Ollama / vLLM without a tool parser: the call as JSON in the text
    assert parse("tools", '{"name": "open_app", "arguments": {"name": "Maps"}}') == OpenApp("Maps")
    with pytest.raises(ParseError, match="missing argument"):
        parse("tools", "", tool_calls=(ToolCall("click_text", "{}"),))


def test_json_replies() -> None:
    fam = get_family("json")
    assert fam.request_options()["response_format"]["type"] == "json_schema"
    assert parse("json", '{"thought": "t", "op": "swipe", "args": {"direction": "left"}}') == Swipe("left")
    assert parse("json", '<think>..</think>{"thought": "t", "op": "long_press", "args": {"x": 5, "y": 6}}') == LongPressPoint(5, 6)
    with pytest.raises(ParseError):
        parse("json", '{"thought": "t", "op": "fly", "args": {}}')


# -- degenerate and malformed replies: unusable in every family, never finish/wait/tap

DEGENERATE = [
    ("react", "Stop Stop Stop Stop Stop Stop Stop Stop Stop Stop"),
    ("react", "Observation: x\nThought: y\nAction: Click text (Sa"),
    ("uitars", "Action: click(start_box='=')"),
    ("uitars", "Action: click()"),
    ("uitars", "Action: click(start_box='(546,"),  # truncated
    ("uitars", "wait wait wait wait wait wait wait wait wait"),
    ("uitars", "Thought: I will tap (546,1204)."),  # a point in prose is no action
    ("qwen", '<tool_call>{"name": "mobile_use", "arguments": {"action": "click"'),
    ("qwen", '<tool_call>{"name": "mobile_use", "arguments": {"action": "click"}}</tool_call>'),
    ("qwen", '<tool_call>{"name": "mobile_use", "arguments": {}}</tool_call>'),
    ("autoglm", 'do(action="Tap")'),
    ("autoglm", "finish finish finish finish finish finish finish finish"),
    ("autoglm", 'do(action="Tap", element=[500,'),
    ("tools", ""),
    ("json", '{"thought": "t", "op": "tap_point"'),
    ("json", ""),
]


@pytest.mark.parametrize(("family", "reply"), DEGENERATE)
def test_degenerate_replies_are_unusable(family: str, reply: str) -> None:
    with pytest.raises(ParseError):
        parse(family, reply, "UI-TARS-1.5-7B" if family == "uitars" else "")


@pytest.mark.parametrize(
    ("model", "family"),
    [("UI-TARS-1.5-7B", "uitars"), ("Qwen2.5-VL-72B-Instruct", "qwen"), ("qwen3-vl-235b", "qwen"),
     ("GUI-Owl-32B", "qwen"), ("autoglm-phone-9b", "autoglm"), ("gpt-4o", "react"),
     ("claude-sonnet-4-5", "claude")],
)
def test_auto_picks_from_the_model_name(model: str, family: str) -> None:
    assert auto_family_name(model) == family
    assert get_family("auto", model).name == family


# Anthropic's computer use tool versions (platform.claude.com/docs/en/agents-and-tools/
# tool-use/computer-use-tool): computer_20250124 for Claude Sonnet 3.7 and the Claude 4
# models (Sonnet 4, Opus 4, Opus 4.1, Sonnet 4.5, Haiku 4.5), computer_20251124 for Opus 4.5
# and later: the same left_click / left_click_drag / type / key / scroll with a coordinate,
# which the claude family speaks. Claude 3.5 Sonnet (new)'s computer_20241022 clicks where a
# mouse_move put the cursor (left_click without a coordinate, re-asked here; the model is
# retired), and the chat-only Claude 3 / 3.5 Haiku / Opus have no computer use: react.
@pytest.mark.parametrize(("model", "family"), [
    ("claude-3-7-sonnet-20250219", "claude"), ("anthropic/claude-3.7-sonnet", "claude"),
    ("anthropic.claude-3-7-sonnet-20250219-v1:0", "claude"), ("claude-sonnet-4-20250514", "claude"),
    ("claude-sonnet-4", "claude"), ("claude-opus-4-20250514", "claude"), ("claude-opus-4-1", "claude"),
    ("claude-4-sonnet", "claude"), ("claude-haiku-4-5", "claude"), ("claude-opus-4-5", "claude"),
    ("claude-sonnet-5", "claude"),
    ("claude-3-5-sonnet-20241022", "react"), ("claude-3-5-sonnet-20240620", "react"),
    ("claude-3-5-haiku-20241022", "react"), ("claude-3-opus-20240229", "react"),
    ("claude-3-haiku-20240307", "react"), ("claude-2.1", "react"),
])
def test_auto_picks_claude_where_its_computer_tool_takes_coordinates(model: str, family: str) -> None:
    assert auto_family_name(model) == family


def test_unknown_family_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="react, tools, json"):
        get_family("gpt")
