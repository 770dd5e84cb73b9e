"""The LLM layer: an OpenAI-compatible client for the agent's roles, and the prompts and
model families that speak through it.

``settings``: the ``[llm]`` section; ``messages``: what a call sends and gets back;
``errors``: what fails; ``budget``: the token estimate, the cost cap, the rate limiter;
``retry``: what a server's refusal says; ``wire``: the messages as sent; ``client``:
``LLMClient``; ``prompts``: each role's prompt and parser, and the re-ask loop;
``families``: the planner's model families.
"""

from models.llm.budget import CostCap, RateLimiter, estimate_tokens, spending_cap
from models.llm.client import LLMClient
from models.llm.errors import (
    LLMBadResponse,
    LLMConfigError,
    LLMCostCapReached,
    LLMError,
    LLMInputError,
    LLMRequestError,
    LLMTimeout,
    LLMUnavailable,
    ParseError,
    UnparsableReply,
)
from models.llm.messages import ChatMessage, ChatModel, ContentPart, ImageInput, LLMReply, Role
from models.llm.retry import parse_duration_s, parse_retry_after_s
from models.llm.settings import (
    API_KEY_ENV,
    Detail,
    LLMSettings,
    ModelPrice,
    RoleConfig,
    RoleFamilies,
    RoleModels,
    Roles,
    RoleSettings,
    is_reasoning_model,
)

__all__ = [
    "Role",
    "Detail",
    "API_KEY_ENV",
    "ModelPrice",
    "RoleModels",
    "RoleSettings",
    "Roles",
    "RoleConfig",
    "is_reasoning_model",
    "parse_duration_s",
    "parse_retry_after_s",
    "RoleFamilies",
    "LLMSettings",
    "LLMError",
    "LLMConfigError",
    "LLMInputError",
    "LLMTimeout",
    "LLMUnavailable",
    "LLMRequestError",
    "LLMBadResponse",
    "LLMCostCapReached",
    "ParseError",
    "UnparsableReply",
    "CostCap",
    "spending_cap",
    "estimate_tokens",
    "ImageInput",
    "ContentPart",
    "ChatMessage",
    "LLMReply",
    "ChatModel",
    "RateLimiter",
    "LLMClient",
]
