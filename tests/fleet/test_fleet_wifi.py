"""Phones on Wi-Fi: one phone adb lists twice is driven once, and ``[fleet] connect``'s
phones are `adb connect`ed at start and again after they drop.

Real mosquitto, a real adb server, simulated phones (recording stand-ins) behind it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import pytest
from structlog.testing import capture_logs

from devices.discovery import ABSENT, DeviceChange, connect_address, is_network_serial
from devices.identity import PhoneIdentity
from host.fleet import FleetConfig, FleetManager
from protocol.messages import Instruction
from runtime.bus import parse_broker_url
from sim.fleet import SimFleet
from tests.fixtures.adb import AdbServer
from tests.fixtures.mosquitto import MosquittoBroker
from tests.fleet.helpers import ScriptedWork, fleet_client, fleet_host

pytestmark = pytest.mark.anyio


def test_usb_and_network_serials_are_told_apart() -> None:
    for usb in ("R5CT10ABCDE", "emulator-5554", "0123456789ABCDEF", "HT7A1B2C3D"):
        assert not is_network_serial(usb), usb
    for net in ("192.168.1.20:5555", "127.0.0.1:40123", "phone.lan:5555", "[fe80::1]:5555",
                "adb-R5CT10ABCDE-a1b2c3._adb-tls-connect._tcp"):
        assert is_network_serial(net), net
    assert connect_address("192.168.1.20") == "192.168.1.20:5555"
    assert connect_address(" 10.0.0.2:4444 ") == "10.0.0.2:4444"
    assert connect_address("[fe80::1]:5555") == "[fe80::1]:5555"


async def test_one_phone_on_two_serials_is_driven_once(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet], adb_server: AdbServer
) -> None:
    fleet = sim_fleet(count=2, stand_in=True)
    boot_id = fleet.phone(fleet.serials[0]).info.boot_id
    for serial in fleet.serials:  # both report the same phone, as USB and Wi-Fi would
        fleet.phone(serial).info.props["ro.serialno"] = "R5CT10SAME"
        fleet.phone(serial).info.boot_id = boot_id
    address = parse_broker_url(mosquitto.url)
    cfg = FleetConfig(serials=fleet.serials, adb_timeout_s=10.0, cancel_grace_s=2.0)
    async with fleet_host(address, fleet.serials, ScriptedWork(steps=1), config=cfg,
                          wait_idle=False) as fm, fleet_client(address) as client:
        with anyio.fail_after(20):
            while sorted(map(str, fm.devices().values())) != ["idle", "offline"]:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        kept = next(s for s, st in fm.devices().items() if st == "idle")
        dup = next(s for s in fleet.serials if s != kept)
        await client.wait_status(dup, "offline")
        detail = [s for who, s, _ in client.status if who == dup][-1].detail
        assert detail.startswith(f"duplicate of {kept}") and "R5CT10SAME" in detail
        await client.instruct(dup, Instruction(id="d1", text="on the duplicate"))
        await client.instruct(kept, Instruction(id="k1", text="on the phone"))
        await client.wait_finished(["d1", "k1"])
        got = client.finished_ids()
        assert got["d1"].status == "failed" and f"same phone as {kept}" in got["d1"].reason
        assert got["k1"].status == "succeeded"

        # The serial driven goes away (its cable pulled): the other takes over.
        fleet.drop(kept)
        adb_server.run("disconnect", kept)
        await client.wait_status(dup, "idle", timeout_s=20)
        assert fm.devices()[kept] == "offline"
        await client.instruct(dup, Instruction(id="d2", text="now through this one"))
        await client.wait_finished(["d2"])
        assert client.finished_ids()["d2"].status == "succeeded"


async def test_two_phones_of_one_factory_serial_are_both_driven_and_warned_about(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet],
) -> None:
    # Two low-cost phones report the same factory serial; each its own boot.
    fleet = sim_fleet(count=2, stand_in=True, device_profile="lowcost-10")
    phones = [fleet.phone(s) for s in fleet.serials]
    assert {p.info.serialno for p in phones} == {"0123456789ABCDEF"}
    assert phones[0].info.boot_id != phones[1].info.boot_id
    address = parse_broker_url(mosquitto.url)
    cfg = FleetConfig(serials=fleet.serials, adb_timeout_s=10.0, cancel_grace_s=2.0,
                      preflight=False)
    with capture_logs() as logs:
        async with fleet_host(address, fleet.serials, ScriptedWork(steps=1), config=cfg,
                              wait_idle=False) as fm, fleet_client(address) as client:
            for serial in fleet.serials:
                await client.wait_status(serial, "idle", timeout_s=20)
            ids = [f"s{i}" for i in range(len(fleet.serials))]
            for serial, iid in zip(fleet.serials, ids, strict=True):
                await client.instruct(serial, Instruction(id=iid, text="both phones work"))
            await client.wait_finished(ids)
            assert all(client.finished_ids()[i].status == "succeeded" for i in ids)
            assert fm.stats.duplicates == 0
    shared = [e for e in logs if e["event"] == "fleet_serialno_shared"]
    assert shared and shared[0]["serialno"] == "0123456789ABCDEF"
    assert "adb connect" in shared[0]["fix"]


async def test_a_wifi_phone_is_connected_at_start_and_again_after_a_drop(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet], adb_server: AdbServer
) -> None:
    fleet = sim_fleet(count=1, stand_in=True)
    serial = fleet.serials[0]
    adb_server.run("disconnect", serial)  # not connected: the fleet must do it
    assert adb_server.wait_state(serial, lambda s: s is None) is None
    address = parse_broker_url(mosquitto.url)
    # serials names another phone: a phone to connect is wanted all the same
    cfg = FleetConfig(serials=["R5CT-other"], connect=[serial], connect_check_s=0.3,
                      reconnect_max_s=1.0, adb_timeout_s=5.0, cancel_grace_s=2.0)
    async with fleet_host(address, [serial], ScriptedWork(steps=1), config=cfg,
                          wait_idle=False) as fm, fleet_client(address) as client:
        await client.wait_status(serial, "idle", timeout_s=20)
        assert fm.connector is not None and fm.connector.connects[serial] == 1
        assert fm.devices() == {serial: "idle"}

        # Wi-Fi drops: the phone's adbd is gone and adb forgets it; then it is back.
        fleet.drop(serial)
        adb_server.run("disconnect", serial)
        await client.wait_status(serial, "offline", timeout_s=20)
        await anyio.sleep(1.5)  # a few connects fail meanwhile (backing off)
        await anyio.to_thread.run_sync(lambda: fleet.resume(serial, connect=False))
        await client.wait_status(serial, "idle", timeout_s=20)
        assert fm.connector.connects[serial] == 2
        await client.instruct(serial, Instruction(id="w1", text="after the drop"))
        await client.wait_finished(["w1"])
        assert client.finished_ids()["w1"].status == "succeeded"


class Scripted:
    """adb's listing, then the changes a test sends (``send``)."""

    def __init__(self, states: dict[str, str]) -> None:
        self.states = states
        self._send, self._recv = anyio.create_memory_object_stream[DeviceChange](16)

    def describe(self) -> str:
        return "a scripted listing"

    async def present(self) -> dict[str, str]:
        return dict(self.states)

    @asynccontextmanager
    async def changes(self) -> AsyncIterator[AsyncIterator[DeviceChange]]:
        yield self._recv

    async def send(self, serial: str, state: str) -> None:
        self.states[serial] = state
        await self._send.send(DeviceChange(serial, state))

    async def ready(self, serial: str) -> bool:
        return self.states.get(serial) == "device"


