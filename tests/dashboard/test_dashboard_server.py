"""The dashboard against a real mosquitto: state over its WebSocket, controls onto the bus
as the right messages, and the token off loopback."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import anyio
import pytest
import websockets

from protocol.messages import DeviceStatus, EpisodeStarted, Instruction, Steer
from runtime import topics
from tests.dashboard.conftest import client_bus, dashboard, next_of, ws_url
from tests.fixtures.mosquitto import MosquittoBroker

pytestmark = [pytest.mark.anyio, pytest.mark.needs_mosquitto]


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 (loopback)
            return resp.status, resp.read().decode(), resp.headers.get("set-cookie", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), ""


async def test_a_control_from_the_websocket_reaches_the_bus(mosquitto: MosquittoBroker) -> None:
    async with client_bus(mosquitto, "dash-test") as bus, dashboard(mosquitto) as page:
        assert page.startswith("http://127.0.0.1:") and "token" not in page
        status, html, _ = await anyio.to_thread.run_sync(get, page)
        assert status == 200 and 'id="fleet"' in html
        await bus.subscribe(topics.device_control("p1"))
        await bus.subscribe(topics.device_instructions("p1"))
        await bus.publish(topics.device_status("p1"),
                          DeviceStatus(state="busy", host="h1", device="p1"), retain=True)
        await bus.publish(topics.device_event("p1", EpisodeStarted), EpisodeStarted(
            instruction_id="i1", text="open settings", device="p1", episode_id="e1"))
        async with websockets.connect(ws_url(page)) as ws:
            tile = await next_of(ws, "tile", lambda m: m["tile"]["episode_id"] == "e1")
            assert tile["tile"]["status"] == "busy"
            await ws.send(json.dumps({"type": "steer", "serial": "p1", "text": "scroll down",
                                      "ref": "a"}))
            ack = await next_of(ws, "ack")
            assert ack["ok"] and ack["ref"] == "a"
            await ws.send(json.dumps({"type": "submit", "serial": "p1", "text": "go home"}))
            got = []
            with anyio.fail_after(20):
                async for topic, msg in bus.messages():
                    got.append((topic, msg))
                    if len(got) == 2:
                        break
        (t1, steer), (t2, instr) = got
        assert t1 == topics.device_control("p1") and isinstance(steer, Steer)
        assert (steer.text, steer.device, steer.episode_id) == ("scroll down", "p1", "e1")
        assert t2 == topics.device_instructions("p1") and isinstance(instr, Instruction)
        assert (instr.text, instr.device) == ("go home", "p1")


async def test_off_loopback_the_page_the_socket_and_controls_need_the_token(
    mosquitto: MosquittoBroker,
) -> None:
    # Bound to every address (off loopback), reached through 127.0.0.1 only.
    async with client_bus(mosquitto, "dash-test") as bus, \
            dashboard(mosquitto, bind="0.0.0.0", token="s3cret-token") as page:
        assert page.endswith("?token=s3cret-token")
        bare = page.split("?")[0]
        status, body, _ = await anyio.to_thread.run_sync(get, bare)
        assert status == 401 and "s3cret" not in body
        status, _, _ = await anyio.to_thread.run_sync(get, bare + "?token=wrong")
        assert status == 401
        status, html, cookie = await anyio.to_thread.run_sync(get, page)
        assert status == 200 and "s3cret" not in html  # the token is a cookie, not in the page
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie
        for url in (ws_url(page), ws_url(page, "wrong")):
            with pytest.raises(websockets.InvalidStatus) as refused:
                async with websockets.connect(url):
                    pass
            assert refused.value.response.status_code == 403
        await bus.publish(topics.device_status("p1"),
                          DeviceStatus(state="idle", host="h1", device="p1"), retain=True)
        await bus.subscribe(topics.device_instructions("p1"))
        async with websockets.connect(ws_url(page, "s3cret-token")) as ws:
            await next_of(ws, "tile", lambda m: m["tile"]["serial"] == "p1")
            await ws.send(json.dumps({"type": "submit", "serial": "p1", "text": "hello"}))
            assert (await next_of(ws, "ack"))["ok"]
            with anyio.fail_after(20):
                async for _, msg in bus.messages():
                    assert isinstance(msg, Instruction) and msg.text == "hello"
                    break
        # A browser on another origin is refused even with the token.
        with pytest.raises(websockets.InvalidStatus):
            async with websockets.connect(ws_url(page, "s3cret-token"),
                                          origin="http://evil.example"):  # type: ignore[arg-type]
                pass


async def test_without_a_configured_token_one_is_made(mosquitto: MosquittoBroker) -> None:
    async with dashboard(mosquitto, bind="0.0.0.0") as page:
        token = page.split("?token=")[1]
        assert len(token) >= 24
        status, _, _ = await anyio.to_thread.run_sync(get, page.split("?")[0])
        assert status == 401
