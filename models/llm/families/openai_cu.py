"""``openai``: OpenAI's computer use, both forms of the Responses API's ``computer_call``
output item (OpenAI's computer use guide, platform.openai.com/docs/guides/tools-computer-use;
the item's schema as the SDKs type it, e.g. github.com/openai/openai-python
``types/responses/response_computer_tool_call.py`` and openai-agents-js
``ComputerUseCallItem``):

- ``computer-use-preview`` (variant ``preview``, tool ``computer_use_preview``): each
  ``computer_call`` carries one ``action``;
- the GA ``computer`` tool of the GPT-5 models (``gpt-5.4`` and later; variant ``ga``): a
  ``computer_call`` carries a batch, ``actions``. One action a step here: the first runs,
  the others are recorded as dropped and the next prompt says so (``mouse.first_of``).

Actions: ``click`` (``button`` left / right / wheel / back / forward), ``double_click``,
``drag`` (``path`` of ``{x, y}``), ``scroll`` (``x, y, scroll_x, scroll_y``: positive
``scroll_y`` shows what is below), ``type`` (``text``), ``keypress`` (``keys``), ``move``,
``wait``, ``screenshot``; each read through the one mouse table (``families/mouse.py``):
a right click is a long press, a drag a swipe, ``keypress`` CTRL+O is refused with the
reason. The model has no open-app, ask or done action: an OpenAI-compatible endpoint offers
the tool as a function ``computer`` (``action`` or ``actions`` as the item has them) beside
``open_app``, ``ask_user`` and ``done``; a call comes as ``tool_calls``, or in the text as
the output item (``{"type": "computer_call", ...}``), a Responses ``output`` list, a bare
action object, or the Python SDK's printout (``ResponseComputerToolCall(...,
action=ActionClick(button='left', type='click', x=156, y=50), ...)``).

Coordinates: pixels of the screenshot as sent (the tool's ``display_width`` x
``display_height``; the GA tool takes the screenshot's own size), mapped back. Image: the
screen fitted within ``llm.max_image_side``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from models.llm.errors import ParseError
from models.llm.families.base import FamilyBase, FamilyReply, Geometry, ToolCall
from models.llm.families.dicts import decode_object, objects
from models.llm.families.mouse import (
    drag_operation,
    first_of,
    key_operation,
    mouse_operation,
    scroll_operation,
)
from models.llm.opvocab import number
from models.llm.replytext import parse_kwargs, strip_reasoning
from protocol.operations import Ask, OpenApp, Operation, Stop, TypeText, Wait

_POINT = {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
          "required": ["x", "y"]}
_ACTION = {"type": "object", "properties": {
    "type": {"type": "string", "enum": ["click", "double_click", "drag", "keypress", "move", "scroll",
                                        "type", "wait", "screenshot"]},
    "button": {"type": "string", "enum": ["left", "right", "back"]},
    "x": {"type": "integer"}, "y": {"type": "integer"},
    "scroll_x": {"type": "integer"}, "scroll_y": {"type": "integer"},
    "path": {"type": "array", "items": _POINT}, "keys": {"type": "array", "items": {"type": "string"}},
    "text": {"type": "string"}}, "required": ["type"]}


def _fn(name: str, description: str, props: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": props, "required": list(required)}}}


def tools(width: int, height: int, variant: str) -> list[dict[str, Any]]:
    batch = variant == "ga"
    screen = (f"Operate an Android phone's touch screen: display_width {width}, display_height "
              f"{height}; x, y are pixels of the screenshot. click taps (button right: touch and "
              "hold); drag swipes along path; scroll with scroll_y > 0 shows what is below; type "
              "types into the focused field; keypress takes Enter, Escape (Back) or Home only.")
    computer = (_fn("computer", screen + " Give one action in actions: only the first is run.",
                    {"actions": {"type": "array", "items": _ACTION, "minItems": 1}}, ["actions"])
                if batch else _fn("computer", screen, {"action": _ACTION}, ["action"]))
    return [
        computer,
        _fn("open_app", "Open the app whose home-screen label is name.", {"name": {"type": "string"}}, ["name"]),
        _fn("ask_user", "Ask the user a question you need answered to continue.",
            {"question": {"type": "string"}}, ["question"]),
        _fn("done", "The task is complete.", {"summary": {"type": "string"}}, []),
    ]


def _xy(action: Mapping[str, Any], kind: str) -> tuple[int, int]:
    if "x" not in action or "y" not in action:
        raise ParseError(f"{kind} needs x and y (pixels of the screenshot): a phone has no cursor to act at")
    return number(action["x"], "x"), number(action["y"], "y")


def action_to_operation(action: Mapping[str, Any]) -> Operation:
    """One ``computer_call`` action -> an Operation (points in pixels of the screenshot)."""
    kind = str(action.get("type") or "").strip().lower()
    if kind == "click":
        return mouse_operation(str(action.get("button") or "left"), *_xy(action, kind))
    if kind in ("double_click", "triple_click"):
        return mouse_operation(kind, *_xy(action, kind))
    if kind == "drag":
        path = action.get("path")
        pts: list[tuple[int, int]] = []
        for p in path if isinstance(path, list) else ():
            if isinstance(p, Mapping):
                pts.append((number(p.get("x"), "a path point's x"), number(p.get("y"), "a path point's y")))
            elif isinstance(p, list | tuple) and len(p) == 2:
                pts.append((number(p[0], "a path point's x"), number(p[1], "a path point's y")))
        return drag_operation(pts)
    if kind == "scroll":
        return scroll_operation(float(number(action.get("scroll_x", 0), "scroll_x")),
                                float(number(action.get("scroll_y", 0), "scroll_y")))
    if kind == "type":
        text = str(action.get("text") or "")
        if not text.strip():
            raise ParseError("type needs text")
        return TypeText(" ".join(text.split()), submit=text.endswith("\n"))
    if kind == "keypress":
        keys = action.get("keys")
        return key_operation([str(k) for k in keys] if isinstance(keys, list) else [str(keys or "")])
    if kind in ("wait", "screenshot"):
        return Wait()
    if kind in ("move", "hover"):
        return mouse_operation("move", 0, 0)  # refused, with the reason
    if not kind:
        raise ParseError('the action needs its "type" (click, type, scroll, drag, keypress, wait)')
    raise ParseError(f"unknown computer action {kind!r}: click, double_click, drag, scroll, type, keypress, wait")


def _shown(action: Mapping[str, Any]) -> str:
    return msgspec.json.encode(dict(action)).decode()


def _actions(args: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The actions of one ``computer_call`` (or of the ``computer`` function's arguments):
    its ``actions`` batch, or its one ``action``."""
    batch = args.get("actions")
    if isinstance(batch, list):
        found = [a for a in batch if isinstance(a, Mapping)]
        if len(found) != len(batch) or not found:
            raise ParseError("actions must be a non-empty list of action objects")
        return found
    one = args.get("action")
    if isinstance(one, Mapping):
        return [one]
    raise ParseError('a computer_call needs its "action" (or the "actions" batch)')


