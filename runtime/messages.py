"""Every message on the bus, as msgspec Structs in one tagged union (``kind``).

Each message carries the ids that let one episode be followed end to end: ``device``,
``episode_id``, ``step``, ``correlation_id`` and ``ts`` (Unix seconds). There is one
encoder/decoder pair: ``encode`` writes JSON for control messages and events (readable
with ``mosquitto_sub``) and msgpack for messages that carry images; ``decode`` accepts
either, telling them apart by the first byte (a JSON object starts with ``{``, which is
never the first byte of a msgpack map). ``decode_payload`` never raises (``decode_for`` raises ``Rejected``): a malformed,
oversized or unexpected payload becomes an ``Error`` naming the topic and the reason.

Requests (``FrameRequest``, ``GroundRequest``, ``ActRequest``, ``ReflectRequest``) carry a
``request_id``; their answers are the ordinary step events carrying the same id, so the
asker can match its reply while ``watch`` and the recorder see one stream of events.
"""

from __future__ import annotations

import time
from typing import Annotated, Final, Literal, TypeAlias

import msgspec

from runtime.operations import Operation

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
Coord = Annotated[int, msgspec.Meta(ge=0)]


def _now() -> float:
    return time.time()


class Msg(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    """Fields every message carries. Unknown fields are ignored (newer senders)."""

    device: str = ""
    episode_id: str = ""
    step: Annotated[int, msgspec.Meta(ge=0)] = 0
    correlation_id: str = ""
    ts: float = msgspec.field(default_factory=_now)


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

# ---- inbound: what users and other hosts send to a device --------------------------


class Instruction(Msg, tag="instruction", frozen=True):
    """A task for one phone. ``id`` makes delivery idempotent: a redelivered id is ignored."""

    id: NonEmpty
    text: NonEmpty
    task: str | None = None  # an evaluation task id, when the instruction comes from one
    max_steps: Annotated[int, msgspec.Meta(ge=1, le=1000)] | None = None


class Cancel(Msg, tag="cancel", frozen=True):
    reason: str = ""


class Approve(Msg, tag="approve", frozen=True):
    """A human's go/no-go for an action the agent asked approval for."""

    approved: bool = True
    note: str = ""


class Answer(Msg, tag="answer", frozen=True):
    """A human's reply to the agent's ``Ask`` operation."""

    text: str


class Steer(Msg, tag="steer", frozen=True):
    """A hint injected into the running episode's next prompt."""

    text: NonEmpty


class Question(Msg, tag="question", frozen=True):
    """The agent's ``Ask``: published on the device's control topic; an ``Answer`` replies."""

    text: str


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


class ActRequest(Msg, tag="act_request", frozen=True):
    """Perform ``operation`` (at ``x, y`` when it was grounded) on a ``width x height`` screen;
    the reply is an ``ActionDone``."""

    request_id: NonEmpty
    operation: Operation
    frame_id: str = ""  # the frame the operation was chosen on
    x: int | None = None
    y: int | None = None
    width: Annotated[int, msgspec.Meta(ge=0)] = 0
    height: Annotated[int, msgspec.Meta(ge=0)] = 0


class ReflectRequest(Msg, tag="reflect_request", frozen=True):
    """Compare the frames before and after ``operation``; the reply is a ``Reflection``."""

    request_id: NonEmpty
    before_frame_id: NonEmpty
    after_frame_id: NonEmpty
    operation: Operation
    app_before: str = ""  # the foreground app before the action ("" unknown)


# ---- one step, inside a device's actor group ---------------------------------------


class Frame(Msg, tag="frame", frozen=True):
    frame_id: NonEmpty
    sha256: str
    width: Coord
    height: Coord
    format: ImageFormat
    data: bytes
    flags: list[str] = []  # "identical" (same pixels as the previous frame), "black"
    capture_path: str = ""  # "raw" | "png": how the device delivered it
    request_id: str = ""  # the request this answers ("" when none)


class GroundRequest(Msg, tag="ground_request", frozen=True):
    """Turn the target of ``operation`` (a text or an icon) into a point on ``frame_id``."""

    frame_id: NonEmpty
    operation: Operation
    request_id: str = ""  # matched by the answer (Grounded | Ambiguous | NotFound)


class Grounded(Msg, tag="grounded", frozen=True):
    frame_id: str
    x: Coord
    y: Coord
    box: Box
    source: str = ""  # how: "exact", "word", "fuzzy", "icon" or "chooser"
    score: float = 1.0
    request_id: str = ""  # the request this answers ("" when none)


class Candidate(msgspec.Struct, frozen=True):
    index: int
    box: Box
    text: str = ""
    crop: bytes = b""  # a PNG close-up of the box and a margin, for the chooser


class Ambiguous(Msg, tag="ambiguous", frozen=True):
    """Several candidates; ``marked_image`` shows them numbered for the LLM to choose."""

    frame_id: str
    candidates: list[Candidate]
    marked_image: bytes = b""
    image_format: ImageFormat = "png"
    request_id: str = ""  # the request this answers ("" when none)
    reason: str = ""  # why perception could not pick one (shown to the chooser)


class NotFound(Msg, tag="not_found", frozen=True):
    frame_id: str
    query: str
    closest: list[str] = []
    request_id: str = ""  # the request this answers ("" when none)


class Plan(Msg, tag="plan", frozen=True):
    """The MLLM's answer: ``action`` as written, ``operation`` when it parsed."""

    observation: str
    thought: str
    action: str
    operation: Operation | None = None
    parse_error: str = ""


class ActionDone(Msg, tag="action_done", frozen=True):
    operation: Operation
    ok: bool = True
    x: int | None = None
    y: int | None = None
    detail: str = ""
    duration_s: float = 0.0
    request_id: str = ""  # the request this answers ("" when none)


Verdict = Literal["ok", "unchanged", "wrong_page", "loop", "incomplete", "complete"]


class Reflection(Msg, tag="reflection", frozen=True):
    verdict: Verdict
    reason: str = ""
    request_id: str = ""  # the ReflectRequest this answers ("" when none)
    app: str = ""  # the foreground app after the action, when the reflector read it


class EpisodeStarted(Msg, tag="episode_started", frozen=True):
    instruction_id: str
    text: str
    task: str | None = None


EpisodeStatus = Literal["succeeded", "failed", "cancelled"]


class EpisodeFinished(Msg, tag="episode_finished", frozen=True):
    instruction_id: str
    status: EpisodeStatus
    reason: str = ""
    steps: Annotated[int, msgspec.Meta(ge=0)] = 0


# ---- status (retained) and accounting ------------------------------------------------


class DeviceStatus(Msg, tag="device_status", frozen=True):
    state: Literal["idle", "busy", "offline"]
    host: str = ""
    detail: str = ""


class HostStatus(Msg, tag="host_status", frozen=True):
    host: str
    state: Literal["online", "offline"]
    devices: list[str] = []
    version: str = ""


class Error(Msg, tag="error", frozen=True):
    """Something went wrong with ``topic``: a rejected payload, a failed handler, ..."""

    topic: str
    reason: str
    detail: str = ""
    request_id: str = ""  # set when the error answers a request


class LlmUsage(Msg, tag="llm_usage", frozen=True):
    model: str
    prompt_tokens: Annotated[int, msgspec.Meta(ge=0)] = 0
    completion_tokens: Annotated[int, msgspec.Meta(ge=0)] = 0
    latency_s: float = 0.0
    purpose: str = ""  # "plan", "choose", "reflect", ...


class StepTiming(Msg, tag="step_timing", frozen=True):
    """Seconds per phase of one step (``capture``, ``plan``, ``ground``, ``act``, ...)."""

    phases: dict[str, float]
    total_s: float


Message: TypeAlias = (
    Instruction | Cancel | Approve | Answer | Steer | Question
    | FrameRequest | ActRequest | ReflectRequest
    | Frame | GroundRequest | Grounded | Ambiguous | NotFound | Plan | ActionDone | Reflection
    | EpisodeStarted | EpisodeFinished
    | DeviceStatus | HostStatus | Error | LlmUsage | StepTiming
)
MESSAGE_TYPES: Final[tuple[type[Msg], ...]] = (
    Instruction, Cancel, Approve, Answer, Steer, Question,
    FrameRequest, ActRequest, ReflectRequest,
    Frame, GroundRequest, Grounded, Ambiguous, NotFound, Plan, ActionDone, Reflection,
    EpisodeStarted, EpisodeFinished,
    DeviceStatus, HostStatus, Error, LlmUsage, StepTiming,
)
# Messages that carry images travel as msgpack; everything else as JSON.
BINARY_TYPES: Final[tuple[type[Msg], ...]] = (Frame, Ambiguous)


def kind_of(cls: type[Msg]) -> str:
    """The wire tag (``"episode_finished"``) of a message class."""
    tag = cls.__struct_config__.tag
    assert isinstance(tag, str)
    return tag


KINDS: Final[dict[str, type[Msg]]] = {kind_of(t): t for t in MESSAGE_TYPES}

_json_enc = msgspec.json.Encoder()
_mp_enc = msgspec.msgpack.Encoder()
_json_dec = msgspec.json.Decoder(Message)
_mp_dec = msgspec.msgpack.Decoder(Message)


class DecodeError(ValueError):
    """A payload that is not a valid message; ``reason`` is short, ``detail`` says why."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def is_binary(msg: Msg) -> bool:
    return isinstance(msg, BINARY_TYPES)


def encode(msg: Msg) -> bytes:
    """Serialise: msgpack for image-carrying messages, JSON for the rest."""
    return _mp_enc.encode(msg) if is_binary(msg) else _json_enc.encode(msg)


def decode(payload: bytes | bytearray | memoryview, *, max_bytes: int | None = None) -> Message:
    """Parse a JSON or msgpack payload into a message; raises ``DecodeError``."""
    size = len(payload)
    if max_bytes is not None and size > max_bytes:
        raise DecodeError("oversized", f"{size} bytes > limit of {max_bytes}")
    if size == 0:
        raise DecodeError("malformed", "empty payload")
    data = bytes(payload)
    first = data.lstrip(b" \t\r\n")[:1]
    try:
        if first == b"{":
            return _json_dec.decode(data)
        return _mp_dec.decode(data)
    except msgspec.ValidationError as exc:
        raise DecodeError("invalid", str(exc)) from None
    except msgspec.DecodeError as exc:
        raise DecodeError("malformed", str(exc)) from None
    except (RecursionError, MemoryError, ValueError, TypeError) as exc:
        raise DecodeError("malformed", f"{type(exc).__name__}: {exc}") from None


class Rejected(ValueError):
    """An inbound payload refused for ``topic``; ``error`` is the event that says why."""

    def __init__(self, error: Error) -> None:
        super().__init__(f"{error.topic}: {error.reason}: {error.detail}")
        self.error = error


def decode_for(
    topic: str,
    payload: bytes | bytearray | memoryview,
    *,
    max_bytes: int | None = None,
    expected: tuple[type[Msg], ...] | None = None,
) -> Message:
    """Decode a payload received on ``topic``; raises ``Rejected`` with an ``Error`` event.

    ``expected`` limits the kinds accepted on this topic (an Instruction topic carrying a
    Frame is refused too). The Error's ``reason`` starts with ``rejected:``.
    """
    try:
        msg = decode(payload, max_bytes=max_bytes)
    except DecodeError as exc:
        raise Rejected(
            Error(topic=topic, reason=f"rejected: {exc.reason}", detail=exc.detail[:500])
        ) from None
    if expected is not None and not isinstance(msg, expected):
        want = ", ".join(kind_of(t) for t in expected)
        raise Rejected(Error(
            topic=topic, device=msg.device, episode_id=msg.episode_id,
            correlation_id=msg.correlation_id,
            reason="rejected: unexpected kind",
            detail=f"got {kind_of(type(msg))}, expected {want}",
        ))
    return msg


def decode_payload(
    topic: str,
    payload: bytes | bytearray | memoryview,
    *,
    max_bytes: int | None = None,
    expected: tuple[type[Msg], ...] | None = None,
) -> Message | Error:
    """Like ``decode_for``, but returns the ``Error`` instead of raising it."""
    try:
        return decode_for(topic, payload, max_bytes=max_bytes, expected=expected)
    except Rejected as exc:
        return exc.error


def is_rejection(msg: Msg) -> bool:
    return isinstance(msg, Error) and msg.reason.startswith("rejected:")
