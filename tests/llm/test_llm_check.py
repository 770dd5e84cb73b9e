"""``mobagent llm check`` against real loopback servers: per role, reachable, model, tokens,
the reply, whether it parsed and what it maps to; a dead endpoint named, the key never."""

from __future__ import annotations

import argparse
import io
import json
import socket

import msgspec
import pytest
from PIL import Image

from host.llm_cli import register
from models.llm import LLMSettings
from tests.fixtures.openai_server import Behaviour, OpenAIServer, planner_reply
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


def test_check_probes_the_planner_in_its_family_picked_from_the_model_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``auto`` + a UI-TARS-1.5 name: the UI-TARS prompt, the launcher sent within
    max_image_side (461x1024), and the reply's point read in the smart-resized image the
    server makes of it (448x1036), so it lands where the agent would tap."""
    with OpenAIServer() as srv:
        srv.script("Thought: open it\nAction: click(start_box='<|box_start|>(224,518)<|box_end|>')")
        rc = _run("--set", f"llm.base_url={srv.base_url}", "--set", f"llm.api_key={SECRET}",
                  "--set", "llm.models.planner=UI-TARS-1.5-7B",
                  "--set", "llm.family.planner=auto", "--set", "llm.max_image_side=1024",
                  "llm", "check", "--roles", "planner", "--json")
        out = capsys.readouterr().out
        (row,) = map(json.loads, out.splitlines())
        assert rc == 0, out
        assert row["family"] == "uitars 1.5 (auto, from the model name)" and row["parsed"]
        assert row["mapped"] == "Tap (540, 1200)"
        (req,) = srv.requests
        assert [i.size for i in req.images()] == [(461, 1024)]
        assert any("click(start_box=" in t for t in req.texts())  # UI-TARS's action space


def test_check_sends_the_tools_familys_options_and_reads_a_tool_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with OpenAIServer() as srv:
        srv.script(Behaviour.tool_call("open_app", '{"name": "Settings"}'))
        rc = _run("--set", f"llm.base_url={srv.base_url}", "--set", f"llm.api_key={SECRET}",
                  "--set", "llm.family.planner=tools", "llm", "check", "--roles", "planner")
        out = capsys.readouterr().out
        assert rc == 0, out
        assert "family=tools" in out and "parsed: yes -> Open app (Settings)" in out
        assert 'open_app({"name": "Settings"})' in out  # the call is shown as the reply
        body = srv.requests[0].body
        assert body is not None and body["tool_choice"] == "required"
        assert {t["function"]["name"] for t in body["tools"]} >= {"open_app", "tap_point"}


def test_check_says_react_by_default_and_refuses_an_unknown_family(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with OpenAIServer() as srv:
        srv.script(planner_reply("Open app (Settings)"))
        base = ("--set", f"llm.base_url={srv.base_url}", "--set", f"llm.api_key={SECRET}")
        srv.script("Complete: no\nReason: the launcher.")
        assert _run(*base, "--set", "llm.family.reflector=uitars", "llm", "check",
                    "--roles", "planner,reflector") == 0
        planner, reflector = capsys.readouterr().out.split("\nreflector")
        assert "family=react" in planner
        # UI-TARS has no structured form for a verdict: the plain prompt, the plain parser
        assert "family=uitars" in reflector and "parsed: yes -> complete: no" in reflector
        assert "tools" not in (srv.requests[1].body or {})
        assert _run(*base, "--set", "llm.family.planner=klingon", "llm", "check") == 2
        err = capsys.readouterr().err
        assert "llm.family" in err and "klingon" in err and "uitars" in err
        assert len(srv.requests) == 2  # nothing sent for the bad config


def test_check_asks_the_chooser_and_reflector_in_their_families(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with OpenAIServer() as srv:
        srv.script(Behaviour.tool_call("choose_box", '{"box": "2"}'),
                   '{"complete": false, "reason": "the launcher is still shown"}')
        rc = _run("--set", f"llm.base_url={srv.base_url}", "--set", f"llm.api_key={SECRET}",
                  "--set", "llm.family.chooser=tools", "--set", "llm.family.reflector=json",
                  "llm", "check", "--roles", "chooser,reflector")
        out = capsys.readouterr().out
        assert rc == 0, out
        chooser, reflector = out.split("\nreflector")
        assert "family=tools" in chooser and "parsed: yes -> box 2 (Settings)" in chooser
        assert "family=json" in reflector
        assert "parsed: yes -> complete: no (the launcher is still shown)" in reflector
        choose, check = (r.body or {} for r in srv.requests)
        (tool,) = choose["tools"]
        assert tool["function"]["name"] == "choose_box" and choose["tool_choice"] == "required"
        assert tool["function"]["parameters"]["properties"]["box"]["enum"] == ["1", "2", "none"]
        schema = check["response_format"]["json_schema"]["schema"]
        assert check["response_format"]["type"] == "json_schema"
        assert set(schema["required"]) == {"complete", "reason"}


def test_check_probes_the_grounder_when_perception_asks_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A configured grounder (``perception.icon_grounding = "hybrid"``) is probed by
    default, on its own server, in its family's grounding prompt; its point is read in the
    family's convention (Qwen3-VL: 0..1000) and named by the launcher icon it falls in."""
    from host.llm_check import launcher_screen

    png, icons = launcher_screen()
    (x0, y0, x1, y1), = [b for name, b in icons if name.lower() == "settings"]
    with Image.open(io.BytesIO(png)) as im:
        w, h = im.size
    rel = [round((x0 + x1) / 2 * 1000 / w), round((y0 + y1) / 2 * 1000 / h)]
    with OpenAIServer() as hosted, OpenAIServer() as gpu:
        hosted.script(planner_reply("Open app (Settings)"), "Box: 2", "Complete: no\nReason: x.")
        gpu.script(f'[{{"point_2d": {rel}, "label": "Settings"}}]')
        base = ("--set", f"llm.base_url={hosted.base_url}", "--set", f"llm.api_key={SECRET}",
                "--set", f"llm.roles.grounder.base_url={gpu.base_url}",
                "--set", "llm.roles.grounder.model=Qwen3-VL-8B-Instruct")
        rc = _run(*base, "--set", "perception.icon_grounding=hybrid", "llm", "check", "--json")
        out = capsys.readouterr().out
        rows = {r["role"]: r for r in map(json.loads, out.splitlines())}
        assert rc == 0, out
        assert list(rows) == ["planner", "chooser", "reflector", "grounder"]
        g = rows["grounder"]
        assert g["model"] == "Qwen3-VL-8B-Instruct" and g["endpoint"] == f"127.0.0.1:{gpu.port}"
        assert g["parsed"] and g["mapped"].endswith("on the Settings icon"), g
        assert g["family"].startswith("qwen") and g["prompt_tokens"] > 0
        (req,) = gpu.requests
        assert req.images() and any("point_2d" in t and "Settings" in t for t in req.texts())
        # an unusable answer is reported as unparsed
        gpu.script("I cannot help with that.")
        assert _run(*base, "llm", "check", "--roles", "grounder") == 1
        assert "parsed: NO" in capsys.readouterr().out
    assert SECRET not in out


def test_check_leaves_an_unconfigured_grounder_out() -> None:
    from actors.config import AgentConfig
    from host.llm_check import ALL_ROLES, ROLES, default_roles

    assert default_roles(AgentConfig()) == ROLES
    cfg = AgentConfig(llm=msgspec.convert({"models": {"grounder": "UI-TARS-1.5-7B"}}, LLMSettings))
    assert default_roles(cfg) == ALL_ROLES
