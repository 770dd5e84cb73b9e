"""The fleet's preflight: a phone that cannot work says why in its status and in the
outcome of the episodes it does not start; phones adb lists but cannot use are shown.

Real mosquitto, a real adb server, simulated phones (recording stand-ins) behind it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import pytest

from devices.adb import ADB_KEYBOARD
from devices.discovery import DeviceChange
from host.fleet import FleetConfig
from protocol.messages import Instruction
from runtime.bus import parse_broker_url
from sim.fleet import SimFleet
from tests.fixtures.mosquitto import MosquittoBroker
from tests.fleet.helpers import ScriptedWork, fleet_client, fleet_host

pytestmark = pytest.mark.anyio


async def test_a_phone_without_its_keyboard_starts_no_episode_until_fixed(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet]
) -> None:
    fleet = sim_fleet(count=1, stand_in=True)
    serial = fleet.serials[0]
    phone = fleet.phone(serial)
    phone.ime_ids = ["com.android.inputmethod.latin/.LatinIME"]  # type: ignore[attr-defined]
    address = parse_broker_url(mosquitto.url)
    work = ScriptedWork(steps=1)
    cfg = FleetConfig(serials=[serial], need_keyboard=True, recheck_s=0.3, adb_timeout_s=10.0)
    async with fleet_host(address, [serial], work, config=cfg, wait_idle=False) as fm, \
            fleet_client(address) as client:
        await client.wait_status(serial, "attention", timeout_s=20)
        detail = [s for who, s, _ in client.status if who == serial][-1].detail
        assert detail.startswith("needs attention: keyboard ") and "devices setup" in detail
        await client.instruct(serial, Instruction(id="p1", text="do it"))
        await client.wait_finished(["p1"])
        fin = client.finished_ids()["p1"]
        assert fin.status == "failed" and fin.reason.startswith(f"not started: {serial} needs "
                                                                "attention: keyboard")
        assert not work.ran and not client.started
        phone.ime_ids = [*phone.ime_ids, ADB_KEYBOARD]  # type: ignore[attr-defined]
        await client.wait_status(serial, "idle", timeout_s=10)
        await client.instruct(serial, Instruction(id="p2", text="do it"))
        await client.wait_finished(["p2"])
        assert client.finished_ids()["p2"].status == "succeeded"
        assert fm.devices() == {serial: "idle"}


class Listed:
    """adb's listing of phones it cannot use (never online), and no changes after it."""

    def __init__(self, states: dict[str, str]) -> None:
        self.states = states

    def describe(self) -> str:
        return "a fixed listing"

    async def present(self) -> dict[str, str]:
        return dict(self.states)

    @asynccontextmanager
    async def changes(self) -> AsyncIterator[AsyncIterator[DeviceChange]]:
        send, recv = anyio.create_memory_object_stream[DeviceChange](0)
        with send, recv:
            yield recv

    async def ready(self, serial: str) -> bool:
        return False


async def test_phones_that_were_never_online_are_shown_with_their_fix(
    mosquitto: MosquittoBroker,
) -> None:
    states = {"R5CT1": "unauthorized", "R5CT2": "no permissions", "R5CT3": "offline"}
    address = parse_broker_url(mosquitto.url)
    cfg = FleetConfig(serials=list(states))
    async with fleet_client(address) as client, \
            fleet_host(address, list(states), ScriptedWork(), config=cfg, wait_idle=False,
                       source=Listed(states)) as fm:
        for serial in states:
            await client.wait_status(serial, "offline" if serial == "R5CT3" else "attention")
        got = {who: s.detail for who, s, _ in client.status}
        assert "accept the USB debugging prompt" in got["R5CT1"]
        assert "udev" in got["R5CT2"]
        assert got["R5CT3"].startswith("offline — ")
        assert fm.devices() == {"R5CT1": "attention", "R5CT2": "attention", "R5CT3": "offline"}


async def test_a_fleet_wide_instruction_goes_to_the_phone_that_can_work(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet]
) -> None:
    fleet = sim_fleet(count=2, stand_in=True)
    bad, good = fleet.serials
    fleet.phone(bad).ime_ids = []  # type: ignore[attr-defined]
    address = parse_broker_url(mosquitto.url)
    work = ScriptedWork(steps=1)
    cfg = FleetConfig(serials=fleet.serials, need_keyboard=True, adb_timeout_s=10.0)
    async with fleet_host(address, fleet.serials, work, config=cfg, wait_idle=False) as fm, \
            fleet_client(address) as client:
        await client.wait_status(bad, "attention", timeout_s=20)
        await client.wait_status(good, "idle", timeout_s=20)
        for i in range(3):
            await client.instruct(None, Instruction(id=f"f{i}", text="anyone"))
        await client.wait_finished([f"f{i}" for i in range(3)])
        assert {f.device for f in client.finished} == {good}
        assert all(f.status == "succeeded" for f in client.finished)
        # the outcome is published before the phone is marked idle again
        await client.wait_status(good, "idle", timeout_s=20)
        assert fm.devices() == {bad: "attention", good: "idle"}
