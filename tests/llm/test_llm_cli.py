"""``mobagent llm parse`` through its register function (the entry point is read at install)."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from host.llm_cli import register


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    parser = argparse.ArgumentParser(prog="mobagent")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    rc = int(args.func(args))
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1  # one JSON line, always
    return rc, json.loads(out[0])


def test_uitars_point_in_device_pixels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "reply.txt"
    f.write_text("Thought: tap\nAction: click(start_box='<|box_start|>(546,1204)<|box_end|>')")
    # --image-side 2400: the screen sent at its own size (smart-resized to 1092x2408)
    rc, out = run(["llm", "parse", "--family", "uitars", "--model", "UI-TARS-1.5-7B",
                   "--screen", "1080x2400", "--image-side", "2400", str(f)], capsys)
    assert rc == 0 and out == {"ok": True, "operation": {"op": "tap_point", "args": {"x": 540, "y": 1200}}}


def test_auto_relative_and_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO('do(action="Swipe", start=[500,800], end=[500,200])'))
    rc, out = run(["llm", "parse", "--family", "auto", "--model", "autoglm-phone", "--screen", "720x1600", "-"], capsys)
    assert rc == 0
    assert out["operation"] == {"op": "swipe", "args": {"x1": 360, "y1": 1280, "x2": 360, "y2": 320}}


@pytest.mark.parametrize(
    ("reply", "op"),
    [("Action: Scroll down", "scroll_down"), ("Action: Page up", "scroll_up"), ("Action: Home", "home"),
     ("Action: Enter", "enter"), ("Action: Ask (which?)", "ask"), ("Action: Click icon (gear)", "click_icon"),
     ("Action: Long press (Item)", "long_press"), ("Action: Stop", "stop")],
)
def test_react_vocabulary(reply: str, op: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "r.txt"
    f.write_text(reply)
    rc, out = run(["llm", "parse", "--family", "react", str(f)], capsys)
    assert rc == 0 and out["operation"]["op"] == op  # type: ignore[index]


def test_tool_calls_message_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "m.json"
    f.write_text(json.dumps({"content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "click_text", "arguments": '{"text": "Save"}'}}]}))
    rc, out = run(["llm", "parse", "--family", "tools", str(f)], capsys)
    assert rc == 0 and out["operation"] == {"op": "click_text", "args": {"text": "Save"}}


def test_unusable_reply_is_ok_false(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "r.txt"
    f.write_text("Action: click(start_box='=')")
    rc, out = run(["llm", "parse", "--family", "uitars", str(f)], capsys)
    assert rc == 1 and out["ok"] is False and "start_box" in str(out["error"])


def test_bad_screen_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="mobagent")
    register(parser.add_subparsers(dest="command"))
    with pytest.raises(SystemExit) as err:
        parser.parse_args(["llm", "parse", "--family", "react", "--screen", "big", "-"])
    assert err.value.code == 2 and "WIDTHxHEIGHT" in capsys.readouterr().err


@pytest.mark.parametrize(("model", "reply", "point"), [
    # UI-TARS-1.5: pixels of the server's smart-resize of the 461x1024 image sent (448x1036)
    ("UI-TARS-1.5-7B", "Action: click(start_box='(224,518)')", {"x": 540, "y": 1200}),
    # Qwen2.5-VL: the same rule
    ("qwen2.5-vl-7b-instruct",
     '<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [224, 518]}}</tool_call>',
     {"x": 540, "y": 1200}),
    # UI-TARS-1.0: relative 0-1000, whatever the image size
    ("ui-tars-7b-sft", "Action: click(start_box='(500,500)')", {"x": 540, "y": 1200}),
])
def test_image_side_maps_as_the_agent_does(
    model: str, reply: str, point: dict[str, int], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    f = tmp_path / "r.txt"
    f.write_text(reply)
    rc, out = run(["llm", "parse", "--family", "auto", "--model", model, "--screen", "1080x2400",
                   "--image-side", "1024", str(f)], capsys)
    assert rc == 0 and out["operation"]["args"] == point  # type: ignore[index]


def test_without_image_side_the_config_decides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """The same UI-TARS-1.5 numbers without --image-side: with no config named, the image
    the model saw is the device screen itself; with one, its planner side."""
    f = tmp_path / "r.txt"
    f.write_text("Action: click(start_box='(224,518)')")
    argv = ["llm", "parse", "--family", "uitars", "--model", "UI-TARS-1.5-7B", str(f)]
    # No config named: the screen 1080x2400 as sent, smart-resized by the server to
    # 1092x2408 (not the shipped config's 1024 side, which only the agent's screenshots had).
    monkeypatch.delenv("MOBAGENT_CONFIG", raising=False)
    rc, out = run(argv, capsys)
    assert rc == 0 and out["operation"]["args"] == {"x": 222, "y": 516}  # type: ignore[index]
    # The same as --image 1080x2400
    rc, out = run([*argv[:-1], "--image", "1080x2400", str(f)], capsys)
    assert rc == 0 and out["operation"]["args"] == {"x": 222, "y": 516}  # type: ignore[index]
    # A config named (here the shipped one's values: max_image_side = 1024) decides, as with
    # --image-side 1024.
    shipped = tmp_path / "shipped.toml"
    shipped.write_text("[llm]\nmax_image_side = 1024\n")
    monkeypatch.setenv("MOBAGENT_CONFIG", str(shipped))
    rc, out = run(argv, capsys)
    assert rc == 0 and out["operation"]["args"] == {"x": 540, "y": 1200}  # type: ignore[index]
    # The planner role's own size wins over [llm]'s: 2400 sends the screen at its own size,
    # which the server smart-resizes to 1092x2408: the same numbers are another point.
    cfg = tmp_path / "c.toml"
    cfg.write_text("[llm]\nmax_image_side = 512\n\n[llm.roles.planner]\nmax_image_side = 2400\n")
    monkeypatch.setenv("MOBAGENT_CONFIG", str(cfg))
    rc, out = run(argv, capsys)
    assert rc == 0 and out["operation"]["args"] == {"x": 222, "y": 516}  # type: ignore[index]
    # --image-side still wins over the config
    rc, out = run([*argv[:-1], "--image-side", "1024", str(f)], capsys)
    assert rc == 0 and out["operation"]["args"] == {"x": 540, "y": 1200}  # type: ignore[index]


def test_bad_image_side_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="mobagent")
    register(parser.add_subparsers(dest="command"))
    with pytest.raises(SystemExit) as err:
        parser.parse_args(["llm", "parse", "--family", "uitars", "--image-side", "8", "-"])
    assert err.value.code == 2 and "at least 32" in capsys.readouterr().err


def test_image_is_the_image_the_model_saw(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--image: pixels of that image, mapped to --screen (phone and tablet); the config's
    side plays no part."""
    f = tmp_path / "reply.txt"
    f.write_text("Observation: x\nThought: y\nAction: Tap (270, 600)")
    for screen, point in (("1080x2400", {"x": 540, "y": 1200}), ("1600x2560", {"x": 800, "y": 1280})):
        rc, out = run(["llm", "parse", "--family", "react", "--screen", screen, "--image", "540x1200", str(f)],
                      capsys)
        assert rc == 0 and out["operation"] == {"op": "tap_point", "args": point}
    # a 0-1000 family reads the same numbers whatever the image
    f.write_text("Action：click(point='<point>500 500</point>')")
    rc, out = run(["llm", "parse", "--family", "auto", "--model", "doubao-1-5-ui-tars-250428",
                   "--screen", "1600x2560", "--image", "800x1280", str(f)], capsys)
    assert rc == 0 and out["operation"] == {"op": "tap_point", "args": {"x": 800, "y": 1280}}
