"""The agent's message kinds: one step's requests and events, and the full bus vocabulary.

The runtime owns the envelope (``Msg``), the kinds it handles itself (instructions, control,
status, ``Error``) and the ``Codec``; this module adds the kinds of the agent loop and
hands the whole union to one ``Codec`` (``CODEC``). Everything outside ``runtime/`` imports
messages from here.

Requests (``FrameRequest``, ``GroundRequest``, ``ActRequest``, ``ReflectRequest``) carry a
``request_id``; their answers are the ordinary step events carrying the same id, so the
asker can match its reply while ``watch`` and the recorder see one stream of events.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Final, Literal, TypeAlias

import msgspec

from protocol.operations import Operation
from runtime.messages import (
    RUNTIME_KINDS,
    Answer,
    Approve,
    Cancel,
    Codec,
    DecodeError,
    DeviceStatus,
    Error,
    HostStatus,
    Instruction,
    Msg,
    NonEmpty,
    Question,
    Rejected,
    Steer,
    encode,
    is_binary,
    is_rejection,
    kind_of,
)

Coord = Annotated[int, msgspec.Meta(ge=0)]


class Box(msgspec.Struct, frozen=True, array_like=True):
    """A screen rectangle in pixels, as ``[left, top, right, bottom]`` on the wire."""

    left: int
    top: int
    right: int
    bottom: int

    @property
    def center(self) -> tuple[int, int]:
        return (self.left + self.right) // 2, (self.top + self.bottom) // 2


ImageFormat = Literal["png", "jpeg", "webp"]


class LlmCall(msgspec.Struct, frozen=True, kw_only=True):
    """One LLM call a host service made for a request (the grounder's, in a grounding
    answer): what the asker publishes as ``LlmUsage`` and counts in its episode's cost."""

    model: str
    role: str = ""
    prompt_tokens: Annotated[int, msgspec.Meta(ge=0)] = 0
    completion_tokens: Annotated[int, msgspec.Meta(ge=0)] = 0
    cached_tokens: Annotated[int, msgspec.Meta(ge=0)] = 0
    latency_s: float = 0.0
    cost_usd: float | None = None  # None when the model has no price
    attempts: int = 1

# ---- requests: the planner asks a host service, the answer is a step event ----------
#
# A request goes on ``devices/{serial}/requests/{kind}``; its ``request_id`` comes back in
# the reply (an event kind below), so the asker can match it. An ``Error`` with the same
# ``request_id`` is a failed request.


class FrameRequest(Msg, tag="frame_request", frozen=True):
    """Take a screenshot now; the reply is a ``Frame`` (or an ``Error``).

    ``view_side`` > 0 asks the capturing host to also keep a JPEG of the frame scaled to at
    most that side (at ``view_quality``) for the LLM, next to the decoded pixels; it stays
    on that host and never goes on the bus."""

    request_id: NonEmpty
    purpose: Literal["step", "stream", "read"] = "step"
    view_side: Annotated[int, msgspec.Meta(ge=0, le=8192)] = 0
    view_quality: Annotated[int, msgspec.Meta(ge=1, le=95)] = 85
    # What the asker needs besides the pixels, filled into the ``Frame`` by the capture
    # service: the foreground app (one adb call, alongside the screenshot) and the OCR
    # lines (read through the perception engine's bounded pool).
    app: bool = False
    ocr: bool = False
    # The asker is not on the capturing host (``mobagent mcp``'s screenshot) and needs the
    # frame's encoding in ``Frame.data``; on the host the pixels are in its frame store, so
    # the bytes are made only when something will read them (docs/architecture.md,
    # "Made only when read").
    data: bool = False


class GivenOutcome(msgspec.Struct, frozen=True):
    """An operation's outcome the planner decided without the phone: the target was not
    found, the user did not approve it, or the user answered an ``Ask``."""

    ok: bool
    detail: str = ""
    duration_s: Annotated[float, msgspec.Meta(ge=0)] = 0.0


class ActRequest(Msg, tag="act_request", frozen=True):
    """Perform ``operation`` (at ``x, y`` when it was grounded) on a ``width x height`` screen;
    the reply is an ``ActionDone``.

    With ``given`` nothing is performed: the actuator publishes that outcome as the
    ``ActionDone``, so every ``ActionDone`` comes from the actuator (one producer)."""

    request_id: NonEmpty
    operation: Operation
    frame_id: str = ""  # the frame the operation was chosen on
    x: int | None = None
    y: int | None = None
    width: Annotated[int, msgspec.Meta(ge=0)] = 0
    height: Annotated[int, msgspec.Meta(ge=0)] = 0
    given: GivenOutcome | None = None


