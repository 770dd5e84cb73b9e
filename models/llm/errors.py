"""The error every reply parser raises for a reply out of format."""

from __future__ import annotations

from runtime.errors import MobagentError


class ParseError(MobagentError, ValueError):
    """A reply that does not follow the format; ``str(e)`` is meant for re-asking the model."""

    def __init__(self, message: str, text: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.text = text
