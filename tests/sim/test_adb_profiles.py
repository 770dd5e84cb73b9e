"""Device profiles, states and faults of the simulated phone, driven through the real adb
server, and read back with the functions that read real phones (devices/adb_output.py)."""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from PIL import Image

from devices import adb_output
from devices.adb import ADB_KEYBOARD
from sim.adb.server import SimAdbServer
from sim.phone_api import DeviceInfo
from sim.profiles import PROFILES
from sim.stand_in import RecordingPhone
from tests.fixtures.adb import AdbServer

if False:  # pragma: no cover - typing only
    import adbutils

REAL = [name for name, p in PROFILES.items() if p.real]


@dataclass
class Profiled:
    phone: RecordingPhone
    device: adbutils.AdbDevice

    def run(self, cmd: str) -> tuple[int, str]:
        r = self.device.shell2(cmd)
        return r.returncode, r.output


@pytest.fixture
def profiled(adb_server: AdbServer) -> Iterator[Callable[..., Profiled]]:
    servers: list[SimAdbServer] = []

    def make(name: str, **state: object) -> Profiled:
        phone = RecordingPhone(DeviceInfo.for_profile(f"p{len(servers)}", name))
        for key, value in state.items():
            setattr(phone.device_state, key, value)
        sim = SimAdbServer(phone).start()
        servers.append(sim)
        return Profiled(phone, adb_server.connect(sim.port))

    yield make
    for sim in servers:
        adb_server.disconnect(sim.port)
        sim.stop()


@pytest.mark.parametrize("name", REAL)
def test_profile_identity_and_system_outputs(profiled: Callable[..., Profiled], name: str) -> None:
    p = PROFILES[name]
    ph = profiled(name)
    d = ph.device
    assert d.shell("getprop ro.build.version.sdk") == str(p.sdk)
    assert d.shell("getprop ro.build.version.release") == p.release
    assert d.shell("getprop ro.product.manufacturer") == p.manufacturer
    assert d.shell("getprop ro.product.brand") == p.brand
    assert d.shell("getprop ro.product.model") == p.model
    assert d.shell("getprop ro.serialno") == (p.factory_serial or ph.phone.info.serial)
    assert adb_output.input_size(d.shell("wm size")) == (p.width, p.height)
    assert d.shell("wm density") == f"Physical density: {p.density}"
    # the launcher: HOME resolves to it, and it is what dumpsys shows at home
    assert p.launcher is not None
    brief = d.shell("cmd package resolve-activity --brief -c android.intent.category.HOME")
    assert brief.splitlines()[0].startswith("priority=0 preferredOrder=0 match=0x108000")
    assert "isDefault=true" in brief
    assert adb_output.launcher_component(brief) == p.launcher
    full = d.shell("cmd package resolve-activity -a android.intent.action.MAIN "
                   "-c android.intent.category.LAUNCHER com.mobagent.notes")
    assert adb_output.launcher_component(full) == "com.mobagent.notes/com.mobagent.notes.MainActivity"
    assert d.shell("cmd package resolve-activity --brief com.nope.app") == "No activity found"
    assert d.shell("cmd package resolve-activity --brief --user 0 com.mobagent.notes").splitlines() \
        == ["priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=false",
            "com.mobagent.notes/.MainActivity"]
    section = "windows" if p.window_form == "a10" else "displays"
    focus = d.shell(f"dumpsys window {section}")
    assert "mCurrentFocus=Window{" in focus
    assert adb_output.foreground_package(focus) == p.launcher_package
    assert f"package:{p.launcher_package}" in d.shell("pm list packages").split()
    ph.phone.focus = "com.mobagent.notes/com.mobagent.notes.MainActivity"
    assert adb_output.foreground_package(d.shell("dumpsys window")) == "com.mobagent.notes"
    assert adb_output.foreground_package(d.shell("dumpsys activity activities")) == "com.mobagent.notes"
    power = d.shell("dumpsys power")
    assert adb_output.wakefulness(power) == "awake"
    assert ("getWakefulnessLocked()=Awake" in power) == p.samsung_power
    assert adb_output.keyguard_showing(d.shell("dumpsys window policy")) is False
    assert adb_output.display_ids(d.shell("dumpsys SurfaceFlinger --display-id")) == \
        [i for i, *_ in p.displays]
    assert ADB_KEYBOARD in adb_output.input_methods(d.shell("dumpsys input_method"))


