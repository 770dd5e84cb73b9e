"""``agentcpm``: AgentCPM-GUI (OpenBMB, github.com/OpenBMB/AgentCPM-GUI: the system prompt
and its schema in ``README.md`` / ``eval/utils/schema/schema.json``, the action table in
``README.md``, the RFT examples in ``rft/trainer/utils/dataset.py``).

Reply: one compact JSON object, ``{"thought": ..., "POINT": [x, y]}``, or after the RFT
model's ``<think>...</think>`` inside ``<act>...</act>``. Its keys, not an action name, say
what to do: ``POINT`` alone taps; with ``duration`` over 200 (ms) it long-presses; with
``to`` it swipes from ``POINT`` (300 of the grid) toward ``"up"``/``"down"``/``"left"``/``"right"`` (the
finger's direction: ``"to": "up"`` shows what is below) or to another ``[x, y]``;
``PRESS`` is ``"HOME"``, ``"BACK"`` or ``"ENTER"``; ``TYPE`` types; ``duration`` alone waits;
``STATUS`` ``"finish"`` / ``"satisfied"`` ends the task (``"impossible"`` / ``"interrupt"``
too), ``"need_feedback"`` asks the user. More than one of ``POINT``, ``PRESS`` and ``TYPE``
in one object (the RFT prompt's "explore by combining") is re-asked: one action a step.

Coordinates: 0–1000 relative to the screen on each axis (the schema's ``Location``: "按照宽高
比例缩放到0～1000"), x first. Image: the screenshot with its longer side at most 1120
pixels (the README's ``__resize__``), and within ``llm.max_image_side``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from models.llm.errors import ParseError
from models.llm.families.base import (
    FamilyBase,
    FamilyReply,
    Geometry,
    ToolCall,
    fit_within,
    swipe_toward,
)
from models.llm.families.dicts import objects
from models.llm.replytext import normalize_punctuation, strip_reasoning
from protocol.operations import (
    Ask,
    Back,
    Enter,
    Exit,
    LongPressPoint,
    Operation,
    Stop,
    Swipe,
    SwipePoints,
    TapPoint,
    TypeText,
    Wait,
)

MAX_SIDE = 1120

SYSTEM = """# Role
你是一名熟悉安卓系统触屏GUI操作的智能体，将根据用户的问题，分析当前界面的GUI元素和布局，生成相应的操作。

# Task
针对用户问题，根据输入的当前屏幕截图，输出下一步的操作。

# Rule
- 以紧凑JSON格式输出
- 输出操作必须遵循Schema约束

