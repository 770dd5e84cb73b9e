"""Helpers for the LLM tests: settings pointed at the loopback server, test images."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from PIL import Image, ImageDraw

from models.llm import LLMSettings, RoleModels
from tests.fixtures.openai_server import OpenAIServer

SECRET = "sk-test-DO-NOT-LEAK-4f9a8b7c6d5e"


def png_screen(w: int = 1080, h: int = 2400, seed: int = 0) -> bytes:
    """A phone-sized PNG with some structure (not a flat colour)."""
    img = Image.new("RGBA", (w, h), (240, 240, 240, 255))
    d = ImageDraw.Draw(img)
    for i in range(0, h, 120):
        d.rectangle((20, i + 10, w - 20, i + 100), fill=((i * 7 + seed * 40) % 255, 90, 160, 255))
        d.text((40, i + 40), f"row {i // 120} seed {seed}", fill=(0, 0, 0, 255))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def settings_for(openai_server: OpenAIServer) -> Callable[..., LLMSettings]:
    def make(**overrides: Any) -> LLMSettings:
        base: dict[str, Any] = dict(
            base_url=openai_server.base_url,
            api_key=SECRET,
            models=RoleModels(planner="plan-m", chooser="choose-m", reflector="reflect-m"),
            timeout_s=5.0,
            max_retries=3,
            backoff_base_s=0.01,
            backoff_max_s=0.05,
            max_image_side=512,
        )
        base.update(overrides)
        return LLMSettings(**base)

    return make
