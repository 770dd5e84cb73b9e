"""``mobagent doctor``: is every phone the adb server lists ready for the agent?

One row per phone adb lists (``unauthorized``, ``offline`` and ``no permissions`` ones
too), one column per check of ``devices/preflight.py`` (ok, FAIL or ? for unknown, with
the value), then each failing check's fix. ``--json`` prints each phone's ``Preflight``
with its ``ready`` and ``summary``. Nothing is changed on the phones (the one injected
key is KEYCODE_UNKNOWN) unless ``--wake``: then a sleeping phone is woken and a lock
screen without a PIN dismissed, as the fleet does before an episode. Exits 1 when a phone
needs attention or adb lists none, 0 when all are ready.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio
import msgspec

from devices.adb import AdbDevice
from devices.discovery import ABSENT, AdbDevices, DeviceSourceError
from devices.preflight import Check, Preflight, preflight, ready_phone
from host.fleet import FleetHostConfig
from runtime.cli import EXIT_FAIL, EXIT_OK, prepare, run_until_signalled

CELL_MAX = 34  # a table cell's characters; the JSON has the whole value
MARKS = {True: "ok", False: "FAIL", None: "?"}
NO_PHONES = ("adb lists no phones: plug one in with a data cable, turn on Developer options > "
             "USB debugging, and accept the prompt on the phone (`adb devices` shows it)")


async def diagnose(source: AdbDevices, serials: list[str], *, need_keyboard: bool,
                   wake: bool = False) -> list[Preflight]:
    """Each listed phone's preflight (``serials``: only these, listed or not), at once."""
    listing = await source.present()
    wanted = serials or sorted(listing)
    found: dict[str, Preflight] = {}

    async def one(serial: str) -> None:
        state = listing.get(serial, ABSENT)
        dev = AdbDevice(serial, client=source.client(), timeout_s=source.timeout_s)
        if wake:
            found[serial] = await ready_phone(dev, need_keyboard=need_keyboard, adb_state=state)
        else:
            found[serial] = await preflight(dev, need_keyboard=need_keyboard, adb_state=state)

    async with anyio.create_task_group() as tg:
        for serial in wanted:
            tg.start_soon(one, serial)
    return [found[s] for s in wanted]


def _cell(check: Check | None) -> str:
    if check is None:
        return "-"
    text = "?" if check.ok is None else f"{MARKS[check.ok]} {check.value}".strip()
    return text if len(text) <= CELL_MAX else text[:CELL_MAX - 1] + "…"


def table(reports: list[Preflight]) -> str:
    """The rows and columns, then what to fix (one line per failing check)."""
    names = list(dict.fromkeys(c.name for r in reports for c in r.checks))
    rows = [["phone", *names]] + [[r.serial, *(_cell(r.check(n)) for n in names)]
                                  for r in reports]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    lines.append("")
    for r in reports:
        took = f" ({r.took_s * 1000:.0f} ms)" if r.took_s else ""
        lines.append(f"{r.serial}: {'ready' if r.ready else 'needs attention'}{took}")
        lines += [f"  done: {what}" for what in r.done]
        lines += [f"  {c.name}: {c.value} — {c.fix}" for c in r.attention]
    return "\n".join(lines)


def as_json(reports: list[Preflight]) -> bytes:
    return msgspec.json.encode([{**msgspec.to_builtins(r), "ready": r.ready,
                                 "summary": r.summary} for r in reports])


def cmd_doctor(args: argparse.Namespace) -> int:
    cfg = prepare(args, FleetHostConfig, quiet=True)
    fleet = cfg.fleet
    source = AdbDevices(fleet.adb_host, fleet.adb_port, timeout_s=fleet.adb_timeout_s)
    need = fleet.need_keyboard if args.keyboard is None else args.keyboard
    result: list[list[Preflight]] = []

    async def run() -> int:
        try:
            result.append(await diagnose(source, list(args.serial or []), need_keyboard=need,
                                         wake=args.wake))
        except DeviceSourceError as exc:
            print(f"mobagent doctor: {exc}", file=sys.stderr)
            return EXIT_FAIL
        return EXIT_OK

    code = run_until_signalled(run)
    if code != EXIT_OK or not result:
        return code or EXIT_FAIL
    reports = result[0]
    if args.json:
        sys.stdout.write(as_json(reports).decode() + "\n")
    elif not reports:
        print(f"mobagent doctor: {NO_PHONES}", file=sys.stderr)
    else:
        print(table(reports))
    return EXIT_OK if reports and all(r.ready for r in reports) else EXIT_FAIL


def register(sub: Any) -> None:
    """Entry point (group ``mobagent.commands``, name ``doctor``)."""
    p = sub.add_parser(
        "doctor", help="check every phone adb lists: ready for the agent, or what to fix",
        description="One row per phone the adb server lists (unauthorized and offline ones "
                    "too), one column per check (adb state, Android, vendor, screen, displays, "
                    "awake, lock screen, ADB Keyboard, home app, injected input), each ok or "
                    "FAIL with its fix. Exit 1 when a phone needs attention.")
    p.add_argument("--serial", action="append", metavar="SERIAL",
                   help="only this phone (repeatable)")
    p.add_argument("--json", action="store_true", help="print each phone's checks as JSON")
    p.add_argument("--keyboard", action=argparse.BooleanOptionalAction, default=None,
                   help="the ADB Keyboard must be there (default: [fleet] need_keyboard)")
    p.add_argument("--wake", action="store_true",
                   help="wake a sleeping phone and dismiss a lock screen without a PIN first")
    p.set_defaults(func=cmd_doctor)
