"""The actors with scripted (non-LLM) policies on a real SimPhone: change detection,
typing into a real field, the approval gate, Open app by launcher OCR, capture flags."""

from __future__ import annotations

import io
import json
from pathlib import Path

import anyio
import numpy as np
import pytest

from actors.actuator import ActuatorEngine, is_sensitive
from actors.capture import Captured, CaptureEngine, is_black, small_views
from actors.config import AgentConfig
from actors.episode import DeviceAgent
from actors.loop_guard import LoopGuard
from actors.perception import PerceptionEngine
from actors.planner import ScriptedPolicy
from actors.reflector import ReflectorEngine
from devices.adb import AdbDevice
from devices.discovery import FixedDevices
from host.client_cli import submit
from host.runner import agent_host
from protocol.messages import (
    ActionDone,
    Answer,
    Approve,
    Cancel,
    Frame,
    Grounded,
    GroundRequest,
    Reflection,
    Steer,
)
from protocol.operations import Ask, ClickText, Exit, OpenApp, TapPoint, TypeText
from runtime import topics
from runtime.bus import Bus
from runtime.config import BusConfig, HostConfig
from sim.phone.apps.notes import NotesState
from tests.agent.conftest import Run, SimDevice, fast_settings, run_episode, wait_for_status
from tests.agent.test_device import HOSTILE, UNICODE
from tests.fixtures.mosquitto import MosquittoBroker

pytestmark = [pytest.mark.anyio, pytest.mark.needs_adb]
NOTES = "com.mobagent.notes"