Verdict = Literal["ok", "unchanged", "wrong_page", "loop", "incomplete", "complete"]


class GivenVerdict(msgspec.Struct, frozen=True):
    """A verdict the planner reached itself: the loop guard, the completion check, an
    unusable reply (``source=""``) or the LLM judge on the two screenshots (``"llm"``)."""

    verdict: Verdict
    reason: str = ""
    source: Literal["", "llm"] = ""


class ReflectRequest(Msg, tag="reflect_request", frozen=True):
    """Compare the frames before and after ``operation``; the reply is a ``Reflection``.

    With ``given`` nothing is compared: the reflector publishes that verdict as the
    ``Reflection``, so every ``Reflection`` comes from the reflector (one producer); the
    operation is then None when the planner had none (an unusable reply)."""

    request_id: NonEmpty
    before_frame_id: NonEmpty
    after_frame_id: NonEmpty
    operation: Operation | None = None  # required unless ``given``
    app_before: str = ""  # the foreground app before the action ("" unknown)
    given: GivenVerdict | None = None


# ---- one step, inside a device's actor group ---------------------------------------


class TextLine(msgspec.Struct, frozen=True, array_like=True):
    """One OCR line of a frame: its text and box (``[text, [l, t, r, b]]`` on the wire)."""

    text: str
    box: Box


class Frame(Msg, tag="frame", frozen=True):
    binary: ClassVar[bool] = True

    frame_id: NonEmpty
    sha256: str
    width: Coord
    height: Coord
    format: ImageFormat
    data: bytes
    flags: list[str] = []  # "identical" (same pixels as the previous frame), "black" (a
    # secure window), "display_off" (the phone was asleep: woken, then captured), "wake_failed"
    capture_path: str = ""  # "raw" | "png" | "stream": how the device delivered it
    request_id: str = ""  # the request this answers ("" when none)
    app: str = ""  # the foreground app, when the FrameRequest asked for it
    lines: list[TextLine] = []  # the OCR lines, when the FrameRequest asked for them


class Watching(Msg, tag="watching", frozen=True):
    """A watcher's interest, on ``fleet/watching``: capture makes a phone's ``Screen``
    (``screens``) and the encoding in ``Frame.data`` (``frames``) only while a lease says
    someone reads them (MQTT cannot tell a publisher who subscribes). ``device`` names one
    phone, "" every phone. The lease holds ``lease_s`` seconds from its arrival (the host's
    clock: the watcher's may differ); the watcher sends it again before then, and 0 ends it.
    A renewal replaces the lease of the same ``watcher`` and ``device``."""

    watcher: NonEmpty  # who watches (one id per process): its renewals replace its lease
    screens: bool = False
    frames: bool = False
    lease_s: Annotated[float, msgspec.Meta(ge=0, le=3600)] = 30.0


class Screen(Msg, tag="screen", frozen=True):
    """A small JPEG of a ``Frame`` (same ``frame_id``), for watchers such as the dashboard:
    on ``devices/{serial}/screen``, not an event, so the recorder and the step loop never
    receive it, and a watcher need not take the full frames. ``width`` and ``height`` are
    the full frame's (tap marks are drawn in its coordinates); ``data`` is at most
    ``agent.screen_side`` pixels on its longer side."""

    binary: ClassVar[bool] = True

    frame_id: NonEmpty
    width: Coord
    height: Coord
    data: bytes  # JPEG
    flags: list[str] = []  # the Frame's flags


class GroundRequest(Msg, tag="ground_request", frozen=True):
    """Turn the target of ``operation`` (a text or an icon) into a point on ``frame_id``."""

    binary: ClassVar[bool] = True  # it may carry the frame

    frame_id: NonEmpty
    operation: Operation
    request_id: str = ""  # matched by the answer (Grounded | Ambiguous | NotFound)
    # For a point operation: snap to the one element this near (agent.snap_radius_px).
    snap_radius_px: int = 24
    # The planner's thought this step: context for a grounding model (perception.*_grounding).
    thought: str = ""
    # The frame itself, for a perception worker in another process (agent.perception =
    # "remote"); None: by reference, from the host's frame store.
    frame: Frame | None = None
    # The episode's cost cap (agent.max_cost_usd; 0: none) and what its LLM calls cost so
    # far: a grounder call that could pass the cap at its worst cost is not sent.
    max_cost_usd: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    cost_usd: Annotated[float, msgspec.Meta(ge=0)] = 0.0


