"""``gelab``: GELab-Zero / Step-GUI (StepFun, github.com/stepfun-ai/gelab-zero: the action
space in ``copilot_tools/parser_0920_summary.py`` ``task_define_prompt``, its reader
``str2action``, the front end ``copilot_front_end/mobile_action_helper.py``).

Reply: ``<THINK> ... </THINK>`` then one line of tab-separated ``key:value`` fields,
``explain:...\\taction:CLICK\\tpoint:x,y\\tsummary:...``. Actions: ``CLICK`` (point),
``LONGPRESS`` (point), ``TYPE`` (value; its point is the field, typed into as focused),
``SLIDE`` (point1, point2), ``AWAKE`` (value: open that app), ``WAIT`` (value, seconds),
``INFO`` (value: a question for the user), ``COMPLETE`` (return), ``ABORT``; the front end's
``BACK``, ``HOME`` and ``HOT_KEY`` too. Fields without ``action`` but with a point tap (or
slide, with two). Known damage, read: the tag misspelt ``<TINK>`` / ``<THIN>`` (its README:
quantised models), a stray echo of the prompt ending in ``</THINK>`` before the real block
(the last block wins), newlines in place of tabs.

Coordinates: 0–1000 on each axis ("取值范围均为 0-1000"), x first, "x,y" or "x y".
Image: the screen fitted within ``llm.max_image_side``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from models.llm.errors import ParseError
from models.llm.families.base import FamilyBase, FamilyReply, Geometry, ToolCall
from models.llm.replytext import normalize_punctuation, parse_numbers
from protocol.operations import (
    Ask,
    Back,
    Enter,
    Exit,
    LongPressPoint,
    OpenApp,
    Operation,
    Stop,
    SwipePoints,
    TapPoint,
    TypeText,
    Wait,
)

SYSTEM = """你是一个手机 GUI-Agent 操作专家，你需要根据用户下发的任务、手机屏幕截图和交互操作的历史记录，借助既定的动作空间与手机进行交互，从而完成用户的任务。
请牢记，手机屏幕坐标系以左上角为原点，x轴向右，y轴向下，取值范围均为 0-1000。

在 Android 手机的场景下，你的动作空间包含以下9类操作，所有输出都必须遵守对应的参数要求：
1. CLICK：点击手机屏幕坐标，需包含点击的坐标位置 point。
例如：action:CLICK\tpoint:x,y
2. TYPE：在手机输入框中输入文字，需包含输入内容 value、输入框的位置 point。
例如：action:TYPE\tvalue:输入内容\tpoint:x,y
3. COMPLETE：任务完成后向用户报告结果，需包含报告的内容 value。
例如：action:COMPLETE\treturn:完成任务后向用户报告的内容
4. WAIT：等待指定时长，需包含等待时间 value（秒）。
例如：action:WAIT\tvalue:等待时间
5. AWAKE：唤醒指定应用，需包含唤醒的应用名称 value。
例如：action:AWAKE\tvalue:应用名称
6. INFO：询问用户问题或详细信息，需包含提问内容 value。
例如：action:INFO\tvalue:提问内容
7. ABORT：终止当前任务，仅在当前任务无法继续执行时使用，需包含 value 说明原因。
例如：action:ABORT\tvalue:终止任务的原因
8. SLIDE：在手机屏幕上滑动，滑动的方向不限，需包含起点 point1 和终点 point2。
例如：action:SLIDE\tpoint1:x1,y1\tpoint2:x2,y2
9. LONGPRESS：长按手机屏幕坐标，需包含长按的坐标位置 point。
例如：action:LONGPRESS\tpoint:x,y

