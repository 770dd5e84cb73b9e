"""What a chat call is made of: its role, its messages (text and images), the reply and
what it cost, and ``ChatModel``, the one method prompt code needs from a model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import msgspec

Role = Literal["planner", "chooser", "reflector", "grounder"]
ROLES: tuple[Role, ...] = ("planner", "chooser", "reflector", "grounder")


class ImageInput(msgspec.Struct, frozen=True):
    """An encoded image (PNG, JPEG, ... anything Pillow reads), e.g. a captured frame."""

    data: bytes


ContentPart = str | ImageInput


class ChatMessage(msgspec.Struct, frozen=True):
    role: Literal["system", "user", "assistant"]
    content: tuple[ContentPart, ...]

    @classmethod
    def text(cls, role: Literal["system", "user", "assistant"], text: str) -> ChatMessage:
        return cls(role, (text,))


class LLMReply(msgspec.Struct, frozen=True, kw_only=True):
    """One answered call, with what it cost; the caller emits it as an event."""

    text: str
    role: Role
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  # None when the model is not in the price table
    cached_tokens: int = 0  # of prompt_tokens, served from the provider's prompt cache
    latency_s: float  # from the call to the answer, retries and queueing included
    queued_s: float  # of which waiting for a rate-limit slot
    attempts: int
    finish_reason: str | None = None
    endpoint: str = ""  # host[:port] of the server that answered
    # (function name, JSON arguments) of each ``tool_calls`` entry, for the tools family
    tool_calls: tuple[tuple[str, str], ...] = ()


class ChatModel(Protocol):
    """What prompt code needs from an LLM; ``LLMClient`` is the real one."""

    async def chat(
        self, role: Role, messages: Sequence[ChatMessage], *,
        options: Mapping[str, Any] | None = None,
    ) -> LLMReply: ...

