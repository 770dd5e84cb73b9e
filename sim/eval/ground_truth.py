"""TEST-ONLY: run operations on a SimPhone in-process, aimed with ground-truth elements.

This proves that tasks are solvable and that their checks are right; it is never a way
for an agent to act (agents see pixels only). It calls the phone's input methods the way
the ADB side would (``tap``, ``type_text``, ``key``, ``swipe``, ``launch``) and copes with
what a seed throws in the way as a script would:
- a loading spinner: wait it out (``settle()``: in-process tests need not sleep);
- a pop-up dialog that is not the target: tap its dismissive button ("Not now",
  "Don't allow"...), or BACK;
- a target below the fold: scroll down (up to ``max_scrolls`` page downs), then up again.
Those recovery actions are reported, so a caller can count them as extra steps.

``resolve(phone, op)`` (the element an operation aims at) is also what the benchmark's
oracle uses to choose among ambiguous perception candidates, the way a perfect chooser would.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protocol.operations import (
    Ask,
    Back,
    Clear,
    ClickIcon,
    ClickText,
    Enter,
    Exit,
    LongPress,
    OpenApp,
    Operation,
    PageDown,
    PageUp,
    Stop,
    Swipe,
    TypeText,
    Wait,
)
from sim.phone.canvas import Element

if TYPE_CHECKING:
    from sim.phone import SimPhone

KEY_HOME, KEY_BACK, KEY_ENTER, KEY_DEL, KEY_CTRL_LEFT, KEY_A = 3, 4, 66, 67, 113, 29
DISMISS = ("Not now", "Don't allow", "No thanks", "Later", "Deny", "Skip", "Close")
# Descriptions that name a Material icon by what it shows rather than its name.
ICON_WORDS: dict[str, tuple[str, ...]] = {
    "heart": ("favorite", "favorite_border"),
    "like": ("favorite", "favorite_border", "thumb_up"),
    "plus": ("add", "add_circle"),
    "add": ("add", "add_circle"),
    "new": ("add", "edit"),
    "compose": ("edit", "create"),
    "magnifier": ("search",),
    "search": ("search",),
    "comment": ("comment", "chat_bubble", "mode_comment"),
    "send": ("send",),
    "back": ("arrow_back",),
    "more": ("more_vert", "more_horiz"),
    "menu": ("menu",),
    "share": ("share",),
    "play": ("play_arrow",),
}
# Screen regions for "Click icon (desc, position)": (x0, x1), (y0, y1) as fractions.
REGIONS: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {
    "top": ((0, 1), (0, 0.5)), "bottom": ((0, 1), (0.5, 1)), "left": ((0, 0.5), (0, 1)),
    "right": ((0.5, 1), (0, 1)), "center": ((0, 1), (0, 1)),
    "top left": ((0, 0.5), (0, 0.5)), "top right": ((0.5, 1), (0, 0.5)),
    "bottom left": ((0, 0.5), (0.5, 1)), "bottom right": ((0.5, 1), (0.5, 1)),
}


class ExecutionError(RuntimeError):
    """The operation's target is not on screen (after dismissing, waiting and scrolling)."""


@dataclass
class Outcome:
    ok: bool
    detail: str = ""
    extra: list[Operation] = field(default_factory=list)  # recovery actions taken first
    point: tuple[int, int] | None = None


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w@.]+", " ", text.lower()).split())


def icon_names(description: str) -> set[str]:
    """Material icon names a description can mean (by synonym, or the name's own words)."""
    words = _norm(description).split()
    names = {"_".join(words)}
    for w in words:
        names.update(ICON_WORDS.get(w, ()))
        names.add(w)
    return names


def in_region(el: Element, position: str, width: int, height: int) -> bool:
    (x0, x1), (y0, y1) = REGIONS.get(position, REGIONS["center"])
    cx, cy = el.center
    return x0 <= cx / width <= x1 and y0 <= cy / height <= y1


def resolve(phone: SimPhone, op: Operation) -> Element | None:
    """The on-screen element a Click/Long press operation means, or None."""
    els = phone.elements()
    if isinstance(op, ClickText | LongPress):
        want = _norm(op.text)
        found = [e for e in els if e.text and _norm(e.text) == want and e.kind not in ("key", "status")]
        if not found:  # a line may be cut with an ellipsis: match the start
            found = [e for e in els if e.text.endswith("…") and len(e.text) > 4
                     and want.startswith(_norm(e.text.rstrip("…")))]
        return _best(found)
    if isinstance(op, ClickIcon):
        names = icon_names(op.description)
        w, h = phone.info.width, phone.info.height
        found = [e for e in els if e.icon in names and e.kind not in ("key", "status")]
        placed = [e for e in found if in_region(e, op.position, w, h)]
        return _best(placed or found)
    return None


def _best(found: Sequence[Element]) -> Element | None:
    """Prefer clickable over plain text, non-editable over the field being typed in, and the
    top layer (later elements are drawn over earlier ones)."""
    if not found:
        return None
    ranked = sorted(enumerate(found), key=lambda ie: (ie[1].clickable, not ie[1].editable, ie[0]))
    return ranked[-1][1]


def _inside(el: Element, box: tuple[int, int, int, int]) -> bool:
    """Wholly inside: a full-width row under the dialog only overlaps it."""
    x0, y0, x1, y1 = el.bbox
    return box[0] <= x0 and box[1] <= y0 and x1 <= box[2] and y1 <= box[3]


