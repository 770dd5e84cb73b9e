"""`mobagent sim` and `mobagent sim screenshot`, through a plain argparse parser and adb."""

from __future__ import annotations

import argparse
import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from sim import cli
from sim.phone_api import DeviceState, Faults
from sim.stand_in import recording_phone
from tests.fixtures.adb import AdbServer, ConnectedPhone, import_sim_phone


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mobagent")
    cli.register(parser.add_subparsers(dest="command", required=True))
    return parser


def test_register_parses_the_documented_forms() -> None:
    args = _parser().parse_args(["sim", "--count", "3", "--seed", "2", "--profile", "realistic"])
    assert (args.count, args.seed, args.profile, args.sim_command) == (3, 2, "realistic", None)
    defaults = _parser().parse_args(["sim"])
    assert (defaults.count, defaults.seed, defaults.profile) == (1, 0, "instant")
    shot = _parser().parse_args(["sim", "screenshot", "127.0.0.1:4000", "out.png"])
    assert (shot.sim_command, shot.serial, shot.out) == ("screenshot", "127.0.0.1:4000",
                                                         Path("out.png"))
    assert callable(args.func) and callable(shot.func)
    tuned = _parser().parse_args(["sim", "--profile", "realistic", "--screencap-ms", "100"])
    latency = cli.latency_from_args(tuned)
    assert (latency.name, latency.screencap_s, latency.input_s) == ("realistic", 0.1, 0.05)


@pytest.mark.parametrize("argv", [["sim", "--count", "0"], ["sim", "--count", "x"],
                                  ["sim", "--profile", "warp"], ["sim", "--seed", "-1"],
                                  ["sim", "--input-ms", "-5"], ["sim", "--screencap-ms", "x"],
                                  ["sim", "screenshot", "only-serial"]])
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        _parser().parse_args(argv)
    assert e.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_entry_point_is_registered() -> None:
    from importlib.metadata import entry_points

    eps = {ep.name: ep for ep in entry_points(group="mobagent.commands")}
    assert "sim" in eps, "run `.venv/bin/pip install -e . --no-deps` to register entry points"
    assert eps["sim"].load() is cli.register


def test_run_fleet_prints_serials_and_stops(adb_server: AdbServer) -> None:
    args = _parser().parse_args(["sim", "--count", "2"])
    stop = threading.Event()
    out = io.StringIO()
    status: list[int] = []
    runner = threading.Thread(target=lambda: status.append(
        cli.run_fleet(args, phone_factory=recording_phone, stop=stop, out=out)))
    runner.start()
    try:
        deadline = time.monotonic() + 30
        while out.getvalue().count("\n") < 2 and runner.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        serials = out.getvalue().split()
        assert len(serials) == 2 and all(s.startswith("127.0.0.1:") for s in serials)
        listed = {d.serial: d.state for d in adb_server.client().list()}
        assert all(listed.get(s) == "device" for s in serials)
    finally:
        stop.set()
        runner.join(30)
    assert status == [0]
    assert not {d.serial for d in adb_server.client().list()} & set(serials)


def test_screenshot_command(sim_phone: Any, tmp_path: Path) -> None:
    cp: ConnectedPhone = sim_phone()
    out = tmp_path / "shot.png"
    args = _parser().parse_args(["sim", "screenshot", cp.serial, str(out)])
    assert args.func(args) == 0
    img = Image.open(out)
    assert img.format == "PNG" and img.size == (1080, 2400)
    assert img.getpixel((10, 10)) == cp.phone.colour


def test_screenshot_command_errors(sim_phone: Any, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    cp: ConnectedPhone = sim_phone()
    missing_dir = _parser().parse_args(["sim", "screenshot", cp.serial, str(tmp_path / "no/x.png")])
    assert missing_dir.func(missing_dir) == 1
    assert "no such directory" in capsys.readouterr().err
    unknown = _parser().parse_args(["sim", "screenshot", "127.0.0.1:1", str(tmp_path / "x.png")])
    assert unknown.func(unknown) == 1
    assert "127.0.0.1:1" in capsys.readouterr().err
    cp.phone.faults.refuse_screencap = True
    refused = _parser().parse_args(["sim", "screenshot", cp.serial, str(tmp_path / "r.png")])
    assert refused.func(refused) == 1
    assert not (tmp_path / "r.png").exists()


def test_cli_process_with_real_phones_stops_on_ctrl_c(adb_server: AdbServer) -> None:
    import_sim_phone()
    proc = subprocess.Popen([sys.executable, "-m", "sim.cli", "sim", "--count", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "ANDROID_ADB_SERVER_PORT": str(adb_server.port)})
    try:
        assert proc.stdout is not None
        serials = [proc.stdout.readline().strip() for _ in range(2)]
        if not all(s.startswith("127.0.0.1:") for s in serials):
            proc.kill()
            pytest.fail(f"no serials from `mobagent sim`: {serials}, stderr: {proc.communicate()[1]}")
        assert all(adb_server.state(s) == "device" for s in serials)
        img = adb_server.client().device(serials[0]).screenshot()
        assert img.size == (1080, 2400)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert not {d.serial for d in adb_server.client().list()} & set(serials)


def test_device_profile_and_state_options() -> None:
    args = _parser().parse_args(["sim", "--device-profile", "pixel-14,xiaomi-hyperos", "--pin",
                                 "1234", "--adb-keyboard", "disabled", "--ime-warmup-ms",
                                 "--unauthorized", "--capture-cost", "usb2"])
    assert args.device_profile == ["pixel-14", "xiaomi-hyperos"]
    state, faults = cli.state_from_args(args), cli.faults_from_args(args)
    assert state.locked and state.pin == "1234" and state.adb_keyboard == "disabled"
    assert faults.unauthorized and faults.ime_warmup_s == pytest.approx(0.4)
    cost = cli.latency_from_args(args).cost
    assert cost is not None and cost.hub is not None
    defaults = _parser().parse_args(["sim"])
    assert defaults.device_profile == ["sim"] and cli.latency_from_args(defaults).cost is None
    realistic = _parser().parse_args(["sim", "--profile", "realistic"])
    assert cli.latency_from_args(realistic).cost is not None  # the profile's own model
    off = _parser().parse_args(["sim", "--profile", "realistic", "--capture-cost", "off"])
    assert cli.latency_from_args(off).cost is None  # the flat delays alone
    assert cli.state_from_args(defaults) == DeviceState()
    assert cli.faults_from_args(defaults) == Faults()
    with pytest.raises(SystemExit):
        _parser().parse_args(["sim", "--device-profile", "nokia-3310"])
