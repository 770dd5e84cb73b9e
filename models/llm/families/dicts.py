"""Objects in a reply as the GUI models write them: JSON, or a Python dict literal
(``{'action_type': 'click', 'box_2d': [[...]]}``, GLM's ``Action:`` line), found by their
balanced braces in any surrounding prose. Nothing here decides what an object means."""

from __future__ import annotations

import ast
from typing import Any

import msgspec

_DECODER = msgspec.json.Decoder()


def _spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every top-level ``{...}`` in ``text``, quotes respected."""
    out: list[tuple[int, int]] = []
    depth, start, quote, esc = 0, -1, "", False
    for k, c in enumerate(text):
        if quote:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == quote:
                quote = ""
        elif c in "\"'" and depth:
            quote = c
        elif c == "{":
            if depth == 0:
                start = k
            depth += 1
        elif c == "}" and depth:
            depth -= 1
            if depth == 0:
                out.append((start, k + 1))
    return out


def decode_object(raw: str) -> dict[str, Any] | None:
    """``raw`` as a JSON object, else as a Python dict literal; None when it is neither."""
    try:
        obj = _DECODER.decode(raw)
    except msgspec.DecodeError:
        try:
            obj = ast.literal_eval(raw)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return obj if isinstance(obj, dict) else None


def objects(text: str) -> list[dict[str, Any]]:
    """Every top-level object in ``text`` that decodes (JSON or a Python literal), in order.
    An apostrophe in prose before an object does not hide it: quotes count only inside
    braces."""
    found = []
    for a, b in _spans(text):
        obj = decode_object(text[a:b])
        if obj is not None:
            found.append(obj)
    return found
