"""``grounding``: the grounding models used in GUI agents, one family with a variant each.
They answer where an element is: a point or a box. As ``llm.roles.grounder`` each gets its
trained grounding prompt (``grounding_prompt``); named as the planner (by mistake, or by
design for single-tap tasks) a reply is read as what it is, a tap on the point or the box's
centre, and the log and ``mobagent llm check`` warn that the model cannot type, scroll or
open an app (``GROUNDING_ONLY``). Two checkpoints that also navigate keep their action
format as planners: OS-Atlas Pro and ShowUI (``navigates``).

=============== ============================================ ===========================================
variant         the reply                                    coordinates; source
=============== ============================================ ===========================================
seeclick        ``(0.17,0.06)`` (a box: four numbers);       0..1 of the image; github.com/njucckevin/
                agent tasks ``{"action_type": 4,             SeeClick ``readme.md`` (prompt and replies),
                "click_point": (0.49,0.40)}``                ``agent_tasks/aitw_process.py``
os-atlas        ``<|object_ref_start|>language switch        0..1000; github.com/OS-Copilot/OS-Atlas
                <|object_ref_end|><|box_start|>(576,12),     ``README.md`` (Base-7B)
                (592,42)<|box_end|>``; a point ``(x,y)``
os-atlas-pro    ``thoughts:`` / ``actions:`` ``CLICK         0..1000; OS-Atlas ``eval/data/*.jsonl``
                <point>[[950,87]]</point>``, ``LONG_PRESS``, (the Pro prompt and its answers),
                ``TYPE [text]``, ``SCROLL [UP]``,            ``eval/eval_scripts/android_control``
                ``OPEN_APP [app]``, ``PRESS_BACK``,
                ``PRESS_HOME``, ``WAIT``, ``COMPLETE``
showui          ``[0.73, 0.21]``; navigation ``{'action':    0..1; github.com/showlab/ShowUI
                'CLICK', 'value': None, 'position': [0.49,   ``QUICK_START.md`` (``_SYSTEM``,
                0.42]}`` (TAP, INPUT, SWIPE, SCROLL, ENTER,  ``_NAV_SYSTEM``, ``_NAV_FORMAT``)
                ANSWER), several dicts a reply
uground         ``(x, y)``                                   0..1000; github.com/OSU-NLP-Group/UGround
                                                             ``README.md`` (UGround-V1, Qwen2-VL)
aria-ui         ``[x, y]``                                   0..1000; github.com/AriaUI/Aria-UI
                                                             ``README.md``
jedi            Qwen2.5-VL's ``<tool_call>{"name":           pixels of the smart-resize (factor 28);
                "computer_use", "arguments": {"action":      xlang-ai Jedi (OSWorld-G) model card
                "left_click", "coordinate": [x, y]}}``
gta1            ``(x,y)``                                    pixels of the smart-resize (factor 28,
                                                             max 4096x2160); github.com/Yan98/GTA1
                                                             ``README.md``
gui-actor       ``[0.9709, 0.1548]`` (its action head's      0..1; github.com/microsoft/GUI-Actor
                point as its inference prints it; the text   ``README.md``
                ``<|pointer_pad|>`` holds none: refused)
venus-ground    ``[x1,y1,x2,y2]``                            pixels of the smart-resize (factor 28);
                                                             github.com/inclusionAI/UI-Venus README
plain           ``[x, y]`` / ``(x, y)`` from a general model pixels of the image sent
=============== ============================================ ===========================================

The model name picks the variant (``grounding_variant``); UI-Venus-Ground and OS-Atlas Base
read as grounders, UI-Venus-Navi (``venus``) and OS-Atlas Pro as navigators.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from models.llm.errors import ParseError
from models.llm.families.base import FamilyBase, FamilyReply, Geometry, ToolCall, smart_resize
from models.llm.families.dicts import objects
from models.llm.families.mouse import first_of, mouse_operation
from models.llm.replytext import normalize_punctuation, strip_reasoning
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

GROUNDING_ONLY = ("a grounding model: it can only point at an element, so every reply is read "
                  "as a tap; it cannot type, scroll, go back or open an app. Use it as "
                  "llm.roles.grounder beside a planner family")

VARIANTS = ("seeclick", "os-atlas", "os-atlas-pro", "showui", "uground", "aria-ui", "jedi", "gta1",
            "gui-actor", "venus-ground", "plain")
# 0..1 answers, read on a 0..10000 grid (the operations hold integers; a 0..1000 grid would
# move a point by up to 1.2 px on a 2400-pixel screen).
UNIT_GRID = 10000
_UNIT = {"seeclick", "showui", "gui-actor"}
_PERMILLE = {"os-atlas", "os-atlas-pro", "uground", "aria-ui"}
# smart-resize parameters (factor, min_pixels, max_pixels) of the Qwen2.5-VL based ones
_RESIZE = {"jedi": (28, 3136, 12845056), "gta1": (28, 3136, 4096 * 2160),
           "venus-ground": (28, 3136, 12845056)}


def grounding_variant(model: str) -> str | None:
    """The grounding variant a served name implies, None for none."""
    m = model.lower()
    for pat, v in ((r"seeclick", "seeclick"), (r"os-?atlas.*pro", "os-atlas-pro"), (r"os-?atlas", "os-atlas"),
                   (r"showui", "showui"), (r"uground", "uground"), (r"aria-?ui", "aria-ui"),
                   (r"\bjedi-", "jedi"), (r"gta1", "gta1"), (r"gui-?actor", "gui-actor"),
                   (r"venus-?ground", "venus-ground")):
        if re.search(pat, m):
            return v
    return None


# -- the trained grounding prompts (their sources in the table above); {target} is the
# element, {w} {h} the image's size where the prompt states it.
PROMPTS = {
    "seeclick": 'In this UI screenshot, what is the position of the element corresponding to the command '
                '"{target}" (with point)?',
    "os-atlas": 'In this UI screenshot, what is the position of the element corresponding to the command '
                '"{target}" (with bbox)?',
    "os-atlas-pro": 'In this UI screenshot, what is the position of the element corresponding to the command '
                    '"{target}" (with point)?',
    "showui": "Based on the screenshot of the page, I give a text description and you give its corresponding "
              "location. The coordinate represents a clickable location [x, y] for an element, which is a "
              "relative coordinate on the screenshot, scaled from 0 to 1.\n{target}",
    "uground": "Your task is to help the user identify the precise coordinates (x, y) of a specific "
               "area/element/object on the screen based on a description.\n\n- Your response should aim to "
               "point to the center or a representative point within the described area/element/object as "
               "accurately as possible.\n- If the description is unclear or ambiguous, infer the most relevant "
               "area or element based on its likely context or purpose.\n- Your answer should be a single "
               "string (x, y) corresponding to the point of the interest.\n\nDescription: {target}\n\nAnswer:",
    "aria-ui": "Given a GUI image, what are the relative (0-1000) pixel point coordinates for the element "
               "corresponding to the following instruction or description: {target}",
    "jedi": "You are a helpful assistant. The screen's resolution is {w}x{h}. Click the element described "
            "below with the computer_use function, answering <tool_call>{{\"name\": \"computer_use\", "
            "\"arguments\": {{\"action\": \"left_click\", \"coordinate\": [x, y]}}}}</tool_call>.\n{target}",
    "gta1": "You are an expert UI element locator. Given a GUI image and a user's element description, provide "
            "the coordinates of the specified element as a single (x,y) point. The image resolution is height "
            "{h} and width {w}. For elements with area, return the center point.\n\nOutput the coordinate pair "
            "exactly:\n(x,y)\n{target}",
    "gui-actor": "Locate the element for this instruction and answer its point [x, y], 0 to 1 of the "
                 "screenshot.\n{target}",
    "venus-ground": "Outline the position corresponding to the instruction: {target}. The output should be "
                    "only [x1,y1,x2,y2].",
    "plain": "Find the user interface element described below in the screenshot and answer the point to tap "
             "on it as [x, y], in pixels of this {w}x{h} screenshot, and nothing else.\n{target}",
}

_NUM = r"-?\d+(?:\.\d+)?"
_BOX_TOKENS = re.compile(rf"<\|box_start\|>\s*\(\s*({_NUM})\s*,\s*({_NUM})\s*\)"
                         rf"(?:\s*,\s*\(\s*({_NUM})\s*,\s*({_NUM})\s*\))?\s*<\|box_end\|>")
_POINT_TAG = re.compile(rf"<point>\s*\[?\[?\s*({_NUM})\s*,\s*({_NUM})\s*\]?\]?\s*</point>")
_GROUP = re.compile(rf"[\[(]\s*({_NUM}(?:\s*,\s*{_NUM}){{1,3}})\s*[\])]")
_NONE = re.compile(r"^\W*(none|not found|not (?:on|in) the (?:screen|screenshot))\W*$", re.I)
_KEYS = ("point_2d", "coordinate", "click_point", "point", "position", "bbox_2d", "bbox", "box")


def _nums(v: object) -> list[float] | None:
    if isinstance(v, list | tuple) and len(v) == 2 and all(isinstance(p, list | tuple) for p in v):
        v = [*v[0], *v[1]]  # [[x1, y1], [x2, y2]]
    if isinstance(v, list | tuple) and len(v) in (2, 4) and all(
            isinstance(n, int | float) and not isinstance(n, bool) for n in v):
        return [float(n) for n in v]
    return None


def read_numbers(text: str) -> list[float] | None:
    """The point (2 numbers) or box (4) of a grounding reply in the model's own numbers: the
    box tokens, ``<point>[[x,y]]</point>``, an object (``coordinate``, ``click_point``,
    ``position``, ``bbox``, ``x``/``y``), or the last ``(x, y)`` / ``[x, y]`` /
    ``[x1, y1, x2, y2]``; None for a "not there" answer; ``ParseError`` for none of these."""
    body = strip_reasoning(normalize_punctuation(text)).strip()
    if _NONE.match(body):
        return None
    if "<|pointer_pad|>" in body or "<ACTOR>" in body:
        raise ParseError("the reply's point is in GUI-Actor's action head, not its text: serve it so "
                         "that it answers the head's point [x, y]")
    boxes = list(_BOX_TOKENS.finditer(body))
    if boxes:
        return [float(g) for g in boxes[-1].groups() if g is not None]
    tags = list(_POINT_TAG.finditer(body))
    if tags:
        return [float(tags[-1][1]), float(tags[-1][2])]
    for obj in reversed(objects(body.replace("[{", "{").replace("}]", "}"))):
        args = obj.get("arguments") if isinstance(obj.get("arguments"), dict) else obj
        if isinstance(args.get("x"), int | float) and isinstance(args.get("y"), int | float):
            return [float(args["x"]), float(args["y"])]
        for key in _KEYS:
            found = _nums(args.get(key))
            if found is not None:
                return found
    groups = list(_GROUP.finditer(body))
    if groups:
        nums = [float(n) for n in re.findall(_NUM, groups[-1].group(1))]
        if len(nums) in (2, 4):
            return nums
    raise ParseError("no point or box in the reply: answer the element's point", text)


class GroundingFamily(FamilyBase):
    name = "grounding"

    def __init__(self, variant: str = "plain", max_image_side: int | None = None) -> None:
        super().__init__(max_image_side)
        if variant not in VARIANTS:
            raise ValueError(f"unknown grounding variant {variant!r}: {', '.join(VARIANTS)}")
        self.variant = variant
        # OS-Atlas Pro and ShowUI also navigate: their action formats are read as planners.
        self.navigates = variant in ("os-atlas-pro", "showui")
        self.limitation = "" if self.navigates else GROUNDING_ONLY
        self._size = (0, 0)

    def geometry(self, screen_w: int, screen_h: int) -> Geometry:
        sw, sh = self.sent_size(screen_w, screen_h)
        if self.variant in _UNIT:
            g = Geometry(screen_w, screen_h, sw, sh, "relative", UNIT_GRID)
        elif self.variant in _PERMILLE:
            g = Geometry(screen_w, screen_h, sw, sh, "relative", 1000)
        elif self.variant in _RESIZE:
            f, lo, hi = _RESIZE[self.variant]
            h, w = smart_resize(sh, sw, factor=f, min_pixels=lo, max_pixels=hi)
            g = Geometry(screen_w, screen_h, w, h, "image", sent_w=sw, sent_h=sh)
        else:
            g = Geometry(screen_w, screen_h, sw, sh, "image")
        self._size = (g.image_w, g.image_h)
        return g

    def grounding_prompt(self, target: str, geom: Geometry) -> str:
        """The trained grounding question for ``target``."""
        return PROMPTS[self.variant].format(target=target, w=geom.image_w, h=geom.image_h)

    def to_model_space(self, nums: list[float]) -> list[float]:
        """The model's numbers on the geometry's grid: 0..1 answers times UNIT_GRID."""
        if self.variant in _UNIT:
            if any(abs(n) > 1.5 for n in nums):
                raise ParseError(f"{self.variant} answers 0..1 of the screenshot, got {nums}")
            return [n * UNIT_GRID for n in nums]
        return nums

    def read_point(self, text: str) -> list[float] | None:
        """A grounding reply's point or box on the geometry's grid; None for "not there"."""
        nums = read_numbers(text)
        return None if nums is None else self.to_model_space(nums)

    @property
    def system_prompt(self) -> str:  # type: ignore[override]  # per variant
        if self.variant == "os-atlas-pro":
            return _ATLAS_PRO
        if self.variant == "showui":
            return _SHOWUI_NAV
        return ("Your target is the element the user's task needs next on this {width}x{height} "
                "screenshot.\n" + PROMPTS[self.variant].format(target="(the task below)", w="{width}",
                                                               h="{height}"))

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        if self.variant == "os-atlas-pro":
            nav = _atlas_pro(text)
            if nav is not None:
                return nav
        if self.variant == "showui":
            nav = _showui(text)
            if nav is not None:
                return nav
        nums = self.read_point(text)
        if nums is None:
            raise ParseError("the model found no element to tap (NONE): a grounding model cannot do "
                             "anything else here")
        if len(nums) == 4:
            nums = [(nums[0] + nums[2]) / 2, (nums[1] + nums[3]) / 2]
        return FamilyReply(TapPoint(round(nums[0]), round(nums[1])), "", text.strip()[:200])


# -- OS-Atlas Pro: the navigation format (its prompt's actions), 0..1000

_ATLAS_PRO = """You are a foundational action model capable of automating tasks across various digital \
environments. You are operating an Android phone: the screenshot is its touch screen, coordinates 0-1000.
Basic Action 1: CLICK
    - purpose: Click at the specified position.
    - format: CLICK <point>[[x-axis, y-axis]]</point>
