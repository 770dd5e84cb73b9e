"""The ``[fleet]`` section (host/fleet.py), as the host commands load it (file, env, --set).

It is the host's, not the runtime's: ``RuntimeConfig`` has no ``[fleet]`` (runtime/ knows
nothing of adb), ``FleetHostConfig`` and ``AgentHostConfig`` add it."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from host.fleet import FleetConfig, FleetHostConfig
from host.runner import AgentHostConfig
from runtime.cli import build_parser, config_from_args
from runtime.config import ConfigError, RuntimeConfig, load_config


def _args(*argv: str) -> argparse.Namespace:
    return build_parser(load_plugins=False).parse_args([*argv, "serve"])


def test_fleet_defaults_are_the_fleet_managers() -> None:
    assert load_config(None, FleetHostConfig, env={}).fleet == FleetConfig()
    assert load_config(None, AgentHostConfig, env={}).fleet == FleetConfig()
    assert "fleet" not in RuntimeConfig.__struct_fields__
    assert FleetConfig().max_queued_per_device == 4 and FleetConfig().serials == []


def test_fleet_from_file_env_and_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[fleet]\nmax_queued_per_device = 2\nserials = ["a"]\n'
                    'offline_poll_s = 2.0\n')
    monkeypatch.setenv("MOBAGENT_FLEET__CANCEL_GRACE_S", "1.5")
    cfg = config_from_args(_args("--config", str(path), "--set", 'fleet.serials=["x", "y"]'),
                           AgentHostConfig)
    assert cfg.fleet.max_queued_per_device == 2 and cfg.fleet.offline_poll_s == 2.0
    assert cfg.fleet.serials == ["x", "y"] and cfg.fleet.cancel_grace_s == 1.5


@pytest.mark.parametrize(("override", "expected"), [
    ("fleet.max_queued_per_device=-1", "fleet.max_queued_per_device: expected int >= 0"),
    ("fleet.lifecycle_events=fleet", "fleet.lifecycle_events: unknown key"),
    ("fleet.adb_port=70000", "fleet.adb_port: expected int <= 65535"),
    ("fleet.serial=x", "fleet.serial: unknown key"),
])
def test_bad_fleet_values_name_the_key(override: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, FleetHostConfig, env={}, overrides=[override])
    assert expected in str(info.value)
