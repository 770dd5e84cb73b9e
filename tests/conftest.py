"""Shared fixtures live in tests/fixtures/, one module per real part (broker, adb, LLM server)."""

import pytest

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
