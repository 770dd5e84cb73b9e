"""``venus``: UI-Venus (inclusionAI, github.com/inclusionAI/UI-Venus). UI-Venus-1.5 (2B, 8B,
30B-A3B): the mobile prompt in ``Venus_framework/processor/uivenus_processor.py`` and its
reader in ``Venus_framework/policy/ui_venus_policy.py``; UI-Venus-Navi-7B/72B (variant
``1.0``): ``models/navigation/utils.py`` and ``ui_venus_navi_agent.py``.

Reply: ``<think>...</think><action>Click(box=(x, y))</action><conclusion>...</conclusion>``,
the action one of ``Click`` / ``DoubleClick`` / ``LongPress(box=(x, y))``,
``Scroll(start=(x1, y1), end=(x2, y2))`` (the finger's path; the web prompt's
``Scroll(direction='down')`` shows what is below), ``Drag(start, end)``,
``Type(content='...')``, ``Launch(app='...')``, ``Wait()``, ``PressBack()``,
``PressHome()``, ``PressEnter()`` (or the bare name), ``Finished(content)`` and
``CallUser(content)`` (a question for the user). The last call in ``<action>`` is read;
without the tag, the last call in the reply. ``<conclusion>`` is kept as the summary.

Coordinates: UI-Venus-1.5 answers 0–999 on each axis, divided by 1000 (the prompt: "坐标区间
从左上角(0,0)到右下角(999,999)"; the policy: ``x * width / 1000``); UI-Venus-Navi (1.0,
Qwen2.5-VL) answers pixels of the server's smart-resize (factor 28, 3136 to 12845056
pixels) of the image sent. Image: the screen fitted within ``llm.max_image_side``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from models.llm.errors import ParseError
from models.llm.families.base import FamilyBase, FamilyReply, Geometry, ToolCall, smart_resize
from models.llm.replytext import Call, clean_reply, last_call, normalize_punctuation, parse_numbers
from protocol.operations import (
    Ask,
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

SYSTEM = """You are a GUI agent on a phone. Your task is to analyze the user's task, review the current screenshot and the previous actions, and determine the next action to complete the task.

### Available Actions
- Click(box=(x1,y1))
- Drag(start=(x1,y1), end=(x2,y2))
- Scroll(start=(x1,y1), end=(x2,y2))
- Type(content='')
- Launch(app='')
- Wait()
- Finished(content='')
- CallUser(content='')
- LongPress(box=(x1,y1))
- PressBack()
- PressHome()
- PressEnter()

Coordinates are {convention}.

### Output Format
<think> your thinking process </think>
<action> the next action </action>
<conclusion> the conclusion about the next action </conclusion>
"""

_NAMES = ("click", "doubleclick", "longpress", "scroll", "drag", "type", "launch", "wait", "finished",
          "calluser", "pressback", "presshome", "pressenter", "pressrecent")
_SYNTAX = "Click(box=(x,y))"
_BARE: dict[str, Operation] = {"pressback": Back(), "presshome": Exit(), "pressenter": Enter(), "wait": Wait(), "finished": Stop()}
_SCROLL: dict[str, Operation] = {"down": PageDown(), "up": PageUp(), "left": Swipe("right"), "right": Swipe("left")}


def _points(call: Call, *keys: str) -> list[float]:
    raw = " ".join(call.args.get(k, "") for k in keys) if call.args else call.positional
    return parse_numbers(raw, call.name)


def _xy(call: Call) -> tuple[int, int]:
    nums = _points(call, "box")
    if len(nums) == 4:  # a box: its centre
        nums = [(nums[0] + nums[2]) / 2, (nums[1] + nums[3]) / 2]
    if len(nums) != 2:
        raise ParseError(f"{call.name}() needs box=(x,y), e.g. {_SYNTAX}")
    return round(nums[0]), round(nums[1])


def call_to_operation(call: Call) -> Operation:
    n = call.name
    if n in ("click", "doubleclick"):
        return TapPoint(*_xy(call))
    if n == "longpress":
        return LongPressPoint(*_xy(call))
    if n == "scroll" and "direction" in call.args:
        d = call.args["direction"].strip().lower()
        if d not in _SCROLL:
            raise ParseError(f"Scroll() needs direction='up', 'down', 'left' or 'right', got {d!r}")
        return _SCROLL[d]
    if n in ("scroll", "drag"):
        nums = _points(call, "start", "end")
        if len(nums) != 4:
            raise ParseError(f"{call.name}() needs start=(x1,y1), end=(x2,y2)")
        return SwipePoints(*(round(v) for v in nums))
    if n == "type":
        text = call.args.get("content", call.positional).replace("\\n", "\n").strip()
        if not text:
            raise ParseError("Type() needs content='...'")
        return TypeText(" ".join(text.split()))
    if n == "launch":
        app = call.args.get("app", call.positional).strip()
        if not app or app == "None":
            raise ParseError("Launch() needs app='...'")
        return OpenApp(app)
    if n == "calluser":
        return Ask(call.args.get("content", call.positional).strip() or "I need your help to continue.")
    if n in _BARE:
        return _BARE[n]
    raise ParseError(f"{n}() has no phone equivalent here; use one of the Available Actions")


class VenusFamily(FamilyBase):
    name = "venus"

    def __init__(self, variant: str = "1.5", max_image_side: int | None = None) -> None:
        super().__init__(max_image_side)
        if variant not in ("1.5", "1.0"):
            raise ValueError(f"unknown UI-Venus variant {variant!r}: 1.5 or 1.0")
        self.variant = variant
        convention = ("relative, from (0,0) at the top left to (999,999) at the bottom right" if variant == "1.5"
                      else "absolute pixels of the screenshot ({width}x{height})")
        self.system_prompt = SYSTEM.replace("{convention}", convention)

    def geometry(self, screen_w: int, screen_h: int) -> Geometry:
        sw, sh = self.sent_size(screen_w, screen_h)
        if self.variant == "1.5":
            return Geometry(screen_w, screen_h, sw, sh, "relative", 1000)
        h, w = smart_resize(sh, sw, factor=28, min_pixels=3136, max_pixels=12845056)
        return Geometry(screen_w, screen_h, w, h, "image", sent_w=sw, sent_h=sh)

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        norm = normalize_punctuation(text)
        blocks = re.findall(r"(?is)<action>(.*?)(?:</action>|$)", norm)
        body = clean_reply(blocks[-1]) if blocks else clean_reply(norm)
        thoughts = re.findall(r"(?is)<think>(.*?)</think>", norm)
        thought = thoughts[-1].strip() if thoughts else ""
        conclusions = re.findall(r"(?is)<conclusion>(.*?)</conclusion>", norm)
        summary = conclusions[-1].strip() if conclusions else ""
        bare = re.fullmatch(r"\s*(PressBack|PressHome|PressEnter|Wait|Finished)\s*", body, re.IGNORECASE)
        if bare:
            return FamilyReply(_BARE[bare.group(1).lower()], thought, bare.group(1), summary=summary)
        call = last_call(body, _NAMES, syntax=_SYNTAX)
        return FamilyReply(call_to_operation(call), thought, call.text, summary=summary)
