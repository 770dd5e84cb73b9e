"""``claude``: Claude's computer use (Anthropic: the ``computer_20250124`` tool, its actions
as the reference implementation reads them in github.com/anthropics/anthropic-quickstarts
``computer-use-demo/computer_use_demo/tools/computer.py``).

Through an OpenAI-compatible endpoint the tool is offered as a function ``computer`` with the
same input (``action``, ``coordinate``, ``start_coordinate``, ``text``, ``scroll_direction``,
``scroll_amount``, ``duration``), beside ``open_app``, ``ask_user`` and ``done`` (the phone
has no other way to open an app, ask, or end). The call comes as an OpenAI ``tool_calls``
entry, or in the text as JSON, a Python dict (``{'action': 'left_click_drag', ...}``, as
logs print it) or Anthropic's ``{"type": "tool_use", "name": "computer", "input": {...}}``.
Actions: ``left_click`` / ``double_click`` / ``triple_click`` (a tap; ``coordinate``
required on a phone), ``left_click_drag`` (``start_coordinate`` to ``coordinate``),
``type`` (a trailing newline submits), ``key`` (``Return``, ``BackSpace`` is not offered;
``Back``/``Escape`` go back, ``Home`` goes home), ``scroll`` (a wheel: ``down`` shows what is
below), ``wait``, ``screenshot`` (a wait: the next step brings one). Mouse-only actions
(``mouse_move``, ``right_click``, ``left_mouse_down``, ...) are re-asked.

Coordinates: pixels of the screenshot as sent, which the tool's ``display_width_px`` x
``display_height_px`` state. The image sent is the screen fitted within
``llm.max_image_side``, within the API's limits (at most 1568 pixels on the long side and
1.15 megapixels, which the API would otherwise resize to behind the client's back) and, as
the reference implementation does, scaled down to XGA/WXGA/FWXGA when the screen has that
aspect ratio; the points are mapped back from that image.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from models.llm.errors import ParseError
from models.llm.families.base import FamilyBase, FamilyReply, Geometry, ToolCall, fit_within
from models.llm.families.dicts import decode_object, objects
from models.llm.replytext import strip_reasoning
from protocol.operations import (
    Ask,
    Back,
    Enter,
    Exit,
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

MAX_LONG_SIDE = 1568
MAX_PIXELS = 1_150_000
# The reference implementation's scaling targets (computer.py MAX_SCALING_TARGETS).
SCALING_TARGETS = ((1024, 768), (1280, 800), (1366, 768))

_INT_PAIR = {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}


def _fn(name: str, description: str, props: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": props, "required": list(required)}}}


def tools(width: int, height: int) -> list[dict[str, Any]]:
    return [
        _fn("computer", f"Use a touchscreen phone. The screen's resolution is {width}x{height} "
            "(display_width_px x display_height_px): coordinates are pixels of the screenshot. "
            "left_click taps coordinate; left_click_drag swipes from start_coordinate to coordinate; "
            "type types text into the focused field (end it with \\n to submit); key presses Return, "
            "Back or Home; scroll scrolls (scroll_direction, scroll_amount); wait waits.",
            {"action": {"type": "string", "enum": ["left_click", "double_click", "left_click_drag", "type",
                                                   "key", "scroll", "wait", "screenshot"]},
             "coordinate": _INT_PAIR, "start_coordinate": _INT_PAIR, "text": {"type": "string"},
             "scroll_direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
             "scroll_amount": {"type": "integer"}, "duration": {"type": "number"}},
            ["action"]),
        _fn("open_app", "Open the app whose home-screen label is name.", {"name": {"type": "string"}}, ["name"]),
        _fn("ask_user", "Ask the user a question you need answered to continue.",
            {"question": {"type": "string"}}, ["question"]),
        _fn("done", "The task is complete.", {"summary": {"type": "string"}}, []),
    ]


def claude_size(width: int, height: int) -> tuple[int, int]:
    """The screenshot size Claude should get for a ``width`` x ``height`` image: the reference
    implementation's target when the aspect ratio matches one (within 0.02) and it is
    smaller, then within the API's long-side and pixel limits."""
    for tw, th in SCALING_TARGETS:
        if abs(tw / th - width / height) < 0.02:
            if tw < width:
                width, height = tw, th
            break
    width, height = fit_within(width, height, MAX_LONG_SIDE)
    if width * height > MAX_PIXELS:
        f = math.sqrt(MAX_PIXELS / (width * height))
        width, height = max(1, math.floor(width * f)), max(1, math.floor(height * f))
    return width, height


