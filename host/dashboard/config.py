"""``[dashboard]``: where ``mobagent dashboard`` listens and how much it sends a browser."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from runtime.config import Port, RuntimeConfig, Section


class DashboardSettings(Section):
    bind: str = "127.0.0.1"  # anything but loopback requires the token
    port: Port = 8765  # 0: any free port
    # Required for the page, the WebSocket and every control when bound off loopback;
    # empty: a random one is made and printed at start. A secret: never logged or shown.
    token: str = ""
    max_fps: Annotated[float, Meta(gt=0, le=30)] = 2.0  # frames per phone per browser
    past_episodes: Annotated[int, Meta(ge=0, le=1000)] = 20  # kept per phone
    timeline_steps: Annotated[int, Meta(ge=1, le=1000)] = 60  # steps kept per running episode


class DashboardConfig(RuntimeConfig):
    dashboard: DashboardSettings = msgspec.field(default_factory=DashboardSettings)
