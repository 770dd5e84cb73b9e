"""``mobagent devices setup --ime-apk FILE``: put the ADB Keyboard on every phone.

mobagent cannot ship the keyboard's APK (https://github.com/senzhk/ADBKeyBoard/releases);
given one, this is ``adb install -r -g FILE`` on every phone adb lists as ``device`` (or
each ``--serial``): the file is pushed to ``/data/local/tmp`` and installed with ``pm
install -r -g``, then the keyboard is enabled (``ime enable``) and checked in ``ime list
-s``. Progress goes to stdout, one line per step and phone; a failure names the phone, the
line the phone printed and the fix, and the next phone is set up all the same. Exits 1
when a phone failed, 2 for a missing or unreadable APK.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from devices.adb import ADB_KEYBOARD, AdbDevice, DeviceError
from devices.adb_output import input_methods, shell_failure
from devices.discovery import ABSENT, AdbDevices, DeviceSourceError
from devices.preflight import ADB_KEYBOARD_APK, ADB_STATE_FIXES
from host.fleet import FleetHostConfig
from runtime.cli import EXIT_FAIL, EXIT_OK, EXIT_USAGE, prepare, run_until_signalled
from runtime.errors import MobagentError

REMOTE_DIR = "/data/local/tmp"
# What `pm install` prints when it fails, and the fix.
INSTALL_FIXES = {
    "INSTALL_FAILED_USER_RESTRICTED": "the phone refused an install over USB: on Xiaomi turn on "
                                      "Developer options > Install via USB (and accept the prompt"
                                      " on the phone), on vivo/OPPO allow the install prompt",
    "INSTALL_FAILED_UPDATE_INCOMPATIBLE": "another build of the keyboard is installed: "
                                          "`adb uninstall com.android.adbkeyboard`, then again",
    "INSTALL_FAILED_VERSION_DOWNGRADE": "a newer keyboard is installed: keep it, or uninstall it "
                                        "first (`adb uninstall com.android.adbkeyboard`)",
    "INSTALL_FAILED_INSUFFICIENT_STORAGE": "the phone is full: free some storage",
    "INSTALL_PARSE_FAILED": "the file is not a usable APK: download ADBKeyboard.apk again "
                            f"({ADB_KEYBOARD_APK})",
    "INSTALL_FAILED_INVALID_APK": "the file is not a usable APK: download ADBKeyboard.apk again "
                                  f"({ADB_KEYBOARD_APK})",
}


class SetupError(MobagentError, RuntimeError):
    """A phone could not be set up; the message says where it stopped and the fix."""


def check_apk(path: Path) -> str | None:
    """Why ``path`` cannot be installed (missing, not an APK), or None."""
    if not path.is_file():
        return f"{path}: no such file; download ADBKeyboard.apk from {ADB_KEYBOARD_APK}"
    if not zipfile.is_zipfile(path):
        return f"{path} is not an APK (an APK is a zip file); download it from {ADB_KEYBOARD_APK}"
    return None


def install_problem(output: str, exit_code: int, by_hand: str = "adb install -r -g FILE"
                    ) -> str | None:
    """What a failed ``pm install`` says, with its fix; None when it succeeded."""
    if exit_code == 0 and "Success" in output:
        return None
    line = next((ln.strip() for ln in output.splitlines() if "Failure" in ln or "Error" in ln),
                (output.strip().splitlines() or [f"exit {exit_code}"])[0])[:200]
    for code, fix in INSTALL_FIXES.items():
        if code in output:
            return f"{line} — {fix}"
    failure = shell_failure(output, exit_code)
    fix = failure.hint if failure and failure.kind != "unknown" \
        else f"install it by hand (`{by_hand}`) and read what adb says"
    return f"{line} — {fix}"


async def setup_phone(device: AdbDevice, apk: Path, say: Callable[[str], None]) -> None:
    """Install ``apk`` on ``device`` and enable the ADB Keyboard; SetupError on a failure."""
    serial = device.serial
    remote = f"{REMOTE_DIR}/{apk.name.replace(' ', '_')}"
    say(f"{serial}: pushing {apk.name}")
    await device.push(str(apk), remote)
    say(f"{serial}: installing (pm install -r -g)")
    res = await device.shell_result(f"pm install -r -g {remote}", timeout_s=120.0)
    await device.shell_result(f"rm -f {remote}")
    problem = install_problem(res.output, res.exit_code,
                              f"adb -s {serial} install -r -g {apk}")
    if problem is not None:
        raise SetupError(f"{serial}: the install failed: {problem}")
    say(f"{serial}: enabling the ADB Keyboard")
    res = await device.shell_result(f"ime enable {ADB_KEYBOARD}")
    failure = shell_failure(res.output, res.exit_code)
    if failure is not None or res.exit_code != 0:
        why = failure.line if failure else res.output.strip()[:200]
        fix = failure.hint if failure and failure.kind != "unknown" \
            else f"run `adb -s {serial} shell ime enable {ADB_KEYBOARD}`"
        raise SetupError(f"{serial}: `ime enable` failed: {why} — {fix}")
    listed = await device.shell_result("ime list -s")
    if ADB_KEYBOARD not in input_methods(listed.output):
        raise SetupError(f"{serial}: the ADB Keyboard is not in `ime list -s` after `ime enable`"
                         f" — enable it by hand in Settings > System > Keyboard")
    say(f"{serial}: done: the ADB Keyboard is installed and enabled")


async def setup_all(source: AdbDevices, serials: list[str], apk: Path,
                    say: Callable[[str], None]) -> list[str]:
    """Set up each phone (all ``device`` ones when ``serials`` is empty), one after the
    other; the failures, one line each (a phone adb cannot use is one)."""
    listing = await source.present()
    wanted = serials or sorted(s for s, state in listing.items() if state == "device")
    if not wanted:
        return ["adb lists no usable phone: plug one in and accept the USB debugging prompt"]
    failed: list[str] = []
    for serial in wanted:
        state = listing.get(serial, ABSENT)
        if state != "device":
            failed.append(f"{serial}: {state} — {ADB_STATE_FIXES.get(state, 'replug it')}")
            continue
        try:
            await setup_phone(AdbDevice(serial, client=source.client(),
                                        timeout_s=source.timeout_s), apk, say)
        except (SetupError, DeviceError) as exc:
            failed.append(str(exc))
    return failed


def cmd_setup(args: argparse.Namespace) -> int:
    cfg = prepare(args, FleetHostConfig, quiet=True)
    apk = Path(args.ime_apk)
    bad = check_apk(apk)
    if bad is not None:
        print(f"mobagent devices setup: {bad}", file=sys.stderr)
        return EXIT_USAGE
    fleet = cfg.fleet
    source = AdbDevices(fleet.adb_host, fleet.adb_port, timeout_s=fleet.adb_timeout_s)

    async def run() -> int:
        try:
            failed = await setup_all(source, list(args.serial or []), apk,
                                     lambda line: print(line, flush=True))
        except DeviceSourceError as exc:
            failed = [str(exc)]
        for line in failed:
            print(f"mobagent devices setup: {line}", file=sys.stderr)
        return EXIT_FAIL if failed else EXIT_OK

    return run_until_signalled(run)


def register(sub: Any) -> None:
    """Entry point (group ``mobagent.commands``, name ``devices``)."""
    p = sub.add_parser("devices", help="prepare the phones adb lists (`devices setup`)")
    what = p.add_subparsers(dest="devices_command", metavar="SUBCOMMAND", required=True)
    s = what.add_parser(
        "setup", help="install and enable the ADB Keyboard on every phone",
        description="Install the ADB Keyboard APK (adb install -r -g) on every phone adb lists "
                    "as usable, or each --serial, then enable it (ime enable). mobagent cannot "
                    f"ship the APK: download ADBKeyboard.apk from {ADB_KEYBOARD_APK}.")
    s.add_argument("--ime-apk", required=True, metavar="FILE", help="ADBKeyboard.apk")
    s.add_argument("--serial", action="append", metavar="SERIAL",
                   help="only this phone (repeatable)")
    s.set_defaults(func=cmd_setup)

