"""``uitars``: UI-TARS / UI-TARS-1.5 (ByteDance Seed, github.com/bytedance/UI-TARS: the
mobile prompt in ``codes/ui_tars/prompt.py`` and the coordinate notes in
``README_coordinates.md``); Doubao-1.5-UI-TARS and Doubao-Seed-1.6 (the same action language
served by Volcengine Ark: ``COMPUTER_USE_DOUBAO`` in ``codes/ui_tars/prompt.py``, and
``parse_action_to_structure_output(..., factor=1000, model_type="doubao")`` in
``codes/ui_tars/action_parser.py``, which divides its numbers by 1000).

Reply: ``Thought: ...`` then ``Action: <call>``, the call one of ``click(start_box=...)``,
``long_press(start_box=...)``, ``type(content='...')`` (a trailing ``\\n`` submits: Enter),
``scroll(start_box=..., direction=...)`` or with ``end_box``, ``drag(start_box, end_box)``
(a swipe), ``open_app(app_name=...)``, ``press_home()``, ``press_back()``, ``wait()``, ``clear()`` (ours),
``finished(content=...)``. A point is ``'(x,y)'``, ``'<|box_start|>(x,y)<|box_end|>'``,
``<point>x y</point>`` or a box (its centre).

Coordinates: UI-TARS-1.5 answers absolute pixels of the image it received, which is the
screenshot as sent (the screen fitted within ``llm.max_image_side``) smart-resized by the
server's processor (factor 28, between 100·28² and 16384·28² pixels); UI-TARS 1.0
(the 2B/7B/72B SFT and DPO models) answers 0–1000 relative to the image, and so do the
Doubao models (``click(point='<point>x y</point>')``, ``<bbox>x1 y1 x2 y2</bbox>``, often a
full-width ``Action：``, sometimes a call left unclosed, or Seed's compact
``click>point>point>x y``). The model name picks the variant; ``uitars-1.5`` /
``uitars-1.0`` / ``uitars-doubao`` name it explicitly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from models.llm.errors import ParseError
from models.llm.families.base import FamilyBase, FamilyReply, Geometry, ToolCall, smart_resize
from models.llm.replytext import Call, clean_reply, last_call, parse_point
from protocol.operations import (
    Ask,
    Back,
    Clear,
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

MIN_PIXELS = 100 * 28 * 28
MAX_PIXELS = 16384 * 28 * 28

SYSTEM = """You are a GUI agent. You are given a task and your action history, with screenshots. You need to perform the next action to complete the task.

## Output Format
```
Thought: ...
Action: ...
```

## Action Space
click(start_box='<|box_start|>(x1,y1)<|box_end|>')
long_press(start_box='<|box_start|>(x1,y1)<|box_end|>')
type(content='') # end content with \\n to submit it
clear() # empty the focused field before typing new text
scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')
drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')
open_app(app_name='')
press_home()
press_back()
wait()
finished(content='') # the task is done

