"""Is this phone ready for an episode? A preflight of cheap checks, each with its fix.

``preflight(device)`` runs a dozen read-only shell lines at once (``getprop``, ``wm size``,
``dumpsys power`` ...) and one harmless injected key (``input keyevent 0``,
KEYCODE_UNKNOWN, which Xiaomi refuses without "USB debugging (Security settings)"), and
reads them with ``devices/adb_output.py``. Each ``Check`` is ok (True), needs attention
(False, with the fix in one sentence) or unknown (None: the phone did not say, as when
``dumpsys power`` answers ``Can't find service``; never a failure). ``Preflight.summary``
is ``ready`` or ``needs attention: <what> — <fix>``.

``wake_and_unlock(device)`` is what the fleet does before an episode when the phone sleeps
or shows a lock screen: KEYCODE_WAKEUP, then ``wm dismiss-keyguard`` and a swipe up where
the keyguard has no PIN. A secure lock screen is left alone (nothing is ever typed into
it): the preflight after it says it needs attention. ``ready_phone`` is both in order.

The checks are pure functions of the commands' outputs (``evaluate``), tested on real
formats with a fake shell, and through the real adb server against the simulated phone.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Protocol

import anyio
import msgspec

from devices.adb import ADB_KEYBOARD, HOME_CATEGORY, MAIN_ACTION, DeviceError, ShellResult
from devices.adb_output import (
    Wakefulness,
    display_ids,
    input_methods,
    input_size,
    keyguard_secure,
    keyguard_showing,
    launcher_component,
    properties,
    rotation,
    screen_density,
    shell_failure,
    wakefulness,
)

KEY_WAKEUP = 224  # wakes a sleeping or dozing phone, and does nothing to an awake one
MIN_SDK = 24  # Android 7: cmd package resolve-activity, input keycodes by name
COMMAND_TIMEOUT_S = 10.0
SETTLE_S = 3.0  # after a wake or a dismiss: how long the re-check waits for it to show
ADB_KEYBOARD_APK = "https://github.com/senzhk/ADBKeyBoard/releases"

# What each check reads; all run at once.
COMMANDS: dict[str, str] = {
    "props": "getprop",
    "size": "wm size",
    "density": "wm density",
    "display": "dumpsys display",
    "displays": "dumpsys SurfaceFlinger --display-id",
    "power": "dumpsys power",
    "policy": "dumpsys window policy",
    "ime_all": "ime list -a -s",
    "ime_enabled": "ime list -s",
    "ime_active": "settings get secure default_input_method",
    "home": f"cmd package resolve-activity --brief -a {MAIN_ACTION} -c {HOME_CATEGORY}",
    "input": "input keyevent 0",
}

# adb's states other than ``device``, and what a person does about each.
ADB_STATE_FIXES: dict[str, str] = {
    "unauthorized": "accept the USB debugging prompt on the phone (tick 'Always allow from "
                    "this computer'); no prompt: revoke USB debugging authorizations in "
                    "Developer options and replug",
    "offline": "replug the cable or run `adb reconnect`; if it stays offline, revoke USB "
               "debugging authorizations on the phone and accept the prompt again",
    "no permissions": "the adb server may not open the USB device: add a udev rule for the "
                      "phone's vendor (see https://developer.android.com/studio/run/device) "
                      "and replug, or run the adb server as a user in the plugdev group",
    "recovery": "the phone is in recovery, not Android: reboot it",
    "bootloader": "the phone is in its bootloader, not Android: reboot it",
    "sideload": "the phone is in sideload mode, not Android: reboot it",
    "absent": "the phone is not connected: plug it in (a data cable, not a charging one)",
}


class Check(msgspec.Struct, frozen=True, kw_only=True):
    """One fact about the phone: ok (True), needs attention (False) or unknown (None)."""

    name: str
    ok: bool | None
    value: str = ""
    fix: str = ""  # one sentence, when not ok


class Preflight(msgspec.Struct, frozen=True, kw_only=True):
    """Every check of one phone, how long they took, and what was done to fix them."""

    serial: str
    checks: list[Check] = []
    took_s: float = 0.0
    done: list[str] = []  # what ready_phone did: "woke the phone", ...

    @property
    def ready(self) -> bool:
        return all(c.ok is not False for c in self.checks)

    @property
    def attention(self) -> list[Check]:
        return [c for c in self.checks if c.ok is False]

    @property
    def summary(self) -> str:
        """``ready``, or ``needs attention: <what> — <fix>`` (the first failing check)."""
        bad = self.attention
        if not bad:
            return "ready"
        more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
        return f"needs attention: {bad[0].name} {bad[0].value} — {bad[0].fix}{more}"

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)


class ShellDevice(Protocol):
    """What the preflight needs of a phone (``devices.adb.AdbDevice`` has it)."""

    serial: str

    async def shell_result(self, cmd: str, timeout_s: float | None = None) -> ShellResult: ...


# ---- running -----------------------------------------------------------------------------


async def _shell(device: ShellDevice, cmd: str) -> ShellResult | None:
    """One line's result; None where adb itself failed (a timeout, the phone gone)."""
    try:
        return await device.shell_result(cmd, COMMAND_TIMEOUT_S)
    except DeviceError:
        return None