Basic Action 2: TYPE
    - purpose: Enter specified text at the designated location.
    - format: TYPE [input text]
Basic Action 3: SCROLL
    - purpose: Scroll in the specified direction.
    - format: SCROLL [direction (UP/DOWN/LEFT/RIGHT)]
Custom Action 1: LONG_PRESS
    - format: LONG_PRESS <point>[[x-axis, y-axis]]</point>
Custom Action 2: PRESS_BACK
Custom Action 3: PRESS_HOME
Custom Action 4: OPEN_APP
    - format: OPEN_APP [app_name]
Custom Action 5: ENTER
Custom Action 6: WAIT
Custom Action 7: COMPLETE
Ensure you strictly generate two sections: Thoughts and Actions.
thoughts:
<your reasoning for the current step>
actions:
<one action>"""

_ATLAS_POINT = re.compile(rf"<point>\s*\[\[\s*({_NUM})\s*,\s*({_NUM})\s*\]\]\s*</point>")
# ``SCROLL [UP]``: OS-Atlas's scroll moves the view (AndroidControl's scroll direction):
# UP shows what is above.
_ATLAS_SCROLL: dict[str, Operation] = {"UP": PageUp(), "DOWN": PageDown(), "LEFT": Swipe("right"),
                                       "RIGHT": Swipe("left")}


_ATLAS_NULLARY: dict[str, Operation] = {"PRESS_BACK": Back(), "PRESS_HOME": Exit(), "ENTER": Enter(),
                                        "PRESS_ENTER": Enter(), "WAIT": Wait(), "COMPLETE": Stop()}


def _atlas_pro(text: str) -> FamilyReply | None:
    body = strip_reasoning(normalize_punctuation(text))
    m = re.search(r"(?is)actions?\s*:\s*\n?(.*)$", body)
    if m is None:
        return None
    lines = [ln.strip() for ln in m.group(1).strip().splitlines() if ln.strip()]
    th = re.search(r"(?is)thoughts?\s*:\s*(.*?)\n\s*actions?\s*:", body)
    thought = th.group(1).strip() if th else ""
    ops: list[tuple[Operation, str]] = []
    for ln in lines:
        word = ln.split()[0].upper().rstrip(":")
        arg = re.search(r"\[(.*)\]", ln)
        pt = _ATLAS_POINT.search(ln)
        op: Operation
        if word in ("CLICK", "TAP") and pt:
            op = TapPoint(round(float(pt[1])), round(float(pt[2])))
        elif word == "LONG_PRESS" and pt:
            op = LongPressPoint(round(float(pt[1])), round(float(pt[2])))
        elif word == "TYPE" and arg and arg.group(1).strip():
            op = TypeText(arg.group(1).strip())
        elif word == "SCROLL" and arg and arg.group(1).strip().upper() in _ATLAS_SCROLL:
            op = _ATLAS_SCROLL[arg.group(1).strip().upper()]
        elif word == "OPEN_APP" and arg and arg.group(1).strip():
            op = OpenApp(arg.group(1).strip())
        elif word in _ATLAS_NULLARY and len(ln.split()) == 1:
            op = _ATLAS_NULLARY[word]
        else:
            raise ParseError(f"cannot read the action {ln[:80]!r}: CLICK <point>[[x, y]]</point>, TYPE [text], "
                             "SCROLL [UP], OPEN_APP [app], PRESS_BACK, PRESS_HOME, WAIT, COMPLETE")
        ops.append((op, ln))
    if not ops:
        raise ParseError("the actions section is empty: give one action")
    op0, dropped = first_of(ops)
    return FamilyReply(op0, thought, ops[0][1], dropped=dropped)


# -- ShowUI: the navigation dicts, 0..1 (read on 0..1000)

_SHOWUI_NAV = """You are an assistant trained to navigate the phone screen ({width}x{height} touch screen).
Given a task instruction, a screen observation, and an action history sequence,
output the next action and wait for the next observation.
Here is the action space:
1. `INPUT`: Type a string into an element, value is a string to type and the position [x,y] is required.
2. `SWIPE`: Swipe the screen, value is not applicable and the position [[x1,y1], [x2,y2]] is the start and end position of the swipe operation.
3. `TAP`: Tap on an element, value is not applicable and the position [x,y] is required.
4. `ANSWER`: Answer the question, value is the status (e.g., 'task complete') and the position is not applicable.
5. `ENTER`: Enter operation, value and position are not applicable.

