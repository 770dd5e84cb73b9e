"""Auth on: the shipped ACL (configs/mosquitto/acl) on a real mosquitto with a password file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from protocol.messages import Instruction
from runtime import topics
from runtime.bus import BrokerAddress, BusError, parse_broker_url
from sim.fleet import SimFleet
from tests.fixtures.mosquitto import MosquittoFactory
from tests.fleet.helpers import FAST, ScriptedWork, bus_for, fleet_client, fleet_host, typed_tokens

pytestmark = pytest.mark.anyio

ACL = (Path(__file__).resolve().parents[2] / "configs" / "mosquitto" / "acl").read_text()
USERS = {"mobagent-host": "host-secret-1", "mobagent-client": "client-secret-2"}
SHORT = FAST.__class__(reconnect_min_s=0.05, reconnect_max_s=0.5, connect_timeout_s=3.0,
                       publish_timeout_s=3.0, keepalive_s=10)


async def _cannot_connect(address: BrokerAddress, username: str = "", password: str = "") -> str:
    with pytest.raises(BusError) as info:
        async with bus_for(address, f"intruder-{username or 'anon'}", cfg=SHORT,
                           username=username, password=password):
            pass
    return str(info.value)


async def test_acl_lets_clients_instruct_and_hosts_report_and_nobody_else(
    mosquitto_factory: MosquittoFactory, sim_fleet: Callable[..., SimFleet]
) -> None:
    broker = mosquitto_factory(users=USERS, acl=ACL)
    address = parse_broker_url(broker.url)
    fleet = sim_fleet(count=1, stand_in=True)
    serial = fleet.serials[0]
    work = ScriptedWork(steps=1, step_s=0.0)

    # No credentials, or a wrong password: refused at connect, so nothing can be published
    # and nothing is received from the event topics.
    assert "not authori" in (await _cannot_connect(address)).lower()
    assert "not authori" in (await _cannot_connect(
        address, username="mobagent-client", password="wrong")).lower()

    async with fleet_host(address, [serial], work, username="mobagent-host",
                          password=USERS["mobagent-host"]), \
            fleet_client(address, username="mobagent-client",
                         password=USERS["mobagent-client"]) as client:
        # A client instructs; the host runs it and the client reads the outcome.
        await client.instruct(serial, Instruction(id="ok-1", text="allowed"))
        await client.wait_finished(["ok-1"], timeout_s=20)
        assert client.finished_ids()["ok-1"].status == "succeeded"

        # A host may not send instructions (the broker drops the publish)...
        async with bus_for(address, "rogue-host", username="mobagent-host",
                           password=USERS["mobagent-host"], persistent=False) as rogue:
            await rogue.publish(topics.device_instructions(serial),
                                Instruction(id="from-host", text="not allowed"))
            await rogue.publish(topics.fleet_instructions(),
                                Instruction(id="from-host-2", text="not allowed"))
        # ...and a client may not read instructions nor forge events.
        async with bus_for(address, "snoop", username="mobagent-client",
                           password=USERS["mobagent-client"], persistent=False) as snoop:
            await snoop.subscribe(topics.all_instructions_filter())
            await client.instruct(serial, Instruction(id="ok-2", text="seen only by the host"))
            await client.wait_finished(["ok-2"], timeout_s=20)
            with anyio.move_on_after(0.5):
                async for topic, _ in snoop.messages():
                    pytest.fail(f"a client read an instruction on {topic}")
        # Fleet-wide instructions pass the ACL too (the host reads them through $share/).
        await client.instruct(None, Instruction(id="ok-3", text="any free phone"))
        await client.wait_finished(["ok-3"], timeout_s=20)
        await anyio.sleep(0.5)

    assert set(client.finished_ids()) == {"ok-1", "ok-2", "ok-3"}
    assert [iid for _, iid, _ in work.ran] == ["ok-1", "ok-2", "ok-3"]
    assert typed_tokens(fleet.phone(serial)) == ["ok-1.1", "ok-2.1", "ok-3.1"]
    log = broker.log_path.read_text()
    assert USERS["mobagent-host"] not in log and USERS["mobagent-client"] not in log
