"""The dashboard's state folding, per-browser pacing and controls, without a network."""

from __future__ import annotations

import pytest

from host.dashboard.app import is_loopback
from host.dashboard.controls import ControlError, control_message
from host.dashboard.feed import ClientFeed, FrameGate, Hub
from host.dashboard.state import Change, FleetState
from protocol.messages import (
    Answer,
    Approve,
    Cancel,
    DeviceStatus,
    EpisodeFinished,
    EpisodeStarted,
    Error,
    Frame,
    Instruction,
    LlmUsage,
    Plan,
    Question,
    Screen,
    Steer,
    StepTiming,
)
from protocol.operations import ClickText
from runtime import topics


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def ev(serial: str, msg: object) -> str:
    return topics.device_event(serial, msg)  # type: ignore[arg-type]


def started(state: FleetState, serial: str = "p1", episode: str = "e1") -> None:
    state.apply(topics.device_status(serial), DeviceStatus(state="busy", host="h", device=serial))
    state.apply(ev(serial, EpisodeStarted), EpisodeStarted(
        instruction_id="i1", text="open settings", device=serial, episode_id=episode))


def test_frame_gate_caps_the_rate_and_drops_stale_frames() -> None:
    clock = Clock()
    gate = FrameGate(max_fps=2.0, clock=clock)
    gate.offer("p1", "f0", "src0")
    assert gate.due() == [("p1", "f0", "src0")]
    for i in range(1, 10):  # nine more within the same half second
        gate.offer("p1", f"f{i}", f"src{i}")
    assert gate.due() == []
    assert gate.next_due_in() == pytest.approx(0.5)
    clock.t += 0.5
    assert gate.due() == [("p1", "f9", "src9")]  # only the newest; f1..f8 were dropped
    assert (gate.sent, gate.dropped) == (2, 8)
    assert gate.next_due_in() is None


def test_frame_gate_paces_each_phone_on_its_own() -> None:
    clock = Clock()
    gate = FrameGate(max_fps=1.0, clock=clock)
    gate.offer("p1", "a", "a")
    assert [s for s, _, _ in gate.due()] == ["p1"]
    gate.offer("p1", "b", "b")
    gate.offer("p2", "c", "c")
    assert [s for s, _, _ in gate.due()] == ["p2"]  # p1 waits its interval, p2 does not


def test_tile_follows_the_episode_and_the_header_counts() -> None:
    clock = Clock()
    state = FleetState(clock=clock)
    started(state)
    tile = state.phones["p1"].tile
    assert (tile.status, tile.instruction, tile.episode_id) == ("busy", "open settings", "e1")
    ids = {"device": "p1", "episode_id": "e1", "step": 1}
    state.apply(ev("p1", Plan), Plan(observation="", thought="tap it", action="Tap (1, 2)",
                                     operation=ClickText(text="Wi-Fi"), **ids))
    state.apply(ev("p1", LlmUsage), LlmUsage(model="m", prompt_tokens=100, completion_tokens=20,
                                             cost_usd=0.01, **ids))
    state.apply(ev("p1", StepTiming), StepTiming(phases={"llm": 0.1}, total_s=0.2, **ids))
    assert (tile.step, tile.thought, tile.tokens) == (1, "tap it", 120)
    assert "Wi-Fi" in tile.action
    head = state.header()
    assert head["by_status"]["busy"] == 1 and head["running"] == 1
    assert (head["steps_per_min"], head["tokens_per_min"]) == (1, 120)
    clock.t += 61  # a minute later the rates have emptied
    assert state.header()["tokens_per_min"] == 0
    state.apply(ev("p1", Error), Error(topic="t", reason="boom", device="p1"))
    assert state.header()["errors_5min"] == 1
    state.apply(ev("p1", EpisodeFinished), EpisodeFinished(
        instruction_id="i1", status="succeeded", steps=1, device="p1", episode_id="e1"))
    state.apply(topics.device_status("p1"), DeviceStatus(state="idle", device="p1"))
    assert tile.status == "idle"
    assert state.phones["p1"].past[0]["status"] == "succeeded"
    assert state.header()["running"] == 0