Format the action as a dictionary with the following keys:
{'action': 'ACTION_TYPE', 'value': 'element', 'position': [x,y]}

If value or position is not applicable, set it as `None`.
Position might be [[x1,y1], [x2,y2]] if the action requires a start and end position.
Position represents the relative coordinates on the screenshot and should be scaled to a range of 0-1.
Give one action: only the first is run."""

_SHOWUI_SCROLL: dict[str, Operation] = {"down": PageDown(), "up": PageUp(), "left": Swipe("right"),
                                        "right": Swipe("left")}


def _k(v: float) -> int:
    if abs(v) > 1.5:
        raise ParseError(f"ShowUI's position is 0..1 of the screenshot, got {v}")
    return round(v * UNIT_GRID)


def _showui(text: str) -> FamilyReply | None:
    dicts = [o for o in objects(strip_reasoning(text)) if isinstance(o.get("action"), str)]
    if not dicts:
        return None
    ops: list[tuple[Operation, str]] = []
    for d in dicts:
        kind = str(d["action"]).strip().upper()
        pos, value = d.get("position"), d.get("value")
        pt = _nums(pos)
        op: Operation
        if kind in ("CLICK", "TAP", "SELECT", "HOVER", "DOUBLE_CLICK", "RIGHT_CLICK"):
            if pt is None or len(pt) != 2:
                raise ParseError(f"{kind} needs its position [x, y] (0..1)")
            name = {"CLICK": "click", "TAP": "click", "SELECT": "click"}.get(kind, kind.lower())
            op = mouse_operation(name, _k(pt[0]), _k(pt[1]))
        elif kind == "INPUT":
            if not isinstance(value, str) or not value.strip():
                raise ParseError("INPUT needs the text to type as its value")
            op = TypeText(value.strip())
        elif kind == "SWIPE":
            if pt is None or len(pt) != 4:
                raise ParseError("SWIPE needs its position [[x1,y1], [x2,y2]] (0..1)")
            op = SwipePoints(_k(pt[0]), _k(pt[1]), _k(pt[2]), _k(pt[3]))
        elif kind == "SCROLL":
            d_ = str(value or "").strip().lower()
            if d_ not in _SHOWUI_SCROLL:
                raise ParseError(f"SCROLL needs its direction as the value (up, down, left, right), got {value!r}")
            op = _SHOWUI_SCROLL[d_]
        elif kind == "ENTER":
            op = Enter()
        elif kind == "ANSWER":
            op = Stop()
        else:
            raise ParseError(f"unknown ShowUI action {kind!r}: TAP, INPUT, SWIPE, SCROLL, ENTER, ANSWER")
        ops.append((op, str(d)))
    op0, dropped = first_of(ops)
    return FamilyReply(op0, "", ops[0][1], dropped=dropped)
