"""The agent's config: defaults, the documented block in configs/default.toml, bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.config import AgentConfig, load_agent_config
from runtime.config import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_default_toml_loads_as_agent_config() -> None:
    cfg = load_agent_config(ROOT / "configs" / "default.toml", env={})
    assert cfg.agent == AgentConfig().agent
    assert cfg.llm.models.planner == "gpt-4o"


def test_the_default_toml_is_the_agent_defaults() -> None:
    cfg = load_agent_config(ROOT / "configs" / "default.toml", env={})
    assert cfg == AgentConfig()


def test_bad_values_name_the_key(tmp_path: Path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text("[agent]\nmax_steps = 0\n")
    with pytest.raises(ConfigError, match="agent.max_steps"):
        load_agent_config(p, env={})
    with pytest.raises(ConfigError, match="agent.nonsense"):
        load_agent_config(None, overrides=["agent.nonsense=1"], env={})
    cfg = load_agent_config(None, overrides=["agent.approval=yes", "device.capture=png"], env={})
    assert cfg.agent.approval is True and cfg.device.capture == "png"
    # perception's nested settings reject misspelt keys too (det_size for det_side)
    with pytest.raises(ConfigError, match="det_size"):
        load_agent_config(None, overrides=["perception.ocr.det_size=640"], env={})
    cfg = load_agent_config(None, overrides=["perception.ocr.det_side=640"], env={})
    assert cfg.perception.ocr.det_side == 640
