"""Where the bus connects: a configured broker URL, or an embedded amqtt broker.

With ``bus.url`` empty the host runtime starts amqtt in-process on ``broker.host:port``
(port 0: any free port), so the main job needs no system package. amqtt speaks MQTT 3.1.1
only and does not queue offline messages for anonymous sessions: fine for one machine,
not for production, where ``bus.url`` points at mosquitto or EMQX.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import structlog

from runtime.bus import BrokerAddress, parse_broker_url
from runtime.config import BrokerConfig, ConfigError, RuntimeConfig
from runtime.errors import MobagentError

log = structlog.get_logger(__name__)


class BrokerStartError(MobagentError, RuntimeError):
    pass


# amqtt's listener is ``external``: we own the TCP server and hand amqtt each connection,
# so the port it listens on is ours to read (see ``listen``).
_LISTENER = "default"


def _amqtt_config() -> dict[str, Any]:
    return {
        "listeners": {_LISTENER: {"type": "external"}},
        # Only anonymous auth: amqtt's logging and $SYS plugins cost time for nothing here.
        "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
    }


async def listen(broker: Any, host: str, port: int) -> asyncio.Server:
    """A TCP server on ``host:port`` whose connections go to ``broker``'s external listener;
    its socket says the port it is bound to (port 0: the one the OS picked).

    amqtt 0.12 keeps the servers it starts itself in a private (``Broker._servers``) and has
    no public accessor for their address; its public way to serve connections it did not
    accept is an ``external`` listener fed through ``Broker.external_connected`` with its
    own stream adapters (``amqtt.adapters``), which is what its ``tcp`` listener does too.
    So we bind the socket ourselves and read the port from it: no private read, and no
    probing for a free port first (a race with every other process picking ports).
    """
    from amqtt.adapters import StreamReaderAdapter, StreamWriterAdapter

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await broker.external_connected(StreamReaderAdapter(reader), StreamWriterAdapter(writer),
                                        _LISTENER)

    # reuse_address as amqtt's own listener: a restarted host rebinds a port in TIME_WAIT.
    return await asyncio.start_server(connected, host or None, port, reuse_address=True)


@asynccontextmanager
async def embedded_broker(cfg: BrokerConfig) -> AsyncIterator[BrokerAddress]:
    """Run amqtt in this process for the duration of the block; yields its address."""
    from amqtt.broker import Broker  # imported late: only the embedded case needs it

    for name in ("amqtt", "transitions"):
        logging.getLogger(name).setLevel(logging.ERROR)
    broker = Broker(_amqtt_config())
    started = False
    try:
        await broker.start()
        started = True
        server = await listen(broker, cfg.host, cfg.port)
    except Exception as exc:
        if started:  # the port was refused: do not leave amqtt's tasks behind
            with anyio.move_on_after(5, shield=True):
                await broker.shutdown()
        hint = " (port in use? set broker.port, or bus.url to use the running broker)"
        raise BrokerStartError(f"embedded broker on {cfg.host}:{cfg.port}: {exc}{hint}") from None
    try:
        address = BrokerAddress(host=cfg.host, port=int(server.sockets[0].getsockname()[1]))
        log.info("embedded_broker_started", url=address.url)
        yield address
    finally:
        server.close()  # no new connections; amqtt's shutdown closes the open ones
        try:
            # Shielded: the block usually ends by cancellation, and a cancelled shutdown
            # leaves amqtt's tasks dangling.
            with anyio.move_on_after(5, shield=True):
                await broker.shutdown()
                await server.wait_closed()
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
