"""One process: a bus subscription folding into ``FleetState``, and the web server.

``run_dashboard(cfg)`` connects to the broker (its own client id, a clean session: it
only watches and publishes the page's controls), subscribes to every device's events,
status, control and instruction topics and to the hosts' status and events, and serves
``app.build_app`` with uvicorn on a socket it bound itself (so the URL, port 0 included,
is known before anything is served; ``task_status`` gets it). Frames are downscaled off
the event loop by a small pool fed through a bounded stream: when it is full a frame is
dropped (counted), never queued without limit.

``serve_alongside(cfg)`` is the demo's hook: an embedded broker on a free port (unless
``bus.url`` names one), the dashboard on it, and the config the demo should run with.
"""

from __future__ import annotations

import base64
import io
import secrets
import socket
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from typing import Any, TypeVar

import anyio
import msgspec
import structlog
import uvicorn
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream
from PIL import Image

from host.dashboard.app import Access, build_app, is_loopback
from host.dashboard.config import DashboardSettings
from host.dashboard.feed import Hub
from host.dashboard.state import FleetState
from protocol.messages import CODEC, Frame, Msg
from runtime import topics
from runtime.broker import configured_address, embedded_broker
from runtime.bus import BrokerAddress, Bus
from runtime.config import RuntimeConfig
from runtime.log import redactor

log = structlog.get_logger(__name__)

SHRINK_WORKERS = 2
SHRINK_BUFFER = 64
C = TypeVar("C", bound=RuntimeConfig)


def subscriptions() -> list[str]:
    return [
        topics.device_events_filter(None), topics.all_device_status_filter(),
        topics.all_control_filter(), topics.all_instructions_filter(),
        topics.fleet_instructions(), topics.all_host_status_filter(),
        topics.host_events_filter(),
    ]


def screen_src(data: bytes, side: int) -> str:
    """A frame as a small JPEG ``data:`` URL (blocking: run it off the loop)."""
    with Image.open(io.BytesIO(data)) as img:
        img.draft("RGB", (side, side))  # JPEG: decode at a reduced scale, much cheaper
        small = img.convert("RGB")
        small.thumbnail((side, side))
        out = io.BytesIO()
        small.save(out, "JPEG", quality=70)
    return "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode()


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the command's own handler stops us."""

    def capture_signals(self) -> Any:
        return nullcontext()


