"""``mobagent doctor``: is every phone the adb server lists ready for the agent?

One row per phone adb lists (``unauthorized``, ``offline`` and ``no permissions`` ones
too), one column per check of ``devices/preflight.py`` (ok, FAIL or ? for unknown, with
the value), then each failing check's fix. ``--json`` prints each phone's ``Preflight``
with its ``ready`` and ``summary``. Nothing is changed on the phones (the one injected
key is KEYCODE_UNKNOWN) unless ``--wake``: then a sleeping phone is woken and a lock
screen without a PIN dismissed, as the fleet does before an episode. Where
``device.transport`` is not ``adb``, a ``stream`` column says whether the scrcpy server
file is there and verified, whether the server starts, and how long its first frame took.
Exits 1 when a phone needs attention or adb lists none, 0 when all are ready.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from typing import Any

import anyio
import msgspec

from actors.config import DeviceSettings
from devices.adb import AdbDevice
from devices.discovery import ABSENT, AdbDevices, DeviceSourceError
from devices.identity import SHARED_SERIAL_FIX, PhoneIdentity, phone_identity, shared_serials
from devices.preflight import Check, Preflight, preflight, ready_phone
from devices.scrcpy import ScrcpyError, ScrcpyStream, server_jar
from host.fleet import FleetHostConfig
from runtime.cli import EXIT_FAIL, EXIT_OK, prepare, run_until_signalled

CELL_MAX = 34  # a table cell's most characters; the JSON has the whole value
TABLE_WIDTH = 120  # the terminal's columns when it does not say (not a tty)
MARKS = {True: "ok", False: "FAIL", None: "?"}
NO_PHONES = ("adb lists no phones: plug one in with a data cable, turn on Developer options > "
             "USB debugging, and accept the prompt on the phone (`adb devices` shows it)")


async def diagnose(source: AdbDevices, serials: list[str], *, need_keyboard: bool,
                   wake: bool = False, listing: dict[str, str] | None = None) \
        -> list[Preflight]:
    """Each listed phone's preflight (``serials``: only these, listed or not), at once;
    ``listing``: adb's, when the caller has it already."""
    listing = await source.present() if listing is None else listing
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


def _cell(check: Check | None, whole: bool = True) -> str:
    """A check's mark and value (cut at CELL_MAX), or its mark alone (``whole`` False; an
    unknown with nothing to do about it, too)."""
    if check is None:
        return "-"
    mark = MARKS[check.ok]
    bare = not whole or (check.ok is None and not check.fix)
    text = mark if bare else f"{mark} {check.value}".strip()
    return text if len(text) <= CELL_MAX else text[:CELL_MAX - 1] + "…"


