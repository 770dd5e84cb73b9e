"""adb against scrcpy, at a real phone's cost: N simulated phones on one USB 2 hub.

    .venv/bin/python -m bench.transport --devices 1,4,16 --out DIR [--capture-cost off]

For each N the simulated phones run in one process of their own (one ``UsbHub``, as
phones on one hub; their own CPUs, not this process's GIL), behind a private adb server,
with the realistic profile and its device cost (sim/device_cost.py: ``input``'s process
start, ``screencap -p``'s encode, a real screen's PNG and the stream's H.264 over the hub,
5.6 ms a control injection). ``--capture-cost off`` leaves the realistic profile's flat
delays instead. Each phone is driven through the host's own code: ``AdbDevice`` (PNG
screenshots, ``input tap``) for adb, ``StreamedDevice`` (the scrcpy 3.3.4 server from
``server_jar()``, its stream's fresh-frame rule) for scrcpy. Every phone loops over steps,
each an action then a capture: a tap on Notes (a page change, which the stream animates),
a tap on an empty spot (nothing changes), a tap on HOME (a page change back); between
steps it waits ``--think-s``, the model's turn (Open-AutoGLM's inference takes 3-8 s a
step, github.com/zai-org/Open-AutoGLM/issues/63: 3 s is its low end), the phones started
apart over that wait.

Each step is what the agent does: the tap, ``--settle-s`` of waiting (``agent.settle_s``,
0.3 s by default, the same on both transports), then the screenshot. Per transport and N,
over every phone's steps:

- ``fresh_frame_p50_s``, ``fresh_frame_p95_s``: over the taps that change the screen, from
  the injection (the tap call returned) to a frame that shows the change in the host's
  hands: on the stream, the first frame decoded after the injection (the stream sends it
  unasked, during the settle); through adb, the ``screencap`` call's own time (a frame
  exists only once asked for, so this is adb's best case: asked at the injection). The
  taps that change nothing have no such frame: their capture (the key frame the rule asks
  for) is ``unchanged_capture_p95_s`` in the details;
- ``tap_p95_s``: the tap call (adb: ``input tap`` through the shell; scrcpy: the control
  messages sent);
- ``device_overhead_per_step_s``: what the step waits on the device beyond the settle: the
  tap call plus the screenshot call after the settle (on the stream, the rest of the page
  animation and the encoder's repeat), per step (mean);
- ``decode_cpu_per_step_s``: the host's thread CPU decoding frames (``AdbDevice``'s PNG
  decode; ``ScrcpyStream``'s H.264 decode and RGB conversion of every frame the stream
  sends, the page animations' included, in its reader thread), per step (mean).

One JSON line ends stdout, ``{"adb": {"1": {...}, ...}, "scrcpy": {...}}``, and is written
to DIR/transport.json; DIR/transport_details.json adds per run the first frame after the
action on the stream (before the rule's quiet wait), the screenshots that fell back to
adb, and the simulated phones' process CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from bench.fleet import ROOT, free_port, pct, sim_cpu

TRANSPORTS = ("adb", "scrcpy")
KEYS = ("fresh_frame_p50_s", "fresh_frame_p95_s", "tap_p95_s", "device_overhead_per_step_s",
        "decode_cpu_per_step_s")
EMPTY_SPOT = (540, 1900)  # below the Notes list and above the FAB: a tap that changes nothing
THINK_S = 3.0  # the low end of Open-AutoGLM's 3-8 s inference a step (issue #63)
SETTLE_S = 0.3  # agent.settle_s's default: the wait after an action before the capture
CALL_TIMEOUT_S = 30.0


@dataclass
class Run:
    """One transport at one N: every phone's steps."""

    fresh_s: list[float] = field(default_factory=list)  # the taps that change the screen
    unchanged_s: list[float] = field(default_factory=list)  # their capture, the others'
    settled_s: list[float] = field(default_factory=list)  # injection to the capture returned
    tap_s: list[float] = field(default_factory=list)
    overhead_s: list[float] = field(default_factory=list)
    decode_cpu_s: float = 0.0
    steps: int = 0
    fell_back: int = 0  # scrcpy screenshots that came through adb instead
    sim_cpu_s: float = 0.0
    wall_s: float = 0.0

    def summary(self) -> dict[str, float]:
        steps = max(self.steps, 1)
        return {"fresh_frame_p50_s": round(pct(self.fresh_s, 50), 4),
                "fresh_frame_p95_s": round(pct(self.fresh_s, 95), 4),
                "tap_p95_s": round(pct(self.tap_s, 95), 4),
                "device_overhead_per_step_s": round(sum(self.overhead_s) / steps, 4),
                "decode_cpu_per_step_s": round(self.decode_cpu_s / steps, 4)}

    def details(self) -> dict[str, Any]:
        def p(xs: list[float], q: int) -> float | None:
            return round(pct(xs, q), 4) if xs else None

        return {"steps": self.steps, "fell_back_to_adb": self.fell_back,
                "unchanged_capture_p95_s": p(self.unchanged_s, 95),
                "settled_frame_p50_s": p(self.settled_s, 50),
                "settled_frame_p95_s": p(self.settled_s, 95),
                "sim_process_cpu_s": round(self.sim_cpu_s, 2), "wall_s": round(self.wall_s, 2)}


