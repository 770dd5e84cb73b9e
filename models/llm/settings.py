"""The ``[llm]`` settings: the models and families of the roles, per-role overrides with
inheritance (``LLMSettings.role``), retries, limits, prices, and where the API key comes from.

The API key is never shown: the settings' repr hides it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Annotated, Literal
from urllib.parse import urlsplit

import msgspec
from msgspec import Meta

from models.llm.errors import LLMConfigError
from models.llm.messages import ROLES, Role

Detail = Literal["low", "high", "auto"]

API_KEY_ENV = "OPENAI_API_KEY"
# Services that cannot work without a key; local vLLM/Ollama servers need none.
_KEYED_HOSTS = ("api.openai.com",)
NO_KEY = "no-key"


_PositiveS = Annotated[float, Meta(gt=0)]
_NonNegativeS = Annotated[float, Meta(ge=0)]


class ModelPrice(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """USD per million tokens; cached prompt tokens at ``cached_per_mtok`` when set."""

    prompt_per_mtok: _NonNegativeS
    completion_per_mtok: _NonNegativeS
    cached_per_mtok: _NonNegativeS | None = None


class RoleModels(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The model that serves each role; they may all be the same."""

    planner: str = "gpt-4o"
    chooser: str = "gpt-4o"
    reflector: str = "gpt-4o"
    # perception.text_grounding / icon_grounding = "model" | "hybrid" ask it (models/llm/grounder.py)
    grounder: str = "gpt-4o"


