"""The added model families on dev corpora of real replies, each with its public source: the
parsed operation and its points in device pixels on a phone (1080x2400) and a tablet
(1600x2560) screen; the family and its variant picked from served names; replies that must
be refused (ParseError: re-asked, never run).

Three kinds of source: a captured reply (an issue's log, a README's expected output, a
benchmark's output file, a parser's test fixture); "derived from" one, that reply with one
damage real replies show (a dropped ")", escaped quotes from a log, an extra brace); and, where
no captured reply was found, a prompt, parser or reference implementation, the case then
spelling that source's own format for the action it documents."""

from __future__ import annotations

import io
from typing import NamedTuple

import msgspec
import pytest
from PIL import Image

from models.llm import ImageInput
from models.llm.errors import ParseError
from models.llm.families import ToolCall, get_family
from models.llm.families.grounding import GroundingFamily
from models.llm.prompts.planner import PlannerInput
from protocol.operations import (
    Ask,
    Back,
    Enter,
    Exit,
    LongPressPoint,
    OpenApp,
    Operation,
    PageDown,
    PageUp,
    Stop,
    Swipe,
    SwipePoints,
    TapPoint,
    TypeText,
    Wait,
)
from tests.llm.conftest import png_screen

PHONE = (1080, 2400)
TABLET = (1600, 2560)


class Case(NamedTuple):
    source: str
    reply: str
    phone: Operation  # the operation, points in phone pixels
    tablet: Operation | None = None  # points in tablet pixels (None: as on the phone)


def parsed(family: str, model: str, reply: str, screen: tuple[int, int]) -> Operation:
    fam = get_family(family, model)
    return fam.parse(reply, fam.geometry(*screen)).operation


def check(family: str, model: str, case: Case) -> None:
    assert parsed(family, model, case.reply, PHONE) == case.phone, case.source
    assert parsed(family, model, case.reply, TABLET) == (case.tablet or case.phone), case.source


def refused(family: str, model: str, reply: str) -> None:
    with pytest.raises(ParseError):
        parsed(family, model, reply, PHONE)


# Refusals every family shares: nothing to run.
COMMON_REFUSALS = ["", "   \n", "None", "<think>The user wants the alarm app. First I should"]


# -- Doubao / Seed UI-TARS (uitars, variant doubao): 0-1000 of the image sent

_MIDSCENE_843 = "https://github.com/web-infra-dev/midscene/issues/843"
_DESKTOP_TEST = ("https://github.com/bytedance/UI-TARS-desktop/blob/main/packages/ui-tars/"
                 "action-parser/test/actionParser.test.ts")
_UITARS_TEST = "https://github.com/bytedance/UI-TARS/blob/main/codes/tests/action_parser_test.py"
_UITARS_PR252 = "https://github.com/bytedance/UI-TARS/pull/252"
_UITARS_229 = "https://github.com/bytedance/UI-TARS/issues/229"
_DOUBAO_PROMPT = "https://github.com/bytedance/UI-TARS/blob/main/codes/ui_tars/prompt.py"

DOUBAO = [
    Case(_MIDSCENE_843,  # doubao-1.5-ui-tars on Ark: no Thought label, a full-width colon
         "1. 分析目标：需要批量提交全部留言，首先要进入“任务”模块，因为待办任务通常在任务板块中。  \n"
         "2. 界面观察：当前界面顶部导航栏有“任务”选项，位于左上角（图标为三条横线旁的“任务”文字）。  \n"
         "3. 下一步逻辑：点击顶部导航栏的“任务”，进入任务管理界面，以便找到内部留言任务。  \n\n"
         "Action：click(start_box='<bbox>191 21 191 21</bbox>')",
         TapPoint(206, 50), TapPoint(306, 54)),
    Case(_DESKTOP_TEST, "\n\nAction：click(start_box='<bbox>191 21 191 21</bbox>')",
         TapPoint(206, 50), TapPoint(306, 54)),
    Case(_DESKTOP_TEST,  # a think block that reasons about actions, then the point form
         "<think>\nOkay, let's see. The user wants to search news, but the current search bar has \"hi\" "
         "in it. First, I need to clear that. The search bar has an 'X' button on the right, so clicking "
         "that will remove the existing text. Then, I can type \"news\" into the search bar. Wait, but "
         "maybe after clearing, I should enter the new search term. Let's check the steps again. Clear "
         "the search bar, type \"news\", then press enter or click the search icon. That should initiate "
         "a news search. Let's do that step by step.\n</think>\nThought: To search for news, first clear "
         "the existing text \"hi\" from the Google search bar by clicking the 'X' icon. Then, type \"news\" "
         "into the search bar and press Enter to perform the search. This will display news-related "
         "results.\nAction: click(point='<point>510 150</point>')",
         TapPoint(551, 360), TapPoint(816, 384)),
    Case(_DESKTOP_TEST,
         "Thought: 我看到当前屏幕显示的是一个电子表格软件和一个聊天窗口，而任务要求我需要在浏览器中搜索北京明天天气。"
         "我需要先点击任务栏上的浏览器图标来启动浏览器。\nAction: click(start_box='<bbox>637 964 637 964</bbox>')",
         TapPoint(688, 2314), TapPoint(1019, 2468)),
    Case(_DESKTOP_TEST,
         "Thought: 我看到当前屏幕显示的是一个电子表格软件和一个聊天窗口，而任务要求我需要在浏览器中搜索北京明天天气。"
         "我需要先点击任务栏上的浏览器图标来启动浏览器。\nAction: click(start_box='[637,964,637,964]')",
         TapPoint(688, 2314), TapPoint(1019, 2468)),
    Case(_UITARS_TEST, "Thought: test\nAction: click(point='<point>200 300</point>')",
         TapPoint(216, 720), TapPoint(320, 768)),
    Case(_UITARS_PR252,  # Doubao-Seed's compact output, its think tag carrying a suffix
         "<think_never_used_51bce0c785ca2f68081bfa7d91973934>Click the orientation menu."
         "</think_never_used_51bce0c785ca2f68081bfa7d91973934>click>point>point>112 56",
         TapPoint(121, 134), TapPoint(179, 143)),
    Case(_UITARS_229,  # doubao-seed-1-8-251228, as the issue quotes it
         "<think_never_used_51bce0c785ca2f68081bfa7d91973934>Got it, let's see. The user wants to set the slides "
         "upright (portrait) instead of sideways (landscape). Looking at the right sidebar, under Properties, there's an "
         "Orientation dropdown that's set to Landscape. I need to click that dropdown and select Portrait.\n\nFirst, "
         "find the Orientation option in the right Properties panel. It's under the Slide section. Click the dropdown "
         "arrow next to Landscape, then choose Portrait. That should change the slide orientation to upright."
         "</think_never_used_51bce0c785ca2f68081bfa7d91973934>click>point>point>942 255",
         TapPoint(1017, 612), TapPoint(1507, 653)),
    # the same run mixing point= (Doubao's spelling) and start_box= (1.5's)
    Case(_DESKTOP_TEST, "Thought: Perform multiple actions\nAction: click(start_box='<bbox>100 200</bbox>')",
         TapPoint(108, 480), TapPoint(160, 512)),
    Case("derived from " + _DESKTOP_TEST + " (its closing ')' dropped)",
         "Thought: To search for news, first clear the existing text.\nAction: click(point='<point>510 150</point>",
         TapPoint(551, 360), TapPoint(816, 384)),
    Case("derived from " + _UITARS_TEST + " (quotes escaped, as a JSON log shows them)",
         "Thought: test\\nAction: click(point=\\'<point>200 300</point>\\')".replace("\\n", "\n"),
         TapPoint(216, 720), TapPoint(320, 768)),
    # the rest of COMPUTER_USE_DOUBAO's action space, as the prompt spells each call
    Case(_DOUBAO_PROMPT, "Action: drag(start_point='<point>500 800</point>', end_point='<point>500 200</point>')",
         SwipePoints(540, 1920, 540, 480), SwipePoints(800, 2048, 800, 512)),
    Case(_DOUBAO_PROMPT, "Action: scroll(point='<point>500 500</point>', direction='down')", PageDown()),
    Case(_DOUBAO_PROMPT, "Action: type(content='pizza\\n')", TypeText("pizza", submit=True)),
    Case(_DOUBAO_PROMPT, "Action: hotkey(key='enter')", Enter()),
    Case(_DOUBAO_PROMPT, "Action: wait()", Wait()),
    Case(_DOUBAO_PROMPT, "Action: finished(content='done')", Stop()),
]


@pytest.mark.parametrize("case", DOUBAO, ids=lambda c: c.reply[-40:])
def test_doubao_corpus(case: Case) -> None:
    check("uitars", "doubao-1-5-ui-tars-250428", case)


@pytest.mark.parametrize("reply", [
    *COMMON_REFUSALS,
    "Action: scroll(point='<point>500 500</point>', direction='None')",
    "Action: click(start_box='(546,",  # cut inside the point
    "Thought: I will tap <point>510 150</point>.",  # a point in prose is no action
])
def test_doubao_refusals(reply: str) -> None:
    refused("uitars", "doubao-seed-1.6", reply)


@pytest.mark.parametrize(("model", "variant"), [
    ("doubao-1.5-ui-tars", "doubao"), ("doubao-1-5-ui-tars-250428", "doubao"),
    ("doubao-seed-1.6", "doubao"), ("doubao-seed-1-6-vision-250815", "doubao"), ("doubao-seed-1-8-251228", "doubao"),
    ("ByteDance-Seed/UI-TARS-1.5-7B", "1.5"), ("UI-TARS-7B-DPO", "1.0"),
])
def test_doubao_auto(model: str, variant: str) -> None:
    fam = get_family("auto", model)
    assert (fam.name, getattr(fam, "variant", "")) == ("uitars", variant)
    assert get_family("uitars-doubao").geometry(*PHONE).convention == "relative"


