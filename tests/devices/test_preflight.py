"""devices/preflight.py: the checks as pure logic on real-format outputs (a fake shell), and
through the real adb server against the simulated phone."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from devices import preflight as pf
from devices.adb import ADB_KEYBOARD, AdbDevice, DeviceError, ShellResult
from devices.adb_output import keyguard_secure, properties, rotation, screen_density
from tests.fixtures.adb import ConnectedPhone

pytestmark = pytest.mark.anyio

# Real formats: `dumpsys window policy` on Android 8+ (appium-adb's lockmgmt fixtures, as in
# tests/data/adb_outputs.toml), with the showing/secure/screen lines set per case.
POLICY = """    KeyguardServiceDelegate
      showing={showing}
      showingAndNotOccluded=true
      inputRestricted=false
      occluded=false
      secure={secure}
      dreaming=false
      screenState=SCREEN_STATE_{screen}
      interactiveState=INTERACTIVE_STATE_{interactive}
      KeyguardStateMonitor
        mIsShowing={showing}
        mSimSecure=false
"""
XIAOMI_INPUT = ("java.lang.SecurityException: Injecting to another application requires "
                "INJECT_EVENTS permission\n\tat android.os.Parcel.createException(Parcel.java:2075)\n")


def policy(showing: bool, secure: bool, awake: bool = True) -> str:
    return POLICY.format(showing=str(showing).lower(), secure=str(secure).lower(),
                         screen="ON" if awake else "OFF", interactive="AWAKE" if awake else "SLEEP")


def good_outputs() -> dict[str, str]:
    return {
        "props": "[ro.build.version.release]: [14]\n[ro.build.version.sdk]: [34]\n"
                 "[ro.product.manufacturer]: [Google]\n[ro.product.model]: [Pixel 8]\n",
        "size": "Physical size: 1080x2400\n",
        "density": "Physical density: 420\n",
        "display": "  mViewports=[DisplayViewport{type=INTERNAL, valid=true, isActive=true, "
                   "displayId=0, uniqueId='local:4619827259835644672', physicalPort=0, "
                   "orientation=1, logicalFrame=Rect(0, 0 - 2400, 1080)}]\n",
        "displays": 'Display 4619827259835644672 (HWC display 0): port=0 pnpId=GGL '
                    'displayName="EMU_display_0"\n',
        "power": "      mWakefulness=Awake\n",
        "policy": policy(showing=False, secure=False),
        "ime_all": f"com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME\n"
                   f"{ADB_KEYBOARD}\n",
        "ime_enabled": f"{ADB_KEYBOARD}\n",
        "ime_active": "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME",
        "home": "priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=true\n"
                "com.google.android.apps.nexuslauncher/.NexusLauncherActivity\n",
        "input": "",
    }


class FakeShell:
    """A phone that answers each command with a given (exit code, output)."""

    serial = "fake"

    def __init__(self, outputs: dict[str, str | ShellResult | None]) -> None:
        self.by_command = {pf.COMMANDS[k]: v for k, v in outputs.items()}
        self.extra: dict[str, str] = {}
        self.ran: list[str] = []

    async def shell_result(self, cmd: str, timeout_s: float | None = None) -> ShellResult:
        self.ran.append(cmd)
        got = self.extra.get(cmd, self.by_command.get(cmd, ""))
        if got is None:
            raise DeviceError(f"fake: {cmd} timed out")
        return got if isinstance(got, ShellResult) else ShellResult(0, got)


def checks(outputs: dict[str, str | ShellResult | None], need_keyboard: bool = False
           ) -> dict[str, pf.Check]:
    results = {k: (None if v is None else v if isinstance(v, ShellResult) else ShellResult(0, v))
               for k, v in outputs.items()}
    return {c.name: c for c in pf.evaluate(results, need_keyboard=need_keyboard)}


def test_the_new_readers_on_real_formats() -> None:
    assert screen_density("Physical density: 420\nOverride density: 560\n") == 560
    assert screen_density("Physical density: 320\n") == 320
    assert rotation("SurfaceOrientation: 1\n") == 1
    assert rotation("    InputDeviceOrientation: Rotation270\n") == 3
    assert rotation("  mCurrentRotation=ROTATION_180\n") == 2
    assert rotation("nothing") is None
    assert keyguard_secure(policy(showing=True, secure=True)) is True
    assert keyguard_secure(policy(showing=True, secure=False)) is False
    assert keyguard_secure("mShowingLockscreen=true") is None
    assert properties("[ro.product.model]: [Pixel 8]\n[x]: []\n") == {
        "ro.product.model": "Pixel 8", "x": ""}


def test_a_ready_phone_passes_every_check() -> None:
    got = checks(dict(good_outputs()), need_keyboard=True)
    assert all(c.ok for c in got.values()), got
    assert got["vendor"].value == "Google Pixel 8"
    assert got["android"].value == "Android 14 (SDK 34)"
    assert got["screen"].value == "1080x2400, 420 dpi, rotation 90"
    assert got["home"].value == "com.google.android.apps.nexuslauncher"
    assert got["keyboard"].value == "ADB Keyboard enabled"
    pre = pf.Preflight(serial="x", checks=list(got.values()))
    assert pre.ready and pre.summary == "ready"


def test_what_the_phone_does_not_say_is_unknown_never_a_failure() -> None:
    """The simulated phone's answers today: `Can't find service` exits 0, pm prints usage."""
    out: dict[str, str | ShellResult | None] = dict(good_outputs())
    out.update(power="Can't find service: power\n", policy="WINDOW MANAGER WINDOWS\n",
               displays="Can't find service: SurfaceFlinger\n", display="",
               home=ShellResult(255, "Package manager (package) commands:\n"),
               input=ShellResult(127, "/system/bin/sh: input: inaccessible or not found\n"))
    got = checks(out)
    for name in ("awake", "keyguard", "displays", "home", "input"):
        assert got[name].ok is None, got[name]
    assert got["screen"].value == "1080x2400, 420 dpi"
    assert pf.Preflight(serial="x", checks=list(got.values())).summary == "ready"


def test_xiaomi_refusing_injected_input_names_the_security_setting() -> None:
    got = checks({**good_outputs(), "input": ShellResult(1, XIAOMI_INPUT)})
    assert got["input"].ok is False
    assert "USB debugging (Security settings)" in got["input"].fix
    pre = pf.Preflight(serial="x", checks=list(got.values()))
    assert pre.summary.startswith("needs attention: input ")
    assert "USB debugging (Security settings)" in pre.summary


@pytest.mark.parametrize("secure, fix", [(True, "never types"), (False, "dismisses")])
def test_a_lock_screen_needs_attention_and_says_whether_it_has_a_pin(secure: bool,
                                                                      fix: str) -> None:
    got = checks({**good_outputs(), "power": "      mWakefulness=Asleep\n",
                  "policy": policy(showing=True, secure=secure, awake=False)})
    assert got["awake"].ok is False and got["awake"].value == "asleep"
    assert got["keyguard"].ok is False and fix in got["keyguard"].fix


def test_the_keyboard_fails_only_when_needed() -> None:
    missing = {**good_outputs(), "ime_all": "com.android.inputmethod.latin/.LatinIME\n",
               "ime_enabled": "com.android.inputmethod.latin/.LatinIME\n"}
    assert checks(missing)["keyboard"].ok is True
    needed = checks(missing, need_keyboard=True)["keyboard"]
    assert needed.ok is False and "devices setup --ime-apk" in needed.fix
    disabled = {**missing, "ime_all": f"{ADB_KEYBOARD}\n"}
    got = checks(disabled, need_keyboard=True)["keyboard"]
    assert got.value == "ADB Keyboard installed, not enabled" and "ime enable" in got.fix


def test_no_answer_at_all_is_an_adb_failure() -> None:
    got = checks(dict.fromkeys(pf.COMMANDS))
    assert list(got) == ["adb"] and got["adb"].ok is False


@pytest.mark.parametrize("state, words", [("unauthorized", "USB debugging prompt"),
                                          ("offline", "adb reconnect"),
                                          ("no permissions", "udev")])
async def test_a_phone_adb_cannot_use_says_how_to_fix_it(state: str, words: str) -> None:
    pre = await pf.preflight(FakeShell({}), adb_state=state)
    assert not pre.ready and words in pre.summary and pre.checks[0].value == state


async def test_a_sleeping_phone_is_woken_and_a_plain_lock_screen_dismissed() -> None:
    phone = FakeShell({**good_outputs(), "power": "      mWakefulness=Asleep\n",
                       "policy": policy(showing=True, secure=False, awake=False)})
    woke = False

    class Waking(FakeShell):
        async def shell_result(self, cmd: str, timeout_s: float | None = None) -> ShellResult:
            nonlocal woke
            if cmd == f"input keyevent {pf.KEY_WAKEUP}":
                woke = True
                self.by_command[pf.COMMANDS["power"]] = "      mWakefulness=Awake\n"
                self.by_command[pf.COMMANDS["policy"]] = policy(showing=True, secure=False)
            if cmd == "wm dismiss-keyguard":
                self.by_command[pf.COMMANDS["policy"]] = policy(showing=False, secure=False)
            return await super().shell_result(cmd, timeout_s)

    waking = Waking({})
    waking.by_command = phone.by_command
    pre = await pf.ready_phone(waking)
    assert woke and pre.ready, pre.summary
    assert pre.done == ["woke the phone (asleep)", "dismissed the lock screen"]


async def test_a_lock_screen_that_stays_is_swiped_up() -> None:
    phone = FakeShell({**good_outputs(), "policy": policy(showing=True, secure=False)})
    done = await pf.wake_and_unlock(phone, settle_s=0.0)
    assert done == ["dismissed the lock screen", "swiped the lock screen up"]
    assert "input swipe 540 2160 540 720 300" in phone.ran


async def test_a_secure_lock_screen_is_never_touched() -> None:
    phone = FakeShell({**good_outputs(), "policy": policy(showing=True, secure=True)})
    pre = await pf.ready_phone(phone)
    assert not pre.ready and "never types" in pre.summary
    assert not [c for c in phone.ran if c.startswith(("input text", "input swipe", "wm dismiss"))]


@pytest.mark.needs_adb
async def test_preflight_through_real_adb_on_the_simulated_phone(
        sim_phone: Callable[..., ConnectedPhone]) -> None:
    cp = sim_phone(width=720, height=1600, density=320)
    dev = AdbDevice(cp.serial)
    pre = await pf.ready_phone(dev, need_keyboard=True, stay_awake=True)
    got = {c.name: c for c in pre.checks}
    assert pre.ready, pre.summary
    assert got["screen"].value.startswith("720x1600, 320 dpi")
    assert got["vendor"].value == "MobAgent MobAgent_Sim"
    assert got["keyboard"].ok is True
    assert got["input"].ok is True
    assert got["awake"].ok is True and got["keyguard"].ok is True
    assert got["home"].ok is True and got["displays"].ok is True


@pytest.mark.needs_adb
async def test_preflight_names_the_missing_keyboard_on_the_simulated_phone(
        sim_phone: Callable[..., ConnectedPhone]) -> None:
    cp = sim_phone()
    cp.phone.ime_ids = ["com.android.inputmethod.latin/.LatinIME"]
    pre = await pf.preflight(AdbDevice(cp.serial), need_keyboard=True)
    assert not pre.ready and pre.summary.startswith("needs attention: keyboard ")


async def test_stay_awake_keeps_a_plugged_phone_on_and_says_so() -> None:
    phone = FakeShell(dict(good_outputs()))
    pre = await pf.ready_phone(phone, stay_awake=True)
    assert pre.ready and pre.done == ["kept awake while on USB"]
    assert "svc power stayon usb" in phone.ran
    plain = FakeShell(dict(good_outputs()))
    assert (await pf.ready_phone(plain)).done == [] and "svc power stayon usb" not in plain.ran
