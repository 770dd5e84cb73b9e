"""What every model family provides, and the geometry they share.

A family is one small adapter between the agent and one way models speak: its planner
prompt, its reply parser, its image preparation (the size the screenshot is sent at) and
its coordinate convention. ``Family.parse`` returns an ``Operation`` whose points are
already device pixels, or raises ``ParseError``; a degenerate reply is always unusable
(re-asked), never read as finish, wait or a tap.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import msgspec
from PIL import Image

from models.llm.errors import ParseError
from models.llm.messages import ChatMessage
from models.llm.prompts.planner import PlannerInput, planner_messages
from models.llm.replytext import degenerate, with_original_text
from protocol.operations import LongPressPoint, Operation, SwipePoints, TapPoint

# "image": pixels of the image the model received; "relative": 0..scale on both axes.
Convention = Literal["image", "relative"]


class Geometry(msgspec.Struct, frozen=True):
    """The screen, the image the model saw, and how the model's numbers map to the screen.

    ``image_w`` x ``image_h`` is the image the model's pixel coordinates refer to; ``sent_w``
    x ``sent_h`` the screenshot as the client sends it, when that differs (a Qwen-VL or
    UI-TARS server smart-resizes what it receives, and the model answers in that size)."""

    screen_w: int
    screen_h: int
    image_w: int
    image_h: int
    convention: Convention = "image"
    scale: int = 1000  # for "relative": the coordinate that means the far edge
    sent_w: int = 0  # 0: the image as the model saw it (image_w x image_h)
    sent_h: int = 0

    @property
    def sent_size(self) -> tuple[int, int]:
        """(width, height) of the screenshot as sent."""
        return (self.sent_w, self.sent_h) if self.sent_w and self.sent_h else (
            self.image_w, self.image_h)

    def to_device(self, x: float, y: float) -> tuple[int, int]:
        if self.convention == "relative":
            fx, fy = x / self.scale, y / self.scale
        else:
            fx, fy = x / self.image_w, y / self.image_h
        if not (-0.01 <= fx <= 1.01 and -0.01 <= fy <= 1.01):
            raise ParseError(
                f"the point ({x:g}, {y:g}) is outside the screen "
                + (f"(coordinates go 0..{self.scale})" if self.convention == "relative"
                   else f"(the image is {self.image_w}x{self.image_h})")
            )
        px = min(max(round(fx * self.screen_w), 0), self.screen_w - 1)
        py = min(max(round(fy * self.screen_h), 0), self.screen_h - 1)
        return px, py


def smart_resize(
    height: int, width: int, *, factor: int = 28, min_pixels: int = 56 * 56,
    max_pixels: int = 28 * 28 * 1280,
) -> tuple[int, int]:
    """Qwen2-VL's resize rule (qwen-vl-utils ``smart_resize``, used by Qwen2.5-VL and
    UI-TARS): both sides rounded to a multiple of ``factor`` (the patch size times the
    merge size: 28 for Qwen2.5-VL, 32 for Qwen3-VL), then scaled, keeping the aspect ratio,
    into [min_pixels, max_pixels]. Returns (height, width)."""
    if min(height, width) <= 0:
        raise ValueError(f"bad image size {width}x{height}")
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def fit_within(width: int, height: int, max_side: int | None) -> tuple[int, int]:
    """(width, height) scaled down, keeping the aspect ratio, so that the longer side is at
    most ``max_side`` (the client's ``max_image_side``); unchanged when it fits or is None."""
    if max_side is None or max(width, height) <= max_side:
        return width, height
    f = max_side / max(width, height)
    return max(1, round(width * f)), max(1, round(height * f))


def image_size(image: bytes) -> tuple[int, int]:
    """(width, height) of an encoded image; reads only its header."""
    with Image.open(io.BytesIO(image)) as im:
        return im.size


def resize_png(image: bytes, size: tuple[int, int]) -> bytes:
    """``image`` (any format PIL reads) at ``size`` (w, h), as PNG; unchanged when it is
    that size already."""
    with Image.open(io.BytesIO(image)) as im:
        if im.size == size:
            return image
        out = io.BytesIO()
        im.convert("RGB").resize(size, Image.Resampling.BICUBIC).save(out, format="PNG")
        return out.getvalue()


_TOWARD = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}


def swipe_toward(x: int, y: int, direction: str, *, reach: int = 300, top: int = 1000) -> SwipePoints | None:
    """A finger swipe from (x, y) toward ``direction`` ("up": the finger moves up), ``reach``
    on a 0..``top`` grid, clamped to it; None for an unknown direction."""
    step = _TOWARD.get(direction.strip().lower())
    if step is None:
        return None
    return SwipePoints(x, y, min(max(x + step[0] * reach, 0), top), min(max(y + step[1] * reach, 0), top))


