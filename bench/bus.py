"""The bus on loopback mosquitto, against raw paho-mqtt as the baseline, in one run.

Measures, for ``runtime.bus.Bus`` (typed messages: encode, QoS 1, decode, validation) and
for raw paho-mqtt (bytes, QoS 1, no decoding):

- publish -> handler latency p50/p99 of a small control message (ping-pong, one at a time);
- the same for a 1 MB frame (msgpack);
- throughput: small QoS 1 messages/s, publisher to handler, with publishes in flight.

Starts a private mosquitto on a free port (or uses --url). Prints a table, writes JSON
(default out/bench/bus.json) and prints it as the last line.

    .venv/bin/python -m bench.bus [--small 2000] [--frames 100] [--throughput 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio  # noqa: E402
import paho.mqtt.client as paho  # noqa: E402

from protocol.messages import CODEC, Frame, Message, Steer, encode  # noqa: E402
from runtime.bus import BrokerAddress, Bus, parse_broker_url  # noqa: E402
from runtime.config import BusConfig  # noqa: E402

TOPIC = "mobagent/v1/devices/bench/events/"
FRAME_BYTES = 1024 * 1024


def pct(samples: list[float], p: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def summary(latencies_s: list[float]) -> dict[str, float]:
    ms = [x * 1000 for x in latencies_s]
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 4),
            "p99_ms": round(pct(ms, 99), 4), "mean_ms": round(statistics.fmean(ms), 4)}


def frame_message(i: int) -> Frame:
    return Frame(frame_id=f"f{i}", sha256="", width=1080, height=1920, format="png",
                 data=os.urandom(FRAME_BYTES))


# ---- the bus ---------------------------------------------------------------------------


async def bus_latency(address: BrokerAddress, cfg: BusConfig, make: Callable[[int], Message],
                      n: int, kind: str) -> list[float]:
    topic = TOPIC + kind
    out: list[float] = []
    async with Bus(cfg, address, codec=CODEC) as sub, Bus(cfg, address, codec=CODEC) as pub:
        await sub.subscribe(topic)
        inbox = sub.messages()
        msgs = [make(i) for i in range(n + 10)]
        for i, msg in enumerate(msgs):
            t0 = time.perf_counter()
            await pub.publish(topic, msg)
            with anyio.fail_after(10):
                await inbox.receive()  # decoded and validated: what a handler gets
            if i >= 10:  # warm-up
                out.append(time.perf_counter() - t0)
    return out


async def bus_throughput(address: BrokerAddress, cfg: BusConfig, n: int) -> float:
    """Publisher and handler in separate event loops (threads here, processes in
    production), as the two paho clients of the baseline have their own network threads."""
    topic = TOPIC + "steer"
    msgs = [Steer(text=f"m{i}", device="bench", step=i) for i in range(n)]
    started: list[float] = []

    async def publish_all() -> None:
        async with Bus(cfg, address, codec=CODEC) as pub:
            pending = iter(msgs)

            async def sender() -> None:  # max_inflight of these share one queue of messages
                for msg in pending:
                    await pub.publish(topic, msg)

            started.append(time.perf_counter())
            async with anyio.create_task_group() as tg:
                for _ in range(cfg.max_inflight):
                    tg.start_soon(sender)

    async with Bus(cfg, address, codec=CODEC) as sub:
        await sub.subscribe(topic)
        inbox = sub.messages()
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, anyio.run, publish_all)
            with anyio.fail_after(120):
                for _ in range(n):
                    await inbox.receive()
            done = time.perf_counter()
    return n / (done - started[0])


# ---- raw paho, the baseline -------------------------------------------------------------


class PahoPair:
    """A publisher and a subscriber client on their own network threads."""

    def __init__(self, address: BrokerAddress, topic: str, inflight: int) -> None:
        self.topic = topic
        self.received = 0
        self.cond = threading.Condition()
        tag = uuid.uuid4().hex[:6]
        self.sub = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"bsub-{tag}",
                               protocol=paho.MQTTv5)
        self.pub = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"bpub-{tag}",
                               protocol=paho.MQTTv5)
        self.pub.max_inflight_messages_set(inflight)
        self.pub.max_queued_messages_set(0)
        subscribed = threading.Event()
        self.sub.on_message = self._on_message
        self.sub.on_subscribe = lambda *a: subscribed.set()
        for c in (self.sub, self.pub):
            c.connect(address.host, address.port)
            c.loop_start()
        self.sub.subscribe(topic, qos=1)
        if not subscribed.wait(10):
            raise RuntimeError("paho subscribe timed out")

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        with self.cond:
            self.received += 1
            self.cond.notify_all()

    def wait_for(self, count: int, timeout: float = 60) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.received >= count, timeout):
                raise RuntimeError(f"paho: {self.received}/{count} received")

    def close(self) -> None:
        for c in (self.pub, self.sub):
            c.loop_stop()
            c.disconnect()


def paho_latency(address: BrokerAddress, payloads: list[bytes], kind: str) -> list[float]:
    pair = PahoPair(address, TOPIC + kind + "-paho", 20)
    out: list[float] = []
    try:
        for i, payload in enumerate(payloads):
            t0 = time.perf_counter()
            pair.pub.publish(pair.topic, payload, qos=1)
            pair.wait_for(i + 1, 10)
            if i >= 10:
                out.append(time.perf_counter() - t0)
    finally:
        pair.close()
    return out


def paho_throughput(address: BrokerAddress, n: int, inflight: int) -> float:
    pair = PahoPair(address, TOPIC + "tput-paho", inflight)
    payloads = [encode(Steer(text=f"m{i}", device="bench", step=i)) for i in range(n)]
    try:
        t0 = time.perf_counter()
        for payload in payloads:
            pair.pub.publish(pair.topic, payload, qos=1)
        pair.wait_for(n, 120)
        return n / (time.perf_counter() - t0)
    finally:
        pair.close()


# ---- the run ----------------------------------------------------------------------------


def run(address: BrokerAddress, small: int, frames: int, tput: int, rounds: int) -> dict[str, Any]:
    """Bus and paho take turns, ``rounds`` times, so load drift on a shared machine hits both."""
    cfg = BusConfig()
    control = lambda i: Steer(text=f"tap {i}", device="bench", step=i)  # noqa: E731
    lat: dict[str, list[float]] = {k: [] for k in ("bus_c", "paho_c", "bus_f", "paho_f")}
    tputs: dict[str, list[float]] = {"bus": [], "paho": []}
    for _ in range(rounds):
        lat["bus_c"] += anyio.run(bus_latency, address, cfg, control, small // rounds, "steer")
        lat["paho_c"] += paho_latency(
            address, [encode(control(i)) for i in range(small // rounds + 10)], "steer")
        lat["bus_f"] += anyio.run(bus_latency, address, cfg, frame_message, frames // rounds, "frame")
        lat["paho_f"] += paho_latency(
            address, [os.urandom(FRAME_BYTES) for _ in range(frames // rounds + 10)], "frame")
        tputs["bus"].append(anyio.run(bus_throughput, address, cfg, tput // rounds))
        tputs["paho"].append(paho_throughput(address, tput // rounds, cfg.max_inflight))
    results: dict[str, Any] = {
        "bus_control": summary(lat["bus_c"]),
        "paho_control": summary(lat["paho_c"]),
        "bus_frame_1mb": summary(lat["bus_f"]),
        "paho_frame_1mb": summary(lat["paho_f"]),
        "bus_throughput_msgs_s": round(statistics.median(tputs["bus"])),
        "paho_throughput_msgs_s": round(statistics.median(tputs["paho"])),
        "throughput_ratio_per_round": [round(b / p, 3) for b, p in zip(tputs["bus"], tputs["paho"], strict=True)],
        "rounds": rounds,
        "max_inflight": cfg.max_inflight,
    }
    results["throughput_ratio"] = round(statistics.median(results["throughput_ratio_per_round"]), 3)
    results["control_p50_ratio"] = round(
        results["bus_control"]["p50_ms"] / results["paho_control"]["p50_ms"], 3)
    return results


def print_table(r: dict[str, Any]) -> None:
    print(f"{'measure':<28}{'bus':>14}{'raw paho':>14}{'bus/paho':>10}")
    for name, key in (("control p50 ms", "p50_ms"), ("control p99 ms", "p99_ms")):
        b, p = r["bus_control"][key], r["paho_control"][key]
        print(f"{name:<28}{b:>14.3f}{p:>14.3f}{b / p:>10.2f}")
    for name, key in (("1 MB frame p50 ms", "p50_ms"), ("1 MB frame p99 ms", "p99_ms")):
        b, p = r["bus_frame_1mb"][key], r["paho_frame_1mb"][key]
        print(f"{name:<28}{b:>14.3f}{p:>14.3f}{b / p:>10.2f}")
    b, p = r["bus_throughput_msgs_s"], r["paho_throughput_msgs_s"]
    print(f"{'throughput msgs/s (QoS 1)':<28}{b:>14,}{p:>14,}{r['throughput_ratio']:>10.2f}")
    print(f"(throughput: median of {r['rounds']} rounds; bus/paho per round "
          f"{r['throughput_ratio_per_round']})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--url", help="use this broker instead of a private mosquitto")
    ap.add_argument("--small", type=int, default=2000, help="control messages for latency")
    ap.add_argument("--frames", type=int, default=100, help="1 MB frames for latency")
    ap.add_argument("--throughput", type=int, default=20000, help="messages for throughput")
    ap.add_argument("--rounds", type=int, default=3, help="bus and paho alternate this often")
    ap.add_argument("--out", type=Path, default=Path("out/bench/bus.json"))
    args = ap.parse_args(argv)
    broker = None
    if args.url:
        address = parse_broker_url(args.url)
    else:
        import tempfile

        from bench.mosquitto import MOSQUITTO, MosquittoBroker, free_port

        if MOSQUITTO is None:
            print("bench.bus: mosquitto is not installed (or pass --url)", file=sys.stderr)
            return 2
        broker = MosquittoBroker(workdir=Path(tempfile.mkdtemp(prefix="bench-mosquitto-")),
                                 port=free_port())
        broker.start()
        address = parse_broker_url(broker.url)
    try:
        results = run(address, args.small, args.frames, args.throughput, max(1, args.rounds))
    finally:
        if broker is not None:
            broker.remove()  # its temporary workdir too
    results["broker"] = "mosquitto (private, loopback)" if broker else address.url
    results["cpus"] = os.cpu_count()
    print_table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