async def _outputs(device: ShellDevice, names: tuple[str, ...]) -> dict[str, ShellResult | None]:
    """The named COMMANDS' results, run at once; None where adb itself failed (timeout)."""
    got: dict[str, ShellResult | None] = {}

    async def one(name: str) -> None:
        got[name] = await _shell(device, COMMANDS[name])

    async with anyio.create_task_group() as tg:
        for name in names:
            tg.start_soon(one, name)
    return got


async def preflight(device: ShellDevice, *, need_keyboard: bool = False,
                    adb_state: str = "device") -> Preflight:
    """Every check of ``device``; only the adb check where adb's state is not ``device``."""
    t0 = time.perf_counter()
    if adb_state != "device":
        return Preflight(serial=device.serial, checks=[adb_check(adb_state)])
    outputs = await _outputs(device, tuple(COMMANDS))
    return Preflight(serial=device.serial, checks=evaluate(outputs, need_keyboard=need_keyboard),
                     took_s=round(time.perf_counter() - t0, 3))


def adb_check(state: str, error: str = "") -> Check:
    if state == "device" and not error:
        return Check(name="adb", ok=True, value="device")
    if state == "device":
        return Check(name="adb", ok=False, value=f"not answering ({error[:120]})",
                     fix="replug the cable or run `adb reconnect`; if it persists, reboot the "
                         "phone")
    return Check(name="adb", ok=False, value=state,
                 fix=ADB_STATE_FIXES.get(state, f"adb says {state!r}: replug the phone"))


# ---- the checks, pure --------------------------------------------------------------------


def _text(res: ShellResult | None) -> str:
    """What a command printed when it succeeded; "" when it failed or adb did."""
    return res.output if res is not None and res.exit_code == 0 else ""


def evaluate(outputs: Mapping[str, ShellResult | None], *, need_keyboard: bool) -> list[Check]:
    """The checks, read from each command's result (keys of COMMANDS; None: adb failed)."""
    def text(name: str) -> str:
        return _text(outputs.get(name))

    answered = [r for r in outputs.values() if r is not None]
    if not answered:
        return [adb_check("device", "no command answered")]
    props = properties(text("props"))
    return [
        adb_check("device"),
        android_check(props),
        vendor_check(props),
        screen_check(text("size"), text("density"), text("display")),
        displays_check(text("displays")),
        awake_check(wakefulness(text("power")) or wakefulness(text("policy"))),
        keyguard_check(keyguard_showing(text("policy")), keyguard_secure(text("policy"))),
        keyboard_check(outputs.get("ime_all"), outputs.get("ime_enabled"),
                       text("ime_active").strip(), need=need_keyboard),
        home_check(outputs.get("home")),
        input_check(outputs.get("input")),
    ]


