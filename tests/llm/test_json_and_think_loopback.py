"""The ``json`` family and think-block replies, end to end on the loopback OpenAI-compatible
server: the real ``LLMClient`` under the real ``LLMPolicy`` (the planner actor's policy),
with the family picked from ``llm.family.planner`` as the agent picks it.

- ``json``: the request carries ``response_format`` of type ``json_schema`` in the shape the
  OpenAI API documents (platform.openai.com/docs/guides/structured-outputs), the schema
  names every operation, and the point in the reply maps from the image actually sent; a
  reply that breaks the schema is re-asked with the problem, counted, and never executed.
- think blocks: an ``Action:`` line or a JSON action mentioned while thinking never wins
  over the action after the block.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from actors.planner import LLMPolicy, RoleSetup, StepContext
from models.llm import LLMClient, LLMSettings
from models.llm.families.json_schema import SCHEMA
from models.llm.opvocab import OP_NAMES
from models.llm.settings import RoleFamilies
from protocol.operations import Back, ClickText, OpenApp, TapPoint, TypeText
from tests.fixtures.openai_server import OpenAIServer, planner_reply
from tests.llm.conftest import png_screen

Settings = Callable[..., LLMSettings]
pytestmark = pytest.mark.anyio

SCREEN = (1080, 2400)  # the device; max_image_side=512 sends it at 230x512


def _ctx(step: int = 1) -> StepContext:
    return StepContext(instruction="Open the settings.", screenshot=png_screen(*SCREEN),
                       step=step, screen=SCREEN)


def _json(op: str, args: dict[str, Any], thought: str = "next") -> str:
    return json.dumps({"thought": thought, "op": op, "args": args})


def _schema_problems(schema: dict[str, Any], path: str = "schema") -> list[str]:
    """What keeps ``schema`` from being the JSON Schema subset structured outputs accept: a
    type on every node, properties and required for objects, required naming properties."""
    out: list[str] = []
    if schema.get("type") not in ("object", "string", "number", "integer", "boolean", "array"):
        out.append(f"{path}: no JSON type")
    if schema.get("type") == "object" and "properties" in schema:
        props = schema["properties"]
        missing = set(schema.get("required", ())) - set(props)
        if missing:
            out.append(f"{path}: required names no property {sorted(missing)}")
        for k, sub in props.items():
            out += _schema_problems(sub, f"{path}.{k}")
    if "enum" in schema and not all(isinstance(v, str) for v in schema["enum"]):
        out.append(f"{path}: enum of non-strings for a string")
    return out


def _json_settings(settings_for: Settings, **kw: Any) -> LLMSettings:
    return settings_for(family=RoleFamilies(planner="json"), **kw)


async def test_json_request_carries_the_schema_and_the_point_maps_from_the_sent_image(
    openai_server: OpenAIServer, settings_for: Settings,
) -> None:
    openai_server.script(_json("tap_point", {"x": 115, "y": 256}))
    async with LLMClient(_json_settings(settings_for)) as llm:
        policy = LLMPolicy(llm, RoleSetup.from_settings(llm.settings))
        assert policy.family.name == "json"
        d = await policy.decide(_ctx())
    assert d.operation == TapPoint(540, 1200) and not d.parse_error and len(d.replies) == 1

    req = openai_server.requests[0]
    assert req.body is not None
    rf = req.body["response_format"]
    assert rf["type"] == "json_schema" and set(rf) == {"type", "json_schema"}
    # the API's shape: a name of [a-zA-Z0-9_-]{1,64} and the schema itself
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", rf["json_schema"]["name"])
    schema = rf["json_schema"]["schema"]
    assert schema == SCHEMA and not _schema_problems(schema)
    assert schema["properties"]["op"]["enum"] == list(OP_NAMES)
    assert {"op", "args"} <= set(schema["required"])
    # the prompt states the size of the image the server received, which the point is in
    (img,) = req.images()
    assert img.size == (230, 512)
    assert any("230x512" in t for t in req.texts())


@pytest.mark.parametrize(("bad", "problem"), [
    (_json("fly_to", {"text": "Display"}), "unknown operation"),  # op outside the enum
    (json.dumps({"thought": "t", "op": "click_text", "args": "Display"}), '"args"'),
    (json.dumps({"thought": "t", "action": "click_text"}), '"op"'),  # op missing
    ('{"thought": "t", "op": "click_text", "args": {"text": "Disp', '"op"'),  # truncated
    (_json("tap_point", {"x": "left", "y": 10}), "must be a number"),
    (_json("tap_point", {"x": 900, "y": 100}), "outside the screen"),  # past the 230 px image
])
async def test_a_reply_breaking_the_schema_is_reasked_and_counted(
    openai_server: OpenAIServer, settings_for: Settings, bad: str, problem: str,
) -> None:
    openai_server.script(bad, _json("click_text", {"text": "Display"}))
    async with LLMClient(_json_settings(settings_for)) as llm:
        d = await LLMPolicy(llm, RoleSetup.from_settings(llm.settings)).decide(_ctx())
    assert d.operation == ClickText("Display") and len(d.replies) == 2
    # the re-ask went to the same schema, with the broken reply and its problem
    second = openai_server.requests[1]
    assert second.body is not None and second.body["response_format"]["type"] == "json_schema"
    assert second.messages[-2] == {"role": "assistant", "content": bad}
    assert problem in second.texts()[-1]


async def test_json_replies_that_never_fit_are_not_executed(
    openai_server: OpenAIServer, settings_for: Settings,
) -> None:
    openai_server.script(*[_json("fly_to", {})] * 3, _json("stop", {}))
    async with LLMClient(_json_settings(settings_for)) as llm:
        d = await LLMPolicy(llm, RoleSetup.from_settings(llm.settings), max_reasks=2).decide(_ctx())
    assert d.operation is None and "unknown operation 'fly_to'" in d.parse_error
    assert len(d.replies) == 3 and openai_server.pending == 1  # three tries, the 4th unasked


# ---- think blocks --------------------------------------------------------------------------

THINK_REACT = [
    # an Action line inside the thinking, the real one after it
    ("<think>The list shows Display. Action: Click text (Display)? No, open the app first."
     "</think>\n" + planner_reply("Open app (Settings)"), OpenApp("Settings")),
    # a whole ReAct answer while thinking, then a JSON action object as the answer
    ("<think>\nThought: maybe go back\nAction: Back\n</think>\n"
     '{"action": "open_app", "args": {"name": "Settings"}}', OpenApp("Settings")),
    # a JSON action while thinking, an Action line after it
    ('<think>I could answer {"action": "back"} but that leaves.</think>\n'
     + planner_reply("Open app (Settings)"), OpenApp("Settings")),
    # the closing tag without its opening one: everything before it was thinking
    ("Action: Back\nAction: Home\n</think>\n" + planner_reply('Type ("hello")'),
     TypeText("hello")),
    # an Action line inside the thinking, the answer under a ### Action ### heading
    ("<thinking>\nAction: Back\n</thinking>\n### Action ###\nClick text (Wi-Fi)",
     ClickText("Wi-Fi")),
    # an unclosed block: the last Action line, after the prose, is the answer
    ("<think>Action: Back would leave the app.\nAction: Open app (Settings)", OpenApp("Settings")),
]


@pytest.mark.parametrize("via_family", [False, True], ids=["react-text", "react-family"])
@pytest.mark.parametrize(("reply", "expected"), THINK_REACT)
async def test_the_action_after_a_think_block_wins(
    openai_server: OpenAIServer, settings_for: Settings, reply: str, expected: object,
    via_family: bool,
) -> None:
    openai_server.script(reply)
    # No screen: points refer to the screenshot itself; a screen: mapped to the device.
    ctx = _ctx() if via_family else StepContext(instruction="Open the settings.",
                                                screenshot=png_screen(*SCREEN))
    async with LLMClient(settings_for()) as llm:
        d = await LLMPolicy(llm, RoleSetup.from_settings(llm.settings)).decide(ctx)
    assert d.operation == expected, d.parse_error
    assert len(d.replies) == 1 and len(openai_server.requests) == 1


async def test_a_think_block_with_a_decoy_json_action_in_the_json_family(
    openai_server: OpenAIServer, settings_for: Settings,
) -> None:
    openai_server.script('<think>maybe {"thought": "x", "op": "back", "args": {}}? no.</think>'
                         + _json("open_app", {"name": "Settings"}))
    async with LLMClient(_json_settings(settings_for)) as llm:
        d = await LLMPolicy(llm, RoleSetup.from_settings(llm.settings)).decide(_ctx())
    assert d.operation == OpenApp("Settings") and len(d.replies) == 1
    assert d.operation != Back()


async def test_a_reply_that_is_only_thinking_is_reasked(
    openai_server: OpenAIServer, settings_for: Settings,
) -> None:
    """The action mentioned inside the only think block is not taken: re-asked."""
    openai_server.script("<think>\nAction: Open app (Settings)\n</think>", planner_reply("Back"))
    async with LLMClient(settings_for()) as llm:
        d = await LLMPolicy(llm, RoleSetup.from_settings(llm.settings)).decide(_ctx())
    assert d.operation == Back() and len(d.replies) == 2
