"""The agent's operation language, as typed values.

The planner's LLM answers with one of these in text form (``Click text (Save)``); the
parser in ``actors/react.py`` turns text into these Structs, and ``format_operation``
turns them back into the canonical text. Nothing here knows about coordinates: perception
grounds ``ClickText``/``ClickIcon``/``LongPress`` into points.
"""

from __future__ import annotations

from typing import Literal

import msgspec

Position = Literal[
    "top", "bottom", "left", "right", "center",
    "top left", "top right", "bottom left", "bottom right",
]
Direction = Literal["left", "right", "up", "down"]


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


class TypeText(_Op, tag="type", frozen=True):
    text: str


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


Operation = (
    OpenApp | ClickText | ClickIcon | LongPress | TypeText | PageUp | PageDown | Swipe
    | Back | Exit | Wait | Ask | Stop
)

# Operations whose target perception must turn into a point.
GROUNDED_OPS: tuple[type[_Op], ...] = (ClickText, ClickIcon, LongPress)


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
        case TypeText(text=text):
            return f"Type ({text})"
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
    raise TypeError(f"not an operation: {op!r}")
