"""``mobagent doctor`` and ``mobagent devices setup`` through the real adb server against
simulated phones, and their error paths (we cannot ship the ADB Keyboard's APK)."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from devices.adb import ADB_KEYBOARD, ShellResult
from devices.identity import PhoneIdentity
from devices.preflight import Check, Preflight
from host.devices_cli import SetupError, install_problem, setup_phone
from host.doctor import identity_warnings, table
from runtime.cli import main
from sim.fleet import SimFleet
from tests.fixtures.adb import ConnectedPhone

needs_adb = pytest.mark.needs_adb


@needs_adb
def test_doctor_shows_a_ready_simulated_phone(sim_phone: Callable[..., ConnectedPhone],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    cp = sim_phone(serial="doc-0")
    assert main(["doctor", "--serial", cp.serial]) == 0
    out = capsys.readouterr().out
    header, row = out.splitlines()[:2]
    for column in ("adb", "android", "vendor", "screen", "displays", "awake", "keyguard",
                   "keyboard", "home", "input"):
        assert column in header
    assert row.startswith(cp.serial) and row.split()[1:].count("ok") >= 10
    assert max(len(line) for line in out.splitlines()[:2]) <= 120  # not a tty: 120 columns
    assert f"{cp.serial}: ready (" in out
    assert main(["doctor", "--json", "--serial", cp.serial]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert report["ready"] is True and report["summary"] == "ready"
    assert {c["name"]: c["ok"] for c in report["checks"]}["awake"] is True
    assert {c["name"]: c["value"] for c in report["checks"]}["screen"].startswith("1080x2400, 420 dpi")
    stream = {c["name"]: c for c in report["checks"]}["stream"]  # device.transport = auto
    assert stream["ok"] is True and stream["value"].startswith("first frame ")
    assert int(stream["value"].split()[2]) > 0


@needs_adb
def test_doctor_says_the_stream_is_off_and_why(sim_phone: Callable[..., ConnectedPhone],
                                               capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    cp = sim_phone(serial="doc-s")
    wrong = tmp_path / "scrcpy-server"
    wrong.write_bytes(b"not the server")
    # auto: the phone works on adb, so it is said, not failed
    assert main(["--set", f"device.scrcpy_server={wrong}", "doctor", "--serial", cp.serial]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[-1] == "stream" and out.splitlines()[1].split()[-1] == "?"
    assert "stream: adb: no scrcpy server file (works without it) — " in out
    assert "is not the scrcpy 3.3.4 server" in out
    # asked for by name: it needs attention
    assert main(["--set", f"device.scrcpy_server={wrong}", "--set", "device.transport=scrcpy",
                 "doctor", "--serial", cp.serial]) == 1
    assert "needs attention" in capsys.readouterr().out
    # adb: no stream row at all
    assert main(["--set", "device.transport=adb", "doctor", "--json", "--serial", cp.serial]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert "stream" not in {c["name"] for c in report["checks"]}


@needs_adb
def test_doctor_fails_with_the_fix_for_a_missing_keyboard_and_an_absent_phone(
        sim_phone: Callable[..., ConnectedPhone], capsys: pytest.CaptureFixture[str]) -> None:
    cp = sim_phone(serial="doc-1")
    cp.phone.ime_ids = ["com.android.inputmethod.latin/.LatinIME"]
    assert main(["doctor", "--keyboard", "--serial", cp.serial, "--serial", "R5CT-gone"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out.splitlines()[1]
    assert "keyboard: ADB Keyboard not installed — download ADBKeyboard.apk" in out
    assert "R5CT-gone: needs attention\n  adb: absent — the phone is not connected" in out


def _apk(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("AndroidManifest.xml", b"\x03\x00\x08\x00")
    return path


def test_setup_refuses_a_missing_or_broken_apk(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["devices", "setup", "--ime-apk", str(tmp_path / "none.apk")]) == 2
    assert "no such file; download ADBKeyboard.apk" in capsys.readouterr().err
    (tmp_path / "bad.apk").write_text("<html>404</html>")
    assert main(["devices", "setup", "--ime-apk", str(tmp_path / "bad.apk")]) == 2
    assert "is not an APK" in capsys.readouterr().err


@needs_adb
def test_setup_pushes_and_reports_the_phones_refusal(
        sim_phone: Callable[..., ConnectedPhone], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The simulated phone takes the push but has no `pm install`: the failure names the
    phone, what it printed, and how to install by hand; a phone adb lacks is named too."""
    cp = sim_phone(serial="doc-2")
    apk = _apk(tmp_path / "ADBKeyboard.apk")
    code = main(["devices", "setup", "--ime-apk", str(apk), "--serial", cp.serial,
                 "--serial", "R5CT-gone"])
    out, err = capsys.readouterr()
    assert code == 1
    assert f"{cp.serial}: pushing ADBKeyboard.apk\n{cp.serial}: installing" in out
    assert f"{cp.serial}: the install failed: " in err
    assert f"adb -s {cp.serial} install -r -g {apk}" in err
    assert "R5CT-gone: absent — the phone is not connected" in err


def test_install_failures_name_their_fix() -> None:
    assert install_problem("Performing Streamed Install\nSuccess\n", 0) is None
    xiaomi = "Failure [INSTALL_FAILED_USER_RESTRICTED: Install canceled by user]\n"
    got = install_problem(xiaomi, 1)
    assert got is not None and got.startswith("Failure [INSTALL_FAILED_USER_RESTRICTED")
    assert "Install via USB" in got
    incompatible = ("Failure [INSTALL_FAILED_UPDATE_INCOMPATIBLE: Package com.android.adbkeyboard"
                    " signatures do not match previously installed version; ignoring!]\n")
    assert "adb uninstall com.android.adbkeyboard" in (install_problem(incompatible, 1) or "")