class RoleFamilies(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The model family (``models.llm.families``: react, tools, json, uitars, qwen, autoglm,
    or auto from the model name) each role speaks. The planner's prompt, options and parser
    are the family's; the chooser's and the reflector's questions keep their short prompts
    and answer in the family's structured way where it has one (``families/answers.py``)."""

    planner: str = "react"
    chooser: str = "react"
    reflector: str = "react"
    # The grounder's prompt and coordinates: a grounding family's own (uitars, qwen, holo,
    # venus) or the generic point prompt in the family's convention; auto: from its model.
    grounder: str = "auto"


def _default_prices() -> dict[str, ModelPrice]:
    # None by default: list prices change, and a stale table would report wrong money.
    return {}


# "none" in a config: leave the parameter out of the request (TOML has no null).
_Temperature = Annotated[float, Meta(ge=0)] | Literal["none"]
TokenParam = Literal["max_tokens", "max_completion_tokens"]
# "auto": reasoning models (o1, o3, o4-mini, gpt-5, ...) by name; they reject max_tokens
# and temperature (https://platform.openai.com/docs/guides/reasoning).
Reasoning = Literal["auto", "yes", "no"]
_REASONING_NAME = re.compile(r"^(o\d+|gpt-5)([-.:_].*)?$")


def is_reasoning_model(model: str) -> bool:
    """By name: ``o1``, ``o3-mini``, ``o4-mini``, ``gpt-5``, ``gpt-5-mini``, ``openai/o3``."""
    return bool(_REASONING_NAME.match(model.rsplit("/", 1)[-1].lower()))


class RoleSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[llm.roles.<role>]``: what one role does differently; unset keys inherit ``[llm]``.

    A role with its own ``base_url`` gets its own connection and rate limits; its key comes
    from ``api_key_env`` when set, else as the top level's does.
    """

    base_url: str | None = None
    api_key_env: str | None = None
    model: str | None = None
    temperature: _Temperature | None = None
    max_tokens: Annotated[int, Meta(ge=1)] | None = None
    reasoning: Reasoning | None = None
    max_image_side: Annotated[int, Meta(ge=32)] | None = None
    jpeg_quality: Annotated[int, Meta(ge=1, le=95)] | None = None
    detail: Detail | None = None


class Roles(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    planner: RoleSettings = msgspec.field(default_factory=RoleSettings)
    chooser: RoleSettings = msgspec.field(default_factory=RoleSettings)
    reflector: RoleSettings = msgspec.field(default_factory=RoleSettings)
    grounder: RoleSettings = msgspec.field(default_factory=RoleSettings)


@dataclass(frozen=True)
class RoleConfig:
    """One role's settings with inheritance applied: what a request for it is built from."""

    role: Role
    base_url: str
    api_key_env: str
    model: str
    temperature: float | None  # None: not sent
    max_tokens: int | None  # None: not sent
    token_param: TokenParam
    max_image_side: int
    jpeg_quality: int
    detail: Detail | None

    @property
    def endpoint(self) -> str:
        """The server as errors name it: host[:port], never the key."""
        parts = urlsplit(self.base_url)
        return parts.netloc.rsplit("@", 1)[-1] or self.base_url


class LLMSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``[llm]`` section of the config.

    ``api_key`` may be left out: then ``$<api_key_env>`` (``OPENAI_API_KEY``) is used.
    ``detail`` is only sent when set (some servers reject it). ``max_tokens`` and
    ``temperature`` are omitted when None (or ``"none"`` in TOML). ``[llm.roles.*]``
    overrides any of base_url, api_key_env, model, temperature, max_tokens, reasoning,
    max_image_side, jpeg_quality and detail for one role.

    Transient failures (timeouts, connection errors, 408/429/5xx) are retried until
    ``retry_budget_s`` is spent (``max_retries`` caps the attempts too when set); a
    server's ``Retry-After`` / ``x-ratelimit-reset-*`` wins over our backoff cap.
    """

    base_url: str = "https://api.openai.com/v1"
    api_key: str | None = None
    api_key_env: str = API_KEY_ENV
    models: RoleModels = msgspec.field(default_factory=RoleModels)
    roles: Roles = msgspec.field(default_factory=Roles)
    family: RoleFamilies = msgspec.field(default_factory=RoleFamilies)
    max_image_side: Annotated[int, Meta(ge=32)] = 1024
    jpeg_quality: Annotated[int, Meta(ge=1, le=95)] = 85
    detail: Detail | None = None
    timeout_s: _PositiveS = 60.0
    retry_budget_s: _NonNegativeS = 120.0
    max_retries: Annotated[int, Meta(ge=0)] | None = None
    retry_on_timeout: bool = True
    backoff_base_s: _NonNegativeS = 1.0
    backoff_max_s: _NonNegativeS = 20.0
    max_concurrent: Annotated[int, Meta(ge=1)] = 4
    requests_per_minute: Annotated[int, Meta(ge=1)] = 60
    tokens_per_minute: Annotated[int, Meta(ge=0)] = 0  # 0: no token limit
    queue_timeout_s: _PositiveS = 300.0
    max_tokens: Annotated[int, Meta(ge=1)] | None = 1024
    temperature: _Temperature | None = 0.0
    reasoning: Reasoning = "auto"
    # The planner prompt's bound, estimated by models.llm.budget (4 characters a token, 85 +
    # 170 per 512-pixel image tile); the history is shortened to fit. 0: no bound.
    max_prompt_tokens: Annotated[int, Meta(ge=0)] = 16000
    prices: dict[str, ModelPrice] = msgspec.field(default_factory=_default_prices)

    def __post_init__(self) -> None:
        # Checked here too (msgspec checks the Meta bounds only when decoding a config).
        problems = [
            f"{name} must be {rule}"
            for name, ok, rule in (
                ("max_image_side", self.max_image_side >= 32, ">= 32"),
                ("jpeg_quality", 1 <= self.jpeg_quality <= 95, "in 1..95"),
                ("timeout_s", self.timeout_s > 0, "> 0"),
                ("retry_budget_s", self.retry_budget_s >= 0, ">= 0"),
                ("max_retries", self.max_retries is None or self.max_retries >= 0, ">= 0"),
                ("backoff_base_s", self.backoff_base_s >= 0, ">= 0"),
                ("backoff_max_s", self.backoff_max_s >= 0, ">= 0"),
                ("max_concurrent", self.max_concurrent >= 1, ">= 1"),
                ("requests_per_minute", self.requests_per_minute >= 1, ">= 1"),
                ("tokens_per_minute", self.tokens_per_minute >= 0, ">= 0"),
                ("queue_timeout_s", self.queue_timeout_s > 0, "> 0"),
            )
            if not ok
        ]
        urls = [("base_url", self.base_url)] + [
            (f"roles.{r}.base_url", u)
            for r in ROLES
            if (u := getattr(self.roles, r).base_url) is not None
        ]
        for name, url in urls:
            if not urlsplit(url).scheme.startswith("http"):
                problems.append(f"{name} must be an http(s) URL, got {url!r}")
        if problems:
            raise ValueError("invalid [llm] settings: " + "; ".join(problems))

    def __repr__(self) -> str:
        # Never show the key, whatever logs or prints the settings.
        fields = {f: getattr(self, f) for f in self.__struct_fields__}
        fields["api_key"] = "<redacted>" if self.api_key else None
        return "LLMSettings(" + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")"

    __str__ = __repr__

    def model_for(self, role: Role) -> str:
        own = getattr(self.roles, role).model
        return str(own if own is not None else getattr(self.models, role))

    def role(self, role: Role) -> RoleConfig:
        """``role``'s settings, unset keys inherited from the top level."""
        r: RoleSettings = getattr(self.roles, role)
        model = self.model_for(role)
        reasoning = r.reasoning or self.reasoning
        is_reasoning = reasoning == "yes" or (reasoning == "auto" and is_reasoning_model(model))
        temp = r.temperature if r.temperature is not None else self.temperature
        return RoleConfig(
            role=role,
            base_url=r.base_url or self.base_url,
            api_key_env=r.api_key_env or self.api_key_env,
            model=model,
            temperature=None if temp == "none" or temp is None or is_reasoning else float(temp),
            max_tokens=r.max_tokens if r.max_tokens is not None else self.max_tokens,
            token_param="max_completion_tokens" if is_reasoning else "max_tokens",
            max_image_side=r.max_image_side or self.max_image_side,
            jpeg_quality=r.jpeg_quality or self.jpeg_quality,
            detail=r.detail if r.detail is not None else self.detail,
        )

    def resolve_api_key(self, role: Role | None = None) -> str:
        """The key from the config, else from the environment variable named for the role.

        Hosts known to need one raise ``LLMConfigError`` saying how to set it; local
        servers (vLLM, Ollama) get a placeholder, which they ignore.
        """
        env = self.api_key_env
        base_url = self.base_url
        own_env = None
        if role is not None:
            rc = self.role(role)
            env, base_url = rc.api_key_env, rc.base_url
            own_env = getattr(self.roles, role).api_key_env
        # A role with its own variable gets only that key: the top level's may belong to
        # another service, and must not travel to this role's server.
        if own_env:
            key = os.environ.get(own_env) or ""
        else:
            key = self.api_key or os.environ.get(env) or ""
        if key.strip():
            return key.strip()
        host = urlsplit(base_url).hostname or ""
        if host in _KEYED_HOSTS:
            where = f"[llm.roles.{role}]" if own_env else "[llm]"
            raise LLMConfigError(
                f"no API key for {host}: export {env}=... or set api_key in the"
                f" {where} section of the config"
            )
        return NO_KEY
