"""Real adb server + real adbutils against simulated phones on loopback ports."""

from __future__ import annotations

import base64
import shlex
import socket
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from sim.adb.wire import Command, Message
from tests.fixtures.adb import AdbServer, ConnectedPhone

HOSTILE = ["a;rm -rf /", "$(reboot)", "`id`", "a && reboot", "x | sh", "it's", '"q"', "\\n",
           "$HOME", "> /sdcard/x", "%s%s", "--", "-e foo", "a\tb", "*", "~",
           "a; rm /sdcard/canary", "$(rm /sdcard/canary)", "`rm /sdcard/canary`",
           "x > /sdcard/pwned", "a\nrm /sdcard/canary", "'; rm /sdcard/canary; '",
           '"; rm /sdcard/canary; "', "\\'; echo p > /sdcard/pwned #", "${IFS}rm${IFS}/sdcard/canary"]


@pytest.fixture
def cp(sim_phone: Any) -> ConnectedPhone:
    return sim_phone()


def test_device_is_listed(adb_server: AdbServer, cp: ConnectedPhone) -> None:
    serials = {d.serial: d.state for d in adb_server.client().list()}
    assert serials[cp.serial] == "device"
    out = adb_server.run("devices", "-l").stdout
    assert f"{cp.serial}" in out and "model:MobAgent_Sim" in out
    assert set(cp.device.get_features().split(",")) == {"shell_v2", "cmd"}


def test_shell_output_and_exit_codes(cp: ConnectedPhone) -> None:
    d = cp.device
    assert d.shell("echo hello; getprop ro.product.model") == "hello\nMobAgent_Sim"
    r = d.shell2("echo out; no-such-tool; echo $?", v2=True)
    assert r.stdout == "out\n127\n"
    assert r.stderr == "/system/bin/sh: no-such-tool: inaccessible or not found\n"
    assert d.shell2("no-such-tool", v2=True).returncode == 127
    assert d.shell2("false", v2=True).returncode == 1
    assert d.shell2("exit 42", v2=True).returncode == 42
    assert d.shell2("true", v2=True).returncode == 0
    assert d.shell2("false").returncode == 1  # v1 path: adbutils appends `; echo X4EXIT:$?`


def test_adb_cli_shell_exit_code(adb_server: AdbServer, cp: ConnectedPhone) -> None:
    r = adb_server.run("-s", cp.serial, "shell", "echo hi; nosuch")
    assert (r.returncode, r.stdout, r.stderr) == (
        127, "hi\n", "/system/bin/sh: nosuch: inaccessible or not found\n")
    inter = subprocess.run([adb_server.adb, "-P", str(adb_server.port), "-s", cp.serial, "shell"],
                           input="echo one\nexit 7\n", capture_output=True, text=True,
                           env=adb_server.env, timeout=20, check=False)
    assert (inter.returncode, inter.stdout) == (7, "one\n")


def test_screenshot(cp: ConnectedPhone) -> None:
    img = cp.device.screenshot(error_ok=False)
    assert img.size == (1080, 2400)
    assert img.convert("RGB").getpixel((540, 1200)) == cp.phone.colour
    cp.phone.colour = (200, 10, 10)
    assert cp.device.screenshot().convert("RGB").getpixel((1, 1)) == (200, 10, 10)


def test_exec_out_raw_screencap(adb_server: AdbServer, cp: ConnectedPhone) -> None:
    out = subprocess.run([adb_server.adb, "-P", str(adb_server.port), "-s", cp.serial,
                          "exec-out", "screencap"], capture_output=True, env=adb_server.env,
                         timeout=30, check=True).stdout
    w, h, fmt, _space = struct.unpack("<4I", out[:16])
    assert (w, h, fmt) == (1080, 2400, 1) and len(out) == 16 + w * h * 4
    assert out[-4:] == bytes((*cp.phone.colour, 255))


def test_input_through_adbutils(cp: ConnectedPhone) -> None:
    d = cp.device
    d.click(100, 200)
    d.swipe(10, 2000, 10, 500, 0.3)
    d.send_keys("hello world")
    d.keyevent("KEYCODE_HOME")
    d.keyevent(4)
    calls = [c for c in cp.phone.calls if c[0] != "screenshot"]
    assert calls == [("tap", 100, 200), ("swipe", 10, 2000, 10, 500, 300),
                     ("type_text", "hello world"), ("key", 3), ("key", 4)]