def test_waiting_for_a_question_or_an_approval() -> None:
    state = FleetState()
    started(state)
    tile = state.phones["p1"].tile
    state.apply(topics.device_control("p1"), Question(text="which one?", device="p1",
                                                      episode_id="e1", step=2))
    assert (tile.status, tile.waiting_for, tile.question) == ("waiting", "question", "which one?")
    state.apply(topics.device_control("p1"), Answer(text="the first", device="p1"))
    assert tile.status == "busy"
    state.apply(topics.device_status("p1"), DeviceStatus(
        state="busy", device="p1", detail="awaiting approval (step 3): Tap 'Buy'"))
    assert tile.waiting_for == "approval"


def test_a_phone_that_needs_attention_is_counted_apart_with_its_fix() -> None:
    state = FleetState()
    # a detail as the fleet's preflight writes it (devices/preflight.py, the keyguard check)
    fix = ("keyguard: locked with a PIN, pattern or password — unlock the phone by hand, or "
           "set Screen lock to None on a test phone: mobagent never types into a lock screen")
    state.apply(topics.device_status("p1"), DeviceStatus(state="attention", device="p1",
                                                         detail=fix))
    state.apply(topics.device_status("p2"), DeviceStatus(state="offline", device="p2"))
    tile = state.phones["p1"].tile.as_json()
    assert (tile["status"], tile["detail"]) == ("attention", fix)
    by_status = state.header()["by_status"]
    assert (by_status["attention"], by_status["offline"]) == (1, 1)


def test_queue_holds_instructions_until_they_start_or_are_refused() -> None:
    state = FleetState()
    state.apply(topics.device_instructions("p1"), Instruction(id="i1", text="a", device="p1"))
    state.apply(topics.fleet_instructions(), Instruction(id="i2", text="b"))
    assert [q["instruction_id"] for q in state.queue_of("p1")] == ["i1", "i2"]
    assert state.header()["queued"] == 2
    started(state)  # i1 starts
    state.apply(ev("p1", Error), Error(topic="x", reason="refused", correlation_id="i2"))
    assert state.queue_of("p1") == []


def test_timeline_steps_render_with_the_reports_templates() -> None:
    state = FleetState()
    started(state)
    hub = Hub(state, max_fps=2.0)
    feed = hub.connect()
    feed.view("p1")
    feed.drain(state)
    ids = {"device": "p1", "episode_id": "e1", "step": 1}
    frame = Frame(frame_id="fr1", sha256="x", width=100, height=200, format="jpeg",
                  data=b"\xff\xd8", **ids)
    hub.changed(state.apply(ev("p1", Frame), frame))
    hub.changed(state.apply(ev("p1", Plan), Plan(
        observation="", thought="<script>x</script>", action="Tap (5, 5)", **ids)))
    hub.screen("p1", "fr1", "data:image/jpeg;base64,AAAA")
    out = feed.drain(state)
    steps = [m for m in out if m["type"] == "step"]
    assert len(steps) == 1 and steps[0]["n"] == 1  # coalesced: one message for the step
    html = steps[0]["html"]
    assert 'data-step="1"' in html and "data:image/jpeg;base64,AAAA" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert [m["frame_id"] for m in out if m["type"] == "frame"] == ["fr1"]


