"""The chooser's and the reflector's answers in their role's family
(models/llm/families/answers.py) through LLMPolicy, the real client and the loopback server."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from actors.planner import LLMPolicy, RoleSetup, StepContext
from models.llm import LLMClient, LLMSettings, RoleFamilies, RoleModels
from protocol.operations import ClickText
from tests.fixtures.openai_server import Behaviour, OpenAIServer
from tests.llm.conftest import png_screen

pytestmark = pytest.mark.anyio
Settings = Callable[..., LLMSettings]
SHOT = png_screen(540, 1200)
CTX = StepContext(instruction="Reply to Ann", screenshot=SHOT, thought="Ann's message")


async def test_tools_chooser_calls_a_function_with_the_boxes_as_an_enum(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script(
        Behaviour.tool_call("choose_box", '{"box": "7"}'),  # no such box: re-asked
        Behaviour.tool_call("choose_box", '{"box": "3"}'),
        Behaviour.tool_call("choose_box", '{"box": "none"}'),
    )
    async with LLMClient(settings_for(family=RoleFamilies(chooser="tools"))) as llm:
        policy = LLMPolicy(llm, RoleSetup.from_settings(llm.settings))
        first = await policy.choose(CTX, "Reply", SHOT, [2, 3], ["Reply", "Reply"])
        second = await policy.choose(CTX, "Reply", SHOT, [2, 3], ["Reply", "Reply"])
    assert (first.index, len(first.replies)) == (3, 2)
    assert (second.index, len(second.replies)) == (None, 1)
    body = openai_server.requests[0].body or {}
    (tool,) = body["tools"]
    assert tool["function"]["name"] == "choose_box" and body["tool_choice"] == "required"
    assert tool["function"]["parameters"]["properties"]["box"]["enum"] == ["2", "3", "none"]
    # the re-ask shows the model its answer as read, and the parser's complaint
    reask = openai_server.requests[1].messages
    assert reask[-2] == {"role": "assistant", "content": "Box: 7"}
    assert "there is no box 7" in reask[-1]["content"]
    assert all(r.model == "choose-m" for r in openai_server.requests)


async def test_json_reflector_answers_the_check_and_the_judge_by_schema(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script(
        '{"complete": false, "reason": "the reply is not sent"}',
        '<think>the page changed</think>{"verdict": "B", "reason": "a settings page"}',
    )
    async with LLMClient(settings_for(family=RoleFamilies(reflector="json"))) as llm:
        policy = LLMPolicy(llm, RoleSetup.from_settings(llm.settings))
        comp = await policy.check_completion(CTX)
        judged = await policy.judge_action(CTX, ClickText("Reply"), SHOT, SHOT)
    assert (comp.complete, comp.reason) == (False, "the reply is not sent")
    assert (judged.verdict, judged.reason) == ("wrong_page", "a settings page")
    check, judge = (r.body or {} for r in openai_server.requests)
    assert check["response_format"]["json_schema"]["name"] == "check_completion"
    verdict = judge["response_format"]["json_schema"]["schema"]["properties"]["verdict"]
    assert verdict["enum"] == ["A", "B", "C"] and "tools" not in judge


@pytest.mark.parametrize(("family", "model", "reply", "complete"), [
    ("uitars", "ui-tars-1.5-7b",
     "Thought: it is on.\nAction: finished(content='Complete: yes\\nReason: dark mode is on')",
     True),
    ("qwen", "qwen2.5-vl-7b", '<tool_call>\n{"name": "mobile_use", "arguments": {"action": '
     '"answer", "text": "Complete: no\\nReason: still off"}}\n</tool_call>', False),
    ("autoglm", "autoglm-phone-9b", '<think>it is on</think><answer>finish(message="Complete: '
     'yes\\nReason: on")', True),
    ("react", "gpt-4o", "<think>hm</think>\nComplete: yes\nReason: on", True),
])
async def test_coordinate_families_answer_in_their_answer_call(
    openai_server: OpenAIServer, settings_for: Settings, family: str, model: str, reply: str,
    complete: bool,
) -> None:
    openai_server.script(reply)
    models = RoleModels(planner="plan-m", chooser="choose-m", reflector=model)
    async with LLMClient(settings_for(models=models, family=RoleFamilies(reflector="auto"))) as llm:
        policy = LLMPolicy(llm, RoleSetup.from_settings(llm.settings))
        assert (policy.setup.chooser, policy.setup.reflector) == ("react", family)
        comp = await policy.check_completion(CTX)
    assert comp.complete is complete and len(comp.replies) == 1, comp.reason
    body = openai_server.requests[0].body or {}
    # no structured form in these families: the plain prompt, no extra options
    assert "tools" not in body and "response_format" not in body


@pytest.mark.parametrize(("family", "reply"), [
    ("tools", Behaviour.tool_call("update_progress", '{"progress": "opened the chat; reply"}')),
    ("json", Behaviour.reply('{"progress": "opened the chat; reply"}')),
    ("autoglm", Behaviour.reply('<think>so far</think><answer>finish(message="Progress: opened '
                                'the chat; reply")</answer>')),
    ("react", Behaviour.reply("Progress: opened the chat; reply")),
])
async def test_the_progress_call_speaks_the_planners_family(
    openai_server: OpenAIServer, settings_for: Settings, family: str, reply: Behaviour,
) -> None:
    from models.llm.prompts.shared import PastStep

    openai_server.script(reply)
    async with LLMClient(settings_for(family=RoleFamilies(planner=family))) as llm:
        policy = LLMPolicy(llm, RoleSetup.from_settings(llm.settings))
        upd = await policy.update_progress(CTX, PastStep(action=ClickText("Ann"), result="done"))
    assert upd.text == "opened the chat; reply"
    body = openai_server.requests[0].body or {}
    assert body["model"] == "plan-m"  # the planner role's call
    if family == "tools":
        (tool,) = body["tools"]
        assert tool["function"]["name"] == "update_progress" and body["tool_choice"] == "required"
    elif family == "json":
        assert body["response_format"]["json_schema"]["name"] == "update_progress"
    else:
        assert "tools" not in body and "response_format" not in body


async def test_an_unknown_role_family_is_refused(settings_for: Settings) -> None:
    async with LLMClient(settings_for(family=RoleFamilies(chooser="klingon"))) as llm:
        with pytest.raises(ValueError, match="klingon"):
            LLMPolicy(llm, RoleSetup.from_settings(llm.settings))
