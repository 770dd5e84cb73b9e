"""``mobagent llm check`` against real loopback servers: per role, reachable, model, tokens,
the reply, whether it parsed and what it maps to; a dead endpoint named, the key never."""

from __future__ import annotations

import argparse
import json
import socket

import pytest

from host.llm_cli import register
from tests.fixtures.openai_server import OpenAIServer, planner_reply
from tests.llm.conftest import SECRET


def _run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--config")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return int(args.func(args))


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_check_reports_each_role_on_its_own_server(capsys: pytest.CaptureFixture[str]) -> None:
    with OpenAIServer() as hosted, OpenAIServer() as local:
        hosted.script(planner_reply("Open app (Settings)"), "Complete: no\nReason: launcher.")
        local.script("Box: 2")
        rc = _run("--set", f"llm.base_url={hosted.base_url}", "--set", f"llm.api_key={SECRET}",
                  "--set", f"llm.roles.chooser.base_url={local.base_url}",
                  "--set", "llm.roles.chooser.model=qwen-local",
                  "--set", "llm.models.planner=plan-m", "llm", "check", "--json")
        out = capsys.readouterr().out
        rows = {r["role"]: r for r in map(json.loads, out.splitlines())}
        assert rc == 0, out
        assert rows["planner"]["mapped"] == "Open app (Settings)" and rows["planner"]["parsed"]
        assert rows["planner"]["model"] == "plan-m" and rows["planner"]["prompt_tokens"] > 0
        assert rows["chooser"]["mapped"] == "box 2 (Settings)"
        assert rows["chooser"]["endpoint"] == f"127.0.0.1:{local.port}"
        assert rows["reflector"]["mapped"].startswith("complete: no")
        assert [r.model for r in hosted.requests] == ["plan-m", "gpt-4o"]
        assert [r.model for r in local.requests] == ["qwen-local"]
        # every role got the launcher's screenshot; the chooser its boxes drawn on it
        assert all(r.images() for r in hosted.requests + local.requests)
        assert "Settings" in " ".join(local.requests[0].texts())
        assert SECRET not in out


def test_check_names_an_unreachable_endpoint_and_an_unparsed_reply(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = _dead_port()
    with OpenAIServer() as srv:
        srv.script("I would open Settings, I suppose.")
        rc = _run("--set", f"llm.base_url={srv.base_url}", "--set", f"llm.api_key={SECRET}",
                  "--set", f"llm.roles.reflector.base_url=http://127.0.0.1:{port}/v1",
                  "llm", "check", "--roles", "planner,reflector", "--budget-s", "0.5")
    out = capsys.readouterr().out
    assert rc == 1
    planner, reflector = out.split("\nreflector")
    assert "planner   reachable" in planner and "parsed: NO" in planner
    assert "I would open Settings" in planner
    assert "UNREACHABLE" in reflector and f"127.0.0.1:{port}" in reflector
    assert "connection error" in reflector and SECRET not in out


def test_check_refuses_unknown_roles(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("--set", "llm.base_url=http://127.0.0.1:9/v1", "llm", "check",
                "--roles", "planner,critic") == 2
    assert "critic" in capsys.readouterr().err