def android_check(props: Mapping[str, str]) -> Check:
    sdk = props.get("ro.build.version.sdk", "")
    if not sdk.isdigit():
        return Check(name="android", ok=None, value="unknown")
    value = f"Android {props.get('ro.build.version.release', '?')} (SDK {sdk})"
    if int(sdk) < MIN_SDK:
        return Check(name="android", ok=False, value=value,
                     fix=f"the agent needs Android 7 (SDK {MIN_SDK}) or later: use a newer phone")
    return Check(name="android", ok=True, value=value)


def vendor_check(props: Mapping[str, str]) -> Check:
    maker = props.get("ro.product.manufacturer", "")
    model = props.get("ro.product.model", "")
    if not (maker or model):
        return Check(name="vendor", ok=None, value="unknown")
    return Check(name="vendor", ok=True, value=f"{maker} {model}".strip())


def screen_check(size_out: str, density_out: str, display_out: str) -> Check:
    size = input_size(size_out)
    if size is None:
        return Check(name="screen", ok=False, value="no size",
                     fix="`adb shell wm size` prints no size: reboot the phone")
    parts = [f"{size[0]}x{size[1]}"]
    density = screen_density(density_out)
    if density is not None:
        parts.append(f"{density} dpi")
    turn = rotation(display_out)
    if turn is not None:
        parts.append(f"rotation {turn * 90}")
    return Check(name="screen", ok=True, value=", ".join(parts))


def displays_check(out: str) -> Check:
    ids = display_ids(out)
    if not ids:
        return Check(name="displays", ok=None, value="unknown")
    if len(ids) == 1:
        return Check(name="displays", ok=True, value="1")
    return Check(name="displays", ok=True, value=f"{len(ids)} (screenshots of {ids[0]})")


def awake_check(state: Wakefulness | None) -> Check:
    if state is None:
        return Check(name="awake", ok=None, value="unknown")
    if state == "awake":
        return Check(name="awake", ok=True, value="awake")
    return Check(name="awake", ok=False, value=state,
                 fix="wake the screen (the fleet sends KEYCODE_WAKEUP before each episode; "
                     "`--set fleet.stay_awake=true` keeps it on while plugged in)")


def keyguard_check(showing: bool | None, secure: bool | None) -> Check:
    if showing is None:
        return Check(name="keyguard", ok=None, value="unknown")
    if not showing:
        return Check(name="keyguard", ok=True, value="unlocked")
    if secure:
        return Check(name="keyguard", ok=False, value="locked with a PIN, pattern or password",
                     fix="unlock the phone by hand, or set Screen lock to None on a test phone: "
                         "mobagent never types into a lock screen")
    return Check(name="keyguard", ok=False, value="lock screen showing",
                 fix="swipe it away (the fleet dismisses a lock screen without a PIN before "
                     "each episode)")


def keyboard_check(listed: ShellResult | None, enabled: ShellResult | None, active: str, *,
                   need: bool) -> Check:
    if listed is None or listed.exit_code != 0:
        return Check(name="keyboard", ok=None, value="unknown")
    installed = ADB_KEYBOARD in input_methods(listed.output)
    on = enabled is not None and enabled.exit_code == 0 \
        and ADB_KEYBOARD in input_methods(enabled.output)
    if on:
        return Check(name="keyboard", ok=True,
                     value="ADB Keyboard enabled" + (", active" if active == ADB_KEYBOARD else ""))
    state = "installed, not enabled" if installed else "not installed"
    if not need:
        return Check(name="keyboard", ok=True,
                     value=f"ADB Keyboard {state} (needed only to type non-ASCII text)")
    fix = (f"run `adb shell ime enable {ADB_KEYBOARD}`" if installed else
           f"download ADBKeyboard.apk ({ADB_KEYBOARD_APK}), then run "
           "`mobagent devices setup --ime-apk ADBKeyboard.apk`")
    return Check(name="keyboard", ok=False, value=f"ADB Keyboard {state}", fix=fix)


def home_check(res: ShellResult | None) -> Check:
    out = res.output if res is not None else ""
    if res is not None and res.exit_code == 0 and "No activity found" in out:
        return Check(name="home", ok=False, value="no home app",
                     fix="choose a default home app on the phone (Settings > Apps > Default apps)")
    component = launcher_component(out) if res is not None and res.exit_code == 0 else None
    if component is None:
        return Check(name="home", ok=None, value="unknown")
    return Check(name="home", ok=True, value=component.split("/")[0])


