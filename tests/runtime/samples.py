"""One realistic instance of every bus message type, for round-trip tests and benches."""

from __future__ import annotations

import hashlib
from typing import TypeVar

from protocol.messages import (
    MESSAGE_TYPES,
    ActionDone,
    ActRequest,
    Ambiguous,
    Answer,
    Approve,
    Box,
    Cancel,
    Candidate,
    Chosen,
    DeviceStatus,
    EpisodeFinished,
    EpisodeStarted,
    Error,
    Frame,
    FrameRequest,
    Grounded,
    GroundRequest,
    HostStatus,
    Instruction,
    LlmUsage,
    Message,
    NoteKept,
    NotFound,
    Plan,
    Progress,
    Question,
    ReadTextRequest,
    Reflection,
    ReflectRequest,
    Screen,
    Steer,
    StepTiming,
    TextLine,
    TextRead,
    Watching,
)
from protocol.operations import ClickIcon, ClickText, Swipe

IDS = {"device": "emulator-5554", "episode_id": "ep-1", "step": 3, "correlation_id": "c-9"}
IMAGE = bytes(range(256)) * 40  # not valid UTF-8, exercises binary transport

M = TypeVar("M", bound=Message)


def sample_of(kind: type[M]) -> M:
    """The sample of one message kind (by type: the list's order changes as kinds are added)."""
    return next(m for m in sample_messages() if isinstance(m, kind))


def sample_messages() -> list[Message]:
    msgs: list[Message] = [
        Instruction(id="i-1", text="Open Settings and turn on Wi‑Fi ✓", task="t-7", max_steps=20, **IDS),
        Cancel(reason="user asked", **IDS),
        Approve(approved=False, note="not that one", **IDS),
        Answer(text="the blue one", **IDS),
        Steer(text="use the search box", **IDS),
        Frame(frame_id="f-3", sha256=hashlib.sha256(IMAGE).hexdigest(), width=1080, height=1920,
              format="png", data=IMAGE, app="com.android.settings",
              lines=[TextLine("Wi-Fi", Box(40, 300, 200, 340))], **IDS),
        Watching(watcher="dash-1", screens=True, lease_s=30.0, device="emulator-5554"),
        Screen(frame_id="f-3", width=1080, height=1920, data=IMAGE[:100], flags=["identical"],
               **IDS),
        GroundRequest(frame_id="f-3", operation=ClickIcon(description="gear", position="top right"), **IDS),
        GroundRequest(frame_id="f-3", operation=ClickText(text="Wi-Fi"), request_id="r-9",
                      frame=Frame(frame_id="f-3", sha256="s", width=1080, height=1920,
                                  format="png", data=IMAGE, **IDS), **IDS),
        ReadTextRequest(frame_id="f-3", request_id="r-10",
                        frame=Frame(frame_id="f-3", sha256="s", width=1, height=1,
                                    format="jpeg", data=IMAGE[:100], **IDS), **IDS),
        TextRead(frame_id="f-3", lines=[TextLine("Wi-Fi", Box(40, 300, 200, 340))],
                 request_id="r-10", **IDS),
        Grounded(frame_id="f-3", x=540, y=960, box=Box(500, 900, 580, 1020), source="ocr", score=0.93, **IDS),
        Ambiguous(frame_id="f-3", candidates=[Candidate(1, Box(0, 0, 10, 10), "Wi-Fi"),
                                              Candidate(2, Box(0, 20, 10, 30), "Wi-Fi calling")],
                  marked_image=IMAGE[:1000], image_format="jpeg", **IDS),
        NotFound(frame_id="f-3", query="Bluetooth", closest=["Bluetooh", "Blue light"], **IDS),
        Chosen(frame_id="f-3", query="Wi-Fi", index=2, x=540, y=960,
               box=Box(500, 900, 580, 1020), **IDS),
        Plan(observation="Settings is open", thought="tap Wi-Fi", action="Click text (Wi-Fi)",
             operation=ClickText(text="Wi-Fi"), **IDS),
        ActionDone(operation=Swipe(direction="up"), ok=True, x=None, y=None, detail="", duration_s=0.2, **IDS),
        Reflection(verdict="wrong_page", reason="the keyboard opened", source="llm", **IDS),
        NoteKept(text="the price is $12.99", origin="field", **IDS),
        Progress(text="done: opened Settings; next: Wi-Fi", origin="call", **IDS),
        EpisodeStarted(instruction_id="i-1", text="Open Settings", task=None,
                       settings={"planning": "inline", "reflection": "both"}, **IDS),
        EpisodeFinished(instruction_id="i-1", status="succeeded", reason="done", steps=4, **IDS),
        DeviceStatus(state="busy", host="h1", detail="episode ep-1", **IDS),
        HostStatus(host="h1", state="online", devices=["emulator-5554"], version="0.1.0"),
        Error(topic="mobagent/v1/devices/x/instructions", reason="rejected: invalid", detail="d", **IDS),
        LlmUsage(model="gpt-4o", prompt_tokens=1200, completion_tokens=80, latency_s=1.5, purpose="plan", **IDS),
        StepTiming(phases={"capture": 0.1, "plan": 1.2}, total_s=1.4, **IDS),
        # the agent loop's requests (answered by the step events above) and its Ask
        Question(text="Which account?", **IDS),
        FrameRequest(request_id="r-1", purpose="step", **IDS),
        ActRequest(request_id="r-2", operation=ClickText(text="Wi-Fi"), frame_id="f-3", x=540,
                   y=960, width=1080, height=1920, **IDS),
        ReflectRequest(request_id="r-3", before_frame_id="f-3", after_frame_id="f-4",
                       operation=Swipe(direction="up"), app_before="com.android.settings", **IDS),
    ]
    assert {type(m) for m in msgs} == set(MESSAGE_TYPES), "a message type has no sample"
    return msgs
