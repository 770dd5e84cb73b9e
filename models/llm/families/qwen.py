"""``qwen``: Qwen2.5-VL / Qwen3-VL / GUI-Owl ``mobile_use`` function calls (Qwen team,
github.com/QwenLM/Qwen2.5-VL ``cookbooks/mobile_agent.ipynb`` and its ``agent_function_call``
tool; Qwen3-VL's cookbook of the same name; GUI-Owl in github.com/X-PLUG/MobileAgent).

Reply: ``<tool_call>{"name": "mobile_use", "arguments": {"action": ..., ...}}</tool_call>``
in the text (Hermes style), or the same as an OpenAI ``tool_calls`` entry when vLLM's tool
parser is on. Actions: ``click`` / ``long_press`` (coordinate), ``swipe`` (coordinate,
coordinate2), ``type`` (text), ``key`` (text), ``system_button`` (button: Back, Home,
Menu, Enter), ``clear`` (ours: empty the focused field), ``open`` (text), ``wait``, ``answer`` (text), ``terminate`` (status).

GUI-Owl-1.5 (github.com/X-PLUG/MobileAgent ``Mobile-Agent-v3.5``: the prompt in
``android_world_v3.5/android_world/agents/gui_owl.py``, the README's "GUI-Owl 1.5 outputs
relative coordinates (0–1000) by default", and ``mobile_use/run_gui_owl_1_5_for_mobile.py``,
which scales ``coordinate`` / ``coordinate2`` by ``/1000``) answers ``Action: <a short
imperative>`` then the same ``<tool_call>``, after a ``<think>`` block in its Thinking
models; its prompt says "The screen's resolution is 1000x1000". ``call_user`` / ``interact``
(``text``) ask the user. Also read: ``open_app`` (AndroidWorld's and AndroidControl's name
for ``open``, ``text`` or ``app_name``), and a call copied from a JSON log, its quotes
escaped (``{\\"name\\": ...}``).

MAI-UI (github.com/Tongyi-MAI/MAI-UI: ``src/prompt.py`` ``MAI_MOBILE_SYS_PROMPT_ASK_USER_MCP``,
``src/mai_naivigation_agent.py``, which divides by ``SCALE_FACTOR = 999``; its grounding
replies in ``evaluation/grounding/output_local``) thinks in ``<thinking>`` (``</think>`` from
its thinking models; ``<grounding_think>`` when grounding) and calls the same
``mobile_use`` with ``swipe`` (``direction``, the finger's, and an optional ``coordinate``
to start from), ``drag`` (``start_coordinate``, ``end_coordinate``), ``open``,
``double_click``, ``answer``, ``ask_user``; a grounding answer is a bare
``{"coordinate": [x, y]}`` (a tap).

Coordinates: Qwen2.5-VL answers absolute pixels of the image it received, which is the
screenshot as sent (the screen fitted within ``llm.max_image_side``) smart-resized by the
server's processor (factor 28, at most 12845056 pixels); Qwen3-VL answers
0–1000 relative (their images are smart-resized with factor 32, which the numbers no
longer depend on); GUI-Owl-1.5 answers 0–1000 too, and MAI-UI 0–999 (divided by 999).
GUI-Owl 1.0 (GUI-Owl-7B/32B, Qwen2.5-VL based) answers like Qwen2.5-VL, absolute pixels of
the smart-resize (factor 28): Mobile-Agent-v3's ``mobile_v3/run_mobileagentv3.py`` defaults
to ``--coor_type abs`` (its README: set ``qwen-vl`` only for a model that "outputs relative
coordinates from 0 to 1000, such as Seed-VL"), and ``android_world_v3/.../gui_owl.py``
sends the screenshot smart-resized with factor 28 and names that size in the prompt.
The model name picks the variant (``qwen2.5``, ``qwen3``, ``gui-owl-1.5`` or ``mai-ui``
name one explicitly).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from models.llm.errors import ParseError
from models.llm.families.base import (
    FamilyBase,
    FamilyReply,
    Geometry,
    ToolCall,
    smart_resize,
    swipe_toward,
)
from models.llm.replytext import clean_reply, json_objects, normalize_punctuation, strip_reasoning
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

SYSTEM = """You are a helpful assistant.

# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{"type": "function", "function": {"name": "mobile_use", "description": "Use a touchscreen to interact with a mobile device. The screen's resolution is {width}x{height}{coords}.", "parameters": {"properties": {"action": {"description": "click, long_press, swipe, type, clear (empty the focused field), key, system_button, open, wait, answer or terminate", "enum": ["click", "long_press", "swipe", "type", "clear", "key", "system_button", "open", "wait", "answer", "terminate"], "type": "string"}, "coordinate": {"description": "(x, y) for click, long_press and the start of swipe", "type": "array"}, "coordinate2": {"description": "(x, y): the end of swipe", "type": "array"}, "text": {"description": "for type, key, open and answer", "type": "string"}, "button": {"description": "for system_button", "enum": ["Back", "Home", "Menu", "Enter"], "type": "string"}, "time": {"description": "seconds, for long_press and wait", "type": "number"}, "status": {"description": "for terminate", "enum": ["success", "failure"], "type": "string"}}, "required": ["action"], "type": "object"}}}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call>"""

# MAI-UI's mobile prompt (src/prompt.py), its ask_user and double_click included.
MAI_SYSTEM = """You are a GUI agent. You are given a task and your action history, with screenshots. You need to perform the next action to complete the task.

## Output Format
For each function call, return the thinking process in <thinking> </thinking> tags, and a json object with function name and arguments within <tool_call></tool_call> XML tags:
```
<thinking>
...
</thinking>
<tool_call>
{"name": "mobile_use", "arguments": <args-json-object>}
</tool_call>
```

## Action Space

{"action": "click", "coordinate": [x, y]}
{"action": "long_press", "coordinate": [x, y]}
{"action": "type", "text": ""}
{"action": "swipe", "direction": "up or down or left or right", "coordinate": [x, y]} # "coordinate" is optional. Use the "coordinate" if you want to swipe a specific UI element.
{"action": "open", "text": "app_name"}
{"action": "drag", "start_coordinate": [x1, y1], "end_coordinate": [x2, y2]}
{"action": "system_button", "button": "button_name"} # Options: back, home, enter
{"action": "wait"}
{"action": "terminate", "status": "success or fail"}
{"action": "answer", "text": "xxx"}
{"action": "ask_user", "text": "xxx"} # you can ask user for more information to complete the task.
{"action": "double_click", "coordinate": [x, y]}

## Note
- Coordinates go from 0 to 999 on each axis, relative to the screenshot.
- Write a small plan and finally summarize your next action (with its target element) in one sentence in <thinking></thinking> part.
- You should use the `open` action to open an app, because it is the fast way to open the app."""

# GUI-Owl-1.5's response format (gui_owl.py, Mobile-Agent-v3.5).
OWL15_FORMAT = """

# Response format

Response format for every step:
1) Action: a short imperative describing what to do in the UI.
2) A single <tool_call>...</tool_call> block containing only the JSON: {"name": <function-name>, "arguments": <args-json-object>}.

Rules:
- Output exactly in the order: Action, <tool_call>.
- Be brief: one for Action.
- Do not output anything else outside those two parts.
- If finishing, use action=terminate in the tool call."""

_SCROLL: dict[str, Operation] = {"up": PageDown(), "down": PageUp(), "left": Swipe("left"), "right": Swipe("right")}


