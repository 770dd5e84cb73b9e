"""``glm``: Zhipu's GUI models. GLM-4.1V-Thinking / GLM-4.5V (github.com/zai-org/GLM-V:
``examples/gui-agent/glm-45v/agent.md`` and ``glm-41v/agent.md``, the parser
``parse_mobile_response`` in ``glm-41v/gui_agent_41v.py``) and, as the ``cogagent``
variant, CogAgent-9B-20241220 (github.com/THUDM/CogAgent: ``README.md`` "Model Output",
``Action_space_en.md``).

GLM reply: ``<think>...</think><answer>Memory: ...\\nReason: ...\\nAction: {...}</answer>``;
the action is a JSON object or a Python dict literal (``{'action_type': 'open_app',
'app_name': 'Broccoli'}``), sometimes inside ``<|begin_of_box|>...<|end_of_box|>``, with
``action_type`` ``click`` / ``long_press`` (``box_2d: [[x1,y1,x2,y2]]``: its centre),
``input_text`` (``text``; GLM types into the focused field), ``swipe`` (``direction``, the
finger's; ``box_2d`` optional: from its centre), ``open_app`` (``app_name``),
``keyboard_enter``, ``navigate_home``, ``navigate_back``, ``wait``, ``answer`` and
``status`` (both end the task). Its desktop calls are read too, alone on a line and perhaps
followed by ``Memory:``: ``left_click`` / ``left_double_click(start_box='[x, y]')``,
``left_drag(start_box, end_box)``, ``type(content=...)``, ``key(keys='Return')``,
``scroll(start_box, direction)`` (a wheel: "down" shows what is below), ``WAIT()``,
``DONE()``, ``FAIL()``.

CogAgent reply: ``Status: ...`` (its boxes describe the screen: decoys), ``Plan: ...``,
``Action: <prose>``, then ``Grounded Operation: CLICK(box=[[x1,y1,x2,y2]],
element_info='...')`` (its centre), ``DOUBLE_CLICK``, ``TYPE(box, text)``,
``SCROLL_UP`` / ``SCROLL_DOWN`` / ``SCROLL_LEFT`` / ``SCROLL_RIGHT`` (a wheel),
``KEY_PRESS(key='Return')``, ``LAUNCH(app='...', url='None')``, ``END()``, and ``HOVER``,
which changes nothing on a touch screen and is read as a wait (CogAgent has no wait of its
own; the prompt says so); perhaps a ``<<一般操作>>`` tag after it.

Coordinates: 0–999 relative to the screenshot on each axis, divided by 1000 (GLM: "a
ratio (‰) of the screenshot width or height"; CogAgent: "(a / 1000 * w, b / 1000 * h)");
boxes act at their centre. Image: the screen fitted within ``llm.max_image_side``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from models.llm.errors import ParseError
from models.llm.families.base import FamilyBase, FamilyReply, Geometry, ToolCall, swipe_toward
from models.llm.families.dicts import objects
from models.llm.replytext import Call, clean_reply, find_calls, kept_memory, parse_point
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

GLM_SYSTEM = """You are a GUI Agent, and your primary task is to respond accurately to user requests or questions. In addition to directly answering the user's queries, you can also use tools or perform GUI operations directly until you fulfill the user's request or provide a correct answer. You should carefully read and understand the images and questions provided by the user, and engage in thinking and reflection when appropriate. The coordinates involved are all represented in thousandths (0-999).

# Task Platform
Mobile

# Action Space
- Finish the task: `{"action_type": "status", "goal_status": "<complete|infeasible>"}`
- Answer the user's question: `{"action_type": "answer", "text": "<answer_text>"}`
- Click/tap on an element: `{"action_type": "click", "box_2d": [[xmin,ymin,xmax,ymax]]}`, normalized to 0-999.
- Long press on an element: `{"action_type": "long_press", "box_2d": [[xmin,ymin,xmax,ymax]]}`.
- Type into the focused text field: `{"action_type": "input_text", "text": "<text_input>", "box_2d": [[xmin,ymin,xmax,ymax]]}`.
- Press the Enter key: `{"action_type": "keyboard_enter"}`
- Go home: `{"action_type": "navigate_home"}`; go back: `{"action_type": "navigate_back"}`
- Swipe (up means the finger moves up): `{"action_type": "swipe", "direction": "<up|down|left|right>", "box_2d": [[xmin,ymin,xmax,ymax]](optional)}`
- Open an app: `{"action_type": "open_app", "app_name": "<name>"}`
- Wait for the screen: `{"action_type": "wait"}`

# Output Format
1. Memory: important information you want to remember for the future actions.
2. Reason: the reason for the action and the memory.
3. Action: the action you want to take, in the correct JSON format.

