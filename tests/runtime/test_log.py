"""runtime/log.py: stdlib records come out through structlog's renderer, like ours."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from runtime.config import LogConfig
from runtime.log import configure_logging


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


def test_stdlib_records_are_json_lines_when_json_is_configured(restore_logging: None) -> None:
    out = io.StringIO()
    configure_logging(LogConfig(format="json", level="info"), ["s3cret"], stream=out)
    with structlog.contextvars.bound_contextvars(device="phone-1"):
        logging.getLogger("x").warning("broker %s said %s", "b1", "s3cret")
        structlog.get_logger("ours").info("hello", n=1)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    stdlib, ours = lines
    assert stdlib["event"] == "broker b1 said ***" and stdlib["level"] == "warning"
    assert stdlib["logger"] == "x" and stdlib["device"] == "phone-1" and "timestamp" in stdlib
    assert ours["event"] == "hello" and ours["device"] == "phone-1" and ours["n"] == 1
    assert set(stdlib) - {"logger"} == set(ours) - {"n"}  # the same shape
