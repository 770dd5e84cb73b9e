"""The ``grounder`` role: a grounding model asked where a described element is on a frame.

It gets the target's description (and the planner's thought, as context) with the frame
sent at its family's size, and answers a point or a box in its family's convention
(``Family.geometry``), mapped here to device pixels. Families trained for grounding get a
prompt in their own trained format; the others a generic "answer the point" prompt whose
coordinate convention is the family's. The prompts below follow the formats of their
public sources, named next to each; the wording is ours.

``ModelGrounder.locate`` answers a ``GrounderAnswer``, or None when the model says the
element is not there or its reply holds no point; transport failures raise ``LLMError``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import anyio
import structlog

from models.llm.errors import LLMTimeout, ParseError
from models.llm.families import Family, Geometry, get_family
from models.llm.families.base import resize_png
from models.llm.families.dicts import objects
from models.llm.messages import ChatMessage, ChatModel, ImageInput
from models.llm.replytext import normalize_punctuation, strip_reasoning
from models.llm.settings import LLMSettings

log = structlog.get_logger(__name__)

Point = tuple[int, int]
Box = tuple[int, int, int, int]


@dataclass(frozen=True)
class GrounderAnswer:
    """The grounder's answer in device pixels: the point, and the box when it gave one."""

    point: Point
    box: Box | None = None
    text: str = ""  # the reply as the model wrote it (for the record)


# -- prompts --------------------------------------------------------------------------------

# UI-TARS (github.com/bytedance/UI-TARS, codes/ui_tars/prompt.py: GROUNDING): the action
# space reduced to one click; 1.5 and Doubao answer <point>x y</point>, 1.0 a start_box.
_UITARS = """You are a GUI agent. You are given a screenshot and the element the user needs. \
Output the action that clicks it.

## Output Format

Action: click(point='<point>x1 y1</point>')

## User Instruction
{target}"""
_UITARS_10 = _UITARS.replace("click(point='<point>x1 y1</point>')", "click(start_box='(x1,y1)')")
# Qwen2.5-VL / Qwen3-VL (github.com/QwenLM/Qwen2.5-VL, cookbooks/spatial_understanding):
# a point as JSON with point_2d.
_QWEN = """Locate the element described below in the screenshot and output its point in JSON: \
[{{"point_2d": [x, y], "label": "<name>"}}]. If it is not on the screen, answer NONE.
{target}"""
# MAI-UI (github.com/Tongyi-MAI/MAI-UI, src/prompt.py: MAI_MOBILE_SYS_PROMPT_GROUNDING):
# reasoning in <grounding_think>, the coordinate (0..999) in <answer>.
_MAI = """You are a GUI grounding agent.
## Task
Given a screenshot and a grounding instruction, locate the UI element the instruction names. \
Reason about the instruction first, then give the final coordinate.
## Output Format
Your reasoning in <grounding_think></grounding_think> tags, then the [x,y] coordinate as JSON \
within <answer></answer> tags:
<grounding_think>...</grounding_think>
<answer>
{{"coordinate": [x,y]}}
</answer>
## Input instruction
{target}"""
# UI-Venus-Ground (github.com/inclusionAI/UI-Venus, README "Ground"): a box only.
_VENUS = """Outline the position corresponding to the instruction: {target}. \
The output should be only [x1,y1,x2,y2]."""
# Holo1.5 / Holo2 (huggingface.co/Hcompany/Holo2-8B model card, "localization"): the
# family's own localizer prompt (families/holo.py), then the target.
_HOLO = "{system}\nYour target is: {target}"
_GENERIC = """Find the user interface element described below in the screenshot.
Answer the point to tap on it, and nothing else, as (x, y) {convention}.
If it is not on the screen, answer NONE.
Element: {target}"""


def _convention(geom: Geometry) -> str:
    if geom.convention == "relative":
        return (f"on a 0..{geom.scale} grid over the whole screenshot "
                f"((0, 0) top left, ({geom.scale}, {geom.scale}) bottom right)")
    return f"in pixels of this {geom.image_w}x{geom.image_h} screenshot ((0, 0) top left)"


def grounder_prompt(family: Family, geom: Geometry, target: str) -> str:
    """The grounding question for ``family``: its trained format where it has one."""
    variant = str(getattr(family, "variant", ""))
    match family.name:
        case "uitars":
            return (_UITARS_10 if variant == "1.0" else _UITARS).format(target=target)
        case "qwen":
            return (_MAI if variant == "mai" else _QWEN).format(target=target)
        case "venus":
            return _VENUS.format(target=target)
        case "holo":
            return _HOLO.format(system=getattr(family, "system_prompt", "").strip(),
                                target=target)
        case "grounding":  # SeeClick, OS-Atlas, ShowUI, UGround, ...: each its own prompt
            return str(family.grounding_prompt(target, geom))  # type: ignore[attr-defined]
    return _GENERIC.format(convention=_convention(geom), target=target)


def target_text(description: str, thought: str = "") -> str:
    """The target as the grounder reads it: the description, the planner's thought after."""
    thought = " ".join(thought.split())[:600]
    return description + (f"\n(The agent's reasoning: {thought})" if thought else "")


def grounder_messages(family: Family, geom: Geometry, description: str, thought: str,
                      screenshot: bytes) -> list[ChatMessage]:
    """One user message: the frame at the family's size, then the question."""
    shot = resize_png(screenshot, geom.sent_size)
    prompt = grounder_prompt(family, geom, target_text(description, thought))
    return [ChatMessage("user", (ImageInput(shot), prompt))]