def targets() -> list[tuple[int, int, bool]]:
    """Where the loop taps, and whether the screen changes, from the canonical layout every
    simulated phone has (seed 0): the Notes icon, the empty spot, HOME. Read off a phone
    here (the test API)."""
    from sim.phone import SimPhone
    from sim.phone_api import DeviceInfo

    phone = SimPhone(DeviceInfo.for_profile("sim00", "sim"), seed=0)
    notes = phone.find("Notes")[-1].center
    home = sorted(phone.find(kind="nav_button"), key=lambda e: e.center[0])[1].center
    return [(int(notes[0]), int(notes[1]), True), (*EMPTY_SPOT, False),
            (int(home[0]), int(home[1]), True)]


class FirstFrames:
    """Times of the frames a stream decodes (wraps its ``Frames.put``): the first one after
    an action is when the transport itself had the change in the host's hands."""

    def __init__(self, stream: Any) -> None:
        self.times: list[float] = []
        put = stream.frames.put

        def recorded(rgb: np.ndarray, key: bool = False) -> None:
            self.times.append(time.monotonic())
            put(rgb, key)

        stream.frames.put = recorded

    def first_after(self, t: float) -> float | None:
        return next((x for x in self.times if x > t), None)


async def drive(dev: Any, transport: str, steps: int, think_s: float, settle_s: float,
                start_after: float, spots: list[tuple[int, int, bool]], run: Run) -> None:
    """One phone's loop: tap, settle, capture, think; the stream's frames timed apart."""
    await anyio.sleep(start_after)
    frames = FirstFrames(dev.stream) if transport == "scrcpy" and dev.stream else None
    for i in range(steps):
        x, y, changes = spots[i % len(spots)]
        t0 = time.monotonic()
        with anyio.fail_after(CALL_TIMEOUT_S):
            await dev.tap(x, y)
        t1 = time.monotonic()
        await anyio.sleep(settle_s)
        t2 = time.monotonic()
        with anyio.fail_after(CALL_TIMEOUT_S):
            shot = await dev.screenshot()
        t3 = time.monotonic()
        run.tap_s.append(t1 - t0)
        run.overhead_s.append((t1 - t0) + (t3 - t2))
        run.settled_s.append(t3 - t1)
        run.steps += 1
        if transport == "scrcpy" and shot.path != "stream":
            run.fell_back += 1
        if not changes:
            run.unchanged_s.append(t3 - t2)
        elif frames is not None:
            first = frames.first_after(t1)
            run.fresh_s.append((first if first is not None and first <= t3 else t3) - t1)
        else:
            run.fresh_s.append(t3 - t2)  # adb: the screencap's own time
        await anyio.sleep(think_s)


def decode_cpu(dev: Any) -> float:
    stream = getattr(dev, "stream", None)
    adb = getattr(dev, "adb", dev)
    return float(adb.decode_cpu_s) + (float(stream.decode_cpu_s) if stream is not None else 0.0)


async def run_transport(transport: str, serials: list[str], args: argparse.Namespace,
                        spots: list[tuple[int, int, bool]], steps: int,
                        procs: list[subprocess.Popen[str]]) -> Run:
    import adbutils

    from devices.adb import AdbDevice
    from devices.scrcpy import server_jar
    from devices.streamed import StreamedDevice

    client = adbutils.AdbClient(host="127.0.0.1", port=int(os.environ["ANDROID_ADB_SERVER_PORT"]),
                                socket_timeout=CALL_TIMEOUT_S)
    devs: list[Any] = []
    for serial in serials:
        adb = AdbDevice(serial, client=client, capture="png", timeout_s=CALL_TIMEOUT_S)
        devs.append(StreamedDevice(adb, server_jar()) if transport == "scrcpy" else adb)

    async def warm(dev: Any) -> None:  # the stream started, the phone on its home screen
        with anyio.fail_after(60):
            await dev.key(3)
            await dev.screenshot()

    async with anyio.create_task_group() as tg:
        for dev in devs:
            tg.start_soon(warm, dev)
    run = Run()
    cpu0 = [decode_cpu(d) for d in devs]
    sim0 = sim_cpu(procs)
    t0 = time.monotonic()
    rng = random.Random(len(serials))
    async with anyio.create_task_group() as tg:
        for dev in devs:
            tg.start_soon(drive, dev, transport, steps, args.think_s, args.settle_s,
                          rng.uniform(0, args.think_s), spots, run)
    run.wall_s = time.monotonic() - t0
    run.sim_cpu_s = sim_cpu(procs) - sim0
    run.decode_cpu_s = sum(decode_cpu(d) - c for d, c in zip(devs, cpu0, strict=True))
    for dev in devs:
        if transport == "scrcpy":
            await dev.close()
    return run


