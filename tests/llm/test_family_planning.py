"""A planner decision in each non-text family, against the loopback OpenAI-compatible server:
the request carries the family's options, tool_calls replies with no text are read, points
come back in device pixels, and unusable replies are re-asked."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from models.llm import LLMClient, LLMSettings
from models.llm.families import get_family
from models.llm.families.planning import plan_step
from models.llm.prompts.planner import PlannerInput
from protocol.operations import ClickText, TapPoint
from tests.fixtures.openai_server import Behaviour, OpenAIServer
from tests.llm.conftest import png_screen

Settings = Callable[..., LLMSettings]
pytestmark = pytest.mark.anyio


async def test_tools_family_reads_tool_calls_without_text(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script(
        Behaviour.tool_call("click_text", "{}"),  # missing argument: re-asked
        Behaviour.tool_call("click_text", '{"text": "Save"}'),
    )
    inp = PlannerInput(instruction="save", screenshot=png_screen(100, 200))
    async with LLMClient(settings_for()) as llm:
        r = await plan_step(llm, get_family("tools"), inp, screen=(100, 200))
    assert r.value.action == ClickText("Save") and len(r.errors) == 1
    body = openai_server.requests[0].body
    assert body is not None and body["tool_choice"] == "required"
    assert any(t["function"]["name"] == "tap_point" for t in body["tools"])


async def test_uitars_point_is_mapped_to_the_device(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script("<think>hmm</think>\nThought: tap\nAction: click(start_box='(500,500)')")
    inp = PlannerInput(instruction="tap", screenshot=png_screen(100, 200))
    async with LLMClient(settings_for()) as llm:
        r = await plan_step(llm, get_family("uitars", "ui-tars-7b-sft"), inp,
                                   screen=(1080, 2400))
    assert r.value.action == TapPoint(540, 1200)