# -- GUI-Owl-1.5 (qwen, variant owl1.5): 0-1000; and the Qwen gaps

_OWL15_ISSUE = "https://github.com/X-PLUG/MobileAgent/issues/266"
_OWL15_PROMPT = ("https://github.com/X-PLUG/MobileAgent/blob/main/Mobile-Agent-v3.5/android_world_v3.5/"
                 "android_world/agents/gui_owl.py")
_OWL15_RUN = ("https://github.com/X-PLUG/MobileAgent/blob/main/Mobile-Agent-v3.5/mobile_use/"
              "run_gui_owl_1_5_for_mobile.py")
# GUI-Owl-1.5-8B-Thinking's reply in AndroidWorld, as the issue's request log holds it.
_OWL15_REPLY = (
    "<think>The swipe up successfully opened the app drawer, revealing all installed apps, including "
    "the Audio Recorder app in the second row. I’ve accessed the app drawer, and the next step is to "
    "tap the Audio Recorder icon to launch it. Once opened, I can proceed with recording the audio "
    "clip and saving it with the name 'presentation_fGwr.m4a'. The Audio Recorder app will provide "
    "the necessary tools for this task.</think>\nAction: Click on the Audio Recorder app icon in the "
    "second row to launch the application.\n<tool_call>\n{\"name\": \"mobile_use\", \"arguments\": "
    "{\"action\": \"click\", \"coordinate\": [396, 328]}}\n</tool_call>"
)

OWL15 = [
    Case(_OWL15_ISSUE, _OWL15_REPLY, TapPoint(428, 787), TapPoint(634, 840)),
    Case(_OWL15_ISSUE + " (as the log shows it: quotes and newlines escaped)",
         _OWL15_REPLY.replace('"', '\\"').replace("\n", "\\n"), TapPoint(428, 787), TapPoint(634, 840)),
    Case("derived from " + _OWL15_ISSUE + " (an extra closing brace)",
         _OWL15_REPLY.replace("328]}}", "328]}}}"), TapPoint(428, 787), TapPoint(634, 840)),
    # the rest of the action space as the prompt and the runner spell them
    Case(_OWL15_RUN, 'Action: Swipe up.\n<tool_call>\n{"name": "mobile_use", "arguments": {"action": "swipe", '
         '"coordinate": [500, 800], "coordinate2": [500, 200]}}\n</tool_call>',
         SwipePoints(540, 1920, 540, 480), SwipePoints(800, 2048, 800, 512)),
    Case(_OWL15_RUN, 'Action: Open Audio Recorder.\n<tool_call>\n{"name": "mobile_use", "arguments": '
         '{"action": "open", "text": "Audio Recorder"}}\n</tool_call>', OpenApp("Audio Recorder")),
    Case(_OWL15_PROMPT, 'Action: Go back.\n<tool_call>\n{"name": "mobile_use", "arguments": {"action": '
         '"system_button", "button": "Back"}}\n</tool_call>', Back()),
    Case(_OWL15_PROMPT, 'Action: Done.\n<tool_call>\n{"name": "mobile_use", "arguments": {"action": '
         '"terminate", "status": "success"}}\n</tool_call>', Stop()),
]


@pytest.mark.parametrize("case", OWL15, ids=lambda c: c.reply[-40:])
def test_gui_owl_15_corpus(case: Case) -> None:
    check("qwen", "mPLUG/GUI-Owl-1.5-8B-Instruct", case)


def test_gui_owl_15_keeps_its_action_line_as_the_thought() -> None:
    fam = get_family("auto", "GUI-Owl-1.5-8B-Think")
    r = fam.parse(_OWL15_REPLY, fam.geometry(*PHONE))
    assert r.thought == "Click on the Audio Recorder app icon in the second row to launch the application."
    assert "1000x1000" in fam.system_prompt and "Action: a short imperative" in fam.system_prompt


@pytest.mark.parametrize("reply", [
    *COMMON_REFUSALS,
    # JSON made invalid by a comment: not read from its inner object
    'Action: Tap.\n<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", '
    '"coordinate": [396, 328]} // the icon\n}\n</tool_call>',
    '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "swipe", "direction": "None"}}\n</tool_call>',
])
def test_gui_owl_15_refusals(reply: str) -> None:
    refused("qwen", "GUI-Owl-1.5-8B-Instruct", reply)


_AW_JSON_ACTION = "https://github.com/google-research/android_world/blob/main/android_world/env/json_action.py"
_QWEN_COOKBOOK = "https://github.com/QwenLM/Qwen2.5-VL/blob/main/cookbooks/mobile_agent.ipynb"


def test_qwen_open_app_and_react_coordinate() -> None:
    # AndroidWorld's (and AndroidControl's) name for opening an app, as Qwen fine-tunes write it
    for args in ('{"action": "open_app", "text": "Audio Recorder"}', '{"action": "open_app", "app_name": "Audio Recorder"}'):
        reply = f'<tool_call>\n{{"name": "mobile_use", "arguments": {args}}}\n</tool_call>'
        assert parsed("qwen", "Qwen2.5-VL-7B-Instruct", reply, PHONE) == OpenApp("Audio Recorder"), _AW_JSON_ACTION
    # a Qwen-VL mobile_use action in a ReAct Action line: pixels of the image sent
    assert parsed("react", "", 'Thought: t\nAction: {"action": "click", "coordinate": [540, 1200]}', PHONE) \
        == TapPoint(540, 1200), _QWEN_COOKBOOK
    assert parsed("react", "", '{"action": "swipe", "coordinate": [540, 2000], "coordinate2": [540, 400]}',
                  PHONE) == SwipePoints(540, 2000, 540, 400), _QWEN_COOKBOOK


@pytest.mark.parametrize(("model", "variant"), [
    ("mPLUG/GUI-Owl-1.5-8B-Instruct", "owl1.5"), ("GUI-Owl-1.5-32B-Think", "owl1.5"),
    ("gui-owl-1_5-2b", "owl1.5"), ("Qwen2.5-VL-7B-Instruct", "2.5"),
    # GUI-Owl 1.0 answers absolute pixels of the smart-resize, like Qwen2.5-VL (X-PLUG/MobileAgent
    # Mobile-Agent-v3: mobile_v3/run_mobileagentv3.py --coor_type defaults to "abs"; the README
    # sets "qwen-vl" only for models with 0-1000 output; android_world_v3 gui_owl.py resizes
    # with smart_resize(factor=28) and puts that size in the prompt)
    ("GUI-Owl-7B", "2.5"), ("mPLUG/GUI-Owl-32B", "2.5"),
])
def test_qwen_auto(model: str, variant: str) -> None:
    fam = get_family("auto", model)
    assert (fam.name, getattr(fam, "variant", "")) == ("qwen", variant)


# -- AgentCPM-GUI (agentcpm): compact JSON, 0-1000

_CPM_README = "https://github.com/OpenBMB/AgentCPM-GUI/blob/main/README.md"
_CPM_RFT = "https://github.com/OpenBMB/AgentCPM-GUI/blob/main/rft/trainer/utils/dataset.py"

AGENTCPM = [
    Case(_CPM_README,  # the Quick Start's expected output
         '{"thought":"任务目标是点击屏幕上的‘会员’按钮。当前界面显示了应用的推荐页面，顶部有一个导航栏。'
         '点击‘会员’按钮可以访问应用的会员相关内容。","POINT":[729,69]}',
         TapPoint(787, 166), TapPoint(1166, 177)),
    Case(_CPM_RFT, '<think>当前界面未找到符合要求的商品，需要向下滑动查看更多商品</think><act>{"to":"up","POINT":[123,456]}</act>',
         SwipePoints(133, 1094, 133, 374), SwipePoints(197, 1167, 197, 399)),
    Case(_CPM_RFT, '<think>界面中显示的内容不符合期望，我应该回退到上个界面重新选择</think><act>{"PRESS":"BACK"}</act>', Back()),
    Case(_CPM_RFT, '<think>当前界面正在加载，请等待</think><act>{"duration":3000}</act>', Wait()),
    Case(_CPM_RFT, '<think>当前界面已经完成了任务，我需要结束任务</think><act>{"STATUS":"finish"}</act>', Stop()),
    Case(_CPM_RFT, '<think>需要翻找桌面找到APP</think><act>{"to":"left","POINT":[111,222]}</act>',
         SwipePoints(120, 533, 0, 533), SwipePoints(178, 568, 0, 568)),
    # the README's action table, one example per action
    Case(_CPM_README, '{"POINT":[480,320]}', TapPoint(518, 768), TapPoint(768, 819)),
    Case(_CPM_README, '{"POINT":[480,320],"duration":1000}', LongPressPoint(518, 768), LongPressPoint(768, 819)),
    Case(_CPM_README, '{"POINT":[500,200],"to":"down"}', SwipePoints(540, 480, 540, 1200), SwipePoints(800, 512, 800, 1280)),
    Case(_CPM_README, '{"PRESS":"HOME"}', Exit()),
    Case(_CPM_README, '{"TYPE":"Hello, world!"}', TypeText("Hello, world!")),
    Case(_CPM_README, '{"duration":500}', Wait()),
    Case(_CPM_README, '{"STATUS":"finish"}', Stop()),
    Case("derived from " + _CPM_README + " (as a Python dict literal, a stray prompt echo before it)",
         "# Schema\n{'thought': '点击会员', 'POINT': [729, 69]}", TapPoint(787, 166), TapPoint(1166, 177)),
    Case("derived from " + _CPM_README + " (an extra closing brace)",
         '{"thought":"点击会员","POINT":[729,69]}}', TapPoint(787, 166), TapPoint(1166, 177)),
]