class FakePhone:
    """Takes the push and the install; ``ime`` answers as given."""

    serial = "fake-1"

    def __init__(self, enable: ShellResult, listed: str) -> None:
        self.answers = {f"ime enable {ADB_KEYBOARD}": enable, "ime list -s": ShellResult(0, listed)}
        self.ran: list[str] = []

    async def push(self, local: str, remote: str, timeout_s: float = 120.0) -> None:
        self.ran.append(f"push {remote}")

    async def shell_result(self, cmd: str, timeout_s: float | None = None) -> ShellResult:
        self.ran.append(cmd)
        if cmd.startswith("pm install"):
            return ShellResult(0, "Success\n")
        return self.answers.get(cmd, ShellResult(0, ""))


@pytest.mark.anyio
async def test_setup_installs_enables_and_checks(tmp_path: Path) -> None:
    apk = _apk(tmp_path / "ADBKeyboard.apk")
    said: list[str] = []
    ok = FakePhone(ShellResult(0, f"Input method {ADB_KEYBOARD}: now enabled for user #0\n"),
                   f"{ADB_KEYBOARD}\n")
    await setup_phone(ok, apk, said.append)  # type: ignore[arg-type]
    assert ok.ran[:2] == ["push /data/local/tmp/ADBKeyboard.apk",
                          "pm install -r -g /data/local/tmp/ADBKeyboard.apk"]
    assert said[-1] == "fake-1: done: the ADB Keyboard is installed and enabled"
    refused = FakePhone(ShellResult(255, "java.lang.SecurityException: Permission Denial: "
                                         "WRITE_SECURE_SETTINGS\n"), "")
    with pytest.raises(SetupError, match="ime enable.*Disable permission monitoring"):
        await setup_phone(refused, apk, said.append)  # type: ignore[arg-type]


def _reports(n: int) -> list[Preflight]:
    """Ready phones with every check's value as long as real phones print them."""
    checks = [Check(name="adb", ok=True, value="device"),
              Check(name="android", ok=True, value="Android 14 (SDK 34)"),
              Check(name="vendor", ok=True, value="samsung SM-S901B"),
              Check(name="screen", ok=True, value="1080x2340, 420 dpi, rotation 0"),
              Check(name="displays", ok=True, value="1 display"),
              Check(name="awake", ok=True, value="Awake"),
              Check(name="keyguard", ok=False, value="showing, secure",
                    fix="unlock the phone: a PIN is never typed"),
              Check(name="keyboard", ok=True, value="not needed (adb path only)"),
              Check(name="home", ok=True, value="com.sec.android.app.launcher"),
              Check(name="input", ok=True, value="allowed")]
    return [Preflight(serial=f"192.168.100.{i}:5555", checks=checks) for i in range(n)]


@pytest.mark.parametrize("width", [120, 100])
def test_doctor_table_fits_the_terminal(width: int) -> None:
    out = table(_reports(3), width)
    grid = out.split("\n\n")[0].splitlines()
    assert max(map(len, out.splitlines()[:4])) <= width
    assert len(grid) == 4 and grid[0].startswith("phone") and "keyguard" in grid[0]
    assert "FAIL" in grid[1]
    # what to fix is whole, whatever the width
    assert "keyguard: showing, secure — unlock the phone: a PIN is never typed" in out


def test_doctor_shows_the_checks_as_rows_where_no_table_fits() -> None:
    out = table(_reports(2), 80)
    assert all(len(line) <= 80 for line in out.split("\n\n")[0].splitlines())
    lines = out.splitlines()
    assert lines[0] == "192.168.100.0:5555" and lines[1].split() == ["adb", "ok", "device"]
    assert any(line.split()[:2] == ["keyguard", "FAIL"] for line in lines)


def test_doctor_warns_about_shared_serials() -> None:
    boot = ["0b7c5a5e-3f59-4f8e-9b53-2f1d6f2a9c10", "5d8e0c1a-77a2-4e7b-8a61-0c9f3b2e4d21"]
    found = {"127.0.0.1:5001": PhoneIdentity("0123456789ABCDEF", boot[0]),
             "127.0.0.1:5002": PhoneIdentity("0123456789ABCDEF", boot[1]),
             "R5CT10ABCDE": PhoneIdentity("R5CT10ABCDE", boot[0]),
             "192.168.1.20:5555": PhoneIdentity("R5CT10ABCDE", boot[0])}
    # adb devices -l with two USB phones of one serial, as quoted in
    # https://github.com/pbreault/adb-idea/issues/100
    listed = ["0123456789ABCDEF", "0123456789ABCDEF", *found]
    said = identity_warnings(listed, found)
    assert len(said) == 2, said
    assert said[0].startswith("adb lists 0123456789ABCDEF more than once") and "adb -t" in said[0]
    assert "127.0.0.1:5001, 127.0.0.1:5002 report the same ro.serialno" in said[1]
    # one phone on USB and Wi-Fi is no warning: the fleet drives it once
    assert not any("R5CT10ABCDE" in s for s in said)


@needs_adb
def test_doctor_warns_about_two_simulated_phones_of_one_factory_serial(
        sim_fleet: Callable[..., SimFleet], capsys: pytest.CaptureFixture[str]) -> None:
    fleet = sim_fleet(count=2, stand_in=True, device_profile="lowcost-10")
    args = ["doctor", *(a for s in fleet.serials for a in ("--serial", s))]
    main(args)
    out = capsys.readouterr().out
    assert "warning: " in out and "report the same ro.serialno 0123456789ABCDEF" in out
