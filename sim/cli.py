"""`mobagent sim ...`: run a fleet of simulated phones, or save a screenshot through adb.

`register(subparsers)` is the `mobagent.commands` entry point; each handler returns an
exit status. `python -m sim.cli ...` runs the same commands without the runtime's CLI.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from runtime.cli import whole_number
from sim.device_cost import USB2_BYTES_PER_S, DeviceCost, UsbHub
from sim.fleet import FleetError, PhoneFactory, SimFleet, adb_server_port
from sim.phone_api import IME_WARMUP_S, DeviceState, Faults, LatencyProfile
from sim.profiles import PROFILES

LATENCY_PROFILES = ("instant", "realistic")
MAX_COUNT = 64


def _millis(text: str) -> float:
    try:
        ms = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of milliseconds: {text!r}") from None
    if not 0 <= ms <= 60_000:
        raise argparse.ArgumentTypeError(f"delay must be between 0 and 60000 ms, not {text}")
    return ms


def _device_profiles(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in PROFILES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown device profile {', '.join(unknown) or text!r} (one of {', '.join(PROFILES)})")
    return names


def _bytes_per_s(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"not a positive number of bytes per second: {text!r}")
    return value


def latency_from_args(args: argparse.Namespace) -> LatencyProfile:
    profile = LatencyProfile.named(args.profile)
    if args.screencap_ms is not None:
        profile.screencap_s = args.screencap_ms / 1000
    if args.input_ms is not None:
        profile.input_s = args.input_ms / 1000
    # one hub: the phones of the fleet share it
    if args.capture_cost == "off":
        profile.cost = None
    elif args.capture_cost == "usb2":
        profile.cost = DeviceCost.usb2(UsbHub(args.usb_bytes_per_s))
    elif profile.cost is not None:  # the profile's own model (realistic's), on this hub
        profile.cost.hub = UsbHub(args.usb_bytes_per_s)
    return profile


def state_from_args(args: argparse.Namespace) -> DeviceState:
    return DeviceState(awake=not args.asleep, locked=args.locked or args.pin is not None,
                       pin=args.pin, adb_keyboard=args.adb_keyboard,
                       usb_security=args.usb_security)


def faults_from_args(args: argparse.Namespace) -> Faults:
    return Faults(unauthorized=args.unauthorized, ime_warmup_s=args.ime_warmup_ms / 1000)


def _profiles_help() -> str:
    return "; ".join(f"{p.name}: {p.summary}" for p in PROFILES.values())


def register(subparsers: Any) -> None:
    """Add `sim` (and `sim screenshot`) to an argparse subparsers object."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "sim", help="run simulated Android phones that adb can drive",
        description="Start N simulated phones in this process, each on its own loopback port "
                    "and `adb connect`ed to the adb server on ANDROID_ADB_SERVER_PORT; print "
                    "their serials and run until Ctrl-C.")
    p.add_argument("--count", type=whole_number(1, MAX_COUNT, "count"), default=1, help="number of phones (default 1)")
    p.add_argument("--seed", type=whole_number(0, what="seed"), default=0,
                   help="perturbation seed; 0 is the canonical layout (default 0)")
    p.add_argument("--profile", choices=LATENCY_PROFILES, default="instant",
                   help="latency profile, how slow each command is (default instant; "
                        "realistic: a real phone's costs, sim/device_cost.py); which "
                        "phone it is: "
                        "--device-profile")
    p.add_argument("--screencap-ms", type=_millis, default=None,
                   help="override the profile's screencap delay")
    p.add_argument("--input-ms", type=_millis, default=None,
                   help="override the profile's input delay")
    phone = p.add_argument_group("which phone, in which state (every phone of the fleet)")
    phone.add_argument("--device-profile", type=_device_profiles, default=["sim"],
                       metavar="NAME[,NAME...]",
                       help="the real phone each answers as, its outputs in that phone's "
                            "form; several names are given to the phones in turn "
                            f"(default sim). {_profiles_help()}")
    phone.add_argument("--asleep", action="store_true",
                       help="screen off: black frames until KEYCODE_WAKEUP or POWER")
    phone.add_argument("--locked", action="store_true",
                       help="keyguard up: a swipe up, MENU or `wm dismiss-keyguard` dismisses it")
    phone.add_argument("--pin", default=None,
                       help="locked with this PIN: the keyguard stays until it is typed")
    phone.add_argument("--adb-keyboard", choices=("enabled", "disabled", "absent"),
                       default="enabled",
                       help="the ADB Keyboard: enabled (default), installed but disabled, "
                            "or not installed")
    phone.add_argument("--ime-warmup-ms", type=_millis, nargs="?", default=0.0,
                       const=IME_WARMUP_S * 1000,
                       help="the ADB Keyboard drops broadcasts this long after `ime set` "
                            f"(given alone: {IME_WARMUP_S * 1000:.0f} ms; default 0)")
    phone.add_argument("--usb-security", action="store_true",
                       help="Xiaomi's USB debugging (Security settings) is on "
                            "(xiaomi-hyperos refuses `input` without it)")
    phone.add_argument("--unauthorized", action="store_true",
                       help="adbd answers with AUTH: `adb devices` lists it unauthorized")
    phone.add_argument("--capture-cost", choices=("off", "usb2"), default=None,
                       help="charge a real phone's own costs (sim/device_cost.py): PNG/raw "
                            "encode per pixel, `input`'s process start, scrcpy's control "
                            "injection, one USB hub's bandwidth shared by the fleet "
                            "(default: the profile's; realistic has it, instant not; off: "
                            "the profile's flat delays)")
    phone.add_argument("--usb-bytes-per-s", type=_bytes_per_s, default=USB2_BYTES_PER_S,
                       help=f"the hub's bandwidth with --capture-cost (default {USB2_BYTES_PER_S})")
    p.set_defaults(func=lambda args: run_fleet(args))
    sub = p.add_subparsers(dest="sim_command", metavar="{screenshot}")
    shot = sub.add_parser("screenshot", help="save a phone's screen as PNG, through adb",
                          description="Save a screenshot of SERIAL (through adbutils) to OUT.")
    shot.add_argument("serial", help="the serial `adb devices` lists, e.g. 127.0.0.1:40123")
    shot.add_argument("out", type=Path, help="the PNG file to write")
    shot.set_defaults(func=lambda args: save_screenshot(args))


