"""An outcome the broker lost to a SIGKILL is had again by re-sending the instruction.

mosquitto saves its sessions only at autosave (and on SIGTERM): a SIGKILL before one
loses the client's persistent session, so an EpisodeFinished published once the broker is
back, before that client has subscribed again, has no subscriber and is dropped, though the
host's publish was acknowledged. The submitter's side of the contract is the same as for a
lost instruction: send it again with its id; a host that has finished it answers with the
same outcome again (same episode id), and never runs it twice.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import anyio
import pytest

from protocol.messages import Instruction
from runtime.bus import parse_broker_url
from sim.fleet import SimFleet
from tests.fixtures.mosquitto import MosquittoBroker
from tests.fleet.helpers import ScriptedWork, fleet_client, fleet_host

pytestmark = pytest.mark.anyio


async def test_an_outcome_lost_to_a_broker_sigkill_comes_again_on_a_resend(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet]
) -> None:
    fleet = sim_fleet(count=1, stand_in=True)
    serial = fleet.serials[0]
    address = parse_broker_url(mosquitto.url)
    work = ScriptedWork(steps=3, step_s=1.0)
    instr = Instruction(id="k1", text="job k1")
    async with fleet_host(address, fleet.serials, work) as fm:
        async with fleet_client(address) as client:
            await client.instruct(serial, instr)
            with anyio.fail_after(20):
                while not client.started:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            episode = client.started[0].episode_id
        # The client is away; the broker dies unsaved (no autosave yet): its session is gone.
        await anyio.to_thread.run_sync(mosquitto.restart, signal.SIGKILL)
        with anyio.fail_after(30):
            while fm.stats.finished.get("succeeded", 0) < 1:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        async with fleet_client(address) as client:
            await anyio.sleep(1.0)
            assert "k1" not in client.finished_ids(), "the broker kept the outcome after all"
            await client.instruct(serial, instr)  # the submitter asks again, same id
            await client.wait_finished(["k1"], timeout_s=10)
            fin = client.finished_ids()["k1"]
    assert fin.status == "succeeded" and fin.episode_id == episode
    assert [iid for _, iid, _ in work.ran] == ["k1"]  # answered, not run again
