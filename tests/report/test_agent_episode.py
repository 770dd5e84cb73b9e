"""End to end: a real episode (real actors, simulated phone through real adb, real OCR),
recorded by the Recorder, rendered, and opened in headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from protocol.messages import Instruction, Msg
from protocol.operations import Back, ClickText, OpenApp, Operation
from recording.recorder import Recorder
from recording.report import render_report
from tests.report.conftest import open_in_chromium
from tests.report.test_report import Steps

pytestmark = [pytest.mark.anyio, pytest.mark.needs_adb, pytest.mark.slow]


class RecorderBus:
    """The agent's publisher: every event goes to the recorder twice (QoS 1 redelivery)."""

    def __init__(self) -> None:
        self.recorder: Recorder | None = None

    async def publish(self, topic: str, msg: Msg, *, qos: int = 1, retain: bool = False) -> None:
        if self.recorder is not None and "/events/" in topic:
            await self.recorder.handle(topic, msg)  # type: ignore[arg-type]
            await self.recorder.handle(topic, msg)  # type: ignore[arg-type]


async def test_real_episode_renders(tmp_path: Path, sim_fleet: Any) -> None:
    from actors.config import AgentSettings
    from actors.episode import DeviceAgent
    from actors.perception import PerceptionEngine
    from actors.planner import ScriptedPolicy
    from devices.adb import AdbDevice

    fleet = sim_fleet(count=1)
    serial = fleet.serials[0]
    bus = RecorderBus()
    run = tmp_path / "run"
    bus.recorder = Recorder(bus, run)
    ops: list[Operation] = [OpenApp("Settings"), ClickText("Network & internet"), Back()]
    agent = DeviceAgent(bus, AdbDevice(serial), settings=AgentSettings(settle_s=0.05),
                        perception=PerceptionEngine(),
                        policy_for=lambda instr: ScriptedPolicy(ops))
    # The recorder reads every frame's bytes: its lease (as agent_host's record_dir holds).
    agent.services.leases.hold("recorder", frames=True)
    outcome = await agent.run_episode(Instruction(
        id="i-e2e", text="Open Settings, then <i>Network & internet</i>", device=serial,
        episode_id="ep-e2e"))
    assert outcome.status == "succeeded", outcome
    assert bus.recorder.failed == 0 and bus.recorder.duplicates == bus.recorder.recorded
    _check(run, tmp_path)


def _check(run: Path, tmp_path: Path) -> None:
    events = [json.loads(x) for x in (run / "ep-e2e" / "events.jsonl").read_text().splitlines()]
    steps = sorted({e["step"] for e in events
                    if e["event"] not in ("episode_started", "episode_finished")})
    frames = [e for e in events if e["event"] == "frame"]
    assert len(steps) >= len([OpenApp, ClickText, Back]) and frames
    page = open_in_chromium(render_report(run), tmp_path, size=(1280, 1400))
    assert page.body_attr("data-images-total") == str(len(frames))
    assert page.body_attr("data-images-loaded") == str(len(frames))
    parsed = Steps()
    parsed.feed(page.dom)
    assert [int(s["data-step"] or -1) for s in parsed.steps] == steps
    # the tap on "Network & internet" is drawn where the actuator tapped
    tap = next(e for e in events if e["event"] == "action_done" and e["x"] is not None)
    i = steps.index(tap["step"])
    circle = next(a for t, a in parsed.shapes[i] if a.get("class") == "tap")
    assert (int(float(circle["cx"] or 0)), int(float(circle["cy"] or 0))) == (tap["x"], tap["y"])
    assert "&lt;i&gt;Network" in page.dom and "<i>Network" not in page.dom
