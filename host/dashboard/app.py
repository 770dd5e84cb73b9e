"""The web side: the page, its static files, and the WebSocket (state out, controls in).

Access: on a loopback bind nothing is asked; anywhere else ``Access.token`` is required
for the page (``?token=...``, then an HttpOnly same-site cookie) and for the WebSocket
(the cookie or ``?token=``). A refused WebSocket is closed before it is accepted, so no
control can arrive without the token. A WebSocket from another origin (a web page the
browser happens to show) is refused too, token or not. The page is sent with a Content
Security Policy allowing only its own script; every text from the bus is set as text.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

import anyio
import structlog
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket, WebSocketDisconnect

from host.dashboard.controls import ControlError, control_message
from host.dashboard.feed import Hub
from protocol.messages import Msg

log = structlog.get_logger(__name__)

COOKIE = "mobagent_dashboard"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")
MAX_REQUEST_BYTES = 64 * 1024

Publish = Callable[[str, Msg], Awaitable[None]]


def is_loopback(bind: str) -> bool:
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind).is_loopback
    except ValueError:
        return False  # a host name: treat as reachable from elsewhere


@dataclass(frozen=True)
class Access:
    token: str | None  # None: no token asked (loopback)

    def allows(self, conn: HTTPConnection) -> bool:
        if self.token is None:
            return True
        given = conn.query_params.get("token") or conn.cookies.get(COOKIE) or ""
        return hmac.compare_digest(given.encode(), self.token.encode())


def same_origin(ws: WebSocket) -> bool:
    origin = ws.headers.get("origin")
    if origin is None:
        return True  # not a browser (a script that holds the token)
    return urlsplit(origin).netloc == ws.headers.get("host", "")


def _asset(package: str, *parts: str) -> str:
    return resources.files(package).joinpath(*parts).read_text(encoding="utf-8")


def build_app(hub: Hub, publish: Publish, access: Access, *, max_chars: int = 2000) -> Starlette:
    async def page(request: Request) -> Response:
        if not access.allows(request):
            return PlainTextResponse("a token is needed: open the URL `mobagent dashboard` "
                                     "printed (…/?token=…)", status_code=401)
        resp = Response(_asset("host.dashboard", "static", "index.html"),
                        media_type="text/html",
                        headers={"Content-Security-Policy": CSP, "Cache-Control": "no-store",
                                 "Referrer-Policy": "no-referrer"})
        if access.token is not None:
            resp.set_cookie(COOKIE, access.token, httponly=True, samesite="strict")
        return resp

    async def report_css(request: Request) -> Response:
        # The phone view's timeline is the report's markup: it gets the report's styles.
        return Response(_asset("recording", "report_assets", "report.css"), media_type="text/css")

    async def socket(ws: WebSocket) -> None:
        if not access.allows(ws) or not same_origin(ws):
            log.warning("dashboard_socket_refused", client=str(ws.client))
            await ws.close(code=1008)  # before accept: the handshake fails with 403
            return
        await ws.accept()
        feed = hub.connect()
        try:
            async with anyio.create_task_group() as tg:
                async def send() -> None:
                    try:
                        while True:
                            for msg in await feed.next_batch(hub.state):
                                await ws.send_text(json.dumps(msg))
                    except (WebSocketDisconnect, RuntimeError, OSError):
                        pass  # the browser went away mid-send: the receiver sees it too
                    tg.cancel_scope.cancel()

                tg.start_soon(send)
                try:
                    await receive(ws, feed)
                except WebSocketDisconnect:
                    pass  # the browser closed the page
                tg.cancel_scope.cancel()
        finally:
            hub.disconnect(feed)

    async def receive(ws: WebSocket, feed: Any) -> None:
        while True:
            raw = await ws.receive_text()
            if len(raw) > MAX_REQUEST_BYTES:
                feed.note({"type": "ack", "ok": False, "detail": "request too large"})
                continue
            try:
                req = json.loads(raw)
                if not isinstance(req, dict):
                    raise ValueError("not an object")
            except ValueError:
                feed.note({"type": "ack", "ok": False, "detail": "not a JSON object"})
                continue
            ref = req.get("ref")
            if req.get("type") == "view":
                serial = req.get("serial")
                feed.view(serial if isinstance(serial, str) and serial else None)
                continue
            try:
                topic, msg = control_message(req, hub.state, max_chars=max_chars)
                with anyio.fail_after(15):
                    await publish(topic, msg)
            except ControlError as exc:
                feed.note({"type": "ack", "ref": ref, "ok": False, "detail": str(exc)})
                continue
            except (TimeoutError, OSError) as exc:
                feed.note({"type": "ack", "ref": ref, "ok": False,
                           "detail": f"not sent: {type(exc).__name__}: {exc}"})
                continue
            log.info("dashboard_control", kind=req.get("type"), device=msg.device, topic=topic)
            feed.note({"type": "ack", "ref": ref, "ok": True, "kind": req.get("type"),
                       "id": getattr(msg, "id", ""), "serial": msg.device})

    return Starlette(routes=[
        Route("/", page),
        Route("/static/report.css", report_css),
        Mount("/static", app=StaticFiles(packages=[("host.dashboard", "static")])),
        WebSocketRoute("/ws", socket),
    ])
