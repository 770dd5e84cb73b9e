"""The hosts make screens only while a dashboard watches, and a dashboard opened after the
phones ran still shows every phone the moment it opens (real mosquitto, the host's real
agent services on stand-in phones)."""

from __future__ import annotations

import anyio
import pytest
import websockets

from actors.config import AgentSettings
from actors.perception_remote import RemoteTimes
from actors.rpc import new_request_id
from actors.services import AgentServices
from host.dashboard.server import Dashboard
from protocol.messages import Frame, FrameRequest, Screen
from runtime import topics
from runtime.actor import run_actors
from tests.agent.test_watching import Phone, screen_of
from tests.dashboard.conftest import client_bus, dashboard, next_of, ws_url
from tests.fixtures.mosquitto import MosquittoBroker

pytestmark = [pytest.mark.anyio, pytest.mark.needs_mosquitto]
SERIALS = ("p1", "p2")


async def test_a_dashboard_opened_later_shows_every_phone_at_once(
    mosquitto: MosquittoBroker, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A short lease: a dashboard cancelled with its connection cannot say it goes, so the
    # host stops its screens when the lease runs out (renewed each third of it till then).
    monkeypatch.setattr(Dashboard, "lease_s", 1.5)
    settings = AgentSettings()
    async with client_bus(mosquitto, "screens-host") as bus, \
            client_bus(mosquitto, "screens-watch") as watch:
        await watch.subscribe(topics.all_screens_filter())
        # no perception here: nothing in this test reads text
        services = AgentServices(bus, remote_perception=RemoteTimes(30.0, 15.0))
        for i, serial in enumerate(SERIALS):
            services.register(Phone(serial, screen_of(i + 1)), settings)  # type: ignore[arg-type]
        screens: list[Screen] = []

        async def collect() -> None:
            async for _, msg in watch.messages():
                if isinstance(msg, Screen):
                    screens.append(msg)

        async def shoot(serial: str, step: int) -> Frame:
            got = await services.requests.call(FrameRequest(
                request_id=new_request_id(), device=serial, step=step), timeout_s=20,
                expect=(Frame,))
            assert isinstance(got, Frame)
            return got

        async with anyio.create_task_group() as tg:
            await tg.start(run_actors, bus, services.actors())
            tg.start_soon(collect)
            # The phones run with nobody watching: no screens, no full frames on the bus.
            latest = {s: (await shoot(s, 1)).frame_id for s in SERIALS}
            await anyio.sleep(0.5)
            assert screens == []
            async with dashboard(mosquitto) as page, websockets.connect(ws_url(page)) as ws:
                shown = {}
                for _ in SERIALS:  # at once: from the frames the host holds
                    msg = await next_of(ws, "frame", lambda m: m["serial"] not in shown,
                                        timeout_s=10)
                    shown[msg["serial"]] = msg["frame_id"]
                    assert msg["src"].startswith("data:image/jpeg;base64,")
                assert shown == latest
                # ... and each new frame's screen while it watches
                fresh = await shoot("p1", 2)
                await next_of(ws, "frame", lambda m: m["frame_id"] == fresh.frame_id,
                              timeout_s=10)
            # Closed: its lease ends (said, or run out), and the screens stop.
            await anyio.sleep(Dashboard.lease_s + 0.5)
            assert not any(services.leases.screens(s) for s in SERIALS)
            before = len(screens)
            await shoot("p2", 3)
            await anyio.sleep(0.5)
            assert len(screens) == before
            tg.cancel_scope.cancel()
