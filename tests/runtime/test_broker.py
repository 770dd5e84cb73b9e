"""runtime/broker.py: the embedded amqtt broker on port 0 says which port it got.

The port is read from the socket we bind ourselves (amqtt's public ``external`` listener),
not from amqtt's private ``Broker._servers``: these tests fail when an amqtt upgrade
changes that public way, instead of a host silently announcing port 0.
"""

from __future__ import annotations

import socket

import anyio
import pytest

from runtime import topics
from runtime.broker import BrokerStartError, embedded_broker
from runtime.bus import Bus
from runtime.config import BrokerConfig, BusConfig
from runtime.messages import HostStatus

pytestmark = pytest.mark.anyio


async def test_port_zero_yields_the_bound_port_and_clients_talk_through_it() -> None:
    async with embedded_broker(BrokerConfig(host="127.0.0.1", port=0)) as address:
        assert address.port > 0
        with socket.create_connection((address.host, address.port), timeout=5):
            pass  # something listens there
        cfg = BusConfig(connect_timeout_s=10.0)
        topic = topics.host_status("broker-test")
        async with Bus(cfg, address, client_id="broker-sub", persistent=False) as sub, \
                Bus(cfg, address, client_id="broker-pub", persistent=False) as pub:
            await sub.subscribe(topic)
            await pub.publish(topic, HostStatus(host="broker-test", state="online"))
            with anyio.fail_after(10):
                async for _topic, msg in sub.messages():
                    assert isinstance(msg, HostStatus) and msg.host == "broker-test"
                    break
    with pytest.raises(OSError):  # closed with the block
        socket.create_connection((address.host, address.port), timeout=2).close()


async def test_a_taken_port_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BrokerStartError, match="port in use"):
            async with embedded_broker(BrokerConfig(host="127.0.0.1", port=port)):
                pass