Your answer should look like:
Memory: ...
Reason: ...
Action: {"action_type":...}
"""

COGAGENT_SYSTEM = """You operate a mobile phone. (Platform: Mobile)
(Answer in Status-Action-Operation format.)
Answer with:
Status: <what the screen shows>
Action: <the next step, in words>
Grounded Operation: <one operation>
The operations are CLICK(box=[[x1,y1,x2,y2]], element_info='...'), DOUBLE_CLICK(box=[[x1,y1,x2,y2]]), TYPE(box=[[x1,y1,x2,y2]], text='...'), SCROLL_UP(box=[[x1,y1,x2,y2]], step_count=5), SCROLL_DOWN(...), SCROLL_LEFT(...), SCROLL_RIGHT(...), KEY_PRESS(key='Return'), LAUNCH(app='...', url='None'), HOVER(box=[[x1,y1,x2,y2]]) and END().
A phone has no mouse: HOVER changes nothing there, so use it to wait while the screen loads.
A box's numbers are three-digit, 000 to 999, relative to the screen's width and height.
"""

_GLM_EXAMPLE = '{"action_type": "click", "box_2d": [[x1,y1,x2,y2]]}'
_DESKTOP = ("left_click", "left_double_click", "left_drag", "type", "key", "scroll", "wait", "done", "fail")
_COG = ("click", "double_click", "type", "scroll_up", "scroll_down", "scroll_left", "scroll_right",
        "key_press", "launch", "end", "right_click", "hover")
_WHEEL: dict[str, Operation] = {"down": PageDown(), "up": PageUp(), "left": Swipe("right"), "right": Swipe("left")}
_SWIPES: dict[str, Operation] = {d: Swipe(d) for d in ("up", "down", "left", "right")}
_ENTER_KEYS = ("return", "enter", "kp_enter")


def _centre(v: object, what: str) -> tuple[int, int]:
    x, y = parse_point(str(v), what)
    return round(x), round(y)


def _text(args: Mapping[str, Any], *keys: str) -> str:
    for k in keys:
        v = args.get(k)
        if isinstance(v, str) and v.strip() and v.strip() != "None":
            return v.strip()
    raise ParseError(f"the action needs {keys[0]!r}")


def glm_object_to_operation(obj: Mapping[str, Any]) -> Operation:
    kind = str(obj.get("action_type", "")).strip().lower()
    if kind in ("click", "long_press"):
        x, y = _centre(obj.get("box_2d", ""), f"box_2d of {kind}")
        return TapPoint(x, y) if kind == "click" else LongPressPoint(x, y)
    if kind == "input_text":
        return TypeText(" ".join(_text(obj, "text").split()))
    if kind == "swipe":
        d = str(obj.get("direction", "")).strip().lower()
        if d not in _SWIPES:
            raise ParseError(f"swipe needs direction up, down, left or right, got {obj.get('direction')!r}")
        if obj.get("box_2d"):
            swipe = swipe_toward(*_centre(obj["box_2d"], "box_2d of swipe"), d)
            assert swipe is not None
            return swipe
        return _SWIPES[d]
    if kind == "open_app":
        return OpenApp(_text(obj, "app_name", "app", "text"))
    if kind == "keyboard_enter":
        return Enter()
    if kind == "navigate_home":
        return Exit()
    if kind == "navigate_back":
        return Back()
    if kind == "wait":
        return Wait()
    if kind in ("status", "answer"):
        return Stop()
    raise ParseError(f"unknown action_type {obj.get('action_type')!r}; e.g. {_GLM_EXAMPLE}")


def _point_arg(call: Call, key: str) -> tuple[int, int]:
    v = call.args.get(key) or (call.positional if not call.args else "")
    if not v:
        raise ParseError(f"{call.name}() needs {key}")
    return _centre(v, f"{key} of {call.name}()")


def _key_op(key: str, call: str) -> Operation:
    k = key.strip().lower()
    if k in _ENTER_KEYS:
        return Enter()
    if k in ("back", "escape"):
        return Back()
    if k == "home":
        return Exit()
    raise ParseError(f"{call}: the key {key!r} has no phone equivalent; use Return, Back or Home")


def desktop_call_to_operation(call: Call) -> Operation:
    n = call.name
    if n in ("left_click", "left_double_click"):
        return TapPoint(*_point_arg(call, "start_box"))
    if n == "left_drag":
        return SwipePoints(*_point_arg(call, "start_box"), *_point_arg(call, "end_box"))
    if n == "type":
        text = call.args.get("content", call.positional).replace("\\n", "\n")
        if not text.strip():
            raise ParseError("type() needs content='...'")
        return TypeText(" ".join(text.split()), submit=text.endswith("\n"))
    if n == "key":
        return _key_op(call.args.get("keys", call.positional), "key()")
    if n == "scroll":
        d = call.args.get("direction", "").strip().lower()
        if d not in _WHEEL:
            raise ParseError(f"scroll() needs direction='down' or 'up', got {d!r}")
        return _WHEEL[d]
    if n == "wait":
        return Wait()
    return Stop()  # done, fail


def cog_call_to_operation(call: Call) -> Operation:
    n = call.name
    if n in ("click", "double_click"):
        return TapPoint(*_point_arg(call, "box"))
    if n == "type":
        return TypeText(" ".join(_text(call.args, "text").split()))
    if n.startswith("scroll_"):
        return _WHEEL[n.removeprefix("scroll_")]
    if n == "key_press":
        return _key_op(call.args.get("key", ""), "KEY_PRESS")
    if n == "launch":
        return OpenApp(_text(call.args, "app"))
    if n == "end":
        return Stop()
    if n == "hover":  # a mouse hover does nothing on a touch screen: the step waits
        return Wait()
    raise ParseError(f"{n.upper()} has no phone equivalent; use CLICK, TYPE, SCROLL_*, KEY_PRESS, LAUNCH, "
                     "HOVER or END")


_ACTION_RE = re.compile(r"(?im)^[ \t]*(?:\*\*)?action(?:\*\*)?[ \t]*:")
_MEMORY_RE = re.compile(r"(?im)^[ \t]*memory[ \t]*:")
_GROUNDED_RE = re.compile(r"(?im)^[ \t]*grounded[ \t]+operation[ \t]*:")


_COG_CHAT = re.compile(r"(?i)^(?:tap|click)(?:\s+at)?(?:\s+the)?(?:\s+box)?\s*(\[\[\s*\d+\s*,\s*\d+(?:\s*,\s*\d+\s*,\s*\d+)?\s*\]\])\s*\.?$")


class GLMFamily(FamilyBase):
    name = "glm"

    def __init__(self, variant: str = "glm", max_image_side: int | None = None) -> None:
        super().__init__(max_image_side)
        if variant not in ("glm", "cogagent"):
            raise ValueError(f"unknown GLM variant {variant!r}: glm or cogagent")
        self.variant = variant
        self.system_prompt = GLM_SYSTEM if variant == "glm" else COGAGENT_SYSTEM

    def geometry(self, screen_w: int, screen_h: int) -> Geometry:
        return Geometry(screen_w, screen_h, *self.sent_size(screen_w, screen_h), "relative", 1000)

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        cleaned = clean_reply(text)
        return self._cogagent(cleaned, text) if self.variant == "cogagent" else self._glm(cleaned, text)

    def _glm(self, cleaned: str, text: str) -> FamilyReply:
        acts = list(_ACTION_RE.finditer(cleaned))
        body = cleaned[acts[-1].end():] if acts else cleaned
        head = cleaned[: acts[-1].start()] if acts else ""
        mems = list(_MEMORY_RE.finditer(body))  # Memory: after the call (the desktop format)
        memory = body[mems[-1].end():].strip() if mems else ""
        if mems:
            body = body[: mems[-1].start()]
        elif (m := list(_MEMORY_RE.finditer(head))):
            memory = re.split(r"(?im)^[ \t]*reason[ \t]*:", head[m[-1].end():])[0].strip()
        reason = re.split(r"(?im)^[ \t]*reason[ \t]*:", head)[-1].strip() if head else ""
        found = [o for o in objects(body) if "action_type" in o]
        if found:
            op = glm_object_to_operation(found[-1])
            shown = str(found[-1])
        else:
            calls = find_calls(body, _DESKTOP)
            if not calls:
                raise ParseError(f"no action found: end with Action: {_GLM_EXAMPLE}", text)
            call = calls[-1]
            if call.truncated:
                raise ParseError(f"the {call.name}(...) call is cut off: its closing ')' is missing", text)
            op, shown = desktop_call_to_operation(call), call.text
        if memory.strip() in ("[]", "{}"):  # the desktop format's "nothing to keep"
            memory = ""
        return FamilyReply(op, reason, shown, memory=kept_memory(memory))

    def _cogagent(self, cleaned: str, text: str) -> FamilyReply:
        ops = list(_GROUNDED_RE.finditer(cleaned))
        if not ops:
            raise ParseError("no 'Grounded Operation:' line: end with Grounded Operation: "
                             "CLICK(box=[[x1,y1,x2,y2]], element_info='...')", text)
        line = cleaned[ops[-1].end():].strip().split("\n")[0]
        head = cleaned[: ops[-1].start()]
        chat = _COG_CHAT.match(line)
        if chat is not None:
            # CogAgent-chat (THUDM/CogAgent, the 2023 cogagent-chat-hf): "tap [[x,y]]",
            # "CLICK at the box [[x1,y1,x2,y2]]" in the chat model's words, on 000-999; its
            # plan in "Plan:" / "Next Action:".
            nums = [int(n) for n in re.findall(r"\d+", chat.group(1))]
            x, y = (nums[0], nums[1]) if len(nums) == 2 else ((nums[0] + nums[2]) // 2, (nums[1] + nums[3]) // 2)
            nxt = re.search(r"(?is)next action\s*:\s*(.*)$", head)
            return FamilyReply(TapPoint(x, y), nxt.group(1).strip() if nxt else "", line)
        calls = find_calls(line, _COG)
        if not calls or calls[0].truncated:
            raise ParseError(f"could not read the operation {line[:80]!r}", text)
        act = list(_ACTION_RE.finditer(head))
        thought = head[act[-1].end():].strip() if act else ""
        return FamilyReply(cog_call_to_operation(calls[0]), thought, calls[0].text)