async def test_the_usb_serial_replaces_an_idle_wifi_one_and_hands_back_when_unplugged(
    mosquitto: MosquittoBroker, monkeypatch: pytest.MonkeyPatch,
) -> None:
    wifi, usb = "192.168.1.20:5555", "R5CT10ABCDE"

    async def identity(self: FleetManager, serial: str) -> PhoneIdentity:
        # both serials are the same phone: the same serial, the same boot
        return PhoneIdentity("R5CT10ABCDE", "6fbd4e0e-3b1a-4c38-9a0e-0f7a2d5c1b11")

    monkeypatch.setattr(FleetManager, "_read_identity", identity)
    source = Scripted({wifi: "device"})
    address = parse_broker_url(mosquitto.url)
    cfg = FleetConfig(serials=[wifi, usb], preflight=False)
    async with fleet_host(address, [wifi, usb], ScriptedWork(), config=cfg, wait_idle=False,
                          source=source) as fm, fleet_client(address) as client:
        await client.wait_status(wifi, "idle")
        await source.send(usb, "device")  # plugged in: USB wins over an idle Wi-Fi serial
        await client.wait_status(usb, "idle")
        await client.wait_status(wifi, "offline")
        assert fm.devices() == {wifi: "offline", usb: "idle"}
        detail = [s for who, s, _ in client.status if who == wifi][-1].detail
        assert detail.startswith(f"duplicate of {usb}")
        await source.send(usb, ABSENT)  # unplugged: Wi-Fi takes over
        await client.wait_status(wifi, "idle")
        assert fm.devices() == {wifi: "idle", usb: "offline"}
