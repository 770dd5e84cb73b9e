"""Faults: a phone dropped mid-episode, and two hosts splitting fleet-wide instructions."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import anyio
import pytest

from host.fleet import OFFLINE_REASON, FleetConfig
from protocol.messages import Instruction
from runtime.bus import parse_broker_url
from sim.fleet import SimFleet
from tests.fixtures.adb import AdbServer
from tests.fixtures.mosquitto import MosquittoBroker
from tests.fleet.helpers import ScriptedWork, fleet_client, fleet_host, token, typed_tokens

pytestmark = pytest.mark.anyio


async def test_phone_dropped_mid_episode_fails_cleanly_and_returns_to_idle(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet]
) -> None:
    fleet = sim_fleet(count=2, stand_in=True)
    victim, bystander = fleet.serials
    address = parse_broker_url(mosquitto.url)
    work = ScriptedWork(steps=30, step_s=0.1)
    async with fleet_host(address, fleet.serials, work) as fm, fleet_client(address) as client:
        await client.instruct(victim, Instruction(id="doomed", text="will lose its phone"))
        await client.instruct(bystander, Instruction(id="calm", text="unaffected", max_steps=25))
        await client.instruct(victim, Instruction(id="later", text="queued behind", max_steps=2))
        with anyio.fail_after(10):
            await work.started["doomed"].wait()
            await work.started["calm"].wait()
        await anyio.sleep(0.5)
        fleet.phone(victim).faults.drop_connections = True
        await client.wait_finished(["doomed"], timeout_s=20)
        doomed = client.finished_ids()["doomed"]
        assert (doomed.status, doomed.reason, doomed.device) == ("failed", OFFLINE_REASON, victim)
        await client.wait_status(victim, "offline", timeout_s=20)
        assert fm.queued(victim) == ["later"]  # a queued instruction waits for the phone

        fleet.phone(victim).faults.drop_connections = False
        await anyio.to_thread.run_sync(fleet.restart, victim)
        back = anyio.current_time()
        idle_at = await client.wait_status(victim, "idle", timeout_s=10)
        assert idle_at - back <= 5.0, f"idle {idle_at - back:.1f}s after the phone returned"
        await client.wait_finished(["calm", "later"], timeout_s=30)

    fin = client.finished_ids()
    assert fin["calm"].status == "succeeded"  # nothing else was disturbed
    assert fin["later"].status == "succeeded"
    assert [f.instruction_id for f in client.finished].count("doomed") == 1
    assert typed_tokens(fleet.phone(bystander)) == [token("calm", s) for s in range(1, 26)]
    gens = {iid: gen for serial, iid, gen in work.ran if serial == victim}
    assert gens["later"] == gens["doomed"] + 1  # the phone's group was restarted


async def test_two_hosts_on_mqtt5_split_fleet_instructions(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet]
) -> None:
    fleet = sim_fleet(count=4, stand_in=True)
    address = parse_broker_url(mosquitto.url)
    work_a, work_b = ScriptedWork(steps=1, step_s=0.2), ScriptedWork(steps=1, step_s=0.2)
    serials = fleet.serials
    async with fleet_host(address, serials[:2], work_a, host="host-a") as a, \
            fleet_host(address, serials[2:], work_b, host="host-b") as b, \
            fleet_client(address) as client:
        assert getattr(a.bus, "protocol", None) == "5"  # shared subscriptions in use
        ids = [f"f{i:02d}" for i in range(16)]
        for iid in ids:
            await client.instruct(None, Instruction(id=iid, text=f"fleet job {iid}"))
        await client.wait_finished(ids, timeout_s=60)
        await anyio.sleep(0.3)
    runs = Counter(iid for _, iid, _ in work_a.ran + work_b.ran)
    assert runs == Counter(ids), "each fleet instruction runs exactly once, on one host"
    assert work_a.ran and work_b.ran, "both hosts took a share"
    assert {s for s, _, _ in work_a.ran} <= set(serials[:2])
    assert {s for s, _, _ in work_b.ran} <= set(serials[2:])
    typed = Counter(t for s in serials for t in typed_tokens(fleet.phone(s)))
    assert typed == Counter(token(iid, 1) for iid in ids)
    assert all(f.status == "succeeded" for f in client.finished)
    assert a.stats.accepted + b.stats.accepted == len(ids)


async def test_hot_plugged_phone_is_discovered_and_unplugged_goes_offline(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet]
) -> None:
    """track_devices: a phone connected after the host started gets a group and runs work."""
    address = parse_broker_url(mosquitto.url)
    work = ScriptedWork(steps=1, step_s=0.0)
    cfg = FleetConfig()  # every phone adb lists
    async with fleet_host(address, [], work, config=cfg, wait_idle=False) as fm, \
            fleet_client(address) as client:
        with anyio.fail_after(10):
            while not fm.ready:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        before = set(fm.devices())
        fleet = await anyio.to_thread.run_sync(lambda: sim_fleet(count=1, stand_in=True))
        serial = fleet.serials[0]
        phone = fleet.phone(serial)
        assert serial not in before
        t0 = anyio.current_time()
        idle_at = await client.wait_status(serial, "idle", timeout_s=10)
        assert idle_at - t0 < 5
        await client.instruct(serial, Instruction(id="plugged", text="hello new phone"))
        await client.wait_finished(["plugged"], timeout_s=15)
        assert client.finished_ids()["plugged"].status == "succeeded"
        await anyio.to_thread.run_sync(fleet.stop)  # unplug: adb disconnect
        await client.wait_status(serial, "offline", timeout_s=10)
        assert fm.devices()[serial] == "offline"
    assert typed_tokens(phone) == [token("plugged", 1)]


async def test_stopping_adb_tracking_is_quiet_when_its_socket_is_already_closed(
    adb_server: AdbServer,
) -> None:
    """The fleet's stop at bench shutdown: the tracking thread may close its socket before
    the second ``stop``; that ends the tracking (no ``AdbError: Connection is closed``
    turning the cancellation into an actor crash)."""
    from devices.discovery import AdbDevices, _Tracker

    tracker = _Tracker("127.0.0.1", adb_server.port)
    conn = await anyio.to_thread.run_sync(tracker._client.make_connection)
    conn.close()  # what adbutils does when track_devices ends
    tracker.stop()
    tracker.stop()  # and again: idempotent

    source = AdbDevices("127.0.0.1", adb_server.port)
    for _ in range(5):  # cancelled while tracking, as FleetManager.stop cancels discovery
        with anyio.move_on_after(0.3) as scope:
            async with source.changes() as changes:
                async for _change in changes:
                    pass
        assert scope.cancelled_caught
