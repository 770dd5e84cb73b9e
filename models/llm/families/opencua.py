"""``opencua``: OpenCUA (xlangai, github.com/xlang-ai/OpenCUA): ``## Thought:`` /
``## Action:`` (the step in words) / ``## Code:`` with a fenced ``python`` block of
``pyautogui`` calls, or the functions its prompt adds (``computer.triple_click``,
``computer.terminate(status=...)``), as the OSWorld agent and AgentNetBench read them
(``evaluation/agentnetbench/agent/opencua.py``: the L1/L2/L3 system prompts and response
templates; the model README's grounding example answers ``pyautogui.click(x=1443, y=343)``).

The code is read as Python (``ast``), never run. Each call goes through the one mouse
table (``families/mouse.py``): ``click`` / ``doubleClick`` / ``tripleClick`` /
``computer.triple_click`` tap, ``rightClick`` long-presses, ``moveTo`` then ``dragTo`` is a
swipe, ``scroll(-n)`` (negative: down) shows what is below, ``write`` / ``typewrite`` types,
``press('enter')`` submits, ``hotkey('ctrl', 'o')`` is refused with the reason. The phone's
own actions are declared in the prompt in the same function style: ``computer.open_app``,
``computer.back``, ``computer.home``, ``computer.wait``, ``computer.ask``. Several calls in
one block: the first runs, the rest are recorded as dropped (a ``moveTo`` right before a
``dragTo`` is part of the drag).

Coordinates (the model README, "Important Notes on Coordinate Systems"): OpenCUA-7B / 32B
/ 72B (Qwen2.5-VL) answer pixels of the screenshot smart-resized with factor 28,
min_pixels 3136, max_pixels 12845056; OpenCUA-Qwen2-7B answers 0..1 of the image (read on
an integer grid of 0..10000 here, fine enough for
any screen's pixels). The model name picks the variant.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Any

from models.llm.errors import ParseError
from models.llm.families.base import FamilyBase, FamilyReply, Geometry, ToolCall, smart_resize
from models.llm.families.mouse import (
    drag_operation,
    first_of,
    key_operation,
    mouse_operation,
    scroll_operation,
)
from models.llm.replytext import strip_reasoning
from protocol.operations import Ask, Back, Exit, OpenApp, Operation, Stop, TypeText, Wait

# 0..1 answers are read on this integer grid (the operations hold integers): a quarter of a
# pixel on a 2400-pixel screen, where a 0..1000 grid would move a point by up to 1.2 px.
UNIT_GRID = 10000

_FN = '{{"name": "computer.{name}", "description": "{what}", "parameters": {{"type": "object", "properties": {{{props}}}, "required": [{req}]}}}}'


def _fn(name: str, what: str, props: str = "", req: str = "") -> str:
    return "- " + _FN.format(name=name, what=what, props=props, req=req)


SYSTEM = (
    "You are a GUI agent. You are given a task and a screenshot of the screen. You need to perform a "
    "series of pyautogui actions to complete the task.\n\n"
    "The screen is an Android phone's touch screen, {width}x{height} pixels: x, y are {convention}. "
    "pyautogui.click taps, pyautogui.rightClick touches and holds, pyautogui.moveTo then "
    "pyautogui.dragTo swipes, pyautogui.scroll scrolls (negative: down), pyautogui.write types into "
    "the focused field, pyautogui.press('enter') submits; a phone has no keyboard shortcuts. Give one "
    "action a step: only the first line of code is run.\n\n"
    "For each step, provide your response in this format:\n\n"
    "Thought:\n  - Step by Step Progress Assessment and Next Action Analysis, in first person\n\n"
    "Action:\n  Provide clear, concise, and actionable instructions.\n\n"
    "Finally, output the action as PyAutoGUI code or the following functions:\n"
    + "\n".join([
        _fn("triple_click", "Triple click on the screen",
            '"x": {"type": "number", "description": "The x coordinate of the triple click"}, '
            '"y": {"type": "number", "description": "The y coordinate of the triple click"}', '"x", "y"'),
        _fn("open_app", "Open the app whose home-screen label is name",
            '"name": {"type": "string", "description": "The app name"}', '"name"'),
        _fn("back", "Go back to the previous screen"),
        _fn("home", "Go to the home screen"),
        _fn("wait", "Wait for the screen to load"),
        _fn("ask", "Ask the user a question you need answered to continue",
            '"question": {"type": "string", "description": "The question"}', '"question"'),
        _fn("terminate", "Terminate the current task and report its completion status",
            '"status": {"type": "string", "enum": ["success", "failure"], "description": "The status of the task"}',
            '"status"'),
    ])
)

_FENCE = re.compile(r"```(?:python|py)?\s*\n?(.*?)(?:```|$)", re.S)
_CODE_LABEL = re.compile(r"(?im)^\s*#*\s*code\s*:?\s*$")
_LABEL = re.compile(r"(?im)^\s*#{0,3}\s*(thought|action|observation|code)\s*:?\s*(.*)$")


def _code(text: str) -> str:
    """The reply's code: the ``## Code:`` section's fenced block, else the last fenced block,
    else the lines that call pyautogui / computer."""
    m = _CODE_LABEL.search(text)
    tail = text[m.end():] if m else text
    blocks = [b for b in _FENCE.findall(tail) if b.strip()]
    if blocks:
        return blocks[-1] if m is None else blocks[0]
    lines = [ln.strip() for ln in tail.splitlines()
             if re.match(r"\s*(?:pyautogui|computer)\.\w+\s*\(", ln)]
    if not lines:
        raise ParseError("no code found: end the reply with ## Code: and one pyautogui call in a "
                         "```python block (or computer.terminate(status='success') when done)", text)
    return "\n".join(lines)


def _sections(text: str) -> dict[str, str]:
    """``## Observation:`` / ``## Thought:`` / ``## Action:`` sections by label (the last of
    each), their text on the label's line and the lines up to the next label."""
    out: dict[str, str] = {}
    marks = list(_LABEL.finditer(text))
    for k, m in enumerate(marks):
        end = marks[k + 1].start() if k + 1 < len(marks) else len(text)
        out[m.group(1).lower()] = (m.group(2) + "\n" + text[m.end():end]).strip()
    return out


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ParseError(f"only literal arguments can be read: {ast.unparse(node)!r}") from None


