"""A prompt's size in tokens, estimated without a tokenizer (``llm.max_prompt_tokens``).

The estimate is deliberately simple and documented, so the bound on a prompt is the same for
every model:

- text: one token per 4 characters (rounded up), about what BPE tokenizers give for English
  and markup; a message costs 4 tokens of framing besides its content;
- an image: OpenAI's tile rule at ``detail=high`` on the image as it will be sent (its
  longer side scaled down to ``max_image_side``): 85 + 170 per 512x512 tile. Servers that
  count images differently (Qwen-VL's 28x28 patches) land within a small factor of it.

It errs towards counting more, never towards a prompt the server refuses.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

from PIL import Image

from models.llm.client import ChatMessage, ImageInput

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4
IMAGE_BASE = 85
IMAGE_PER_TILE = 170
TILE = 512


def text_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def image_tokens(data: bytes, max_image_side: int = 1024) -> int:
    """85 + 170 per 512-pixel tile of the image as sent; an unreadable image counts as one
    full-size image (the server will refuse it anyway)."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            w, h = im.size
    except Exception:
        w = h = max_image_side
    side = max(w, h, 1)
    scale = min(1.0, max_image_side / side)
    tiles = math.ceil(w * scale / TILE) * math.ceil(h * scale / TILE)
    return IMAGE_BASE + IMAGE_PER_TILE * tiles


def estimate_tokens(messages: Sequence[ChatMessage], *, max_image_side: int = 1024) -> int:
    """The prompt tokens ``messages`` will cost, by the rule above."""
    total = 0
    for m in messages:
        total += MESSAGE_OVERHEAD
        for part in m.content:
            if isinstance(part, ImageInput):
                total += image_tokens(part.data, max_image_side)
            else:
                total += text_tokens(part)
    return total
