"""Shared fixtures live in tests/fixtures/, one module per real part (broker, adb, LLM server)."""

import os

import pytest

# The suite's hosts and perception workers are short-lived and most never read text: their
# perception does not load and prepare the models at start (tests/models/test_shape_book.py
# turns it on where that is what is tested). Set before any host or worker process starts.
os.environ.setdefault("MOBAGENT_PREPARE", "0")

pytest_plugins = [
    "tests.fixtures.mosquitto",
    "tests.fixtures.adb",
    "tests.fixtures.openai_server",
    "tests.fixtures.data",
    "tests.fixtures.otlp",
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