def run_fleet(args: argparse.Namespace, *, phone_factory: PhoneFactory | None = None,
              stop: threading.Event | None = None, out: TextIO | None = None) -> int:
    """Start the fleet, print one serial per line, wait for Ctrl-C/SIGTERM (or `stop`)."""
    out = out or sys.stdout
    stop = stop or threading.Event()
    restore = _install_stop_signals(stop)
    try:
        try:
            fleet = SimFleet(args.count, seed=args.seed, profile=latency_from_args(args),
                             phone_factory=phone_factory,
                             device_profile=args.device_profile,
                             state=state_from_args(args), faults=faults_from_args(args)).start()
        except (FleetError, ValueError, OSError) as e:
            print(f"mobagent sim: {e}", file=sys.stderr)
            return 1
        try:
            for member in fleet:
                print(member.serial, file=out, flush=True)
            print(f"{len(fleet)} simulated phone(s) on adb server port {fleet.adb_port} "
                  f"(profile {args.profile}, device profile "
                  f"{','.join(args.device_profile)}, seed {args.seed}); Ctrl-C stops them",
                  file=sys.stderr, flush=True)
            while not stop.wait(0.5):
                pass
        finally:
            fleet.stop()
        print("simulated phones stopped", file=sys.stderr, flush=True)
        return 0
    finally:
        restore()


def _install_stop_signals(stop: threading.Event) -> Any:
    """SIGINT/SIGTERM set `stop` (main thread only); returns a function restoring the old ones."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, lambda _signum, _frame: stop.set())

    def restore() -> None:
        for s, handler in old.items():
            signal.signal(s, handler)

    return restore


def save_screenshot(args: argparse.Namespace) -> int:
    import adbutils
    from adbutils.errors import AdbError

    path: Path = args.out
    if not path.parent.is_dir():
        print(f"mobagent sim screenshot: no such directory: {path.parent}", file=sys.stderr)
        return 1
    client = adbutils.AdbClient(host="127.0.0.1", port=adb_server_port(), socket_timeout=30)
    try:
        image = client.device(args.serial).screenshot(error_ok=False)
        image.convert("RGB").save(path, format="PNG")
    except (AdbError, OSError, ValueError) as e:
        print(f"mobagent sim screenshot: {args.serial}: {e}", file=sys.stderr)
        return 1
    print(f"{path} ({image.width}x{image.height})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mobagent")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
