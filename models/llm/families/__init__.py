"""Model families, selected by name (``llm.family`` per role): ``react``, ``tools``, ``json``,
``uitars``, ``qwen``, ``autoglm``, ``agentcpm``, ``glm``, ``venus``, ``gelab``, ``holo``,
``claude``, ``gemini``, ``openai``, ``opencua``, ``grounding``, or ``auto`` (from the model name, where that is unambiguous). See ``base`` for the interface and each module for its conventions.

A family is one module of this folder and one entry in ``FAMILIES`` below (plus a pattern
in ``auto_family_name`` when a model name implies it); nothing outside the folder names
the families."""

from __future__ import annotations

import re
from collections.abc import Callable

from models.llm.errors import ParseError
from models.llm.families.agentcpm import AgentCPMFamily
from models.llm.families.autoglm import AutoGLMFamily
from models.llm.families.base import (
    Family,
    FamilyReply,
    Geometry,
    ToolCall,
    map_operation,
    smart_resize,
)
from models.llm.families.claude_cu import ClaudeFamily
from models.llm.families.gelab import GELabFamily
from models.llm.families.gemini_cu import GeminiFamily
from models.llm.families.glm import GLMFamily
from models.llm.families.grounding import GroundingFamily, grounding_variant
from models.llm.families.holo import HoloFamily
from models.llm.families.json_schema import JsonFamily
from models.llm.families.openai_cu import OpenAIFamily
from models.llm.families.opencua import OpenCUAFamily
from models.llm.families.qwen import QwenFamily
from models.llm.families.react import ReactFamily
from models.llm.families.tools import ToolsFamily
from models.llm.families.uitars import UITarsFamily
from models.llm.families.venus import VenusFamily


def _uitars_variant(model: str) -> str:
    # UI-TARS 1.0 checkpoints are the 2B/7B/72B -SFT and -DPO ones (relative 0-1000);
    # 1.5 and later answer absolute pixels, and a bare "ui-tars" today means those.
    m = model.lower()
    # Doubao-1.5-UI-TARS, Doubao-Seed-1.6 / 1.8 on Ark: 0-1000 (not ByteDance-Seed/UI-TARS-1.5-7B)
    if "doubao" in m or re.search(r"seed-?1[.-]?\d", m):
        return "doubao"
    if re.search(r"(?<![\d.])1\.0|-sft|-dpo", m) and "1.5" not in m:
        return "1.0"
    return "1.5"


def _qwen_variant(model: str) -> str:
    m = model.lower()
    if re.search(r"gui-?owl-?1[._]5", m):
        return "owl1.5"
    if re.search(r"mai-?ui", m):
        return "mai"
    # GUI-Owl 1.0 (GUI-Owl-7B/32B, on Qwen2.5-VL) answers absolute pixels of the image its
    # processor smart-resizes (factor 28), as Qwen2.5-VL does: Mobile-Agent-v3's run script
    # defaults to --coor_type abs (0-1000 only with --coor_type qwen-vl, "such as Seed-VL"),
    # and its AndroidWorld agent (gui_owl.py) smart-resizes with factor 28 and states that
    # size in the prompt. Pin qwen3 for a GUI-Owl served with relative coordinates.
    return "3" if "qwen3" in m else "2.5"


def _venus_variant(model: str) -> str:
    return "1.0" if re.search(r"venus-(?:navi|ground)", model.lower()) else "1.5"


def _glm_variant(model: str) -> str:
    return "cogagent" if "cogagent" in model.lower() else "glm"


def _openai_variant(model: str) -> str:
    # computer-use-preview answers one action a computer_call; the GA computer tool of the
    # GPT-5 models (gpt-5.4 and later) a batch of actions.
    return "preview" if "computer-use-preview" in model.lower() else "ga"


def _holo_variant(model: str) -> str:
    m = model.lower()
    return "1.5" if "holo1.5" in m or "holo1_5" in m else "1" if re.search(r"holo1(?![.\d_])", m) else "2"


# name -> the family for (model name, the planner role's max_image_side); the variant, where
# a family has several, from the model name ("" when unknown).
FamilyMaker = Callable[[str, int | None], Family]
FAMILIES: dict[str, FamilyMaker] = {
    "react": lambda model, side: ReactFamily(side),
    "tools": lambda model, side: ToolsFamily(side),
    "json": lambda model, side: JsonFamily(side),
    "uitars": lambda model, side: UITarsFamily(_uitars_variant(model) if model else "1.5", side),
    "qwen": lambda model, side: QwenFamily(_qwen_variant(model) if model else "2.5", side),
    "autoglm": lambda model, side: AutoGLMFamily(side),
    "agentcpm": lambda model, side: AgentCPMFamily(side),
    "venus": lambda model, side: VenusFamily(_venus_variant(model), side),
    "gelab": lambda model, side: GELabFamily(side),
    "holo": lambda model, side: HoloFamily(_holo_variant(model), side),
    "claude": lambda model, side: ClaudeFamily(side),
    "gemini": lambda model, side: GeminiFamily(side),
    "glm": lambda model, side: GLMFamily(_glm_variant(model), side),
    "openai": lambda model, side: OpenAIFamily(_openai_variant(model) if model else "ga", side),
    "grounding": lambda model, side: GroundingFamily(grounding_variant(model) or "plain", side),
    # OpenCUA-Qwen2-7B answers 0..1; the Qwen2.5-VL based 7B/32B/72B pixels of the smart-resize
    "opencua": lambda model, side: OpenCUAFamily("qwen2" if "qwen2-" in model.lower() else "qwen25", side),
}
# Names that pin a variant whatever the model name says.
_PINNED: dict[str, FamilyMaker] = {
    "uitars-1.5": lambda model, side: UITarsFamily("1.5", side),
    "uitars-1.0": lambda model, side: UITarsFamily("1.0", side),
    "uitars-doubao": lambda model, side: UITarsFamily("doubao", side),
    "qwen2.5": lambda model, side: QwenFamily("2.5", side),
    "qwen3": lambda model, side: QwenFamily("3", side),
    "gui-owl-1.5": lambda model, side: QwenFamily("owl1.5", side),
    "mai-ui": lambda model, side: QwenFamily("mai", side),
    "cogagent": lambda model, side: GLMFamily("cogagent", side),
    "openai-preview": lambda model, side: OpenAIFamily("preview", side),
    "openai-ga": lambda model, side: OpenAIFamily("ga", side),
}
FAMILY_NAMES: tuple[str, ...] = tuple(FAMILIES)