@pytest.mark.needs_mosquitto
async def test_frozen_screen_is_unchanged_within_one_step(
    sim_device: SimDevice, mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.open("com.android.settings")
    sim_device.phone.settle()
    sim_device.phone.faults.frozen = True
    policy = ScriptedPolicy([ClickText("Display")])
    run = await run_episode(mosquitto, AdbDevice(sim_device.serial), policy,
                            fast_settings(completion_check=False), shared_perception,
                            "Open display settings.")
    sim_device.phone.faults.frozen = False
    first = run.of(Reflection)[0]
    assert first.step == 1 and first.verdict == "unchanged", first
    frames = run.of(Frame)
    assert "identical" in frames[1].flags and "identical" not in frames[0].flags


@pytest.mark.needs_mosquitto
async def test_a_working_tap_is_ok_not_unchanged(
    sim_device: SimDevice, mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.open("com.android.settings")
    sim_device.phone.settle()
    policy = ScriptedPolicy([ClickText("Display")])
    run = await run_episode(mosquitto, AdbDevice(sim_device.serial), policy,
                            fast_settings(completion_check=False), shared_perception,
                            "Open display settings.")
    assert run.of(Reflection)[0].verdict == "ok"
    assert sim_device.phone.current_screen() == "com.android.settings/display"


@pytest.mark.needs_mosquitto
async def test_a_model_point_near_a_label_snaps_and_taps_it(
    sim_device: SimDevice, mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.open("com.android.settings")
    sim_device.phone.settle()
    lines = shared_perception.perception.read_text(sim_device.phone.screenshot()).lines
    x1, y1, _, y2 = next(ln.box for ln in lines if ln.text.strip() == "Display")
    # A coordinate family's point, a little left of the label: off the OCR line, within
    # agent.snap_radius_px of it alone (the line below is farther).
    point = TapPoint(int(x1) - 12, int((y1 + y2) / 2))
    run = await run_episode(mosquitto, AdbDevice(sim_device.serial), ScriptedPolicy([point]),
                            fast_settings(completion_check=False, snap_radius_px=24),
                            shared_perception, "Open display settings.")
    grounded = run.of(Grounded)
    assert [g.source for g in grounded] == ["snapped"]
    assert x1 < grounded[0].x and abs(grounded[0].y - (y1 + y2) / 2) <= 1  # the label's centre
    assert sim_device.phone.current_screen() == "com.android.settings/display"


async def test_typing_reaches_a_real_field_literally(sim_device: SimDevice) -> None:
    phone = sim_device.phone
    phone.open(NOTES, "edit")
    body = phone.find(id="body")[0]
    phone.tap_element(body)
    assert phone.focused_field() == "body"
    dev = AdbDevice(sim_device.serial)
    for text in [*HOSTILE, *UNICODE]:
        before = phone.state_as(NOTES, NotesState).draft_body
        await dev.type_text(text)
        after = phone.state_as(NOTES, NotesState).draft_body
        assert after == before + text, (text, after[len(before):])


async def test_open_app_by_launcher_ocr(
    sim_device: SimDevice, shared_perception: PerceptionEngine,
) -> None:
    """No package names it (com.zhiliaoapp.musically): go home, read the labels, tap the
    icon, look through the pages and the drawer if needed."""
    phone = sim_device.phone
    phone.key(3)
    dev = AdbDevice(sim_device.serial)
    cap = CaptureEngine(dev)
    act = ActuatorEngine(dev, packages={})

    async def read_screen() -> list[tuple[str, tuple[int, int, int, int]]]:
        c = await cap.capture()
        return [(ln.text, (ln.box.left, ln.box.top, ln.box.right, ln.box.bottom))
                for ln in await shared_perception.read_lines(c)]

    first = await cap.capture()
    res = await act.perform(OpenApp("TikTok"), point=None, size=(first.frame.width,
                                                                   first.frame.height),
                            read_screen=read_screen)
    assert "launcher icon" in res.detail
    assert phone.foreground() == "com.zhiliaoapp.musically"


async def test_perception_meters_its_cpu_per_device_and_grounding_latency(
    sim_device: SimDevice,
) -> None:
    sim_device.phone.key(3)
    cap = CaptureEngine(AdbDevice(sim_device.serial))
    c = await cap.capture()
    actor = PerceptionEngine()
    assert await actor.read_lines(c, "phone-1")
    spent = actor.ledger.total("phone-1")
    assert spent > 0 and not actor.meter.ground_s
    req = GroundRequest(frame_id=c.frame_id, operation=ClickText("Settings"), device="phone-1")
    assert isinstance(await actor.ground(req, c), Grounded)
    # the frame's OCR is cached: grounding adds little CPU, and one latency
    assert actor.ledger.total("phone-1") >= spent and len(actor.meter.ground_s) == 1
    assert set(actor.ledger.devices()) == {"phone-1"}


def test_sensitive_patterns() -> None:
    pats = ["send", r"\bpay\b", "delete"]
    assert is_sensitive(ClickText("Send"), pats) == "send"
    assert is_sensitive(TypeText("hello"), pats) is None
    assert is_sensitive(ClickText("Payment options"), pats) is None
    assert is_sensitive(ClickText("Pay now"), pats) == r"\bpay\b"
    assert is_sensitive(ClickText("x"), ["(unclosed"]) is None  # a bad pattern is a substring


def test_the_watchers_screen_is_small_with_or_without_the_llms_view() -> None:
    from devices.codecs import decode_rgb

    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 255, (2400, 1080, 3), dtype=np.uint8)
    view, screen = small_views(rgb, 1024, 85, 360)
    assert decode_rgb(view).shape == (1024, 461, 3)
    alone = small_views(rgb, 0, 85, 360)
    assert alone[0] == b""
    for jpeg in (screen, alone[1]):
        assert decode_rgb(jpeg).shape == (360, 162, 3)
    assert small_views(rgb, 0, 85, 0) == (b"", b"")
    # A view smaller than the screen: the screen comes from the frame, at its own side.
    assert decode_rgb(small_views(rgb, 200, 85, 360)[1]).shape == (360, 162, 3)


def test_black_frame_flag() -> None:
    assert is_black(np.zeros((100, 50, 3), np.uint8))
    assert not is_black(np.full((100, 50, 3), 200, np.uint8))


@pytest.mark.needs_mosquitto
async def test_sensitive_action_waits_for_approve(
    sim_device: SimDevice, mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.open("com.android.settings")
    sim_device.phone.settle()
    serial = sim_device.serial

    async def approve_later(agent: DeviceAgent, run: Run, ctl: Bus) -> None:
        await wait_for_status(run, "awaiting approval")
        await anyio.sleep(0.5)
        assert sim_device.phone.current_screen() == "com.android.settings/main"  # not yet
        await ctl.publish(topics.device_control(serial), Steer(text="take your time"))
        await ctl.publish(topics.device_control(serial), Approve(approved=True))

    run = await run_episode(
        mosquitto, AdbDevice(serial), ScriptedPolicy([ClickText("Display")]),
        fast_settings(completion_check=False, approval=True, sensitive_patterns=["display"]),
        shared_perception, "Open display settings.", during=approve_later)
    assert run.outcome is not None and run.outcome.status == "succeeded"
    assert sim_device.phone.current_screen() == "com.android.settings/display"
    done = run.of(ActionDone)
    assert done and done[0].ok


@pytest.mark.needs_mosquitto
async def test_sensitive_action_is_skipped_on_cancel(
    sim_device: SimDevice, mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.open("com.android.settings")
    sim_device.phone.settle()
    serial = sim_device.serial

    async def cancel_later(agent: DeviceAgent, run: Run, ctl: Bus) -> None:
        await wait_for_status(run, "awaiting approval")
        await ctl.publish(topics.device_control(serial), Cancel(reason="user said no"))

    run = await run_episode(
        mosquitto, AdbDevice(serial), ScriptedPolicy([ClickText("Display")]),
        fast_settings(completion_check=False, approval=True, sensitive_patterns=["display"]),
        shared_perception, "Open display settings.", during=cancel_later)
    assert run.outcome is not None and run.outcome.status == "cancelled"
    assert "user said no" in run.outcome.reason
    assert sim_device.phone.current_screen() == "com.android.settings/main"
    assert not run.of(ActionDone)


@pytest.mark.needs_mosquitto
async def test_rejected_approval_skips_and_goes_on(
    sim_device: SimDevice, mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.open("com.android.settings")
    sim_device.phone.settle()
    serial = sim_device.serial

    async def reject(agent: DeviceAgent, run: Run, ctl: Bus) -> None:
        await wait_for_status(run, "awaiting approval")
        await ctl.publish(topics.device_control(serial), Approve(approved=False, note="no"))

    run = await run_episode(
        mosquitto, AdbDevice(serial), ScriptedPolicy([ClickText("Display")]),
        fast_settings(completion_check=False, approval=True, sensitive_patterns=["display"]),
        shared_perception, "Open display settings.", during=reject)
    assert run.outcome is not None and run.outcome.status == "succeeded"
    assert sim_device.phone.current_screen() == "com.android.settings/main"
    done = run.of(ActionDone)
    assert len(done) == 1 and not done[0].ok and "not approved" in done[0].detail


def _captured(rgb: np.ndarray, n: int = 0) -> Captured:
    from actors.capture import pixel_sha

    sha = pixel_sha(rgb)
    frame = Frame(frame_id=f"{sha[:8]}-{n}", sha256=sha, width=rgb.shape[1],
                  height=rgb.shape[0], format="png", data=b"x")
    return Captured(frame, rgb, 0.0, 0.0)


async def test_reflector_verdicts() -> None:
    screen = np.full((400, 200, 3), 240, np.uint8)
    screen[200:260, 20:180] = (30, 90, 200)
    clock = screen.copy()
    clock[2:12, 150:190] = 0  # only the status-bar clock changed
    moved = screen.copy()
    moved[300:360, 20:180] = (200, 30, 30)
    r = ReflectorEngine(revisit_guard=3)
    tap = ClickText("Save")
    assert (await r.reflect(_captured(screen), _captured(clock), tap)).verdict == "unchanged"
    assert (await r.reflect(_captured(screen), _captured(moved), tap)).verdict == "ok"
    left = await r.reflect(_captured(screen), _captured(moved), tap,
                           app_before="com.mobagent.notes", app_after="com.android.launcher3")
    assert left.verdict == "wrong_page" and "home screen" in left.reason
    ok_exit = await r.reflect(_captured(screen), _captured(moved), Exit(),
                              app_before="com.mobagent.notes", app_after="com.android.launcher3")
    assert ok_exit.verdict == "wrong_page"  # the same screen, seen a third time now
    r.reset()
    assert (await r.reflect(_captured(screen), _captured(moved), Exit(),
                            app_before="a.b", app_after="com.android.launcher3")).verdict == "ok"
    guard = LoopGuard(3)
    same = _captured(screen).frame
    assert [guard.note_choice(same, tap) for _ in range(3)] == [1, 2, 3]
    v = guard.verdict(3, tap)
    assert v is not None and "3 times" in v
    assert guard.verdict(2, tap) is None
    assert guard.note_choice(_captured(moved).frame, tap) == 1  # another screen counts anew


@pytest.mark.needs_mosquitto
async def test_ask_waits_for_an_answer(
    sim_device: SimDevice, mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
) -> None:
    serial = sim_device.serial

    async def answer(agent: DeviceAgent, run: Run, ctl: Bus) -> None:
        status = await wait_for_status(run, "question")
        assert "Which colour?" in status.detail
        await ctl.publish(topics.device_control(serial), Answer(text="blue"))

    run = await run_episode(
        mosquitto, AdbDevice(serial), ScriptedPolicy([Ask("Which colour?")]),
        fast_settings(completion_check=False), shared_perception, "Pick a colour.",
        during=answer)
    done = run.of(ActionDone)
    assert len(done) == 1 and done[0].ok and done[0].detail == "answered: blue"


@pytest.mark.needs_mosquitto
async def test_an_instruction_over_the_bus_runs_and_is_recorded(
    sim_device: SimDevice, mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
    tmp_path: Path,
) -> None:
    """`mobagent submit` -> broker -> the host's gate -> the agent -> events -> recorder."""
    sim_device.phone.key(3)
    cfg = AgentConfig(bus=BusConfig(url=mosquitto.url), host=HostConfig(name="test-host"),
                      agent=fast_settings(completion_check=False))
    host = agent_host(cfg, lambda _s, _i: ScriptedPolicy([OpenApp("Settings")]),
                      source=FixedDevices([sim_device.serial]), record_dir=tmp_path,
                      perception=shared_perception)
    out = io.StringIO()
    async with anyio.create_task_group() as tg:
        await tg.start(host.run)  # started: the gate and the fleet are subscribed
        rc = await submit(cfg, sim_device.serial, "Open the settings.", instruction_id="bus-1",
                          task=None, timeout_s=90, as_json=True, out=out)
        await anyio.sleep(0.5)
        tg.cancel_scope.cancel()
    assert rc == 0, out.getvalue()
    assert '"status":"succeeded"' in out.getvalue().replace(" ", "")
    assert sim_device.phone.current_screen().startswith("com.android.settings/")
    recorded = [p async for p in anyio.Path(tmp_path).glob("*/events.jsonl")]
    assert len(recorded) == 1
    lines = (await recorded[0].read_text()).splitlines()
    kinds = {json.loads(line)["event"] for line in lines}
    assert {"episode_started", "frame", "plan", "action_done", "reflection", "step_timing",
            "episode_finished"} <= kinds
    # Capture makes a frame's bytes only for a reader: the host's recorder holds a lease,
    # so each recorded frame names its image, and the image is there.
    frames = [json.loads(line) for line in lines if json.loads(line)["event"] == "frame"]
    ep_dir = Path(str(recorded[0])).parent
    assert frames and all((ep_dir / f["file"]).read_bytes()[:2] == b"\xff\xd8" for f in frames)
    # The fleet announces the episode with the agent's episode-level choices (runs compare).
    started = next(json.loads(line) for line in lines
                   if json.loads(line)["event"] == "episode_started")
    assert started["settings"]["planning"] == cfg.agent.planning
    assert started["settings"]["max_prompt_tokens"] == str(cfg.llm.max_prompt_tokens)
    # The requests crossed the broker and were recorded too; the report renders them.
    assert {"frame_request", "act_request", "reflect_request"} <= kinds
    from recording.report import render_report

    page = render_report(tmp_path).read_text()
    assert "Open app (Settings)" in page or "Open app" in page
