"""The chooser's and the reflector's answers in their role's family (``llm.family.chooser``,
``llm.family.reflector``; ``auto`` from that role's model name).

Their questions are not actions (which numbered box is the target; is the instruction done;
what did this action do; with ``agent.planning = "call"``, the planner's progress after a
step), so every family keeps the prompts and the line parsers of
``models/llm/prompts/`` (``Box: N``, ``Complete: yes|no`` + ``Reason:``, ``Verdict: A|B|C``
+ ``Reason:``). What a family changes is how the answer may come back:

- ``tools``: one function for the question, ``tool_choice: "required"`` (OpenAI function
  calling, vLLM's tool parsers, Ollama): ``choose_box(box)`` with the numbers drawn (or
  "none") as an enum, ``check_completion(complete, reason)``, ``judge_action(verdict,
  reason)``, ``update_progress(progress)`` (the planner role's progress call);
- ``json``: ``response_format`` with a JSON schema of the same fields;
- ``react``: the plain prompt;
- ``uitars``, ``qwen``, ``autoglm``: the plain prompt too. Their trained formats are action
  spaces for a phone and have no form for a box number or a verdict; what they do have is
  an answer call, and a reply that uses it is read: UI-TARS ``finished(content='...')``,
  Qwen's ``mobile_use`` ``answer`` (its ``text``), AutoGLM ``finish(message="...")``. Think
  blocks and answer wrappers are dropped for every family.

Whatever came back becomes the text the line parser reads (``AnswerFormat.text``), so a
reply that fits none of this is re-asked with the parser's message, as for ``react``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from models.llm.messages import LLMReply
from models.llm.replytext import clean_reply, find_calls, json_objects

Question = Literal["choice", "completion", "judgement", "progress"]

_REASON = {"type": "string", "description": "one sentence"}


def _schema(question: Question, labels: Sequence[int]) -> tuple[str, str, dict[str, Any]]:
    """(function name, description, JSON schema of the arguments) for one question."""
    if question == "choice":
        return "choose_box", "The numbered box that is the target, or none.", {
            "type": "object",
            "properties": {"box": {"type": "string",
                                   "enum": [*(str(n) for n in labels), "none"]}},
            "required": ["box"], "additionalProperties": False,
        }
    if question == "completion":
        return "check_completion", "Whether the instruction is completely done.", {
            "type": "object",
            "properties": {"complete": {"type": "boolean"},
                           "reason": {**_REASON, "description": "when not: what is missing"}},
            "required": ["complete", "reason"], "additionalProperties": False,
        }
    if question == "progress":
        return "update_progress", "The task's progress after the step just taken.", {
            "type": "object",
            "properties": {"progress": {"type": "string",
                                        "description": "what is done so far, and what remains"}},
            "required": ["progress"], "additionalProperties": False,
        }
    return "judge_action", "What the action did: A correct, B wrong page, C no effect.", {
        "type": "object",
        "properties": {"verdict": {"type": "string", "enum": ["A", "B", "C"]},
                       "reason": _REASON},
        "required": ["verdict", "reason"], "additionalProperties": False,
    }


def _line(question: Question, args: dict[str, Any]) -> str | None:
    """The structured answer as the line(s) the react parser reads; None: not this shape."""
    if question == "choice" and "box" in args:
        return f"Box: {args['box']}"
    if question == "completion" and "complete" in args:
        c = args["complete"]
        yes = c if isinstance(c, bool) else str(c).strip().lower()
        word = "yes" if yes in (True, "yes", "true") else "no" if yes in (False, "no", "false") \
            else str(c)
        return f"Complete: {word}\nReason: {args.get('reason', '')}"
    if question == "progress" and "progress" in args:
        return f"Progress: {args['progress']}"
    if question == "judgement" and "verdict" in args:
        return f"Verdict: {args['verdict']}\nReason: {args.get('reason', '')}"
    return None


# The answer calls of the coordinate families (see the module docstring).
_ANSWER_CALLS = {"uitars": ("finished", "content"), "autoglm": ("finish", "message")}


@dataclass(frozen=True)
class AnswerFormat:
    """How one role's answer to one question is asked for and read back."""

    family: str
    question: Question
    labels: tuple[int, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)  # extra request parameters

    def text(self, reply: LLMReply) -> str:
        """The reply as the react line parser reads it."""
        name, _, _ = _schema(self.question, self.labels)
        if self.family == "tools":
            for fn, raw in reversed(reply.tool_calls):
                if fn == name:
                    try:
                        args = msgspec.json.decode(raw) if raw.strip() else {}
                    except msgspec.DecodeError:
                        return reply.text or f"{fn}({raw})"  # the parser says what is wrong
                    line = _line(self.question, args) if isinstance(args, dict) else None
                    if line is not None:
                        return line
        text = clean_reply(reply.text)
        if self.family in ("tools", "json"):
            for obj in reversed(json_objects(text)):
                inner = obj.get("arguments", obj)  # a call written in the text
                line = _line(self.question, inner) if isinstance(inner, dict) else None
                if line is not None:
                    return line
        if self.family == "qwen":
            for obj in reversed(json_objects(text)):
                args = obj.get("arguments")
                if isinstance(args, dict) and str(args.get("action", "")).lower() == "answer":
                    return str(args.get("text", ""))
        if self.family in _ANSWER_CALLS:
            fn, key = _ANSWER_CALLS[self.family]
            calls = [c for c in find_calls(text, (fn,)) if not c.truncated]
            if calls:
                said = calls[-1].args.get(key, calls[-1].positional)
                return re.sub(r"\\n", "\n", said)
        return text


def answer_format(family: str, question: Question, labels: Sequence[int] = ()) -> AnswerFormat:
    """The format of ``question`` for a role in ``family`` (a name from ``FAMILY_NAMES``,
    or a variant such as ``uitars-1.0``; auto already resolved by the caller)."""
    base = family.split("-", 1)[0].removesuffix("2.5").removesuffix("3")
    options: dict[str, Any] = {}
    name, description, schema = _schema(question, labels)
    if base == "tools":
        options = {"tools": [{"type": "function", "function": {
            "name": name, "description": description, "parameters": schema}}],
            "tool_choice": "required"}
    elif base == "json":
        options = {"response_format": {"type": "json_schema",
                                       "json_schema": {"name": name, "schema": schema}}}
    return AnswerFormat(base, question, tuple(labels), options)