def _coord(args: Mapping[str, Any], key: str, action: str) -> tuple[int, int]:
    v = args.get(key)
    if isinstance(v, str):
        v = [float(n) for n in v.replace("(", " ").replace(")", " ").replace(",", " ").split()
             if n.replace(".", "", 1).lstrip("-").isdigit()]
    if not isinstance(v, list | tuple) or len(v) not in (2, 4) or not all(
        isinstance(n, int | float) and not isinstance(n, bool) for n in v
    ):
        raise ParseError(f"{action} needs {key}: [x, y] with two numbers, got {v!r}")
    if len(v) == 4:  # a box: act at its centre
        return round((v[0] + v[2]) / 2), round((v[1] + v[3]) / 2)
    return round(v[0]), round(v[1])


def arguments_to_operation(args: Mapping[str, Any], scale: int = 1000) -> Operation:
    """``scale``: the far edge of a relative variant's grid (a swipe from a point stays on it)."""
    action = str(args.get("action", "")).strip().lower()
    if not action:
        raise ParseError('mobile_use needs "action"')
    text = args.get("text")
    text = text.strip() if isinstance(text, str) else ""
    if action in ("click", "tap", "double_click"):
        return TapPoint(*_coord(args, "coordinate", action))
    if action == "long_press":
        return LongPressPoint(*_coord(args, "coordinate", action))
    if action in ("swipe", "drag", "scroll"):
        if "coordinate2" in args or "end_coordinate" in args:
            start = _coord(args, "coordinate" if "coordinate" in args else "start_coordinate", action)
            end = _coord(args, "coordinate2" if "coordinate2" in args else "end_coordinate", action)
            return SwipePoints(*start, *end)
        d = str(args.get("direction", "")).lower()
        if d in _SCROLL and args.get("coordinate"):  # MAI-UI: from that point
            swipe = swipe_toward(*_coord(args, "coordinate", action), d, top=scale)
            assert swipe is not None
            return swipe
        if d in _SCROLL:  # a finger swipe up shows what is below
            return _SCROLL[d]
        raise ParseError(f"{action} needs coordinate and coordinate2 (or a direction)")
    if action == "type":
        if not text:
            raise ParseError('type needs "text"')
        return TypeText(" ".join(text.split()))
    if action == "clear":  # ours: the field keeps its old text otherwise
        return Clear()
    if action in ("key", "system_button"):
        key = (args.get("button") if action == "system_button" else text) or text
        k = str(key).strip().lower()
        if k == "back":
            return Back()
        if k == "home":
            return Exit()
        if k == "enter":
            return Enter()
        if k == "clear":
            return Clear()
        raise ParseError(f"{action} {key!r} is not supported: use Back, Home or Enter")
    if action in ("open", "awake", "open_app"):
        text = text or str(args.get("app_name") or "").strip()
        if not text:
            raise ParseError('open needs "text": the app name')
        return OpenApp(text)
    if action == "wait":
        return Wait()
    if action in ("answer", "terminate"):
        return Stop()
    if action in ("call_user", "calluser", "interact", "ask_user", "info"):
        return Ask(text or "I need your help to continue.")
    raise ParseError(f"unknown mobile_use action {action!r}")


