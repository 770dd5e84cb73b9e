"""``mobagent mcp`` driven by the MCP SDK's own client, over stdio and streamable HTTP.

The fleet is real: mosquitto, two rendered SimPhones on the session's adb server, the
assembled agent host (``agent_host``) planning through the loopback OpenAI-compatible
server. The model's replies depend on the job named in the instruction (``job-...``), so
each test scripts its phone's episode through the instruction text alone:

- ``job-ok``: Back, then Stop (two steps);
- ``job-ask``: Ask a question, then Stop (the next prompt must carry the answer);
- ``job-slow``: Wait, every call, each reply 0.3 s late (until cancelled).
"""

from __future__ import annotations

import io
import re
import sys
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types as mt
from mcp.client.streamable_http import streamable_http_client
from PIL import Image, ImageChops

from actors.config import AgentSettings, DeviceSettings
from actors.perception import PerceptionEngine
from actors.planner import LLMPolicy, RoleSetup
from host.fleet import FleetConfig
from host.mcp.cli import serve_http
from host.mcp.config import McpConfig, McpSettings
from host.mcp.link import Link
from host.runner import AgentHostConfig, agent_host
from models.llm import LLMClient, LLMSettings, RoleModels
from runtime.config import BusConfig, HostConfig
from sim.fleet import SimFleet
from tests.fixtures.adb import AdbServer
from tests.fixtures.mosquitto import MosquittoBroker
from tests.fixtures.openai_server import Behaviour, OpenAIServer, RecordedRequest, planner_reply

pytestmark = [pytest.mark.anyio, pytest.mark.needs_mosquitto, pytest.mark.needs_adb]

ROOT = Path(__file__).resolve().parents[2]
JOB = re.compile(r"job-[a-z]+-\d+")


