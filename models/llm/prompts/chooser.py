"""The chooser's question for perception's Ambiguous: which numbered box on the screen is
the planner's target; the answer is ``Box: N`` or ``Box: none``."""

from __future__ import annotations

import re
from collections.abc import Sequence

from models.llm.errors import ParseError
from models.llm.messages import ChatMessage, ChatModel, ContentPart, ImageInput
from models.llm.prompts.reask import Parsed, ReplyFormat, ask_until_parsed
from models.llm.prompts.shared import one_line
from models.llm.replytext import FENCE_RE, unwrap_answer

CHOOSER_SYSTEM = (
    "You help operate an Android phone. The image shows the screen with numbered boxes around "
    "the places that might be the target. Pick the box that is the target."
)


_CHOICE_RE = re.compile(
    r"^(?:(?:answer|box|choice|number)\s*(?:[:#]\s*)?)?(?:#\s*)?(\d+|none)\s*\.?$", re.IGNORECASE
)


def chooser_messages(
    *,
    instruction: str,
    target: str,
    image: bytes,
    labels: Sequence[int],
    texts: Sequence[str] = (),
    reason: str = "",
    crops: Sequence[bytes] = (),
    thought: str = "",
) -> list[ChatMessage]:
    """Ask which numbered box (``labels``, as drawn on ``image``) is ``target``.

    ``thought`` is the planner's Thought for this action (why it wants the target: it tells
    apart two identical "Reply" buttons by what they belong to).

    ``texts``, parallel to ``labels``, is what perception read in each box (optional);
    ``reason`` is why perception could not pick one itself (optional); ``crops``, parallel
    to ``labels``, are close-ups of the boxes, sent after the screen (optional, "" = none)."""
    numbers = ", ".join(str(n) for n in labels)
    read = ""
    if any(texts):
        read = "Text read in the boxes: " + "; ".join(
            f'{n}: "{one_line(t, 60)}"' for n, t in zip(labels, texts, strict=False) if t
        ) + "\n"
    why = f"Why these boxes: {one_line(reason, 300)}\n" if reason else ""
    meant = f"What the agent means to do, in its words: {one_line(thought, 600)}\n" if thought else ""
    text = (
        f"The user's instruction: {one_line(instruction, 1000)}\n"
        f"The target to tap: {one_line(target, 200)}\n{meant}"
        f"The boxes are numbered {numbers}. Which box is the target?\n{read}{why}"
        "Reply with one line: 'Box: N' with N one of the numbers, or 'Box: none' when no box "
        "is the target."
    )
    parts: list[ContentPart] = [text, ImageInput(image)]
    for n, crop in zip(labels, crops, strict=False):
        if crop:  # a small box is hard to judge on a downscaled screen
            parts += [f"Box {n} close up:", ImageInput(crop)]
    return [ChatMessage.text("system", CHOOSER_SYSTEM), ChatMessage("user", tuple(parts))]


def parse_choice(text: str, labels: Sequence[int]) -> int | None:
    """The chosen label, or None for "none". The last non-empty line must be the answer
    (``Box: 3``, ``3``, ``Box: none``); lines before it are ignored as reasoning."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not FENCE_RE.match(ln)]
    allowed = ", ".join(str(n) for n in labels)
    if not lines:
        raise ParseError(f"empty reply: answer 'Box: N' with N one of {allowed}, or 'Box: none'", text)
    m = _CHOICE_RE.match(unwrap_answer(lines[-1]))
    if m is None:
        raise ParseError(
            f"could not read a box number from {lines[-1][:80]!r}: end the reply with one line "
            f"'Box: N' with N one of {allowed}, or 'Box: none'",
            text,
        )
    if m.group(1).lower() == "none":
        return None
    n = int(m.group(1))
    if n not in labels:
        raise ParseError(f"there is no box {n}: the boxes are {allowed} (or 'Box: none')", text)
    return n


async def choose_box(
    llm: ChatModel,
    *,
    instruction: str,
    target: str,
    image: bytes,
    labels: Sequence[int],
    texts: Sequence[str] = (),
    reason: str = "",
    crops: Sequence[bytes] = (),
    max_reasks: int = 2,
    thought: str = "",
    answer: ReplyFormat | None = None,
) -> Parsed[int | None]:
    """The chooser call for perception's Ambiguous: the chosen label, or None (no box).
    ``answer``: the chooser's family format (``models.llm.families.answers``)."""
    msgs = chooser_messages(
        instruction=instruction, target=target, image=image, labels=labels, texts=texts,
        reason=reason, crops=crops, thought=thought,
    )
    return await ask_until_parsed(
        llm, "chooser", msgs, lambda t: parse_choice(t, labels), max_reasks=max_reasks,
        answer=answer,
    )
