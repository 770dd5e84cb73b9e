"""Config: TOML < env < overrides; errors name the bad key; secrets are findable."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from runtime.config import (
    REDACTED,
    ConfigError,
    RuntimeConfig,
    Section,
    default_config_path,
    is_secret_key,
    load_config,
    redacted,
    secret_values,
)

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.toml"
    p.write_text(text)
    return p


def test_default_toml_matches_the_struct_defaults() -> None:
    path = ROOT / "configs" / "default.toml"
    assert default_config_path({}) == path
    # The runtime's commands skip the agent's sections; the agent's commands read them all.
    assert load_config(path, RuntimeConfig, env={}, unknown_sections="ignore") == RuntimeConfig()
    # (tests/agent/test_config.py checks the agent's sections against AgentConfig.)


def test_precedence_file_env_override(tmp_path: Path) -> None:
    p = write(tmp_path, '[bus]\nurl = "mqtt://file:1883"\nkeepalive_s = 40\n[log]\nlevel = "debug"\n')
    env = {"MOBAGENT_BUS__URL": "mqtt://env:1883", "MOBAGENT_LIMITS__MAX_PAYLOAD_BYTES": "4096",
           "MOBAGENT_BUS__TLS__ENABLED": "yes", "MOBAGENT_CONFIG": "ignored", "OTHER": "x"}
    cfg = load_config(p, RuntimeConfig, env=env, overrides=["bus.url=mqtt://cli:1883"])
    assert cfg.bus.url == "mqtt://cli:1883"
    assert cfg.bus.keepalive_s == 40 and cfg.log.level == "debug"
    assert cfg.limits.max_payload_bytes == 4096 and cfg.bus.tls.enabled is True
    assert load_config(p, RuntimeConfig, env=env).bus.url == "mqtt://env:1883"


def test_string_values_that_look_like_numbers_stay_strings() -> None:
    cfg = load_config(None, RuntimeConfig, env={"MOBAGENT_BUS__PASSWORD": "12345"},
                      overrides={"bus.username": "007"})
    assert cfg.bus.password == "12345" and cfg.bus.username == "007"


@pytest.mark.parametrize(
    ("toml", "env", "overrides", "expected"),
    [
        ('[bus]\nkeepalive_s = "30"\n', {}, [], "bus.keepalive_s: expected int, got str (in "),
        ('[bus]\nport = 1883\n', {}, [], "bus.port: unknown key"),
        ('[buss]\nurl = ""\n', {}, [], "buss: unknown key"),
        ('[bus.tls]\nenabled = 1\n', {}, [], "bus.tls.enabled: expected bool, got int"),
        ("", {"MOBAGENT_BUS__KEEPALIVE_S": "soon"}, [], "bus.keepalive_s: expected int, got str (env MOBAGENT_BUS__KEEPALIVE_S)"),
        ("", {"MOBAGENT_BUS__NOPE": "1"}, [], "bus.nope: unknown key (env MOBAGENT_BUS__NOPE)"),
        ("", {}, ["log.level=loud"], "log.level: invalid enum value 'loud' (override log.level)"),
        ("", {}, ["limits.max_payload_bytes=10"], "limits.max_payload_bytes: expected int >= 1024"),
        ("", {}, ["bus.tls.insecure=maybe"], "bus.tls.insecure: expected bool, got str"),
    ],
)
def test_errors_name_the_key(tmp_path: Path, toml: str, env: dict[str, str],
                             overrides: list[str], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, toml), RuntimeConfig, env=env, overrides=overrides)
    assert str(info.value).startswith(expected), str(info.value)


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("missing", "config file not found"),
        ("bad_toml", "not valid TOML"),
        ("bad_override", "expected section.key=value"),
        ("value_as_section", "bus.url: expected str, got object"),
    ],
)
def test_file_and_override_problems_are_clear(tmp_path: Path, setup: str, expected: str) -> None:
    path: Path | None = None
    overrides: list[str] = []
    if setup == "missing":
        path = tmp_path / "none.toml"
    elif setup == "bad_toml":
        path = write(tmp_path, "[bus\n")
    elif setup == "bad_override":
        overrides = ["bus.url"]
    else:
        overrides = ["bus.url.x=1"]
    with pytest.raises(ConfigError, match=expected):
        load_config(path, RuntimeConfig, env={}, overrides=overrides)


class PerceptionConfig(Section):
    det_side: int = 736


class AppConfig(RuntimeConfig):
    perception: PerceptionConfig = msgspec.field(default_factory=PerceptionConfig)


def test_other_packages_compose_a_bigger_root(tmp_path: Path) -> None:
    p = write(tmp_path, "[perception]\ndet_side = 640\n[bus]\nkeepalive_s = 11\n")
    cfg = load_config(p, AppConfig, env={"MOBAGENT_PERCEPTION__DET_SIDE": "512"})
    assert cfg.perception.det_side == 512 and cfg.bus.keepalive_s == 11
    with pytest.raises(ConfigError, match="perception: unknown key"):
        load_config(p, RuntimeConfig, env={})
    # The runtime's own commands skip other packages' sections, but still check their own.
    assert load_config(p, RuntimeConfig, env={}, unknown_sections="ignore").bus.keepalive_s == 11
    bad = write(tmp_path, "[perception]\nx = 1\n[bus]\nkeepalive = 11\n")
    with pytest.raises(ConfigError, match="bus.keepalive: unknown key"):
        load_config(bad, RuntimeConfig, env={}, unknown_sections="ignore")


def test_secrets_are_found_and_redacted() -> None:
    cfg = load_config(None, RuntimeConfig, env={"MOBAGENT_BUS__PASSWORD": "hunter22"})
    assert secret_values(cfg) == {"hunter22"}
    shown = redacted(cfg)
    assert shown["bus"]["password"] == REDACTED and "hunter22" not in repr(shown)
    assert shown["bus"]["username"] == ""  # an empty secret-looking value stays visible
    assert is_secret_key("api_key") and is_secret_key("access_token") and is_secret_key("APIKEY")
    assert not is_secret_key("max_tokens") and not is_secret_key("prompt_tokens")
