"""``tools``: OpenAI function calling (platform.openai.com/docs/guides/function-calling),
one function per operation of the ``llm parse`` vocabulary (``models.llm.opvocab``) with a
JSON schema, ``tool_choice: "required"``. vLLM's tool parsers (``--enable-auto-tool-choice``)
and Ollama's ``tools`` answer in the same ``tool_calls`` shape; a server that puts the call
in the text as ``{"name": ..., "arguments": ...}`` is read too.

Coordinates (``tap_point``, ``long_press`` with x/y, ``swipe`` with x1..y2): pixels of the
screenshot as sent, whose size the prompt states. Image: the screen fitted within
``llm.max_image_side``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import msgspec

from models.llm.errors import ParseError
from models.llm.families.base import FamilyBase, FamilyReply, ToolCall
from models.llm.opvocab import operation_from_call
from models.llm.replytext import json_objects, strip_reasoning
from protocol.operations import DIRECTIONS, POSITIONS

_STR = {"type": "string"}
_INT = {"type": "integer", "minimum": 0}


def _fn(name: str, description: str, props: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name, "description": description,
            "parameters": {"type": "object", "properties": props, "required": list(required),
                           "additionalProperties": False},
        },
    }


TOOLS: list[dict[str, Any]] = [
    _fn("open_app", "Open the app whose home-screen label is `name`.", {"name": _STR}, ["name"]),
    _fn("click_text", "Tap where `text` is written; copy it exactly.", {"text": _STR}, ["text"]),
    _fn("click_icon", "Tap an icon without text.",
        {"description": _STR, "position": {"type": "string", "enum": list(POSITIONS)}},
        ["description"]),
    _fn("tap_point", "Tap the point x, y (pixels of the screenshot).", {"x": _INT, "y": _INT},
        ["x", "y"]),
    _fn("long_press", "Touch and hold: where `text` is written, or the point x, y.",
        {"text": _STR, "x": _INT, "y": _INT}),
    _fn("type", "Type `text` into the focused field; submit=true presses Enter after.",
        {"text": _STR, "submit": {"type": "boolean"}}, ["text"]),
    _fn("swipe", "Swipe the screen in `direction`, or drag from x1, y1 to x2, y2.",
        {"direction": {"type": "string", "enum": list(DIRECTIONS)}, "x1": _INT, "y1": _INT,
         "x2": _INT, "y2": _INT}),
    _fn("scroll_up", "Scroll up, to see what is above.", {}),
    _fn("scroll_down", "Scroll down, to see what is below.", {}),
    _fn("back", "Go back to the previous screen.", {}),
    _fn("home", "Go to the home screen.", {}),
    _fn("enter", "Press the Enter key.", {}),
    _fn("clear", "Empty the focused text field.", {}),
    _fn("wait", "Do nothing this step: the screen is still loading.", {}),
    _fn("stop", "The instruction is fully done.", {}),
    _fn("ask", "Ask the user a question when the instruction leaves a choice open.",
        {"question": _STR}, ["question"]),
    _fn("note", "Keep `text` for later steps (a price, a name); the phone is not touched.",
        {"text": _STR}, ["text"]),
]

SYSTEM = (
    "You operate an Android phone on behalf of a user. Each turn you get the instruction, "
    "the steps so far and a screenshot ({width}x{height} pixels). Call exactly one function: "
    "the single next action. Say in one sentence why, in the message text."
)


_FIELD_RE = re.compile(r"^[ \t]*(?:\*\*)?(progress|memory)(?:\*\*)?[ \t]*:[ \t]*(.*)$",
                       re.IGNORECASE | re.MULTILINE)


class ToolsFamily(FamilyBase):
    name = "tools"
    system_prompt = SYSTEM

    def memory_prompt(self, *, progress: bool, memory: bool) -> str:
        return (
            (" In the message text, add a line 'Progress: <what is done, this action "
             "included, and what remains>'." if progress else "")
            + (" Add a line 'Memory: <content on this screen a later step needs, or None>' "
               "there too; the note function keeps a text as well." if memory else "")
        )

    def request_options(self) -> dict[str, Any]:
        return {"tools": TOOLS, "tool_choice": "required"}

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        if tool_calls:
            call = tool_calls[-1]
            name, raw = call.name, call.arguments
            try:
                args = msgspec.json.decode(raw) if raw.strip() else {}
            except msgspec.DecodeError as exc:
                raise ParseError(f"the arguments of {name} are not JSON: {exc}") from None
        else:
            objs = [o for o in json_objects(strip_reasoning(text)) if isinstance(o.get("name"), str)]
            if not objs:
                raise ParseError("no function call: call exactly one of the functions", text)
            name = str(objs[-1]["name"])
            args = objs[-1].get("arguments", objs[-1].get("parameters", {}))
            if isinstance(args, str):
                try:
                    args = msgspec.json.decode(args)
                except msgspec.DecodeError as exc:
                    raise ParseError(f"the arguments of {name} are not JSON: {exc}") from None
            raw = msgspec.json.encode(objs[-1]).decode()
        if not isinstance(args, dict):
            raise ParseError(f"the arguments of {name} must be a JSON object")
        fields = {m.group(1).lower(): m.group(2).strip() for m in _FIELD_RE.finditer(text)}
        thought = _FIELD_RE.sub("", text).strip()
        return FamilyReply(operation_from_call(name, args), thought, f"{name}({raw})",
                           progress=fields.get("progress", ""), memory=fields.get("memory", ""))