def test_android10_and_14_put_the_focus_in_different_sections(
        profiled: Callable[..., Profiled]) -> None:
    a10, a14 = profiled("android-10").device, profiled("pixel-14").device
    assert "mCurrentFocus" in a10.shell("dumpsys window windows")
    windows14 = a14.shell("dumpsys window windows")
    assert "mCurrentFocus" not in windows14 and "Window #1 Window{" in windows14
    assert adb_output.foreground_package(windows14) == PROFILES["pixel-14"].launcher_package
    assert "mCurrentFocus" in a14.shell("dumpsys window displays")


def test_monkey_without_hardware_keys(profiled: Callable[..., Profiled]) -> None:
    ph = profiled("pixel-14")
    status, out = ph.run("monkey -p com.mobagent.notes -c android.intent.category.LAUNCHER 1")
    assert status == 251 and "** SYS_KEYS has no physical keys but with factor 2.0%." in out
    failure = adb_output.shell_failure(out, status)
    assert failure is not None and failure.kind == "no_physical_keys"
    assert ph.phone.calls_of("launch") == []
    status, out = ph.run("monkey -p com.mobagent.notes --pct-syskeys 0 1")
    assert status == 0 and ph.phone.calls_of("launch") == [("com.mobagent.notes",)]


def test_am_start_unresolved_exits_zero_and_home_goes_home(
        profiled: Callable[..., Profiled]) -> None:
    ph = profiled("samsung-13")
    status, out = ph.run("am start -a android.intent.action.MAIN "
                         "-c android.intent.category.LAUNCHER com.nope.app")
    assert status == 0 and "Error: Activity not started, unable to resolve Intent {" in out
    failure = adb_output.shell_failure(out, status)
    assert failure is not None and failure.kind == "activity_not_found"
    status, _ = ph.run("am start -a android.intent.action.MAIN -c android.intent.category.HOME")
    assert status == 0 and ph.phone.calls_of("key") == [(3,)]
    status, _ = ph.run("am start -n com.sec.android.app.launcher/.activities.LauncherActivity")
    assert status == 0 and ph.phone.calls_of("start_activity") == []  # the phone's own home


def test_xiaomi_refuses_input_until_its_security_switch(profiled: Callable[..., Profiled]) -> None:
    ph = profiled("xiaomi-hyperos")
    status, out = ph.run("input tap 10 20")
    assert status == 255 and "Exception occurred while executing 'tap':" in out
    assert "\tat com.android.server.input.InputManagerService" in out
    failure = adb_output.shell_failure(out, status)
    assert failure is not None and failure.kind == "inject_events_permission"
    status, _ = ph.run("input keyevent 4")
    assert status == 255 and ph.phone.calls == []
    status, out = ph.run(f"ime set {ADB_KEYBOARD}")
    failure = adb_output.shell_failure(out, status)
    assert status == 255 and failure is not None and failure.kind == "secure_settings_permission"
    assert ph.phone.ime != ADB_KEYBOARD
    status, out = ph.run(f"settings put secure default_input_method {ADB_KEYBOARD}")
    failure = adb_output.shell_failure(out, status)
    assert status == 255 and failure is not None and failure.kind == "secure_settings_permission"
    assert "Exception occurred while executing 'put':" in out and ph.phone.ime != ADB_KEYBOARD
    assert ph.run("settings put system screen_brightness 100")[0] == 0  # not a secure one
    ph.phone.device_state.usb_security = True
    assert ph.run(f"ime set {ADB_KEYBOARD}")[0] == 0
    assert ph.run("input tap 10 20")[0] == 0
    assert ph.phone.calls_of("tap") == [(10, 20)]