class _Call:
    def __init__(self, node: ast.Call, text: str) -> None:
        f = node.func
        if not isinstance(f, ast.Attribute) or not isinstance(f.value, ast.Name):
            raise ParseError(f"not a pyautogui call: {text!r}")
        self.module, self.name, self.text = f.value.id, f.attr, text
        self.args = [_literal(a) for a in node.args]
        self.kw = {k.arg: _literal(k.value) for k in node.keywords if k.arg}

    def get(self, i: int, key: str, default: Any = None) -> Any:
        return self.kw.get(key, self.args[i] if len(self.args) > i else default)


def _calls(code: str) -> list[_Call]:
    try:
        tree = ast.parse(code.strip())
    except SyntaxError as exc:
        raise ParseError(f"the code does not parse as Python ({exc.msg}): give one complete call") from None
    out: list[_Call] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            out.append(_Call(stmt.value, ast.unparse(stmt)))
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            continue
        else:
            raise ParseError(f"only pyautogui calls are run, not {ast.unparse(stmt)[:60]!r}")
    if not out:
        raise ParseError("the code holds no call: give one pyautogui call")
    return out


class OpenCUAFamily(FamilyBase):
    name = "opencua"

    def __init__(self, variant: str = "qwen25", max_image_side: int | None = None) -> None:
        super().__init__(max_image_side)
        if variant not in ("qwen25", "qwen2"):
            raise ValueError(f"unknown OpenCUA variant {variant!r}: qwen25 (7B/32B/72B) or qwen2")
        self.variant = variant
        convention = ("relative: 0.0 to 1.0 of the screenshot's width and height" if variant == "qwen2"
                      else "pixels of this screenshot")
        self.system_prompt = SYSTEM.replace("{convention}", convention)

    def geometry(self, screen_w: int, screen_h: int) -> Geometry:
        sw, sh = self.sent_size(screen_w, screen_h)
        if self.variant == "qwen2":
            return Geometry(screen_w, screen_h, sw, sh, "relative", UNIT_GRID)
        h, w = smart_resize(sh, sw, factor=28, min_pixels=3136, max_pixels=12845056)
        return Geometry(screen_w, screen_h, w, h, "image", sent_w=sw, sent_h=sh)

    def _xy(self, call: _Call) -> tuple[int, int]:
        x, y = call.get(0, "x"), call.get(1, "y")
        if isinstance(x, list | tuple) and len(x) == 2:  # click((x, y))
            x, y = x
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (x, y)):
            raise ParseError(f"{call.name} needs x and y: a phone has no cursor to act at ({call.text[:80]})")
        scale = UNIT_GRID if self.variant == "qwen2" else 1  # 0..1 read on the integer grid
        return round(x * scale), round(y * scale)

    def _operation(self, call: _Call, prev: _Call | None) -> Operation | None:
        """One call -> its operation; None for a ``moveTo`` that the next ``dragTo`` uses."""
        n = call.name.lower()
        if call.module == "computer":
            if n in ("triple_click", "tripleclick"):
                return mouse_operation("triple_click", *self._xy(call))
            if n == "terminate":
                return Stop()
            if n == "open_app":
                app = str(call.get(0, "name", "") or call.get(0, "app_name", "")).strip()
                if not app:
                    raise ParseError("computer.open_app needs name")
                return OpenApp(app)
            if n == "back":
                return Back()
            if n == "home":
                return Exit()
            if n == "wait":
                return Wait()
            if n == "ask":
                return Ask(str(call.get(0, "question", "")).strip() or "I need your help to continue.")
            raise ParseError(f"unknown function computer.{call.name}: use pyautogui, or computer.open_app, "
                             "back, home, wait, ask, terminate")
        if call.module != "pyautogui":
            raise ParseError(f"{call.module}.{call.name} is not run: use pyautogui calls")
        if n in ("click", "leftclick"):
            button = str(call.kw.get("button", "left"))
            clicks = call.kw.get("clicks", 1)
            return mouse_operation("double_click" if clicks == 2 and button == "left" else button, *self._xy(call))
        if n in ("doubleclick", "tripleclick", "rightclick", "middleclick"):
            return mouse_operation(n, *self._xy(call))
        if n in ("moveto", "moverel", "mousedown", "mouseup"):
            return None if n == "moveto" else mouse_operation(n, 0, 0)
        if n in ("dragto", "drag"):
            if prev is None or prev.name.lower() != "moveto":
                raise ParseError("a drag needs its start: pyautogui.moveTo(x, y) then pyautogui.dragTo(x, y)")
            return drag_operation([self._xy(prev), self._xy(call)])
        if n in ("scroll", "vscroll", "hscroll"):
            amount = call.get(0, "clicks", 0)
            if not isinstance(amount, int | float) or isinstance(amount, bool):
                raise ParseError(f"{call.name} needs an amount (negative: down)")
            # pyautogui: positive scrolls up; the table wants positive = down
            return scroll_operation(-amount if n == "hscroll" else 0, 0 if n == "hscroll" else -amount)
        if n in ("write", "typewrite"):
            text = call.get(0, "message", "")
            if isinstance(text, list):  # typewrite(['a', 'b']) presses keys
                text = "".join(str(t) for t in text)
            if not isinstance(text, str) or not text.strip():
                raise ParseError(f"{call.name} needs the text to type")
            return TypeText(" ".join(text.split()), submit=text.endswith("\n"))
        if n in ("press", "keydown"):
            keys = call.get(0, "keys", "")
            presses = call.kw.get("presses", 1)
            if isinstance(presses, int) and presses > 1:
                raise ParseError(f"press {keys!r} {presses} times has no phone meaning: one key a step")
            return key_operation([str(k) for k in keys] if isinstance(keys, list) else [str(keys)])
        if n == "hotkey":
            keys = call.kw.get("keys", call.args)
            return key_operation([str(k) for k in keys] if isinstance(keys, list | tuple) else [str(keys)])
        if n == "sleep":
            return Wait()
        raise ParseError(f"pyautogui.{call.name} has no phone meaning: click, rightClick, moveTo+dragTo, "
                         "scroll, write, press")

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        body = strip_reasoning(text)
        calls = _calls(_code(body))
        ops: list[tuple[Operation, str]] = []
        prev: _Call | None = None
        for call in calls:
            op = self._operation(call, prev)
            if op is not None:
                shown = (prev.text + "; " if prev is not None and prev.name.lower() == "moveto"
                         and call.name.lower() in ("dragto", "drag") else "") + call.text
                ops.append((op, shown))
            prev = call
        if not ops:  # a lone moveTo
            raise ParseError("moveTo only moves a cursor, which a phone has not: click to tap, "
                             "moveTo then dragTo to swipe")
        op, dropped = first_of(ops)
        sections = _sections(body)
        return FamilyReply(op, sections.get("thought", "")[:2000], ops[0][1],
                           observation=sections.get("observation", "")[:2000], dropped=dropped)