async def start_phones(n: int, args: argparse.Namespace) -> tuple[subprocess.Popen[str], list[str]]:
    """N phones in one process: one hub, as one USB 2 hub's phones share its bandwidth."""
    proc = subprocess.Popen(  # noqa: ASYNC220 (a quick fork, once per N)
        [sys.executable, "-m", "sim.cli", "sim", "--count", str(n), "--profile", "realistic",
         "--capture-cost", args.capture_cost], cwd=ROOT, env=dict(os.environ), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout
    assert out is not None
    serials = []
    with anyio.fail_after(180):
        for _ in range(n):
            line = await anyio.to_thread.run_sync(out.readline)
            if not line:
                raise RuntimeError("the simulated phones' process exited early")
            serials.append(line.strip())
    return proc, serials


async def stop_phones(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        await anyio.to_thread.run_sync(proc.wait, 20)
    except subprocess.TimeoutExpired:
        proc.kill()


async def bench(args: argparse.Namespace) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    spots = targets()
    result: dict[str, dict[str, Any]] = {t: {} for t in TRANSPORTS}
    details: dict[str, Any] = {t: {} for t in TRANSPORTS}
    for n in args.devices:
        steps = args.steps_16 if n >= 16 else args.steps
        proc, serials = await start_phones(n, args)
        try:
            for transport in TRANSPORTS:
                t = time.monotonic()
                print(f"[transport] {transport} N={n}: {steps} steps a phone ...",
                      file=sys.stderr, flush=True)
                run = await run_transport(transport, serials, args, spots, steps, [proc])
                result[transport][str(n)] = run.summary()
                details[transport][str(n)] = run.details()
                print(f"[transport] {transport} N={n} in {time.monotonic() - t:.0f}s: "
                      f"{json.dumps(run.summary())} {json.dumps(run.details())}",
                      file=sys.stderr, flush=True)
        finally:
            await stop_phones(proc)
    return result, details


def _devices(text: str) -> list[int]:
    try:
        ns = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        ns = []
    if not ns or any(n < 1 or n > 64 for n in ns):
        raise argparse.ArgumentTypeError(f"phone counts from 1 to 64, comma-separated: {text!r}")
    return ns


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", type=_devices, default=[1, 4, 16],
                   help="phone counts, comma-separated (default 1,4,16)")
    p.add_argument("--out", type=Path, required=True, help="folder for transport.json")
    p.add_argument("--capture-cost", choices=("usb2", "off"), default="usb2",
                   help="the phones' device cost (sim/device_cost.py; default usb2, on); "
                        "off: the realistic profile's flat delays")
    p.add_argument("--steps", type=int, default=12, help="steps a phone below 16 phones")
    p.add_argument("--steps-16", type=int, default=6, help="steps a phone at 16 phones or more")
    p.add_argument("--settle-s", type=float, default=SETTLE_S,
                   help=f"the wait after an action before the capture (default {SETTLE_S})")
    p.add_argument("--think-s", type=float, default=THINK_S,
                   help=f"the wait between steps, the model's turn (default {THINK_S})")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    import structlog

    # the devices' log lines (streams started, fallbacks) on stderr: stdout ends in the JSON
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))
    adb_port = free_port()
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(adb_port)
    os.environ.setdefault("ADB_EMU", "0")
    from sim.fleet import ensure_adb_server, stop_adb_server

    ensure_adb_server(adb_port)
    try:
        result, details = anyio.run(bench, args)
    finally:
        stop_adb_server(adb_port)
    line = json.dumps(result)
    (args.out / "transport.json").write_text(line + "\n")
    (args.out / "transport_details.json").write_text(json.dumps(
        {"args": {"devices": args.devices, "capture_cost": args.capture_cost,
                  "steps": args.steps, "steps_16": args.steps_16, "think_s": args.think_s,
                  "settle_s": args.settle_s},
         "cpus": os.cpu_count(), "load_average_at_end": os.getloadavg(), "runs": details},
        indent=2) + "\n")
    print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