def test_foldable_screencap_warns_without_a_display_id(profiled: Callable[..., Profiled]) -> None:
    ph = profiled("foldable-14")
    ids = adb_output.display_ids(ph.device.shell("dumpsys SurfaceFlinger --display-id"))
    assert len(ids) == 2 and all(int(i) >= 2**32 for i in ids)
    data = ph.device.shell("screencap -p", encoding=None)
    assert data.startswith(b"[Warning] Multiple displays were found")
    png = adb_output.png_payload(data)
    assert Image.open(io.BytesIO(png)).size == (1080, 2092)
    clean = ph.device.shell(f"screencap -p -d {ids[1]}", encoding=None)
    assert clean.startswith(adb_output.PNG_SIGNATURE)


def _black(ph: Profiled) -> bool:
    img = Image.open(io.BytesIO(ph.device.shell("screencap -p", encoding=None)))
    return img.convert("RGB").getextrema() == ((0, 0), (0, 0), (0, 0))


def test_asleep_phone_is_black_until_woken(profiled: Callable[..., Profiled]) -> None:
    ph = profiled("pixel-14", awake=False)
    d = ph.device
    assert _black(ph)
    assert adb_output.wakefulness(d.shell("dumpsys power")) == "asleep"
    assert adb_output.wakefulness(d.shell("dumpsys window policy")) == "asleep"
    d.shell("input tap 5 5")
    assert ph.phone.calls_of("tap") == []
    d.shell("input keyevent KEYCODE_WAKEUP")
    assert adb_output.wakefulness(d.shell("dumpsys power")) == "awake" and not _black(ph)
    d.shell("input keyevent 26")  # POWER: off again, and on again
    assert adb_output.wakefulness(d.shell("dumpsys power")) == "asleep"
    d.shell("input keyevent 26")
    assert adb_output.wakefulness(d.shell("dumpsys power")) == "awake"
    samsung = profiled("samsung-13", awake=False).device
    assert "getWakefulnessLocked()=Asleep" in samsung.shell("dumpsys power")
    samsung.shell("input keyevent 224")
    assert adb_output.wakefulness(samsung.shell("dumpsys power")) == "awake"


@pytest.mark.parametrize("dismiss", ["input swipe 540 2000 540 600", "wm dismiss-keyguard",
                                     "input keyevent KEYCODE_MENU"])
def test_locked_phone_without_pin(profiled: Callable[..., Profiled], dismiss: str) -> None:
    ph = profiled("pixel-14", locked=True)
    d = ph.device
    assert adb_output.keyguard_showing(d.shell("dumpsys window policy")) is True
    assert adb_output.keyguard_showing(d.shell("dumpsys window")) is True
    assert adb_output.foreground_package(d.shell("dumpsys window displays")) == "com.android.systemui"
    d.shell("input tap 5 5")
    assert ph.phone.calls_of("tap") == []
    d.shell(dismiss)
    assert adb_output.keyguard_showing(d.shell("dumpsys window policy")) is False
    d.shell("input tap 5 5")
    assert ph.phone.calls_of("tap") == [(5, 5)]


def test_locked_phone_with_pin_stays_locked(profiled: Callable[..., Profiled]) -> None:
    ph = profiled("android-10", locked=True, pin="1234")
    d = ph.device
    assert "mCurrentFocus=Window{5a1b2c3 u0 StatusBar}" in d.shell("dumpsys window windows")
    for cmd in ("input swipe 540 2000 540 600", "wm dismiss-keyguard", "input keyevent 82",
                "input text 0000", "input keyevent 66"):
        d.shell(cmd)
        assert adb_output.keyguard_showing(d.shell("dumpsys window policy")) is True
    assert "secure=true" in d.shell("dumpsys window policy")
    assert ph.phone.calls_of("type_text") == []
    d.shell("input text 1234")  # what the phone's owner would type
    d.shell("input keyevent 66")
    assert adb_output.keyguard_showing(d.shell("dumpsys window policy")) is False


def test_unauthorized_phone_is_listed_unauthorized(adb_server: AdbServer) -> None:
    phone = RecordingPhone(DeviceInfo.for_profile("unauth", "pixel-14"))
    phone.faults.unauthorized = True
    with SimAdbServer(phone) as sim:
        serial = f"127.0.0.1:{sim.port}"
        try:
            adb_server.run("connect", serial)
            state = adb_server.wait_state(serial, lambda s: s == "unauthorized")
            assert state == "unauthorized"
            listed = adb_server.run("devices").stdout
            assert f"{serial}\tunauthorized" in listed
        finally:
            adb_server.disconnect(sim.port)