class GroundTruthExecutor:
    """Executes operations on one SimPhone with ground-truth aim (tests and scoring only)."""

    def __init__(self, phone: SimPhone, *, max_scrolls: int = 4) -> None:
        self.phone = phone
        self.max_scrolls = max_scrolls

    # -- gestures, as the actuator makes them --------------------------------------------
    def page(self, down: bool) -> None:
        w, h = self.phone.info.width, self.phone.info.height
        # 0.6 -> 0.25 of the height: above a soft keyboard, whose top is at about 0.66
        y_from, y_to = (int(h * 0.6), int(h * 0.25)) if down else (int(h * 0.25), int(h * 0.6))
        self.phone.swipe(w // 2, y_from, w // 2, y_to, 300)

    def swipe(self, direction: str) -> None:
        w, h = self.phone.info.width, self.phone.info.height
        cx, cy = w // 2, h // 2
        dx = {"left": -1, "right": 1}.get(direction, 0) * int(w * 0.35)
        dy = {"up": -1, "down": 1}.get(direction, 0) * int(h * 0.25)
        self.phone.swipe(cx - dx, cy - dy, cx + dx, cy + dy, 300)

    def _wait(self) -> None:
        if self.phone.loading():
            self.phone.settle()

    # -- the operations ------------------------------------------------------------------
    def run(self, op: Operation) -> Outcome:
        self._wait()
        try:
            out = self._run(op)
        except ExecutionError as e:
            out = Outcome(False, str(e))
        self._wait()
        return out

    def _run(self, op: Operation) -> Outcome:
        phone = self.phone
        match op:
            case OpenApp(name=name):
                pkg = self.package_for(name)
                if pkg is None:
                    return Outcome(False, f"no app called {name!r} on this phone")
                phone.launch(pkg)
                return Outcome(True)
            case ClickText() | ClickIcon() | LongPress():
                return self._click(op)
            case TypeText(text=text):
                if phone.focused_field() is None:
                    phone.type_text(text)  # goes nowhere, as on a phone
                    return Outcome(False, "no focused field: the text went nowhere")
                phone.type_text(text)
                return Outcome(True)
            case PageDown():
                extra = self._clear_dialog(None)
                self.page(down=True)
                return Outcome(True, extra=extra)
            case PageUp():
                extra = self._clear_dialog(None)
                self.page(down=False)
                return Outcome(True, extra=extra)
            case Swipe(direction=d):
                extra = self._clear_dialog(None)
                self.swipe(d)
                return Outcome(True, extra=extra)
            case Enter():
                if phone.focused_field() is None:
                    return Outcome(False, "no focused field: ENTER did nothing")
                phone.key(KEY_ENTER)
                return Outcome(True)
            case Clear():  # as the actuator does it on Android 13+: Ctrl+A, DEL
                if phone.focused_field() is None:
                    return Outcome(False, "no focused field to clear")
                phone.key_combination([KEY_CTRL_LEFT, KEY_A])
                phone.key(KEY_DEL)
                return Outcome(True)
            case Back():
                phone.key(KEY_BACK)
                return Outcome(True)
            case Exit():
                phone.key(KEY_HOME)
                return Outcome(True)
            case Wait():
                phone.settle()
                return Outcome(True)
            case Stop() | Ask():
                return Outcome(True)
        return Outcome(False, f"unsupported operation {op!r}")

    def package_for(self, name: str) -> str | None:
        want = _norm(name)
        for app in self.phone.apps():
            if _norm(app.label) == want or app.package == name:
                return app.package
        for app in self.phone.apps():  # "Google Maps" for "Maps", "Play Store" for "Google Play"
            label = _norm(app.label)
            if label in want or want in label:
                return app.package
        return None

    def _click(self, op: ClickText | ClickIcon | LongPress) -> Outcome:
        extra: list[Operation] = []
        extra += self._clear_dialog(op)
        target = resolve(self.phone, op)
        scrolls = 0
        while target is None and scrolls < self.max_scrolls:
            self.page(down=True)
            extra.append(PageDown())
            scrolls += 1
            self._wait()
            target = resolve(self.phone, op)
        if target is None:
            for _ in range(scrolls):  # put the page back as it was
                self.page(down=False)
            raise ExecutionError(f"{op!r}: no such element on screen")
        x, y = target.center
        if isinstance(op, LongPress):
            self.phone.long_press(x, y, 800)
        else:
            self.phone.tap(x, y)
        return Outcome(True, extra=extra, point=(x, y))

    def _clear_dialog(self, op: ClickText | ClickIcon | LongPress | None) -> list[Operation]:
        """Dismiss a dialog that stands between us and the target; return what was done."""
        box = self.phone.dialog_box()
        if box is None:
            return []
        target = resolve(self.phone, op) if op is not None else None
        if target is not None and _inside(target, box):
            return []  # the target is in the dialog itself ("OK")
        for text in DISMISS:
            for el in self.phone.find(text, kind="button"):
                if _inside(el, box):
                    self.phone.tap(*el.center)
                    self._wait()
                    return [ClickText(text)]
        self.phone.key(KEY_BACK)
        return [Back()]


@dataclass
class Trace:
    """What a reference run did: each operation with its outcome."""

    steps: list[tuple[Operation, Outcome]] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        return [f"{op!r}: {o.detail}" for op, o in self.steps if not o.ok]


def run_reference(phone: SimPhone, ops: Sequence[Operation]) -> Trace:
    """Execute a whole operation list with ground-truth aim; never raises on a miss."""
    ex = GroundTruthExecutor(phone)
    trace = Trace()
    for op in ops:
        trace.steps.append((op, ex.run(op)))
    return trace