class ReadTextRequest(Msg, tag="read_text_request", frozen=True):
    """The OCR lines of ``frame_id`` (capture asks a remote perception worker for them)."""

    binary: ClassVar[bool] = True

    frame_id: NonEmpty
    frame: Frame  # a worker elsewhere has no frame store to look the id up in
    request_id: str = ""  # matched by the answer (TextRead)


class TextRead(Msg, tag="text_read", frozen=True):
    frame_id: str
    lines: list[TextLine] = []
    request_id: str = ""  # the request this answers


class Grounded(Msg, tag="grounded", frozen=True):
    frame_id: str
    x: Coord
    y: Coord
    box: Box
    # how: "exact", "word", "fuzzy", "icon" or "chooser" for a named target, "grounder" when
    # the grounding model (llm.roles.grounder) placed it; for a planner's own point
    # "ocr"/"icon" (inside one, kept), "snapped" (to the one element near) or "model"
    source: str = ""
    score: float = 1.0
    request_id: str = ""  # the request this answers ("" when none)
    # The grounder calls made for the request (published by the planner as LlmUsage), and,
    # when the request's cost cap refused one, why ("": none refused).
    llm_calls: tuple[LlmCall, ...] = ()
    cost_capped: str = ""

    @property
    def point(self) -> tuple[int, int]:
        """The point to tap."""
        return self.x, self.y


class Candidate(msgspec.Struct, frozen=True):
    index: int
    box: Box
    text: str = ""
    crop: bytes = b""  # a PNG close-up of the box and a margin, for the chooser


class Ambiguous(Msg, tag="ambiguous", frozen=True):
    """Several candidates; ``marked_image`` shows them numbered for the LLM to choose."""

    binary: ClassVar[bool] = True

    frame_id: str
    candidates: list[Candidate]
    marked_image: bytes = b""
    image_format: ImageFormat = "png"
    request_id: str = ""  # the request this answers ("" when none)
    reason: str = ""  # why perception could not pick one (shown to the chooser)
    # The grounder calls made for the request (published by the planner as LlmUsage), and,
    # when the request's cost cap refused one, why ("": none refused).
    llm_calls: tuple[LlmCall, ...] = ()
    cost_capped: str = ""


class NotFound(Msg, tag="not_found", frozen=True):
    frame_id: str
    query: str
    closest: list[str] = []
    request_id: str = ""  # the request this answers ("" when none)
    # The grounder calls made for the request (published by the planner as LlmUsage), and,
    # when the request's cost cap refused one, why ("": none refused).
    llm_calls: tuple[LlmCall, ...] = ()
    cost_capped: str = ""


# What grounding answers (models/grounding.py makes them, perception sends them).
GroundResult: TypeAlias = Grounded | Ambiguous | NotFound


class Chosen(Msg, tag="choice", frozen=True):
    """The planner's pick among an ``Ambiguous`` answer's candidates (the chooser call).

    The planner's own kind: ``Grounded`` / ``NotFound`` come from perception only.
    ``index`` is None when the chooser picked none of them (nothing is executed)."""

    frame_id: str
    query: str = ""
    index: int | None = None
    x: int | None = None
    y: int | None = None
    box: Box | None = None


class Plan(Msg, tag="plan", frozen=True):
    """The MLLM's answer: ``action`` as written, ``operation`` when it parsed."""

    observation: str
    thought: str
    action: str
    operation: Operation | None = None
    parse_error: str = ""
    # The actions the reply carried after the first, as written: not run (one a step).
    dropped: tuple[str, ...] = ()


class ActionDone(Msg, tag="action_done", frozen=True):
    operation: Operation
    ok: bool = True
    x: int | None = None
    y: int | None = None
    detail: str = ""
    duration_s: float = 0.0
    request_id: str = ""  # the request this answers ("" when none)
    # how the device sent it: "stream" (scrcpy's control socket), "adb"; "" when unknown
    # (its last call, when an operation took several)
    path: str = ""


class Reflection(Msg, tag="reflection", frozen=True):
    verdict: Verdict
    reason: str = ""
    request_id: str = ""  # the ReflectRequest this answers ("" when none)
    app: str = ""  # the foreground app after the action, when the reflector read it
    # Who judged: "pixels" (the reflector service's checks), "llm" (the judge on the before
    # and after screenshots), "" (the planner's own: loop guard, completion check).
    source: str = ""
    # The pixel check cannot tell whether the action did what was meant (a tap that changed
    # the screen may have opened the wrong page): agent.reflection = "both" asks the LLM.
    unsure: bool = False


