"""The device shell's commands against the stand-in phone, without an adb server."""

from __future__ import annotations

import io
import shlex
import struct

import pytest
from PIL import Image

from sim.adb.commands import DeviceShell, android_input_text
from sim.adb.fs import VirtualFS
from sim.phone_api import DeviceInfo
from sim.stand_in import RecordingPhone

HOSTILE = [
    "a;rm -rf /", "$(reboot)", "`reboot`", "a && reboot", "a || reboot", "x | sh", "'", '"',
    "\\", "$?", "${HOME}", "> /sdcard/x", "a\nreboot", "--help", "-e", "%", "%%s", "#comment",
]


@pytest.fixture
def phone() -> RecordingPhone:
    return RecordingPhone(DeviceInfo(serial="t", width=720, height=1280, density=320, sdk=34))


@pytest.fixture
def shell(phone: RecordingPhone) -> DeviceShell:
    return DeviceShell(phone, VirtualFS())


def test_echo_and_status(shell: DeviceShell) -> None:
    r = shell.run("echo hello world; false; echo $?")
    assert r.stdout == b"hello world\n1\n" and r.status == 0
    assert shell.run("false && echo no || echo yes").stdout == b"yes\n"


def test_unknown_command_is_127(shell: DeviceShell) -> None:
    r = shell.run("frobnicate --now")
    assert r.status == 127
    assert r.stderr == b"/system/bin/sh: frobnicate: inaccessible or not found\n"
    assert r.stdout == b""


def test_wm_and_getprop(shell: DeviceShell) -> None:
    assert shell.run("wm size").stdout == b"Physical size: 720x1280\n"
    assert shell.run("wm density").stdout == b"Physical density: 320\n"
    assert shell.run("getprop ro.build.version.sdk").stdout == b"34\n"
    assert shell.run("getprop no.such.prop").stdout == b"\n"
    assert b"[ro.product.model]: [MobAgent_Sim]\n" in shell.run("getprop").stdout


def test_input_reaches_phone(shell: DeviceShell, phone: RecordingPhone) -> None:
    assert shell.run("input tap 10 20.7").status == 0
    assert shell.run("input touchscreen swipe 1 2 3 4 250").status == 0
    assert shell.run("input swipe 5 5 5 5 800").status == 0
    assert shell.run("input keyevent KEYCODE_BACK HOME 66 del").status == 0
    assert shell.run("input text hello%sworld").status == 0
    assert phone.calls == [("tap", 10, 20), ("swipe", 1, 2, 3, 4, 250), ("long_press", 5, 5, 800),
                           ("key", 4), ("key", 3), ("key", 66), ("key", 67),
                           ("type_text", "hello world")]


@pytest.mark.parametrize("line", ["input tap 1", "input tap a b", "input swipe 1 2 3",
                                  "input keyevent NOT_A_KEY", "input text"])
def test_input_errors(shell: DeviceShell, phone: RecordingPhone, line: str) -> None:
    r = shell.run(line)
    assert r.status == 255 and r.stderr.startswith(b"Error:")
    assert phone.calls == []


def test_android_percent_s() -> None:
    assert android_input_text("a%sb") == "a b"
    assert android_input_text("%%s") == "% "
    assert android_input_text("100%") == "100%"
    assert android_input_text("%d%s") == "%d "


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_is_typed_literally(shell: DeviceShell, phone: RecordingPhone, text: str) -> None:
    r = shell.run("input text " + shlex.quote(text))
    assert r.status == 0, r.stderr
    assert phone.calls == [("type_text", android_input_text(text))]


def test_non_ascii_needs_the_adb_keyboard(shell: DeviceShell, phone: RecordingPhone) -> None:
    assert shell.run("input text " + shlex.quote("中文")).status == 255
    # the broadcast does nothing until the ADB Keyboard is the current IME
    shell.run("am broadcast -a ADB_INPUT_TEXT --es msg " + shlex.quote("中文"))
    assert phone.calls_of("type_text") == []
    r = shell.run("ime set com.android.adbkeyboard/.AdbIME")
    assert r.status == 0 and b"selected" in r.stdout
    r = shell.run("am broadcast -a ADB_INPUT_TEXT --es msg " + shlex.quote("中文 😀 שלום %s"))
    assert b"Broadcast completed: result=0" in r.stdout
    assert phone.calls_of("type_text") == [("中文 😀 שלום %s",)]


def test_ime(shell: DeviceShell) -> None:
    assert shell.run("ime list -s").stdout.decode().split() == [
        "com.android.inputmethod.latin/.LatinIME", "com.android.adbkeyboard/.AdbIME"]
    assert shell.run("ime set no.such/.Ime").status == 255
    # the current one, as a driver reads it to put the user's keyboard back
    user = shell.run("settings get secure default_input_method").stdout.decode().strip()
    assert user == "com.android.inputmethod.latin/.LatinIME"
    shell.run("ime set com.android.adbkeyboard/.AdbIME")
    assert shell.run("settings get secure default_input_method").stdout == (
        b"com.android.adbkeyboard/.AdbIME\n")
    assert shell.run("settings get system no_such_key").stdout == b"null\n"
    assert shell.run("settings frobnicate").status == 255


