"""The errors of the LLM layer: ``LLMError`` for a call that failed, ``ParseError`` for a
reply out of format, and ``UnparsableReply`` for a model that stayed out of format."""

from __future__ import annotations

from models.llm.messages import LLMReply
from runtime.errors import MobagentError


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


class ParseError(MobagentError, ValueError):
    """A reply that does not follow the format; ``str(e)`` is meant for re-asking the model."""

    def __init__(self, message: str, text: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.text = text


class UnparsableReply(LLMError):
    """The model kept answering out of format after every re-ask."""

    def __init__(
        self, message: str, *, errors: tuple[str, ...], replies: tuple[LLMReply, ...]
    ) -> None:
        super().__init__(message)
        self.errors = errors
        self.replies = replies
