"""The OpenAI-compatible client and the model families that speak through it.

``client``: one ``LLMClient`` per host (roles, retries, rate limits, usage);
``react``: the Mobile-Agent ReAct prompts and reply parser.
"""

from models.llm.client import (
    API_KEY_ENV,
    ChatMessage,
    ChatModel,
    ContentPart,
    Detail,
    ImageInput,
    LLMBadResponse,
    LLMClient,
    LLMConfigError,
    LLMError,
    LLMInputError,
    LLMReply,
    LLMRequestError,
    LLMSettings,
    LLMTimeout,
    LLMUnavailable,
    ModelPrice,
    RateLimiter,
    Role,
    RoleFamilies,
    RoleModels,
    encode_jpeg,
)

__all__ = [
    "Role",
    "Detail",
    "API_KEY_ENV",
    "ModelPrice",
    "RoleModels",
    "RoleFamilies",
    "LLMSettings",
    "LLMError",
    "LLMConfigError",
    "LLMInputError",
    "LLMTimeout",
    "LLMUnavailable",
    "LLMRequestError",
    "LLMBadResponse",
    "ImageInput",
    "ContentPart",
    "ChatMessage",
    "LLMReply",
    "ChatModel",
    "RateLimiter",
    "encode_jpeg",
    "LLMClient",
]
