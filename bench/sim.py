"""Simulated-phone throughput through the real path: adbutils -> adb server -> SimAdbServer.

Screenshots/s (`screenshot()`: screencap -p, PNG decode) and input commands/s (`click()`:
input tap), for 1 phone and for 8 phones in one process, instant latency profile. Each
phone gets its own client thread. Uses sim.phone.SimPhone when it can be imported, else
the tests' RecordingPhone stand-in (a flat screen: cheap to render and to encode), and says
which. A private adb server (ADB_EMU=0, free port) is started and killed unless --adb-port.

    .venv/bin/python -m bench.sim [--seconds 3] [--counts 1,8] [--shots 20]

Then the phone's own CPU per ``screencap -p`` (its thread CPU for layout, paint and PNG
encode, counted by sim.adb.encode), through adbutils on one phone, for three screens: an
unchanged one (captured again), typing one character between captures (a small change) and
flipping launcher pages (a whole new frame); each "before" (Pillow's PNG, every frame
painted whole, no reuse: the phone as it was) and "after" (the phone as it is), in the same
run, with the PNG bytes each costs.

Prints tables; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.fleet import PhoneFactory, SimFleet, find_adb  # noqa: E402
from sim.phone_api import DeviceInfo, Phone  # noqa: E402


def pick_phone() -> tuple[PhoneFactory, str]:
    try:
        from sim.phone import SimPhone
    except ImportError:
        from sim.stand_in import recording_phone

        def stand_in(info: DeviceInfo, seed: int) -> Phone:
            return recording_phone(info, seed)

        return stand_in, "RecordingPhone (stand-in: sim.phone is not importable)"

    def real(info: DeviceInfo, seed: int) -> Phone:
        phone: Phone = SimPhone(info, seed=seed)
        return phone

    return real, "SimPhone"


def free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if not 5554 <= port <= 5585:
            return port


def start_private_adb() -> tuple[int, Callable[[], None]]:
    adb = find_adb()
    if adb is None:
        sys.exit("bench/sim.py: no adb binary (install Debian's adb or the adbutils wheel)")
    port = free_port()
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(port), "ADB_EMU": "0", "ADB_MDNS": "0"}
    subprocess.run([adb, "-P", str(port), "start-server"], env=env, check=True,
                   capture_output=True, timeout=30)

    def kill() -> None:
        subprocess.run([adb, "-P", str(port), "kill-server"], env=env, check=False,
                       capture_output=True, timeout=30)

    return port, kill


def rate(fleet: SimFleet, op: Callable[[object], object], seconds: float) -> tuple[float, int]:
    """Run `op(device)` in a loop on every phone at once for `seconds`; ops/s over all phones."""
    devices = [fleet.device(s) for s in fleet.serials]
    for d in devices:  # warm up: first PNG encode, first connection
        op(d)
    counts = [0] * len(devices)
    errors: list[BaseException] = []
    start = threading.Barrier(len(devices) + 1)
    stop_at = [0.0]

    def worker(i: int) -> None:
        start.wait()
        try:
            while time.monotonic() < stop_at[0]:
                op(devices[i])
                counts[i] += 1
        except BaseException as e:  # report, do not hang the barrier
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(devices))]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    stop_at[0] = t0 + seconds
    start.wait()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    if errors:
        raise RuntimeError(f"benchmark operation failed: {errors[0]!r}") from errors[0]
    return sum(counts) / elapsed, sum(counts)


def raw_device_rate(port: int, command: bytes, seconds: float) -> float:
    """Shell commands/s straight to one SimAdbServer over the raw protocol (no adb server):
    the device side's own ceiling, to compare the adbutils figures with."""
    from sim.adb.wire import HEADER, Command, Message

    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = s.makefile("rb")

        def recv() -> tuple[int, int, bytes]:
            cmd, arg0, _, length, _, _ = HEADER.unpack(reader.read(HEADER.size))
            return cmd, arg0, reader.read(length)

        s.sendall(Message(Command.CNXN, 0x01000001, 256 * 1024, b"host::\0").pack())
        recv()
        done, local_id = 0, 0
        end = time.monotonic() + seconds
        t0 = time.monotonic()
        while time.monotonic() < end:
            local_id += 1
            s.sendall(Message(Command.OPEN, local_id, 0, b"shell,v2,raw:" + command + b"\0").pack())
            while True:
                cmd, remote, _ = recv()
                if cmd == Command.WRTE:
                    s.sendall(Message(Command.OKAY, local_id, remote).pack())
                elif cmd == Command.CLSE:
                    s.sendall(Message(Command.CLSE, local_id, remote).pack())
                    break
            done += 1
        return done / (time.monotonic() - t0)


SHOT_SCENES = ("unchanged", "typing", "new frame")


