"""Where the bus connects: a configured broker URL, or an embedded amqtt broker.

With ``bus.url`` empty the host runtime starts amqtt in-process on ``broker.host:port``
(port 0: any free port), so the main job needs no system package. amqtt speaks MQTT 3.1.1
only and does not queue offline messages for anonymous sessions: fine for one machine,
not for production, where ``bus.url`` points at mosquitto or EMQX.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import structlog

from runtime.bus import BrokerAddress, parse_broker_url
from runtime.config import BrokerConfig, ConfigError, RuntimeConfig

log = structlog.get_logger(__name__)


class BrokerStartError(RuntimeError):
    pass


def _amqtt_config(host: str, port: int) -> dict[str, Any]:
    return {
        "listeners": {"default": {"type": "tcp", "bind": f"{host}:{port}"}},
        # Only anonymous auth: amqtt's logging and $SYS plugins cost time for nothing here.
        "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
    }


def bound_port(broker: Any, listener: str) -> int:
    """The TCP port amqtt's ``listener`` was bound to (asked for port 0: the OS picked it).

    The one read of an amqtt private (``Broker._servers``; 0.12 has no public accessor for
    a listener's address). Why not a public way: probing a free port first and binding amqtt
    to it afterwards races with every other process picking ports (the test suite starts
    brokers by the dozen, several sessions share this machine); amqtt's public alternative
    (an ``external`` listener fed through ``Broker.external_connected``) means running our
    own TCP server and adapters. Only port 0 needs this; a configured port is used as is.
    ``tests/runtime/test_broker.py`` fails loudly when amqtt changes the shape read here.
    """
    server = getattr(broker, "_servers", {}).get(listener)
    sockets = getattr(getattr(server, "instance", None), "sockets", None)
    if not sockets:
        from importlib.metadata import version

        raise BrokerStartError(
            f"cannot read the port amqtt {version('amqtt')} bound listener {listener!r} to "
            "(Broker._servers changed); set broker.port to a fixed port")
    return int(sockets[0].getsockname()[1])


@asynccontextmanager
async def embedded_broker(cfg: BrokerConfig) -> AsyncIterator[BrokerAddress]:
    """Run amqtt in this process for the duration of the block; yields its address."""
    from amqtt.broker import Broker  # imported late: only the embedded case needs it

    for name in ("amqtt", "transitions"):
        logging.getLogger(name).setLevel(logging.ERROR)
    broker = Broker(_amqtt_config(cfg.host, cfg.port))
    try:
        await broker.start()
    except Exception as exc:
        hint = " (port in use? set broker.port, or bus.url to use the running broker)"
        raise BrokerStartError(f"embedded broker on {cfg.host}:{cfg.port}: {exc}{hint}") from None
    try:
        port = cfg.port or bound_port(broker, "default")
        address = BrokerAddress(host=cfg.host, port=port)
        log.info("embedded_broker_started", url=address.url)
        yield address
    finally:
        try:
            # Shielded: the block usually ends by cancellation, and a cancelled shutdown
            # leaves amqtt's tasks dangling.
            with anyio.move_on_after(5, shield=True):
                await broker.shutdown()
        except Exception as exc:  # shutting down must not hide the block's own error
            log.warning("embedded_broker_shutdown_failed", error=str(exc))


def url_address(cfg: RuntimeConfig) -> BrokerAddress:
    """``bus.url`` parsed; a ``ConfigError`` naming the key when it is not a broker URL."""
    try:
        return parse_broker_url(cfg.bus.url)
    except ValueError as exc:
        raise ConfigError(f"bus.url: {exc}") from None


def configured_address(cfg: RuntimeConfig) -> BrokerAddress:
    """The broker a client process (submit, watch) talks to: the URL, else the embedded one."""
    if cfg.bus.url:
        return url_address(cfg)
    host = "127.0.0.1" if cfg.broker.host in ("0.0.0.0", "") else cfg.broker.host
    return BrokerAddress(host=host, port=cfg.broker.port)


@asynccontextmanager
async def broker_for(cfg: RuntimeConfig) -> AsyncIterator[BrokerAddress]:
    """The host runtime's broker: the configured URL, or an embedded one while the block runs."""
    if cfg.bus.url:
        yield url_address(cfg)
        return
    async with embedded_broker(cfg.broker) as address:
        yield address