def test_window_size_and_rotation(cp: ConnectedPhone) -> None:
    assert tuple(cp.device.window_size()) == (1080, 2400)
    cp.phone.rotation = 1
    assert tuple(cp.device.window_size()) == (2400, 1080)
    assert cp.device.rotation() == 1


def test_apps(cp: ConnectedPhone) -> None:
    d = cp.device
    d.app_start("com.mobagent.notes")
    assert cp.phone.calls_of("launch") == [("com.mobagent.notes",)]
    cur = d.app_current()
    assert (cur.package, cur.activity) == ("com.mobagent.notes", "com.mobagent.notes.MainActivity")
    d.app_start("com.android.settings", ".Wifi")
    assert cp.phone.calls_of("start_activity") == [("com.android.settings/.Wifi",)]
    assert d.app_current().package == "com.android.settings"
    d.app_stop("com.android.settings")
    assert cp.phone.calls_of("force_stop") == [("com.android.settings",)]
    assert "com.mobagent.browser" in d.list_packages()


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_send_keys_arrive_literally(cp: ConnectedPhone, text: str) -> None:
    cp.sim.fs.write("/sdcard/canary", b"alive")
    cp.device.send_keys(text)
    typed = text.replace("%s", " ")
    assert cp.phone.calls_of("type_text") == [(typed,)]
    assert [c[0] for c in cp.phone.calls] == ["type_text"]
    assert cp.sim.fs.read("/sdcard/canary") == b"alive"  # nothing ran
    assert cp.sim.fs.get("/sdcard/pwned") is None and cp.sim.fs.get("/sdcard/x") is None


@pytest.mark.parametrize("text", ["中文输入", "emoji 😀👍", "שלום עולם", "mixed %s ü",
                                  "مرحبا 123 abc", "e\u0301 ﬁ 𝔘𝔫𝔦", "it's \"q\" $HOME `id` ;rm -rf /"])
def test_unicode_through_adb_keyboard(cp: ConnectedPhone, text: str) -> None:
    d = cp.device
    assert "com.android.adbkeyboard/.AdbIME" in d.shell("ime list -s").split()
    d.shell(["ime", "set", "com.android.adbkeyboard/.AdbIME"])
    d.shell(["am", "broadcast", "-a", "ADB_INPUT_TEXT", "--es", "msg", text])
    b64 = base64.b64encode(text.encode()).decode()
    d.shell(["am", "broadcast", "-a", "ADB_INPUT_B64", "--es", "msg", b64])
    assert cp.phone.calls_of("type_text") == [(text,), (text,)]


def test_many_phones_no_cross_talk(sim_phone: Any) -> None:
    phones: list[ConnectedPhone] = [sim_phone(serial=f"p{i}") for i in range(8)]
    for i, p in enumerate(phones):
        p.phone.colour = (i * 30, 255 - i * 30, 7)

    def work(i: int) -> tuple[int, int, int]:
        p = phones[i]
        for k in range(3):
            p.device.click(i, k)
        return p.device.screenshot().convert("RGB").getpixel((3, 3))

    with ThreadPoolExecutor(8) as pool:
        colours = list(pool.map(work, range(8)))
    for i, p in enumerate(phones):
        assert colours[i] == p.phone.colour
        assert p.phone.calls_of("tap") == [(i, 0), (i, 1), (i, 2)]


