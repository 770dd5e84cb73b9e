"""Fuzzing the inbound topics: garbage, truncated, wrongly typed and oversized payloads.

A real host runtime (bus, gate, actors) runs against a real mosquitto in a background
event loop; hypothesis throws a few thousand payloads at every inbound topic through a
plain paho client. Nothing may crash, every bad payload is counted as rejected, and the
runtime still answers a valid instruction afterwards.
"""

from __future__ import annotations

import threading
import time
import uuid

import msgspec
import paho.mqtt.client as paho
import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from host.host_runtime import HostRuntime
from protocol.messages import KINDS, Instruction, Message, encode
from runtime import topics
from runtime.actor import Actor
from runtime.config import RuntimeConfig, load_config
from tests.fixtures.mosquitto import MosquittoBroker
from tests.runtime.samples import sample_messages

CAP = 16 * 1024
SERIAL = "fuzz-phone"
INBOUND = [
    topics.device_instructions(SERIAL),
    topics.device_control(SERIAL),
    topics.fleet_instructions(),
    topics.device_status(SERIAL),
    topics.host_status("fuzz-host"),
]
FIELDS = ["id", "text", "task", "max_steps", "device", "episode_id", "step", "correlation_id",
          "ts", "reason", "approved", "state", "host", "devices", "frame_id", "data", "operation"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)
wrong_typed = st.builds(
    lambda kind, fields: msgspec.json.encode({"kind": kind, **fields}),
    st.sampled_from([*KINDS, "", "Instruction", "nope"]) | st.text(max_size=10),
    st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6),
)
wrong_typed_msgpack = st.builds(
    lambda kind, fields: msgspec.msgpack.encode({"kind": kind, **fields}),
    st.sampled_from(list(KINDS)),
    st.dictionaries(st.sampled_from(FIELDS), json_values | st.binary(max_size=20), max_size=6),
)
# Small samples only: a truncated 10 KB frame adds nothing but a huge hypothesis repr.
valid_samples = [p for p in map(encode, sample_messages()) if len(p) < 2000]
truncated = st.builds(
    lambda payload, frac: payload[: int(len(payload) * frac)],
    st.sampled_from(valid_samples), st.floats(min_value=0.0, max_value=0.999),
)
oversized = st.builds(
    lambda n, head: head + b" " * n,
    st.integers(min_value=CAP + 1, max_value=CAP * 3),
    st.sampled_from([b"{", b'{"kind":"instruction","id":"x","text":"', b"\x85"]),
)
garbage = st.binary(max_size=600)
payloads = st.one_of(garbage, truncated, wrong_typed, wrong_typed_msgpack, oversized)


class ControlSink(Actor):
    """Stands in for the fleet's consumer of control and status topics."""

    name = "control_sink"

    def __init__(self, bus: object) -> None:
        super().__init__(bus)  # type: ignore[arg-type]
        self.inbox = (topics.all_control_filter(), topics.all_device_status_filter(),
                      topics.all_host_status_filter())
        self.got: list[Message] = []

    async def handle(self, topic: str, msg: Message) -> None:
        self.got.append(msg)


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
def test_fuzzed_payloads_never_crash_the_runtime(mosquitto: MosquittoBroker) -> None:
    cfg = load_config(None, RuntimeConfig, env={}, overrides={
        "bus.url": mosquitto.url, "host.name": "fuzz-host", "limits.max_payload_bytes": CAP,
        "bus.reconnect_min_s": 0.05,
    })
    instructions: list[Instruction] = []
    arrived = threading.Event()

    async def on_instruction(serial: str | None, msg: Instruction) -> None:
        instructions.append(msg)
        if msg.id.startswith("alive-"):
            arrived.set()

    sinks: list[ControlSink] = []

    def make_actors(bus: object) -> list[Actor]:
        sinks.append(ControlSink(bus))
        return list(sinks)

    runtime = HostRuntime(cfg, on_instruction=on_instruction, actors=make_actors)
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"fuzzer-{uuid.uuid4().hex[:6]}")
    client.connect("127.0.0.1", mosquitto.port)
    client.loop_start()
    sent = {"total": 0}
    try:
        with start_blocking_portal() as portal:
            future, _url = portal.start_task(runtime.run)
            assert runtime.bus is not None and runtime.gate is not None

            @settings(max_examples=60, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(st.lists(st.tuples(st.sampled_from(INBOUND), payloads), min_size=40, max_size=60))
            def throw(batch: list[tuple[str, bytes]]) -> None:
                for topic, payload in batch:  # QoS 1: a QoS 0 one may be dropped (seen once)
                    client.publish(topic, payload, qos=1)
                sent["total"] += len(batch)

            throw()
            # Still answering: a valid instruction goes through after all that.
            alive = Instruction(id=f"alive-{uuid.uuid4().hex}", text="still there?", device=SERIAL)
            client.publish(topics.device_instructions(SERIAL), encode(alive), qos=1).wait_for_publish(10)
            assert arrived.wait(30), "the runtime stopped answering"
            stats = runtime.bus.stats
            deadline = time.monotonic() + 20
            while stats.received < sent["total"] + 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not future.done(), f"the runtime stopped: {future.exception()!r}"
            future.cancel()
    finally:
        client.loop_stop()
        client.disconnect()
    gate = runtime.gate
    # The figures go into each message, to tell a lost payload from a miscount.
    seen = (f"sent {sent['total']} + 1, received {stats.received}, rejected {stats.rejected}, "
            f"delivered {len(instructions)} + {len(sinks[0].got)}, failed {gate.failed} / "
            f"{sinks[0].failed}")
    assert sent["total"] >= 2000, seen
    assert stats.received >= sent["total"] + 1, seen
    # Every payload was either rejected with an Error or was (by chance) a valid message.
    delivered = len(instructions) + len(sinks[0].got)
    assert stats.rejected + delivered >= sent["total"], seen
    assert stats.rejected > sent["total"] * 0.9, seen
    assert gate.failed == 0 and sinks[0].failed == 0, seen
    assert instructions[-1].id == alive.id


@pytest.mark.parametrize("payload", [b"", b"\x00", b"{}", b"null", b"[]", b'{"kind": null}'])
def test_tiny_edge_payloads_are_rejections(payload: bytes) -> None:
    from protocol.messages import Rejected, decode_for

    with pytest.raises(Rejected) as info:
        decode_for(topics.device_instructions(SERIAL), payload, max_bytes=CAP,
                   expected=(Instruction,))
    assert info.value.error.reason.startswith("rejected: ")