先进行思考和解释然后输出动作空间和对应的参数：
1. 思考（THINK）：在 <THINK> 和 </THINK> 标签之间。
2. 解释（explain）：在动作格式中，使用 explain: 开头，简要说明当前动作的目的和执行方式。
输出格式示例：
<THINK> 思考的内容 </THINK>
explain:解释的内容\taction:动作空间和对应的参数\tsummary:执行完当前步骤后的新历史总结
"""

_EXAMPLE = "explain:...\taction:CLICK\tpoint:x,y\tsummary:..."
_KEYS = ("explain", "action", "point", "point1", "point2", "value", "return", "summary",
         "keyboard", "search_type", "is_keyboard", "keyboard_exists")


def _point(fields: dict[str, str], key: str) -> tuple[int, int]:
    nums = parse_numbers(fields.get(key, ""), key)
    if len(nums) != 2:
        raise ParseError(f"{key} must be x,y with two numbers from 0 to 1000, got {fields.get(key, '')!r}")
    return round(nums[0]), round(nums[1])


def _value(fields: dict[str, str], key: str, action: str) -> str:
    v = fields.get(key, "").strip()
    if not v or v == "None":
        raise ParseError(f"{action} needs {key}:...")
    return v


def fields_to_operation(fields: dict[str, str]) -> Operation:
    action = fields.get("action", "").strip().upper()
    if not action:
        if "point1" in fields and "point2" in fields:
            action = "SLIDE"
        elif "point" in fields:
            action = "CLICK"
        else:
            raise ParseError(f"no action: field; answer with {_EXAMPLE}")
    if action == "CLICK":
        return TapPoint(*_point(fields, "point"))
    if action == "LONGPRESS":
        return LongPressPoint(*_point(fields, "point"))
    if action in ("SLIDE", "SCROLL"):
        return SwipePoints(*_point(fields, "point1"), *_point(fields, "point2"))
    if action == "TYPE":
        return TypeText(" ".join(_value(fields, "value", action).split()))
    if action == "AWAKE":
        return OpenApp(_value(fields, "value", action))
    if action == "INFO":
        return Ask(_value(fields, "value", action))
    if action == "WAIT":
        return Wait()
    if action in ("COMPLETE", "ABORT"):
        return Stop()
    if action == "BACK":
        return Back()
    if action == "HOME":
        return Exit()
    if action == "HOT_KEY" and fields.get("value", "").strip().lower() == "enter":
        return Enter()
    raise ParseError(f"unknown action {fields.get('action')!r}: use CLICK, TYPE, SLIDE, LONGPRESS, AWAKE, WAIT, "
                     "INFO, COMPLETE or ABORT")


class GELabFamily(FamilyBase):
    name = "gelab"
    system_prompt = SYSTEM

    def geometry(self, screen_w: int, screen_h: int) -> Geometry:
        return Geometry(screen_w, screen_h, *self.sent_size(screen_w, screen_h), "relative", 1000)

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        norm = re.sub(r"<\s*(/?)\s*(?:THINK|TINK|THIN)\s*>", r"<\1THINK>", normalize_punctuation(text),
                      flags=re.IGNORECASE)
        closes = list(re.finditer(r"</THINK>", norm))
        kv = norm[closes[-1].end():] if closes else norm
        opens = list(re.finditer(r"<THINK>", norm))
        thought = norm[opens[-1].end():closes[-1].start()].strip() if opens and closes and \
            opens[-1].start() < closes[-1].start() else ""
        if not closes and opens:
            kv = norm[opens[-1].end():]  # a block never closed: read fields if any follow
        fields: dict[str, str] = {}
        for part in re.split(r"[\t\n]+", kv):
            key, sep, value = part.partition(":")
            k = key.strip().lower()
            if sep and k in _KEYS:
                fields[k] = value.strip()
        if "action" not in fields and "point" not in fields and "point1" not in fields:
            raise ParseError(f"no action fields found: after </THINK> answer with {_EXAMPLE}", text)
        shown = "\t".join(f"{k}:{v}" for k, v in fields.items() if k not in ("explain", "summary"))
        return FamilyReply(fields_to_operation(fields), fields.get("explain", "") or thought, shown,
                           summary=fields.get("summary", ""))