@pytest.mark.parametrize("case", AGENTCPM, ids=lambda c: c.reply[-40:])
def test_agentcpm_corpus(case: Case) -> None:
    check("agentcpm", "openbmb/AgentCPM-GUI", case)


@pytest.mark.parametrize("reply", [
    *COMMON_REFUSALS,
    '<act>{"to":"up","duration":1000,"PRESS":"BACK","TYPE":"abc"}</act>',  # the RFT prompt's "combine to explore"
    '{"POINT":[480,320]","duration":1000}',  # README_zh's long-press example, its stray quote
    '{"thought":"点击会员","POINT":[729,69] // the button\n}',  # a comment
    '{"thought":"继续","STATUS":"continue"}',  # no action
    '{"POINT":[500,200],"to":"None"}',
])
def test_agentcpm_refusals(reply: str) -> None:
    refused("agentcpm", "openbmb/AgentCPM-GUI", reply)


def test_agentcpm_auto_and_image() -> None:
    for model in ("openbmb/AgentCPM-GUI", "AgentCPM-GUI-8B", "agentcpm_gui"):
        assert get_family("auto", model).name == "agentcpm"
    g = get_family("agentcpm", max_image_side=2048).geometry(*PHONE)
    assert (g.sent_w or g.image_w, g.sent_h or g.image_h) == (504, 1120)  # the README's longer side 1120


# -- GLM-4.1V / GLM-4.5V (glm) and CogAgent (glm, variant cogagent): 0-999, /1000

_GLM45 = "https://github.com/zai-org/GLM-V/blob/main/examples/gui-agent/glm-45v/agent.md"
_GLM41 = "https://github.com/zai-org/GLM-V/blob/main/examples/gui-agent/glm-41v/agent.md"
_GLM41_PARSER = "https://github.com/zai-org/GLM-V/blob/main/examples/gui-agent/glm-41v/gui_agent_41v.py"
_COG = "https://github.com/THUDM/CogAgent/blob/main/README.md"
_COG_FT = "https://github.com/THUDM/CogAgent/blob/main/finetune/README_en.md"
_COG_SPACE = "https://github.com/THUDM/CogAgent/blob/main/Action_space_en.md"

_BROCCOLI = ("Memory: None\nReason: The user needs to access the Broccoli app to manage recipes. Since the app is "
             "not visible on the current home screen, the first step is to open the Broccoli app to proceed with "
             "the task of deleting duplicate recipes.\nAction: {'action_type': 'open_app', 'app_name': 'Broccoli'}")

GLM = [
    Case(_GLM45, _BROCCOLI, OpenApp("Broccoli")),  # its AndroidWorld example's step 0: a Python dict literal
    Case(_GLM41, _BROCCOLI, OpenApp("Broccoli")),
    Case("derived from " + _GLM45 + " (in <answer> with the box tokens, as " + _GLM41_PARSER + " strips them)",
         "<think>The Broccoli app is not on the home screen.</think><answer>" + _BROCCOLI.replace(
             "Action: {", "Action: <|begin_of_box|>{").replace("}", "}<|end_of_box|>") + "</answer>",
         OpenApp("Broccoli")),
    # desktop runs: the call alone on a line after the prose, Memory: after it
    Case(_GLM45, "Thought: I can see that GIMP is open but there's an error message displayed about failing to open "
         "a file. I need to dismiss this error message first before I can proceed with rotating an image. I'll click "
         "the OK button to close the error dialog.\nAction: left_click(start_box='[586, 446]', element_info='OK button')",
         TapPoint(633, 1070), TapPoint(938, 1142)),
    Case(_GLM45, "Thought: I can see that GIMP is now open and displaying a workspace with some gray circular shapes. "
         "To rotate/mirror the figure horizontally, I need to access the image transformation tools. I'll click on the "
         "\"Image\" menu in the top menu bar to find the rotation and mirroring options.\nAction: left_click("
         "start_box='[149, 70]', element_info='Image menu')", TapPoint(161, 168), TapPoint(238, 179)),
    Case(_GLM45, "Thought: I can see the Transform submenu is open in GIMP with the \"Flip Horizontally\" option "
         "visible. I'll click on the \"Flip Horizontally\" option to mirror the figure as requested.\nAction: "
         "left_click(start_box='[339, 211]', element_info='Flip Horizontally option')\nMemory:\n[]",
         TapPoint(366, 506), TapPoint(542, 540)),
    Case(_GLM41, "I'm now on the Google Shopping homepage and need to search for drip coffee makers that are on sale, "
         "priced $25-60, and with a black finish. To start this search, I need to click on the search box in the "
         "center of the screen to enter my search term \\\"drip coffee maker\\\".\nleft_click(start_box='[376,465]')",
         TapPoint(406, 1116), TapPoint(602, 1190)),
    Case(_GLM41, "I'm now on the Google Shopping homepage, which is perfect for searching for drip coffee makers. I "
         "should start by typing \\\"drip coffee maker black\\\" in the search box to begin filtering my results.\n"
         "type(content='drip coffee maker black')\nMemory:\n[]", TypeText("drip coffee maker black")),
    # the mobile action space as the prompt spells it
    Case(_GLM45, 'Memory: []\nReason: tap it\nAction: {"action_type": "click", "box_2d": [[480,490,520,510]]}',
         TapPoint(540, 1200), TapPoint(800, 1280)),
    Case(_GLM45, 'Memory: []\nReason: scroll\nAction: {"action_type": "swipe", "direction": "up"}', Swipe("up")),
    Case(_GLM45, 'Memory: []\nReason: go\nAction: {"action_type": "keyboard_enter"}', Enter()),
    Case(_GLM45, 'Memory: []\nReason: done\nAction: {"action_type": "status", "goal_status": "complete"}', Stop()),
]


@pytest.mark.parametrize("case", GLM, ids=lambda c: c.reply[-40:])
def test_glm_corpus(case: Case) -> None:
    check("glm", "zai-org/GLM-4.5V", case)


def test_glm_keeps_memory_and_reason() -> None:
    fam = get_family("auto", "GLM-4.1V-9B-Thinking")
    r = fam.parse('Memory: the code is 4812\nReason: type it\nAction: {"action_type": "input_text", "text": "4812", '
                  '"box_2d": [[100,200,300,260]], "override": true}', fam.geometry(*PHONE))
    assert r.operation == TypeText("4812") and r.memory == "the code is 4812" and r.thought == "type it"
    r = fam.parse(GLM[7].reply, fam.geometry(*PHONE))  # "Memory:\n[]" after the call: nothing kept
    assert r.operation == TypeText("drip coffee maker black") and r.memory == ""


COGAGENT = [
    # Status boxes describe the screen (decoys); the Grounded Operation's box is the one
    Case(_COG, "Status: Currently in the email interface [[0, 2, 998, 905]], with the email categories on the left "
         "[[1, 216, 144, 570]], and the inbox in the center [[144, 216, 998, 903]]. The \"Mark all as read\" button "
         "has been clicked [[223, 178, 311, 210]].\nPlan: Future tasks: 1. Click the 'Mark all as read' button; 2. "
         "Task complete.\nAction: Click the \"Mark all as read\" button at the top center of the inbox page to mark "
         "all emails as read.\nGrounded Operation: CLICK(box=[[219,186,311,207]], element_type='Clickable text', "
         "element_info='Mark all emails as read')", TapPoint(286, 470), TapPoint(424, 502)),
    Case(_COG, "Action: Click the 'Mark all as read' button in the top toolbar of the page to mark all emails as "
         "read.\nGrounded Operation: CLICK(box=[[219,186,311,207]], element_type='Clickable text', element_info='Mark "
         "all emails as read')\n<<一般操作>>", TapPoint(286, 470), TapPoint(424, 502)),
    Case(_COG_FT, "Action: Click the 'Displays have separate spaces' option in the 'Schedule Center' section to enable "
         "this feature. \nGrounded Operation:CLICK(box=[[655,842,671,857]], element_info='```Displays have separate "
         "spaces``` switch button')\n<<General Operation>>", TapPoint(716, 2040), TapPoint(1061, 2176)),
    Case(_COG_FT, "Action: 已经完成了“通过启动台打开系统设置，导航到‘网络’部分，将DNS设置手动IP地址为8.8.4.4”这一任务，执行结束。\n"
         "Grounded Operation:END()\n<<END>>", Stop()),
    Case(_COG_SPACE, "Action: Open the settings.\nGrounded Operation: LAUNCH(app='Settings', url='None')", OpenApp("Settings")),
    Case(_COG_SPACE, "Action: Type.\nGrounded Operation: TYPE(box=[[387,249,727,317]], text='CogAgent', "
         "element_type='Text input box', element_info='CogAgent')", TypeText("CogAgent")),
    Case(_COG_SPACE, "Action: Scroll.\nGrounded Operation: SCROLL_DOWN(box=[[000,086,999,932]], element_type='Scroll', "
         "element_info='Scroll', step_count=5)", PageDown()),
    Case(_COG_SPACE, "Action: Submit.\nGrounded Operation: KEY_PRESS(key='Return')", Enter()),
    # its mouse operations' own spelling, HOVER in place of CLICK: nothing to do on a phone
    Case(_COG_SPACE, "Action: Wait for the page.\nGrounded Operation: HOVER(box=[[387,248,727,317]], "
         "element_type='Clickable text', element_info='Click to add Title')", Wait()),
]


