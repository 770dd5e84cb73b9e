"""``mobagent mcp``: the fleet as an MCP server (entry point ``mcp``).

stdio by default (what Claude Desktop, Claude Code and Cursor start); ``--http`` serves
streamable HTTP at ``http://BIND:PORT/mcp``. Bound to loopback it asks for nothing; bound
anywhere else every request needs the token (``Authorization: Bearer TOKEN``, or
``?token=TOKEN``), ``mcp.token`` or a random one printed at start, as the dashboard does.
Logs go to stderr: on stdio, stdout is the protocol's.
"""

from __future__ import annotations

import argparse
import hmac
import json
import secrets
import sys
from typing import Any
from urllib.parse import parse_qs

import anyio
import msgspec
import structlog
from anyio.abc import TaskStatus

from host.dashboard.app import is_loopback
from host.mcp.config import McpConfig, McpSettings
from host.mcp.link import Link
from host.mcp.server import build_server
from runtime.cli import (
    EXIT_OK,
    listen_address,
    prepare,
    run_until_signalled,
    whole_number,
    with_given,
)

log = structlog.get_logger(__name__)

Scope = dict[str, Any]


class TokenGate:
    """ASGI: every HTTP request must carry the token (bearer header or ``?token=``)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token.encode()

    def allows(self, scope: Scope) -> bool:
        given = ""
        for name, value in scope.get("headers", ()):
            if name == b"authorization" and value[:7].lower() == b"bearer ":
                given = value[7:].decode("latin-1").strip()
        if not given:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            given = (query.get("token") or [""])[0]
        return hmac.compare_digest(given.encode(), self.token)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self.allows(scope):
            body = json.dumps({"error": "a token is needed: send `Authorization: Bearer "
                                        "TOKEN` (the token `mobagent mcp --http` printed, "
                                        "or mcp.token)"}).encode()
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="mobagent"')]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def http_app(app: Any, settings: McpSettings) -> tuple[Any, str | None]:
    """The streamable HTTP app, behind the token when bound off loopback."""
    from mcp.server.transport_security import TransportSecuritySettings

    if is_loopback(settings.bind):
        # The SDK's DNS-rebinding guard: only loopback Host / Origin headers.
        return app.streamable_http_app(host=settings.bind), None
    token = settings.token or secrets.token_urlsafe(24)
    web = app.streamable_http_app(host=settings.bind, transport_security=(
        TransportSecuritySettings(enable_dns_rebinding_protection=False)))
    return TokenGate(web, token), token


async def serve_http(link: Link, settings: McpSettings, *, out: Any = None,
                     task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
    """Streamable HTTP until cancelled; ``task_status.started`` gets the endpoint's URL."""
    from host.dashboard.server import listen, page_url, serve_web

    web, token = http_app(build_server(link), settings)
    sock = listen(settings.bind, settings.port)
    port = int(sock.getsockname()[1])
    url = page_url(settings.bind, port, None) + "mcp"
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: serve_web(web, sock, lifespan="on",
                                                     task_status=task_status))
        print(f"mcp: {url}", file=out or sys.stderr, flush=True)
        if token is not None:
            print(f"(off loopback: every request needs `Authorization: Bearer {token}`)",
                  file=out or sys.stderr, flush=True)
        log.info("mcp_serving", bind=settings.bind, port=port, token_required=token is not None)
        task_status.started(url)


async def serve(cfg: McpConfig, *, http: bool) -> int:
    link = Link(cfg)
    async with anyio.create_task_group() as tg:
        await tg.start(link.run)
        if http:
            await tg.start(serve_http, link, cfg.mcp)
            await anyio.sleep_forever()
        else:
            await build_server(link).run_stdio_async()
        tg.cancel_scope.cancel()
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    cfg = prepare(args, McpConfig, quiet=True)
    cfg = msgspec.structs.replace(cfg, mcp=with_given(cfg.mcp, port=args.port, bind=args.bind,
                                                      record_dir=args.record))
    return run_until_signalled(lambda: serve(cfg, http=args.http))


DESCRIPTION = ("An MCP server on the bus: list the phones, run instructions with progress "
               "per step, answer the agents' questions, take screenshots. stdio by default.")


def register(sub: Any) -> None:
    p = sub.add_parser("mcp", help="serve the fleet to MCP clients (Claude, Cursor, ...)",
                       description=DESCRIPTION)
    add_arguments(p)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--http", action="store_true",
                   help="serve streamable HTTP at http://BIND:PORT/mcp instead of stdio")
    p.add_argument("--port", type=whole_number(0, 65535, "port"), default=None,
                   help="HTTP port (default mcp.port, 8766; 0: any free one)")
    p.add_argument("--bind", default=None, type=listen_address,
                   help="HTTP address (default mcp.bind, 127.0.0.1); anything but loopback "
                        "requires the token (mcp.token, or one printed)")
    p.add_argument("--record", metavar="DIR", default=None,
                   help="record the episodes this server runs under DIR, each with its "
                        "report (default mcp.record_dir: ~/.local/state/mobagent/mcp)")
    p.set_defaults(func=cmd_mcp)
