"""Mouse and keyboard operations with a phone meaning, in one table, and the one rule for a
reply that carries several actions.

Desktop-trained models (OpenAI's computer use, OpenCUA's ``pyautogui``, ShowUI's web
actions) answer in mouse and keyboard terms. Each family reads its own spelling and asks
``mouse_operation`` / ``key_operation`` what it means on a touch screen, so a double click
means the same in every family:

=================  ====================================================================
mouse / keyboard   on the phone
=================  ====================================================================
click (left)       a tap at the point
double click       a tap: Android has no double-tap event an app could tell apart from
                   two taps, and the operations the driver runs have none; one tap
                   selects or opens what a desktop double click would
triple click       a tap (it selects a line on a desktop; a tap puts the caret there)
right click        a long press: Android's context menu comes from touch-and-hold
middle click       refused: no phone meaning (no new tab by a button)
mouse back button  Back (the button's meaning on every desktop browser)
wheel scroll       a page scroll: the wheel turned down shows what is below (PageDown);
                   sideways shows what is beside it (a finger swipe the other way)
drag               a swipe from the first point to the last
move / hover       refused: a phone has no cursor, nothing happens on hover
keys               Enter / Return submits, Escape / Back goes back, Home goes home;
                   a shortcut (CTRL+O, ALT+TAB, ...) is refused: a phone has none
=================  ====================================================================

A refusal is a ``ParseError`` whose message tells the model what to do instead (it goes
back to the model in the re-ask).

**One action a step.** A reply with several actions (OpenAI's GA ``actions`` batch, several
``pyautogui`` lines, ShowUI's list of action dicts) runs the first, and the others are
recorded as dropped: ``first_of`` returns them, the family puts them in
``FamilyReply.dropped``, the episode logs them and the next prompt says which were not
run (``prompts.planner.dropped_feedback``), so the model sends them again if they are still needed: the
screen after the first action may have changed what they should be.
"""

from __future__ import annotations

from collections.abc import Sequence

from models.llm.errors import ParseError
from protocol.operations import (
    Back,
    Enter,
    Exit,
    LongPressPoint,
    Operation,
    PageDown,
    PageUp,
    Swipe,
    SwipePoints,
    TapPoint,
    Wait,
)

# The mouse table: a model's name for a mouse operation -> what it is on a phone.
# "tap": a tap at the point; "long_press": a long press there; "back": the Back key.
# A name missing here is refused by ``mouse_operation``.
MOUSE: dict[str, str] = {
    "click": "tap", "left_click": "tap", "leftclick": "tap", "left": "tap", "tap": "tap",
    "double_click": "tap", "doubleclick": "tap", "triple_click": "tap", "tripleclick": "tap",
    "right_click": "long_press", "rightclick": "long_press", "right": "long_press",
    "back": "back",
}
# Mouse operations refused, with the reason the model gets.
NO_PHONE_MEANING: dict[str, str] = {
    "move": "a phone has no cursor to move: tap the element with a click",
    "moveto": "a phone has no cursor to move: tap the element with a click",
    "mouse_move": "a phone has no cursor to move: tap the element with a click",
    "hover": "nothing happens on hover on a touch screen: tap the element with a click",
    "middle_click": "a middle click has no phone meaning: tap with a (left) click",
    "middleclick": "a middle click has no phone meaning: tap with a (left) click",
    "middle": "a middle click has no phone meaning: tap with a (left) click",
    "wheel": "a wheel click has no phone meaning: tap with a (left) click, or scroll",
    "forward": "there is no Forward on a phone: tap the link again, or go Back",
    "mousedown": "press and release are one tap on a phone: click, or drag to swipe",
    "mouseup": "press and release are one tap on a phone: click, or drag to swipe",
}


def _norm(name: str) -> str:
    return "_".join(name.strip().lower().replace("-", " ").split())


def mouse_operation(name: str, x: int, y: int) -> Operation:
    """A mouse button operation at (x, y) (model space) as a phone operation, by the table;
    ``ParseError`` with the reason for one that has no phone meaning."""
    n = _norm(name)
    what = MOUSE.get(n)
    if what == "tap":
        return TapPoint(x, y)
    if what == "long_press":
        return LongPressPoint(x, y)
    if what == "back":
        return Back()
    raise ParseError(NO_PHONE_MEANING.get(n, f"{name!r} is a mouse operation with no phone "
                                              "meaning: click to tap, drag to swipe, scroll"))


def drag_operation(points: Sequence[tuple[int, int]]) -> Operation:
    """A drag through ``points`` (model space): a swipe from the first to the last."""
    if len(points) < 2:
        raise ParseError("a drag needs a start and an end point (the finger's path)")
    (x1, y1), (x2, y2) = points[0], points[-1]
    return SwipePoints(x1, y1, x2, y2)


def scroll_operation(dx: float, dy: float) -> Operation:
    """A wheel scroll by (dx, dy), positive down / right as in every desktop API (a
    ``pyautogui.scroll`` amount is negative for down: negate it first): down shows what is
    below (PageDown); sideways shows what is beside it, a finger swipe the other way."""
    if dy == 0 and dx == 0:
        raise ParseError("a scroll needs an amount: positive scroll_y shows what is below")
    if abs(dy) >= abs(dx):
        return PageDown() if dy > 0 else PageUp()
    return Swipe("left") if dx > 0 else Swipe("right")


# Keys with a phone meaning; everything else (letters, F-keys, modifiers) is refused.
KEYS: dict[str, Operation] = {
    "enter": Enter(), "return": Enter(), "kp_enter": Enter(),
    "esc": Back(), "escape": Back(), "back": Back(), "browserback": Back(),
    "home": Exit(),
}
_MODIFIERS = {"ctrl", "control", "alt", "option", "cmd", "command", "super", "win", "meta",
              "shift", "fn", "ctrl_l", "ctrl_r", "alt_l", "alt_r"}


def key_operation(keys: Sequence[str]) -> Operation:
    """Keys pressed together (``["CTRL", "O"]``, ``["Return"]``) as a phone operation; a
    shortcut or a key with no phone meaning is refused with the reason."""
    ks = [_norm(k) for k in keys if k.strip()]
    if not ks:
        raise ParseError("a key press needs its keys, e.g. Enter")
    shown = "+".join(k.upper() for k in ks)
    if len(ks) > 1 or ks[0] in _MODIFIERS:
        raise ParseError(
            f"the keyboard shortcut {shown} has no meaning on a phone (it has no shortcuts): "
            "do it through the app's own controls (tap its menu or button), or open_app, "
            "Back, Home, Enter")
    op = KEYS.get(ks[0])
    if op is None:
        if ks[0] in ("wait",):
            return Wait()
        raise ParseError(
            f"the key {shown} has no phone meaning: only Enter, Back (Escape) and Home; type "
            "text with type")
    return op


def first_of(actions: Sequence[tuple[Operation, str]]) -> tuple[Operation, tuple[str, ...]]:
    """The one rule for a reply with several actions: the first runs; the others (as the
    model wrote them) are returned to be recorded as dropped."""
    if not actions:
        raise ParseError("the reply holds no action: give one")
    return actions[0][0], tuple(text for _, text in actions[1:])
