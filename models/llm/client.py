"""An OpenAI-compatible chat client with images, for the agent's LLM roles.

It speaks the chat-completions API through ``openai.AsyncOpenAI`` and only uses plain
parameters (model, messages, max_tokens, temperature), so it works against GPT-4o-class
services and against vLLM or Ollama serving Qwen-VL. Around each call it adds what the
fleet needs:

- a per-host ``RateLimiter`` (concurrent calls and requests per minute), created once by
  the host and shared by every device's actors;
- images as JPEG data URLs, downscaled to ``max_image_side`` off the event loop;
- a timeout on every attempt, and retries with jittered exponential backoff on 429, 5xx
  and connection errors, capped, then a typed ``LLMError``;
- per-call accounting (tokens, cost from the price table, latency) in the ``LLMReply``.

The API key is never logged: the settings' repr hides it, and any text taken from a
server's error is scrubbed of it before it reaches an exception or a log line.
"""

from __future__ import annotations

import base64
import contextvars
import datetime as dt
import hashlib
import math
import os
import random
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import Annotated, Any, Literal, Protocol
from urllib.parse import urlsplit

import anyio
import msgspec
import openai
import structlog
from cachetools import LRUCache
from msgspec import Meta

from devices.codecs import fit_jpeg
from runtime.errors import MobagentError

log = structlog.get_logger(__name__)

Role = Literal["planner", "chooser", "reflector"]
Detail = Literal["low", "high", "auto"]

API_KEY_ENV = "OPENAI_API_KEY"
# Services that cannot work without a key; local vLLM/Ollama servers need none.
_KEYED_HOSTS = ("api.openai.com",)
_NO_KEY_PLACEHOLDER = "no-key"


# ---------------------------------------------------------------------------- settings


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


