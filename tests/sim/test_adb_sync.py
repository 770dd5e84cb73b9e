"""sync v1 (push, pull, stat, list) through the real adb server, adbutils and the adb CLI."""

from __future__ import annotations

import os
import socket
import stat
import struct
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from sim.adb.wire import Command, Message
from tests.fixtures.adb import AdbServer, ConnectedPhone


@pytest.fixture
def cp(sim_phone: Any) -> ConnectedPhone:
    return sim_phone()


def test_push_then_shell_sees_it(cp: ConnectedPhone) -> None:
    d = cp.device
    payload = os.urandom(200_000)  # several DATA chunks and several WRTEs
    assert d.sync.push(payload, "/sdcard/Download/blob.bin") == len(payload)
    assert d.shell("ls /sdcard/Download") == "blob.bin"
    assert d.sync.read_bytes("/sdcard/Download/blob.bin") == payload
    info = d.sync.stat("/sdcard/Download/blob.bin")
    assert info.size == len(payload) and stat.S_ISREG(info.mode)
    assert stat.S_IMODE(info.mode) == 0o755  # adbutils' default push mode


def test_push_into_directory_and_new_parents(cp: ConnectedPhone, tmp_path: Path) -> None:
    src = tmp_path / "note.txt"
    src.write_text("héllo\n", encoding="utf-8")
    d = cp.device
    d.sync.push(src, "/sdcard/")  # a directory: the file keeps its name
    assert d.shell("cat /sdcard/note.txt") == "héllo"
    d.sync.push(b"x", "/data/local/tmp/a/b/c.txt")  # adbd makes missing parents
    assert d.shell("cat /data/local/tmp/a/b/c.txt") == "x"


def test_pull_screencap_file(cp: ConnectedPhone, tmp_path: Path) -> None:
    d = cp.device
    assert d.shell2("screencap -p /sdcard/s.png", v2=True).returncode == 0
    out = tmp_path / "s.png"
    size = d.sync.pull("/sdcard/s.png", out)
    assert size == out.stat().st_size > 0
    img = Image.open(out)
    assert img.size == (1080, 2400)
    assert img.convert("RGB").getpixel((5, 5)) == cp.phone.colour


def test_stat_and_list(cp: ConnectedPhone) -> None:
    d = cp.device
    assert not d.sync.exists("/sdcard/nope")
    assert stat.S_ISDIR(d.sync.stat("/sdcard").mode)
    d.sync.push(b"abc", "/sdcard/Pictures/p.txt")
    entries = {e.path: e for e in d.sync.list("/sdcard/Pictures")}
    assert set(entries) == {".", "..", "p.txt"}
    assert entries["p.txt"].size == 3 and stat.S_ISREG(entries["p.txt"].mode)
    assert d.sync.list("/no/such/dir") == []


def test_pull_missing_file_fails_clearly(cp: ConnectedPhone) -> None:
    from adbutils.errors import AdbError

    with pytest.raises(AdbError, match="No such file"):
        cp.device.sync.read_bytes("/sdcard/missing.txt")
    assert cp.device.shell("echo alive") == "alive"


def test_adb_cli_push_pull(adb_server: AdbServer, cp: ConnectedPhone, tmp_path: Path) -> None:
    src = tmp_path / "up.bin"
    src.write_bytes(os.urandom(100_000))
    r = adb_server.run("-s", cp.serial, "push", str(src), "/sdcard/up.bin")
    assert r.returncode == 0, r.stderr
    back = tmp_path / "down.bin"
    r = adb_server.run("-s", cp.serial, "pull", "/sdcard/up.bin", str(back))
    assert r.returncode == 0, r.stderr
    assert back.read_bytes() == src.read_bytes()
    r = adb_server.run("-s", cp.serial, "pull", "/sdcard/absent", str(tmp_path / "x"))
    assert r.returncode != 0 and "does not exist" in r.stdout + r.stderr


def _raw_sync(port: int) -> tuple[socket.socket, int]:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(Message(Command.CNXN, 0x01000001, 256 * 1024, b"host::\0").pack())
    _, _, _, length, _, _ = struct.unpack("<6I", _recv(s, 24))
    _recv(s, length)
    s.sendall(Message(Command.OPEN, 9, 0, b"sync:\0").pack())
    cmd, local, _, _, _, _ = struct.unpack("<6I", _recv(s, 24))
    assert cmd == Command.OKAY
    return s, local


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


@pytest.mark.parametrize("request_bytes,reason", [
    (b"JUNK\0\0\0\0", b"unknown command"),
    (b"STAT" + struct.pack("<I", 5000), b"path too long"),
    (b"SEND" + struct.pack("<I", 9) + b"/sdcard/x" + b"XXXX\0\0\0\0", b"invalid data message"),
    (b"SEND" + struct.pack("<I", 13) + b"/sdcard/x,420" + b"DATA" + struct.pack("<I", 1 << 20),
     b"oversize data"),
])
def test_bad_sync_requests_fail_and_keep_serving(cp: ConnectedPhone, request_bytes: bytes,
                                                reason: bytes) -> None:
    s, local = _raw_sync(cp.sim.port)
    try:
        s.sendall(Message(Command.WRTE, 9, local, request_bytes).pack())
        replies = b""
        while True:
            cmd, _, _, length, _, _ = struct.unpack("<6I", _recv(s, 24))
            data = _recv(s, length)
            if cmd == Command.WRTE:
                replies += data
                s.sendall(Message(Command.OKAY, 9, local).pack())
            elif cmd == Command.CLSE:
                break
        assert replies[:4] == b"FAIL" and reason in replies
    finally:
        s.close()
    assert not cp.device.sync.exists("/sdcard/x")
    assert cp.device.shell("echo alive") == "alive"



def test_pull_directory(adb_server: AdbServer, cp: ConnectedPhone, tmp_path: Path) -> None:
    d = cp.device
    d.sync.push(b"one", "/sdcard/Download/set/a.txt")
    d.sync.push(b"two", "/sdcard/Download/set/sub/b.txt")
    assert d.sync.pull("/sdcard/Download/set", tmp_path / "lib") == 6  # adbutils walks LIST
    assert (tmp_path / "lib/sub/b.txt").read_bytes() == b"two"
    r = adb_server.run("-s", cp.serial, "pull", "/sdcard/Download/set", str(tmp_path / "cli"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "cli/a.txt").read_bytes() == b"one"
    assert (tmp_path / "cli/sub/b.txt").read_bytes() == b"two"
