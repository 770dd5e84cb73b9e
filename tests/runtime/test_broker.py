"""runtime/broker.py: the embedded amqtt broker on port 0 says which port it got.

``bound_port`` is the one read of an amqtt private (``Broker._servers``): these tests fail
loudly when an amqtt upgrade changes what it reads, instead of a host silently announcing
port 0.
"""

from __future__ import annotations

import socket

import pytest

from runtime.broker import BrokerStartError, bound_port, embedded_broker
from runtime.bus import Bus
from runtime.config import BrokerConfig, BusConfig

pytestmark = pytest.mark.anyio


async def test_port_zero_yields_the_port_amqtt_bound_and_a_client_connects() -> None:
    async with embedded_broker(BrokerConfig(host="127.0.0.1", port=0)) as address:
        assert address.port > 0
        with socket.create_connection((address.host, address.port), timeout=5):
            pass  # something listens there
        async with Bus(BusConfig(connect_timeout_s=10.0), address, client_id="broker-test",
                       persistent=False):
            pass  # and it speaks MQTT


async def test_the_private_shape_read_is_still_there() -> None:
    """What ``bound_port`` reads, spelled out: if this fails, amqtt changed ``_servers``."""
    from amqtt.broker import Broker

    from runtime.broker import _amqtt_config

    broker = Broker(_amqtt_config("127.0.0.1", 0))
    await broker.start()
    try:
        server = broker._servers["default"]
        sock = server.instance.sockets[0]
        assert bound_port(broker, "default") == sock.getsockname()[1] > 0
    finally:
        await broker.shutdown()


def test_a_changed_shape_is_a_clear_error_not_port_zero() -> None:
    class Changed:  # what an amqtt without ``_servers`` would look like to bound_port
        pass

    with pytest.raises(BrokerStartError, match="cannot read the port amqtt .* bound"):
        bound_port(Changed(), "default")
