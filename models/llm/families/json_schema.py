"""``json``: structured output with ``response_format: {"type": "json_schema", ...}``
(platform.openai.com/docs/guides/structured-outputs; vLLM's guided decoding and Ollama's
``format`` accept the same schema). The reply is one object
``{"thought": ..., "op": <llm parse vocabulary>, "args": {...}}``.

Coordinates: pixels of the screenshot as sent, whose size the prompt states. Image: the
screen fitted within ``llm.max_image_side``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from models.llm.errors import ParseError
from models.llm.families.base import FamilyBase, FamilyReply, ToolCall
from models.llm.opvocab import OP_NAMES, operation_from_call
from models.llm.replytext import json_objects, strip_reasoning

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "thought": {"type": "string"},
        "progress": {"type": "string", "description": "what is done, and what remains"},
        "memory": {"type": "string", "description": "content a later step needs, or empty"},
        "op": {"type": "string", "enum": list(OP_NAMES)},
        "args": {
            "type": "object",
            "description": "open_app: name; click_text: text; click_icon: description, position; "
                           "tap_point: x, y; long_press: text or x, y; type: text, submit; "
                           "swipe: direction or x1, y1, x2, y2; ask: question; note: text; "
                           "others: none",
        },
    },
    "required": ["thought", "op", "args"],
}

SYSTEM = (
    "You operate an Android phone on behalf of a user. Each turn you get the instruction, "
    "the steps so far and a screenshot ({width}x{height} pixels; points are pixels of it). "
    "Answer with one JSON object: thought (why), op (the single next action, one of "
    + ", ".join(OP_NAMES) + ") and args."
)


class JsonFamily(FamilyBase):
    name = "json"
    system_prompt = SYSTEM

    def memory_prompt(self, *, progress: bool, memory: bool) -> str:
        return (
            (" Also give progress: what is done so far, this action included, and what "
             "remains." if progress else "")
            + (" Also give memory: content on this screen a later step will need (a price, a "
               "name), or \"\"; op note keeps a text too." if memory else "")
        )

    def request_options(self) -> dict[str, Any]:
        return {"response_format": {
            "type": "json_schema", "json_schema": {"name": "action", "schema": SCHEMA},
        }}

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        objs = [o for o in json_objects(strip_reasoning(text)) if isinstance(o.get("op"), str)]
        if not objs:
            raise ParseError('no JSON object with "op": answer {"thought": ..., "op": ..., "args": {...}}', text)
        obj = objs[-1]
        args = obj.get("args", {})
        if not isinstance(args, dict):
            raise ParseError('"args" must be a JSON object', text)
        thought, progress, memory = (obj.get(k) for k in ("thought", "progress", "memory"))
        return FamilyReply(
            operation_from_call(str(obj["op"]), args),
            thought if isinstance(thought, str) else "", msgspec.json.encode(obj).decode(),
            progress=progress if isinstance(progress, str) else "",
            memory=memory if isinstance(memory, str) else "",
        )