def _raw_handshake(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(Message(Command.CNXN, 0x01000001, 256 * 1024, b"host::\0").pack())
    head = _recv_exact(s, 24)
    cmd, _, _, length, _, _ = struct.unpack("<6I", head)
    assert cmd == Command.CNXN
    assert _recv_exact(s, length).startswith(b"device::ro.product.name=mobagent_sim;")
    return s


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def _closed(s: socket.socket) -> bool:
    s.settimeout(5)
    try:
        while s.recv(4096):
            pass
    except ConnectionResetError:
        pass
    return True


GARBAGE = {
    "bad magic": Message(Command.OKAY, 1, 1).pack()[:20] + b"\0\0\0\0",
    "truncated header": Message(Command.OKAY, 1, 1).pack()[:10],
    "unknown command": struct.pack("<6I", 0x4B4F4F42, 0, 0, 0, 0, 0x4B4F4F42 ^ 0xFFFFFFFF),
    "unknown stream": Message(Command.WRTE, 5, 999, b"x").pack(),
    "oversized": struct.pack("<6I", Command.WRTE, 1, 1, 1 << 30, 0, Command.WRTE ^ 0xFFFFFFFF),
}


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_malformed_bytes_close_only_that_connection(cp: ConnectedPhone, kind: str) -> None:
    s = _raw_handshake(cp.sim.port)
    try:
        s.sendall(GARBAGE[kind])
        if kind == "truncated header":
            s.shutdown(socket.SHUT_WR)
        assert _closed(s)
    finally:
        s.close()
    assert cp.device.shell("echo still here") == "still here"  # the adb server's connection
    other = _raw_handshake(cp.sim.port)  # and a new one
    other.close()


def test_garbage_before_handshake(cp: ConnectedPhone) -> None:
    with socket.create_connection(("127.0.0.1", cp.sim.port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _closed(s)
    assert cp.device.shell("echo ok") == "ok"


def test_flow_control_one_write_in_flight(cp: ConnectedPhone) -> None:
    s = _raw_handshake(cp.sim.port)
    try:
        s.sendall(Message(Command.OPEN, 77, 0, b"exec:screencap\0").pack())
        cmd, local, remote, _, _, _ = struct.unpack("<6I", _recv_exact(s, 24))
        assert (cmd, remote) == (Command.OKAY, 77) and local != 0
        got = 0
        for _ in range(3):
            cmd, a0, a1, length, _, _ = struct.unpack("<6I", _recv_exact(s, 24))
            assert (cmd, a0, a1) == (Command.WRTE, local, 77) and 0 < length <= 256 * 1024
            got += len(_recv_exact(s, length))
            s.settimeout(0.3)  # nothing more may come before our OKAY
            with pytest.raises(TimeoutError):
                s.recv(1)
            s.settimeout(5)
            s.sendall(Message(Command.OKAY, 77, local).pack())
        s.sendall(Message(Command.CLSE, 77, local).pack())
    finally:
        s.close()
    assert got > 0
    assert cp.device.shell("echo ok") == "ok"


def test_unknown_service_is_refused(cp: ConnectedPhone) -> None:
    s = _raw_handshake(cp.sim.port)
    try:
        s.sendall(Message(Command.OPEN, 5, 0, b"framebuffer:\0").pack())
        cmd, a0, a1, _, _, _ = struct.unpack("<6I", _recv_exact(s, 24))
        assert (cmd, a0, a1) == (Command.CLSE, 0, 5)
        s.sendall(Message(Command.OPEN, 6, 0, b"shell:echo raw\0").pack())
        cmd, local, _, _, _, _ = struct.unpack("<6I", _recv_exact(s, 24))
        assert cmd == Command.OKAY
        cmd, _, _, length, _, _ = struct.unpack("<6I", _recv_exact(s, 24))
        assert cmd == Command.WRTE and _recv_exact(s, length) == b"raw\n"
    finally:
        s.close()


def test_dropped_connection_shows_offline_then_returns(adb_server: AdbServer, cp: ConnectedPhone) -> None:
    cp.phone.faults.drop_connections = True
    assert adb_server.wait_state(cp.serial, lambda st: st != "device") in ("offline", None)
    cp.phone.faults.drop_connections = False
    adb_server.connect(cp.sim.port)
    assert adb_server.state(cp.serial) == "device"
    assert cp.device.shell("echo back") == "back"


def test_screencap_faults_through_adb(cp: ConnectedPhone) -> None:
    cp.phone.faults.refuse_screencap = True
    r = cp.device.shell2("screencap -p", v2=True)
    assert r.returncode == 1 and r.stdout == ""
    cp.phone.faults.refuse_screencap = False
    cp.phone.faults.corrupt_screencap = True
    from adbutils.errors import AdbError

    with pytest.raises(AdbError):
        cp.device.screenshot(error_ok=False)


def test_quoted_argv_round_trip(cp: ConnectedPhone) -> None:
    words = ["a b", "c;d", "'e'", '"f"', "$g", "h\\i"]
    assert cp.device.shell("echo " + " ".join(shlex.quote(w) for w in words)) == " ".join(words)


def test_non_ascii_input_text_fails_like_a_device(cp: ConnectedPhone) -> None:
    r = cp.device.shell2(["input", "text", "中文"], v2=True)
    assert r.returncode == 255 and "NullPointerException" in r.stderr
    assert cp.phone.calls_of("type_text") == []  # use the ADB Keyboard broadcast instead