class NoteKept(Msg, tag="note", frozen=True):
    """Focus content the planner chose to keep (``Note (text)`` or a ``Memory:`` field);
    every later prompt shows it."""

    text: str
    origin: Literal["operation", "field"] = "operation"


class Progress(Msg, tag="progress", frozen=True):
    """The running summary of what is done and what remains (``agent.planning``)."""

    text: str
    origin: Literal["inline", "call"] = "inline"


class EpisodeStarted(Msg, tag="episode_started", frozen=True):
    instruction_id: str
    text: str
    task: str | None = None
    # The episode-level choices (agent.planning, agent.reflection, agent.notes, ...), so two
    # runs can be compared.
    settings: dict[str, str] = {}


EpisodeStatus = Literal["succeeded", "failed", "cancelled"]


class EpisodeFinished(Msg, tag="episode_finished", frozen=True):
    instruction_id: str
    status: EpisodeStatus
    reason: str = ""
    steps: Annotated[int, msgspec.Meta(ge=0)] = 0
    # The episode's LLM spend: the sum of its LlmUsage.cost_usd (0 when no model is priced).
    cost_usd: Annotated[float, msgspec.Meta(ge=0)] = 0.0



# ---- accounting

class LlmUsage(Msg, tag="llm_usage", frozen=True):
    model: str
    prompt_tokens: Annotated[int, msgspec.Meta(ge=0)] = 0
    completion_tokens: Annotated[int, msgspec.Meta(ge=0)] = 0
    latency_s: float = 0.0
    purpose: str = ""  # "plan", "choose", "reflect", ...
    cost_usd: Annotated[float, msgspec.Meta(ge=0)] = 0.0  # 0 also when the model has no price
    cached_tokens: Annotated[int, msgspec.Meta(ge=0)] = 0  # of prompt_tokens, from a prompt cache
    role: str = ""  # the llm.roles entry that answered ("planner", "grounder", ...)


class StepTiming(Msg, tag="step_timing", frozen=True):
    """Seconds per phase of one step (``capture``, ``plan``, ``ground``, ``act``, ...)."""

    phases: dict[str, float]
    total_s: float

AGENT_KINDS: Final[tuple[type[Msg], ...]] = (
    FrameRequest, ActRequest, ReflectRequest,
    Frame, GroundRequest, Grounded, Ambiguous, NotFound, Chosen, Plan, ActionDone, Reflection,
    ReadTextRequest, TextRead,
    EpisodeStarted, EpisodeFinished, LlmUsage, StepTiming, NoteKept, Progress, Screen,
    Watching,
)
Message: TypeAlias = (
    Instruction | Cancel | Approve | Answer | Steer | Question
    | FrameRequest | ActRequest | ReflectRequest
    | Frame | GroundRequest | Grounded | Ambiguous | NotFound | Chosen | Plan | ActionDone
    | Reflection | ReadTextRequest | TextRead
    | EpisodeStarted | EpisodeFinished
    | DeviceStatus | HostStatus | Error | LlmUsage | StepTiming | NoteKept | Progress | Screen
    | Watching
)
CODEC: Final = Codec(RUNTIME_KINDS + AGENT_KINDS)
MESSAGE_TYPES: Final = CODEC.kinds
KINDS: Final = CODEC.by_kind
BINARY_TYPES: Final = tuple(t for t in MESSAGE_TYPES if t.binary)
decode = CODEC.decode
decode_for = CODEC.decode_for
decode_payload = CODEC.decode_payload

__all__ = [
    "AGENT_KINDS", "BINARY_TYPES", "CODEC", "KINDS", "MESSAGE_TYPES", "RUNTIME_KINDS",
    "ActRequest", "ActionDone", "Ambiguous", "Answer", "Approve", "Box", "Cancel", "Candidate",
    "Chosen", "Codec", "Coord", "DecodeError", "DeviceStatus", "EpisodeFinished",
    "EpisodeStarted", "EpisodeStatus", "Error", "Frame", "FrameRequest", "GivenOutcome",
    "GivenVerdict", "GroundRequest", "GroundResult", "Grounded", "HostStatus", "ImageFormat",
    "Instruction", "LlmCall", "LlmUsage", "Message", "Msg", "NonEmpty", "NoteKept", "NotFound", "Plan",
    "Progress", "Question", "ReadTextRequest", "ReflectRequest", "Reflection", "Rejected",
    "Steer", "StepTiming", "TextRead", "Verdict", "Watching", "decode", "decode_for", "decode_payload",
    "encode", "is_binary", "is_rejection", "kind_of",
]
