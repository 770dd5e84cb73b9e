"""The reflector's LLM judge on one action (Mobile-Agent-v2's reflection agent): from the
screens before and after, did the action do what was meant, lead to a wrong page, or do
nothing; the answer is ``Verdict: A|B|C`` and ``Reason: ...``."""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec

from models.llm.errors import ParseError
from models.llm.messages import ChatMessage, ChatModel, ImageInput
from models.llm.prompts.reask import Parsed, ReplyFormat, ask_until_parsed
from models.llm.prompts.shared import memory_text, one_line
from models.llm.replytext import FENCE_RE, REASON_RE, label_re, unwrap_answer
from protocol.operations import Operation, format_operation


class ActionVerdict(msgspec.Struct, frozen=True):
    """The LLM judge's verdict on one action (Mobile-Agent-v2's reflection agent)."""

    verdict: str  # "ok" (correct) | "wrong_page" (go back) | "unchanged" (no effect: retry)
    reason: str


JUDGE_SYSTEM = (
    "You check one action of an agent that operates an Android phone. You see the screen "
    "before the action and the screen after it. Decide what the action did: A) it did what "
    "the agent meant, the task can go on from here; B) it led to a wrong page, the agent "
    "must go back; C) it had no effect, the screen shows nothing of what was meant."
)


_JUDGE_RE = label_re("verdict")


_JUDGE_WORDS = {
    "a": "ok", "correct": "ok", "ok": "ok", "expected": "ok",
    "b": "wrong_page", "wrong page": "wrong_page", "wrong": "wrong_page",
    "c": "unchanged", "no effect": "unchanged", "no change": "unchanged", "unchanged": "unchanged",
}


def judge_messages(
    *, instruction: str, operation: Operation, thought: str, before: bytes, after: bytes,
    result: str = "", progress: str = "", notes: Sequence[str] = (),
) -> list[ChatMessage]:
    text = (
        f"The user's instruction: {one_line(instruction, 1000)}\n"
        + memory_text(progress, notes)
        + f"The action: {one_line(format_operation(operation), 300)}"
        + (f" ({one_line(result, 200)})" if result else "") + "\n"
        + (f"Why the agent chose it: {one_line(thought, 600)}\n" if thought else "")
        + "The screen before the action:\n"
    )
    ask = (
        "\nWhat did the action do? Reply in exactly this format:\n"
        "Verdict: A (correct), B (wrong page) or C (no effect)\nReason: <one sentence>"
    )
    return [
        ChatMessage.text("system", JUDGE_SYSTEM),
        ChatMessage("user", (text, ImageInput(before), "\nThe screen after the action:\n",
                             ImageInput(after), ask)),
    ]


def parse_judgement(text: str) -> ActionVerdict:
    """``Verdict: A|B|C`` (or correct / wrong page / no effect), then ``Reason: ...``."""
    fmt = ("Reply in exactly this format:\nVerdict: A (correct), B (wrong page) or C (no "
           "effect)\nReason: <one sentence>")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not FENCE_RE.match(ln)]
    idx = [i for i, ln in enumerate(lines) if _JUDGE_RE.match(ln)]
    if not idx:
        raise ParseError(f"no 'Verdict:' line. {fmt}", text)
    m = _JUDGE_RE.match(lines[idx[-1]])
    assert m is not None
    raw = unwrap_answer(m.group(1)).lower()
    word = re.sub(r"[^a-z ]", " ", raw).split()
    key = " ".join(word[:2]) if " ".join(word[:2]) in _JUDGE_WORDS else (word[0] if word else "")
    if key not in _JUDGE_WORDS:
        raise ParseError(f"'Verdict:' must be A, B or C, got {m.group(1)[:40]!r}. {fmt}", text)
    reason = ""
    for ln in lines[idx[-1] + 1:]:
        r = REASON_RE.match(ln)
        if r:
            reason = r.group(1).strip()
            break
    return ActionVerdict(_JUDGE_WORDS[key], reason)


async def judge_action(
    llm: ChatModel, *, instruction: str, operation: Operation, thought: str, before: bytes,
    after: bytes, result: str = "", progress: str = "", notes: Sequence[str] = (),
    max_reasks: int = 2,
    answer: ReplyFormat | None = None,
) -> Parsed[ActionVerdict]:
    """The reflector's LLM judge on one action's before and after screens."""
    msgs = judge_messages(instruction=instruction, operation=operation, thought=thought,
                          before=before, after=after, result=result, progress=progress,
                          notes=notes)
    return await ask_until_parsed(llm, "reflector", msgs, parse_judgement, max_reasks=max_reasks,
                                  answer=answer)
