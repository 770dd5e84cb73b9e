"""Chaos on the scrcpy stream: servers killed and a USB cable pulled while phones work.

    python -m bench.stream_chaos --phones 16 --server-kills 4 --usb-drops 1 --steps 60

``--phones`` simulated phones (``sim.stand_in.RecordingPhone`` with ``shows_input``: a
cheap screen whose colour changes with every input it receives, and a record of each tap)
behind their real ADB side, each driven through ``StreamedDevice`` (devices/streamed.py)
by a step loop as the agent's: a capture, one tap at a point no other step uses, the
settle wait. A step that fails (the phone unreachable) is decided by the next capture, as
the agent's next step would: the screen shows whether the tap landed; if not, it is sent
again. Faults at seeded times in the middle of the run: ``--server-kills`` phones have
their scrcpy server killed (``Faults.scrcpy_kills``, SIGKILL of its app_process), and
``--usb-drops`` phones lose their ADB transport for ``--drop-s`` seconds mid-stream.

The counts come from both ends: the host's intended taps against the taps each phone
received (``RecordingPhone.calls``). Reported: steps sent and done, lost (intended, never
received), doubled (received more than once), stray (received, never intended), each
fault's time until the phone is back on the stream (from the kill, or from the cable's
return), the share of captures and actions that went through the stream, and the actions
the stream may not have delivered (settled by the screen) and of those redone through adb.
The last printed line is one JSON object; the exit status is 1 when a check fails (a step
lost or doubled, a phone not back on the stream within ``BACK_WITHIN_S``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio  # noqa: E402

from devices.adb import AdbDevice, DeviceError  # noqa: E402
from devices.scrcpy import server_jar  # noqa: E402
from devices.streamed import StreamedDevice  # noqa: E402
from sim.fleet import SimFleet  # noqa: E402
from sim.phone_api import DeviceInfo  # noqa: E402
from sim.stand_in import RecordingPhone, inputs_shown  # noqa: E402

BACK_WITHIN_S = 30.0
SETTLE_S = 0.3  # agent.settle_s's default
RETRY_PAUSE_S = 0.5  # a failed step's next try (the agent's next step)
CALL_TIMEOUT_S = 30.0  # one capture or action, however the phone is
SCREEN = (540, 960, 240)  # a small screen: 16 streams share two cores


def chaos_phone(info: DeviceInfo, seed: int = 0) -> RecordingPhone:
    w, h, dpi = SCREEN
    return RecordingPhone(dataclasses.replace(info, width=w, height=h, density=dpi),
                          shows_input=True)


SPACING = 10  # px between two steps' points; a tap through the stream may land a pixel
NEAR = 3  # off (the video's width is rounded to 8 px): a received tap this close is the step's


def point(step: int) -> tuple[int, int]:
    """The step's own tap point: no two steps of a run share one."""
    return 20 + step % 50 * SPACING, 100 + step // 50 * SPACING


def step_of(x: int, y: int) -> int | None:
    """The step whose point a received tap is (within NEAR px), or None."""
    col, row = round((x - 20) / SPACING), round((y - 100) / SPACING)
    if not 0 <= col < 50 or row < 0:
        return None
    px, py = 20 + col * SPACING, 100 + row * SPACING
    return row * 50 + col if abs(x - px) <= NEAR and abs(y - py) <= NEAR else None


@dataclass
class PhoneRun:
    serial: str
    sent: int = 0  # steps whose tap was sent (at least once)
    retries: int = 0  # sends again after a failed try the screen said had not landed
    failures: int = 0  # calls that raised (the phone unreachable)
    faults: list[dict[str, Any]] = field(default_factory=list)  # {kind, at, up, back}


async def drive(dev: StreamedDevice, run: PhoneRun, steps: int, t0: float) -> None:
    """The step loop: a capture, a tap, the settle wait; a failed step decided by the screen."""
    for step in range(steps):
        tried = False
        shown: int | None = None
        while True:
            try:
                with anyio.fail_after(CALL_TIMEOUT_S):
                    shot = await dev.screenshot()
                now = time.monotonic() - t0
                for f in run.faults:  # the first capture through a stream started after it
                    if f["back"] is None and dev.path == "stream" and now >= f["up"] \
                            and dev.starts > f["starts"]:
                        f["back"] = round(now, 2)
                seen = inputs_shown(shot.rgb)
                if tried and shown is not None and seen != shown:
                    break  # the failed try had landed: the screen moved on
                shown = seen
                with anyio.fail_after(CALL_TIMEOUT_S):
                    if tried:
                        run.retries += 1
                    tried = True
                    await dev.tap(*point(step))
                break
            except (DeviceError, TimeoutError):
                run.failures += 1
                await anyio.sleep(RETRY_PAUSE_S)
        run.sent = max(run.sent, step + 1)
        await anyio.sleep(SETTLE_S)


def check(runs: Sequence[PhoneRun], phones: dict[str, RecordingPhone], steps: int
          ) -> dict[str, Any]:
    lost = doubled = stray = 0
    for run in runs:
        got = Counter(step_of(int(c[0]), int(c[1]))  # type: ignore[call-overload]
                      for c in phones[run.serial].calls_of("tap"))
        lost += sum(1 for i in range(run.sent) if got[i] == 0)
        doubled += sum(n - 1 for i, n in got.items() if i is not None and i < run.sent and n > 1)
        stray += sum(n for i, n in got.items() if i is None or i >= run.sent)
    return {"lost": lost, "doubled": doubled, "stray": stray}


