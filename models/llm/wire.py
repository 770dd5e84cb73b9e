"""Messages as the chat-completions API takes them: text as strings, images as JPEG data
URLs at the role's ``max_image_side`` and ``jpeg_quality`` (with its ``detail`` when set),
each image encoded once while it recurs (recent frames recur in the planner's history)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from typing import Any

import anyio
from cachetools import LRUCache

from devices.codecs import fit_jpeg
from models.llm.errors import LLMInputError
from models.llm.messages import ChatMessage, ImageInput
from models.llm.settings import RoleConfig


class WireEncoder:
    """Encodes a call's messages for the wire; its images are cached by content."""

    def __init__(self, cache_size: int = 64) -> None:
        self._images: LRUCache[bytes, str] = LRUCache(cache_size)

    async def image_url(self, image: ImageInput, max_side: int, quality: int) -> str:
        """The image as a JPEG data URL fitted within ``max_side``, cached by content."""
        key = (hashlib.blake2b(image.data, digest_size=16).digest()
               + f":{max_side}:{quality}".encode())
        url = self._images.get(key)
        if url is None:
            # The project's one JPEG encoder; a JPEG that fits (capture's view) passes through.
            try:
                jpeg = await anyio.to_thread.run_sync(fit_jpeg, image.data, max_side, quality)
            except ValueError as exc:
                raise LLMInputError(
                    f"image does not decode ({len(image.data)} bytes): {exc}") from exc
            url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
            self._images[key] = url
        return url

    async def messages(
        self, messages: Sequence[ChatMessage], rc: RoleConfig
    ) -> list[dict[str, Any]]:
        """``messages`` as the request's ``messages``, images at ``rc``'s size."""
        wire: list[dict[str, Any]] = []
        for m in messages:
            if all(isinstance(p, str) for p in m.content):
                # Plain string content: the form every server accepts, system role included.
                wire.append({"role": m.role, "content": "".join(str(p) for p in m.content)})
                continue
            parts: list[dict[str, Any]] = []
            for p in m.content:
                if isinstance(p, str):
                    parts.append({"type": "text", "text": p})
                else:
                    url = await self.image_url(p, rc.max_image_side, rc.jpeg_quality)
                    image_url: dict[str, Any] = {"url": url}
                    if rc.detail is not None:
                        image_url["detail"] = rc.detail
                    parts.append({"type": "image_url", "image_url": image_url})
            wire.append({"role": m.role, "content": parts})
        return wire