def test_a_screen_from_the_bus_is_the_tiles_image_and_the_timelines_frame() -> None:
    """The host's small JPEG goes to the page as it came: no decoding, no full frame."""
    import base64

    from host.dashboard.config import DashboardSettings
    from host.dashboard.server import Dashboard, subscriptions
    from runtime.actor import topic_matches

    dash = Dashboard(DashboardSettings())
    started(dash.state)
    feed = dash.hub.connect()
    feed.view("p1")
    feed.drain(dash.state)
    jpeg = b"\xff\xd8 not decoded by the dashboard \xff\xd9"
    ids = {"device": "p1", "episode_id": "e1", "step": 1}
    dash.apply(topics.device_screen("p1"), Screen(frame_id="fr1", width=1080, height=2400,
                                                  data=jpeg, **ids))
    dash.apply(topics.device_screen("p2"), Screen(frame_id="fr2", width=1, height=1,
                                                  data=jpeg, **ids))  # names another phone
    src = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode()
    out = feed.drain(dash.state)
    assert [(m["frame_id"], m["src"]) for m in out if m["type"] == "frame"] == [("fr1", src)]
    frames = [e for e in dash.state.phone("p1").timeline.events  # type: ignore[union-attr]
              if e["event"] == "frame"]
    assert [(e["frame_id"], e["width"], e["height"], e["_src"]) for e in frames] == [
        ("fr1", 1080, 2400, src)]
    assert dash.state.phone("p1").tile.frame_id == "fr1"
    assert "p2" not in dash.state.phones
    # The dashboard takes the screens and every event but the full frames.
    subs = subscriptions()
    assert any(topic_matches(topics.device_screen("p1"), f) for f in subs)
    assert not any(topic_matches(topics.device_event("p1", Frame), f) for f in subs)
    for kind in (Plan, EpisodeStarted, EpisodeFinished, LlmUsage, StepTiming, Error):
        assert any(topic_matches(topics.device_event("p1", kind), f) for f in subs)


def test_a_feed_coalesces_tiles_and_only_sends_the_viewed_phones_steps() -> None:
    feed = ClientFeed(max_fps=1.0)
    state = FleetState()
    started(state, "p1")
    started(state, "p2", "e2")
    for _ in range(5):
        feed.mark(Change("tile", "p1"))
        feed.mark(Change("step", "p1", 1))
    feed.view("p2")
    feed.drain(state)  # the full phone view
    feed.mark(Change("step", "p1", 1))
    assert feed.drain(state) == []  # p1 is not being viewed


def test_controls_are_the_bus_messages_submit_and_the_control_topic_use() -> None:
    state = FleetState()
    with pytest.raises(ControlError, match="no phone"):
        control_message({"type": "cancel", "serial": "p1"}, state)
    state.apply(topics.device_status("p1"), DeviceStatus(state="idle", device="p1"))
    with pytest.raises(ControlError, match="runs no episode"):
        control_message({"type": "cancel", "serial": "p1"}, state)
    topic, msg = control_message({"type": "submit", "serial": "p1", "text": " go "}, state)
    assert topic == topics.device_instructions("p1")
    assert isinstance(msg, Instruction) and (msg.text, msg.device) == ("go", "p1")
    assert msg.correlation_id == msg.id
    topic, msg = control_message({"type": "submit", "text": "anyone"}, state)
    assert topic == topics.fleet_instructions() and isinstance(msg, Instruction)
    started(state)
    for req, kind in [({"type": "cancel"}, Cancel), ({"type": "steer", "text": "left"}, Steer),
                      ({"type": "approve", "approved": False}, Approve),
                      ({"type": "answer", "text": "yes"}, Answer)]:
        topic, msg = control_message({**req, "serial": "p1"}, state)
        assert topic == topics.device_control("p1")
        assert isinstance(msg, kind) and msg.episode_id == "e1"
    for bad in [{"type": "fly"}, {"type": "submit", "text": "  "},
                {"type": "approve", "serial": "p1", "approved": "yes"},
                {"type": "steer", "serial": "a/b", "text": "x"},
                {"type": "submit", "serial": "p1", "text": "x" * 3000}]:
        with pytest.raises(ControlError):
            control_message(bad, state)


@pytest.mark.parametrize(("bind", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("192.0.2.7", False), ("dash.example", False)])
def test_only_loopback_goes_without_a_token(bind: str, loopback: bool) -> None:
    assert is_loopback(bind) is loopback


def test_the_header_counts_grounded_targets_by_source() -> None:
    from protocol.messages import Box, Grounded

    state = FleetState()
    started(state)
    for source in ("exact", "grounder", "grounder"):
        g = Grounded(frame_id="f", x=1, y=2, box=Box(0, 0, 4, 4), source=source,
                     device="p1", episode_id="e1", step=1)
        assert Change("header") in state.apply(ev("p1", g), g)
    assert state.header()["grounded_by"] == {"exact": 1, "grounder": 2}