class ToolCall(msgspec.Struct, frozen=True):
    """One OpenAI ``tool_calls`` entry: the function name and its JSON arguments (a string,
    as the API sends them)."""

    name: str
    arguments: str


class FamilyReply(msgspec.Struct, frozen=True):
    operation: Operation  # points in device pixels
    thought: str = ""
    action_text: str = ""  # the action as the model wrote it
    summary: str = ""
    observation: str = ""
    progress: str = ""  # the family's progress field (agent.planning = "inline"), if any
    memory: str = ""  # content the model chose to keep, if its format has the field
    # Actions the reply carried after the first, as written: not run (``mouse.first_of``).
    dropped: tuple[str, ...] = ()


class Family(Protocol):
    name: str

    def geometry(self, screen_w: int, screen_h: int) -> Geometry:
        """The image size this family sends for a screen this size, and its convention."""
        ...

    def planner_messages(
        self, inp: PlannerInput, geom: Geometry, *, keep_screenshots: int = 1
    ) -> list[ChatMessage]: ...

    def request_options(self) -> dict[str, Any]:
        """Extra chat-completion parameters (``tools``, ``tool_choice``, ``response_format``)."""
        ...

    def parse(
        self, text: str, geom: Geometry, tool_calls: Sequence[ToolCall] = ()
    ) -> FamilyReply: ...


def map_operation(op: Operation, geom: Geometry) -> Operation:
    """Points in the model's space -> device pixels; other operations as they are."""
    match op:
        case TapPoint(x=x, y=y):
            return TapPoint(*geom.to_device(x, y))
        case LongPressPoint(x=x, y=y):
            return LongPressPoint(*geom.to_device(x, y))
        case SwipePoints(x1=x1, y1=y1, x2=x2, y2=y2):
            return SwipePoints(*geom.to_device(x1, y1), *geom.to_device(x2, y2))
    return op


class FamilyBase:
    """The shared part: degenerate-reply check, mapping, and a planner prompt that is the
    ReAct one with this family's system prompt.

    ``max_image_side`` is the planner role's ``llm.max_image_side``: the client never sends
    a larger image, so the screenshot is sent at the screen's size fitted within it, and the
    coordinates refer to that image (or to what the family's server resizes it to)."""

    name = ""
    system_prompt = ""

    def __init__(self, max_image_side: int | None = None) -> None:
        self.max_image_side = max_image_side
        # The image the model saw, when known apart from the screen (``llm parse --image``).
        self.sent_image: tuple[int, int] | None = None

    def sent_size(self, screen_w: int, screen_h: int) -> tuple[int, int]:
        if self.sent_image is not None:
            return self.sent_image
        return fit_within(screen_w, screen_h, self.max_image_side)

    def geometry(self, screen_w: int, screen_h: int) -> Geometry:
        return Geometry(screen_w, screen_h, *self.sent_size(screen_w, screen_h), "image")

    def planner_messages(
        self, inp: PlannerInput, geom: Geometry, *, keep_screenshots: int = 1
    ) -> list[ChatMessage]:
        # The screenshot at exactly the size the geometry assumes (within max_image_side,
        # so the client sends it as it is).
        shot = resize_png(inp.screenshot, geom.sent_size)
        system = self.system_prompt.replace("{width}", str(geom.image_w)).replace(
            "{height}", str(geom.image_h)
        ) + self.memory_prompt(progress=inp.reply_progress, memory=inp.reply_memory)
        return planner_messages(msgspec.structs.replace(inp, screenshot=shot),
                                keep_screenshots=keep_screenshots, system=system)

    def memory_prompt(self, *, progress: bool, memory: bool) -> str:
        """What the system prompt adds when the reply should carry progress / memory; ""
        for a family whose trained format has no place for them (use agent.planning =
        "call" with those)."""
        return ""

    def request_options(self) -> dict[str, Any]:
        return {}

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        raise NotImplementedError

    def parse(
        self, text: str, geom: Geometry, tool_calls: Sequence[ToolCall] = ()
    ) -> FamilyReply:
        if not tool_calls:
            if not text.strip():
                raise ParseError("the reply is empty: answer with one action", text)
            why = degenerate(text)
            if why is not None:
                raise ParseError(f"{why}; answer with one action", text)
        r = self.parse_model(text, tool_calls)
        op = r.operation if tool_calls else with_original_text(r.operation, text)
        return msgspec.structs.replace(r, operation=map_operation(op, geom))


def require(args: Mapping[str, Any], key: str, call: str) -> Any:
    if key not in args or args[key] in ("", None):
        raise ParseError(f"{call} needs its {key!r} argument")
    return args[key]