@pytest.mark.parametrize("case", COGAGENT, ids=lambda c: c.reply[-40:])
def test_cogagent_corpus(case: Case) -> None:
    check("glm", "THUDM/cogagent-9b-20241220", case)


@pytest.mark.parametrize(("family", "model", "reply"), [
    *(("glm", "GLM-4.5V", r) for r in COMMON_REFUSALS),
    *(("glm", "cogagent-9b-20241220", r) for r in COMMON_REFUSALS),
    ("glm", "GLM-4.5V", 'Memory: []\nReason: r\nAction: {"action_type": "swipe", "direction": "None"}'),
    ("glm", "GLM-4.5V", 'Memory: []\nReason: r\nAction: {"action_type": "click", "box_2d": [[1,2,3,4]] // the icon\n}'),
    ("glm", "GLM-4.5V", "Thought: the OK button\nAction: left_click(start_box='[586,"),
    # a Status line's boxes alone are no operation
    ("glm", "cogagent-9b-20241220", "Status: Currently in the email interface [[0, 2, 998, 905]].\nAction: Click it."),
    ("glm", "cogagent-9b-20241220", "Action: right-click.\nGrounded Operation: RIGHT_CLICK(box=[[154,275,343,341]], "
     "element_info='[AXCell]')"),
])
def test_glm_refusals(family: str, model: str, reply: str) -> None:
    refused(family, model, reply)


@pytest.mark.parametrize(("model", "variant"), [
    ("zai-org/GLM-4.5V", "glm"), ("THUDM/GLM-4.1V-9B-Thinking", "glm"), ("glm-4.5v", "glm"),
    ("THUDM/cogagent-9b-20241220", "cogagent"), ("CogAgent", "cogagent"),
])
def test_glm_auto(model: str, variant: str) -> None:
    fam = get_family("auto", model)
    assert (fam.name, getattr(fam, "variant", "")) == ("glm", variant)
    assert get_family("auto", "autoglm-phone-9b").name == "autoglm"


# -- MAI-UI (qwen, variant mai): 0-999, divided by 999

_MAI_GROUNDING = "https://github.com/Tongyi-MAI/MAI-UI/blob/main/evaluation/grounding/output_local/OS_G.json"
_MAI_PROMPT = "https://github.com/Tongyi-MAI/MAI-UI/blob/main/src/prompt.py"
_MAI_TESTS = "https://github.com/Tongyi-MAI/MAI-UI/blob/main/tests/test_mai_navigation_agent.py"
_MAI_RENDERED = ("https://github.com/hongyiD/gui-agent-research/blob/main/researches/MAI-UI/trainer/"
                 "jinjia渲染后的数据展示.md")

MAI = [
    # grounding replies: a bare coordinate, no action name
    Case(_MAI_GROUNDING, "<grounding_think>\nThought: The instruction asks to open the filter function for search "
         "settings. This is represented by the funnel icon located at the right end of the search bar in the settings "
         "window. Clicking this icon will allow filtering of settings results.\n</grounding_think>\n<answer>\n"
         "{\"coordinate\":[746,314]}\n</answer>", TapPoint(806, 754), TapPoint(1195, 805)),
    Case(_MAI_GROUNDING, "<grounding_think>\nThought: The instruction \"Open the debug panel\" corresponds to clicking "
         "the bug-shaped icon located in the left activity bar of Visual Studio Code. This icon is positioned below the "
         "source control icon and above the outline/timeline section, and is clearly identifiable by its bug symbol.\n"
         "</grounding_think>\n<answer>\n{\"coordinate\":[244,410]}\n</answer>", TapPoint(264, 985), TapPoint(391, 1051)),
    # navigation turns in MAI-UI's chat template (a third party's fine-tune data, rendered)
    Case(_MAI_RENDERED, "<thinking>\nThought: To start, I need to open the 139邮箱 app. Looking at the home screen, the "
         "139邮箱 icon is a red envelope with \"139\" on it. I'll tap that to launch the app.\n</thinking>\n<tool_call>\n"
         "{\"name\": \"mobile_use\", \"arguments\": {\"action\": \"click\", \"coordinate\": [282, 507]}}\n</tool_call>",
         TapPoint(305, 1218), TapPoint(452, 1299)),
    Case(_MAI_RENDERED, "<thinking>\nThought: Now that the link is copied, I need to exit the \"移动云盘\" app. Pressing "
         "the home button will return me to the home screen, where I can locate and open the \"中移移动办公\" app.\n"
         "</thinking>\n<tool_call>\n{\"name\": \"mobile_use\", \"arguments\": {\"action\": \"system_button\", "
         "\"button\": \"home\"}}\n</tool_call>", Exit()),
    Case(_MAI_RENDERED, "<thinking>\nThought: To send the copied link to谭文辉, I need to paste the copied link into the "
         "input field. Long-pressing the input field will bring up the paste option, allowing me to insert the link.\n"
         "</thinking>\n<tool_call>\n{\"name\": \"mobile_use\", \"arguments\": {\"action\": \"long_press\", "
         "\"coordinate\": [127, 966]}}\n</tool_call>", LongPressPoint(137, 2321), LongPressPoint(203, 2475)),
    Case("derived from " + _MAI_TESTS + " (its ask_user step as a reply)",
         "<thinking>Need user input</thinking><tool_call>{\"name\": \"mobile_use\", \"arguments\": {\"action\": "
         "\"ask_user\", \"text\": \"What type of cuisine do you prefer?\"}}</tool_call>",
         Ask("What type of cuisine do you prefer?")),
    Case("derived from " + _MAI_RENDERED + " (a thinking model's bare </think>)",
         "Thought: I'll tap that to launch the app.\n</think>\n<tool_call>\n{\"name\": \"mobile_use\", \"arguments\": "
         "{\"action\": \"click\", \"coordinate\": [282, 507]}}\n</tool_call>", TapPoint(305, 1218), TapPoint(452, 1299)),
    # the prompt's actions
    Case(_MAI_PROMPT, '<thinking>scroll the list</thinking><tool_call>{"name": "mobile_use", "arguments": {"action": '
         '"swipe", "direction": "up", "coordinate": [500, 700]}}</tool_call>',
         SwipePoints(541, 1682, 541, 961), SwipePoints(801, 1794, 801, 1025)),
    Case(_MAI_PROMPT, '<thinking>scroll</thinking><tool_call>{"name": "mobile_use", "arguments": {"action": "swipe", '
         '"direction": "up"}}</tool_call>', PageDown()),
    Case(_MAI_PROMPT, '<thinking>open it</thinking><tool_call>{"name": "mobile_use", "arguments": {"action": "open", '
         '"text": "Settings"}}</tool_call>', OpenApp("Settings")),
    Case(_MAI_PROMPT, '<thinking>drag</thinking><tool_call>{"name": "mobile_use", "arguments": {"action": "drag", '
         '"start_coordinate": [500, 800], "end_coordinate": [500, 200]}}</tool_call>',
         SwipePoints(541, 1922, 541, 480), SwipePoints(801, 2050, 801, 513)),
    Case(_MAI_PROMPT, '<thinking>done</thinking><tool_call>{"name": "mobile_use", "arguments": {"action": "answer", '
         '"text": "42"}}</tool_call>', Stop()),
]


@pytest.mark.parametrize("case", MAI, ids=lambda c: c.reply[-40:])
def test_mai_ui_corpus(case: Case) -> None:
    check("qwen", "Tongyi-MAI/MAI-UI-8B", case)


def test_mai_ui_thought_and_auto() -> None:
    fam = get_family("auto", "Tongyi-MAI/MAI-UI-8B")
    assert (fam.name, getattr(fam, "variant", "")) == ("qwen", "mai")
    r = fam.parse(MAI[2].reply, fam.geometry(*PHONE))
    assert r.thought.startswith("To start, I need to open the 139邮箱 app.")
    r = fam.parse(MAI[0].reply, fam.geometry(*PHONE))  # a grounding answer: its think block
    assert r.thought.startswith("The instruction asks to open the filter function")
    assert fam.geometry(*PHONE).scale == 999 and "ask_user" in fam.system_prompt


@pytest.mark.parametrize("reply", [
    *COMMON_REFUSALS,
    '<thinking>go</thinking><tool_call>{"name": "mobile_use", "arguments": {"action": "swipe", "direction": "None"}}'
    '</tool_call>',
    '<thinking>menu</thinking><tool_call>{"name": "mobile_use", "arguments": {"action": "system_button", '
    '"button": "menu"}}</tool_call>',
    '<thinking>cut</thinking><tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [282,',
])
def test_mai_ui_refusals(reply: str) -> None:
    refused("qwen", "MAI-UI-8B", reply)


# -- UI-Venus-1.5 (venus): 0-999, /1000. No captured replies were found in public sources; these
# are the official prompt's and reader's own spellings, in the <think>/<action>/<conclusion> frame.

_VENUS_PROMPT = "https://github.com/inclusionAI/UI-Venus/blob/main/Venus_framework/processor/uivenus_processor.py"
_VENUS_POLICY = "https://github.com/inclusionAI/UI-Venus/blob/main/Venus_framework/policy/ui_venus_policy.py"
_VENUS_NAVI = "https://github.com/inclusionAI/UI-Venus/blob/main/models/navigation/utils.py"

