"""``[mcp]``: how ``mobagent mcp`` listens (HTTP) and how long it waits."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from runtime.config import Port, RuntimeConfig, Section


class McpSettings(Section):
    # streamable HTTP (``--http``) only; stdio needs neither. Anything but loopback
    # requires the token (a bearer token), as the dashboard does.
    bind: str = "127.0.0.1"
    port: Port = 8766  # 0: any free port
    # Required on every HTTP request when bound off loopback; empty: a random one is made
    # and printed at start. A secret: never logged.
    token: str = ""
    # run_instruction waits this long for the outcome unless its timeout_s says otherwise
    default_timeout_s: Annotated[float, Meta(gt=0, le=86_400)] = 600.0
    screenshot_timeout_s: Annotated[float, Meta(gt=0, le=600)] = 30.0
    # a fresh server waits this long for the phones' retained status before it answers
    settle_s: Annotated[float, Meta(ge=0, le=30)] = 0.5
    recent_events: Annotated[int, Meta(ge=1, le=10_000)] = 200  # kept per phone
    episodes_kept: Annotated[int, Meta(ge=1, le=100_000)] = 500  # finished ones, for resources
    # where the episodes this server ran are recorded, each with its HTML report;
    # empty: $XDG_STATE_HOME/mobagent/mcp (~/.local/state/mobagent/mcp)
    record_dir: str = ""


class McpConfig(RuntimeConfig):
    mcp: McpSettings = msgspec.field(default_factory=McpSettings)
