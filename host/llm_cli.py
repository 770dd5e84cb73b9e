"""``mobagent llm``: commands for a user whose model misbehaves.

- ``llm parse``: parse one saved reply with a family's parser and print what it maps to;
- ``llm check`` (host/llm_check.py): each configured role, one real call.

``llm parse`` prints one JSON line, the stable surface of parsing:
``{"ok": true, "operation": {"op": ..., "args": {...}}}`` or ``{"ok": false, "error": ...}``
with ``op`` from ``models.llm.opvocab.OP_NAMES`` and points in device pixels of ``--screen``.
``--image-side`` is the planner's ``llm.max_image_side`` when the reply came from the agent:
the agent sends the screen fitted within it, and a family's pixel coordinates (UI-TARS-1.5,
Qwen2.5-VL, json, tools) refer to that image (or to the server's resize of it). Without it,
a config named with ``--config`` / ``--set`` / ``$MOBAGENT_CONFIG`` decides, its planner
role's side (``[llm.roles.planner] max_image_side``, else ``[llm] max_image_side``), as for
the agent and ``llm check``; with no config named, the image the model saw is the device
screen itself (``--screen``, as a reply from a tool that sends the screenshot as captured).
``--image WxH`` names the image the model saw outright
(a reply saved from another tool, whose screenshot was not the screen fitted within a side):
the family's convention is applied to that image, and its points mapped to ``--screen``.
A reply that is not usable exits 1; bad arguments exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys

import msgspec

from actors.config import AgentConfig
from host.llm_check import add_check
from models.llm.errors import ParseError
from models.llm.families import FAMILY_NAMES, ToolCall, get_family
from models.llm.opvocab import describe
from runtime.cli import config_from_args


def _screen(value: str) -> tuple[int, int]:
    w, sep, h = value.lower().partition("x")
    try:
        size = (int(w), int(h)) if sep else None
    except ValueError:
        size = None
    if size is None or min(size) <= 0:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT in pixels, e.g. 1080x2400, got {value!r}")
    return size


def _image_side(value: str) -> int:
    try:
        side = int(value)
    except ValueError:
        side = 0
    if side < 32:
        raise argparse.ArgumentTypeError(f"expected a side in pixels, at least 32, got {value!r}")
    return side


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as f:
        return f.read()


def _tool_calls(text: str) -> tuple[str, tuple[ToolCall, ...]]:
    """A saved reply may be the text, or the API's message object ``{"content": ...,
    "tool_calls": [{"function": {"name", "arguments"}}]}`` (what a ``tools`` reply is)."""
    stripped = text.strip()
    if not stripped.startswith("{") or '"tool_calls"' not in stripped:
        return text, ()
    try:
        msg = msgspec.json.decode(stripped)
    except msgspec.DecodeError:
        return text, ()
    if not isinstance(msg, dict) or not isinstance(msg.get("tool_calls"), list):
        return text, ()
    calls = []
    for c in msg["tool_calls"]:
        fn = c.get("function", c) if isinstance(c, dict) else {}
        args = fn.get("arguments", "")
        calls.append(ToolCall(str(fn.get("name", "")),
                              args if isinstance(args, str) else msgspec.json.encode(args).decode()))
    content = msg.get("content")
    return (content if isinstance(content, str) else ""), tuple(calls)


def _config_given(args: argparse.Namespace) -> bool:
    """A config was named: ``--config``, ``--set`` or ``$MOBAGENT_CONFIG``."""
    return bool(getattr(args, "config", None) or getattr(args, "set", None)
                or os.environ.get("MOBAGENT_CONFIG"))


def cmd_parse(args: argparse.Namespace) -> int:
    side = args.image_side
    if side is None and args.image is None and _config_given(args):
        # the planner's image size, as the agent with that config had it
        cfg = config_from_args(args, AgentConfig, unknown_sections="ignore")
        side = cfg.llm.role("planner").max_image_side
    # else, with no config named: the image the model saw is the device screen itself
    try:
        family = get_family(args.family, args.model or "", max_image_side=side, image=args.image)
    except ValueError as exc:
        print(f"mobagent llm parse: {exc}", file=sys.stderr)
        return 2
    try:
        raw = _read(args.file)
    except OSError as exc:
        print(f"mobagent llm parse: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    text, calls = _tool_calls(raw)
    w, h = args.screen
    try:
        reply = family.parse(text, family.geometry(w, h), calls)
    except ParseError as exc:
        print(msgspec.json.encode({"ok": False, "error": exc.message}).decode())
        return 1
    print(msgspec.json.encode({"ok": True, "operation": describe(reply.operation)}).decode())
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "llm", help="inspect how a model's replies are read",
        description="Commands for when a model misbehaves.",
    )
    sub = p.add_subparsers(dest="llm_command", metavar="COMMAND", required=True)

    parse = sub.add_parser(
        "parse", help="parse one saved reply and print the operation it maps to",
        description="Parse one saved model reply with a family's parser; print one JSON line "
                    '{"ok": true, "operation": {"op": ..., "args": {...}}} or '
                    '{"ok": false, "error": ...}. Points are device pixels of --screen.',
    )
    parse.add_argument("--family", required=True, choices=[*FAMILY_NAMES, "auto"],
                       help="the reply's format (auto: from --model)")
    parse.add_argument("--model", default="", metavar="NAME",
                       help="the model's name: picks the family's variant and coordinate "
                            "convention, as auto does")
    parse.add_argument("--screen", type=_screen, default=(1080, 2400), metavar="WxH",
                       help="the device screen in pixels (default 1080x2400)")
    parse.add_argument("--image-side", type=_image_side, default=None, metavar="PX",
                       help="the longer side of the screenshot the model got, as the agent "
                            "sends it; default: with a config named (--config, --set, "
                            "$MOBAGENT_CONFIG), its planner llm.max_image_side ([llm.roles."
                            "planner], else [llm]); with none, the screen at its own size. "
                            "A side at least the screen's: the screen at its own size")
    parse.add_argument("--image", type=_screen, default=None, metavar="WxH",
                       help="the image the model saw, in pixels, when it is not the screen "
                            "fitted within --image-side (a reply saved from another tool); "
                            "its coordinates are read against it and mapped to --screen")
    parse.add_argument("file", nargs="?", default="-", metavar="FILE",
                       help="the saved reply (text, or the API message JSON with tool_calls); "
                            "- or none: stdin")
    parse.set_defaults(func=cmd_parse)

    add_check(sub)