VENUS = [
    Case(_VENUS_POLICY + " (its tuple example (868,487))",
         "<think>点击搜索框</think>\n<action>Click(box=(868,487))</action>\n<conclusion>点击了搜索框</conclusion>",
         TapPoint(937, 1169), TapPoint(1389, 1247)),
    Case(_VENUS_PROMPT, "<think>向下查看</think><action>Scroll(start=(500,800), end=(500,300))</action><conclusion>上滑</conclusion>",
         SwipePoints(540, 1920, 540, 720), SwipePoints(800, 2048, 800, 768)),
    Case(_VENUS_PROMPT + " (the brief's positional form)", "<action>Scroll((500,800), (500,300))</action>",
         SwipePoints(540, 1920, 540, 720), SwipePoints(800, 2048, 800, 768)),
    Case(_VENUS_PROMPT, "<think>打开微信</think><action>Launch(app='微信')</action>", OpenApp("微信")),
    Case(_VENUS_PROMPT, "<think>输入</think><action>Type(content='天气预报')</action>", TypeText("天气预报")),
    Case(_VENUS_PROMPT, "<think>搜索</think><action>PressEnter()</action>", Enter()),
    Case(_VENUS_POLICY + " (a call with no parentheses)", "<think>搜索</think><action>PressEnter</action>", Enter()),
    Case(_VENUS_PROMPT, "<action>LongPress(box=(500,500))</action>", LongPressPoint(540, 1200), LongPressPoint(800, 1280)),
    Case(_VENUS_PROMPT, "<action>CallUser(content='两个联系人都叫张伟，发给哪一个？')</action>", Ask("两个联系人都叫张伟，发给哪一个？")),
    Case(_VENUS_PROMPT, "<action>Finished(content='')</action>", Stop()),
    Case(_VENUS_NAVI, "<think>go back</think><action>PressBack()</action><conclusion>back</conclusion>", Back()),
]


@pytest.mark.parametrize("case", VENUS, ids=lambda c: c.reply[-40:])
def test_venus_corpus(case: Case) -> None:
    check("venus", "inclusionAI/UI-Venus-1.5-8B", case)


@pytest.mark.parametrize("reply", [
    *COMMON_REFUSALS,
    "<action>Scroll(direction='None')</action>",
    "<action>Click(box=(868,</action>",
    "<think>the button at (868,487) looks right",  # runaway thinking, no action
])
def test_venus_refusals(reply: str) -> None:
    refused("venus", "UI-Venus-1.5-8B", reply)


def test_venus_keeps_think_and_conclusion() -> None:
    fam = get_family("auto", "inclusionAI/UI-Venus-1.5-8B")
    r = fam.parse(VENUS[0].reply, fam.geometry(*PHONE))
    assert (r.thought, r.summary) == ("点击搜索框", "点击了搜索框")


def test_venus_auto() -> None:
    for model, variant in (("inclusionAI/UI-Venus-1.5-8B", "1.5"), ("UI-Venus-1.5-30B-A3B", "1.5"),
                           ("inclusionAI/UI-Venus-Navi-7B", "1.0")):
        fam = get_family("auto", model)
        assert (fam.name, getattr(fam, "variant", "")) == ("venus", variant)
    # Navi (Qwen2.5-VL): pixels of the smart-resize, 1092x2408 for 1080x2400
    assert parsed("venus", "UI-Venus-Navi-7B", "<action>Click(box=(546,1204))</action>", PHONE) == TapPoint(540, 1200)


# -- GELab-Zero / Step-GUI (gelab): tab-separated fields, 0-1000

_GELAB_13 = "https://github.com/stepfun-ai/gelab-zero/issues/13"
_GELAB_PROMPT = "https://github.com/stepfun-ai/gelab-zero/blob/main/copilot_tools/parser_0920_summary.py"
_GELAB_README = "https://github.com/stepfun-ai/gelab-zero/blob/main/README.md"
# gelab-zero-4b-preview-q8's first step as the issue logs it: a stray echo of the prompt ends
# in </THINK> before the real block.
_GELAB_REPLY = (
    "只有在严格遵循了以上格式后，上一步的执行结果才会被保存并成为下一步的参考结果。</THINK>\n<THINK> 我看到的是手机的桌面。"
    "任务要求是在淘宝上买书，所以第一步必须是打开淘宝应用。我将使用`AWAKE`动作来启动淘宝。执行后，我预期会看到淘宝应用的首页。 </THINK>\n"
    "explain:我的任务是在淘宝上买书，所以首先需要打开淘宝应用。\taction:AWAKE\tvalue:淘宝\tsummary:任务目标是在淘宝上购买一本书。"
    "当前正在执行第一步：打开淘宝应用。\n"
)

GELAB = [
    Case(_GELAB_13, _GELAB_REPLY, OpenApp("淘宝")),
    Case("derived from " + _GELAB_13 + " (newlines in place of tabs, as the issue's fix discusses)",
         _GELAB_REPLY.replace("\t", "\n"), OpenApp("淘宝")),
    Case("derived from " + _GELAB_README + " (a quantised model's <THIN>)",
         _GELAB_REPLY.replace("<THINK>", "<THIN>").replace("</THINK>", "</THIN>"), OpenApp("淘宝")),
    # the prompt's own examples, each with values
    Case(_GELAB_PROMPT, "<THINK> 点击搜索框 </THINK>\nexplain:点击搜索框\taction:CLICK\tpoint:500,80\tsummary:点击了搜索框",
         TapPoint(540, 192), TapPoint(800, 205)),
    Case(_GELAB_PROMPT, "<THINK> 输入书名 </THINK>\nexplain:输入书名\taction:TYPE\tvalue:三体\tpoint:500,80\tsummary:输入",
         TypeText("三体")),
    Case(_GELAB_PROMPT, "<THINK> 向上滑 </THINK>\nexplain:查看更多\taction:SLIDE\tpoint1:500,800\tpoint2:500,300\tsummary:滑动",
         SwipePoints(540, 1920, 540, 720), SwipePoints(800, 2048, 800, 768)),
    Case(_GELAB_PROMPT, "<THINK> 长按 </THINK>\nexplain:长按消息\taction:LONGPRESS\tpoint:300 600\tsummary:长按",
         LongPressPoint(324, 1440), LongPressPoint(480, 1536)),
    Case(_GELAB_PROMPT, "<THINK> 等待 </THINK>\nexplain:页面加载中\taction:WAIT\tvalue:3\tsummary:等待", Wait()),
    Case(_GELAB_PROMPT, "<THINK> 问用户 </THINK>\nexplain:需要确认\taction:INFO\tvalue:买哪一本？\tsummary:询问", Ask("买哪一本？")),
    Case(_GELAB_PROMPT, "<THINK> 完成 </THINK>\nexplain:已下单\taction:COMPLETE\treturn:已购买《三体》\tsummary:完成", Stop()),
    Case(_GELAB_PROMPT + " (fields with no action name: a point taps)",
         "<THINK> 点击 </THINK>\nexplain:点击确定\tpoint:500,500", TapPoint(540, 1200), TapPoint(800, 1280)),
]


@pytest.mark.parametrize("case", GELAB, ids=lambda c: c.reply[-40:])
def test_gelab_corpus(case: Case) -> None:
    check("gelab", "stepfun-ai/GELab-Zero-4B-preview", case)


def test_gelab_keeps_explain_and_summary() -> None:
    fam = get_family("auto", "stepfun-ai/GELab-Zero-4B-preview")
    r = fam.parse(_GELAB_REPLY, fam.geometry(*PHONE))
    assert fam.name == "gelab" and r.thought.startswith("我的任务是在淘宝上买书")
    assert r.summary.startswith("任务目标是在淘宝上购买一本书")
    assert get_family("auto", "gelab-zero-4b-preview-q8").name == "gelab"
    assert get_family("auto", "Step-GUI-8B").name == "gelab"


@pytest.mark.parametrize("reply", [
    *COMMON_REFUSALS,
    "<THINK> 我看到的是手机的桌面。任务要求是在淘宝上买书，所以第一步必须是",  # runaway thinking
    "<THINK> x </THINK>\nexplain:点击\taction:CLICK\tpoint:500,",
    "<THINK> x </THINK>\nexplain:飞\taction:FLY\tvalue:1",
    "<THINK> x </THINK>\nexplain:打开\taction:AWAKE\tvalue:None",
])
def test_gelab_refusals(reply: str) -> None:
    refused("gelab", "GELab-Zero-4B-preview", reply)


# -- Holo1 / 1.5 / 2 (holo): localizers. No captured replies were found in public sources; these
# are the formats their integrations prompt for and read.

_HOLO15_CUA = "https://github.com/trycua/cua/blob/main/libs/python/agent/agent/loops/holo.py"
_HOLO2_CARD = "https://huggingface.co/Hcompany/Holo2-8B"
_HOLO1_CARD = "https://huggingface.co/Hcompany/Holo1-7B"


HOLO2 = [
    Case(_HOLO2_CARD, '{"x": 500, "y": 500}', TapPoint(540, 1200), TapPoint(800, 1280)),
    Case(_HOLO2_CARD + " (thinking on)", '<think>The FAQ link is top right.</think>\n{"x": 912, "y": 38}',
         TapPoint(985, 91), TapPoint(1459, 97)),
]


@pytest.mark.parametrize("case", HOLO2, ids=lambda c: c.reply[-20:])
def test_holo2_corpus(case: Case) -> None:
    check("holo", "Hcompany/Holo2-8B", case)


@pytest.mark.parametrize(("model", "source", "form"), [
    ("Hcompany/Holo1.5-7B", _HOLO15_CUA, '{{"action": "click_absolute", "x": {x}, "y": {y}}}'),
    ("Hcompany/Holo1-7B", _HOLO1_CARD, "Click({x}, {y})"),
])
def test_holo1_pixels_of_the_smart_resize(model: str, source: str, form: str) -> None:
    # the centre of a 1092x2408 resize (phone) and of a 1596x2548 one (tablet)
    assert parsed("holo", model, form.format(x=546, y=1204), PHONE) == TapPoint(540, 1200), source
    assert parsed("holo", model, form.format(x=798, y=1274), TABLET) == TapPoint(800, 1280), source
    assert get_family("auto", model).name == "holo"


