"""What a server's refusal says: whether to try again (``RETRIED_STATUS``), when
(``server_wait_s`` from its headers, else ``backoff_s``), and which parameter it refuses
(``rejected_param``), read from the OpenAI-style error body; and its text, scrubbed of the
API key before it reaches an exception or a log line."""

from __future__ import annotations

import datetime as dt
import math
import random
import re
import time
from email.utils import parsedate_to_datetime
from typing import Any

import openai

from models.llm.settings import NO_KEY, LLMSettings


def redact(text: str, secret: str) -> str:
    if secret and secret != NO_KEY and len(secret) >= 4:
        text = text.replace(secret, "<redacted>")
    return text


def error_text(exc: openai.APIStatusError, secret: str) -> str:
    body = exc.body
    msg: Any = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        msg = inner.get("message") if isinstance(inner, dict) else inner
    if msg is None:
        msg = exc.message
    return redact(str(msg), secret)[:300]



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




def retry_after_s(exc: openai.APIStatusError) -> float | None:
    """How long the server that raised ``exc`` asks us to wait (None: it does not say)."""
    return server_wait_s(exc.response.headers if exc.response is not None else None)


def backoff_s(settings: LLMSettings, attempt: int, retry_after: float | None) -> float:
    """The wait before retry ``attempt`` + 1: full jitter up to the exponential cap, or the
    server's own wait when it is longer."""
    s = settings
    # Full jitter: spreads the fleet's retries instead of synchronising them.
    delay = random.uniform(0, min(s.backoff_max_s, s.backoff_base_s * 2**attempt))
    if retry_after is not None:
        # The server knows when its window reopens: no cap here, only the budget's.
        delay = max(delay, retry_after)
    return delay


RETRIED_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


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
DROPPABLE = ("max_tokens", "max_completion_tokens", "temperature", "top_p", "tool_choice")
# OpenAI's codes for "this model takes no such parameter / not this value of it".
_UNSUPPORTED_CODES = frozenset({"unsupported_parameter", "unsupported_value"})


def error_fields(exc: openai.APIStatusError) -> tuple[str | None, str | None, str]:
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


def rejected_param(exc: openai.APIStatusError, params: dict[str, Any]) -> str | None:
    """The sent parameter a 400 refuses, to retry without it; None: not a refusal of one.

    The structured error decides when there is one: ``error.param`` names a parameter we
    sent and may drop, refused by ``error.code`` (``unsupported_parameter`` /
    ``unsupported_value``) or by its message. A ``param`` naming anything else (messages,
    tools) is never dropped, whatever the text says. Without a ``param`` (vLLM, Ollama,
    proxies put it in ``message``), the message must refuse one by name: "Unsupported
    parameter: 'max_tokens' ...". A 400 that only mentions one (a limit too large) is not
    a refusal."""
    named, code, message = error_fields(exc)
    text = message.lower()
    refused = code in _UNSUPPORTED_CODES or any(r in text for r in _REFUSALS)
    if not refused:
        return None
    if named is not None:
        return named if named in DROPPABLE and named in params else None
    for name in DROPPABLE:
        # \b keeps max_completion_tokens from matching max_tokens.
        if name in params and re.search(rf"\b{name}\b", text):
            return name
    return None

