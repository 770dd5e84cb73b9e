"""What LLM calls may spend: the one token estimate of a request, the episode's ``CostCap``
and the host's ``RateLimiter`` per endpoint.

The token estimate (``estimate_tokens``) is the only one: the prompt bound
(``llm.max_prompt_tokens``), the cost cap and the token rate limit all count with it.
It is deliberately simple and documented, so the bound on a prompt is the same for every
model:

- text: one token per 4 characters (rounded up), about what BPE tokenizers give for English
  and markup; a message costs 4 tokens of framing besides its content;
- an image: OpenAI's tile rule at ``detail=high`` on the image as it will be sent (its
  longer side scaled down to ``max_image_side``): 85 + 170 per 512x512 tile. Servers that
  count images differently (Qwen-VL's 28x28 patches) land within a small factor of it.

It errs towards counting more, never towards a prompt the server refuses.
"""

from __future__ import annotations

import contextvars
import io
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec
from PIL import Image

from models.llm.errors import LLMTimeout
from models.llm.messages import ChatMessage, ImageInput, LLMReply
from models.llm.settings import LLMSettings, ModelPrice

# ---------------------------------------------------------------------------- tokens

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


def request_tokens(
    messages: Sequence[ChatMessage], options: Mapping[str, Any] | None = None, *,
    max_image_side: int = 1024,
) -> int:
    """The prompt tokens of a request: its messages by ``estimate_tokens``, and a family's
    request options (tools, a JSON schema) counted as text."""
    prompt = estimate_tokens(messages, max_image_side=max_image_side)
    if options:
        prompt += -(-len(msgspec.json.encode(options)) // CHARS_PER_TOKEN)
    return prompt


def price_usd(
    price: ModelPrice | None, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0
) -> float | None:
    """What a call costs at ``price`` (None: no price, no cost known)."""
    if price is None:
        return None
    cached = min(cached_tokens, prompt_tokens) if price.cached_per_mtok is not None else 0
    cached_rate = price.cached_per_mtok or 0.0
    return (
        (prompt_tokens - cached) * price.prompt_per_mtok + cached * cached_rate
        + completion_tokens * price.completion_per_mtok
    ) / 1e6


# ---------------------------------------------------------------------------- cost cap


@dataclass
class CostCap:
    """A spending cap for the calls made in one context (the agent's episode:
    ``agent.max_cost_usd``); set it with ``spending_cap``.

    ``LLMClient.chat`` checks it before each call: the call's worst cost (its prompt by
    ``request_tokens``, plus the role's whole output-token limit, at the model's
    ``llm.prices``) added to ``spent_usd`` must stay within ``max_usd``, else
    ``LLMCostCapReached`` and nothing is sent. A model without a price costs nothing here,
    as in ``LLMReply.cost_usd``; a role without an output limit counts its prompt only (its
    output has no bound to count). Each answered call adds its real cost (``charge``) and
    lands in ``answered`` until the caller has published it (``account``).
    """

    max_usd: float
    spent_usd: float = 0.0
    answered: list[LLMReply] = field(default_factory=list)

    def fits(self, worst_usd: float | None) -> bool:
        """Whether a call costing at most ``worst_usd`` stays within the cap."""
        return worst_usd is None or self.spent_usd + worst_usd <= self.max_usd

    def charge(self, reply: LLMReply) -> None:
        """An answered call: its cost is spent, and it waits in ``answered``."""
        self.spent_usd += reply.cost_usd or 0.0
        self.answered.append(reply)

    def account(self, replies: Sequence[LLMReply]) -> None:
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


def cap_in_force() -> CostCap | None:
    """The ``spending_cap`` of the calling context, if any."""
    return _COST_CAP.get()


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
        """Hold one call slot for a request of about ``tokens`` tokens; yields
        ``correct(actual_tokens)``, which replaces the estimate by the server's count. Waiting longer than ``max_wait_s`` raises ``LLMTimeout``."""
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

        def correct(actual_tokens: int) -> None:
            entry[1] = float(actual_tokens)

        try:
            yield correct
        finally:
            self.in_flight -= 1
            self._slots.release()