def _decode_args(raw: object) -> Mapping[str, Any]:
    if isinstance(raw, str):
        try:
            raw = msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise ParseError(f"the tool call's arguments are not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ParseError("the tool call's arguments must be a JSON object")
    return raw


def _check_block(body: str, text: str) -> None:
    """The last ``<tool_call>`` block must be one JSON object (an extra closing brace is
    forgiven); JSON made invalid by a comment is re-asked, not read from its inner object."""
    if "<tool_call>" not in body:
        return
    block = body.rsplit("<tool_call>", 1)[1].split("</tool_call>")[0]
    start, end = block.find("{"), block.rfind("}")
    if start < 0 or end < start:
        return
    raw = block[start:end + 1]
    for _ in range(3):
        try:
            msgspec.json.decode(raw)
            return
        except msgspec.DecodeError:
            if not raw.endswith("}}"):
                break
            raw = raw[:-1]
    raise ParseError("the <tool_call> is not one JSON object (no comments, no extra text): "
                     'answer with <tool_call>{"name": "mobile_use", "arguments": {...}}</tool_call>', text)


class QwenFamily(FamilyBase):
    name = "qwen"

    def __init__(self, variant: str = "2.5", max_image_side: int | None = None) -> None:
        super().__init__(max_image_side)
        if variant not in ("2.5", "3", "owl1.5", "mai"):
            raise ValueError(f"unknown Qwen-VL variant {variant!r}: 2.5, 3, owl1.5 or mai")
        self.variant = variant
        self.scale = 999 if variant == "mai" else 1000
        if variant == "mai":
            self.system_prompt = MAI_SYSTEM
            return
        if variant == "owl1.5":  # its trained wording, and its Action line before the call
            self.system_prompt = SYSTEM.replace("{width}x{height}{coords}", "1000x1000") + OWL15_FORMAT
            return
        coords = "" if variant == "2.5" else "; coordinates are relative, 0 to 1000 on each axis"
        self.system_prompt = SYSTEM.replace("{coords}", coords)

    def geometry(self, screen_w: int, screen_h: int) -> Geometry:
        # The server smart-resizes the image it receives; Qwen2.5-VL answers in that size.
        sw, sh = self.sent_size(screen_w, screen_h)
        if self.variant == "2.5":
            h, w = smart_resize(sh, sw, factor=28, min_pixels=3136, max_pixels=12845056)
            return Geometry(screen_w, screen_h, w, h, "image", sent_w=sw, sent_h=sh)
        h, w = smart_resize(sh, sw, factor=32, min_pixels=4096, max_pixels=16777216)
        return Geometry(screen_w, screen_h, w, h, "relative", self.scale, sent_w=sw, sent_h=sh)

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        if tool_calls:
            call = tool_calls[-1]
            op = arguments_to_operation(_decode_args(call.arguments), self.scale)
            return FamilyReply(op, "", call.arguments)
        thinking = ""
        if self.variant == "mai":  # its thinking tags; a thinking model's bare </think>
            text = re.sub(r"<(/?)grounding_think>", r"<\1thinking>", text)
            blocks = re.findall(r"(?s)<thinking>(.*?)</thinking>", text)
            thinking = re.sub(r"(?i)^\s*thought\s*:", "", blocks[-1]).strip() if blocks else ""
        # Keep the <tool_call> content: only thinking is dropped before looking for JSON.
        body = strip_reasoning(normalize_punctuation(text))
        wanted = ("arguments", "action", "coordinate") if self.variant == "mai" else ("arguments", "action")
        calls = [o for o in json_objects(body) if any(k in o for k in wanted)]
        if not calls and '\\"' in body:  # copied from a JSON log: {\"name\": ...}
            body = body.replace('\\"', '"').replace("\\n", "\n")
            calls = [o for o in json_objects(body) if any(k in o for k in wanted)]
        if not calls:
            if "<tool_call>" in body and "}" not in body.split("<tool_call>")[-1]:
                raise ParseError("the <tool_call> is cut off before its JSON ends", text)
            raise ParseError(
                'no tool call found: answer with <tool_call>{"name": "mobile_use", '
                '"arguments": {"action": ...}}</tool_call>', text,
            )
        _check_block(body, text)
        obj = calls[-1]
        args = _decode_args(obj["arguments"]) if "arguments" in obj else obj
        if "action" not in args and "coordinate" in args:  # a grounding answer: a bare point
            args = {"action": "click", **args}
        thought = thinking or (clean_reply(body.split("<tool_call>")[0]) if "<tool_call>" in body else "")
        thought = re.sub(r"(?is)^\s*action\s*:\s*", "", thought)  # GUI-Owl-1.5's Action line
        return FamilyReply(arguments_to_operation(args, self.scale), thought, msgspec.json.encode(obj).decode())