def call_operations(name: str, args: Mapping[str, Any]) -> list[tuple[Operation, str]]:
    """A function call (``computer``, ``open_app``, ``ask_user``, ``done``) -> its operations,
    each with its text as the model wrote it."""
    if name in ("computer", "computer_call", "computer_use_preview"):
        return [(action_to_operation(a), _shown(a)) for a in _actions(args)]
    if name == "open_app":
        app = str(args.get("name") or args.get("app_name") or "").strip()
        if not app:
            raise ParseError("open_app needs name")
        return [(OpenApp(app), f"open_app({app})")]
    if name == "ask_user":
        q = str(args.get("question") or args.get("text") or "").strip()
        return [(Ask(q or "I need your help to continue."), "ask_user")]
    if name == "done":
        return [(Stop(), "done")]
    raise ParseError(f"unknown tool {name!r}: call computer, open_app, ask_user or done")


# The Python SDK's printout: ActionClick(button='left', type='click', x=156, y=50), and the
# GA's list of them; Keypress(keys=['CTRL', 'O'], type='keypress'); ActionDragPath(x=1, y=2).
_SDK_ACTION = re.compile(r"\b(?:Action\w*|Keypress|Type|Wait|Screenshot|Move|Scroll|Drag|Click|DoubleClick)"
                         r"\(((?:[^()]|\((?:[^()]|\([^()]*\))*\))*)\)")
_SDK_PATH = re.compile(r"\w*Path\w*\(([^()]*)\)")


def _sdk_value(raw: str) -> Any:
    raw = raw.strip()
    if raw.startswith("["):
        inner = _SDK_PATH.findall(raw)
        if inner:
            return [{k: v for k, v in parse_kwargs(p)[0].items()} for p in inner]
        return [s.strip().strip("'\"") for s in raw.strip("[]").split(",") if s.strip()]
    return raw.strip("'\"")


