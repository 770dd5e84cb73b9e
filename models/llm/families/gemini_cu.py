"""``gemini``: Gemini's computer use (Google: ``gemini-2.5-computer-use-preview-10-2025`` and
later, the Computer Use tool's predefined functions; their mobile mapping as
github.com/Tongyi-MAI/MobileWorld ``agents/implementations/gemini_cua_agent.py`` reads them
with ``environment="mobile"``).

Through an OpenAI-compatible endpoint the functions are offered as tools: ``click_at`` /
``double_click`` / ``long_press_at`` (x, y), ``type_text_at`` (x, y, text, ``press_enter``
true by default: typed into the focused field, then submitted), ``drag_and_drop`` (x, y,
destination_x, destination_y; MobileWorld's start_x..end_y too), ``scroll_document`` /
``scroll_at`` (direction: "down" shows what is below), ``key_combination`` (keys: Enter,
Back, Home), ``go_back``, ``go_home``, ``open_app`` (app_name), ``wait_5_seconds``, and the
custom ``answer`` / ``done``. A call comes as ``tool_calls``, or in the text as
``{"name": ..., "args": {...}}`` (Gemini's ``FunctionCall``) or ``name(x=..., y=...)``.
``list_apps`` (it needs a reply the agent does not give) and browser-only calls are re-asked.

Coordinates: a 0–999 grid on each axis, divided by 1000 (MobileWorld's ``COORD_SCALE``),
whatever the image size. Image: the screen fitted within ``llm.max_image_side``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from models.llm.errors import ParseError
from models.llm.families.base import FamilyBase, FamilyReply, Geometry, ToolCall
from models.llm.families.dicts import decode_object, objects
from models.llm.replytext import find_calls, strip_reasoning
from protocol.operations import (
    Back,
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

_NUM = {"type": "integer", "minimum": 0, "maximum": 999}
_XY = {"x": _NUM, "y": _NUM}
_DIRECTION = {"type": "string", "enum": ["up", "down", "left", "right"]}


def _fn(name: str, description: str, props: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": props, "required": list(required)}}}


TOOLS: list[dict[str, Any]] = [
    _fn("click_at", "Tap at x, y (0-999 of the screen).", _XY, ["x", "y"]),
    _fn("long_press_at", "Touch and hold at x, y.", _XY, ["x", "y"]),
    _fn("type_text_at", "Type text into the field at x, y; press_enter submits.",
        {**_XY, "text": {"type": "string"}, "press_enter": {"type": "boolean"},
         "clear_before_typing": {"type": "boolean"}}, ["x", "y", "text"]),
    _fn("drag_and_drop", "Swipe from x, y to destination_x, destination_y.",
        {**_XY, "destination_x": _NUM, "destination_y": _NUM}, ["x", "y", "destination_x", "destination_y"]),
    _fn("scroll_document", "Scroll the screen; down shows what is below.", {"direction": _DIRECTION}, ["direction"]),
    _fn("key_combination", "Press a key: Enter, Back or Home.", {"keys": {"type": "string"}}, ["keys"]),
    _fn("go_back", "Go back.", {}),
    _fn("go_home", "Go to the home screen.", {}),
    _fn("open_app", "Open the app with this name.", {"app_name": {"type": "string"}}, ["app_name"]),
    _fn("wait_5_seconds", "Wait for the screen to settle.", {}),
    _fn("answer", "Give the final answer to a question-type task.", {"text": {"type": "string"}}, ["text"]),
    _fn("done", "The task has been completed.", {"summary": {"type": "string"}}),
]
_NAMES = tuple(t["function"]["name"] for t in TOOLS) + (
    "click", "double_click", "long_press", "type", "scroll", "scroll_at", "press_key", "hotkey", "wait",
    "list_apps", "navigate", "search", "open_web_browser", "hover_at",
)
_SCROLL: dict[str, Operation] = {"down": PageDown(), "up": PageUp(), "left": Swipe("right"), "right": Swipe("left")}
_KEYS: dict[str, Operation] = {"enter": Enter(), "return": Enter(), "back": Back(), "escape": Back(), "home": Exit()}


def _n(args: Mapping[str, Any], *keys: str) -> int:
    for k in keys:
        v = args.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return round(v)
        if isinstance(v, str) and v.strip().lstrip("-").replace(".", "", 1).isdigit():
            return round(float(v))
    raise ParseError(f"the call needs {keys[0]} (0-999)")


def call_to_operation(name: str, args: Mapping[str, Any]) -> Operation:
    n = name.strip().lower()
    if n in ("click_at", "click", "double_click"):
        return TapPoint(_n(args, "x"), _n(args, "y"))
    if n in ("long_press_at", "long_press"):
        return LongPressPoint(_n(args, "x"), _n(args, "y"))
    if n in ("type_text_at", "type"):
        text = str(args.get("text") or "")
        if not text.strip():
            raise ParseError(f"{n} needs text")
        enter = args.get("press_enter", n == "type_text_at")
        return TypeText(" ".join(text.split()), submit=enter is True or str(enter).lower() == "true")
    if n == "drag_and_drop":
        return SwipePoints(_n(args, "x", "start_x"), _n(args, "y", "start_y"),
                           _n(args, "destination_x", "end_x"), _n(args, "destination_y", "end_y"))
    if n in ("scroll_document", "scroll_at", "scroll"):
        d = str(args.get("direction") or "").strip().lower()
        if d not in _SCROLL:
            raise ParseError(f"{n} needs direction up, down, left or right, got {args.get('direction')!r}")
        return _SCROLL[d]
    if n in ("key_combination", "press_key", "hotkey"):
        keys = args.get("keys", args.get("key", ""))
        k = "+".join(keys) if isinstance(keys, list) else str(keys)
        if k.strip().lower() not in _KEYS:
            raise ParseError(f"{n}: {k!r} has no phone equivalent; use Enter, Back or Home")
        return _KEYS[k.strip().lower()]
    if n == "go_back":
        return Back()
    if n == "go_home":
        return Exit()
    if n == "open_app":
        app = str(args.get("app_name") or args.get("package_name") or "").strip()
        if not app:
            raise ParseError("open_app needs app_name")
        return OpenApp(app)
    if n in ("wait_5_seconds", "wait"):
        return Wait()
    if n in ("answer", "done"):
        return Stop()
    if n == "list_apps":
        raise ParseError("list_apps is not available here: open_app with the app's name as its icon shows it")
    raise ParseError(f"{name} is not a phone action; use click_at, type_text_at, scroll_document, open_app ...")


def _from_text(text: str) -> tuple[str, Mapping[str, Any]]:
    body = strip_reasoning(text)
    for obj in reversed(objects(body)):
        name = obj.get("name")
        raw = obj.get("args", obj.get("arguments"))
        if isinstance(name, str) and isinstance(raw, dict | str):
            args = decode_object(raw) if isinstance(raw, str) else raw
            if args is not None:
                return name, args
    calls = [c for c in find_calls(body, _NAMES) if not c.truncated]
    if calls:
        c = calls[-1]
        return c.name, {k: v.strip().strip("'\"") for k, v in c.args.items()}
    raise ParseError("no function call found: call click_at, type_text_at, open_app, ... or done", text)


class GeminiFamily(FamilyBase):
    name = "gemini"
    system_prompt = ("You operate an Android phone with the computer use functions; each step, look at "
                     "the screenshot and call exactly one function. Coordinates are a 0-999 grid over "
                     "the screenshot. Call done when the task is complete, answer to give an answer.")

    def geometry(self, screen_w: int, screen_h: int) -> Geometry:
        return Geometry(screen_w, screen_h, *self.sent_size(screen_w, screen_h), "relative", 1000)

    def request_options(self) -> dict[str, Any]:
        return {"tools": TOOLS, "tool_choice": "required"}

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        if tool_calls:
            call = tool_calls[-1]
            args = decode_object(call.arguments) if call.arguments.strip() else {}
            if args is None:
                raise ParseError(f"the {call.name} call's arguments are not JSON")
            return FamilyReply(call_to_operation(call.name, args), str(args.get("intent", "")), call.arguments)
        name, found = _from_text(text)
        shown = f"{name}({msgspec.json.encode(dict(found)).decode()})"
        return FamilyReply(call_to_operation(name, found), str(found.get("intent", "")), shown)