_SCROLL: dict[str, Operation] = {"down": PageDown(), "up": PageUp(), "left": Swipe("right"), "right": Swipe("left")}
_KEYS: dict[str, Operation] = {"return": Enter(), "enter": Enter(), "kp_enter": Enter(), "back": Back(),
                               "escape": Back(), "home": Exit()}


def _xy(args: Mapping[str, Any], key: str, action: str) -> tuple[int, int]:
    v = args.get(key)
    if not isinstance(v, list | tuple) or len(v) != 2 or not all(
        isinstance(n, int | float) and not isinstance(n, bool) for n in v
    ):
        raise ParseError(f"{action} needs {key}: [x, y] (a phone has no cursor to act at), got {v!r}")
    return round(v[0]), round(v[1])


def computer_to_operation(args: Mapping[str, Any]) -> Operation:
    action = str(args.get("action", "")).strip().lower()
    if action in ("left_click", "double_click", "triple_click"):
        return TapPoint(*_xy(args, "coordinate", action))
    if action == "left_click_drag":
        return SwipePoints(*_xy(args, "start_coordinate", action), *_xy(args, "coordinate", action))
    if action == "type":
        text = str(args.get("text") or "")
        if not text.strip():
            raise ParseError("type needs text")
        return TypeText(" ".join(text.split()), submit=text.endswith("\n"))
    if action == "key":
        key = str(args.get("text") or "").strip()
        if key.lower() not in _KEYS:
            raise ParseError(f"key {key!r} has no phone equivalent: use Return, Back or Home")
        return _KEYS[key.lower()]
    if action == "scroll":
        d = str(args.get("scroll_direction") or "").strip().lower()
        if d not in _SCROLL:
            raise ParseError(f"scroll needs scroll_direction up, down, left or right, got {d!r}")
        return _SCROLL[d]
    if action in ("wait", "screenshot"):
        return Wait()
    if not action:
        raise ParseError('computer needs "action"')
    raise ParseError(f"{action} is a mouse action with no phone equivalent: tap with left_click")


def call_to_operation(name: str, args: Mapping[str, Any]) -> Operation:
    if name == "computer":
        return computer_to_operation(args)
    if name == "open_app":
        app = str(args.get("name") or args.get("app_name") or "").strip()
        if not app:
            raise ParseError("open_app needs name")
        return OpenApp(app)
    if name == "ask_user":
        q = str(args.get("question") or args.get("text") or "").strip()
        return Ask(q or "I need your help to continue.")
    if name == "done":
        return Stop()
    raise ParseError(f"unknown tool {name!r}: call computer, open_app, ask_user or done")


def _from_text(text: str) -> tuple[str, Mapping[str, Any]]:
    for obj in reversed(objects(strip_reasoning(text))):
        if isinstance(obj.get("input"), dict):  # Anthropic's tool_use block
            return str(obj.get("name") or "computer"), obj["input"]
        if isinstance(obj.get("arguments"), dict | str) and "name" in obj:
            raw = obj["arguments"]
            args = decode_object(raw) if isinstance(raw, str) else raw
            if args is not None:
                return str(obj["name"]), args
        if "action" in obj:
            return "computer", obj
    raise ParseError("no tool call found: call the computer tool (or open_app, ask_user, done)", text)


class ClaudeFamily(FamilyBase):
    name = "claude"
    system_prompt = ("You operate an Android phone through the computer tool; each step, look at the "
                     "screenshot and make exactly one tool call. Use open_app to open an app, ask_user "
                     "when you need the user, and done when the task is complete.")

    def __init__(self, max_image_side: int | None = None) -> None:
        super().__init__(max_image_side)
        self._size = (0, 0)

    def sent_size(self, screen_w: int, screen_h: int) -> tuple[int, int]:
        if self.sent_image is not None:
            return self.sent_image
        return claude_size(*fit_within(screen_w, screen_h, self.max_image_side))

    def geometry(self, screen_w: int, screen_h: int) -> Geometry:
        g = Geometry(screen_w, screen_h, *self.sent_size(screen_w, screen_h), "image")
        self._size = (g.image_w, g.image_h)
        return g

    def request_options(self) -> dict[str, Any]:
        return {"tools": tools(*self._size) if self._size[0] else tools(1024, 768), "tool_choice": "required"}

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        if tool_calls:
            call = tool_calls[-1]
            args = decode_object(call.arguments) if call.arguments.strip() else {}
            if args is None:
                raise ParseError(f"the {call.name} call's arguments are not JSON")
            # Claude says what it sees and plans in the text beside the call.
            return FamilyReply(call_to_operation(call.name, args), strip_reasoning(text).strip(), call.arguments)
        name, found = _from_text(text)
        return FamilyReply(call_to_operation(name, found), "", msgspec.json.encode(dict(found)).decode())