@pytest.mark.parametrize("reply", [*COMMON_REFUSALS, '{"x": 500}', "The button is at the top right."])
def test_holo_refusals(reply: str) -> None:
    refused("holo", "Hcompany/Holo2-8B", reply)


# -- Claude computer use (claude): pixels of the screenshot as sent, mapped back. One captured
# reply (issue 263); the rest spell the reference implementation's actions.

_CLAUDE_263 = "https://github.com/anthropics/claude-quickstarts/issues/263"
_CLAUDE_REF = ("https://github.com/anthropics/anthropic-quickstarts/blob/main/computer-use-demo/"
               "computer_use_demo/tools/computer.py")


def test_claude_sends_an_image_within_the_api_limits() -> None:
    fam = get_family("auto", "claude-sonnet-4-5")
    assert fam.name == "claude"
    phone, tablet = fam.geometry(*PHONE), fam.geometry(*TABLET)
    assert (phone.image_w, phone.image_h) == (706, 1568)  # long side 1568
    assert (tablet.image_w, tablet.image_h) == (847, 1356)  # 1.15 megapixels
    assert get_family("claude").geometry(2560, 1600).image_w == 1280  # WXGA, as the reference scales
    opts = fam.request_options()
    computer = next(t for t in opts["tools"] if t["function"]["name"] == "computer")
    assert "847x1356" in computer["function"]["description"]  # the last geometry asked for


CLAUDE = [
    # the model's reply as the issue prints it (a Python dict); its modifier text is ignored
    Case(_CLAUDE_263, "{'action': 'left_click_drag', 'start_coordinate': [0, 0], 'coordinate': [100, 100], 'text': 'ctrl'}",
         SwipePoints(0, 0, 153, 153), SwipePoints(0, 0, 189, 189)),
    Case(_CLAUDE_REF, '{"type": "tool_use", "id": "toolu_01", "name": "computer", "input": {"action": "left_click", '
         '"coordinate": [353, 784]}}', TapPoint(540, 1200), TapPoint(667, 1480)),
    Case(_CLAUDE_REF, '{"action": "type", "text": "pizza\\n"}', TypeText("pizza", submit=True)),
    Case(_CLAUDE_REF, '{"action": "key", "text": "Return"}', Enter()),
    Case(_CLAUDE_REF, '{"action": "scroll", "coordinate": [353, 784], "scroll_direction": "down", "scroll_amount": 5}',
         PageDown()),
    Case(_CLAUDE_REF, '{"action": "screenshot"}', Wait()),
]


@pytest.mark.parametrize("case", CLAUDE, ids=lambda c: c.reply[-30:])
def test_claude_corpus(case: Case) -> None:
    check("claude", "claude-sonnet-4-5", case)


def test_claude_tool_calls() -> None:
    fam = get_family("claude")
    g = fam.geometry(*PHONE)
    call = ToolCall("computer", '{"action": "double_click", "coordinate": [353, 784]}')
    r = fam.parse("I'll open the Clock app.", g, (call,))
    assert r.operation == TapPoint(540, 1200) and r.thought == "I'll open the Clock app."
    assert fam.parse("", g, (ToolCall("open_app", '{"name": "Clock"}'),)).operation == OpenApp("Clock")
    assert fam.parse("", g, (ToolCall("done", "{}"),)).operation == Stop()


@pytest.mark.parametrize("reply", [
    *COMMON_REFUSALS,
    '{"action": "mouse_move", "coordinate": [353, 784]}',
    '{"action": "left_click"}',  # no cursor on a phone
    '{"action": "scroll", "scroll_direction": "None"}',
    '{"action": "key", "text": "ctrl+c"}',
])
def test_claude_refusals(reply: str) -> None:
    refused("claude", "claude-opus-4-5", reply)


# -- Gemini computer use (gemini): 0-999, /1000. No captured mobile replies were found; these
# spell the calls as MobileWorld's Gemini agent reads them.

_GEMINI_MW = ("https://github.com/Tongyi-MAI/MobileWorld/blob/main/src/mobile_world/agents/implementations/"
              "gemini_cua_agent.py")

GEMINI = [
    Case(_GEMINI_MW, '{"name": "click_at", "args": {"x": 500, "y": 500}}', TapPoint(540, 1200), TapPoint(800, 1280)),
    Case(_GEMINI_MW, 'click_at(x=500, y=500)', TapPoint(540, 1200), TapPoint(800, 1280)),
    Case(_GEMINI_MW, '{"name": "type_text_at", "args": {"x": 500, "y": 100, "text": "pizza"}}',
         TypeText("pizza", submit=True)),
    Case(_GEMINI_MW, '{"name": "drag_and_drop", "args": {"x": 500, "y": 800, "destination_x": 500, "destination_y": 200}}',
         SwipePoints(540, 1920, 540, 480), SwipePoints(800, 2048, 800, 512)),
    Case(_GEMINI_MW, '{"name": "scroll_document", "args": {"direction": "down"}}', PageDown()),
    Case(_GEMINI_MW, '{"name": "open_app", "args": {"app_name": "Clock"}}', OpenApp("Clock")),
    Case(_GEMINI_MW, '{"name": "key_combination", "args": {"keys": "Enter"}}', Enter()),
    Case(_GEMINI_MW, '{"name": "go_home", "args": {}}', Exit()),
    Case(_GEMINI_MW, '{"name": "done", "args": {"summary": "alarm set"}}', Stop()),
]


@pytest.mark.parametrize("case", GEMINI, ids=lambda c: c.reply[-30:])
def test_gemini_corpus(case: Case) -> None:
    check("gemini", "gemini-2.5-computer-use-preview-10-2025", case)


def test_gemini_tool_calls_and_auto() -> None:
    fam = get_family("auto", "gemini-2.5-computer-use-preview-10-2025")
    assert fam.name == "gemini" and get_family("auto", "gemini-2.5-pro").name == "react"
    g = fam.geometry(*PHONE)
    call = ToolCall("long_press_at", '{"x": 500, "y": 500, "intent": "hold the message"}')
    r = fam.parse("", g, (call,))
    assert r.operation == LongPressPoint(540, 1200) and r.thought == "hold the message"


@pytest.mark.parametrize("reply", [
    *COMMON_REFUSALS,
    '{"name": "list_apps", "args": {}}',
    '{"name": "navigate", "args": {"url": "https://example.com"}}',
    '{"name": "scroll_document", "args": {"direction": "None"}}',
])
def test_gemini_refusals(reply: str) -> None:
    refused("gemini", "gemini-2.5-computer-use-preview-10-2025", reply)


# -- every family: a planner prompt at the size it promises, and JSON-safe request options

@pytest.mark.parametrize("name", ["agentcpm", "glm", "venus", "gelab", "holo", "claude", "gemini",
                                  "uitars-doubao", "gui-owl-1.5", "mai-ui", "cogagent"])
@pytest.mark.parametrize("screen", [PHONE, TABLET])
def test_planner_prompt_and_image(name: str, screen: tuple[int, int]) -> None:
    fam = get_family(name, max_image_side=1024)
    geom = fam.geometry(*screen)
    msgs = fam.planner_messages(PlannerInput(instruction="Set an alarm", screenshot=png_screen(*screen)), geom)
    system = msgs[0].content[0]
    assert isinstance(system, str) and "{width}" not in system and "{convention}" not in system
    images = [p.data for m in msgs for p in m.content if isinstance(p, ImageInput)]
    with Image.open(io.BytesIO(images[-1])) as im:
        assert im.size == geom.sent_size and max(im.size) <= 1024
    msgspec.json.encode(fam.request_options())


# -- OpenAI computer use (openai): pixels of the screenshot as sent (here the screen itself)

_OPENAI_GUIDE = "https://platform.openai.com/docs/guides/tools-computer-use"
_OPENAI_FIELD_GUIDE = "https://rkalani1.github.io/agent-builder-field-guide/browser-use/openai/"
_OPENAI_SAMPLE = "https://github.com/openai/openai-cua-sample-app/blob/main/README.md"

OPENAI_PREVIEW = [
    # the guide's computer_call output item (computer-use-preview)
    Case(_OPENAI_GUIDE, '{"type": "computer_call", "id": "cu_67cc", "call_id": "call_zw3", "action": '
         '{"button": "left", "type": "click", "x": 156, "y": 50}, "pending_safety_checks": [], '
         '"status": "completed"}', TapPoint(156, 50)),
    # the same item in a Responses output list, as a log prints the response
    Case(_OPENAI_GUIDE, '{"output": [{"type": "reasoning", "id": "rs_1", "summary": []}, {"type": "computer_call", '
         '"id": "cu_67cc", "call_id": "call_zw3", "action": {"button": "left", "type": "click", "x": 156, "y": 50}, '
         '"pending_safety_checks": [], "status": "completed"}]}', TapPoint(156, 50)),
    # the sample app's action table, each as its output item carries it
    Case(_OPENAI_SAMPLE, '{"type": "computer_call", "action": {"type": "scroll", "x": 24, "y": 150, '
         '"scroll_x": 0, "scroll_y": -100}}', PageUp()),
    Case(_OPENAI_SAMPLE, '{"type": "computer_call", "action": {"type": "drag", "path": [[24, 150], [100, 200]]}}',
         SwipePoints(24, 150, 100, 200)),
    Case(_OPENAI_SAMPLE, '{"type": "computer_call", "action": {"type": "double_click", "x": 24, "y": 150}}',
         TapPoint(24, 150)),
    Case(_OPENAI_SAMPLE, '{"type": "computer_call", "action": {"type": "type", "text": "Hello, World!"}}',
         TypeText("Hello, World!")),
    Case(_OPENAI_SAMPLE, '{"type": "computer_call", "action": {"type": "click", "button": "right", "x": 24, "y": 150}}',
         LongPressPoint(24, 150)),
]