# Claude names whose computer tool takes a coordinate with each click: Sonnet 3.7 and every
# Claude 4 or later (claude-sonnet-4, claude-opus-4-1, claude-haiku-4-5, claude-4-sonnet,
# claude-3-7-sonnet-20250219, anthropic/claude-3.7-sonnet). Not Claude 3.5 Sonnet (new): its
# computer_20241022 clicks where a separate mouse_move put the cursor (left_click has no
# coordinate), which this family re-asks, and the model is retired; nor the chat-only
# Claude 3 / 3.5 Haiku / Opus models, which have no computer use: react for those.
_CLAUDE_CU = re.compile(
    r"claude-3[-.]7-sonnet|claude-sonnet-3[-.]7|claude-(?:sonnet|opus)-[4-9]|claude-haiku-(?:4[-.]?[5-9]|[5-9])"
    r"|claude-[4-9](?:[-.]\d)?-(?:sonnet|opus|haiku)"
)


# OpenAI names whose computer use is the Responses API's: computer-use-preview (one action a
# computer_call) and the GPT-5 models with the GA computer tool, gpt-5.4 and later (a batch
# of actions). Earlier GPT-5 and GPT-4 names have no computer tool: react.
_OPENAI_CU = re.compile(r"computer-use-preview|gpt-5[.-](?:[4-9]|\d\d)|gpt-(?:[6-9]|\d\d)(?![\d])")


def auto_family_name(model: str) -> str:
    """The family a model name implies; ``react`` when the name says nothing (GPT, Gemini
    chat models, Claude 3 / 3.5 and most others follow a text prompt)."""
    m = model.lower()
    # Grounding models (SeeClick, OS-Atlas, ShowUI, UGround, Aria-UI, Jedi, GTA1, GUI-Actor,
    # UI-Venus-Ground): the served name picks grounding vs navigation (UI-Venus-Navi: venus).
    if grounding_variant(m) is not None:
        return "grounding"
    if "ui-tars" in m or "uitars" in m or "ui_tars" in m:
        return "uitars"
    if re.search(r"doubao.*(seed|vision)|seed-?1[.-]?\d-?vl", m):  # the Ark GUI models
        return "uitars"
    if "autoglm" in m:
        return "autoglm"
    if "agentcpm-gui" in m or "agentcpm_gui" in m:
        return "agentcpm"
    # Computer-use models: Gemini's by name; Claude where its computer tool is the one this
    # family speaks (Anthropic's tool versions: computer_20250124 for Claude Sonnet 3.7 and
    # the Claude 4 models, computer_20251124 for Opus 4.5 and later, with the same actions).
    if "gemini" in m and "computer-use" in m:
        return "gemini"
    if _CLAUDE_CU.search(m):
        return "claude"
    if _OPENAI_CU.search(m):
        return "openai"
    if "opencua" in m:
        return "opencua"
    if re.search(r"(?:hcompany/)?holo[123]", m):
        return "holo"
    if "gelab" in m or "step-gui" in m or "stepgui" in m:
        return "gelab"
    if "ui-venus" in m or "ui_venus" in m:
        return "venus"
    if "cogagent" in m or re.search(r"glm-?4\.[15]v", m):
        return "glm"
    if re.search(r"gui-?owl|mai-?ui|qwen[\d.]*-?vl|qwen3-vl|qwen2\.5-vl", m):
        return "qwen"
    return "react"


def get_family(name: str, model: str = "", *, max_image_side: int | None = None,
               image: tuple[int, int] | None = None) -> Family:
    """The family ``name`` (``auto``: from ``model``), with the variant ``model`` implies;
    ``max_image_side``: the planner role's ``llm.max_image_side`` (None: the screenshot is
    sent at the screen's size); ``image``: the (width, height) of the image the model saw,
    when it is known and not the screen fitted within ``max_image_side`` (a saved reply).
    Unknown names raise ``ValueError`` naming the known ones."""
    n = name.strip().lower()
    if n == "auto":
        n = auto_family_name(model)
    make = FAMILIES.get(n) or _PINNED.get(n)
    if make is None:
        raise ValueError(
            f"unknown model family {name!r}: use one of {', '.join(FAMILY_NAMES)}, or auto"
        )
    fam = make(model, max_image_side)
    if image is not None:
        fam.sent_image = image  # type: ignore[attr-defined]  # every family is a FamilyBase
    return fam


__all__ = [
    "FAMILIES", "FAMILY_NAMES", "Family", "FamilyReply", "Geometry", "ParseError", "ToolCall",
    "auto_family_name", "get_family", "map_operation", "smart_resize",
]