def _grid(reports: list[Preflight], names: list[str], width: int) -> list[str] | None:
    """A column per check. Where the table is wider than ``width``, the widest columns
    show their marks alone, then the narrower ones get their values back while they fit
    (a value is shown whole or not at all: the JSON and the fixes below have them). None
    when even marks alone do not fit."""
    def column(i: int, whole: bool) -> list[str]:
        return [names[i], *(_cell(r.check(names[i]), whole) for r in reports)]

    serials = ["phone", *(r.serial for r in reports)]
    full = [max(map(len, column(i, True))) for i in range(len(names))]
    marks = [max(map(len, column(i, False))) for i in range(len(names))]
    room = width - max(map(len, serials)) - 2 * len(names)
    whole = [True] * len(names)

    def used() -> int:
        return sum(full[j] if whole[j] else marks[j] for j in range(len(names)))

    for i in sorted(range(len(names)), key=lambda i: -full[i]):
        if used() <= room:
            break
        whole[i] = False
    for i in sorted((i for i in range(len(names)) if not whole[i]), key=lambda i: full[i]):
        whole[i] = used() - marks[i] + full[i] <= room
    if used() > room:
        return None
    cols = [serials, *(column(i, whole[i]) for i in range(len(names)))]
    widths = [max(map(len, c)) for c in cols]
    return ["  ".join(c[row].ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip()
            for row in range(len(serials))]


def _as_rows(reports: list[Preflight], names: list[str]) -> list[str]:
    """Too narrow for a column per check: each phone's checks one per line."""
    lines: list[str] = []
    for r in reports:
        lines.append(r.serial)
        for n in names:
            lines.append(f"  {n:<9} {_cell(r.check(n))}")
    return lines


def table(reports: list[Preflight], width: int = TABLE_WIDTH,
          warnings: list[str] | None = None) -> str:
    """The rows and columns (the widest cut until the table fits ``width`` characters;
    each phone's checks as rows where even the marks alone do not), then the warnings,
    then what to fix (one line per failing check)."""
    names = list(dict.fromkeys(c.name for r in reports for c in r.checks))
    lines = _grid(reports, names, width) or _as_rows(reports, names)
    lines.append("")
    lines += [f"warning: {w}" for w in warnings or []]
    for r in reports:
        took = f" ({r.took_s * 1000:.0f} ms)" if r.took_s else ""
        lines.append(f"{r.serial}: {'ready' if r.ready else 'needs attention'}{took}")
        lines += [f"  done: {what}" for what in r.done]
        lines += [f"  {c.name}: {c.value} — {c.fix}" for c in r.attention]
        lines += [f"  {c.name}: {c.value} (works without it) — {c.fix}"
                  for c in r.checks if c.ok is None and c.fix]
    return "\n".join(lines)


class DoctorConfig(FleetHostConfig):
    """The fleet's sections and ``[device]`` (which transport the stream row checks)."""

    device: DeviceSettings = msgspec.field(default_factory=DeviceSettings)


STREAM_TIMEOUT_S = 15.0  # the server's start and its first frame


async def stream_checks(source: AdbDevices, serials: list[str],
                        settings: DeviceSettings) -> dict[str, Check]:
    """Each phone's ``stream`` row: the scrcpy 3.3.4 server file found and verified, the
    server started, and its first frame in N ms; none where ``device.transport`` is adb.
    The phone works on adb without it, so a failure needs attention only where
    ``device.transport`` is ``scrcpy`` (asked for by name); under ``auto`` it is said."""
    if settings.transport == "adb":
        return {}
    needed: bool | None = False if settings.transport == "scrcpy" else None
    try:
        jar = server_jar(settings.scrcpy_server)
    except ScrcpyError as exc:
        why = Check(name="stream", ok=needed, value="adb: no scrcpy server file", fix=str(exc))
        return dict.fromkeys(serials, why)
    found: dict[str, Check] = {}

    def start(serial: str) -> Check:
        dev = AdbDevice(serial, client=source.client(), timeout_s=source.timeout_s)
        stream = ScrcpyStream(dev.device, jar, timeout_s=source.timeout_s)
        t0 = time.monotonic()
        try:
            stream.start()
            stream.frames.first_after(t0, STREAM_TIMEOUT_S)
            ms = (time.monotonic() - t0) * 1000
            w, h = stream.video_size
            return Check(name="stream", ok=True, value=f"first frame {ms:.0f} ms ({w}x{h})")
        except ScrcpyError as exc:
            return Check(name="stream", ok=needed, value="adb: the stream did not start",
                         fix=f"{exc}; the phone is driven through adb (screencap and input)")
        finally:
            stream.close("doctor")

    async def one(serial: str) -> None:
        with anyio.fail_after(STREAM_TIMEOUT_S + source.timeout_s + 5):
            found[serial] = await anyio.to_thread.run_sync(start, serial,
                                                          abandon_on_cancel=True)

    async with anyio.create_task_group() as tg:
        for serial in serials:
            tg.start_soon(one, serial)
    return found


async def identities(source: AdbDevices, serials: list[str]) -> dict[str, PhoneIdentity]:
    """Each phone's ``ro.serialno`` and boot id (``devices/identity.py``), read at once."""
    found: dict[str, PhoneIdentity] = {}

    async def one(serial: str) -> None:
        found[serial] = await phone_identity(
            AdbDevice(serial, client=source.client(), timeout_s=source.timeout_s))

    async with anyio.create_task_group() as tg:
        for serial in serials:
            tg.start_soon(one, serial)
    return found


def identity_warnings(listed: list[str], found: dict[str, PhoneIdentity]) -> list[str]:
    """Phones that share a serial: two rows of one serial in ``adb devices`` (adb cannot
    address them by it), and phones that report one ``ro.serialno`` from different boots
    (both driven; tools that go by ``ro.serialno`` would confuse them)."""
    said = [f"adb lists {s} more than once: two phones share that serial, and the agent "
            f"can drive neither through it — {SHARED_SERIAL_FIX}" for s in shared_serials(listed)]
    by_serialno: dict[str, list[str]] = {}
    for serial, ident in sorted(found.items()):
        if ident.serialno:
            by_serialno.setdefault(ident.serialno, []).append(serial)
    for serialno, serials in by_serialno.items():
        ids = [found[s] for s in serials]
        if any(a.shares_serial(b) for i, a in enumerate(ids) for b in ids[i + 1:]):
            said.append(f"{', '.join(serials)} report the same ro.serialno {serialno} from "
                        "different boots: separate phones, both driven; the serial is a shared "
                        "factory one, so name them by their adb serials, not by ro.serialno")
    return said


def as_json(reports: list[Preflight]) -> bytes:
    return msgspec.json.encode([{**msgspec.to_builtins(r), "ready": r.ready,
                                 "summary": r.summary} for r in reports])


def cmd_doctor(args: argparse.Namespace) -> int:
    cfg = prepare(args, DoctorConfig, quiet=True)
    fleet = cfg.fleet
    source = AdbDevices(fleet.adb_host, fleet.adb_port, timeout_s=fleet.adb_timeout_s)
    need = fleet.need_keyboard if args.keyboard is None else args.keyboard
    result: list[list[Preflight]] = []
    warnings: list[str] = []

    async def run() -> int:
        try:
            rows = await source.rows()  # once: the preflights and the shared serials
            result.append(await diagnose(source, list(args.serial or []), need_keyboard=need,
                                         wake=args.wake, listing=dict(rows)))
            listed = [serial for serial, _ in rows]
            usable = [r.serial for r in result[0] if (c := r.check("adb")) and c.ok]
            warnings.extend(identity_warnings(listed, await identities(source, usable)))
            streams = await stream_checks(source, usable, cfg.device)
            result[0] = [msgspec.structs.replace(r, checks=[*r.checks, streams[r.serial]])
                         if r.serial in streams else r for r in result[0]]
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
        print(table(reports, shutil.get_terminal_size((TABLE_WIDTH, 24)).columns, warnings))
    return EXIT_OK if reports and all(r.ready for r in reports) else EXIT_FAIL


def register(sub: Any) -> None:
    """Entry point (group ``mobagent.commands``, name ``doctor``)."""
    p = sub.add_parser(
        "doctor", help="check every phone adb lists: ready for the agent, or what to fix",
        description="One row per phone the adb server lists (unauthorized and offline ones "
                    "too), one column per check (adb state, Android, vendor, screen, displays, "
                    "awake, lock screen, ADB Keyboard, home app, injected input, and the scrcpy "
                    "stream unless device.transport=adb), each ok or FAIL with its fix. "
                    "Exit 1 when a phone needs attention.")
    p.add_argument("--serial", action="append", metavar="SERIAL",
                   help="only this phone (repeatable)")
    p.add_argument("--json", action="store_true", help="print each phone's checks as JSON")
    p.add_argument("--keyboard", action=argparse.BooleanOptionalAction, default=None,
                   help="the ADB Keyboard must be there (default: [fleet] need_keyboard)")
    p.add_argument("--wake", action="store_true",
                   help="wake a sleeping phone and dismiss a lock screen without a PIN first")
    p.set_defaults(func=cmd_doctor)
