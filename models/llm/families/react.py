"""``react``: Mobile-Agent's Observation / Thought / Action text (Mobile-Agent, Wang et al.
2024, github.com/X-PLUG/MobileAgent: an operation named by its target's text or icon, which
perception grounds), read tolerantly. The prompt and the parser are
``models.llm.react.planner_messages`` / ``parse_planner_reply``, shared with the chooser and
completion prompts there; see that module for the grammar and what is tolerated.

Coordinates: ``Tap (x, y)``, ``Long press (x, y)``, ``Swipe (x1, y1, x2, y2)`` are pixels of
the screenshot as sent (the client may downscale it), mapped back to the screen here.
Image: the screenshot as captured (the client applies ``max_image_side``).
"""

from __future__ import annotations

from collections.abc import Sequence

from models.llm import ChatMessage
from models.llm.errors import ParseError
from models.llm.families.base import FamilyBase, FamilyReply, Geometry, ToolCall
from models.llm.react import PlannerInput, parse_planner_reply, planner_messages


class ReactFamily(FamilyBase):
    name = "react"

    def planner_messages(
        self, inp: PlannerInput, geom: Geometry, *, keep_screenshots: int = 1
    ) -> list[ChatMessage]:
        return planner_messages(inp, keep_screenshots=keep_screenshots)  # the ReAct prompt

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        if not text.strip():
            raise ParseError("the reply is empty: answer in the Observation/Thought/Action format")
        r = parse_planner_reply(text)
        return FamilyReply(r.action, r.thought, r.action_text, r.summary, r.observation,
                           progress=r.progress, memory=r.memory)
