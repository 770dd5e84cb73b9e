"""The operation vocabulary by name: ``op`` + ``args`` as ``mobagent llm parse`` prints them,
as the ``tools`` and ``json`` families' schemas declare them, and as a JSON action object in
a ReAct reply may give them.

Names: ``open_app click_text click_icon tap_point long_press type swipe scroll_up
scroll_down back home enter clear wait stop ask note``. ``long_press`` and ``swipe`` take either a
target (``text`` / ``direction``) or coordinates (``x, y`` / ``x1, y1, x2, y2``). This is
the stable surface of parsing: keep its vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from models.llm.errors import ParseError
from protocol.operations import (
    DIRECTIONS,
    POSITIONS,
    Ask,
    Back,
    Clear,
    ClickIcon,
    ClickText,
    Enter,
    Exit,
    LongPress,
    LongPressPoint,
    Note,
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
    operation_problem,
)

OP_NAMES: tuple[str, ...] = (
    "open_app", "click_text", "click_icon", "tap_point", "long_press", "type", "swipe",
    "scroll_up", "scroll_down", "back", "home", "enter", "clear", "wait", "stop", "ask",
    "note",
)

# Names models use for the same thing (lower-case, spaces/hyphens as underscores).
_ALIASES = {
    "open": "open_app", "launch": "open_app", "click": "click_text", "tap_text": "click_text",
    "tap": "tap_point", "click_point": "tap_point", "long_press_point": "long_press",
    "type_text": "type", "input": "type", "swipe_points": "swipe", "drag": "swipe",
    "page_up": "scroll_up", "page_down": "scroll_down", "go_back": "back", "exit": "home",
    "go_home": "home", "press_enter": "enter",
    "clear_text": "clear", "clear_field": "clear", "finish": "stop", "finished": "stop",
    "done": "stop", "ask_user": "ask", "remember": "note", "keep_note": "note",
}


def canonical_name(name: str) -> str:
    n = "_".join(name.strip().lower().replace("-", " ").split())
    return _ALIASES.get(n, n)


def _text(args: Mapping[str, Any], *keys: str) -> str:
    for k in keys:
        v = args.get(k)
        if isinstance(v, str) and v.strip():
            return v.strip()
    raise ParseError(f"missing argument {keys[0]!r}")


def number(v: Any, what: str) -> int:
    """``v`` as a whole number: an int, a float or a numeric string (rounded); anything else
    (a bool, a word, nothing) is a ``ParseError`` naming ``what``."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        return round(v)
    if isinstance(v, str):
        try:
            return round(float(v))
        except ValueError:
            pass
    raise ParseError(f"{what} must be a number, got {v!r}")


def _int(args: Mapping[str, Any], key: str) -> int:
    return number(args.get(key), f"argument {key!r}")


def operation_from_call(name: str, args: Mapping[str, Any]) -> Operation:
    """``(op, args)`` -> an Operation (points still in the model's coordinate space)."""
    op_name = canonical_name(name)
    op: Operation
    if op_name == "open_app":
        op = OpenApp(_text(args, "name", "app", "app_name", "text"))
    elif op_name == "click_text":
        if "x" in args and "y" in args:
            op = TapPoint(_int(args, "x"), _int(args, "y"))
        else:
            op = ClickText(_text(args, "text", "target"))
    elif op_name == "click_icon":
        pos = args.get("position", "center")
        if pos not in POSITIONS:
            raise ParseError(f"position must be one of {', '.join(POSITIONS)}, got {pos!r}")
        op = ClickIcon(_text(args, "description", "icon"), pos)
    elif op_name == "tap_point":
        op = TapPoint(_int(args, "x"), _int(args, "y"))
    elif op_name == "long_press":
        if "x" in args or "y" in args:
            op = LongPressPoint(_int(args, "x"), _int(args, "y"))
        else:
            op = LongPress(_text(args, "text", "target"))
    elif op_name == "type":
        text = _text(args, "text", "content")
        op = TypeText(text, submit=bool(args.get("submit", False)))
    elif op_name == "swipe":
        if "x1" in args:
            op = SwipePoints(*(_int(args, k) for k in ("x1", "y1", "x2", "y2")))
        else:
            d = str(args.get("direction", "")).strip().lower()
            if d not in DIRECTIONS:
                raise ParseError(f"swipe needs a direction ({'/'.join(DIRECTIONS)}) or x1, y1, x2, y2")
            op = Swipe(d)  # type: ignore[arg-type,unused-ignore]  # checked against DIRECTIONS
    elif op_name == "scroll_up":
        op = PageUp()
    elif op_name == "scroll_down":
        op = PageDown()
    elif op_name == "back":
        op = Back()
    elif op_name == "home":
        op = Exit()
    elif op_name == "enter":
        op = Enter()
    elif op_name == "clear":
        op = Clear()
    elif op_name == "wait":
        op = Wait()
    elif op_name == "stop":
        op = Stop()
    elif op_name == "ask":
        op = Ask(_text(args, "question", "text", "message"))
    elif op_name == "note":
        op = Note(_text(args, "text", "note", "content"))
    else:
        raise ParseError(f"unknown operation {name!r}: use one of {', '.join(OP_NAMES)}")
    problem = operation_problem(op)
    if problem is not None:
        raise ParseError(problem)
    return op


def describe(op: Operation) -> dict[str, Any]:
    """An Operation -> ``{"op": name, "args": {...}}``, the ``llm parse`` vocabulary."""
    match op:
        case OpenApp(name=n):
            return {"op": "open_app", "args": {"name": n}}
        case ClickText(text=t):
            return {"op": "click_text", "args": {"text": t}}
        case ClickIcon(description=d, position=p):
            return {"op": "click_icon", "args": {"description": d, "position": p}}
        case TapPoint(x=x, y=y):
            return {"op": "tap_point", "args": {"x": x, "y": y}}
        case LongPressPoint(x=x, y=y):
            return {"op": "long_press", "args": {"x": x, "y": y}}
        case LongPress(text=t):
            return {"op": "long_press", "args": {"text": t}}
        case TypeText(text=t, submit=s):
            return {"op": "type", "args": {"text": t, "submit": s}}
        case SwipePoints(x1=x1, y1=y1, x2=x2, y2=y2):
            return {"op": "swipe", "args": {"x1": x1, "y1": y1, "x2": x2, "y2": y2}}
        case Swipe(direction=d):
            return {"op": "swipe", "args": {"direction": d}}
        case PageUp():
            return {"op": "scroll_up", "args": {}}
        case PageDown():
            return {"op": "scroll_down", "args": {}}
        case Back():
            return {"op": "back", "args": {}}
        case Exit():
            return {"op": "home", "args": {}}
        case Enter():
            return {"op": "enter", "args": {}}
        case Clear():
            return {"op": "clear", "args": {}}
        case Wait():
            return {"op": "wait", "args": {}}
        case Stop():
            return {"op": "stop", "args": {}}
        case Ask(question=q):
            return {"op": "ask", "args": {"question": q}}
        case Note(text=t):
            return {"op": "note", "args": {"text": t}}
    raise TypeError(f"not an operation: {op!r}")
