"""The widgets apps build screens from, each laying itself out into a Layout.

A widget is a plain dataclass: what it shows plus callbacks. ``place(lay, x, y, w)``
draws it with its top-left at (x, y) in a column of width w and returns the height it
took. Callbacks run under the phone's lock when the user taps; they change app state or
navigate, and the next frame is laid out again from state (declarative, like Compose).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from sim.phone.canvas import Action, Element, Layout
from sim.phone.theme import RGB, hex_rgb

T = TypeVar("T")


def _colour(value: str | None, default: RGB) -> RGB:
    return default if value is None else hex_rgb(value)


def bind(fn: Callable[[T], None], value: T) -> Action:
    """fn(value) as a no-argument callback (safe inside loops, unlike a bare lambda)."""
    return lambda: fn(value)


class Widget:
    """Base class: lays out at (x, y) within width w and returns its height in pixels."""

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        raise NotImplementedError

    def width(self, lay: Layout) -> int:
        """The natural width, for widgets inside a Row."""
        return lay.dp(48)


@dataclass
class Spacer(Widget):
    height: float = 8  # dp

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        return lay.dp(self.height)


@dataclass
class Divider(Widget):
    inset: float = 16  # dp

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        h = max(1, lay.dp(1) // 2)
        lay.rect((x + lay.dp(self.inset), y, x + w - lay.dp(self.inset), y + h), lay.theme.divider)
        return h


@dataclass
class Text(Widget):
    text: str
    style: str = "body"  # a name in theme.TEXT_STYLES
    color: str | None = None  # '#RRGGBB'; default the theme's text colour
    muted: bool = False
    on_tap: Action | None = None
    align: str = "left"  # left, center
    max_lines: int = 0
    padding: float = 16  # dp, left and right
    id: str = ""

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        size, weight = lay.style(self.style)
        colour = _colour(self.color, lay.theme.text_muted if self.muted else lay.theme.text)
        pad = lay.dp(self.padding)
        vpad = lay.dp(4)
        line_h = round(size * 1.35)
        lines = lay.wrap(self.text, size, weight, w - 2 * pad, self.max_lines)
        cy = y + vpad
        for ln in lines:
            tw = lay.text_width(ln, size, weight)
            tx = x + pad if self.align == "left" else x + (w - tw) // 2
            box = lay.text(tx, cy, ln, size, weight, colour)
            if ln:
                lay.element(Element("text", ln, box, self.on_tap is not None, id=self.id), self.on_tap)
            cy += line_h
        return cy - y + vpad

    def width(self, lay: Layout) -> int:
        size, weight = lay.style(self.style)
        return lay.text_width(self.text, size, weight) + 2 * lay.dp(self.padding)


@dataclass
class Button(Widget):
    text: str
    on_tap: Action | None = None
    variant: str = "filled"  # filled, tonal, outlined, text
    icon: str | None = None
    full_width: bool = False
    id: str = ""

    def width(self, lay: Layout) -> int:
        size, weight = lay.style("label")
        extra = lay.dp(26) if self.icon else 0
        return lay.text_width(self.text, size, weight) + lay.dp(48) + extra

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        t = lay.theme
        h = lay.dp(40)
        bw = w - 2 * lay.dp(16) if self.full_width else min(self.width(lay), w)
        bx = x + lay.dp(16) if self.full_width else x
        box = (bx, y, bx + bw, y + h)
        fg = t.primary
        if self.variant == "filled":
            lay.rect(box, t.primary, h // 2)
            fg = t.on_primary
        elif self.variant == "tonal":
            lay.rect(box, t.primary_container, h // 2)
            fg = t.on_primary_container
        elif self.variant == "outlined":
            lay.rect(box, None, h // 2, t.outline, max(1, lay.dp(1)))
        elif self.variant != "text":
            raise ValueError(f"unknown button variant {self.variant!r}")
        size, weight = lay.style("label")
        tw = lay.text_width(self.text, size, weight) + (lay.dp(26) if self.icon else 0)
        tx = bx + (bw - tw) // 2
        if self.icon:
            lay.icon(tx + lay.dp(9), y + h // 2, self.icon, lay.dp(18), fg)
            tx += lay.dp(26)
        lay.text(tx, y + (h - round(size * 1.3)) // 2, self.text, size, weight, fg)
        lay.element(Element("button", self.text, box, True, self.icon, self.text, self.id), self.on_tap)
        return h


@dataclass
class IconButton(Widget):
    icon: str
    on_tap: Action | None = None
    desc: str = ""  # content description, as TalkBack would read it
    color: str | None = None
    size: float = 24  # dp of the glyph; the touch target is 48 dp
    id: str = ""

    def width(self, lay: Layout) -> int:
        return lay.dp(48)

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        s = lay.dp(48)
        box = (x, y, x + s, y + s)
        lay.icon(x + s // 2, y + s // 2, self.icon, lay.dp(self.size), _colour(self.color, lay.theme.text))
        lay.element(Element("icon_button", "", box, self.on_tap is not None, self.icon,
                            self.desc or self.icon.replace("_", " "), self.id), self.on_tap)
        return s


@dataclass
class Row(Widget):
    """Children side by side (buttons, chips, icon buttons), wrapping onto new lines."""

    children: Sequence[Widget]
    spacing: float = 8  # dp
    padding: float = 16  # dp
    align: str = "left"  # left, right, center

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        gap, pad = lay.dp(self.spacing), lay.dp(self.padding)
        rows: list[list[tuple[Widget, int]]] = [[]]
        used = 0
        for child in self.children:
            cw = min(child.width(lay), w - 2 * pad)
            if rows[-1] and used + gap + cw > w - 2 * pad:
                rows.append([])
                used = 0
            used += (gap if rows[-1] else 0) + cw
            rows[-1].append((child, cw))
        cy = y
        for row in rows:
            total = sum(cw for _, cw in row) + gap * max(0, len(row) - 1)
            cx = x + pad
            if self.align == "right":
                cx = x + w - pad - total
            elif self.align == "center":
                cx = x + (w - total) // 2
            line_h = 0
            for child, cw in row:
                line_h = max(line_h, child.place(lay, cx, cy, cw))
                cx += cw + gap
            cy += line_h + (gap if row is not rows[-1] else 0)
        return cy - y


@dataclass
class Chip(Widget):
    text: str
    on_tap: Action | None = None
    selected: bool = False
    icon: str | None = None
    id: str = ""

    def width(self, lay: Layout) -> int:
        size, weight = lay.style("label")
        return lay.text_width(self.text, size, weight) + lay.dp(32) + (lay.dp(26) if self.icon else 0)

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        t = lay.theme
        h = lay.dp(32)
        box = (x, y, x + w, y + h)
        if self.selected:
            lay.rect(box, t.primary_container, lay.dp(8))
        else:
            lay.rect(box, None, lay.dp(8), t.outline, max(1, lay.dp(1)))
        size, weight = lay.style("label")
        tx = x + lay.dp(16)
        fg = t.on_primary_container if self.selected else t.text
        if self.icon:
            lay.icon(tx + lay.dp(8), y + h // 2, self.icon, lay.dp(18), fg)
            tx += lay.dp(26)
        lay.text(tx, y + (h - round(size * 1.3)) // 2, self.text, size, weight, fg)
        lay.element(Element("chip", self.text, box, True, self.icon, self.text, self.id,
                            checked=self.selected), self.on_tap)
        return h


@dataclass
class TextField(Widget):
    """An editable field. Tapping focuses it (the soft keyboard comes up); typing calls
    on_change with the new full value; ENTER calls on_submit (or adds a line if multiline)."""

    id: str  # unique on its screen: focus is kept by id
    value: str
    on_change: Callable[[str], None]
    hint: str = ""
    label: str = ""
    multiline: bool = False
    lines: int = 1  # visible lines
    on_submit: Action | None = None
    outlined: bool = True
    select_on_focus: bool = False  # focusing selects the text, so typing replaces it

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        t = lay.theme
        pad = lay.dp(16)
        size, weight = lay.style("body")
        line_h = round(size * 1.35)
        focused = lay.focus == self.id
        top = y + lay.dp(8)
        h = max(lay.dp(56), lay.dp(32) + line_h * max(1, self.lines))
        box = (x + pad, top, x + w - pad, top + h)
        if self.outlined:
            lay.rect(box, None, lay.dp(4), t.primary if focused else t.outline,
                     lay.dp(2) if focused else max(1, lay.dp(1)))
        else:
            lay.rect((box[0], box[3] - lay.dp(2), box[2], box[3]), t.primary if focused else t.outline)
        if self.label:
            ls = lay.sp(12)
            lw = lay.text_width(self.label, ls, "regular")
            lay.rect((box[0] + lay.dp(10), top - ls // 2, box[0] + lay.dp(18) + lw, top + ls // 2 + 2), t.bg)
            lay.text(box[0] + lay.dp(14), top - round(ls * 0.65), self.label, ls, "regular",
                     t.primary if focused else t.text_muted)
        inner_w = box[2] - box[0] - 2 * pad
        shown = self.value or self.hint
        colour = t.text if self.value else t.text_muted
        lines = lay.wrap(shown, size, weight, inner_w, max(1, self.lines)) if self.multiline else \
            [lay.ellipsize(shown.replace("\n", " "), size, weight, inner_w)]
        ty = top + lay.dp(16)
        last = box[0] + pad
        for ln in lines[: max(1, self.lines)]:
            if focused and lay.selected and self.value:
                _selection(lay, box[0] + pad, ty, ln, size, weight)
            tb = lay.text(box[0] + pad, ty, ln, size, weight, colour)
            last = tb[2]
            ty += line_h
        if focused and not (lay.selected and self.value):  # the caret after the text
            cx = last + lay.dp(1) if self.value else box[0] + pad
            cy = ty - line_h
            lay.rect((cx, cy + lay.dp(2), cx + lay.dp(2), cy + line_h - lay.dp(2)), t.primary)
        lay.fields[self.id] = self
        lay.field_boxes[self.id] = box
        text = self.value or self.hint
        lay.element(Element("text_field", text, box, True, None, self.label or self.hint, self.id,
                            focused=focused, editable=True), self._focus_action(lay))
        return h + lay.dp(16)

    def _focus_action(self, lay: Layout) -> Action:
        request, fid = lay.request_focus, self.id

        def focus() -> None:
            if request is not None:
                request(fid)
        return focus


def _selection(lay: Layout, x: int, y: int, text: str, size: int, weight: str) -> None:
    """The highlight behind selected text."""
    tw = lay.text_width(text, size, weight)
    lay.rect((x - lay.dp(1), y - lay.dp(2), x + tw + lay.dp(1), y + round(size * 1.3)),
             lay.theme.primary_container)


@dataclass
class SearchBar(Widget):
    """A pill with a magnifier: editable (value/on_change/on_submit), or a button that
    opens a search screen (on_tap)."""

    id: str = "search"
    value: str = ""
    on_change: Callable[[str], None] | None = None
    on_submit: Action | None = None
    on_tap: Action | None = None
    hint: str = "Search"
    leading: IconButton | None = None  # replaces the magnifier, e.g. a back arrow
    trailing: Sequence[IconButton] = ()  # e.g. a mic, an avatar
    select_on_focus: bool = False  # focusing selects the text (Chrome's omnibox)

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        t = lay.theme
        pad = lay.dp(16)
        h = lay.dp(56)
        top = y + lay.dp(8)
        box = (x + pad, top, x + w - pad, top + h)
        focused = lay.focus == self.id
        lay.rect(box, t.surface_high, h // 2, t.primary if focused else None, lay.dp(2) if focused else 0)
        cx = box[0] + lay.dp(4)
        if self.leading is not None:
            self.leading.place(lay, cx, top + (h - lay.dp(48)) // 2, lay.dp(48))
        else:
            ib = lay.icon(cx + lay.dp(24), top + h // 2, "search", lay.dp(24), t.text_muted)
            lay.element(Element("icon", "", ib, False, "search", "Search"))
        tx = cx + lay.dp(52)
        right = box[2] - lay.dp(4)
        for tr in reversed(list(self.trailing)):
            right -= lay.dp(48)
            tr.place(lay, right, top + (h - lay.dp(48)) // 2, lay.dp(48))
        size, weight = lay.style("body")
        shown = self.value or self.hint
        shown = lay.ellipsize(shown, size, weight, right - tx - lay.dp(8))
        ty = top + (h - round(size * 1.3)) // 2
        selected = focused and lay.selected and bool(self.value)
        if selected:
            _selection(lay, tx, ty, shown, size, weight)
        tb = lay.text(tx, ty, shown, size, weight, t.text if self.value else t.text_muted)
        if focused and not selected:
            cx2 = tb[2] + lay.dp(1) if self.value else tx
            lay.rect((cx2, tb[1] + lay.dp(2), cx2 + lay.dp(2), tb[3] - lay.dp(2)), t.primary)
        field_box = (tx - lay.dp(4), top, right, top + h)
        if self.on_change is not None:
            tf = TextField(self.id, self.value, self.on_change, self.hint, on_submit=self.on_submit,
                           select_on_focus=self.select_on_focus)
            lay.fields[self.id] = tf
            lay.field_boxes[self.id] = field_box
            lay.element(Element("search_bar", self.value or self.hint, field_box, True, "search",
                                self.hint, self.id, focused=focused, editable=True),
                        tf._focus_action(lay))
        else:
            lay.element(Element("search_bar", self.value or self.hint, field_box,
                                self.on_tap is not None, "search", self.hint, self.id), self.on_tap)
        return h + lay.dp(16)


@dataclass
class ToggleRow(Widget):
    title: str
    checked: bool
    on_change: Callable[[bool], None]
    subtitle: str = ""
    icon: str | None = None
    id: str = ""

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        t = lay.theme
        h = lay.dp(72 if self.subtitle else 56)
        pad = lay.dp(16)
        tx = x + pad
        if self.icon:
            lay.icon(tx + lay.dp(12), y + h // 2, self.icon, lay.dp(24), t.text_muted)
            tx += lay.dp(40)
        # the switch
        sw, sh = lay.dp(52), lay.dp(32)
        sx, sy = x + w - pad - sw, y + (h - sh) // 2
        if self.checked:
            lay.rect((sx, sy, sx + sw, sy + sh), t.primary, sh // 2)
            r = lay.dp(12)
            cx = sx + sw - sh // 2
            lay.ellipse((cx - r, sy + sh // 2 - r, cx + r, sy + sh // 2 + r), t.on_primary)
            lay.icon(cx, sy + sh // 2, "check", lay.dp(16), t.primary)
        else:
            lay.rect((sx, sy, sx + sw, sy + sh), t.toggle_off_track, sh // 2, t.outline, lay.dp(2))
            r = lay.dp(8)
            cx = sx + sh // 2
            lay.ellipse((cx - r, sy + sh // 2 - r, cx + r, sy + sh // 2 + r), t.toggle_off_thumb)
        size, weight = lay.style("body")
        max_w = sx - tx - lay.dp(16)
        if self.subtitle:
            s2, _ = lay.style("body2")
            lay.text(tx, y + lay.dp(14), lay.ellipsize(self.title, size, weight, max_w), size, weight, t.text)
            sub = lay.ellipsize(self.subtitle, s2, "regular", max_w)
            tb = lay.text(tx, y + lay.dp(40), sub, s2, "regular", t.text_muted)
            lay.element(Element("text", sub, tb))
        else:
            lay.text(tx, y + (h - round(size * 1.3)) // 2, lay.ellipsize(self.title, size, weight, max_w),
                     size, weight, t.text)
        box = (x, y, x + w, y + h)
        on_change, value = self.on_change, self.checked
        lay.element(Element("toggle", self.title, box, True, self.icon, self.title, self.id,
                            checked=self.checked), lambda: on_change(not value))
        return h


@dataclass
class ListItem(Widget):
    title: str
    subtitle: str = ""
    icon: str | None = None  # leading Material icon
    icon_color: str | None = None  # '#RRGGBB': draws the icon on a tinted circle
    avatar: str = ""  # a letter avatar instead of an icon
    trailing_text: str = ""
    trailing: IconButton | None = None  # its own tap target (e.g. a heart)
    trailing_icon: str | None = None  # decorative, e.g. 'chevron_right'
    on_tap: Action | None = None
    on_long_press: Action | None = None
    lines: int = 1  # subtitle lines
    id: str = ""

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        t = lay.theme
        pad = lay.dp(16)
        s1, w1 = lay.style("body")
        s2, _ = lay.style("body2")
        line2 = round(s2 * 1.35)
        h = lay.dp(56) if not self.subtitle else lay.dp(52) + line2 * max(1, self.lines)
        box = (x, y, x + w, y + h)
        # the row's own hit goes first so the trailing button, registered later, wins
        lay.element(Element("list_item", self.title, box, self.on_tap is not None or
                            self.on_long_press is not None, self.icon, self.subtitle, self.id),
                    self.on_tap, self.on_long_press)
        tx = x + pad
        if self.avatar or self.icon:
            r = lay.dp(20)
            cy = y + h // 2
            if self.avatar or self.icon_color:
                fill = _colour(self.icon_color, t.primary_container)
                lay.ellipse((tx, cy - r, tx + 2 * r, cy + r), fill)
            fg = (255, 255, 255) if self.icon_color else t.on_primary_container
            if self.avatar:
                sz = lay.sp(18)
                a = self.avatar[:1].upper()
                aw = lay.text_width(a, sz, "medium")
                lay.text(tx + r - aw // 2, cy - round(sz * 0.65), a, sz, "medium", fg)
            elif self.icon:
                lay.icon(tx + r, cy, self.icon, lay.dp(24), fg if self.icon_color else t.text_muted)
            tx += 2 * r + pad
        right = x + w - pad
        if self.trailing is not None:
            right -= lay.dp(48)
            self.trailing.place(lay, right + lay.dp(8), y + (h - lay.dp(48)) // 2, lay.dp(48))
        elif self.trailing_icon:
            right -= lay.dp(24)
            lay.icon(right + lay.dp(12), y + h // 2, self.trailing_icon, lay.dp(24), t.text_muted)
        if self.trailing_text:
            tw = lay.text_width(self.trailing_text, s2, "regular")
            right -= tw + lay.dp(8)
            tb = lay.text(right + lay.dp(8), y + lay.dp(16), self.trailing_text, s2, "regular", t.text_muted)
            lay.element(Element("text", self.trailing_text, tb))
        max_w = right - tx - lay.dp(8)
        ty = y + (lay.dp(12) if self.subtitle else (h - round(s1 * 1.3)) // 2)
        lay.text(tx, ty, lay.ellipsize(self.title, s1, w1, max_w), s1, w1, t.text)
        if self.subtitle:
            sy = ty + round(s1 * 1.35)
            for ln in lay.wrap(self.subtitle, s2, "regular", max_w, max(1, self.lines)):
                tb = lay.text(tx, sy, ln, s2, "regular", t.text_muted)
                if ln:  # visible text a reader (or OCR) sees; a tap on it is a tap on the row
                    lay.element(Element("text", ln, tb))
                sy += line2
        return h


@dataclass
class Tabs(Widget):
    labels: Sequence[str]
    selected: int
    on_select: Callable[[int], None]
    icons: Sequence[str] = ()

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        t = lay.theme
        h = lay.dp(48)
        n = max(1, len(self.labels))
        tw = w // n
        size, weight = lay.style("label")
        for i, label in enumerate(self.labels):
            bx = x + i * tw
            box = (bx, y, bx + tw, y + h)
            fg = t.primary if i == self.selected else t.text_muted
            lw = lay.text_width(label, size, weight)
            lay.text(bx + (tw - lw) // 2, y + (h - round(size * 1.3)) // 2, label, size, weight, fg)
            if i == self.selected:
                lay.rect((bx + (tw - lw) // 2, y + h - lay.dp(3), bx + (tw + lw) // 2, y + h), t.primary,
                         lay.dp(2))
            lay.element(Element("tab", label, box, True, desc=label, checked=i == self.selected),
                        bind(self.on_select, i))
        lay.rect((x, y + h - 1, x + w, y + h), t.divider)
        return h


@dataclass
class Media(Widget):
    """A picture placeholder (a thumbnail, a video frame, a map): a tinted block with a
    large icon glyph and an optional caption over it."""

    color: str = "#5B6BBF"
    icon: str = "image"
    height: float = 200  # dp
    caption: str = ""
    desc: str = ""
    on_tap: Action | None = None
    full_bleed: bool = False
    id: str = ""

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        pad = 0 if self.full_bleed else lay.dp(16)
        h = lay.dp(self.height)
        box = (x + pad, y, x + w - pad, y + h)
        lay.rect(box, hex_rgb(self.color), 0 if self.full_bleed else lay.dp(12))
        lay.icon((box[0] + box[2]) // 2, y + h // 2, self.icon, min(lay.dp(64), h // 2), (255, 255, 255))
        if self.caption:
            size, weight = lay.style("subtitle")
            lay.text(box[0] + lay.dp(12), box[3] - lay.dp(12) - round(size * 1.3),
                     lay.ellipsize(self.caption, size, weight, box[2] - box[0] - lay.dp(24)),
                     size, weight, (255, 255, 255))
        lay.element(Element("image", self.caption, box, self.on_tap is not None, self.icon,
                            self.desc or self.caption, self.id), self.on_tap)
        return h + (0 if self.full_bleed else lay.dp(8))


@dataclass
class ProgressBar(Widget):
    fraction: float  # 0..1
    label: str = ""

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        t = lay.theme
        pad = lay.dp(16)
        h = lay.dp(4)
        f = min(1.0, max(0.0, self.fraction))
        top = y + lay.dp(8)
        lay.rect((x + pad, top, x + w - pad, top + h), t.primary_container, h // 2)
        lay.rect((x + pad, top, x + pad + int((w - 2 * pad) * f), top + h), t.primary, h // 2)
        used = lay.dp(16)
        if self.label:
            s, wt = lay.style("body2")
            tb = lay.text(x + pad, top + lay.dp(10), self.label, s, wt, t.text_muted)
            lay.element(Element("text", self.label, tb))
            used += round(s * 1.35) + lay.dp(6)
        return used


@dataclass
class Column(Widget):
    """Widgets stacked vertically (to group a few into one widget)."""

    children: Sequence[Widget] = field(default_factory=list)

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        cy = y
        for c in self.children:
            cy += c.place(lay, x, cy, w)
        return cy - y


# --- screen-level parts ----------------------------------------------------------------


@dataclass
class Fab:
    """A floating action button at the bottom right (extended when it has a label)."""

    icon: str
    on_tap: Action | None
    desc: str = ""
    label: str = ""


@dataclass
class BottomNav:
    items: Sequence[tuple[str, str]]  # (icon name, label)
    selected: int
    on_select: Callable[[int], None]


@dataclass
class Dialog:
    """A modal dialog; BACK or a tap outside calls on_dismiss (if cancelable)."""

    title: str
    message: str = ""
    buttons: Sequence[tuple[str, Action]] = ()  # right to left as on Android: last is positive
    on_dismiss: Action | None = None
    icon: str | None = None
    body: Sequence[Widget] = ()
    cancelable: bool = True
    menu: bool = False  # an overflow menu: buttons as rows at the top right, no scrim
