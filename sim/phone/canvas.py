"""Layout output: draw operations, ground-truth elements and tap targets, and the painter.

Widgets lay themselves out into a ``Layout``: they append draw ops (painted later, only
when the frame is not cached) and register elements (the test-only ground truth) and
hit regions (what a tap or long press does). Layout is cheap; painting is cached.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from PIL import Image, ImageDraw

from sim.phone.fonts import font_for, icon_char, icon_font
from sim.phone.theme import RGB, TEXT_STYLES, Metrics, Theme

Box = tuple[int, int, int, int]  # left, top, right, bottom in screen pixels
Action = Callable[[], None]


@dataclass(frozen=True)
class Element:
    """One thing on screen, as a test (never the agent) sees it."""

    kind: str  # text, button, icon_button, text_field, toggle, list_item, fab, tab, app_icon, key, ...
    text: str  # visible text ('' for a bare icon)
    bbox: Box
    clickable: bool = False
    icon: str | None = None  # Material icon name, e.g. 'search'
    desc: str = ""  # content description, e.g. 'Search'
    id: str = ""  # a stable name given by the app, e.g. 'title'
    focused: bool = False
    checked: bool | None = None  # toggles, tabs, chips
    editable: bool = False

    @property
    def center(self) -> tuple[int, int]:
        x0, y0, x1, y1 = self.bbox
        return ((x0 + x1) // 2, (y0 + y1) // 2)


@dataclass
class Hit:
    """A tap target: the topmost one containing the point wins."""

    box: Box
    on_tap: Action | None
    on_long_press: Action | None = None


# --- draw operations -------------------------------------------------------------------


@dataclass(frozen=True)
class RectOp:
    box: Box
    fill: RGB | None
    radius: int = 0
    outline: RGB | None = None
    width: int = 0


@dataclass(frozen=True)
class EllipseOp:
    box: Box
    fill: RGB | None
    outline: RGB | None = None
    width: int = 0


@dataclass(frozen=True)
class TextOp:
    xy: tuple[int, int]
    text: str
    size: int
    weight: str
    color: RGB
    box: Box


@dataclass(frozen=True)
class IconOp:
    center: tuple[int, int]
    name: str
    size: int
    color: RGB
    box: Box


@dataclass(frozen=True)
class PolyOp:
    points: tuple[tuple[int, int], ...]
    fill: RGB | None
    outline: RGB | None = None
    width: int = 0
    box: Box = (0, 0, 0, 0)


@dataclass(frozen=True)
class ArcOp:
    box: Box
    start: float
    end: float
    color: RGB
    width: int


@dataclass(frozen=True)
class LineOp:
    box: Box
    color: RGB
    width: int


@dataclass(frozen=True)
class DimOp:
    """Darken everything painted so far (the scrim behind a dialog)."""

    box: Box
    amount: float


Op = RectOp | EllipseOp | TextOp | IconOp | PolyOp | ArcOp | LineOp | DimOp


def op_box(op: Op) -> Box:
    return op.box


@functools.lru_cache(maxsize=1 << 16)
def _measure(text: str, size: int, weight: str) -> int:
    # FreeType measuring dominates layout; screens re-measure the same strings every frame
    return int(font_for(text, size, weight).getlength(text))


def intersect(a: Box, b: Box) -> Box | None:
    x0, y0, x1, y1 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    return (x0, y0, x1, y1) if x1 > x0 and y1 > y0 else None


def contains(box: Box, x: int, y: int) -> bool:
    return box[0] <= x < box[2] and box[1] <= y < box[3]


@dataclass
class Layout:
    """Where widgets put their ops, elements and hits while a frame is laid out."""

    metrics: Metrics
    theme: Theme
    width: int
    height: int
    ops: list[Op] = field(default_factory=list)
    elements: list[Element] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)  # field id -> TextField widget
    field_boxes: dict[str, Box] = field(default_factory=dict)  # field id -> its unclipped box
    focus: str | None = None  # the focused field's id
    selected: bool = False  # the focused field's whole text is selected (drawn highlighted)
    clip: Box | None = None  # the viewport being laid out; things outside it are dropped
    request_focus: Callable[[str], None] | None = None  # what tapping a text field calls

    def dp(self, v: float) -> int:
        return self.metrics.dp(v)

    def sp(self, v: float) -> int:
        return self.metrics.sp(v)

    def style(self, name: str) -> tuple[int, str]:
        try:
            size, weight = TEXT_STYLES[name]
        except KeyError:
            raise ValueError(f"unknown text style {name!r} ({', '.join(TEXT_STYLES)})") from None
        return self.sp(size), weight

    # measuring
    def text_width(self, text: str, size: int, weight: str = "regular") -> int:
        return _measure(text, size, weight) if text else 0

    def wrap(self, text: str, size: int, weight: str, max_w: int, max_lines: int = 0) -> list[str]:
        """Greedy word wrap; an over-long last line is cut with an ellipsis."""
        lines: list[str] = []
        for para in text.split("\n"):
            words = para.split(" ")
            line = ""
            for word in words:
                cand = word if not line else line + " " + word
                if self.text_width(cand, size, weight) <= max_w or not line:
                    line = cand
                else:
                    lines.append(line)
                    line = word
            lines.append(line)
        if max_lines and len(lines) > max_lines:
            lines = lines[:max_lines]
            lines[-1] = self.ellipsize(lines[-1] + "…", size, weight, max_w)
        return [self.ellipsize(ln, size, weight, max_w) for ln in lines]

    def ellipsize(self, text: str, size: int, weight: str, max_w: int) -> str:
        if self.text_width(text, size, weight) <= max_w:
            return text
        while text and self.text_width(text + "…", size, weight) > max_w:
            text = text[:-1]
        return text.rstrip() + "…"

    # drawing
    def visible(self, box: Box) -> bool:
        return self.clip is None or intersect(box, self.clip) is not None

    def rect(self, box: Box, fill: RGB | None, radius: int = 0, outline: RGB | None = None,
             width: int = 0) -> None:
        if self.visible(box):
            self.ops.append(RectOp(box, fill, radius, outline, width))

    def ellipse(self, box: Box, fill: RGB | None, outline: RGB | None = None, width: int = 0) -> None:
        if self.visible(box):
            self.ops.append(EllipseOp(box, fill, outline, width))

    def line(self, box: Box, color: RGB, width: int = 1) -> None:
        if self.visible(box):
            self.ops.append(LineOp(box, color, width))

    def poly(self, points: list[tuple[int, int]], fill: RGB | None, outline: RGB | None = None,
             width: int = 0) -> None:
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        box = (min(xs), min(ys), max(xs) + 1, max(ys) + 1)
        if self.visible(box):
            self.ops.append(PolyOp(tuple(points), fill, outline, width, box))

    def dim(self, amount: float) -> None:
        self.ops.append(DimOp((0, 0, self.width, self.height), amount))

    def arc(self, box: Box, start: float, end: float, color: RGB, width: int) -> None:
        if self.visible(box):
            self.ops.append(ArcOp(box, start, end, color, width))

    def text(self, x: int, y: int, text: str, size: int, weight: str, color: RGB) -> Box:
        """Draw one line with its top-left at (x, y); returns its box (line height)."""
        w = self.text_width(text, size, weight)
        box = (x, y, x + w, y + round(size * 1.3))
        if text and self.visible(box):
            self.ops.append(TextOp((x, y), text, size, weight, color, box))
        return box

    def icon(self, cx: int, cy: int, name: str, size: int, color: RGB) -> Box:
        icon_char(name)  # an unknown name is an app bug: fail at layout, not at paint
        half = size // 2
        box = (cx - half, cy - half, cx + half, cy + half)
        if self.visible(box):
            self.ops.append(IconOp((cx, cy), name, size, color, box))
        return box

    # ground truth and interaction
    def element(self, el: Element, on_tap: Action | None = None,
                on_long_press: Action | None = None) -> None:
        box = el.bbox if self.clip is None else intersect(el.bbox, self.clip)
        if box is None:
            return  # scrolled out of view: neither seen nor tappable
        if box != el.bbox:
            el = Element(el.kind, el.text, box, el.clickable, el.icon, el.desc, el.id, el.focused,
                         el.checked, el.editable)
        self.elements.append(el)
        if on_tap is not None or on_long_press is not None:
            self.hits.append(Hit(box, on_tap, on_long_press))


def paint(base: Image.Image, ops: list[Op]) -> Image.Image:
    """Execute draw ops, in order, onto a copy of base (an RGB background)."""
    img = base.copy()
    d = ImageDraw.Draw(img)
    for op in ops:
        if isinstance(op, DimOp):
            img = Image.blend(img, Image.new("RGB", img.size, (0, 0, 0)), op.amount)
            d = ImageDraw.Draw(img)
        elif isinstance(op, TextOp):
            font = font_for(op.text, op.size, op.weight)
            d.text(op.xy, op.text, font=font, fill=op.color)
        elif isinstance(op, IconOp):
            d.text(op.center, icon_char(op.name), font=icon_font(op.size), fill=op.color, anchor="mm")
        elif isinstance(op, RectOp):
            x0, y0, x1, y1 = op.box
            if x1 <= x0 or y1 <= y0:
                continue
            r = min(op.radius, (x1 - x0) // 2, (y1 - y0) // 2)
            if r > 0:
                d.rounded_rectangle((x0, y0, x1 - 1, y1 - 1), r, fill=op.fill, outline=op.outline,
                                    width=op.width)
            else:
                d.rectangle((x0, y0, x1 - 1, y1 - 1), fill=op.fill, outline=op.outline, width=op.width)
        elif isinstance(op, EllipseOp):
            x0, y0, x1, y1 = op.box
            d.ellipse((x0, y0, x1 - 1, y1 - 1), fill=op.fill, outline=op.outline, width=op.width)
        elif isinstance(op, PolyOp):
            d.polygon(list(op.points), fill=op.fill, outline=op.outline, width=op.width)
        elif isinstance(op, ArcOp):
            d.arc(op.box, op.start, op.end, fill=op.color, width=op.width)
        elif isinstance(op, LineOp):
            x0, y0, x1, y1 = op.box
            d.line((x0, y0, x1, y1), fill=op.color, width=op.width)
    return img


# How far a painted op may reach past its box (anti-aliasing, glyph overhang, line width):
# an op this close to a changed region is repainted with it.
REACH_PX = 16
# Beyond this share of the screen a changed region is painted whole (the copies cost more).
FULL_PAINT_SHARE = 0.6


def _grow(box: Box, px: int) -> Box:
    return (box[0] - px, box[1] - px, box[2] + px, box[3] + px)


def changed_region(old: list[Op], new: list[Op], size: tuple[int, int]) -> Box | None:
    """The screen area where two op lists paint differently (None: nowhere)."""
    import difflib

    boxes: list[Box] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i0, i1, j0, j1 in matcher.get_opcodes():
        if tag != "equal":
            boxes += [op_box(op) for op in old[i0:i1]] + [op_box(op) for op in new[j0:j1]]
    if not boxes:
        return None
    w, h = size
    region = _grow((min(b[0] for b in boxes), min(b[1] for b in boxes),
                    max(b[2] for b in boxes), max(b[3] for b in boxes)), REACH_PX)
    return intersect(region, (0, 0, w, h)) or (0, 0, 0, 0)


def repaint(prev: Image.Image, prev_ops: list[Op], base: Image.Image, ops: list[Op]) -> Image.Image:
    """``paint(base, ops)``, given that ``prev`` is ``paint(base, prev_ops)``: the same image
    when nothing differs, else ``prev`` with only the changed region painted again."""
    region = changed_region(prev_ops, ops, base.size)
    if region is None:
        return prev
    x0, y0, x1, y1 = region
    w, h = base.size
    if (x1 - x0) * (y1 - y0) > FULL_PAINT_SHARE * w * h:
        return paint(base, ops)
    reach = _grow(region, REACH_PX)
    # Ops that cannot reach the region leave its pixels alone, so painting the rest, in order,
    # gives the region exactly what a whole paint would (a dim is per pixel: it stays).
    fresh = paint(base, [op for op in ops if intersect(op_box(op), reach) is not None])
    out = prev.copy()
    if x1 > x0 and y1 > y0:
        out.paste(fresh.crop(region), (x0, y0))
    return out
