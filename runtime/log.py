"""Logging: structlog, JSON lines (or pretty on a TTY), with secrets redacted.

``Redactor`` replaces the values of secret-looking keys (password, api_key, token, ...)
and every occurrence of the configured secret values themselves (the broker password, an
API key) wherever they appear, e.g. inside a URL or an exception message. The same
``redact`` serves the event stream (``recording.events``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any, TextIO

import structlog

from runtime.config import REDACTED, LogConfig, is_secret_key

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


class Redactor:
    """A structlog processor (and plain function) that hides secrets."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret containing another is replaced whole.
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def value(self, node: Any) -> Any:
        if isinstance(node, str):
            return self.text(node)
        if isinstance(node, dict):
            return {
                k: (REDACTED if is_secret_key(str(k)) and v not in (None, "") else self.value(v))
                for k, v in node.items()
            }
        if isinstance(node, list | tuple):
            return [self.value(v) for v in node]
        if isinstance(node, int | float | bool) or node is None:
            return node
        return self.text(str(node)) if self.secrets else node

    def __call__(
        self, logger: Any, method: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        for key, val in list(event_dict.items()):
            if is_secret_key(key) and val not in (None, ""):
                event_dict[key] = REDACTED
            else:
                event_dict[key] = self.value(val)
        return event_dict


_redactor = Redactor()


def redactor() -> Redactor:
    """The process-wide redactor that ``configure_logging`` set up."""
    return _redactor


def configure_logging(
    cfg: LogConfig, secrets: Iterable[str] = (), stream: TextIO | _Stderr | None = None
) -> Redactor:
    """Set up structlog (and the stdlib root logger) once per process; returns the redactor."""
    global _redactor
    stream = stream or _Stderr()
    _redactor = Redactor(secrets)
    fmt = cfg.format
    if fmt == "auto":
        fmt = "pretty" if getattr(stream, "isatty", lambda: False)() else "json"
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=True) if fmt == "pretty"
        else structlog.processors.JSONRenderer()
    )
    level = _LEVELS[cfg.level]
    # What every line gets, from structlog or from the stdlib (aiomqtt, amqtt, ...); the
    # device and the episode come from contextvars bound once at the episode boundary.
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, _redactor, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=stream),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    # Libraries log through the stdlib: the same stream, processors, redaction and
    # renderer (a JSON line like ours when JSON logs are configured).
    handler = logging.StreamHandler(stream)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, _redactor, renderer],
    ))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(level, logging.WARNING))
    return _redactor


class _Stderr:
    """Whatever ``sys.stderr`` is at write time (test runners swap it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()
