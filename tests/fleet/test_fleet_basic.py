"""The fleet on one host: parallel phones, busy phones (queue, rejection, ids, Cancel).

Real mosquitto, a real adb server, simulated phones (recording stand-ins) behind it.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from host.fleet import FleetConfig
from protocol.messages import Cancel, Instruction
from runtime import topics
from runtime.bus import parse_broker_url
from sim.fleet import SimFleet
from tests.fixtures.mosquitto import MosquittoBroker
from tests.fleet.helpers import (
    MAX_PAYLOAD,
    ScriptedWork,
    fleet_client,
    fleet_host,
    tap_point,
    tapped,
    token,
    typed_tokens,
)

pytestmark = pytest.mark.anyio


async def test_eight_phones_run_eight_episodes_at_once_without_misrouting(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet]
) -> None:
    fleet = sim_fleet(count=8, stand_in=True)
    address = parse_broker_url(mosquitto.url)
    work = ScriptedWork(steps=3, step_s=0.3)
    async with fleet_host(address, fleet.serials, work) as fm, fleet_client(address) as client:
        ids = {serial: f"par-{i}" for i, serial in enumerate(fleet.serials)}
        for serial, iid in ids.items():
            await client.instruct(serial, Instruction(id=iid, text=f"do {iid}"))
        await client.wait_finished(list(ids.values()), timeout_s=40)
        for serial in fleet.serials:
            await client.wait_status(serial, "idle")
        # All eight were busy at the same time: replaying the status stream in the order the
        # broker delivered it, some moment has every phone busy (an order, not a clock).
        state: dict[str, str] = {}
        most_busy = 0
        for who, st, _ in client.status:
            state[who] = st.state
            most_busy = max(most_busy, sum(1 for v in state.values() if v == "busy"))
        assert most_busy == 8, f"at most {most_busy} of 8 phones were busy at once"
        assert fm.stats.finished == {"succeeded": 8}
    finished = client.finished_ids()
    for serial, iid in ids.items():
        assert finished[iid].status == "succeeded"
        assert finished[iid].device == serial
        phone = fleet.phone(serial)
        # Each phone shows exactly its own task's effects, in order, and nobody else's.
        assert typed_tokens(phone) == [token(iid, s) for s in (1, 2, 3)]
        assert tapped(phone) == [tap_point(iid, s) for s in (1, 2, 3)]
    assert sorted(s for s, _, _ in work.ran) == sorted(fleet.serials)


async def test_busy_phone_queues_rejects_dedupes_and_cancels(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet]
) -> None:
    fleet = sim_fleet(count=1, stand_in=True)
    serial = fleet.serials[0]
    phone = fleet.phone(serial)
    address = parse_broker_url(mosquitto.url)
    work = ScriptedWork(steps=40, step_s=0.1)
    cfg = FleetConfig(serials=[serial], max_queued_per_device=2, cancel_grace_s=3.0)
    async with fleet_host(address, [serial], work, config=cfg) as fm, \
            fleet_client(address) as client:
        short = Instruction(id="b", text="second", max_steps=2)
        await client.instruct(serial, Instruction(id="a", text="first"))
        with anyio.fail_after(10):
            await work.started["a"].wait()
        await client.instruct(serial, short)
        await client.instruct(serial, Instruction(id="c", text="third", max_steps=2))
        await client.instruct(serial, Instruction(id="d", text="fourth: over the limit"))
        await client.instruct(serial, Instruction(id="a", text="first, again"))  # duplicate id
        await client.instruct(serial, Instruction(id="x" * 3, text="y" * 500))  # over 200 chars
        await client.wait_finished(["d"], timeout_s=10)
        assert fm.queued(serial) == ["b", "c"]
        assert fm.running(serial) == "a"
        rejected = client.finished_ids()["d"]
        assert (rejected.status, rejected.device) == ("failed", serial)
        assert "queue is full" in rejected.reason
        assert any(e.correlation_id == "d" and "queue is full" in e.detail for e in client.errors)
        with anyio.fail_after(10):
            while not any(e.correlation_id == "xxx" for e in client.errors):  # noqa: ASYNC110 (polling)
                await anyio.sleep(0.05)
        assert "limit is 200" in next(e.detail for e in client.errors if e.correlation_id == "xxx")
        # Oversized and malformed payloads never reach the fleet: the bus answers with an
        # Error on the host's events topic, and the phone keeps working.
        topic = topics.device_instructions(serial)
        await client.bus.publish_raw(topic, b'{"kind": "instruction", "id": "big", "text": "'
                                     + b"x" * MAX_PAYLOAD + b'"}')
        await client.bus.publish_raw(topic, b'{"kind": "instruction", "id": ')
        await client.bus.publish_raw(topic, b'{"kind": "cancel"}')  # wrong kind for the topic
        with anyio.fail_after(10):
            while len([e for e in client.errors if e.reason.startswith("rejected:")]) < 3:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        reasons = sorted(e.reason for e in client.errors if e.reason.startswith("rejected:"))
        assert reasons == ["rejected: malformed", "rejected: oversized",
                           "rejected: unexpected kind"], reasons

        # Cancel the queued "c": removed, reported cancelled, never started.
        await client.bus.publish(topics.device_control(serial),
                                 Cancel(correlation_id="c", reason="changed my mind"))
        await client.wait_finished(["c"], timeout_s=10)
        assert client.finished_ids()["c"].status == "cancelled"
        assert fm.queued(serial) == ["b"]
        # Cancel the running "a": it stops at its next safe point.
        await client.bus.publish(topics.device_control(serial), Cancel(reason="stop now"))
        await client.wait_finished(["a", "b"], timeout_s=20)

    fin = client.finished_ids()
    assert fin["a"].status == "cancelled" and fin["a"].reason == "stop now"
    assert fin["b"].status == "succeeded"
    assert [iid for _, iid, _ in work.ran] == ["a", "b"]  # a once (the duplicate ignored), b
    assert [s.instruction_id for s in client.started].count("a") == 1
    assert "c" not in {s.instruction_id for s in client.started}
    typed = typed_tokens(phone)
    a_steps = [t for t in typed if t.startswith("a.")]
    assert 0 < len(a_steps) < 40  # cancelled part-way
    assert [t for t in typed if not t.startswith("a.")] == [token("b", 1), token("b", 2)]


async def test_cancel_is_enforced_after_the_grace_period(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet]
) -> None:
    """A worker that never reaches a safe point is stopped hard after ``cancel_grace_s``."""
    fleet = sim_fleet(count=1, stand_in=True)
    serial = fleet.serials[0]
    address = parse_broker_url(mosquitto.url)
    work = ScriptedWork(steps=100, step_s=0.1, ignore_cancel=True)
    cfg = FleetConfig(serials=[serial], cancel_grace_s=1.0)
    async with fleet_host(address, [serial], work, config=cfg), fleet_client(address) as client:
        await client.instruct(serial, Instruction(id="stubborn", text="never stops"))
        with anyio.fail_after(10):
            await work.started["stubborn"].wait()
        t0 = anyio.current_time()
        await client.bus.publish(topics.device_control(serial),
                                 Cancel(correlation_id="stubborn", reason="enough"))
        await client.wait_finished(["stubborn"], timeout_s=10)
        took = anyio.current_time() - t0
        fin = client.finished_ids()["stubborn"]
        assert fin.status == "cancelled" and "grace" in fin.reason
        assert 0.9 <= took < 5
        assert await client.wait_status(serial, "idle") > 0


def test_a_handle_runs_every_closer_newest_first_even_when_one_fails() -> None:
    from typing import Any

    from host.fleet import DeviceHandle

    ran: list[str] = []

    def failing() -> None:
        ran.append("failing")
        raise RuntimeError("clean-up bug")

    none: Any = None
    handle = DeviceHandle(serial="s1", host="h", generation=1, adb=none, bus=none, device=none)
    handle.closers += [lambda: ran.append("first"), failing, lambda: ran.append("last")]
    handle.close()
    handle.close()  # each runs once
    assert ran == ["last", "failing", "first"]


async def test_fleet_log_lines_name_their_phone(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet]
) -> None:
    """The gate and the fleet bind the phone into the log context once (per instruction,
    per control message, per phone group): every line about a phone names it, right."""
    import io
    import json
    import logging

    import structlog

    from runtime.config import LogConfig
    from runtime.log import configure_logging

    fleet = sim_fleet(count=2, stand_in=True)
    address = parse_broker_url(mosquitto.url)
    work = ScriptedWork(steps=1, step_s=0.05)
    out = io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    configure_logging(LogConfig(format="json", level="info"), stream=out)
    ids = {f"log-{i}": serial for i, serial in enumerate(fleet.serials)}
    try:
        async with fleet_host(address, fleet.serials, work), fleet_client(address) as client:
            for iid, serial in ids.items():
                await client.instruct(serial, Instruction(id=iid, text=f"do {iid}"))
            await client.wait_finished(list(ids), timeout_s=30)
            await client.instruct(fleet.serials[0], Instruction(id="log-0", text="again"))
            # Nothing runs there now: the fleet says so, naming the phone.
            await client.bus.publish(topics.device_control(fleet.serials[1]), Cancel())
            for _ in range(200):  # the lines come from the host's own tasks: poll the log
                if all(e in out.getvalue() for e in ("instruction_duplicate",
                                                     "fleet_cancel_nothing_running")):
                    break
                await anyio.sleep(0.05)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        structlog.reset_defaults()
    lines = [json.loads(ln) for ln in out.getvalue().splitlines() if ln.startswith("{")]

    def devices(event: str) -> dict[str, str]:
        return {ln["id"]: ln["device"] for ln in lines if ln["event"] == event}

    for event in ("instruction_accepted", "fleet_instruction_queued", "fleet_episode_finished"):
        assert devices(event) == ids, (event, devices(event))
    assert devices("instruction_duplicate") == {"log-0": fleet.serials[0]}
    online = [ln["device"] for ln in lines if ln["event"] == "fleet_device_online"]
    assert sorted(online) == sorted(fleet.serials)
    assert [ln["device"] for ln in lines
            if ln["event"] == "fleet_cancel_nothing_running"] == [fleet.serials[1]]
    assert "device" not in structlog.contextvars.get_contextvars()  # nothing leaked out