# Schema
{"type":"object","description":"执行操作并决定当前任务状态","additionalProperties":false,"required":["thought"],"properties":{"thought":{"type":"string","description":"智能体的思维过程"},"POINT":{"$ref":"#/$defs/Location","description":"点击屏幕上的指定位置"},"to":{"description":"移动，组合手势参数","oneOf":[{"enum":["up","down","left","right"],"description":"从当前点（POINT）出发，执行滑动手势操作，方向包括向上、向下、向左、向右"},{"$ref":"#/$defs/Location","description":"移动到某个位置"}]},"duration":{"type":"integer","description":"动作执行的时间或等待时间，毫秒","minimum":0,"default":200},"PRESS":{"type":"string","description":"触发特殊按键，HOME为回到主页按钮，BACK为返回按钮，ENTER为回车按钮","enum":["HOME","BACK","ENTER"]},"TYPE":{"type":"string","description":"输入文本"},"STATUS":{"type":"string","description":"当前任务的状态。特殊情况：satisfied，无需操作；impossible，任务无法完成；interrupt，任务中断；need_feedback，需要用户反馈；","enum":["continue","finish","satisfied","impossible","interrupt","need_feedback"],"default":"continue"}},"$defs":{"Location":{"type":"array","description":"坐标为相对于屏幕左上角位原点的相对位置，并且按照宽高比例缩放到0～1000，数组第一个元素为横坐标x，第二个元素为纵坐标y","items":{"type":"integer","minimum":0,"maximum":1000},"minItems":2,"maxItems":2}}}"""

_KEYS = ("POINT", "to", "PRESS", "TYPE", "STATUS", "duration")
_SWIPES: dict[str, Operation] = {d: Swipe(d) for d in ("up", "down", "left", "right")}
_PRESS: dict[str, Operation] = {"HOME": Exit(), "BACK": Back(), "ENTER": Enter()}
_EXAMPLE = '{"thought":"...","POINT":[x,y]}'


def _location(v: object, key: str) -> tuple[int, int]:
    if isinstance(v, list | tuple) and len(v) == 2 and all(
        isinstance(n, int | float) and not isinstance(n, bool) for n in v
    ):
        return round(v[0]), round(v[1])
    raise ParseError(f'"{key}" must be [x, y] with two numbers from 0 to 1000, got {v!r}')


def object_to_operation(obj: Mapping[str, Any]) -> Operation:
    primitives = [k for k in ("POINT", "PRESS", "TYPE") if k in obj]
    if len(primitives) > 1:
        raise ParseError(f"one action a step: the reply combines {', '.join(primitives)}; e.g. {_EXAMPLE}")
    duration = obj.get("duration")
    to = obj.get("to")
    if "POINT" in obj:
        x, y = _location(obj["POINT"], "POINT")
        if isinstance(to, str):
            swipe = swipe_toward(x, y, to)
            if swipe is None:
                raise ParseError(f'"to" must be "up", "down", "left", "right" or [x, y], got {to!r}')
            return swipe
        if to is not None:
            return SwipePoints(x, y, *_location(to, "to"))
        if isinstance(duration, int | float) and not isinstance(duration, bool) and duration > 200:
            return LongPressPoint(x, y)
        return TapPoint(x, y)
    if isinstance(to, str) and to.strip().lower() in _SWIPES:  # no start point: a plain swipe
        return _SWIPES[to.strip().lower()]
    if "PRESS" in obj:
        key = str(obj["PRESS"]).strip().upper()
        if key not in _PRESS:
            raise ParseError(f'"PRESS" must be "HOME", "BACK" or "ENTER", got {obj["PRESS"]!r}')
        return _PRESS[key]
    if "TYPE" in obj:
        text = str(obj["TYPE"] or "").strip()
        if not text:
            raise ParseError('"TYPE" needs the text to type')
        return TypeText(" ".join(text.split()))
    status = str(obj.get("STATUS", "")).strip().lower()
    if status in ("finish", "satisfied", "impossible", "interrupt"):
        return Stop()
    if status == "need_feedback":
        return Ask(str(obj.get("thought") or "").strip() or "I need your feedback to continue.")
    if isinstance(duration, int | float) and not isinstance(duration, bool) and duration > 0:
        return Wait()
    raise ParseError(f"the object has no action (POINT, to, PRESS, TYPE, STATUS or duration); e.g. {_EXAMPLE}")


class AgentCPMFamily(FamilyBase):
    name = "agentcpm"
    system_prompt = SYSTEM

    def sent_size(self, screen_w: int, screen_h: int) -> tuple[int, int]:
        if self.sent_image is not None:
            return self.sent_image
        side = MAX_SIDE if self.max_image_side is None else min(MAX_SIDE, self.max_image_side)
        return fit_within(screen_w, screen_h, side)

    def geometry(self, screen_w: int, screen_h: int) -> Geometry:
        return Geometry(screen_w, screen_h, *self.sent_size(screen_w, screen_h), "relative", 1000)

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        body = strip_reasoning(normalize_punctuation(text))
        found = [o for o in objects(body) if any(k in o for k in _KEYS)]
        if not found:
            raise ParseError(f"no action object found: answer with one compact JSON object, e.g. {_EXAMPLE}", text)
        obj = found[-1]
        thought = str(obj.get("thought") or "").strip()
        if not thought and "</think>" in text:
            thought = text.split("</think>")[0].split("<think>")[-1].strip()
        return FamilyReply(object_to_operation(obj), thought, str({k: obj[k] for k in obj if k != "thought"}))