## Note
- Coordinates are {convention}.
- Write a small plan and finally summarize your next action (with its target element) in one sentence in `Thought` part.
"""

DOUBAO_SPACE = """click(point='<point>x1 y1</point>')
long_press(point='<point>x1 y1</point>')
type(content='') # end content with \\n to submit it
clear() # empty the focused field before typing new text
scroll(point='<point>x1 y1</point>', direction='down or up or right or left')
drag(start_point='<point>x1 y1</point>', end_point='<point>x2 y2</point>')
open_app(app_name='')
press_home()
press_back()
wait()
finished(content='') # the task is done
"""

_NAMES = (
    "click", "left_single", "long_press", "type", "scroll", "drag", "swipe",
    "open_app", "press_home", "press_back", "press_enter", "hotkey", "wait", "finished",
    "call_user", "clear",
)
_SYNTAX = "click(start_box='(x,y)')"
# Where the content ends up: UI-TARS' "scroll down" shows more of what is below.
_SCROLL: dict[str, Operation] = {"down": PageDown(), "up": PageUp(), "left": Swipe("right"), "right": Swipe("left")}

_SWIPES: dict[str, Operation] = {d: Swipe(d) for d in ("up", "down", "left", "right")}


def _pt(call: Call, *keys: str) -> tuple[float, float]:
    for k in keys:
        v = call.args.get(k)
        if v is not None:
            return parse_point(v, f"{k} of {call.name}()")
    if call.positional and not call.args:
        return parse_point(call.positional, f"point of {call.name}()")
    raise ParseError(f"{call.name}() needs a {keys[0]}, e.g. {_SYNTAX}")


def _point_op(op: type[TapPoint] | type[LongPressPoint], xy: tuple[float, float]) -> Operation:
    return op(round(xy[0]), round(xy[1]))


def _direction_swipe(direction: str) -> Operation:
    # Doubao's swipe(direction=...): the finger's direction, as our Swipe.
    d = direction.strip().lower()
    if d not in _SWIPES:
        raise ParseError(f"swipe() needs direction='up', 'down', 'left' or 'right', got {d!r}")
    return _SWIPES[d]


# Doubao-Seed's compact form ``click>point>point>x y`` (github.com/bytedance/UI-TARS pull 252).
_COMPACT = re.compile(r"(?m)^\s*(\w+)>(point|start_point)>(?:point|start_point)>\s*(-?\d+(?:\.\d+)?)[ ,]+(-?\d+(?:\.\d+)?)\s*$")


def close_unclosed(body: str) -> str:
    """``body`` with its last call closed when it stops right after a complete point, box or
    quoted value: ``click(point='<point>150 315</point>`` is that click, while
    ``click(start_box='(546,`` stays cut off (re-asked)."""
    head, nl, last = body.rstrip().rpartition("\n")
    if last.count("(") - last.count(")") != 1 or not re.search(r"\w\s*\(", last):
        return body
    closed = bool(re.search(r"(?:</point>|</bbox>|[)\]])\s*['\"]?$", last)) or (
        last[-1:] in ("'", '"') and last.count(last[-1]) % 2 == 0)
    return head + nl + last + ")" if closed else body


def call_to_operation(call: Call) -> Operation:
    n = call.name
    if n in ("click", "left_single"):
        return _point_op(TapPoint, _pt(call, "start_box", "point", "start_point"))
    if n == "long_press":
        return _point_op(LongPressPoint, _pt(call, "start_box", "point", "start_point"))
    if n == "swipe" and "direction" in call.args and "end_point" not in call.args and "end_box" not in call.args:
        return _direction_swipe(call.args["direction"])
    if n in ("drag", "swipe") or (n == "scroll" and ("end_box" in call.args or "end_point" in call.args)):
        x1, y1 = _pt(call, "start_box", "start_point", "point")
        x2, y2 = _pt(call, "end_box", "end_point")
        return SwipePoints(round(x1), round(y1), round(x2), round(y2))
    if n == "scroll":
        d = call.args.get("direction", call.positional).strip().lower()
        if d not in _SCROLL:
            raise ParseError(f"scroll() needs direction='up', 'down', 'left' or 'right', got {d!r}")
        return _SCROLL[d]
    if n == "type":
        content = call.args.get("content", call.positional)
        # The model writes "\n" as the two characters backslash-n inside its quoted string.
        content = content.replace("\\n", "\n")
        submit = content.endswith("\n")
        content = content.strip()
        if not content:
            if submit:
                return Enter()
            raise ParseError("type() needs content='...'")
        return TypeText(" ".join(content.split()), submit=submit)
    if n == "open_app":
        name = call.args.get("app_name", call.positional).strip()
        if not name:
            raise ParseError("open_app() needs app_name='...'")
        return OpenApp(name)
    if n == "press_home":
        return Exit()
    if n == "press_back":
        return Back()
    if n == "press_enter" or (n == "hotkey" and call.args.get("key", "").lower() == "enter"):
        return Enter()
    if n == "clear":
        return Clear()
    if n == "wait":
        return Wait()
    if n == "finished":
        return Stop()
    if n == "call_user":
        return Ask(call.args.get("content", "").strip() or "I need your help to continue.")
    raise ParseError(f"{n}() is not an action on a phone; use one of the Action Space")


class UITarsFamily(FamilyBase):
    name = "uitars"

    def __init__(self, variant: str = "1.5", max_image_side: int | None = None) -> None:
        super().__init__(max_image_side)
        if variant not in ("1.0", "1.5", "doubao"):
            raise ValueError(f"unknown UI-TARS variant {variant!r}: 1.0, 1.5 or doubao")
        self.variant = variant
        convention = (
            "absolute pixels of the screenshot ({width}x{height})" if variant == "1.5"
            else "relative, from 0 to 1000 on each axis"
        )
        system = SYSTEM
        if variant == "doubao":  # its trained spelling: point=, <point>x y</point>
            a = system.index("## Action Space\n") + len("## Action Space\n")
            system = system[:a] + DOUBAO_SPACE + system[system.index("\n## Note"):]
        self.system_prompt = system.replace("{convention}", convention)

    def geometry(self, screen_w: int, screen_h: int) -> Geometry:
        if self.variant == "doubao":  # 0-1000 of whatever image Ark received
            return Geometry(screen_w, screen_h, *self.sent_size(screen_w, screen_h), "relative", 1000)
        # The server smart-resizes the image it receives; the model answers in that size.
        sw, sh = self.sent_size(screen_w, screen_h)
        h, w = smart_resize(sh, sw, factor=28, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
        return Geometry(screen_w, screen_h, w, h, "image" if self.variant == "1.5" else "relative",
                        sent_w=sw, sent_h=sh)

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        # Seed's reasoning tag carries a suffix: <think_never_used_51bce0c785ca2f68081bfa7d91973934>
        cleaned = clean_reply(re.sub(r"<(/?)think_\w+>", r"<\1think>", text))
        cleaned = _COMPACT.sub(lambda m: f"{m[1]}({m[2]}='<point>{m[3]} {m[4]}</point>')", cleaned)
        acts = list(re.finditer(r"(?im)^\s*(?:\*\*)?action(?:\*\*)?\s*:(?:\*\*)?", cleaned))
        body = cleaned[acts[-1].end():] if acts else cleaned
        head = cleaned[: acts[-1].start()] if acts else ""
        thought = re.sub(r"(?is)^\s*thought\s*:", "", head).strip()
        call = last_call(close_unclosed(body), _NAMES, syntax=_SYNTAX)
        return FamilyReply(call_to_operation(call), thought, call.text)
