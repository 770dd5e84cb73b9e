"""The one encoder/decoder pair: every message type, both encodings, and bad payloads."""

from __future__ import annotations

import json

import msgspec
import pytest

from protocol.messages import (
    BINARY_TYPES,
    KINDS,
    Error,
    Frame,
    Instruction,
    decode,
    decode_payload,
    encode,
    is_binary,
    is_rejection,
    kind_of,
)
from tests.runtime.samples import sample_messages, sample_of


@pytest.mark.parametrize("msg", sample_messages(), ids=lambda m: kind_of(type(m)))
def test_every_message_round_trips(msg: msgspec.Struct) -> None:
    payload = encode(msg)
    assert decode(payload) == msg
    if isinstance(msg, BINARY_TYPES):
        with pytest.raises(UnicodeDecodeError):
            payload.decode()  # msgpack, with raw bytes inside
    else:  # JSON that mosquitto_sub users can read
        obj = json.loads(payload)
        assert obj["kind"] == kind_of(type(msg))
        assert obj["device"] == msg.device  # type: ignore[attr-defined]


def test_decoding_accepts_either_encoding() -> None:
    instr = Instruction(id="x", text="hello")
    assert decode(msgspec.msgpack.encode(instr)) == instr
    frame = sample_of(Frame)
    assert isinstance(frame, Frame) and is_binary(frame)
    assert decode(msgspec.json.encode(frame)) == frame
    assert decode(b"  \n" + encode(instr)) == instr


def test_kinds_are_unique_and_snake_case() -> None:
    # 20 + Question, three request kinds, the planner's Chosen, note, progress, the
    # remote OCR read and its answer, the watchers' Screen and their Watching lease
    assert len(KINDS) == 31
    assert all(k == k.lower() and " " not in k for k in KINDS)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"", "malformed"),
        (b"{", "malformed"),
        (b'{"kind": "instruction", "id": "a"}', "invalid"),  # text missing
        (b'{"kind": "instruction", "id": "", "text": "t"}', "invalid"),  # empty id
        (b'{"kind": "nope"}', "invalid"),
        (b'{"kind": "instruction", "id": 5, "text": "t"}', "invalid"),
        (b'{"kind": "grounded", "frame_id": "f", "x": -1, "y": 0, "box": [0,0,1,1]}', "invalid"),
        (b"\xc1\xff\x00", "malformed"),
        (b"[" * 10_000, "invalid"),
        (b'{"kind": "instruction", "id": "a", "text": "\xff"}', "malformed"),
    ],
)
def test_bad_payloads_become_errors_naming_the_topic(payload: bytes, reason: str) -> None:
    err = decode_payload("mobagent/v1/devices/d/instructions", payload)
    assert isinstance(err, Error) and is_rejection(err)
    assert err.topic == "mobagent/v1/devices/d/instructions"
    assert err.reason == f"rejected: {reason}", err


def test_oversized_payload_is_rejected_before_parsing() -> None:
    big = encode(Instruction(id="a", text="x" * 5000))
    err = decode_payload("t", big, max_bytes=1024)
    assert isinstance(err, Error) and err.reason == "rejected: oversized"
    assert str(len(big)) in err.detail and "1024" in err.detail
    assert decode_payload("t", big, max_bytes=len(big)) == decode(big)


def test_unexpected_kind_for_a_topic_is_rejected_with_ids_kept() -> None:
    frame = sample_of(Frame)
    err = decode_payload("t", encode(frame), expected=(Instruction,))
    assert isinstance(err, Error) and err.reason == "rejected: unexpected kind"
    assert "frame" in err.detail and "instruction" in err.detail
    assert err.device == frame.device and err.correlation_id == frame.correlation_id


def test_a_received_error_is_not_a_rejection() -> None:
    received = Error(topic="x", reason="handler failed")
    assert decode_payload("t", encode(received)) == received
    assert not is_rejection(received)


def test_the_runtime_codec_knows_only_the_runtime_kinds() -> None:
    """The agent hands its kinds to a Codec; the runtime's own refuses them, clearly."""
    from protocol.messages import AGENT_KINDS, CODEC
    from runtime.messages import RUNTIME_CODEC, RUNTIME_KINDS, Codec, DecodeError

    frame = encode(Frame(frame_id="f", sha256="s", width=1, height=1, format="png", data=b"x"))
    with pytest.raises(DecodeError, match="invalid"):
        RUNTIME_CODEC.decode(frame)
    assert isinstance(CODEC.decode(frame), Frame)
    assert set(CODEC.kinds) == set(RUNTIME_KINDS) | set(AGENT_KINDS)
    assert not set(RUNTIME_KINDS) & set(AGENT_KINDS)
    with pytest.raises(ValueError, match="Error"):
        Codec([Frame])
