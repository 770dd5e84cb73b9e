"""One planner decision in any family: its prompt, its request options, its parser, and the
re-ask on a reply that cannot be used (the same loop as ``models.llm.react.ask_until_parsed``,
with tool calls passed to the parser)."""

from __future__ import annotations

from models.llm import ChatMessage, ChatModel, LLMReply
from models.llm.errors import ParseError
from models.llm.families.base import Family, ToolCall
from models.llm.react import REASK_TEMPLATE, Parsed, PlannerInput, PlannerReply, UnparsableReply


async def plan_step_family(
    llm: ChatModel, family: Family, inp: PlannerInput, *, screen: tuple[int, int],
    keep_screenshots: int = 1, max_reasks: int = 2,
) -> Parsed[PlannerReply]:
    """Prompt, call, parse with ``family``; points come back in device pixels of ``screen``
    (width, height). Raises ``UnparsableReply`` when every try was unusable."""
    geom = family.geometry(*screen)
    messages = family.planner_messages(inp, geom, keep_screenshots=keep_screenshots)
    options = family.request_options()
    replies: list[LLMReply] = []
    errors: list[str] = []
    convo = list(messages)
    for _ in range(max(max_reasks, 0) + 1):
        # Only a family that needs request options sends any: a plain ChatModel suffices else.
        reply = await (llm.chat("planner", convo, options=options) if options
                       else llm.chat("planner", convo))
        replies.append(reply)
        try:
            r = family.parse(reply.text, geom, tuple(ToolCall(n, a) for n, a in reply.tool_calls))
        except ParseError as exc:
            errors.append(exc.message)
            said = reply.text or "; ".join(f"{n}({a})" for n, a in reply.tool_calls)
            convo = [
                *messages,
                ChatMessage.text("assistant", said),
                ChatMessage.text("user", REASK_TEMPLATE.format(error=exc.message)),
            ]
            continue
        value = PlannerReply(r.observation, r.thought, r.operation, r.action_text or reply.text,
                             summary=r.summary, progress=r.progress, memory=r.memory)
        return Parsed(value, tuple(replies), tuple(errors))
    raise UnparsableReply(
        f"planner ({family.name}): no usable reply after {len(replies)} tries; last problem: "
        f"{errors[-1]}",
        errors=tuple(errors), replies=tuple(replies),
    )