def test_activities(shell: DeviceShell, phone: RecordingPhone) -> None:
    r = shell.run("am start -n com.mobagent.notes/.EditActivity")
    assert r.status == 0 and b"cmp=com.mobagent.notes/.EditActivity" in r.stdout
    assert b"mCurrentFocus=Window{5a1b2c3 u0 com.mobagent.notes/com.mobagent.notes.EditActivity}" in \
        shell.run("dumpsys window windows").stdout
    assert shell.run("am start -n no.such/.Main").status == 1
    assert shell.run("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1").status == 0
    r = shell.run("monkey -p no.such -c android.intent.category.LAUNCHER 1")
    assert r.status == 252 and b"No activities found" in r.stderr
    shell.run("am force-stop com.android.settings")
    assert phone.calls_of("force_stop") == [("com.android.settings",)]
    assert shell.run("pm list packages notes").stdout == b"package:com.mobagent.notes\n"


def test_dumpsys_display_orientation(shell: DeviceShell, phone: RecordingPhone) -> None:
    phone.rotation = 1
    out = shell.run("dumpsys display").stdout.decode()
    assert "orientation=1," in out and "deviceWidth=1280, deviceHeight=720" in out


def test_screencap_png_and_raw(shell: DeviceShell) -> None:
    png = shell.run("screencap -p").stdout
    img = Image.open(io.BytesIO(png))
    assert img.format == "PNG" and img.size == (720, 1280)
    raw = shell.run("screencap").stdout
    w, h, fmt, space = struct.unpack("<4I", raw[:16])
    assert (w, h, fmt, space) == (720, 1280, 1, 1) and len(raw) == 16 + 720 * 1280 * 4
    assert raw[16:20] == bytes((30, 120, 200, 255))


def test_screencap_old_sdk_has_12_byte_header(phone: RecordingPhone) -> None:
    phone.info.sdk = 27
    raw = DeviceShell(phone, VirtualFS()).run("screencap").stdout
    assert len(raw) == 12 + 720 * 1280 * 4


def test_screencap_faults(shell: DeviceShell, phone: RecordingPhone) -> None:
    phone.faults.refuse_screencap = True
    r = shell.run("screencap -p")
    assert r.status != 0 and r.stdout == b""
    phone.faults.refuse_screencap = False
    phone.faults.corrupt_screencap = True
    r = shell.run("screencap -p")
    assert r.status == 0
    with pytest.raises((OSError, SyntaxError, ValueError)):
        Image.open(io.BytesIO(r.stdout)).load()


def test_files(shell: DeviceShell) -> None:
    assert shell.run("screencap -p /sdcard/s.png && ls /sdcard").stdout.split() == [
        b"Download", b"Pictures", b"s.png"]
    assert shell.run("echo hi > /sdcard/a.txt; echo there >> /sdcard/a.txt; cat /sdcard/a.txt").stdout \
        == b"hi\nthere\n"
    assert shell.run("rm /sdcard/a.txt; cat /sdcard/a.txt").status == 1
    assert shell.run("ls /nope 2>/dev/null").stderr == b""
    assert shell.run("ls /nope 2>&1").stdout == b"ls: /nope: No such file or directory\n"
    assert shell.run("echo x | cat").stdout == b"x\n"


def test_syntax_error_exit_status(shell: DeviceShell) -> None:
    r = shell.run("echo 'open")
    assert r.status == 1 and r.stderr.startswith(b"/system/bin/sh: ")


def test_slow_fault_applies(shell: DeviceShell, phone: RecordingPhone) -> None:
    import time

    phone.faults.slow_s = 0.2
    t = time.monotonic()
    shell.run("echo a")
    assert time.monotonic() - t >= 0.2


def test_home_intent_and_activity_dumps(shell: DeviceShell, phone: RecordingPhone) -> None:
    r = shell.run("am start -a android.intent.action.MAIN -c android.intent.category.HOME")
    assert r.status == 0 and phone.calls_of("key") == [(3,)]
    assert b"cat=[android.intent.category.HOME]" in r.stdout
    r = shell.run("am start -a android.intent.action.VIEW")
    assert r.status == 1 and b"unable to resolve Intent" in r.stderr
    shell.run("am start -n com.mobagent.notes/.EditActivity")
    assert b"mResumedActivity: ActivityRecord{8e7f6a5 u0 com.mobagent.notes/.EditActivity t12}" \
        in shell.run("dumpsys activity activities").stdout
    assert b"ACTIVITY com.mobagent.notes/.EditActivity 8e7f6a5 pid=" in \
        shell.run("dumpsys activity top").stdout


def test_grep_and_sh_c(shell: DeviceShell) -> None:
    r = shell.run("dumpsys window windows | grep mCurrentFocus")
    assert r.status == 0 and r.stdout.strip().startswith(b"mCurrentFocus=Window{")
    assert shell.run("dumpsys window | grep -c -i MCURRENTFOCUS").stdout == b"1\n"
    assert shell.run("echo abc | grep -q zzz").status == 1
    assert shell.run("echo abc | grep -v zzz").stdout == b"abc\n"
    assert shell.run("grep x /no/file").status == 2
    assert shell.run("grep -Z x").status == 2
    r = shell.run("sh -c 'echo one; false'")
    assert (r.stdout, r.status) == (b"one\n", 1)
    assert shell.run("sh script.sh").status == 2
