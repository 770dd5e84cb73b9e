"""The message envelope and its codec: the part of the bus protocol the runtime owns.

Every message is a frozen ``msgspec.Struct`` tagged by ``kind`` and carries the ids that let
one episode be followed end to end: ``device``, ``episode_id``, ``step``, ``correlation_id``
and ``ts`` (Unix seconds). The runtime defines only the kinds it handles itself: what users
send to a phone (``Instruction`` and the control kinds), retained status and ``Error``. The
agent's step kinds live with the agent (``protocol/messages.py``), which hands the whole
union to a ``Codec``; the runtime never names them.

``encode`` writes JSON for control messages and events (readable with ``mosquitto_sub``)
and msgpack for kinds that carry images (``binary = True`` on the class). A ``Codec``
decodes either, telling them apart by the first byte (a JSON object starts with ``{``,
which is never the first byte of a msgpack map). ``Codec.decode_for`` turns a malformed,
oversized or unexpected payload into ``Rejected`` carrying an ``Error`` that names the
topic and the reason.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Annotated, ClassVar, Final, Literal, Union

import msgspec

from runtime.errors import MobagentError

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


def _now() -> float:
    return time.time()


class Msg(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    """Fields every message carries. Unknown fields are ignored (newer senders)."""

    binary: ClassVar[bool] = False  # True: travels as msgpack (it carries images)

    device: str = ""
    episode_id: str = ""
    step: Annotated[int, msgspec.Meta(ge=0)] = 0
    correlation_id: str = ""
    ts: float = msgspec.field(default_factory=_now)
    # The OpenTelemetry trace and span the message belongs to (hex; "" when not traced).
    trace_id: str = ""
    span_id: str = ""


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


# ---- status (retained) and errors ------------------------------------------------


class DeviceStatus(Msg, tag="device_status", frozen=True):
    """A phone's retained status. ``attention``: adb lists it, but a person must act first
    (accept the debugging prompt, unlock it, ...): ``detail`` says what and how."""

    state: Literal["idle", "busy", "offline", "attention"]
    host: str = ""
    detail: str = ""
    model: str = ""  # ro.product.model, where the fleet has read it


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


RUNTIME_KINDS: Final[tuple[type[Msg], ...]] = (
    Instruction, Cancel, Approve, Answer, Steer, Question, DeviceStatus, HostStatus, Error,
)


def kind_of(cls: type[Msg]) -> str:
    """The wire tag (``"episode_finished"``) of a message class."""
    tag = cls.__struct_config__.tag
    assert isinstance(tag, str)
    return tag


_json_enc = msgspec.json.Encoder()
_mp_enc = msgspec.msgpack.Encoder()


class DecodeError(MobagentError, ValueError):
    """A payload that is not a valid message; ``reason`` is short, ``detail`` says why."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class Rejected(MobagentError, ValueError):
    """An inbound payload refused for ``topic``; ``error`` is the event that says why."""

    def __init__(self, error: Error) -> None:
        super().__init__(f"{error.topic}: {error.reason}: {error.detail}")
        self.error = error


def is_binary(msg: Msg) -> bool:
    return type(msg).binary


def encode(msg: Msg) -> bytes:
    """Serialise: msgpack for image-carrying messages, JSON for the rest."""
    return _mp_enc.encode(msg) if is_binary(msg) else _json_enc.encode(msg)


def is_rejection(msg: Msg) -> bool:
    return isinstance(msg, Error) and msg.reason.startswith("rejected:")


class Codec:
    """Decodes the message kinds it was given (the runtime's, plus whatever the caller adds).

    ``kinds`` must include ``Error``: a refused payload becomes one."""

    def __init__(self, kinds: Iterable[type[Msg]]) -> None:
        self.kinds: tuple[type[Msg], ...] = tuple(dict.fromkeys(kinds))
        if Error not in self.kinds:
            raise ValueError("a Codec's kinds must include Error")
        self.by_kind: dict[str, type[Msg]] = {kind_of(t): t for t in self.kinds}
        union = Union[self.kinds]  # type: ignore[name-defined]  # noqa: UP007 (types known at run time)
        self._json_dec = msgspec.json.Decoder(union)
        self._mp_dec = msgspec.msgpack.Decoder(union)

    def decode(self, payload: bytes | bytearray | memoryview, *,
               max_bytes: int | None = None) -> Msg:
        """Parse a JSON or msgpack payload into a message; raises ``DecodeError``."""
        size = len(payload)
        if max_bytes is not None and size > max_bytes:
            raise DecodeError("oversized", f"{size} bytes > limit of {max_bytes}")
        if size == 0:
            raise DecodeError("malformed", "empty payload")
        data = bytes(payload)
        first = data.lstrip(b" \t\r\n")[:1]
        try:
            msg: Msg = self._json_dec.decode(data) if first == b"{" else self._mp_dec.decode(data)
        except msgspec.ValidationError as exc:
            raise DecodeError("invalid", str(exc)) from None
        except msgspec.DecodeError as exc:
            raise DecodeError("malformed", str(exc)) from None
        except (RecursionError, MemoryError, ValueError, TypeError) as exc:
            raise DecodeError("malformed", f"{type(exc).__name__}: {exc}") from None
        return msg

    def decode_for(
        self,
        topic: str,
        payload: bytes | bytearray | memoryview,
        *,
        max_bytes: int | None = None,
        expected: tuple[type[Msg], ...] | None = None,
        expected_kind: str | None = None,
    ) -> Msg:
        """Decode a payload received on ``topic``; raises ``Rejected`` with an ``Error`` event.

        ``expected`` limits the kinds accepted on this topic (an Instruction topic carrying
        a Frame is refused too); ``expected_kind`` names the one kind a topic such as
        ``requests/{kind}`` may carry. The Error's ``reason`` starts with ``rejected:``.
        """
        try:
            msg = self.decode(payload, max_bytes=max_bytes)
        except DecodeError as exc:
            raise Rejected(
                Error(topic=topic, reason=f"rejected: {exc.reason}", detail=exc.detail[:500])
            ) from None
        got = kind_of(type(msg))
        if expected is not None and not isinstance(msg, expected):
            want = ", ".join(kind_of(t) for t in expected)
        elif expected_kind is not None and got != expected_kind:
            want = expected_kind
        else:
            return msg
        raise Rejected(Error(
            topic=topic, device=msg.device, episode_id=msg.episode_id,
            correlation_id=msg.correlation_id,
            reason="rejected: unexpected kind",
            detail=f"got {got}, expected {want}",
        ))

    def decode_payload(
        self,
        topic: str,
        payload: bytes | bytearray | memoryview,
        *,
        max_bytes: int | None = None,
        expected: tuple[type[Msg], ...] | None = None,
    ) -> Msg:
        """Like ``decode_for``, but returns the ``Error`` instead of raising it."""
        try:
            return self.decode_for(topic, payload, max_bytes=max_bytes, expected=expected)
        except Rejected as exc:
            return exc.error


RUNTIME_CODEC: Final = Codec(RUNTIME_KINDS)
