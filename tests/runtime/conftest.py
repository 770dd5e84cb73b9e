"""Helpers for the runtime tests: a broker of either kind, and a fast-reconnecting bus config."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import pytest

from runtime.broker import embedded_broker
from runtime.bus import BrokerAddress, parse_broker_url
from runtime.config import BrokerConfig, BusConfig
from tests.fixtures.mosquitto import MosquittoFactory

FAST = BusConfig(reconnect_min_s=0.05, reconnect_max_s=0.5, connect_timeout_s=10.0,
                 publish_timeout_s=10.0, keepalive_s=10)


@pytest.fixture(params=["mosquitto", "embedded"])
def broker_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@asynccontextmanager
async def open_broker(kind: str, factory: MosquittoFactory) -> AsyncIterator[BrokerAddress]:
    if kind == "mosquitto":
        yield parse_broker_url(factory().url)
    else:
        async with embedded_broker(BrokerConfig(port=0)) as address:
            yield address


async def eventually(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Wait until ``predicate()`` holds (polling), or fail with TimeoutError."""
    with anyio.fail_after(timeout_s):
        while True:
            if predicate():
                return
            await anyio.sleep(0.01)
