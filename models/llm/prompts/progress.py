"""The planning call (``agent.planning = "call"``, Mobile-Agent-v2's planning agent): the
progress summary after one more step, as ``Progress: ...``."""

from __future__ import annotations

from collections.abc import Sequence

from models.llm.errors import ParseError
from models.llm.messages import ChatMessage, ChatModel
from models.llm.prompts.reask import Parsed, ReplyFormat, ask_until_parsed
from models.llm.prompts.shared import PastStep, memory_text, one_line, verdict_text
from models.llm.replytext import clean_reply, label_re
from protocol.operations import format_operation

PROGRESS_SYSTEM = (
    "You keep track of an agent's progress on a task on an Android phone. From the task, the "
    "progress so far and the step just taken, write the new progress: what has been done, "
    "and what remains to be done."
)


_PROGRESS_RE = label_re("progress")


def progress_messages(
    *, instruction: str, progress: str, step: PastStep, notes: Sequence[str] = (),
) -> list[ChatMessage]:
    text = (
        f"The task: {one_line(instruction, 1000)}\n"
        + memory_text(progress or "(nothing yet)", notes)
        + f"The step just taken: {one_line(format_operation(step.action), 300)} -> "
        f"{one_line(step.result, 200)}; {verdict_text(step)}\n"
        + (f"Why it was taken: {one_line(step.thought, 600)}\n" if step.thought else "")
        + "Reply with one line:\nProgress: <what is done so far, and what remains>"
    )
    return [ChatMessage.text("system", PROGRESS_SYSTEM), ChatMessage.text("user", text)]


def parse_progress(text: str) -> str:
    lines = [ln.strip() for ln in clean_reply(text).splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        m = _PROGRESS_RE.match(ln)
        if m:
            body = " ".join([m.group(1), *lines[i + 1:]]).strip()
            if body:
                return body
    raise ParseError("no 'Progress:' line: reply with one line 'Progress: <what is done, "
                     "what remains>'", text)


async def update_progress(
    llm: ChatModel, *, instruction: str, progress: str, step: PastStep,
    notes: Sequence[str] = (), max_reasks: int = 2, answer: ReplyFormat | None = None,
) -> Parsed[str]:
    """The planning call (agent.planning = "call"): the progress after one more step.
    ``answer``: the planner's family format (``models.llm.families.answers``)."""
    msgs = progress_messages(instruction=instruction, progress=progress, step=step, notes=notes)
    return await ask_until_parsed(llm, "planner", msgs, parse_progress, max_reasks=max_reasks,
                                  answer=answer)
