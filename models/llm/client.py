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
import hashlib
import io
import math
import os
import random
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Annotated, Any, Literal, Protocol
from urllib.parse import urlsplit

import anyio
import msgspec
import openai
import structlog
from msgspec import Meta
from PIL import Image as PILImage

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
    """USD per million tokens."""

    prompt_per_mtok: _NonNegativeS
    completion_per_mtok: _NonNegativeS


class RoleModels(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The model that serves each role; they may all be the same."""

    planner: str = "gpt-4o"
    chooser: str = "gpt-4o"
    reflector: str = "gpt-4o"


class RoleFamilies(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The model family (``models.llm.families``: react, tools, json, uitars, qwen, autoglm,
    or auto from the model name) each role speaks. Today only the planner's prompt depends
    on it; the chooser and the completion check keep their own short formats."""

    planner: str = "react"
    chooser: str = "react"
    reflector: str = "react"


def _default_prices() -> dict[str, ModelPrice]:
    # Public list prices as of 2024-08; the config's table replaces this one.
    return {
        "gpt-4o": ModelPrice(prompt_per_mtok=2.5, completion_per_mtok=10.0),
        "gpt-4o-mini": ModelPrice(prompt_per_mtok=0.15, completion_per_mtok=0.6),
    }


class LLMSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``[llm]`` section of the config.

    ``api_key`` may be left out: then ``$OPENAI_API_KEY`` is used. ``detail`` is only sent
    when set (some servers reject it). ``max_tokens``/``temperature`` are omitted when None.
    """

    base_url: str = "https://api.openai.com/v1"
    api_key: str | None = None
    models: RoleModels = msgspec.field(default_factory=RoleModels)
    family: RoleFamilies = msgspec.field(default_factory=RoleFamilies)
    max_image_side: Annotated[int, Meta(ge=32)] = 1024
    jpeg_quality: Annotated[int, Meta(ge=1, le=95)] = 85
    detail: Detail | None = None
    timeout_s: _PositiveS = 60.0
    max_retries: Annotated[int, Meta(ge=0)] = 3
    retry_on_timeout: bool = False
    backoff_base_s: _NonNegativeS = 1.0
    backoff_max_s: _NonNegativeS = 20.0
    max_concurrent: Annotated[int, Meta(ge=1)] = 4
    requests_per_minute: Annotated[int, Meta(ge=1)] = 60
    queue_timeout_s: _PositiveS = 300.0
    max_tokens: Annotated[int, Meta(ge=1)] | None = 1024
    temperature: Annotated[float, Meta(ge=0)] | None = 0.0
    prices: dict[str, ModelPrice] = msgspec.field(default_factory=_default_prices)

    def __post_init__(self) -> None:
        # Checked here too (msgspec checks the Meta bounds only when decoding a config).
        problems = [
            f"{name} must be {rule}"
            for name, ok, rule in (
                ("max_image_side", self.max_image_side >= 32, ">= 32"),
                ("jpeg_quality", 1 <= self.jpeg_quality <= 95, "in 1..95"),
                ("timeout_s", self.timeout_s > 0, "> 0"),
                ("max_retries", self.max_retries >= 0, ">= 0"),
                ("backoff_base_s", self.backoff_base_s >= 0, ">= 0"),
                ("backoff_max_s", self.backoff_max_s >= 0, ">= 0"),
                ("max_concurrent", self.max_concurrent >= 1, ">= 1"),
                ("requests_per_minute", self.requests_per_minute >= 1, ">= 1"),
                ("queue_timeout_s", self.queue_timeout_s > 0, "> 0"),
            )
            if not ok
        ]
        if not urlsplit(self.base_url).scheme.startswith("http"):
            problems.append(f"base_url must be an http(s) URL, got {self.base_url!r}")
        if problems:
            raise ValueError("invalid [llm] settings: " + "; ".join(problems))

    def __repr__(self) -> str:
        # Never show the key, whatever logs or prints the settings.
        fields = {f: getattr(self, f) for f in self.__struct_fields__}
        fields["api_key"] = "<redacted>" if self.api_key else None
        return "LLMSettings(" + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")"

    __str__ = __repr__

    def model_for(self, role: Role) -> str:
        return str(getattr(self.models, role))

    def resolve_api_key(self) -> str:
        """The key from the config, else from ``$OPENAI_API_KEY``.

        Hosts known to need one raise ``LLMConfigError`` saying how to set it; local
        servers (vLLM, Ollama) get a placeholder, which they ignore.
        """
        key = self.api_key or os.environ.get(API_KEY_ENV) or ""
        if key.strip():
            return key.strip()
        host = urlsplit(self.base_url).hostname or ""
        if host in _KEYED_HOSTS:
            raise LLMConfigError(
                f"no API key for {host}: export {API_KEY_ENV}=... or set api_key in the"
                " [llm] section of the config"
            )
        return _NO_KEY_PLACEHOLDER


# ---------------------------------------------------------------------------- errors


class LLMError(Exception):
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
    latency_s: float  # from the call to the answer, retries and queueing included
    queued_s: float  # of which waiting for a rate-limit slot
    attempts: int
    finish_reason: str | None = None
    # (function name, JSON arguments) of each ``tool_calls`` entry, for the tools family
    tool_calls: tuple[tuple[str, str], ...] = ()


class ChatModel(Protocol):
    """What prompt code needs from an LLM; ``LLMClient`` is the real one."""

    async def chat(
        self, role: Role, messages: Sequence[ChatMessage], *,
        options: Mapping[str, Any] | None = None,
    ) -> LLMReply: ...


# ---------------------------------------------------------------------------- rate limit


class RateLimiter:
    """Per-host limits shared by all devices: concurrent calls and requests per minute.

    Create one per host process and pass it to every ``LLMClient``. Each attempt (a retry
    included) takes one slot and counts as one request. A 429 anywhere holds off every
    caller for the backoff time, since the quota is shared.
    """

    def __init__(
        self, max_concurrent: int, requests_per_minute: int, *, window_s: float = 60.0
    ) -> None:
        if max_concurrent < 1 or requests_per_minute < 1 or window_s <= 0:
            raise ValueError("max_concurrent and requests_per_minute must be >= 1")
        self.max_concurrent = max_concurrent
        self.requests_per_minute = requests_per_minute
        self.window_s = window_s  # 60 s; shorter only in tests
        self._slots = anyio.Semaphore(max_concurrent)
        self._window_lock = anyio.Lock()
        self._starts: deque[float] = deque()
        self._resume_at = 0.0
        self.in_flight = 0
        self.peak_in_flight = 0

    @classmethod
    def from_settings(cls, settings: LLMSettings) -> RateLimiter:
        return cls(settings.max_concurrent, settings.requests_per_minute)

    def hold_off(self, seconds: float) -> None:
        self._resume_at = max(self._resume_at, time.monotonic() + seconds)

    async def _admit(self) -> None:
        # A sliding window of request starts; the lock keeps waiters in FIFO order.
        async with self._window_lock:
            while True:
                now = time.monotonic()
                while self._starts and now - self._starts[0] >= self.window_s:
                    self._starts.popleft()
                wait = self._resume_at - now
                if len(self._starts) >= self.requests_per_minute:
                    wait = max(wait, self._starts[0] + self.window_s - now)
                if wait <= 0:
                    self._starts.append(now)
                    return
                await anyio.sleep(wait)

    @asynccontextmanager
    async def slot(self, max_wait_s: float | None = None) -> AsyncIterator[None]:
        """Hold one call slot; waiting longer than ``max_wait_s`` raises ``LLMTimeout``."""
        try:
            with anyio.fail_after(max_wait_s):
                await self._slots.acquire()
                try:
                    await self._admit()
                except BaseException:
                    self._slots.release()
                    raise
        except TimeoutError:
            raise LLMTimeout(f"no rate-limit slot within {max_wait_s:g} s") from None
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            yield
        finally:
            self.in_flight -= 1
            self._slots.release()


# ---------------------------------------------------------------------------- images


def encode_jpeg(data: bytes, max_side: int, quality: int = 85) -> bytes:
    """``data`` as JPEG with its longer side at most ``max_side``; blocking, run off the loop.

    A JPEG that already fits is passed through untouched.
    """
    try:
        with PILImage.open(io.BytesIO(data)) as img:
            if img.format == "JPEG" and max(img.size) <= max_side:
                return data
            img.load()
            out = img.convert("RGB") if img.mode != "RGB" else img.copy()
    except (OSError, ValueError, PILImage.DecompressionBombError) as exc:
        raise LLMInputError(f"image does not decode ({len(data)} bytes): {exc}") from exc
    if max(out.size) > max_side:
        # thumbnail keeps the aspect ratio and only ever shrinks.
        out.thumbnail((max_side, max_side), PILImage.Resampling.LANCZOS)
    buf = io.BytesIO()
    out.save(buf, format="JPEG", quality=quality, optimize=True)
    return buf.getvalue()


class _DataUrlCache:
    """Recent frames recur in the planner's history: encode each once."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._items: OrderedDict[bytes, str] = OrderedDict()

    def get(self, key: bytes) -> str | None:
        url = self._items.get(key)
        if url is not None:
            self._items.move_to_end(key)
        return url

    def put(self, key: bytes, url: str) -> None:
        self._items[key] = url
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


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


def _retry_after_s(exc: openai.APIStatusError) -> float | None:
    raw = exc.response.headers.get("retry-after") if exc.response is not None else None
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None  # HTTP-date form: fall back to our own backoff
    return value if math.isfinite(value) and value >= 0 else None


class LLMClient:
    """The agent's LLM: ``async with LLMClient(settings, limiter) as llm: await llm.chat(...)``."""

    def __init__(self, settings: LLMSettings, limiter: RateLimiter | None = None) -> None:
        self.settings = settings
        self.limiter = limiter if limiter is not None else RateLimiter.from_settings(settings)
        self._key = settings.resolve_api_key()
        # Our own retry loop replaces the client's, so that it shares the host's limiter.
        self._client = openai.AsyncOpenAI(
            base_url=settings.base_url,
            api_key=self._key,
            timeout=settings.timeout_s,
            max_retries=0,
        )
        self._images = _DataUrlCache()

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
            await self._client.close()

    def cost_usd(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        price = self.settings.prices.get(model)
        if price is None:
            return None
        return (
            prompt_tokens * price.prompt_per_mtok + completion_tokens * price.completion_per_mtok
        ) / 1e6

    async def image_url(self, image: ImageInput) -> str:
        """The image as a JPEG data URL at the configured size (cached by content)."""
        s = self.settings
        key = hashlib.blake2b(image.data, digest_size=16).digest()
        url = self._images.get(key)
        if url is None:
            jpeg = await anyio.to_thread.run_sync(
                encode_jpeg, image.data, s.max_image_side, s.jpeg_quality
            )
            url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
            self._images.put(key, url)
        return url

    async def _wire_messages(self, messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
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
                    image_url: dict[str, Any] = {"url": await self.image_url(p)}
                    if self.settings.detail is not None:
                        image_url["detail"] = self.settings.detail
                    parts.append({"type": "image_url", "image_url": image_url})
            wire.append({"role": m.role, "content": parts})
        return wire

    def _backoff_s(self, attempt: int, retry_after: float | None) -> float:
        s = self.settings
        # Full jitter: spreads the fleet's retries instead of synchronising them.
        delay = random.uniform(0, min(s.backoff_max_s, s.backoff_base_s * 2**attempt))
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, s.backoff_max_s)

    async def chat(
        self, role: Role, messages: Sequence[ChatMessage], *,
        options: Mapping[str, Any] | None = None,
    ) -> LLMReply:
        """One chat completion for ``role``; raises ``LLMError`` subclasses only. ``options``:
        extra request parameters a model family needs (``tools``, ``tool_choice``,
        ``response_format``), sent as given."""
        if not messages:
            raise LLMInputError("no messages to send")
        s = self.settings
        model = s.model_for(role)
        wire = await self._wire_messages(messages)
        params: dict[str, Any] = {"model": model, "messages": wire}
        if s.max_tokens is not None:
            params["max_tokens"] = s.max_tokens
        if s.temperature is not None:
            params["temperature"] = s.temperature
        if options:
            params.update(options)

        t0 = time.monotonic()
        queued = 0.0
        last_status: int | None = None
        last_problem = ""
        attempts = 0
        for attempt in range(s.max_retries + 1):
            attempts = attempt + 1
            retry_after: float | None = None
            q0 = time.monotonic()
            try:
                async with self.limiter.slot(max_wait_s=s.queue_timeout_s):
                    queued += time.monotonic() - q0
                    # The client's own timeout covers the socket; this one the whole attempt.
                    with anyio.fail_after(s.timeout_s + 1.0):
                        completion = await self._client.chat.completions.create(**params)
            except TimeoutError:
                last_status = None
                last_problem = f"no answer within {s.timeout_s:g} s"
                if not s.retry_on_timeout:
                    raise LLMTimeout(f"{role} ({model}): {last_problem}") from None
            except openai.APITimeoutError:
                last_status = None
                last_problem = f"no answer within {s.timeout_s:g} s"
                if not s.retry_on_timeout:
                    raise LLMTimeout(f"{role} ({model}): {last_problem}") from None
            except openai.APIConnectionError as exc:
                last_status = None
                last_problem = f"connection error: {_redact(str(exc), self._key)}"
            except openai.APIStatusError as exc:
                status = exc.status_code
                last_status = status
                text = _error_text(exc, self._key)
                if status == 429 or status >= 500:
                    last_problem = f"HTTP {status}: {text}"
                    retry_after = _retry_after_s(exc)
                else:
                    hint = f" (check {API_KEY_ENV})" if status in (401, 403) else ""
                    raise LLMRequestError(
                        f"{role} ({model}): HTTP {status}{hint}: {text}", status=status
                    ) from None
            except (openai.APIResponseValidationError, ValueError) as exc:
                # ValueError: a 200 whose body is not JSON.
                raise LLMBadResponse(
                    f"{role} ({model}): unreadable response: {_redact(str(exc), self._key)[:300]}"
                ) from None
            except openai.OpenAIError as exc:
                # Anything else the client raises still leaves as one of ours.
                raise LLMError(
                    f"{role} ({model}): {type(exc).__name__}: {_redact(str(exc), self._key)[:300]}"
                ) from None
            else:
                return self._reply(role, model, completion, t0, queued, attempts)

            if attempt == s.max_retries:
                break
            delay = self._backoff_s(attempt, retry_after)
            if last_status == 429:
                self.limiter.hold_off(delay)
            log.warning(
                "llm_retry", role=role, model=model, attempt=attempts, problem=last_problem,
                delay_s=round(delay, 3),
            )
            await anyio.sleep(delay)
        raise LLMUnavailable(
            f"{role} ({model}): gave up after {attempts} attempts; last: {last_problem}",
            attempts=attempts,
            last_status=last_status,
        )

    def _reply(
        self, role: Role, model: str, completion: Any, t0: float, queued: float, attempts: int
    ) -> LLMReply:
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
        latency = time.monotonic() - t0
        reply = LLMReply(
            text=text,
            role=role,
            model=model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=self.cost_usd(model, prompt_tokens, completion_tokens),
            latency_s=latency,
            queued_s=queued,
            attempts=attempts,
            finish_reason=getattr(choices[0], "finish_reason", None),
            tool_calls=tool_calls,
        )
        log.debug(
            "llm_call", role=role, model=model, prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens, latency_s=round(latency, 3), attempts=attempts,
        )
        return reply
