"""One planner decision in any family: its prompt, its request options, its parser, and the
re-ask on a reply that cannot be used (``prompts.reask``, with tool calls passed to the
parser)."""

from __future__ import annotations

from models.llm.families.base import Family, ToolCall, image_size
from models.llm.families.react import PlannerReply
from models.llm.messages import ChatModel, LLMReply
from models.llm.prompts.planner import PlannerInput
from models.llm.prompts.reask import Parsed, ask_until_read


async def plan_step(
    llm: ChatModel, family: Family, inp: PlannerInput, *, screen: tuple[int, int] | None = None,
    keep_screenshots: int = 1, max_reasks: int = 2,
) -> Parsed[PlannerReply]:
    """Prompt, call, parse with ``family``; points come back in device pixels of ``screen``
    (width, height; None: the screenshot's own size). Raises ``UnparsableReply`` when every
    try was unusable."""
    geom = family.geometry(*(screen or image_size(inp.screenshot)))
    messages = family.planner_messages(inp, geom, keep_screenshots=keep_screenshots)

    def read(reply: LLMReply) -> PlannerReply:
        r = family.parse(reply.text, geom, tuple(ToolCall(n, a) for n, a in reply.tool_calls))
        return PlannerReply(r.observation, r.thought, r.operation, r.action_text or reply.text,
                            summary=r.summary, progress=r.progress, memory=r.memory,
                            dropped=r.dropped)

    def said(reply: LLMReply) -> str:
        return reply.text or "; ".join(f"{n}({a})" for n, a in reply.tool_calls)

    return await ask_until_read(
        llm, "planner", messages, read, said=said, options=family.request_options(),
        max_reasks=max_reasks, who=f"planner ({family.name})",
    )