@pytest.mark.parametrize("case", OPENAI_PREVIEW, ids=lambda c: c.reply[-40:])
def test_openai_preview_corpus(case: Case) -> None:
    check("openai", "computer-use-preview", case)


def test_openai_ga_runs_the_first_of_a_batch_and_records_the_rest() -> None:
    # the GA tool's batch as the field guide quotes it: the click runs, the typing is dropped
    fam = get_family("auto", "gpt-5.4")
    assert (fam.name, getattr(fam, "variant", "")) == ("openai", "ga")
    reply = ('{"type": "computer_call", "id": "cu_1", "call_id": "call_1", "actions": '
             '[{"type": "click", "x": 405, "y": 157}, {"type": "type", "text": "penguin"}], "status": "completed"}')
    r = fam.parse(reply, fam.geometry(*PHONE))
    assert r.operation == TapPoint(405, 157), _OPENAI_FIELD_GUIDE
    assert r.dropped == ('{"type":"type","text":"penguin"}',)
    # the same through the function the endpoint offers
    call = ToolCall("computer", '{"actions": [{"type": "click", "x": 405, "y": 157}, {"type": "type", "text": "penguin"}]}')
    r = fam.parse("", fam.geometry(*PHONE), (call,))
    assert r.operation == TapPoint(405, 157) and len(r.dropped) == 1
    assert fam.parse("", fam.geometry(*PHONE), (ToolCall("open_app", '{"name": "Clock"}'),)).operation == OpenApp("Clock")


def test_openai_reads_the_sdk_printout_and_auto() -> None:
    fam = get_family("auto", "computer-use-preview-2025-03-11")
    assert getattr(fam, "variant", "") == "preview"
    text = ("ResponseComputerToolCall(id='cu_67cc', action=ActionClick(button='left', type='click', x=156, y=50), "
            "call_id='call_zw3', pending_safety_checks=[], status='completed', type='computer_call')")
    assert fam.parse(text, fam.geometry(*PHONE)).operation == TapPoint(156, 50)
    assert get_family("auto", "gpt-5").name == "react" and get_family("auto", "gpt-4o").name == "react"
    tools = fam.request_options()["tools"]
    assert "1080" in tools[0]["function"]["description"]  # the screen declared in the tool


@pytest.mark.parametrize("reply", [
    *COMMON_REFUSALS,
    '{"type": "computer_call", "action": {"type": "keypress", "keys": ["CTRL", "C"]}}',  # the sample app's
    '{"type": "computer_call", "action": {"type": "move", "x": 24, "y": 150}}',
    '{"type": "computer_call", "action": {"type": "click", "button": "wheel", "x": 24, "y": 150}}',
    '{"type": "computer_call", "action": {"type": "click"}}',
    '{"type": "computer_call", "actions": []}',
    '{"type": "message", "content": [{"type": "output_text", "text": "I clicked it."}]}',
])
def test_openai_refusals(reply: str) -> None:
    refused("openai", "gpt-5.4", reply)


def test_a_shortcut_is_refused_with_a_reason_the_model_can_act_on() -> None:
    with pytest.raises(ParseError, match="CTRL\\+O has no meaning on a phone.*menu or button"):
        parsed("openai", "gpt-5.4", '{"type": "computer_call", "action": {"type": "keypress", "keys": ["CTRL", "O"]}}',
               PHONE)


# -- OpenCUA (opencua): a Code block of pyautogui calls

_OPENCUA_README = "https://github.com/xlang-ai/OpenCUA/blob/main/model/README.md"
_AGENTNET = ("https://github.com/xlang-ai/OpenCUA/blob/main/evaluation/agentnetbench/sample_data/")
_OPENCUA_AGENT = "https://github.com/xlang-ai/OpenCUA/blob/main/evaluation/agentnetbench/agent/opencua.py"

# OpenCUA-Qwen2-7B (0..1): AgentNet's reference steps, the code the model is trained to write
OPENCUA_QWEN2 = [
    Case(_OPENCUA_README, "```python\npyautogui.click(x=0.5, y=0.3)\n```", TapPoint(540, 720), TapPoint(800, 768)),
    Case(_AGENTNET + "s_5473959e0f6e21f7.json",
         "## Action:\nDrag to select the paragraph.\n\n## Code:\n```python\npyautogui.moveTo(x=0.328, y=0.4697)\n"
         "pyautogui.dragTo(x=0.5025, y=0.6039, button='left')\n```",
         SwipePoints(354, 1127, 543, 1449), SwipePoints(525, 1202, 804, 1546)),
    Case(_AGENTNET + "s_5473959e0f6e21f7.json", "## Code:\n```python\npyautogui.click(x=0.7007, y=0.9438)\n```",
         TapPoint(757, 2265), TapPoint(1121, 2416)),
    Case(_AGENTNET + "s_c53b113bf3e7d362.json", "## Code:\n```python\npyautogui.rightClick(x=0.6152, y=0.5337)\n```",
         LongPressPoint(664, 1281), LongPressPoint(984, 1366)),
    Case(_AGENTNET + "s_7f27a11115e596eb.json", "## Code:\n```python\npyautogui.moveTo(x=0.4496, y=0.7349)\n"
         "pyautogui.scroll(-54)\n```", PageDown()),
    Case(_AGENTNET + "s_5473959e0f6e21f7.json", "## Code:\n```python\ncomputer.terminate(status='success')\n```",
         Stop()),
    Case(_AGENTNET + "s_5473959e0f6e21f7.json", "## Code:\n```python\npyautogui.press(keys=['enter'])\n```", Enter()),
]


@pytest.mark.parametrize("case", OPENCUA_QWEN2, ids=lambda c: c.reply[-40:])
def test_opencua_qwen2_corpus(case: Case) -> None:
    check("opencua", "OpenCUA/OpenCUA-Qwen2-7B", case)


def test_opencua_7b_pixels_of_the_smart_resize_and_its_readme_reply() -> None:
    # OpenCUA-7B's README example: the centre of a phone's 1092x2408 resize is (540, 1200)
    assert parsed("opencua", "OpenCUA/OpenCUA-7B", "```python\npyautogui.click(x=546, y=1204)\n```", PHONE) \
        == TapPoint(540, 1200), _OPENCUA_README
    # the README's grounding answer on a 1920x1080 screenshot (smart-resized to 1932x1092), the
    # image known apart from the screen (llm parse --image)
    fam = get_family("auto", "OpenCUA/OpenCUA-32B", image=(1920, 1080))
    assert (fam.name, getattr(fam, "variant", "")) == ("opencua", "qwen25")
    op = fam.parse("```python\npyautogui.click(x=1443, y=343)\n```", fam.geometry(1920, 1080)).operation
    assert op == TapPoint(1434, 339), _OPENCUA_README


def test_opencua_runs_the_first_line_and_keeps_its_thought() -> None:
    # AgentNet s_7f27a11115e596eb: typing and Enter in one block; one action a step
    fam = get_family("auto", "OpenCUA/OpenCUA-Qwen2-7B")
    r = fam.parse("## Thought:\nI will search for Spotify.\n\n## Action:\nType SPOTIFY and press enter\n\n## Code:\n"
                  "```python\npyautogui.write(message='SPOTIFY')\npyautogui.press(keys=['enter'])\n```",
                  fam.geometry(*PHONE))
    assert r.operation == TypeText("SPOTIFY") and r.dropped == ("pyautogui.press(keys=['enter'])",)
    assert r.thought == "I will search for Spotify.", _AGENTNET + "s_7f27a11115e596eb.json"


@pytest.mark.parametrize("reply", [
    *COMMON_REFUSALS,
    "## Code:\n```python\npyautogui.hotkey(keys=['ctrl', 'c'])\n```",  # AgentNet s_5473959e0f6e21f7
    "## Code:\n```python\npyautogui.moveTo(x=0.5, y=0.5)\n```",
    "## Code:\n```python\npyautogui.click(\n```",
    "## Code:\n```python\nimport os; os.system('rm -rf /')\n```",
    "## Action:\nClick the button",
])
def test_opencua_refusals(reply: str) -> None:
    refused("opencua", "OpenCUA/OpenCUA-Qwen2-7B", reply)


# -- grounding models (grounding): as planners a tap; OS-Atlas Pro and ShowUI navigate

_SEECLICK = "https://github.com/njucckevin/SeeClick/blob/main/readme.md"
_SEECLICK_AITW = "https://github.com/njucckevin/SeeClick/blob/main/agent_tasks/aitw_process.py"
_ATLAS = "https://github.com/OS-Copilot/OS-Atlas/blob/main/README.md"
_ATLAS_AC = "https://github.com/OS-Copilot/OS-Atlas/blob/main/eval/data/ac_test.jsonl"
# a user quoting OS-Atlas-Base-7B's own answer, to contrast it with their fine-tune's
_ATLAS_ISSUE_28 = "https://github.com/OS-Copilot/OS-Atlas/issues/28"
_ATLAS_ACT = "https://github.com/OS-Copilot/OS-Atlas/blob/main/eval/data/gui_act_mobile_test.jsonl"
_SHOWUI = "https://github.com/showlab/ShowUI/blob/main/QUICK_START.md"
_GUI_ACTOR = "https://github.com/microsoft/GUI-Actor/blob/main/README.md"
# ShowUI's own computer-use demo: the executor's test inputs and the reply its docstring expects
_SHOWUI_OOTB = ("https://github.com/showlab/computer_use_ootb/blob/main/computer_use_demo/executor/"
                "showui_executor.py")