class Model:
    """The loopback model's script, by job; ``prompts`` keeps every request's text."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = defaultdict(int)
        self.prompts: dict[str, list[str]] = defaultdict(list)

    def __call__(self, req: RecordedRequest) -> Behaviour:
        text = "\n".join(req.texts())
        m = JOB.search(text)
        job = m.group(0) if m else "?"
        self.calls[job] += 1
        self.prompts[job].append(text)
        n = self.calls[job]
        thought = f"working on {job}, call {n}"
        if job.startswith("job-slow"):
            return Behaviour.reply(planner_reply("Wait", thought=thought), delay_s=0.3)
        if job.startswith("job-ask") and n == 1:
            return Behaviour.reply(planner_reply("Ask (Which colour?)", thought=thought))
        if job.startswith("job-ok") and n == 1:
            return Behaviour.reply(planner_reply("Back", thought=thought))
        return Behaviour.reply(planner_reply("Stop", thought=thought))


class Fleet:
    def __init__(self, sims: SimFleet, model: Model, mosquitto: MosquittoBroker,
                 adb: AdbServer) -> None:
        self.sims, self.model, self.broker, self.adb = sims, model, mosquitto.url, adb

    @property
    def serials(self) -> list[str]:
        return list(self.sims.serials)

    def screencap(self, serial: str) -> Image.Image:
        png = self.adb.client().device(serial).shell("screencap -p", encoding=None)
        return Image.open(io.BytesIO(png)).convert("RGB")


@pytest.fixture
async def fleet(mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet],
                adb_server: AdbServer) -> AsyncIterator[Fleet]:
    sims = sim_fleet(count=2)
    model = Model()
    settings = AgentSettings(settle_s=0.05, wait_s=0.1, max_steps=40, speculative_ocr=False,
                             ocr_hints=False, completion_check=False, loop_guard=1000,
                             revisit_guard=1000, frame_format="png", ask_timeout_s=60)
    cfg = AgentHostConfig(
        bus=BusConfig(url=mosquitto.url), host=HostConfig(name="mcp-test-host"), agent=settings,
        # frames by adb's screencap (the scrcpy stream's are decoded video: near, not equal)
        device=DeviceSettings(transport="adb"),
        fleet=FleetConfig(serials=list(sims.serials), adb_port=adb_server.port,
                          max_queued_per_device=0, cancel_grace_s=2.0))
    with OpenAIServer(policy=model) as srv:
        llm_cfg = LLMSettings(base_url=srv.base_url, api_key="sk-mcp-test",
                              models=RoleModels(planner="p", chooser="c", reflector="r"),
                              timeout_s=10.0, max_retries=1, max_concurrent=8)
        async with LLMClient(llm_cfg) as llm, anyio.create_task_group() as tg:
            host = agent_host(cfg, lambda _s, _i: LLMPolicy(llm, RoleSetup.from_settings(
                llm.settings)), perception=PerceptionEngine())
            await tg.start(host.run)
            yield Fleet(sims, model, mosquitto, adb_server)
            tg.cancel_scope.cancel()


async def wait_idle(session: ClientSession, serials: list[str], timeout_s: float = 30) -> None:
    with anyio.fail_after(timeout_s):
        while True:
            res = await session.call_tool("list_phones", {})
            assert not res.is_error, res
            phones = {p["serial"]: p for p in res.structured_content["phones"]}
            if all(phones.get(s, {}).get("status") == "idle" for s in serials):
                return
            await anyio.sleep(0.2)


def error_text(res: mt.CallToolResult) -> str:
    assert res.is_error, res
    return " ".join(c.text for c in res.content if isinstance(c, mt.TextContent))


class Progress:
    def __init__(self) -> None:
        self.messages: list[str] = []
        self.values: list[float] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.values.append(progress)
        self.messages.append(message or "")


@asynccontextmanager
async def stdio_session(broker: str, record: Path, **kw: Any) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "host.mcp", "--broker", broker, "--record", str(record),
              "--set", "bus.connect_timeout_s=2"],
        cwd=str(ROOT))
    async with stdio_client(params) as (read, write), \
            ClientSession(read, write, **kw) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_server(broker: str, record: Path, **settings: Any) -> AsyncIterator[str]:
    cfg = McpConfig(bus=BusConfig(url=broker, connect_timeout_s=2),
                    mcp=McpSettings(port=0, record_dir=str(record), **settings))
    link = Link(cfg)
    async with anyio.create_task_group() as tg:
        await tg.start(link.run)
        url = await tg.start(lambda task_status: serve_http(link, cfg.mcp, out=io.StringIO(),
                                                            task_status=task_status))
        yield url
        tg.cancel_scope.cancel()


@asynccontextmanager
async def http_session(url: str, **kw: Any) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as streams, \
            ClientSession(streams[0], streams[1], **kw) as session:
        await session.initialize()
        yield session


# ---- stdio ---------------------------------------------------------------------------------


async def test_stdio_runs_an_instruction_asks_through_elicitation_and_takes_screenshots(
    fleet: Fleet, tmp_path: Path
) -> None:
    asked: list[str] = []

    async def elicit(_ctx: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        asked.append(params.message)
        return mt.ElicitResult(action="accept", content={"answer": "blue please"})

    s0, s1 = fleet.serials
    async with stdio_session(fleet.broker, tmp_path, elicitation_callback=elicit) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert {"list_phones", "run_instruction", "cancel", "steer", "answer", "screenshot",
                "recent_events"} <= names
        await wait_idle(session, [s0, s1])
        phones = (await session.call_tool("list_phones", {})).structured_content["phones"]
        assert sorted(p["serial"] for p in phones) == sorted(fleet.serials)
        assert {p["model"] for p in phones} == {fleet.sims.phone(s).info.model for s in fleet.serials}

        # An instruction to success: one progress notification per planned step.
        prog = Progress()
        res = await session.call_tool("run_instruction", {"instruction": "Do job-ok-1 please",
                                                          "serial": s0},
                                      progress_callback=prog, read_timeout_seconds=60)
        assert not res.is_error, res
        out = res.structured_content
        assert out["outcome"] == "succeeded", out
        assert out["serial"] == s0 and out["steps"] == 2
        assert [n["operation"] for n in out["step_log"]] == ["Back", "Stop"]
        assert out["tokens"] > 0
        assert await anyio.Path(out["report"]).is_file()
        assert len(prog.messages) >= out["steps"]
        assert "Back" in prog.messages[0] and "job-ok-1, call 1" in prog.messages[0]
        assert "Stop" in prog.messages[1]
        assert prog.values == sorted(set(prog.values))  # increasing, as the spec says

        # The agent's question reaches the person through elicitation; the answer goes on.
        res = await session.call_tool("run_instruction", {"instruction": "Do job-ask-1",
                                                          "serial": s1},
                                      read_timeout_seconds=60)
        assert not res.is_error, res
        assert res.structured_content["outcome"] == "succeeded"
        assert asked and "Which colour?" in asked[0]
        assert "blue please" in fleet.model.prompts["job-ask-1"][1]

        # The resources: each phone's status, the finished episodes and their reports.
        uris = {str(r.uri) for r in (await session.list_resources()).resources}
        assert f"mobagent://phones/{s0}/status" in uris
        ep = out["episode_id"]
        assert {f"mobagent://episodes/{ep}", f"mobagent://episodes/{ep}/report.html"} <= uris
        read = await session.read_resource(f"mobagent://episodes/{ep}/report.html")
        assert "<html" in read.contents[0].text.lower()

        # recent_events: the phone's own last events, the outcome among them.
        ev = (await session.call_tool("recent_events", {"serial": s0, "n": 50})
              ).structured_content["events"]
        assert any(e.get("event") == "episode_finished" and e.get("episode_id") == ep
                   for e in ev)
        assert all(e.get("device") in (s0, "") for e in ev)

        # The screenshot is the phone's screen, pixel for pixel.
        shot = await session.call_tool("screenshot", {"serial": s0})
        assert not shot.is_error, shot
        img = next(c for c in shot.content if isinstance(c, mt.ImageContent))
        assert img.mime_type == "image/png"
        import base64

        got = Image.open(io.BytesIO(base64.b64decode(img.data))).convert("RGB")
        want = await anyio.to_thread.run_sync(fleet.screencap, s0)
        assert got.size == want.size
        assert ImageChops.difference(got, want).getbbox() is None

        # An unknown phone: an error that names the fix.
        res = await session.call_tool("run_instruction", {"instruction": "Do job-ok-9",
                                                          "serial": "no-such-phone"})
        assert "unknown phone 'no-such-phone'" in error_text(res)
        assert "list_phones" in error_text(res)
        res = await session.call_tool("screenshot", {"serial": "no-such-phone"})
        assert "list_phones" in error_text(res)


async def test_stdio_with_a_dead_broker_answers_with_the_fix(tmp_path: Path) -> None:
    with anyio.fail_after(30):
        async with stdio_session("mqtt://127.0.0.1:9", tmp_path) as session:
            for tool, args in (("list_phones", {}),
                               ("run_instruction", {"instruction": "Do job-ok-1"})):
                text = error_text(await session.call_tool(tool, args))
                assert "does not answer" in text and "mobagent serve" in text, text


# ---- streamable HTTP ----------------------------------------------------------------------


async def test_http_two_clients_cancel_busy_timeout_and_answer_without_elicitation(
    fleet: Fleet, tmp_path: Path
) -> None:
    s0, s1 = fleet.serials
    async with http_server(fleet.broker, tmp_path) as url, \
            http_session(url) as a, http_session(url) as b:
        await wait_idle(a, [s0, s1])

        # Two clients, two phones, at once: each sees only its own progress.
        pa, pb = Progress(), Progress()
        results: dict[str, mt.CallToolResult] = {}

        async def run(session: ClientSession, job: str, serial: str, prog: Progress) -> None:
            results[job] = await session.call_tool(
                "run_instruction", {"instruction": f"Do {job}", "serial": serial},
                progress_callback=prog, read_timeout_seconds=60)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, a, "job-ok-2", s0, pa)
            tg.start_soon(run, b, "job-ok-3", s1, pb)
        for job, serial in (("job-ok-2", s0), ("job-ok-3", s1)):
            out = results[job].structured_content
            assert out["outcome"] == "succeeded" and out["serial"] == serial, out
        assert len(pa.messages) >= 2 and len(pb.messages) >= 2
        assert all("job-ok-2" in m for m in pa.messages), pa.messages
        assert all("job-ok-3" in m for m in pb.messages), pb.messages

        # A cancel (from the other client) ends the running episode; a second instruction
        # to the busy phone (its queue holds none) is refused with the fix.
        slow: dict[str, mt.CallToolResult] = {}

        async def run_slow() -> None:
            slow["r"] = await a.call_tool("run_instruction", {"instruction": "Do job-slow-1",
                                                              "serial": s0},
                                          read_timeout_seconds=60)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_slow)
            with anyio.fail_after(20):
                while True:
                    phones = (await b.call_tool("list_phones", {})).structured_content["phones"]
                    if any(p["serial"] == s0 and p["status"] == "busy" for p in phones):
                        break
                    await anyio.sleep(0.1)
            busy = await b.call_tool("run_instruction", {"instruction": "Do job-ok-4",
                                                         "serial": s0})
            text = error_text(busy)
            assert "queue is full" in text and "cancel" in text, text
            res = await b.call_tool("cancel", {"serial": s0})
            assert not res.is_error, res
        out = slow["r"].structured_content
        assert out["outcome"] == "cancelled", out

        # A timeout: an error that says the episode runs on, and how to follow or stop it.
        await wait_idle(a, [s0])
        res = await a.call_tool("run_instruction", {"instruction": "Do job-slow-2",
                                                    "serial": s0, "timeout_s": 1.0})
        text = error_text(res)
        assert "timeout" in text and "follow_instruction" in text and "cancel" in text, text
        assert not (await a.call_tool("cancel", {"serial": s0})).is_error

        # Without elicitation the question comes back as the result, with the way to answer.
        await wait_idle(a, [s1])
        res = await b.call_tool("run_instruction", {"instruction": "Do job-ask-2",
                                                    "serial": s1}, read_timeout_seconds=60)
        out = res.structured_content
        assert out["outcome"] == "waiting_for_answer", out
        assert out["question"] == "Which colour?" and "answer(" in out["next"]
        assert not (await b.call_tool("answer", {"serial": s1, "text": "green"})).is_error
        res = await b.call_tool("follow_instruction", {"instruction_id": out["instruction_id"]},
                                read_timeout_seconds=60)
        assert res.structured_content["outcome"] == "succeeded", res
        assert "green" in fleet.model.prompts["job-ask-2"][1]


async def test_http_off_loopback_needs_the_token(mosquitto: MosquittoBroker,
                                                 tmp_path: Path) -> None:
    async with http_server(mosquitto.url, tmp_path, bind="0.0.0.0", token="s3cret-t0ken") as url:
        url = url.replace("0.0.0.0", "127.0.0.1")

        def post(headers: dict[str, str]) -> int:
            req = urllib.request.Request(url, data=b"{}", method="POST", headers={
                "content-type": "application/json", "accept": "application/json, "
                "text/event-stream", **headers})
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    return int(resp.status)
            except urllib.error.HTTPError as exc:
                return int(exc.code)

        assert await anyio.to_thread.run_sync(post, {}) == 401
        assert await anyio.to_thread.run_sync(
            post, {"authorization": "Bearer wrong"}) == 401
        import httpx2

        async with httpx2.AsyncClient(headers={"authorization": "Bearer s3cret-t0ken"}) as hc, \
                streamable_http_client(url, http_client=hc) as streams, \
                ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            res = await session.call_tool("list_phones", {})
            assert not res.is_error, res