async def run_chaos(*, phones: int, steps: int, server_kills: int, usb_drops: int,
                    drop_s: float = 3.0, seed: int = 0) -> dict[str, Any]:
    jar = server_jar()
    fleet = await anyio.to_thread.run_sync(
        SimFleet(phones, seed=seed, phone_factory=chaos_phone).start)
    devs: list[StreamedDevice] = []
    try:
        rng = random.Random(f"stream-chaos/{seed}")
        serials = fleet.serials
        devs = [StreamedDevice(AdbDevice(s, timeout_s=10.0), jar) for s in serials]
        runs = [PhoneRun(s) for s in serials]
        by_serial = dict(zip(serials, runs, strict=True))
        victims = rng.sample(serials, min(len(serials), server_kills + usb_drops))
        # mid-run: a step takes ~0.5 s, so between a quarter and half of the steps
        span = (0.25 * steps * 0.5, 0.5 * steps * 0.5)
        plan = sorted([(rng.uniform(*span), "server_kill", s) for s in victims[:server_kills]]
                      + [(rng.uniform(*span), "usb_drop", s) for s in victims[server_kills:]])
        t0 = time.monotonic()

        async def fault(at: float, kind: str, serial: str) -> None:
            await anyio.sleep(at)
            dev = devs[serials.index(serial)]
            phone = fleet.phone(serial)
            entry: dict[str, Any] = {"kind": kind, "serial": serial, "starts": dev.starts,
                                     "at": round(time.monotonic() - t0, 2), "back": None}
            if kind == "server_kill":
                phone.faults.scrcpy_kills += 1
                entry["up"] = entry["at"]
            else:
                phone.faults.drop_connections = True
                await anyio.sleep(drop_s)
                phone.faults.drop_connections = False
                await anyio.to_thread.run_sync(fleet.restart, serial)
                entry["up"] = round(time.monotonic() - t0, 2)
            by_serial[serial].faults.append(entry)

        async with anyio.create_task_group() as tg:
            for at, kind, serial in plan:
                tg.start_soon(fault, at, kind, serial)
            for dev, run in zip(devs, runs, strict=True):
                tg.start_soon(drive, dev, run, steps, t0)
        wall = time.monotonic() - t0
        phones_by = {s: fleet.phone(s) for s in serials}
        assert all(isinstance(p, RecordingPhone) for p in phones_by.values())
        counts = check(runs, phones_by, steps)  # type: ignore[arg-type]
    finally:
        for dev in devs:
            with anyio.CancelScope(shield=True):
                await dev.close()
        await anyio.to_thread.run_sync(fleet.stop)
    faults = [{k: v for k, v in f.items() if k != "starts"} for r in runs for f in r.faults]
    for f in faults:
        f["back_after_s"] = None if f["back"] is None else round(f["back"] - f["up"], 2)
    captures: Counter[str] = sum((d.captures for d in devs), Counter())
    actions: Counter[str] = sum((d.actions for d in devs), Counter())
    back = [f["back_after_s"] for f in faults]
    report = {
        "phones": phones, "steps_per_phone": steps,
        "steps_sent": sum(r.sent for r in runs),
        "steps_done": sum(r.sent for r in runs) - counts["lost"],
        **counts,
        "retries_after_failed_step": sum(r.retries for r in runs),
        "failed_calls": sum(r.failures for r in runs),
        "uncertain_actions": sum(d.uncertain for d in devs),
        "redone_through_adb": sum(d.redone for d in devs),
        "stream_losses": sum(d.losses for d in devs), "stream_starts": sum(d.starts for d in devs),
        "capture_stream_share": round(captures["stream"] / max(1, sum(captures.values())), 3),
        "action_stream_share": round(actions["stream"] / max(1, sum(actions.values())), 3),
        "faults": faults,
        "max_back_on_stream_s": None if None in back or not back else max(back),
        "wall_s": round(wall, 1),
    }
    report["ok"] = (counts["lost"] == 0 and counts["doubled"] == 0 and counts["stray"] == 0
                    and all(b is not None and b <= BACK_WITHIN_S for b in back))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/stream_chaos.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--phones", type=int, default=16)
    p.add_argument("--steps", type=int, default=60, help="steps per phone")
    p.add_argument("--server-kills", type=int, default=4)
    p.add_argument("--usb-drops", type=int, default=1)
    p.add_argument("--drop-s", type=float, default=3.0, help="how long a cable stays out")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.server_kills + args.usb_drops > args.phones:
        print("bench/stream_chaos.py: more faulty phones than phones", file=sys.stderr)
        return 2
    report = anyio.run(lambda: run_chaos(
        phones=args.phones, steps=args.steps, server_kills=args.server_kills,
        usb_drops=args.usb_drops, drop_s=args.drop_s, seed=args.seed))
    for f in report["faults"]:
        print(f"{f['kind']:11s} {f['serial']}: at {f['at']:.1f}s, up {f['up']:.1f}s, back on "
              f"the stream after {f['back_after_s']}s")
    print(f"steps sent {report['steps_sent']}, done {report['steps_done']}, lost "
          f"{report['lost']}, doubled {report['doubled']}, stray {report['stray']}; "
          f"uncertain {report['uncertain_actions']} (redone {report['redone_through_adb']}); "
          f"stream share: captures {report['capture_stream_share']:.0%}, actions "
          f"{report['action_stream_share']:.0%}")
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