def input_check(res: ShellResult | None) -> Check:
    if res is None:
        return Check(name="input", ok=None, value="unknown")
    failure = shell_failure(res.output, res.exit_code)
    if failure is not None and failure.kind == "command_unsupported":
        return Check(name="input", ok=None, value="unknown")
    if failure is not None and failure.kind != "unknown":
        return Check(name="input", ok=False, value=failure.line, fix=failure.hint)
    if failure is not None:  # refused, for a reason not known here: input's own fix
        return Check(name="input", ok=False, value=failure.line,
                     fix="`adb shell input` is refused: check the vendor's developer options "
                         "(Xiaomi: USB debugging (Security settings))")
    return Check(name="input", ok=True, value="allowed")


# ---- wake and unlock ---------------------------------------------------------------------


async def _lock_state(device: ShellDevice) -> tuple[Wakefulness | None, bool | None, bool | None]:
    """(wakefulness, keyguard showing, keyguard secure), from two dumpsys lines."""
    got = await _outputs(device, ("power", "policy"))
    power, policy = _text(got["power"]), _text(got["policy"])
    return (wakefulness(power) or wakefulness(policy), keyguard_showing(policy),
            keyguard_secure(policy))


async def _settled(device: ShellDevice, wanted: str, settle_s: float
                   ) -> tuple[Wakefulness | None, bool | None, bool | None]:
    """Re-read the lock state until ``wanted`` ("awake", "unlocked") holds, or settle_s."""
    deadline = anyio.current_time() + settle_s
    while True:
        state = await _lock_state(device)
        good = state[0] not in ("asleep", "dozing") if wanted == "awake" else not state[1]
        if good or anyio.current_time() >= deadline:
            return state
        await anyio.sleep(0.2)


async def wake_and_unlock(device: ShellDevice, *, settle_s: float = SETTLE_S) -> list[str]:
    """Wake a sleeping or dozing phone and dismiss a lock screen without a PIN; what it did.

    A secure lock screen (``secure=true``) is left as it is: nothing is typed into it.
    """
    done: list[str] = []
    state, showing, secure = await _lock_state(device)
    if state in ("asleep", "dozing"):
        await _shell(device, f"input keyevent {KEY_WAKEUP}")
        done.append(f"woke the phone ({state})")
        state, showing, secure = await _settled(device, "awake", settle_s)
    if not showing or secure:
        return done
    await _shell(device, "wm dismiss-keyguard")
    done.append("dismissed the lock screen")
    state, showing, secure = await _settled(device, "unlocked", settle_s)
    if showing and not secure:
        size = input_size(_text(await _shell(device, "wm size")))
        if size is not None:
            w, h = size
            await _shell(device, f"input swipe {w // 2} {h * 9 // 10} {w // 2} {h * 3 // 10} 300")
            done.append("swiped the lock screen up")
            await _settled(device, "unlocked", settle_s)
    return done


async def ready_phone(device: ShellDevice, *, need_keyboard: bool = False,
                      stay_awake: bool = False, adb_state: str = "device") -> Preflight:
    """The preflight; where the phone sleeps or shows a lock screen, wake and unlock it
    (and with ``stay_awake``, ``svc power stayon usb``), then the preflight again."""
    pre = await preflight(device, need_keyboard=need_keyboard, adb_state=adb_state)
    if adb_state != "device":
        return pre
    done: list[str] = []
    if stay_awake:
        res = await _shell(device, "svc power stayon usb")
        if res is not None and res.exit_code == 0:
            done.append("kept awake while on USB")
    if not any(c.name in ("awake", "keyguard") for c in pre.attention):
        return msgspec.structs.replace(pre, done=done)
    done += await wake_and_unlock(device)
    again = await preflight(device, need_keyboard=need_keyboard)
    return msgspec.structs.replace(again, done=done, took_s=round(pre.took_s + again.took_s, 3))
