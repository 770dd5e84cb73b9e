"""The reflector's completion check on Stop: is the instruction completely done, judged on
the steps and the final screen; the answer is ``Complete: yes|no`` and ``Reason: ...``."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from models.llm.errors import ParseError
from models.llm.messages import ChatMessage, ChatModel, ContentPart, ImageInput
from models.llm.prompts.reask import Parsed, ReplyFormat, ask_until_parsed
from models.llm.prompts.shared import PastStep, memory_text, one_line
from models.llm.replytext import FENCE_RE, REASON_RE, label_re, unwrap_answer
from protocol.operations import format_operation


class CompletionVerdict(msgspec.Struct, frozen=True):
    complete: bool
    reason: str


COMPLETION_SYSTEM = (
    "You check the work of an agent that operates an Android phone. From the user's "
    "instruction, the steps the agent took and the final screen, decide whether the "
    "instruction is completely done."
)


_COMPLETE_RE = label_re("complete")


def completion_messages(
    *, instruction: str, history: Sequence[PastStep], screenshot: bytes, max_history: int = 30,
    progress: str = "", notes: Sequence[str] = (), earlier_screens: int = 0,
) -> list[ChatMessage]:
    """The completion check's prompt: the instruction, the progress and the notes, the
    steps, and the final screen after the last ``earlier_screens`` screens of the history
    (a task that ends in another app is judged on what it read before)."""
    steps = list(history)[-max_history:]
    first_no = len(history) - len(steps) + 1
    listed = "\n".join(
        f"{first_no + k}. {one_line(format_operation(s.action))} -> {one_line(s.result)}"
        for k, s in enumerate(steps)
    ) or "(none)"
    text = (
        f"The user's instruction: {one_line(instruction, 1000)}\n"
        + memory_text(progress, notes)
        + f"The agent's steps:\n{listed}\n"
    )
    parts: list[ContentPart] = [text]
    shots = [(first_no + k, s.screenshot) for k, s in enumerate(steps) if s.screenshot]
    for no, shot in shots[-earlier_screens:] if earlier_screens > 0 else ():
        parts += [f"The screen step {no} was chosen on:\n", ImageInput(shot), "\n"]
    parts += ["The agent now says the instruction is done. The final screen:\n",
              ImageInput(screenshot)]
    ask = (
        "\nIs the instruction completely done? Reply in exactly this format:\n"
        "Complete: yes or no\nReason: <one sentence; when no, what is still missing>"
    )
    return [
        ChatMessage.text("system", COMPLETION_SYSTEM),
        ChatMessage("user", (*parts, ask)),
    ]


def parse_completion(text: str) -> CompletionVerdict:
    """``Complete: yes|no`` then ``Reason: ...`` (needed for "no"). Lines before
    ``Complete:`` are ignored as reasoning; anything between the two lines is an error."""
    lines = [ln.strip() for ln in text.splitlines() if not FENCE_RE.match(ln)]
    idx = [i for i, ln in enumerate(lines) if _COMPLETE_RE.match(ln)]
    fmt = "Reply in exactly this format:\nComplete: yes or no\nReason: <one sentence>"
    if len(idx) != 1:
        raise ParseError(
            ("no 'Complete:' line. " if not idx else "more than one 'Complete:' line. ") + fmt, text
        )
    i = idx[0]
    m = _COMPLETE_RE.match(lines[i])
    assert m is not None
    value = unwrap_answer(m.group(1)).lower()
    if value not in ("yes", "no"):
        raise ParseError(f"'Complete:' must be followed by yes or no, got {m.group(1)[:40]!r}. {fmt}", text)
    reason = ""
    rest = lines[i + 1:]
    nonempty = [k for k, ln in enumerate(rest) if ln]
    if nonempty:
        r = REASON_RE.match(rest[nonempty[0]])
        if r is None:
            raise ParseError(f"expected a 'Reason:' line after 'Complete:'. {fmt}", text)
        reason = " ".join([r.group(1), *rest[nonempty[0] + 1:]]).strip()
        reason = " ".join(reason.split())
    if value == "no" and not reason:
        raise ParseError(f"say what is missing on a 'Reason:' line. {fmt}", text)
    return CompletionVerdict(value == "yes", reason)


async def check_completion(
    llm: ChatModel,
    *,
    instruction: str,
    history: Sequence[PastStep],
    screenshot: bytes,
    max_reasks: int = 2,
    progress: str = "",
    notes: Sequence[str] = (),
    earlier_screens: int = 0,
    answer: ReplyFormat | None = None,
) -> Parsed[CompletionVerdict]:
    """The reflector's completion check on Stop."""
    msgs = completion_messages(instruction=instruction, history=history, screenshot=screenshot,
                               progress=progress, notes=notes, earlier_screens=earlier_screens)
    return await ask_until_parsed(llm, "reflector", msgs, parse_completion, max_reasks=max_reasks,
                                  answer=answer)
