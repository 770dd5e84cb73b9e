"""``mobagent dashboard``: the fleet live in a browser (entry point ``dashboard``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from host.dashboard.config import DashboardConfig
from host.dashboard.server import run_dashboard
from runtime.cli import (
    EXIT_OK,
    listen_address,
    prepare,
    run_until_signalled,
    whole_number,
    with_given,
)


def cmd_dashboard(args: argparse.Namespace) -> int:
    cfg = prepare(args, DashboardConfig, quiet=True)
    settings = with_given(cfg.dashboard, port=args.port, bind=args.bind)

    async def go() -> int:
        import anyio

        async with anyio.create_task_group() as tg:
            url = await tg.start(lambda task_status: run_dashboard(
                cfg, settings, task_status=task_status))
            print(f"dashboard: {url}", flush=True)
            if "token=" in url:
                print("(off loopback: the page and every control need that token)",
                      file=sys.stderr, flush=True)
        return EXIT_OK

    return run_until_signalled(go)


def register(sub: Any) -> None:
    p = sub.add_parser("dashboard", help="the fleet live in a browser",
                       description="Subscribe to the bus and serve a live page of every phone: "
                                   "screens, status, episodes, and controls.")
    p.add_argument("--port", type=whole_number(0, 65535, "port"), default=None,
                   help="port to listen on (default dashboard.port, 8765; 0: any free one)")
    p.add_argument("--bind", default=None, type=listen_address,
                   help="address to listen on (default dashboard.bind, 127.0.0.1); anything "
                        "but loopback requires the token (dashboard.token, or one printed)")
    p.set_defaults(func=cmd_dashboard)
