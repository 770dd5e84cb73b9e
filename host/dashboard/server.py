"""One process: a bus subscription folding into ``FleetState``, and the web server.

``run_dashboard(cfg)`` connects to the broker (its own client id, a clean session: it
only watches and publishes the page's controls), subscribes to every device's events,
status, control and instruction topics and to the hosts' status and events, and serves
``app.build_app`` with uvicorn on a socket it bound itself (so the URL, port 0 included,
is known before anything is served; ``task_status`` gets it). The screens come small from
the capturing hosts (``Screen`` on ``devices/+/screen``): the dashboard takes every event
kind but the full ``Frame`` and passes each screen's JPEG to the page as it came, so it
decodes no image. The hosts make screens only while someone watches: the dashboard keeps a
screens lease (``Watching``, actors/watching.py) for as long as it runs, sent again at
once when a host comes online; each host answers a new lease with every phone's latest
screen, so the page shows every phone the moment it opens.

``serve_alongside(cfg)`` is the demo's hook: an embedded broker on a free port (unless
``bus.url`` names one), the dashboard on it, and the config the demo should run with.
"""

from __future__ import annotations

import base64
import secrets
import socket
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from typing import Any, Literal, TypeVar

import anyio
import msgspec
import structlog
import uvicorn
from anyio.abc import TaskStatus

from actors.watching import LEASE_S, Interest
from host.dashboard.app import Access, build_app, is_loopback
from host.dashboard.config import DashboardSettings
from host.dashboard.feed import Hub
from host.dashboard.state import FleetState
from protocol.messages import CODEC, MESSAGE_TYPES, Frame, HostStatus, Msg, Screen
from runtime import topics
from runtime.broker import configured_address, embedded_broker
from runtime.bus import BrokerAddress, Bus
from runtime.config import RuntimeConfig
from runtime.log import redactor
from runtime.messages import kind_of

log = structlog.get_logger(__name__)

C = TypeVar("C", bound=RuntimeConfig)
# Every event kind but the full Frame (the Screen stands in for it, at about 5 % of its
# bytes): one filter per kind the codec knows (requests are host-internal, never events),
# so a kind added later is watched too.
EVENT_KINDS = tuple(sorted(kind_of(t) for t in MESSAGE_TYPES
                           if t not in (Frame, Screen) and not t.__name__.endswith("Request")))


def subscriptions() -> list[str]:
    return [
        *(topics.device_events_filter(None, kind) for kind in EVENT_KINDS),
        topics.all_screens_filter(), topics.all_device_status_filter(),
        topics.all_control_filter(), topics.all_instructions_filter(),
        topics.fleet_instructions(), topics.all_host_status_filter(),
        topics.host_events_filter(),
    ]


def screen_src(data: bytes) -> str:
    """A screen's JPEG as the ``data:`` URL the page shows (base64 of 6 KB: microseconds)."""
    return "data:image/jpeg;base64," + base64.b64encode(data).decode()


def as_frame(screen: Screen) -> Frame:
    """The ``Frame`` a ``Screen`` stands for, as the timeline records it (without pixels:
    the image is the screen's, set on the event by ``FleetState.set_image``)."""
    return Frame(device=screen.device, episode_id=screen.episode_id, step=screen.step,
                 correlation_id=screen.correlation_id, ts=screen.ts, trace_id=screen.trace_id,
                 span_id=screen.span_id, frame_id=screen.frame_id, sha256="",
                 width=screen.width, height=screen.height, format="jpeg", data=b"",
                 flags=screen.flags)


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

    lease_s = LEASE_S  # the screens lease: how long the hosts make screens after it goes

    def __init__(self, settings: DashboardSettings) -> None:
        self.settings = settings
        self.state = FleetState(past_episodes=settings.past_episodes,
                                timeline_steps=settings.timeline_steps, redact=redactor())
        self.hub = Hub(self.state, settings.max_fps)
        self.interest: Interest | None = None  # the screens lease, while on a bus

    def apply(self, topic: str, msg: Msg) -> None:
        if isinstance(msg, HostStatus) and msg.state == "online" and self.interest is not None:
            self.interest.renew()  # a host (re)started: it learns the lease now
        if isinstance(msg, Screen):
            try:
                serial = topics.parse(topic).serial
            except topics.TopicError:
                return
            if not serial or msg.device != serial:
                return  # a screen must name the phone whose topic it came on
            # The timeline records the frame as the recorder would; the screen's JPEG goes
            # to the page as it came (no decoding here).
            frame = as_frame(msg)
            self.hub.changed(self.state.apply(topics.device_event(serial, frame), frame))
            self.hub.screen(serial, msg.frame_id, screen_src(msg.data))
            return
        self.hub.changed(self.state.apply(topic, msg))

    async def pump(self, bus: Bus) -> None:
        async for topic, msg in bus.messages():
            self.apply(topic, msg)

    async def run(self, bus: Bus, *, task_status: TaskStatus[None]) -> None:
        """Fold the bus into the state; the screens lease kept beside it (sent once the
        subscriptions are in place, so the hosts' answer to it is not missed)."""
        self.interest = Interest(bus, bus.client_id, screens=True, lease_s=self.lease_s,
                                 publish_timeout_s=bus.cfg.publish_timeout_s)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.pump, bus)
                tg.start_soon(self.interest.run)
                task_status.started()
        finally:
            self.interest = None


async def serve_web(app: Any, sock: socket.socket, *, lifespan: Literal["on", "off"] = "off",
                    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """uvicorn on ``sock`` until cancelled; then a graceful stop (open sockets closed).
    ``lifespan="on"`` for an app that starts its own tasks (the MCP server's sessions)."""
    server = _Server(uvicorn.Config(app, lifespan=lifespan,
                                    log_level="warning", access_log=False,
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
