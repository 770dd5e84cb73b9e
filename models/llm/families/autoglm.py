"""``autoglm``: AutoGLM / Open-AutoGLM phone agent (Zhipu AI, github.com/zai-org/Open-AutoGLM:
the system prompt in ``phone_agent/config/prompts*.py``, the action handler in
``phone_agent/actions/handler.py``).

Reply: ``<think>...</think><answer>do(action="Tap", element=[x,y])</answer>``; the calls
are ``do(action=...)`` with ``Launch`` (app), ``Tap`` / ``Double Tap`` / ``Long Press``
(element), ``Type`` (text), ``Clear`` (ours), ``Swipe`` (start, end), ``Back``, ``Home``, ``Wait``,
``Take_over`` (message: the user must act), ``Interact`` (the user must choose), and
``finish(message=...)``. Tags are often left unclosed.

There is no key action (no Enter): after ``Type`` (Open-AutoGLM types with the ADB Keyboard
and then restores the user's keyboard, as ``devices/adb.py`` does) a search is submitted by
a ``Tap`` on the soft keyboard's search/return key, a suggestion or the app's search button.

Coordinates: 0–999 relative to the screen on each axis (the handler divides by 1000).
Image: the screen fitted within ``llm.max_image_side``.
"""

from __future__ import annotations

from collections.abc import Sequence

from models.llm.errors import ParseError
from models.llm.families.base import FamilyBase, FamilyReply, Geometry, ToolCall
from models.llm.replytext import Call, clean_reply, last_call, parse_point
from protocol.operations import (
    Ask,
    Back,
    Clear,
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

SYSTEM = """You operate an Android phone for the user. Each turn, think inside <think></think>, then give exactly one action inside <answer></answer>:
- do(action="Launch", app="xxx"): open an app by name.
- do(action="Tap", element=[x,y]): tap a point.
- do(action="Long Press", element=[x,y]): touch and hold a point.
- do(action="Double Tap", element=[x,y]): tap a point twice.
- do(action="Type", text="xxx"): type into the focused field.
- do(action="Clear"): empty the focused field (it keeps its old text otherwise).
- do(action="Swipe", start=[x1,y1], end=[x2,y2]): swipe from start to end.
- do(action="Back"), do(action="Home"), do(action="Wait", duration="2 seconds").
- do(action="Take_over", message="xxx"): the user must do a step (login, captcha).
- do(action="Interact"): several options fit and the user must choose.
- finish(message="xxx"): the task is done.
Coordinates go from (0,0) at the top left to (999,999) at the bottom right.
"""

_SYNTAX = 'do(action="Tap", element=[x,y])'


def _xy(call: Call, key: str) -> tuple[int, int]:
    v = call.args.get(key)
    if not v:
        raise ParseError(f"{call.args.get('action', 'do')} needs {key}=[x,y]")
    x, y = parse_point(v, key)
    return round(x), round(y)


def call_to_operation(call: Call) -> Operation:
    if call.name == "finish":
        return Stop()
    action = " ".join(call.args.get("action", "").replace("_", " ").lower().split())
    if not action:
        raise ParseError(f"do() needs action=\"...\", e.g. {_SYNTAX}")
    if action in ("tap", "double tap", "click"):
        return TapPoint(*_xy(call, "element"))
    if action == "long press":
        return LongPressPoint(*_xy(call, "element"))
    if action == "swipe":
        return SwipePoints(*_xy(call, "start"), *_xy(call, "end"))
    if action == "type" or action == "type name":
        text = " ".join(call.args.get("text", "").split())
        if not text:
            raise ParseError('Type needs text="..."')
        return TypeText(text)
    if action == "launch":
        app = call.args.get("app", "").strip()
        if not app:
            raise ParseError('Launch needs app="..."')
        return OpenApp(app)
    if action == "clear":
        return Clear()
    if action == "back":
        return Back()
    if action == "home":
        return Exit()
    if action == "wait":
        return Wait()
    if action in ("take over", "interact"):
        msg = call.args.get("message", "").strip()
        return Ask(msg or "Several options fit: which one do you want?")
    raise ParseError(f"unknown action {call.args.get('action')!r}; e.g. {_SYNTAX}")


class AutoGLMFamily(FamilyBase):
    name = "autoglm"
    system_prompt = SYSTEM

    def geometry(self, screen_w: int, screen_h: int) -> Geometry:
        sw, sh = self.sent_size(screen_w, screen_h)
        return Geometry(screen_w, screen_h, sw, sh, "relative", 1000)

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        cleaned = clean_reply(text)
        call = last_call(cleaned, ("do", "finish"), syntax=_SYNTAX)
        return FamilyReply(call_to_operation(call), "", call.text)
