"""A running dashboard on a real mosquitto, and a bus client beside it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import websockets
from websockets.asyncio.client import ClientConnection

from host.dashboard.config import DashboardSettings
from host.dashboard.server import run_dashboard
from protocol.messages import CODEC
from runtime.bus import Bus, parse_broker_url
from runtime.config import RuntimeConfig
from tests.fixtures.mosquitto import MosquittoBroker
from tests.fleet.helpers import FAST


def runtime_config(broker: MosquittoBroker) -> RuntimeConfig:
    cfg = RuntimeConfig(bus=FAST)
    return msgspec.structs.replace(cfg, bus=msgspec.structs.replace(cfg.bus, url=broker.url))


@asynccontextmanager
async def dashboard(broker: MosquittoBroker, **settings: Any) -> AsyncIterator[str]:
    """``run_dashboard`` on ``broker``; yields the page URL it printed."""
    opts = DashboardSettings(port=0, **settings)
    async with anyio.create_task_group() as tg:
        url = await tg.start(lambda task_status: run_dashboard(
            runtime_config(broker), opts, task_status=task_status))
        try:
            yield url
        finally:
            tg.cancel_scope.cancel()


def client_bus(broker: MosquittoBroker, name: str) -> Bus:
    return Bus(FAST, parse_broker_url(broker.url), client_id=name, persistent=False, codec=CODEC)


def ws_url(page: str, token: str | None = None) -> str:
    base = page.split("?")[0].replace("http://", "ws://") + "ws"
    return base + (f"?token={token}" if token else "")


async def next_of(ws: ClientConnection, kind: str, pred: Any = None,
                  timeout_s: float = 20) -> dict[str, Any]:
    """The next message of ``kind`` (for which ``pred`` holds) from the dashboard."""
    with anyio.fail_after(timeout_s):
        while True:
            msg = json.loads(await ws.recv())
            if msg.get("type") == kind and (pred is None or pred(msg)):
                return msg


__all__ = ["client_bus", "dashboard", "next_of", "websockets", "ws_url"]
