"""Model families, selected by name (``llm.family`` per role): ``react``, ``tools``, ``json``,
``uitars``, ``qwen``, ``autoglm``, or ``auto`` (from the model name, where that is
unambiguous). See ``base`` for the interface and each module for its conventions."""

from __future__ import annotations

import re

from models.llm.errors import ParseError
from models.llm.families.autoglm import AutoGLMFamily
from models.llm.families.base import (
    Family,
    FamilyReply,
    Geometry,
    ToolCall,
    map_operation,
    smart_resize,
)
from models.llm.families.json_schema import JsonFamily
from models.llm.families.qwen import QwenFamily
from models.llm.families.react import ReactFamily
from models.llm.families.tools import ToolsFamily
from models.llm.families.uitars import UITarsFamily

FAMILY_NAMES: tuple[str, ...] = ("react", "tools", "json", "uitars", "qwen", "autoglm")


def _uitars_variant(model: str) -> str:
    # UI-TARS 1.0 checkpoints are the 2B/7B/72B -SFT and -DPO ones (relative 0-1000);
    # 1.5 and later answer absolute pixels, and a bare "ui-tars" today means those.
    m = model.lower()
    if re.search(r"(?<![\d.])1\.0|-sft|-dpo", m) and "1.5" not in m:
        return "1.0"
    return "1.5"


def _qwen_variant(model: str) -> str:
    m = model.lower()
    return "3" if ("qwen3" in m or "gui-owl" in m or "guiowl" in m) else "2.5"


def auto_family_name(model: str) -> str:
    """The family a model name implies; ``react`` when the name says nothing (GPT, Claude,
    Gemini and most others follow a text prompt)."""
    m = model.lower()
    if "ui-tars" in m or "uitars" in m or "ui_tars" in m:
        return "uitars"
    if "autoglm" in m:
        return "autoglm"
    if "gui-owl" in m or "guiowl" in m or re.search(r"qwen[\d.]*-?vl|qwen3-vl|qwen2\.5-vl", m):
        return "qwen"
    return "react"


def get_family(name: str, model: str = "", *, max_image_side: int | None = None) -> Family:
    """The family ``name`` (``auto``: from ``model``), with the variant ``model`` implies;
    ``max_image_side``: the planner role's ``llm.max_image_side`` (None: the screenshot is
    sent at the screen's size). Unknown names raise ``ValueError`` naming the known ones."""
    n = name.strip().lower()
    if n == "auto":
        n = auto_family_name(model)
    side = max_image_side
    if n in ("uitars-1.5", "uitars-1.0"):
        return UITarsFamily(n.split("-")[1], side)
    if n in ("qwen2.5", "qwen3"):
        return QwenFamily(n[4:], side)
    if n == "react":
        return ReactFamily(side)
    if n == "tools":
        return ToolsFamily(side)
    if n == "json":
        return JsonFamily(side)
    if n == "uitars":
        return UITarsFamily(_uitars_variant(model) if model else "1.5", side)
    if n == "qwen":
        return QwenFamily(_qwen_variant(model) if model else "2.5", side)
    if n == "autoglm":
        return AutoGLMFamily(side)
    raise ValueError(
        f"unknown model family {name!r}: use one of {', '.join(FAMILY_NAMES)}, or auto"
    )


__all__ = [
    "FAMILY_NAMES", "Family", "FamilyReply", "Geometry", "ParseError", "ToolCall",
    "auto_family_name", "get_family", "map_operation", "smart_resize",
]
