"""``LLMClient``: one OpenAI-compatible chat client per host, for the agent's LLM roles.

It speaks the chat-completions API through ``openai.AsyncOpenAI`` with plain parameters
(model, messages, max_tokens, temperature, and a family's options), so it works against
GPT-4o-class services and against vLLM or Ollama serving Qwen-VL. Around each call it adds
what the fleet needs: the role's settings (``settings``), the host's rate limits and the
episode's cost cap (``budget``), images as JPEG data URLs at the role's size (``wire``), a
timeout on every attempt, retries of what a server may answer later (``retry``), and the
call's tokens, cost and latency in its ``LLMReply``.

The API key is never logged: any text taken from a server's error is scrubbed of it before
it reaches an exception or a log line.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio
import openai
import structlog

from models.llm.budget import CostCap, RateLimiter, cap_in_force, price_usd, request_tokens
from models.llm.errors import (
    LLMBadResponse,
    LLMCostCapReached,
    LLMError,
    LLMInputError,
    LLMRequestError,
    LLMTimeout,
    LLMUnavailable,
)
from models.llm.messages import ROLES, ChatMessage, LLMReply, Role
from models.llm.retry import (
    RETRIED_STATUS,
    backoff_s,
    error_fields,
    error_text,
    redact,
    rejected_param,
    retry_after_s,
)
from models.llm.settings import LLMSettings, RoleConfig
from models.llm.wire import WireEncoder

log = structlog.get_logger(__name__)


@dataclass
class _Call:
    """One ``chat`` call across its attempts: the request, and what went wrong last."""

    rc: RoleConfig
    wire: list[dict[str, Any]]
    options: Mapping[str, Any] | None
    params: dict[str, Any]
    tokens: int  # the prompt's estimate plus the output limit, for the token rate limit
    t0: float = field(default_factory=time.monotonic)
    queued: float = 0.0
    attempts: int = 0
    last_status: int | None = None
    last_problem: str = ""
    timed_out: bool = False

    @property
    def who(self) -> str:
        """The call as errors name it: role, model and server."""
        return f"{self.rc.role} ({self.rc.model}) at {self.rc.endpoint}"


@dataclass(frozen=True)
class _Retry:
    """An attempt that may be tried again: after ``after`` seconds as the server asks
    (None: our backoff), or at once with parameters it refused left out (``resend``)."""

    after: float | None = None
    resend: bool = False


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
        for role in ROLES:
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
        self._secrets = tuple({k for k in self._keys.values()})
        self._wire = WireEncoder()

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
            text = redact(text, secret)
        return text

    def _params(
        self, rc: RoleConfig, wire: list[dict[str, Any]],
        options: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The request: the role's parameters and the family's ``options``, less what this
        endpoint's model refused before (``retry.DROPPABLE``)."""
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
        ``tool_choice`` (``error.param`` when the server names it, else its message) is
        retried once without it, and the endpoint's model is remembered not to take it; any
        other 400 fails at once. ``options``: extra request parameters a model family needs
        (``tools``, ``tool_choice``, ``response_format``). Under a ``spending_cap``, a call
        whose worst cost would pass it raises ``LLMCostCapReached`` unsent.
        """
        if not messages:
            raise LLMInputError("no messages to send")
        rc = self._roles[role]
        # One estimate for both budgets: the cost cap prices it, the rate limiter counts it.
        prompt = request_tokens(messages, options, max_image_side=rc.max_image_side)
        cap = cap_in_force()
        if cap is not None:  # before any work: a call past the cap is never sent
            self._check_cap(cap, rc, prompt)
        wire = await self._wire.messages(messages, rc)
        call = _Call(rc, wire, options, self._params(rc, wire, options),
                     tokens=prompt + int(rc.max_tokens or 0))
        reply = await self._with_retries(call)
        if cap is not None:
            cap.charge(reply)
        return reply

    def _check_cap(self, cap: CostCap, rc: RoleConfig, prompt: int) -> None:
        """Raise ``LLMCostCapReached`` when a call of ``prompt`` estimated tokens and the
        role's whole output limit could pass ``cap``."""
        output = int(rc.max_tokens or 0)
        worst = price_usd(self.settings.prices.get(rc.model), prompt, output)
        if not cap.fits(worst):
            raise LLMCostCapReached(
                f"cost cap of ${cap.max_usd:g} would be passed: the next {rc.role} call "
                f"({rc.model}) may cost up to ${worst or 0.0:.4f} (~{prompt} prompt + "
                f"{output} output tokens) and the LLM calls cost "
                f"${cap.spent_usd:.4f} so far; not sent"
            )

    async def _with_retries(self, call: _Call) -> LLMReply:
        """Attempts until one is answered, one fails for good, or the retries are spent."""
        s, rc = self.settings, call.rc
        deadline = call.t0 + s.retry_budget_s
        attempt = 0
        while True:
            call.attempts = attempt + 1
            outcome = await self._attempt(call)
            if isinstance(outcome, LLMReply):
                return outcome
            if not outcome.resend:
                delay = backoff_s(s, attempt, outcome.after)
                out_of_retries = s.max_retries is not None and attempt >= s.max_retries
                if out_of_retries or time.monotonic() + delay > deadline:
                    raise self._gave_up(call)
                if call.last_status == 429:
                    self._limiters[rc.base_url].hold_off(delay)
                log.warning(
                    "llm_retry", role=rc.role, model=rc.model, endpoint=rc.endpoint,
                    attempt=call.attempts, problem=call.last_problem, delay_s=round(delay, 3),
                )
                await anyio.sleep(delay)
            attempt += 1

    async def _attempt(self, call: _Call) -> LLMReply | _Retry:
        """One request under a rate-limit slot: the reply, or how to try again; raises what
        is not retried."""
        s, rc = self.settings, call.rc
        client = self._clients[(rc.base_url, self._keys[rc.role])]
        q0 = time.monotonic()
        try:
            async with self._limiters[rc.base_url].slot(
                    max_wait_s=s.queue_timeout_s, tokens=call.tokens) as correct:
                call.queued += time.monotonic() - q0
                # The client's own timeout covers the socket; this one the whole attempt.
                with anyio.fail_after(s.timeout_s + 1.0):
                    completion = await client.chat.completions.create(**call.params)
                correct(_total_tokens(completion, call.tokens))
        except (TimeoutError, openai.APITimeoutError):
            call.last_status, call.timed_out = None, True
            call.last_problem = f"no answer within {s.timeout_s:g} s"
            if not s.retry_on_timeout:
                raise LLMTimeout(f"{call.who}: {call.last_problem}") from None
            return _Retry()
        except openai.APIConnectionError as exc:
            call.last_status, call.timed_out = None, False
            call.last_problem = f"connection error: {self._scrub(str(exc))}"
            return _Retry()
        except openai.APIStatusError as exc:
            return self._refused(call, exc)
        except (openai.APIResponseValidationError, ValueError) as exc:
            # ValueError: a 200 whose body is not JSON.
            raise LLMBadResponse(
                f"{rc.role} ({rc.model}): unreadable response: {self._scrub(str(exc))[:300]}"
            ) from None
        except openai.OpenAIError as exc:
            # Anything else the client raises still leaves as one of ours.
            raise LLMError(
                f"{rc.role} ({rc.model}): {type(exc).__name__}: {self._scrub(str(exc))[:300]}"
            ) from None
        return self._reply(rc, completion, call.t0, call.queued, call.attempts)

    def _refused(self, call: _Call, exc: openai.APIStatusError) -> _Retry:
        """An HTTP error: resend without a refused parameter, retry what is transient, raise
        ``LLMRequestError`` for the rest."""
        rc, status = call.rc, exc.status_code
        call.last_status, call.timed_out = status, False
        text = self._scrub(error_text(exc, self._keys[rc.role]))
        param = rejected_param(exc, call.params) if status == 400 else None
        if param is not None:
            # A reasoning model refusing max_tokens / temperature, a server refusing
            # tool_choice: once without it (max_tokens becomes max_completion_tokens first).
            self._rejected.setdefault((rc.base_url, rc.model), set()).add(param)
            retry = self._params(rc, call.wire, call.options)
            if retry != call.params:
                log.warning("llm_param_rejected", role=rc.role, model=rc.model,
                            endpoint=rc.endpoint, param=param)
                call.params = retry
                return _Retry(resend=True)
        if status in RETRIED_STATUS or status >= 500:
            call.last_problem = f"HTTP {status}: {text}"
            return _Retry(after=retry_after_s(exc))
        hint = f" (check {rc.api_key_env})" if status in (401, 403) else ""
        named, code, _ = error_fields(exc)
        fields = ", ".join(f"{k} {v}" for k, v in (("param", named), ("code", code))
                           if v is not None)
        raise LLMRequestError(
            f"{call.who}: HTTP {status}{hint}: {text}"
            + (f" ({self._scrub(fields)})" if fields else ""), status=status
        ) from None

    def _gave_up(self, call: _Call) -> LLMError:
        s = self.settings
        spent = time.monotonic() - call.t0
        message = (
            f"{call.who}: gave up after {call.attempts} attempts in {spent:.1f} s"
            f" (retry budget {s.retry_budget_s:g} s); last: {call.last_problem}"
        )
        if call.timed_out:
            return LLMTimeout(message)
        return LLMUnavailable(message, attempts=call.attempts, last_status=call.last_status)

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
            cost_usd=price_usd(self.settings.prices.get(model), prompt_tokens, completion_tokens,
                               cached_tokens),
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