def test_adb_keyboard_absent(profiled: Callable[..., Profiled]) -> None:
    d = profiled("pixel-14", adb_keyboard="absent").device
    assert ADB_KEYBOARD not in d.shell("ime list -a")
    assert "com.android.adbkeyboard" not in d.shell("pm list packages")
    out = d.shell2(f"ime set {ADB_KEYBOARD}").output
    failure = adb_output.shell_failure(out)
    assert failure is not None and failure.kind == "ime_unavailable"
    assert "cannot be enabled" in d.shell2(f"ime enable {ADB_KEYBOARD}").output


def test_adb_keyboard_disabled_until_enabled(profiled: Callable[..., Profiled]) -> None:
    ph = profiled("samsung-13", adb_keyboard="disabled")
    d = ph.device
    assert ADB_KEYBOARD in adb_output.input_methods(d.shell("ime list -a"))
    assert ADB_KEYBOARD not in adb_output.input_methods(d.shell("ime list -s"))
    assert ADB_KEYBOARD not in adb_output.input_methods(
        d.shell("settings get secure enabled_input_methods"))
    assert "cannot be selected" in d.shell2(f"ime set {ADB_KEYBOARD}").output
    assert d.shell(f"ime enable {ADB_KEYBOARD}") == \
        f"Input method {ADB_KEYBOARD}: now enabled for user #0"
    assert ADB_KEYBOARD in adb_output.input_methods(d.shell("ime list -s"))
    assert d.shell(f"ime set {ADB_KEYBOARD}") == f"Input method {ADB_KEYBOARD} selected for user #0"
    assert d.shell("settings get secure default_input_method") == ADB_KEYBOARD


def test_adb_keyboard_drops_broadcasts_while_it_starts(profiled: Callable[..., Profiled]) -> None:
    ph = profiled("pixel-14")
    ph.phone.faults.ime_warmup_s = 0.4
    d = ph.device
    d.shell(f"ime set {ADB_KEYBOARD}")
    d.shell("am broadcast -a ADB_INPUT_TEXT --es msg early")
    assert ph.phone.calls_of("type_text") == []
    time.sleep(0.45)
    d.shell("am broadcast -a ADB_INPUT_TEXT --es msg late")
    assert ph.phone.calls_of("type_text") == [("late",)]


def test_settings_put_keyboards(profiled: Callable[..., Profiled]) -> None:
    ph = profiled("pixel-14", adb_keyboard="disabled")
    d = ph.device
    latin = "com.android.inputmethod.latin/.LatinIME"
    d.shell(f"settings put secure enabled_input_methods {latin}:{ADB_KEYBOARD}")
    assert ph.phone.device_state.adb_keyboard == "enabled"
    d.shell(f"settings put secure default_input_method {ADB_KEYBOARD}")
    assert d.shell("settings get secure default_input_method") == ADB_KEYBOARD


def test_default_phone_answers_as_before() -> None:
    """The `sim` profile: today's DeviceInfo and today's `dumpsys window windows`, word for word."""
    from sim.adb.commands import DeviceShell
    from sim.adb.fs import VirtualFS

    made = DeviceInfo.for_profile("a", "sim")
    assert made == DeviceInfo("a", boot_id=made.boot_id)  # each phone its own boot
    phone = RecordingPhone(DeviceInfo("a"))
    focus = phone.focus
    out = DeviceShell(phone, VirtualFS()).run("dumpsys window windows").stdout.decode()
    assert out == (
        "WINDOW MANAGER WINDOWS (dumpsys window windows)\n"
        f"  Window #0 Window{{5a1b2c3 u0 {focus}}}:\n"
        "    mDisplayId=0 rootTaskId=1 mSession=Session{7c9d2e1 1234:u0a10123} "
        "mClient=android.os.BinderProxy@1f2e3d4\n"
        "    mHasSurface=true isReadyForDisplay()=true mWindowRemovalAllowed=false\n"
        "\n"
        f"  mCurrentFocus=Window{{5a1b2c3 u0 {focus}}}\n"
        f"  mFocusedApp=ActivityRecord{{8e7f6a5 u0 {focus} t12}}\n")
