"""``holo``: H Company's Holo localizers. Holo1 (``Hcompany/Holo1-3B/7B``): ``Click(x, y)``;
Holo1.5 (``Hcompany/Holo1.5-3B/7B/72B``): ``{"action": "click_absolute", "x": ..., "y": ...}``
(github.com/trycua/cua ``libs/python/agent/agent/loops/holo.py``: "Prompt asks for absolute
pixel coordinates in JSON"); Holo2 (``Hcompany/Holo2-4B/8B/30B-A3B``, Qwen3-VL): a bare
``{"x": ..., "y": ...}`` (its model card's ``ClickCoordinates``: "normalized between 0 and
1000"), after a ``<think>`` block when thinking is on.

These models are trained to localize, not to plan: each reply is one point, a tap, and the
prompt asks for the element the task's next step needs. Any of the three spellings is read
in every variant; ``Click(x, y)`` alone on a line, or inside prose, is the last one given.

Coordinates: Holo1 and Holo1.5 answer pixels of the image they received, the screenshot as
sent smart-resized by the Qwen2.5-VL processor (factor 28, 3136 to 12845056 pixels); Holo2
answers 0–1000 relative to the image. The model name picks the variant.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from models.llm.errors import ParseError
from models.llm.families.base import FamilyBase, FamilyReply, Geometry, ToolCall, smart_resize
from models.llm.families.dicts import objects
from models.llm.replytext import clean_reply
from protocol.operations import TapPoint

SYSTEM = """Localize an element on the GUI image according to the provided target and output a click position.
The target is the element the user's task needs next.
 * You must output a valid JSON following the format: {format}
 * {convention}
"""

_CLICK = re.compile(r"(?i)\bclick\s*\(\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)")


def _number(v: object) -> float | None:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


class HoloFamily(FamilyBase):
    name = "holo"

    def __init__(self, variant: str = "2", max_image_side: int | None = None) -> None:
        super().__init__(max_image_side)
        if variant not in ("1", "1.5", "2"):
            raise ValueError(f"unknown Holo variant {variant!r}: 1, 1.5 or 2")
        self.variant = variant
        self.format = fmt = {"1": "Click(x, y)", "1.5": '{"action": "click_absolute", "x": <int>, "y": <int>}',
               "2": '{"x": <int>, "y": <int>}'}[variant]
        convention = ("x and y are normalized between 0 and 1000" if variant == "2"
                      else "x: num pixels from the left edge and y: num pixels from the top edge")
        self.system_prompt = SYSTEM.replace("{format}", fmt).replace("{convention}", convention)

    def geometry(self, screen_w: int, screen_h: int) -> Geometry:
        sw, sh = self.sent_size(screen_w, screen_h)
        if self.variant == "2":
            return Geometry(screen_w, screen_h, sw, sh, "relative", 1000)
        h, w = smart_resize(sh, sw, factor=28, min_pixels=3136, max_pixels=12845056)
        return Geometry(screen_w, screen_h, w, h, "image", sent_w=sw, sent_h=sh)

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        body = clean_reply(text)
        for obj in reversed(objects(body)):
            x, y = _number(obj.get("x")), _number(obj.get("y"))
            action = str(obj.get("action", "click_absolute")).lower()
            if x is not None and y is not None and action in ("click_absolute", "click"):
                return FamilyReply(TapPoint(round(x), round(y)), "", str(obj))
        clicks = list(_CLICK.finditer(body))
        if clicks:
            m = clicks[-1]
            return FamilyReply(TapPoint(round(float(m[1])), round(float(m[2]))), "", m.group(0))
        raise ParseError(f"no click position found: answer with {self.format}", text)