class RoleFamilies(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The model family (``models.llm.families``: react, tools, json, uitars, qwen, autoglm,
    or auto from the model name) each role speaks. The planner's prompt, options and parser
    are the family's; the chooser's and the reflector's questions keep their short prompts
    and answer in the family's structured way where it has one (``families/answers.py``)."""

    planner: str = "react"
    chooser: str = "react"
    reflector: str = "react"


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
    # The planner prompt's bound, estimated by models.llm.tokens (4 characters a token, 85 +
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
            for r in ("planner", "chooser", "reflector")
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
        return _NO_KEY_PLACEHOLDER


# ---------------------------------------------------------------------------- errors


class LLMError(MobagentError):
    """Any failure of an LLM call; the message is safe to log and to publish."""


class LLMConfigError(LLMError):
    """The settings cannot work (no key for a keyed host, ...)."""


class LLMInputError(LLMError):
    """The request itself is bad (an image that does not decode, no messages)."""


class LLMTimeout(LLMError):
    """An attempt, or the wait for a rate-limit slot, ran past its timeout."""


class LLMUnavailable(LLMError):
    """429, 5xx or connection errors outlasted the retries."""

    def __init__(self, message: str, *, attempts: int, last_status: int | None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last_status = last_status


class LLMRequestError(LLMError):
    """The server refused the request for good (400, 401, 404, ...); not retried."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class LLMBadResponse(LLMError):
    """The server answered 200 with something that is not a usable chat completion."""


class LLMCostCapReached(LLMError):
    """A call was not sent: at its worst cost it would pass the ``CostCap`` in force."""


# ---------------------------------------------------------------------------- messages


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


# ---------------------------------------------------------------------------- cost cap


@dataclass
class CostCap:
    """A spending cap for the calls made in one context (the agent's episode:
    ``agent.max_cost_usd``); set it with ``spending_cap``.

    ``LLMClient.chat`` checks it before each call: the call's worst cost (its prompt as
    ``models.llm.tokens`` estimates it for ``llm.max_prompt_tokens``, plus the role's whole
    output-token limit, at the model's ``llm.prices``) added to ``spent_usd`` must stay
    within ``max_usd``, else ``LLMCostCapReached`` and nothing is sent. A model without a
    price costs nothing here, as in ``LLMReply.cost_usd``; a role without an output limit
    counts its prompt only (its output has no bound to count). Each answered call adds its
    real cost and lands in ``answered`` until the caller ``settle``s it (publishes it).
    """

    max_usd: float
    spent_usd: float = 0.0
    answered: list[LLMReply] = field(default_factory=list)

    def settle(self, replies: Sequence[LLMReply]) -> None:
        """``replies`` are accounted for by the caller: no longer ``answered``."""
        self.answered = [a for a in self.answered if not any(a is r for r in replies)]


# The cap of the running episode: a context variable, so that every call the episode makes
# (planner, chooser, judge; re-asks inside the prompt code) is checked without threading
# it through each prompt function, and episodes of other phones on the same shared client
# keep their own.
_COST_CAP: contextvars.ContextVar[CostCap | None] = contextvars.ContextVar(
    "mobagent_llm_cost_cap", default=None)


@contextmanager
def spending_cap(cap: CostCap | None) -> Iterator[CostCap | None]:
    """``cap`` in force for the LLM calls made inside the block (None: no cap)."""
    token = _COST_CAP.set(cap)
    try:
        yield cap
    finally:
        _COST_CAP.reset(token)


# ---------------------------------------------------------------------------- rate limit


class RateLimiter:
    """Per-endpoint limits shared by all devices: concurrent calls, requests per minute and
    (when ``tokens_per_minute`` > 0) tokens per minute.

    The client keeps one per endpoint for the host. Each attempt (a retry included) takes
    one slot and counts as one request; its tokens are counted from an estimate when it
    starts, corrected to the server's count when it answers. A 429 anywhere holds off
    every caller for the backoff time, since the quota is shared.
    """

    def __init__(
        self, max_concurrent: int, requests_per_minute: int, *, tokens_per_minute: int = 0,
        window_s: float = 60.0,
    ) -> None:
        if max_concurrent < 1 or requests_per_minute < 1 or window_s <= 0:
            raise ValueError("max_concurrent and requests_per_minute must be >= 1")
        if tokens_per_minute < 0:
            raise ValueError("tokens_per_minute must be >= 0 (0: no limit)")
        self.max_concurrent = max_concurrent
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.window_s = window_s  # 60 s; shorter only in tests
        self._slots = anyio.Semaphore(max_concurrent)
        self._window_lock = anyio.Lock()
        self._starts: deque[float] = deque()
        self._tokens: deque[list[float]] = deque()  # [start, tokens], mutable: corrected later
        self._resume_at = 0.0
        self.in_flight = 0
        self.peak_in_flight = 0

    @classmethod
    def from_settings(cls, settings: LLMSettings) -> RateLimiter:
        return cls(settings.max_concurrent, settings.requests_per_minute,
                   tokens_per_minute=settings.tokens_per_minute)

    def hold_off(self, seconds: float) -> None:
        self._resume_at = max(self._resume_at, time.monotonic() + seconds)

    def tokens_in_window(self) -> int:
        now = time.monotonic()
        return int(sum(n for t, n in self._tokens if now - t < self.window_s))

    async def _admit(self, tokens: int) -> list[float]:
        # A sliding window of request starts; the lock keeps waiters in FIFO order.
        async with self._window_lock:
            while True:
                now = time.monotonic()
                while self._starts and now - self._starts[0] >= self.window_s:
                    self._starts.popleft()
                while self._tokens and now - self._tokens[0][0] >= self.window_s:
                    self._tokens.popleft()
                wait = self._resume_at - now
                if len(self._starts) >= self.requests_per_minute:
                    wait = max(wait, self._starts[0] + self.window_s - now)
                if self.tokens_per_minute and self._tokens:
                    # Admit once enough of the window has expired; a request larger than
                    # the whole limit goes alone, into an empty window.
                    used = sum(n for _, n in self._tokens)
                    excess = used + tokens - self.tokens_per_minute
                    if excess > 0:
                        for t, n in self._tokens:
                            excess -= n
                            if excess <= 0:
                                wait = max(wait, t + self.window_s - now)
                                break
                        else:  # more than the limit even alone: once the window is empty
                            wait = max(wait, self._tokens[-1][0] + self.window_s - now)
                if wait <= 0:
                    self._starts.append(now)
                    entry = [now, float(tokens)]
                    if self.tokens_per_minute:
                        self._tokens.append(entry)
                    return entry
                await anyio.sleep(wait)

    @asynccontextmanager
    async def slot(
        self, max_wait_s: float | None = None, tokens: int = 0
    ) -> AsyncIterator[Callable[[int], None]]:
        """Hold one call slot for a request of about ``tokens`` tokens; yields a function
        that records the real count. Waiting longer than ``max_wait_s`` raises ``LLMTimeout``."""
        try:
            with anyio.fail_after(max_wait_s):
                await self._slots.acquire()
                try:
                    entry = await self._admit(tokens)
                except BaseException:
                    self._slots.release()
                    raise
        except TimeoutError:
            raise LLMTimeout(f"no rate-limit slot within {max_wait_s:g} s") from None
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

        def settle(actual: int) -> None:
            entry[1] = float(actual)

        try:
            yield settle
        finally:
            self.in_flight -= 1
            self._slots.release()


# ---------------------------------------------------------------------------- client


def _redact(text: str, secret: str) -> str:
    if secret and secret != _NO_KEY_PLACEHOLDER and len(secret) >= 4:
        text = text.replace(secret, "<redacted>")
    return text


def _error_text(exc: openai.APIStatusError, secret: str) -> str:
    body = exc.body
    msg: Any = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        msg = inner.get("message") if isinstance(inner, dict) else inner
    if msg is None:
        msg = exc.message
    return _redact(str(msg), secret)[:300]


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_S = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration_s(raw: str) -> float | None:
    """OpenAI's ``x-ratelimit-reset-*`` values (``1s``, ``6m0s``, ``20ms``, ``1h2m3.5s``), or
    plain seconds; None when unreadable."""
    raw = raw.strip()
    try:
        value = float(raw)
    except ValueError:
        parts = _DURATION_PART.findall(raw)
        if not parts or "".join(n + u for n, u in parts) != raw:
            return None
        value = sum(float(n) * _UNIT_S[u] for n, u in parts)
    return value if math.isfinite(value) and value >= 0 else None


def parse_retry_after_s(raw: str, now: float | None = None) -> float | None:
    """``Retry-After`` as delay-seconds or as an HTTP date (RFC 9110 §10.2.3)."""
    try:
        value = float(raw)
    except ValueError:
        try:
            when = parsedate_to_datetime(raw.strip())
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # an HTTP date is GMT
            when = when.replace(tzinfo=dt.UTC)
        value = when.timestamp() - (time.time() if now is None else now)
        return max(0.0, value) if math.isfinite(value) else None
    return value if math.isfinite(value) and value >= 0 else None


def server_wait_s(headers: Any) -> float | None:
    """How long the server asks us to wait: ``retry-after-ms``, ``Retry-After``, else the
    ``x-ratelimit-reset-*`` of whichever limit is spent (both when neither says)."""
    if headers is None:
        return None
    if (raw := headers.get("retry-after-ms")) is not None:
        ms = parse_duration_s(raw)
        if ms is not None:
            return ms / 1000.0
    if (raw := headers.get("retry-after")) is not None:
        ra = parse_retry_after_s(raw)
        if ra is not None:
            return ra
    waits: list[float] = []
    for kind in ("requests", "tokens"):
        reset = headers.get(f"x-ratelimit-reset-{kind}")
        remaining = headers.get(f"x-ratelimit-remaining-{kind}")
        if reset is None or (remaining is not None and remaining.strip() not in ("0", "0.0")):
            continue
        value = parse_duration_s(reset)
        if value is not None:
            waits.append(value)
    return max(waits) if waits else None


def _retry_after_s(exc: openai.APIStatusError) -> float | None:
    return server_wait_s(exc.response.headers if exc.response is not None else None)


_RETRIED_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


_REFUSALS = ("unsupported", "not supported", "not yet supported", "does not support",
             "unrecognized", "not allowed", "extra inputs", "unknown parameter",
             "invalid parameter")
# What a request can do without: it is the same call, only less bounded or less tuned.
# Reasoning models refuse max_tokens and temperature; some servers top_p, or the newer
# max_completion_tokens. ``tool_choice``: some vLLM and Ollama versions refuse "required"
# (vLLM: "The tool_choice option required is not yet supported but on the roadmap.",
# github.com/vllm-project/vllm/issues/11700); without it the server picks "auto", the same
# functions are offered, and a reply that calls none is re-asked by the family's parser.
# Anything else a server refuses (tools, response_format, images) changes what the call
# means, and fails instead.
_DROPPABLE = ("max_tokens", "max_completion_tokens", "temperature", "top_p", "tool_choice")
# OpenAI's codes for "this model takes no such parameter / not this value of it".
_UNSUPPORTED_CODES = frozenset({"unsupported_parameter", "unsupported_value"})


def _error_fields(exc: openai.APIStatusError) -> tuple[str | None, str | None, str]:
    """(param, code, message) of an error body: OpenAI's ``{"error": {"message", "type",
    "param", "code"}}`` (the client hands us the inner object), or vLLM's flat ``{"object":
    "error", "message", "param": null, "code": 400}``; a numeric code is not a code name."""
    body = exc.body
    inner = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(inner, dict):
        return None, None, f"{exc.message} {body or ''}"
    param, code, message = inner.get("param"), inner.get("code"), inner.get("message")
    return (param if isinstance(param, str) and param else None,
            code if isinstance(code, str) and code else None,
            message if isinstance(message, str) else f"{exc.message} {body}")


def _rejected_param(exc: openai.APIStatusError, params: dict[str, Any]) -> str | None:
    """The sent parameter a 400 refuses, to retry without it; None: not a refusal of one.

    The structured error decides when there is one: ``error.param`` names a parameter we
    sent and may drop, refused by ``error.code`` (``unsupported_parameter`` /
    ``unsupported_value``) or by its message. A ``param`` naming anything else (messages,
    tools) is never dropped, whatever the text says. Without a ``param`` (vLLM, Ollama,
    proxies put it in ``message``), the message must refuse one by name: "Unsupported
    parameter: 'max_tokens' ...". A 400 that only mentions one (a limit too large) is not
    a refusal."""
    named, code, message = _error_fields(exc)
    text = message.lower()
    refused = code in _UNSUPPORTED_CODES or any(r in text for r in _REFUSALS)
    if not refused:
        return None
    if named is not None:
        return named if named in _DROPPABLE and named in params else None
    for name in _DROPPABLE:
        # \b keeps max_completion_tokens from matching max_tokens.
        if name in params and re.search(rf"\b{name}\b", text):
            return name
    return None


def estimate_tokens(wire: list[dict[str, Any]], image_tokens: int = 765) -> int:
    """A rough prompt size for the token limiter, before the server counts it: ~4 characters
    a token, and a high-detail 1024-px image's 765 tokens (GPT-4o's tiling) per image."""
    chars, images = 0, 0
    for m in wire:
        content = m.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for p in content:
                if p.get("type") == "text":
                    chars += len(p.get("text", ""))
                else:
                    images += 1
    return chars // 4 + images * image_tokens + 1


class LLMClient:
    """The agent's LLM: ``async with LLMClient(settings, limiter) as llm: await llm.chat(...)``.

    One ``openai.AsyncOpenAI`` per distinct (base_url, key) and one ``RateLimiter`` per
    endpoint, shared by every device of the host. ``limiter`` is the top-level endpoint's.
    """

    def __init__(self, settings: LLMSettings, limiter: RateLimiter | None = None) -> None:
        self.settings = settings
        self.limiter = limiter if limiter is not None else RateLimiter.from_settings(settings)
        self._roles: dict[str, RoleConfig] = {}
        self._keys: dict[str, str] = {}
        self._clients: dict[tuple[str, str], openai.AsyncOpenAI] = {}
        self._limiters: dict[str, RateLimiter] = {settings.base_url: self.limiter}
        # Parameters a (base_url, model) answered 400 to: never sent to it again.
        self._rejected: dict[tuple[str, str], set[str]] = {}
        roles: tuple[Role, ...] = ("planner", "chooser", "reflector")
        for role in roles:
            rc = settings.role(role)
            key = settings.resolve_api_key(role)
            self._roles[role], self._keys[role] = rc, key
            if (rc.base_url, key) not in self._clients:
                # Our own retry loop replaces the client's, so that it shares the limiter.
                self._clients[(rc.base_url, key)] = openai.AsyncOpenAI(
                    base_url=rc.base_url, api_key=key, timeout=settings.timeout_s, max_retries=0,
                )
            if rc.base_url not in self._limiters:
                self._limiters[rc.base_url] = RateLimiter.from_settings(settings)
        self._key = self._keys["planner"]
        self._secrets = tuple({k for k in self._keys.values()})
        # Recent frames recur in the planner's history: encode each once (by content).
        self._images: LRUCache[bytes, str] = LRUCache(64)

    def __repr__(self) -> str:
        return f"LLMClient(base_url={self.settings.base_url!r})"

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        with anyio.move_on_after(5, shield=True):
            for client in self._clients.values():
                await client.close()

    def role_config(self, role: Role) -> RoleConfig:
        return self._roles[role]

    def limiter_for(self, role: Role) -> RateLimiter:
        return self._limiters[self._roles[role].base_url]

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = _redact(text, secret)
        return text

    def cost_usd(
        self, model: str, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0
    ) -> float | None:
        price = self.settings.prices.get(model)
        if price is None:
            return None
        cached = min(cached_tokens, prompt_tokens) if price.cached_per_mtok is not None else 0
        cached_rate = price.cached_per_mtok or 0.0
        return (
            (prompt_tokens - cached) * price.prompt_per_mtok + cached * cached_rate
            + completion_tokens * price.completion_per_mtok
        ) / 1e6

    def worst_cost_usd(
        self, rc: RoleConfig, messages: Sequence[ChatMessage],
        options: Mapping[str, Any] | None = None,
    ) -> tuple[float | None, int]:
        """The most a call of ``rc`` with ``messages`` can cost, and its prompt estimate:
        ``models.llm.tokens`` (as for ``llm.max_prompt_tokens``; a family's tool or JSON
        schema counted as text) plus the whole output-token limit. None: no price."""
        # Imported here: tokens.py imports this module's message types.
        from models.llm.tokens import estimate_tokens as prompt_estimate

        prompt = prompt_estimate(messages, max_image_side=rc.max_image_side)
        if options:
            prompt += -(-len(msgspec.json.encode(options)) // 4)
        return self.cost_usd(rc.model, prompt, int(rc.max_tokens or 0)), prompt

    def _check_cap(
        self, cap: CostCap, rc: RoleConfig, messages: Sequence[ChatMessage],
        options: Mapping[str, Any] | None,
    ) -> None:
        worst, prompt = self.worst_cost_usd(rc, messages, options)
        if worst is not None and cap.spent_usd + worst > cap.max_usd:
            raise LLMCostCapReached(
                f"cost cap of ${cap.max_usd:g} would be passed: the next {rc.role} call "
                f"({rc.model}) may cost up to ${worst:.4f} (~{prompt} prompt + "
                f"{int(rc.max_tokens or 0)} output tokens) and the LLM calls cost "
                f"${cap.spent_usd:.4f} so far; not sent"
            )

    async def image_url(
        self, image: ImageInput, max_side: int | None = None, quality: int | None = None
    ) -> str:
        """The image as a JPEG data URL at the given (else top-level) size, cached by content."""
        s = self.settings
        side = max_side or s.max_image_side
        q = quality or s.jpeg_quality
        key = hashlib.blake2b(image.data, digest_size=16).digest() + f":{side}:{q}".encode()
        url = self._images.get(key)
        if url is None:
            # The project's one JPEG encoder; a JPEG that fits (capture's view) passes through.
            try:
                jpeg = await anyio.to_thread.run_sync(fit_jpeg, image.data, side, q)
            except ValueError as exc:
                raise LLMInputError(
                    f"image does not decode ({len(image.data)} bytes): {exc}") from exc
            url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
            self._images[key] = url
        return url

    async def _wire_messages(
        self, messages: Sequence[ChatMessage], rc: RoleConfig | None = None
    ) -> list[dict[str, Any]]:
        rc = rc or self._roles["planner"]
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

    def _backoff_s(self, attempt: int, retry_after: float | None) -> float:
        s = self.settings
        # Full jitter: spreads the fleet's retries instead of synchronising them.
        delay = random.uniform(0, min(s.backoff_max_s, s.backoff_base_s * 2**attempt))
        if retry_after is not None:
            # The server knows when its window reopens: no cap here, only the budget's.
            delay = max(delay, retry_after)
        return delay

    def _params(
        self, rc: RoleConfig, wire: list[dict[str, Any]],
        options: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The request: the role's parameters and the family's ``options``, less what this
        endpoint's model refused before (``_DROPPABLE``)."""
        params: dict[str, Any] = {"model": rc.model, "messages": wire}
        rejected = self._rejected.get((rc.base_url, rc.model), set())
        token_param: str = rc.token_param
        if token_param in rejected:  # the other name of the output limit, unless refused too
            token_param = "max_completion_tokens" if token_param == "max_tokens" else "max_tokens"
        if rc.max_tokens is not None and token_param not in rejected:
            params[token_param] = rc.max_tokens
        if rc.temperature is not None and "temperature" not in rejected:
            params["temperature"] = rc.temperature
        if options:
            params.update((k, v) for k, v in options.items() if k not in rejected)
        return params

    async def chat(
        self, role: Role, messages: Sequence[ChatMessage], *,
        options: Mapping[str, Any] | None = None,
    ) -> LLMReply:
        """One chat completion for ``role``; raises ``LLMError`` subclasses only.

        Transient failures are retried until ``retry_budget_s`` is spent (counted from the
        first attempt; an attempt that starts inside it runs to its own timeout); a 400
        refusing ``max_tokens``, ``max_completion_tokens``, ``temperature``, ``top_p`` or
        ``tool_choice`` (``error.param`` when the server names it, else its message) is retried once
        without it, and the endpoint's model is remembered not to take it; any other 400
        fails at once. ``options``: extra request
        parameters a model family needs (``tools``, ``tool_choice``, ``response_format``).
        Under a ``spending_cap``, a call whose worst cost would pass it raises
        ``LLMCostCapReached`` unsent.
        """
        if not messages:
            raise LLMInputError("no messages to send")
        s = self.settings
        rc = self._roles[role]
        model, where = rc.model, rc.endpoint
        client = self._clients[(rc.base_url, self._keys[role])]
        limiter = self._limiters[rc.base_url]
        cap = _COST_CAP.get()
        if cap is not None:  # before any work: a call past the cap is never sent
            self._check_cap(cap, rc, messages, options)
        wire = await self._wire_messages(messages, rc)
        params = self._params(rc, wire, options)
        estimate = estimate_tokens(wire) + int(rc.max_tokens or 0)

        t0 = time.monotonic()
        deadline = t0 + s.retry_budget_s
        queued = 0.0
        last_status: int | None = None
        last_problem = ""
        timed_out = False
        attempts = 0
        attempt = 0
        while True:
            attempts = attempt + 1
            retry_after: float | None = None
            q0 = time.monotonic()
            try:
                async with limiter.slot(max_wait_s=s.queue_timeout_s, tokens=estimate) as settle:
                    queued += time.monotonic() - q0
                    # The client's own timeout covers the socket; this one the whole attempt.
                    with anyio.fail_after(s.timeout_s + 1.0):
                        completion = await client.chat.completions.create(**params)
                    settle(_total_tokens(completion, estimate))
            except (TimeoutError, openai.APITimeoutError):
                last_status, timed_out = None, True
                last_problem = f"no answer within {s.timeout_s:g} s"
                if not s.retry_on_timeout:
                    raise LLMTimeout(f"{role} ({model}) at {where}: {last_problem}") from None
            except openai.APIConnectionError as exc:
                last_status, timed_out = None, False
                last_problem = f"connection error: {self._scrub(str(exc))}"
            except openai.APIStatusError as exc:
                status = exc.status_code
                last_status, timed_out = status, False
                text = self._scrub(_error_text(exc, self._keys[role]))
                param = _rejected_param(exc, params) if status == 400 else None
                if param is not None:
                    # A reasoning model refusing max_tokens / temperature, a server refusing
                    # tool_choice: once without it (max_tokens becomes max_completion_tokens
                    # first).
                    self._rejected.setdefault((rc.base_url, model), set()).add(param)
                    retry = self._params(rc, wire, options)
                    if retry != params:
                        log.warning("llm_param_rejected", role=role, model=model,
                                    endpoint=where, param=param)
                        params = retry
                        attempt += 1
                        continue
                if status in _RETRIED_STATUS or status >= 500:
                    last_problem = f"HTTP {status}: {text}"
                    retry_after = _retry_after_s(exc)
                else:
                    hint = f" (check {rc.api_key_env})" if status in (401, 403) else ""
                    named, code, _ = _error_fields(exc)
                    fields = ", ".join(f"{k} {v}" for k, v in (("param", named), ("code", code))
                                       if v is not None)
                    raise LLMRequestError(
                        f"{role} ({model}) at {where}: HTTP {status}{hint}: {text}"
                        + (f" ({self._scrub(fields)})" if fields else ""), status=status
                    ) from None
            except (openai.APIResponseValidationError, ValueError) as exc:
                # ValueError: a 200 whose body is not JSON.
                raise LLMBadResponse(
                    f"{role} ({model}): unreadable response: {self._scrub(str(exc))[:300]}"
                ) from None
            except openai.OpenAIError as exc:
                # Anything else the client raises still leaves as one of ours.
                raise LLMError(
                    f"{role} ({model}): {type(exc).__name__}: {self._scrub(str(exc))[:300]}"
                ) from None
            else:
                reply = self._reply(rc, completion, t0, queued, attempts)
                if cap is not None:
                    cap.spent_usd += reply.cost_usd or 0.0
                    cap.answered.append(reply)
                return reply

            delay = self._backoff_s(attempt, retry_after)
            out_of_retries = s.max_retries is not None and attempt >= s.max_retries
            if out_of_retries or time.monotonic() + delay > deadline:
                break
            if last_status == 429:
                limiter.hold_off(delay)
            log.warning(
                "llm_retry", role=role, model=model, endpoint=where, attempt=attempts,
                problem=last_problem, delay_s=round(delay, 3),
            )
            await anyio.sleep(delay)
            attempt += 1
        spent = time.monotonic() - t0
        message = (
            f"{role} ({model}) at {where}: gave up after {attempts} attempts in {spent:.1f} s"
            f" (retry budget {s.retry_budget_s:g} s); last: {last_problem}"
        )
        if timed_out:
            raise LLMTimeout(message)
        raise LLMUnavailable(message, attempts=attempts, last_status=last_status)

    def _reply(
        self, rc: RoleConfig, completion: Any, t0: float, queued: float, attempts: int
    ) -> LLMReply:
        role, model = rc.role, rc.model
        choices = getattr(completion, "choices", None)
        if not choices:
            raise LLMBadResponse(f"{role} ({model}): the response has no choices")
        message = getattr(choices[0], "message", None)
        text = getattr(message, "content", None)
        tool_calls = tuple(
            (str(getattr(c.function, "name", "")), str(getattr(c.function, "arguments", "") or ""))
            for c in (getattr(message, "tool_calls", None) or ())
            if getattr(c, "function", None) is not None
        )
        if text is None and tool_calls:  # a function call and no text: the tools family
            text = ""
        if not isinstance(text, str):
            refusal = getattr(message, "refusal", None)
            why = f"refused: {refusal}" if refusal else "no text content"
            raise LLMBadResponse(f"{role} ({model}): {why}")
        usage = getattr(completion, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        details = getattr(usage, "prompt_tokens_details", None)
        cached_tokens = int(getattr(details, "cached_tokens", 0) or 0)
        latency = time.monotonic() - t0
        reply = LLMReply(
            text=text,
            role=role,
            model=model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=self.cost_usd(model, prompt_tokens, completion_tokens, cached_tokens),
            cached_tokens=cached_tokens,
            latency_s=latency,
            queued_s=queued,
            attempts=attempts,
            finish_reason=getattr(choices[0], "finish_reason", None),
            endpoint=rc.endpoint,
            tool_calls=tool_calls,
        )
        log.debug(
            "llm_call", role=role, model=model, prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens, latency_s=round(latency, 3), attempts=attempts,
        )
        return reply


def _total_tokens(completion: Any, estimate: int) -> int:
    usage = getattr(completion, "usage", None)
    total = getattr(usage, "total_tokens", None)
    return int(total) if isinstance(total, int) and total > 0 else estimate