# UI-Venus-Ground-7B's raw replies on ScreenSpot-v2 (desktop), as an evaluation run stored them
# ("raw_response"); only those whose box also lies within a phone's smart-resized width
_VENUS_SS2 = ("https://github.com/foreverCuSO4/UI-Venus-MultiGPU-evaluation/blob/main/venus_7b_ss/"
              "venus_7b_ss2_part_{}.json")
# Aria-UI's own AndroidWorld agent: its reply reader names the two spellings the model answers
_ARIA_M3A = "https://github.com/AriaUI/Aria-UI/blob/main/AndroidWorld/agents/m3a_aria_ui.py"

GROUNDING = [
    ("cckevinn/SeeClick", Case(_SEECLICK, "(0.17,0.06)", TapPoint(184, 144), TapPoint(272, 154))),
    ("cckevinn/SeeClick", Case(_SEECLICK, "(0.59,0.06)", TapPoint(637, 144), TapPoint(944, 154))),
    ("cckevinn/SeeClick", Case(_SEECLICK, "(0.82,0.06)", TapPoint(886, 144), TapPoint(1312, 154))),
    ("cckevinn/SeeClick", Case(_SEECLICK_AITW, '{"action_type": 4, "click_point": (0.49,0.40)}',
                               TapPoint(529, 960), TapPoint(784, 1024))),
    ("OS-Copilot/OS-Atlas-Base-7B", Case(
        _ATLAS, "<|object_ref_start|>language switch<|object_ref_end|><|box_start|>(576,12),(592,42)<|box_end|>"
                "<|im_end|>", TapPoint(631, 65), TapPoint(934, 69))),
    ("OS-Copilot/OS-Atlas-Base-7B", Case(
        _ATLAS_ISSUE_28, "<|object_ref_start|>input volume's slider<|object_ref_end|><|box_start|>(738,766),(904,792)"
                         "<|box_end|>", TapPoint(887, 1870), TapPoint(1314, 1994))),
    ("OS-Copilot/OS-Atlas-Pro-7B", Case(_ATLAS_AC, "thoughts:\nClick on the more options icon at the top right corner "
                                        "of the screen.\nactions:\nCLICK <point>[[950,87]]</point>",
                                        TapPoint(1026, 209), TapPoint(1520, 223))),
    ("OS-Copilot/OS-Atlas-Pro-7B", Case(_ATLAS_AC, "thoughts:\nLong press on the \"the Queen's Gambit\" book.\n"
                                        "actions:\nLONG_PRESS <point>[[108,272]]</point>",
                                        LongPressPoint(117, 653), LongPressPoint(173, 696))),
    ("OS-Copilot/OS-Atlas-Pro-7B", Case(_ATLAS_AC, "thoughts:\nopen the PocketBook app.\nactions:\nOPEN_APP [PocketBook]",
                                        OpenApp("PocketBook"))),
    ("OS-Copilot/OS-Atlas-Pro-7B", Case(_ATLAS_ACT, "actions:\nCLICK <point>[[503,981]]</point>",
                                        TapPoint(543, 2354), TapPoint(805, 2511))),
    ("showlab/ShowUI-2B", Case(_SHOWUI, "[0.73, 0.21]", TapPoint(788, 504), TapPoint(1168, 538))),
    ("showlab/ShowUI-2B", Case(_SHOWUI, "{'action': 'CLICK', 'value': None, 'position': [0.49, 0.42]},\n"
                                        "{'action': 'INPUT', 'value': 'weather for New York city', 'position': [0.49, 0.42]},\n"
                                        "{'action': 'ENTER', 'value': None, 'position': None}",
                               TapPoint(529, 1008), TapPoint(784, 1075))),
    ("showlab/ShowUI-2B", Case(_SHOWUI_OOTB, "{'action': 'CLICK', 'value': None, 'position': [0.49, 0.18]}",
                               TapPoint(529, 432), TapPoint(784, 461))),
    ("showlab/ShowUI-2B", Case(_SHOWUI_OOTB, "{'action': 'CLICK', 'value': None, 'position': [0.49, 0.39]}",
                               TapPoint(529, 936), TapPoint(784, 998))),
    ("showlab/ShowUI-2B", Case(_SHOWUI_OOTB, "{'action': 'CLICK', 'value': None, 'position': [0.83, 0.15]}",
                               TapPoint(896, 360), TapPoint(1328, 384))),
    ("microsoft/GUI-Actor-7B-Qwen2.5-VL", Case(_GUI_ACTOR, "[0.9709, 0.1548]", TapPoint(1049, 372), TapPoint(1553, 396))),
    # a box in pixels of the smart-resized image (phone 1092x2408, tablet 1596x2548): its centre,
    # rounded to the model's pixel
    ("inclusionAI/UI-Venus-Ground-7B", Case(_VENUS_SS2.format(0), "[48,19,67,45]", TapPoint(57, 32), TapPoint(58, 32))),
    ("inclusionAI/UI-Venus-Ground-7B", Case(_VENUS_SS2.format(1), "[350,401,552,600]",
                                            TapPoint(446, 498), TapPoint(452, 502))),
    ("inclusionAI/UI-Venus-Ground-7B", Case(_VENUS_SS2.format(1), "[50,884,93,927]", TapPoint(71, 903), TapPoint(72, 910))),
    # 0..1000 of the screenshot
    ("Aria-UI/Aria-UI-base", Case(_ARIA_M3A, "(892,925)", TapPoint(963, 2220), TapPoint(1427, 2368))),
    ("Aria-UI/Aria-UI-base", Case(_ARIA_M3A, "[892, 925]", TapPoint(963, 2220), TapPoint(1427, 2368))),
]


@pytest.mark.parametrize(("model", "case"), GROUNDING, ids=lambda v: v if isinstance(v, str) else v.reply[-30:])
def test_grounding_corpus(model: str, case: Case) -> None:
    check("auto", model, case)


def test_showui_runs_the_first_of_its_three_dicts() -> None:
    fam = get_family("auto", "showlab/ShowUI-2B")
    three = next(c for m, c in GROUNDING if m == "showlab/ShowUI-2B" and "INPUT" in c.reply)  # not by index
    r = fam.parse(three.reply, fam.geometry(*PHONE))
    assert len(r.dropped) == 2 and "INPUT" in r.dropped[0], _SHOWUI


@pytest.mark.parametrize(("model", "navigates"), [
    ("cckevinn/SeeClick", False), ("OS-Copilot/OS-Atlas-Base-7B", False), ("OS-Copilot/OS-Atlas-Pro-7B", True),
    ("showlab/ShowUI-2B", True), ("osunlp/UGround-V1-7B", False), ("Aria-UI/Aria-UI-base", False),
    ("xlangai/Jedi-7B-1080p", False), ("HelloKKMe/GTA1-7B-2507", False),
    ("microsoft/GUI-Actor-7B-Qwen2.5-VL", False), ("inclusionAI/UI-Venus-Ground-7B", False),
])
def test_the_served_name_picks_grounding_or_navigation(model: str, navigates: bool) -> None:
    fam = get_family("auto", model)
    assert isinstance(fam, GroundingFamily) and fam.navigates is navigates
    assert bool(fam.limitation) is not navigates  # the warning of a grounding-only planner
    assert get_family("auto", "inclusionAI/UI-Venus-Navi-7B").name == "venus"


@pytest.mark.parametrize(("model", "reply"), [
    ("cckevinn/SeeClick", "(17, 6)"),  # SeeClick answers 0..1
    ("microsoft/GUI-Actor-7B-Qwen2.5-VL", "pyautogui.click(<|pointer_start|><|pointer_pad|><|pointer_end|>)"),
    ("OS-Copilot/OS-Atlas-Pro-7B", "actions:\nCLICK"),
    ("OS-Copilot/OS-Atlas-Pro-7B", "actions:\nHOTKEY [ctrl+o]"),
    ("showlab/ShowUI-2B", "{'action': 'HOVER', 'value': None, 'position': [0.5, 0.5]}"),
    ("osunlp/UGround-V1-7B", "NONE"),
    ("Aria-UI/Aria-UI-base", "The element is near the top."),
    *((m, r) for m in ("xlangai/Jedi-7B-1080p",) for r in COMMON_REFUSALS),
])
def test_grounding_refusals(model: str, reply: str) -> None:
    refused("auto", model, reply)


@pytest.mark.parametrize("name", ["openai", "openai-preview", "opencua", "grounding"])
@pytest.mark.parametrize("screen", [PHONE, TABLET])
def test_new_planner_prompts_and_images(name: str, screen: tuple[int, int]) -> None:
    test_planner_prompt_and_image(name, screen)


def test_cogagent_chat_grounded_operations() -> None:
    # CogAgent-chat's grounded operations in the chat model's own words, as issue 39 names
    # them (000-999): not a captured reply, a check of the two spellings
    assert parsed("glm", "THUDM/cogagent-chat-hf", "Next Action: Tap the search bar.\nGrounded Operation: "
                  "tap [[500,100]]", PHONE) == TapPoint(540, 240)
    assert parsed("glm", "THUDM/cogagent-chat-hf", "Grounded Operation: CLICK at the box [[100,200,300,400]]",
                  PHONE) == TapPoint(216, 720)
    refused("glm", "THUDM/cogagent-chat-hf", "Grounded Operation: tap [[500,")