def shot_cost(port: int, shots: int) -> list[dict[str, object]]:
    """The phone's CPU and PNG bytes per screenshot, per scene, before and after."""
    from sim.adb.encode import encoder_for
    from sim.phone import SimPhone
    from sim.phone.apps import notes

    rows: list[dict[str, object]] = []
    for mode in ("before", "after"):
        for scene in SHOT_SCENES:
            with SimFleet(1, adb_port=port) as fleet:
                serial = fleet.serials[0]
                phone = fleet.phone(serial)
                assert isinstance(phone, SimPhone)
                dev: Any = fleet.device(serial)
                enc = encoder_for(phone)
                enc.codec, enc.reuse = ("pillow", False) if mode == "before" else ("fast", True)
                phone.partial_repaint = mode == "after"
                if scene == "typing":
                    phone.launch(notes.PACKAGE)
                    phone.settle()
                    phone.tap_element(phone.find(kind="search_bar")[0])
                for i in range(shots + 2):
                    if i == 2:  # the first two are warm-up
                        enc.reset_counters()
                    if scene == "typing":
                        dev.shell(["input", "text", "ab"[i % 2]])
                    elif scene == "new frame":
                        x0, x1 = (900, 180) if i % 2 == 0 else (180, 900)
                        dev.shell(["input", "swipe", str(x0), "1200", str(x1), "1200", "200"])
                    dev.screenshot()
                rows.append({"mode": mode, "scene": scene, "shots": enc.shots,
                             "cpu_ms": round(1000 * enc.cpu_s / max(1, enc.shots), 2),
                             "png_kb": round(enc.png_bytes / max(1, enc.shots) / 1024, 1),
                             "reused": enc.reused})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seconds", type=float, default=3.0, help="per measurement (default 3)")
    ap.add_argument("--counts", default="1,8", help="fleet sizes (default 1,8)")
    ap.add_argument("--shots", type=int, default=20,
                    help="screenshots per scene for the CPU-per-screenshot table (0: skip)")
    ap.add_argument("--adb-port", type=int, default=None,
                    help="use this running adb server instead of a private one")
    args = ap.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",") if c.strip()]
    factory, phone_kind = pick_phone()
    if args.adb_port is None:
        adb_port, kill = start_private_adb()
    else:
        adb_port, kill = args.adb_port, (lambda: None)
    results: dict[str, object] = {"bench": "sim", "phone": phone_kind, "profile": "instant",
                                  "seconds": args.seconds, "cpus": os.cpu_count()}
    rows: list[tuple[int, str, float, int]] = []
    try:
        for n in counts:
            with SimFleet(n, adb_port=adb_port, phone_factory=factory) as fleet:
                shots, shots_n = rate(fleet, lambda d: d.screenshot(), args.seconds)  # type: ignore[attr-defined]
                taps, taps_n = rate(fleet, lambda d: d.click(540, 1200), args.seconds)  # type: ignore[attr-defined]
                if n == 1:  # the same phone without the adb server and adbutils in the way
                    port = fleet.members[0].port
                    results["raw_device_screencap_per_s_1"] = round(
                        raw_device_rate(port, b"screencap -p", args.seconds), 2)
                    results["raw_device_input_per_s_1"] = round(
                        raw_device_rate(port, b"input tap 540 1200", args.seconds), 2)
            rows += [(n, "screenshots/s", shots, shots_n), (n, "input cmds/s", taps, taps_n)]
            results[f"screenshots_per_s_{n}"] = round(shots, 2)
            results[f"input_per_s_{n}"] = round(taps, 2)
        shot_rows = shot_cost(adb_port, args.shots) if args.shots > 0 and phone_kind == "SimPhone" \
            else []
    finally:
        kill()
    print(f"phone: {phone_kind}; profile instant; {args.seconds:g} s per cell; "
          f"{os.cpu_count()} CPUs; adbutils -> adb server -> SimAdbServer")
    print(f"{'phones':>6}  {'metric':<14} {'rate':>9}  {'ops':>6}")
    for n, metric, value, ops in rows:
        print(f"{n:>6}  {metric:<14} {value:>9.1f}  {ops:>6}")
    if "raw_device_input_per_s_1" in results:
        print(f"device side alone (raw ADB protocol, 1 phone, no adb server): "
              f"{results['raw_device_screencap_per_s_1']} screencap -p/s, "
              f"{results['raw_device_input_per_s_1']} input tap/s")
    if shot_rows:
        print("the phone's CPU per screencap -p (layout + paint + PNG encode, its own thread):")
        print(f"{'scene':<10} {'before ms':>9} {'after ms':>9} {'ratio':>6} "
              f"{'before KB':>9} {'after KB':>9} {'reused':>6}")
        by = {(str(r["mode"]), str(r["scene"])): r for r in shot_rows}
        for scene in SHOT_SCENES:
            b, a = by[("before", scene)], by[("after", scene)]
            ratio = float(str(a["cpu_ms"])) / max(1e-9, float(str(b["cpu_ms"])))
            print(f"{scene:<10} {b['cpu_ms']:>9} {a['cpu_ms']:>9} {ratio:>6.2f} "
                  f"{b['png_kb']:>9} {a['png_kb']:>9} {a['reused']:>6}")
            key = scene.replace(" ", "_")
            results[f"shot_cpu_ms_{key}"] = {"before": b["cpu_ms"], "after": a["cpu_ms"]}
            results[f"shot_png_kb_{key}"] = {"before": b["png_kb"], "after": a["png_kb"]}
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