def _sdk_actions(text: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for m in _SDK_ACTION.finditer(text):
        body = m.group(1)
        # split key=value at the top level (a drag's path holds nested calls)
        parts: list[str] = []
        depth, cur = 0, ""
        for c in body:
            if c in "([":
                depth += 1
            elif c in ")]":
                depth -= 1
            if c == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += c
        parts.append(cur)
        args: dict[str, Any] = {}
        for p in parts:
            k, eq, v = p.partition("=")
            if eq:
                args[k.strip()] = _sdk_value(v)
        if "type" in args:
            found.append(args)
    return found


def _from_text(text: str) -> tuple[list[tuple[Operation, str]], str]:
    """The operations a text reply holds, and its message text (the model's words)."""
    body = strip_reasoning(text)
    calls: list[Mapping[str, Any]] = []
    said = ""
    for obj in objects(body):
        out = obj.get("output")
        items: list[Any] = out if isinstance(out, list) else [obj]
        for item in items:
            if not isinstance(item, Mapping):
                continue
            kind = item.get("type")
            if kind == "computer_call":
                calls.append(item)
            elif kind == "message":
                content = item.get("content")
                for part in content if isinstance(content, list) else ():
                    if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                        said = part["text"]
            elif kind == "function_call" and isinstance(item.get("name"), str):
                raw = item.get("arguments")
                args = decode_object(raw) if isinstance(raw, str) else raw
                if isinstance(args, Mapping):
                    calls.append({"type": "function_call", "name": item["name"], "arguments": args})
            elif isinstance(kind, str) and kind not in ("reasoning", "computer_call_output"):
                calls.append({"type": "computer_call", "action": item})  # a bare action object
            elif "name" in item and isinstance(item.get("arguments"), dict | str):
                raw = item["arguments"]
                args = decode_object(raw) if isinstance(raw, str) else raw
                if isinstance(args, Mapping):
                    calls.append({"type": "function_call", "name": str(item["name"]), "arguments": args})
    if not calls:
        sdk = _sdk_actions(body)
        if sdk:
            calls = [{"type": "computer_call", "actions": sdk}]
    if not calls:
        raise ParseError("no computer_call found: call the computer tool (or open_app, ask_user, done)", text)
    ops: list[tuple[Operation, str]] = []
    for c in calls:
        if c.get("type") == "function_call":
            ops.extend(call_operations(str(c["name"]), c["arguments"]))
        else:
            ops.extend((action_to_operation(a), _shown(a)) for a in _actions(c))
    return ops, said


class OpenAIFamily(FamilyBase):
    name = "openai"

    def __init__(self, variant: str = "ga", max_image_side: int | None = None) -> None:
        super().__init__(max_image_side)
        if variant not in ("preview", "ga"):
            raise ValueError(f"unknown OpenAI computer-use variant {variant!r}: preview or ga")
        self.variant = variant
        self._size = (0, 0)
        self.system_prompt = (
            "You operate an Android phone through the computer tool. The display is the phone's "
            "touch screen, {width}x{height} pixels (display_width x display_height): x, y are "
            "pixels of the screenshot. A click is a tap, a right click a touch-and-hold, a drag "
            "a swipe; the phone has no keyboard shortcuts. "
            + ("Each step, put exactly one action in actions: only the first is run, then you "
               "get the new screenshot. " if variant == "ga" else
               "Each step, make exactly one computer call. ")
            + "Use open_app to open an app, ask_user when you need the user, and done when the "
            "task is complete.")

    def geometry(self, screen_w: int, screen_h: int) -> Geometry:
        g = Geometry(screen_w, screen_h, *self.sent_size(screen_w, screen_h), "image")
        self._size = (g.image_w, g.image_h)
        return g

    def request_options(self) -> dict[str, Any]:
        w, h = self._size if self._size[0] else (1024, 768)
        return {"tools": tools(w, h, self.variant), "tool_choice": "required"}

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        if tool_calls:
            ops: list[tuple[Operation, str]] = []
            for call in tool_calls:
                args = decode_object(call.arguments) if call.arguments.strip() else {}
                if args is None:
                    raise ParseError(f"the {call.name} call's arguments are not JSON")
                ops.extend(call_operations(call.name, args))
            op, dropped = first_of(ops)
            return FamilyReply(op, strip_reasoning(text).strip(), ops[0][1], dropped=dropped)
        ops, said = _from_text(text)
        op, dropped = first_of(ops)
        return FamilyReply(op, said.strip(), ops[0][1], dropped=dropped)