def listen(bind: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bind, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.setblocking(False)
    return sock


def page_url(bind: str, port: int, token: str | None) -> str:
    host = "127.0.0.1" if bind in ("0.0.0.0", "") else ("[::1]" if bind == "::" else bind)
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{host}:{port}/" + (f"?token={token}" if token else "")


class Dashboard:
    """The state, the hub, and what feeds them from the bus."""

    def __init__(self, settings: DashboardSettings) -> None:
        self.settings = settings
        self.state = FleetState(past_episodes=settings.past_episodes,
                                timeline_steps=settings.timeline_steps, redact=redactor())
        self.hub = Hub(self.state, settings.max_fps)
        self.frames_dropped = 0
        self._send, self._recv = anyio.create_memory_object_stream[tuple[str, Frame]](
            SHRINK_BUFFER)

    def apply(self, topic: str, msg: Msg) -> None:
        self.hub.changed(self.state.apply(topic, msg))
        if isinstance(msg, Frame) and msg.device:
            try:
                self._send.send_nowait((msg.device, msg))
            except anyio.WouldBlock:
                self.frames_dropped += 1

    async def pump(self, bus: Bus) -> None:
        async for topic, msg in bus.messages():
            self.apply(topic, msg)

    async def shrink(self, recv: MemoryObjectReceiveStream[tuple[str, Frame]]) -> None:
        side = self.settings.thumb_side
        async for serial, frame in recv:
            try:
                src = await anyio.to_thread.run_sync(screen_src, frame.data, side)
            except (OSError, ValueError) as exc:  # an undecodable image: no screen
                log.debug("dashboard_frame_undecodable", device=serial, error=str(exc))
                continue
            self.hub.screen(serial, frame.frame_id, src)

    async def run(self, bus: Bus, *, task_status: TaskStatus[None]) -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(SHRINK_WORKERS):
                tg.start_soon(self.shrink, self._recv.clone())
            tg.start_soon(self.pump, bus)
            task_status.started()


async def serve_web(app: Any, sock: socket.socket, *,
                    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """uvicorn on ``sock`` until cancelled; then a graceful stop (open sockets closed)."""
    server = _Server(uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False,
                                    ws="websockets-sansio", timeout_graceful_shutdown=3))
    done = anyio.Event()

    async def serve() -> None:
        with anyio.CancelScope(shield=True):  # it stops through should_exit, below
            try:
                await server.serve(sockets=[sock])
            finally:
                done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        task_status.started()
        try:
            await done.wait()
        finally:
            server.should_exit = True


def access_for(settings: DashboardSettings) -> Access:
    if is_loopback(settings.bind):
        return Access(None)
    return Access(settings.token or secrets.token_urlsafe(24))


async def run_dashboard(
    cfg: RuntimeConfig, settings: DashboardSettings, *, address: BrokerAddress | None = None,
    dashboard: Dashboard | None = None,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the dashboard until cancelled; ``task_status.started`` gets the page's URL.
    ``dashboard``: the state and hub to serve (bench/dashboard.py reads its counters)."""
    access = access_for(settings)
    dash = dashboard or Dashboard(settings)
    sock = listen(settings.bind, settings.port)
    port = int(sock.getsockname()[1])
    async with Bus(cfg.bus, address or configured_address(cfg),
                   client_id=f"mobagent-dashboard-{uuid.uuid4().hex[:10]}", persistent=False,
                   max_payload_bytes=cfg.limits.max_payload_bytes, codec=CODEC) as bus:
        for filter_ in subscriptions():
            await bus.subscribe(filter_)

        async def publish(topic: str, msg: Msg) -> None:
            await bus.publish(topic, msg)

        app = build_app(dash.hub, publish, access, max_chars=cfg.limits.max_instruction_chars)
        async with anyio.create_task_group() as tg:
            await tg.start(dash.run, bus)
            await tg.start(serve_web, app, sock)
            url = page_url(settings.bind, port, access.token)
            log.info("dashboard_serving", bind=settings.bind, port=port,
                     token_required=access.token is not None, broker=bus.address.url)
            task_status.started(url)


@asynccontextmanager
async def serve_alongside(cfg: C, settings: DashboardSettings, *,
                          out: Any = None) -> AsyncIterator[C]:
    """The demo's dashboard: a broker both can reach, the dashboard on it, its URL printed.

    Yields ``cfg`` pointed at that broker (the demo's hosts then use it as any broker)."""
    out = out or sys.stdout
    async with _broker(cfg) as address, anyio.create_task_group() as tg:
        run_cfg = cfg
        if not cfg.bus.url:
            run_cfg = msgspec.structs.replace(cfg, bus=msgspec.structs.replace(
                cfg.bus, url=address.url))
        url = await tg.start(lambda task_status: run_dashboard(
            run_cfg, settings, address=address, task_status=task_status))
        print(f"dashboard: {url}", file=out, flush=True)
        try:
            yield run_cfg
        finally:
            tg.cancel_scope.cancel()


@asynccontextmanager
async def _broker(cfg: RuntimeConfig) -> AsyncIterator[BrokerAddress]:
    if cfg.bus.url:
        yield configured_address(cfg)
        return
    async with embedded_broker(msgspec.structs.replace(cfg.broker, port=0)) as address:
        yield address


def demo_dashboard(cfg: C, args: Any) -> Any:
    """``mobagent demo --dashboard``: ``serve_alongside`` with the [dashboard] settings."""
    from host.dashboard.config import DashboardConfig
    from runtime.cli import config_from_args

    settings = config_from_args(args, DashboardConfig, unknown_sections="ignore").dashboard
    if getattr(args, "dashboard_port", None) is not None:
        settings = msgspec.structs.replace(settings, port=args.dashboard_port)
    return serve_alongside(cfg, settings)
