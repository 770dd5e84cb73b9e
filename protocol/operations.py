"""The agent's operation language, as typed values.

The planner's LLM answers with one of these in text form (``Click text (Save)``); the
parsers of ``models/llm/families/`` turn text into these Structs, and ``format_operation``
turns them back into the canonical text. ``ClickText``/``ClickIcon``/``LongPress`` name a
target that perception grounds into a point; ``TapPoint``/``LongPressPoint``/``SwipePoints``
carry device pixels already (the coordinate model families produce them, after mapping the
model's coordinate space to the screen), and perception only checks/snaps them.
"""

from __future__ import annotations

from typing import Literal, get_args

import msgspec

Position = Literal[
    "top", "bottom", "left", "right", "center",
    "top left", "top right", "bottom left", "bottom right",
]
Direction = Literal["left", "right", "up", "down"]
POSITIONS: tuple[Position, ...] = get_args(Position)
DIRECTIONS: tuple[Direction, ...] = get_args(Direction)

# Everything str.splitlines() splits on: an action is one line of the LLM's reply.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


class _Op(msgspec.Struct, frozen=True, tag_field="op", forbid_unknown_fields=True):
    pass


class OpenApp(_Op, tag="open_app", frozen=True):
    name: str


class ClickText(_Op, tag="click_text", frozen=True):
    text: str


class ClickIcon(_Op, tag="click_icon", frozen=True):
    description: str
    position: Position = "center"


class LongPress(_Op, tag="long_press", frozen=True):
    text: str


class TapPoint(_Op, tag="tap_point", frozen=True):
    """Tap at a point in device pixels."""

    x: int
    y: int


class LongPressPoint(_Op, tag="long_press_point", frozen=True):
    """Touch and hold a point in device pixels."""

    x: int
    y: int


class SwipePoints(_Op, tag="swipe_points", frozen=True):
    """Drag a finger from (x1, y1) to (x2, y2), device pixels."""

    x1: int
    y1: int
    x2: int
    y2: int


class TypeText(_Op, tag="type", frozen=True):
    text: str
    # Press Enter after typing: UI-TARS ends ``type(content=...)`` with "\n" to submit.
    submit: bool = False


class Enter(_Op, tag="enter", frozen=True):
    """The Enter key (submit a search, send a message)."""


class Clear(_Op, tag="clear", frozen=True):
    """Empty the focused text field (a search box keeps its old query until cleared)."""


class PageUp(_Op, tag="page_up", frozen=True):
    pass


class PageDown(_Op, tag="page_down", frozen=True):
    pass


class Swipe(_Op, tag="swipe", frozen=True):
    direction: Direction


class Back(_Op, tag="back", frozen=True):
    pass


class Exit(_Op, tag="exit", frozen=True):
    """Go to the home screen."""


class Wait(_Op, tag="wait", frozen=True):
    pass


class Ask(_Op, tag="ask", frozen=True):
    question: str


class Stop(_Op, tag="stop", frozen=True):
    pass


class Note(_Op, tag="note", frozen=True):
    """Keep ``text`` (focus content: a price, a name) for every later prompt; the phone is
    not touched."""

    text: str


Operation = (
    OpenApp | ClickText | ClickIcon | LongPress | TypeText | PageUp | PageDown | Swipe
    | Back | Exit | Wait | Ask | Stop | TapPoint | LongPressPoint | SwipePoints | Enter | Clear
    | Note
)

# Operations whose target perception must turn into a point.
# A model's point (TapPoint, LongPressPoint) is checked and possibly snapped to an element.
GROUNDED_OPS: tuple[type[_Op], ...] = (ClickText, ClickIcon, LongPress, TapPoint, LongPressPoint)


def format_operation(op: Operation) -> str:
    """The canonical text form, exactly as the prompt teaches it to the LLM."""
    match op:
        case OpenApp(name=name):
            return f"Open app ({name})"
        case ClickText(text=text):
            return f"Click text ({text})"
        case ClickIcon(description=d, position=p):
            return f"Click icon ({d}, {p})"
        case LongPress(text=text):
            return f"Long press ({text})"
        case TypeText(text=text, submit=submit):
            return f"Type ({text})" + (" + Enter" if submit else "")
        case TapPoint(x=x, y=y):
            return f"Tap ({x}, {y})"
        case LongPressPoint(x=x, y=y):
            return f"Long press ({x}, {y})"
        case SwipePoints(x1=x1, y1=y1, x2=x2, y2=y2):
            return f"Swipe ({x1}, {y1}, {x2}, {y2})"
        case Enter():
            return "Enter"
        case Clear():
            return "Clear"
        case PageUp():
            return "Page up"
        case PageDown():
            return "Page down"
        case Swipe(direction=d):
            return f"Swipe ({d})"
        case Back():
            return "Back"
        case Exit():
            return "Exit"
        case Wait():
            return "Wait"
        case Ask(question=q):
            return f"Ask ({q})"
        case Stop():
            return "Stop"
        case Note(text=t):
            return f"Note ({t})"
    raise TypeError(f"not an operation: {op!r}")


def _text_problem(field: str, value: str) -> str | None:
    if not value.strip():
        return f"{field} is empty"
    if value != value.strip():
        return f"{field} has leading or trailing whitespace"
    if any(c in LINE_BREAKS for c in value):
        return f"{field} contains a line break"
    return None


def operation_problem(op: Operation) -> str | None:
    """Why ``op`` has no canonical one-line text form, or None when it has one.

    Text arguments must be non-empty, single-line and without surrounding whitespace (the
    parser strips it). Anything else is allowed, parentheses and commas included:
    ``parse_operation(format_operation(op)) == op`` holds for every op without a problem.
    """
    match op:
        case OpenApp(name=v):
            return _text_problem("app name", v)
        case ClickText(text=v) | LongPress(text=v) | TypeText(text=v):
            return _text_problem("text", v)
        case ClickIcon(description=d, position=p):
            return _text_problem("icon description", d) or (
                None if p in POSITIONS else f"unknown position {p!r}"
            )
        case Swipe(direction=d):
            return None if d in DIRECTIONS else f"unknown direction {d!r}"
        case Ask(question=q):
            return _text_problem("question", q)
        case Note(text=t):
            return _text_problem("note", t)
        case TapPoint(x=x, y=y) | LongPressPoint(x=x, y=y):
            return None if x >= 0 and y >= 0 else f"negative coordinate in ({x}, {y})"
        case SwipePoints(x1=x1, y1=y1, x2=x2, y2=y2):
            if min(x1, y1, x2, y2) < 0:
                return f"negative coordinate in ({x1}, {y1}, {x2}, {y2})"
    return None