# -- the reply -------------------------------------------------------------------------------

_NUM = r"-?\d+(?:\.\d+)?"
_GROUPS = re.compile(
    rf"<(?:point|bbox)>\s*({_NUM}(?:[\s,]+{_NUM}){{1,3}})\s*</(?:point|bbox)>"
    rf"|[\[(]\s*({_NUM}(?:\s*,\s*{_NUM}){{1,3}})\s*[\])]"
)
_NONE = re.compile(r"^\W*(none|not found|not (?:on|in) the (?:screen|screenshot))\W*$", re.I)
_KEYS = ("point_2d", "coordinate", "point", "bbox_2d", "bbox", "box")


def _numbers(raw: str) -> list[float]:
    return [float(n) for n in re.findall(_NUM, raw)]


def _from_objects(body: str) -> list[float] | None:
    for obj in reversed(objects(body)):
        if isinstance(obj.get("x"), int | float) and isinstance(obj.get("y"), int | float):
            return [float(obj["x"]), float(obj["y"])]
        for key in _KEYS:
            v = obj.get(key)
            if isinstance(v, list | tuple) and len(v) in (2, 4) \
                    and all(isinstance(n, int | float) for n in v):
                return [float(n) for n in v]
    return None


def read_numbers(text: str) -> list[float] | None:
    """The last point (2 numbers) or box (4) a grounding reply gives, in the model's space:
    JSON (``x``/``y``, ``point_2d``, ``coordinate``, ``bbox_2d``), ``<point>x y</point>``,
    ``<bbox>...</bbox>``, ``(x, y)`` or ``[x1, y1, x2, y2]``; None for a "not there" answer.
    Raises ``ParseError`` when it holds none of these."""
    body = re.sub(r"(?s)<grounding_think>.*?</grounding_think>", " ",
                  strip_reasoning(normalize_punctuation(text)))
    answer = re.search(r"(?s)<answer>(.*?)</answer>", body)
    body = (answer.group(1) if answer else body).strip()
    if _NONE.match(body):
        return None
    # A JSON answer wrapped in a list ([{"point_2d": ...}]): the objects inside count.
    found = _from_objects(body.replace("[{", "{").replace("}]", "}"))
    if found is not None:
        return found
    groups = list(_GROUPS.finditer(body))
    if groups:
        return _numbers(groups[-1].group(1) or groups[-1].group(2))
    raise ParseError("no point or box in the grounder's reply", text)


def to_answer(nums: list[float], geom: Geometry, text: str = "") -> GrounderAnswer:
    """Model-space numbers -> device pixels (a box gives its centre as the point)."""
    if len(nums) == 2:
        return GrounderAnswer(geom.to_device(nums[0], nums[1]), None, text)
    x1, y1 = geom.to_device(min(nums[0], nums[2]), min(nums[1], nums[3]))
    x2, y2 = geom.to_device(max(nums[0], nums[2]), max(nums[1], nums[3]))
    return GrounderAnswer(((x1 + x2) // 2, (y1 + y2) // 2), (x1, y1, x2, y2), text)


def parse_grounder_reply(text: str, geom: Geometry, family: Family | None = None) -> GrounderAnswer | None:
    """A grounder's reply in device pixels; ``family``: a family that reads its own
    grounding answers (``read_point``: the grounding models' box tokens, 0..1 points)."""
    reader = getattr(family, "read_point", None)
    nums = reader(text) if reader is not None else read_numbers(text)
    return None if nums is None else to_answer(nums, geom, text[:300])


# -- the role --------------------------------------------------------------------------------


def grounder_family(settings: LLMSettings) -> Family:
    """The grounder role's family (``llm.family.grounder``, ``auto``: from its model) at
    its ``max_image_side``."""
    rc = settings.role("grounder")
    return get_family(settings.family.grounder, rc.model, max_image_side=rc.max_image_side)


class ModelGrounder:
    """``llm.roles.grounder``: asks its model where a target is (one call, no re-ask)."""

    def __init__(self, llm: ChatModel, family: Family, *, timeout_s: float = 60.0) -> None:
        self.llm = llm
        self.family = family
        self.timeout_s = timeout_s
        self.calls = 0
        self.unusable = 0  # replies with no point in them

    @classmethod
    def from_settings(cls, llm: ChatModel, settings: LLMSettings) -> ModelGrounder:
        """The grounder role's family (``llm.family.grounder``, ``auto``: from its model)
        at its ``max_image_side``; the call's limit covers its retries."""
        return cls(llm, grounder_family(settings),
                   timeout_s=settings.timeout_s + settings.retry_budget_s + 5.0)

    async def locate(self, description: str, screenshot: bytes, screen: tuple[int, int], *,
                     thought: str = "") -> GrounderAnswer | None:
        """Where ``description`` is on ``screenshot`` (an encoded frame of ``screen`` (w, h)
        pixels), in device pixels; None when the model says it is not there or answers no
        point. ``LLMError`` when the call fails."""
        geom = self.family.geometry(*screen)
        messages = grounder_messages(self.family, geom, description, thought, screenshot)
        self.calls += 1
        try:
            with anyio.fail_after(self.timeout_s):
                reply = await self.llm.chat("grounder", messages)
        except TimeoutError:
            raise LLMTimeout(f"grounder: no answer within {self.timeout_s:g} s") from None
        try:
            return parse_grounder_reply(reply.text, geom, self.family)
        except ParseError as exc:
            self.unusable += 1
            log.warning("grounder_unusable", model=reply.model, problem=str(exc),
                        reply=reply.text[:200])
            return None
