"""Model families on Mobile-Eval-sim: each family's prompt, request options, parser and
coordinate convention through the real agent, with a stand-in model on the loopback server.

    mobagent bench model_families --families react,tools,json,uitars,qwen,autoglm \\
        --noise 0.1 --seeds 0-2 --devices 4 --out DIR [--tasks settings-1,Notes] [--tiers 1]
        [--oracle] [--llm-timeout-s 5] [--set SECTION.KEY=VALUE]

THE MODEL IS A BENCHMARK-ONLY STAND-IN (``StandInModel``), not a model: it knows each
task's reference solution (``host/oracle.py``'s ``OraclePolicy`` decides what to do, and is
the perfect chooser) and, for the coordinate families (uitars, qwen, autoglm), reads the
target's box from the simulated phone's ground truth (``sim.eval.ground_truth.resolve``).
It answers over HTTP on the loopback OpenAI-compatible server (``bench/openai_loopback.py``)
in the family's own format and coordinate space, computed from the image the server
received the way that model works (UI-TARS-1.5 and Qwen2.5-VL: pixels of the image their
server smart-resizes; UI-TARS 1.0, Qwen3-VL and AutoGLM: 0-1000 relative; react, tools
and json name their target by text). The newer families (``NEW_STANDINS``: agentcpm, glm,
cogagent, venus, venus-1.0, gelab, holo, holo-1.5, holo-1, claude, gemini, gui-owl,
gui-owl-1.5, mai-ui, uitars-doubao) answer in theirs too: 0-1000 or 0-999 grids, boxes
(GLM, CogAgent), pixels of the smart-resize (UI-Venus-Navi, Holo 1/1.5, GUI-Owl 1.0),
pixels of the screenshot as sent (Claude), tool calls (Claude, Gemini), tab-separated
fields (GELab); a family without an Enter (AutoGLM, GELab) taps the keyboard's action key,
one without an open-app action (AgentCPM-GUI) goes home, opens the app drawer and taps
the icon. The Holo models localize (one tap a reply) and cannot finish a task as planner.
``--families all`` runs every one. Everything else is the product: the agent's planner
actor with ``llm.family.planner`` set to the family, the real client (retries, rate
limits), the family's parser and mapping, perception (OCR, icons, snapping a model's
point), the actuator over adb, the reflector and the recorder.

``--noise p``: a share p of the stand-in's answers go wrong as real ones do, one of
- malformed in the family's typical ways (truncated calls, ``start_box='='``, text with no
  tool call, broken JSON, one word repeated): the product must re-ask, never execute;
- a point off by up to 1.5x the target's half-size (coordinate answers only): perception
  keeps it, snaps it, or uses it as given;
- a timeout (no answer within ``llm.timeout_s``), a burst of 1-4 429s with ``Retry-After``
  in seconds or as an HTTP date, a 500: the client must retry within ``llm.retry_budget_s``.
Draws are per episode (seeded by family, task and seed), so a rerun answers alike.

Scores, per family: SU (the task's own check on the phone), ``parse_failures`` (unusable
replies the product re-asked or dropped, read from the recorded events: LLM calls minus
decisions, per role), ``malformed_sent`` (what the stand-in meant as such), ``retries``
(transient failures the server sent), ``episodes_failed_by_transient_errors`` (episodes that
ended failed with an LLM transport error), ``snapped`` (Grounded events with source
``snapped``), and ``image_tokens_per_task``: GPT-4o's tiling rule (high detail: fit in
2048x2048, shortest side at most 768, 170 per 512-px tile + 85; low: 85) over the images
of every answered request, next to Mobile-Agent v1's scheme for the same calls (the current
screen at full size plus every earlier screenshot of the episode at half size, in every
call). ``--oracle`` runs the oracle planner on the same tasks and seeds first, for SU.

``--grounding ocr,hybrid`` runs each family once per mode on the same tasks and seeds:
``hybrid`` sets ``perception.text_grounding`` and ``icon_grounding`` to ``hybrid`` and
points ``llm.roles.grounder`` at a second loopback server, where ``StandInGrounder`` (also
BENCHMARK-ONLY) answers in ``--grounder-family``'s format (qwen3 by default; or a grounding
model's, served under its own name so that ``auto`` picks the ``grounding`` family's variant:
seeclick, os-atlas, showui, uground, aria-ui, jedi, gta1, gui-actor, venus-ground) from the
simulated phone's ground-truth box of the target, with an ASSUMED spread and miss rate
(``GROUNDER_*`` below: 5 % of answers elsewhere on the screen, 3 % NONE, the rest around the
centre with a standard deviation of 0.4 x half the box's side). Its rows are named
``<family>+hybrid``; ``grndr`` counts targets the grounder placed.

The benchmark sets ``llm.requests_per_minute`` high (the loopback has no quota) and
``llm.timeout_s`` to ``--llm-timeout-s`` (default 5 s, so a timeout costs seconds, not a
minute). Output: per family DIR/<family>/ (results.json, episodes), a table, and last one
JSON line ``{"families": {name: {...}}, "oracle_SU": ..., ...}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import email.utils
import json
import math
import os
import random
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio  # noqa: E402
import msgspec  # noqa: E402

from actors.config import AgentConfig  # noqa: E402
from actors.planner import (  # noqa: E402
    Choice,
    Completion,
    Decision,
    LLMPolicy,
    Policy,
    RoleSetup,
    StepContext,
)
from bench.mobile_eval import parse_ints  # noqa: E402
from bench.openai_loopback import (  # noqa: E402
    Behaviour,
    OpenAIServer,
    RecordedRequest,
    completion_reply,
    task_state,
)
from host.eval import SuiteResult, oracle_policy, run_suite  # noqa: E402
from host.oracle import OraclePolicy  # noqa: E402
from host.runner import load_host_config  # noqa: E402
from protocol.operations import (  # noqa: E402
    Back,
    ClickIcon,
    ClickText,
    Enter,
    Exit,
    OpenApp,
    Operation,
    PageDown,
    PageUp,
    Stop,
    TypeText,
    Wait,
    format_operation,
)
from runtime.config import ConfigError, default_config_path  # noqa: E402
from runtime.log import configure_logging  # noqa: E402
from sim.eval.ground_truth import resolve  # noqa: E402
from sim.eval.task import Task  # noqa: E402
from sim.eval.tasks import TASKS  # noqa: E402
from sim.phone import SimPhone  # noqa: E402
from sim.phone.canvas import Element  # noqa: E402

FAMILIES = ("react", "tools", "json", "uitars", "qwen", "autoglm")
# The model each family's stand-in poses as: the name picks the family's variant (auto).
MODELS = {
    "react": "gpt-4o", "tools": "gpt-4o", "json": "gpt-4o",
    "uitars": "ui-tars-1.5-7b", "uitars-1.0": "ui-tars-7b-sft",
    "qwen": "qwen2.5-vl-7b-instruct", "qwen3": "qwen3-vl-8b-instruct",
    "autoglm": "autoglm-phone-9b",
}
COORDINATE: tuple[str, ...] = ("uitars", "uitars-1.0", "qwen", "qwen3", "autoglm")
# Families whose action space has no Enter key: to submit what was typed, a model of
# theirs taps the keyboard's action key (Open-AutoGLM's handler has Tap, Type, Swipe, Back,
# Home... and no key event; its Type restores the user's keyboard after typing with the
# ADB Keyboard, so that keyboard, with its search/return key, is on the screen after it).
NO_ENTER: tuple[str, ...] = ("autoglm",)
TRANSIENT_REASON = re.compile(r"LLM(Unavailable|Timeout)|retry budget|gave up after")


# ---- the coordinate spaces, as each model works (independent of the product's code) ---------


def smart_resize(h: int, w: int, factor: int, min_px: int, max_px: int) -> tuple[int, int]:
    """qwen-vl-utils' rule (what a Qwen2-VL-style server does to an image it receives)."""
    hh, ww = max(factor, round(h / factor) * factor), max(factor, round(w / factor) * factor)
    if hh * ww > max_px:
        beta = math.sqrt(h * w / max_px)
        hh = max(factor, math.floor(h / beta / factor) * factor)
        ww = max(factor, math.floor(w / beta / factor) * factor)
    elif hh * ww < min_px:
        beta = math.sqrt(min_px / (h * w))
        hh, ww = math.ceil(h * beta / factor) * factor, math.ceil(w * beta / factor) * factor
    return hh, ww


def model_space(family: str, received: tuple[int, int]) -> tuple[float, float]:
    """The numbers that mean the far right and bottom edge, for a model of ``family`` that
    received an image of ``received`` (w, h)."""
    newer = new_model_space(family, received)
    if newer is not None:
        return newer
    w, h = received
    if family == "uitars":  # UI-TARS-1.5: pixels of the smart-resized image
        hh, ww = smart_resize(h, w, 28, 100 * 28 * 28, 16384 * 28 * 28)
        return ww, hh
    if family == "qwen":  # Qwen2.5-VL: the same, its own bounds
        hh, ww = smart_resize(h, w, 28, 3136, 12845056)
        return ww, hh
    if family in ("uitars-1.0", "qwen3", "autoglm"):
        return 1000.0, 1000.0
    return float(w), float(h)


def gpt4o_image_tokens(size: tuple[int, int], detail: str | None = None) -> int:
    """OpenAI's published rule for GPT-4o image input tokens."""
    if detail == "low":
        return 85
    w, h = float(size[0]), float(size[1])
    if max(w, h) > 2048:
        f = 2048 / max(w, h)
        w, h = w * f, h * f
    if min(w, h) > 768:
        f = 768 / min(w, h)
        w, h = w * f, h * f
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


# ---- what the stand-in is asked, per episode --------------------------------------------------


@dataclass
class Intent:
    """The answer the stand-in is to give to the episode's next request."""

    kind: Literal["plan", "choose", "complete"]
    op: Operation | None = None  # plan: what the reference says to do
    box: tuple[int, int, int, int] | None = None  # plan: its target, device pixels
    choice: int | None = None  # choose: the right box, None for "none"
    complete: bool = False  # complete: what the task's own check says on the phone
    reason: str = ""  # complete: why not (the first milestone not reached)
    earlier_screens: int = 0  # screenshots the episode had before this one (v1's scheme)
    field: tuple[int, int, int, int] | None = None  # plan, typing: the focused field's box
    nav: str = ""  # plan, OpenApp without an open action: "tap", "drawer" or "home"


@dataclass
class Board:
    """One episode as the stand-in sees it."""

    family: str
    phone_key: str  # one board per phone: its episode now
    instruction: str  # as the prompts show it (one line)
    screen: tuple[int, int]
    rng: random.Random
    intent: Intent | None = None
    burst_left: int = 0
    retry_after: str = "1"
    stats: Counter[str] = field(default_factory=Counter)


def one_line(text: str) -> str:
    return " ".join(text.split())


class StandInModel:
    """BENCHMARK-ONLY STAND-IN for a model of ``family``: answers each request with what
    the episode's ``Intent`` says, in the family's format (see the module docstring)."""

    def __init__(self, family: str, *, noise: float, timeout_s: float, seed: int = 0) -> None:
        self.family = family
        self.noise = noise
        self.timeout_s = timeout_s
        self.seed = seed
        self._boards: dict[str, Board] = {}  # by phone
        self._lock = threading.Lock()
        self.stats: Counter[str] = Counter()

    def register(self, task: Task, phone: SimPhone, key: str) -> Board:
        rng = random.Random(f"{self.family}/{task.task_id()}/{task.seed}/{self.seed}")
        board = Board(self.family, key, one_line(task.instruction),
                      (phone.info.width, phone.info.height), rng)
        with self._lock:
            old = self._boards.pop(key, None)
            if old is not None:
                self.stats.update(old.stats)
            if any(b.instruction == board.instruction for b in self._boards.values()):
                raise RuntimeError(f"two episodes at once with the instruction {task.instruction!r}")
            self._boards[key] = board
        return board

    def release(self, key: str) -> None:
        """The episode on phone ``key`` is over: its board goes (a later seed's fleet
        brings the same instructions back, on other phones)."""
        with self._lock:
            old = self._boards.pop(key, None)
            if old is not None:
                self.stats.update(old.stats)

    def boards(self) -> list[Board]:
        with self._lock:
            return list(self._boards.values())

    def close(self) -> None:
        with self._lock:
            for b in self._boards.values():
                self.stats.update(b.stats)
            self._boards.clear()

    def _board_for(self, req: RecordedRequest) -> Board | None:
        text = one_line("\n".join(req.texts()))
        with self._lock:
            found = [b for b in self._boards.values() if b.instruction in text]
        return max(found, key=lambda b: len(b.instruction)) if found else None

    # -- the server's policy (runs on the server's threads)
    def answer(self, req: RecordedRequest) -> Behaviour:
        board = self._board_for(req)
        if board is None or board.intent is None:
            return Behaviour.error(400, "stand-in: no episode is waiting for this request")
        st, rng, intent = board.stats, board.rng, board.intent
        if board.burst_left > 0:
            board.burst_left -= 1
            st["retries"] += 1
            return Behaviour.error(429, "Rate limit reached (stand-in burst)",
                                   headers={"Retry-After": board.retry_after})
        wrong = None
        if rng.random() < self.noise:
            kinds = ["malformed", "timeout", "429", "500"]
            if self._points(intent):
                kinds.append("point")
            wrong = rng.choice(kinds)
        if wrong == "timeout":
            st["retries"] += 1
            return Behaviour.reply("(too late)", delay_s=self.timeout_s + 1.5)
        if wrong == "500":
            st["retries"] += 1
            return Behaviour.error(500, "The server had an error (stand-in)")
        if wrong == "429":
            st["retries"] += 1
            board.burst_left = rng.randint(0, 3)
            wait = rng.choice([1, 2])
            board.retry_after = (str(wait) if rng.random() < 0.5
                                 else email.utils.formatdate(time.time() + wait, usegmt=True))
            return Behaviour.error(429, "Rate limit reached (stand-in)",
                                   headers={"Retry-After": board.retry_after})
        self._count_images(board, req, intent)
        if wrong == "malformed":
            st["malformed_sent"] += 1
            return self._malformed(board, intent)
        if wrong == "point":
            st["points_off"] += 1
        return self._reply(board, req, intent, off=wrong == "point")

    def _points(self, intent: Intent) -> bool:
        """The answer is a point that the noise may put off target: a tap on what the
        reference names. A tap on the keyboard's action key (AutoGLM's Enter, below) is
        not: the other families press Enter without a point, so it stays like for like."""
        return (intent.kind == "plan" and self.family in COORDINATE
                and isinstance(intent.op, ClickText | ClickIcon) and intent.box is not None)

    def _count_images(self, board: Board, req: RecordedRequest, intent: Intent) -> None:
        images = req.images()
        board.stats["calls"] += 1
        board.stats["image_tokens"] += sum(gpt4o_image_tokens(im.size, im.detail) for im in images)
        # Mobile-Agent v1: the current screen as captured, every earlier one at half size.
        w, h = board.screen
        board.stats["v1_image_tokens"] += (gpt4o_image_tokens((w, h))
                                           + intent.earlier_screens
                                           * gpt4o_image_tokens((w // 2, h // 2)))

    # -- answers
    def _reply(self, board: Board, req: RecordedRequest, intent: Intent, *, off: bool) -> Behaviour:
        rng = board.rng
        if intent.kind in ("choose", "complete"):
            return self._answer(req, intent)
        op = intent.op or Stop()
        point = None
        if self._points(intent):
            point = self._point(board, req, intent, off=off)
        elif isinstance(op, Enter) and self.family in NO_ENTER and intent.box is not None:
            point = self._point(board, req, intent, off=False)  # the keyboard's action key
        elif isinstance(op, OpenApp) and intent.nav == "tap" and intent.box is not None:
            point = self._point(board, req, intent, off=False)  # the app's icon
        fam = self.family
        if fam in NEW_STANDINS:
            return new_family_reply(fam, op, self._aim(board, req, intent, point), rng)
        if fam == "react":
            action = format_operation(op)
            lead = rng.choice(["", "<think>The screen shows what I need.</think>\n"])
            label = rng.choice(["Action:", "**Action:**"])
            return Behaviour.reply(f"{lead}Observation: the screen.\nThought: the next step "
                                   f"of the instruction.\n{label} {action}")
        if fam == "tools":
            name, args = _vocabulary(op)
            offered = {t.get("function", {}).get("name") for t in (req.body or {}).get("tools", [])}
            if name not in offered:  # a model can only call what it was offered
                return Behaviour.reply(f"I would {name}, but there is no such function.")
            return Behaviour(text=rng.choice([None, "This is the next step."]),
                             tool_calls=((name, json.dumps(args)),))
        if fam == "json":
            if "response_format" not in (req.body or {}):
                return Behaviour.reply("(no schema was given)")
            name, args = _vocabulary(op)
            return Behaviour.reply(json.dumps({"thought": "the next step", "op": name, "args": args}))
        space = model_space(fam, _received(req))
        if fam in ("uitars", "uitars-1.0"):
            return Behaviour.reply("Thought: the next step of the task.\nAction: "
                                   + _uitars_call(op, point, space, rng))
        if fam in ("qwen", "qwen3"):
            call = json.dumps({"name": "mobile_use", "arguments": _qwen_args(op, point, space)})
            lead = rng.choice(["", "I will do the next step.\n"])
            return Behaviour.reply(f"{lead}<tool_call>\n{call}\n</tool_call>")
        if fam == "autoglm":
            close = rng.choice(["</answer>", ""])  # often never closed
            return Behaviour.reply(f"<think>The next step of the task.</think><answer>"
                                   f"{_autoglm_call(op, point, space)}{close}")
        raise ValueError(f"no stand-in for family {fam!r}")

    def _answer(self, req: RecordedRequest, intent: Intent) -> Behaviour:
        """The chooser's or the completion check's answer, in the form the request asks
        for (the role's family: a ``tools`` function, a ``json`` schema, else the text)."""
        body = req.body or {}
        box = "none" if intent.choice is None else str(intent.choice)
        args: dict[str, Any]
        if intent.kind == "choose":
            name, args, text = "choose_box", {"box": box}, f"Box: {box}"
        else:
            name = "check_completion"
            args = {"complete": intent.complete, "reason": intent.reason}
            text = completion_reply(intent.complete, intent.reason)
        offered = {t.get("function", {}).get("name") for t in body.get("tools", [])}
        if name in offered:
            return Behaviour(text=None, tool_calls=((name, json.dumps(args)),))
        if "response_format" in body:
            return Behaviour.reply(json.dumps(args))
        return Behaviour.reply(text)

    def _point(self, board: Board, req: RecordedRequest, intent: Intent, *, off: bool
               ) -> tuple[float, float]:
        """The target's centre in the model's space, off by up to 1.5x its half-size when
        ``off``; never outside the image (a model answers inside what it sees)."""
        assert intent.box is not None
        x0, y0, x1, y1 = intent.box
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        if off:
            rng = board.rng
            cx += rng.choice([-1, 1]) * rng.uniform(0.5, 1.5) * (x1 - x0) / 2
            cy += rng.choice([-1, 1]) * rng.uniform(0.5, 1.5) * (y1 - y0) / 2
        sw, sh = board.screen
        mw, mh = model_space(self.family, _received(req))
        fx, fy = min(max(cx / sw, 0.0), 0.999), min(max(cy / sh, 0.0), 0.999)
        return fx * mw, fy * mh

    def _aim(self, board: Board, req: RecordedRequest, intent: Intent,
             point: tuple[float, float] | None) -> Aim:
        """The intent's boxes in the model's space (the newer families' answers)."""
        sw, sh = board.screen
        mw, mh = model_space(self.family, _received(req))
        aim = Aim((mw, mh), point, nav=intent.nav)
        if intent.box is not None:
            x0, y0, x1, y1 = intent.box
            aim.half = ((x1 - x0) / 2 / sw * mw, (y1 - y0) / 2 / sh * mh)
        if intent.field is not None:
            x0, y0, x1, y1 = intent.field
            aim.field = ((x0 + x1) / 2 / sw * mw, (y0 + y1) / 2 / sh * mh)
        return aim

    def _malformed(self, board: Board, intent: Intent) -> Behaviour:
        rng = board.rng
        if intent.kind == "choose":
            return Behaviour.reply(rng.choice(["I think it is the second one.", "Box:"]))
        if intent.kind == "complete":
            return Behaviour.reply(rng.choice(["Probably.", "Complete: perhaps"]))
        if self.family in NEW_STANDINS:
            return new_family_malformed(self.family, rng)
        loop = " ".join(["click"] * 12)
        bad: dict[str, list[Behaviour]] = {
            "react": [Behaviour.reply("Observation: the screen.\nThought: I will do it now."),
                      Behaviour.reply("Observation: x\nThought: y\nAction: Click text (Save"),
                      Behaviour.reply("Observation: x\nThought: y\nAction: Fly to (Display)"),
                      Behaviour.reply(loop)],
            "tools": [Behaviour.reply("I will tap the button."),
                      Behaviour.tool_call("click_text", '{"text": "Disp'),
                      Behaviour.tool_call("click_text", "{}")],
            "json": [Behaviour.reply('{"thought": "open it", "op": "open_ap'),
                     Behaviour.reply('{"thought": "x", "op": "teleport", "args": {}}'),
                     Behaviour.reply("Sure! Here is the action.")],
            "uitars": [Behaviour.reply("Thought: tap it.\nAction: click(start_box='=')"),
                       Behaviour.reply("Thought: tap it.\nAction: click(start_box='(23"),
                       Behaviour.reply("Thought: tap it.\nAction: click()"),
                       Behaviour.reply("Thought: " + loop)],
            "qwen": [Behaviour.reply('<tool_call>\n{"name": "mobile_use", "arguments": '
                                     '{"action": "click", "coordinate": [23'),
                     Behaviour.reply('<tool_call>\n{"name": "mobile_use", "arguments": {}}\n'
                                     "</tool_call>"),
                     Behaviour.reply("I will click the button.")],
            "autoglm": [Behaviour.reply('<think>tap it</think><answer>do(action="Tap", element=['),
                        Behaviour.reply("<answer>do()</answer>"),
                        Behaviour.reply("<think>" + " ".join(["finish"] * 12))],
        }
        base = {"uitars-1.0": "uitars", "qwen3": "qwen"}.get(self.family, self.family)
        return rng.choice(bad[base])


# The stand-in grounder's error model. ASSUMED, not measured: a grounding model of the
# UI-TARS-1.5-7B / Qwen3-VL-8B class is taken to place about nine in ten mobile targets
# (ScreenSpot-style accuracy), so of its answers
GROUNDER_ELSEWHERE = 0.05  # a point somewhere else on the screen (uniform)
GROUNDER_NONE = 0.03  # "NONE": it does not see the target
GROUNDER_SPREAD = 0.4  # the others: the centre + N(0, (0.4 x half the box's side)^2) per axis
# (about 2 % of those then fall just outside the box). A target the phone's ground truth
# does not show is answered NONE.
GROUNDER_MODELS = {"qwen3": MODELS["qwen3"], "uitars": MODELS["uitars"], "qwen": MODELS["qwen"],
                   "react": MODELS["react"]}
# The grounding models (models/llm/families/grounding.py) as the grounder: the served name
# picks the ``grounding`` family's variant (``llm.family.grounder=auto``), and the stand-in
# answers in that variant's own format and coordinate space (``grounding_answer``).
GROUNDING_GROUNDERS = {
    "seeclick": "cckevinn/SeeClick",
    "os-atlas": "OS-Copilot/OS-Atlas-Base-7B",
    "showui": "showlab/ShowUI-2B",
    "uground": "osunlp/UGround-V1-7B",
    "aria-ui": "Aria-UI/Aria-UI-base",
    "jedi": "xlangai/Jedi-7B-1080p",
    "gta1": "HelloKKMe/GTA1-7B-2507",
    "gui-actor": "microsoft/GUI-Actor-7B-Qwen2.5-VL",
    "venus-ground": "inclusionAI/UI-Venus-Ground-7B",
}
GROUNDER_MODELS.update(GROUNDING_GROUNDERS)
_TARGET = re.compile(r'the element showing the text "(.*)"|the icon: (.*?)(?: \(in the |\n|$)')


class StandInGrounder:
    """BENCHMARK-ONLY STAND-IN for a grounding model (the ``grounder`` role) of ``family``:
    it reads the target from the request, finds the phone whose episode plans to click it
    (the ``StandInModel``'s boards) and answers that target's ground-truth box's centre,
    spread and missed as the constants above say, in the family's format and space."""

    def __init__(self, model: StandInModel, family: str = "qwen3", seed: int = 0) -> None:
        if family not in GROUNDER_MODELS:
            raise ValueError(f"no stand-in grounder for {family!r}: {', '.join(GROUNDER_MODELS)}")
        self.model = model
        self.family = family
        self.seed = seed
        # Draws per episode (its instruction), apart from the planner stand-in's, so that a
        # hybrid run's planner answers are those of the ocr run on the same seeds.
        self._rngs: dict[str, random.Random] = {}
        self._lock = threading.Lock()
        self.stats: Counter[str] = Counter()

    def _board(self, text: str) -> Board | None:
        m = _TARGET.search(text)
        want = (m.group(1) or m.group(2) or "").strip() if m else ""
        for b in self.model.boards():
            name = _target_name(b)
            if name is not None and name.strip() == want:
                return b
        # The grounding models' prompts quote the target ('...the command "{target}" (with
        # bbox)?'), so the regex above can take the closing quote in: the longest target
        # phrase a board plans that the request holds, word for word.
        found: list[tuple[int, Board]] = []
        for b in self.model.boards():
            name = _target_name(b)
            if name is None:
                continue
            phrase = (f"the icon: {name}" if isinstance(b.intent.op if b.intent else None, ClickIcon)
                      else f'the element showing the text "{name}"')
            if phrase in text:
                found.append((len(phrase), b))
        return max(found, key=lambda f: f[0])[1] if found else None

    def answer(self, req: RecordedRequest) -> Behaviour:
        board = self._board(" ".join(req.texts()))
        box = board.intent.box if board is not None and board.intent is not None else None
        with self._lock:
            self.stats["asked"] += 1
            if board is None or box is None:  # not on the screen (or no episode plans it)
                self.stats["none"] += 1
                return Behaviour.reply("NONE")
            rng = self._rngs.setdefault(board.instruction, random.Random(
                f"grounder/{self.family}/{board.instruction}/{self.seed}"))
            draw = rng.random()
            (x0, y0, x1, y1), (sw, sh) = box, board.screen
            if draw < GROUNDER_NONE:
                self.stats["none"] += 1
                return Behaviour.reply("NONE")
            if draw < GROUNDER_NONE + GROUNDER_ELSEWHERE:
                self.stats["elsewhere"] += 1
                cx, cy = rng.uniform(0, sw - 1), rng.uniform(0, sh - 1)
            else:
                cx = (x0 + x1) / 2 + rng.gauss(0, GROUNDER_SPREAD * (x1 - x0) / 2)
                cy = (y0 + y1) / 2 + rng.gauss(0, GROUNDER_SPREAD * (y1 - y0) / 2)
        if self.family in GROUNDING_GROUNDERS:
            return Behaviour.reply(grounding_answer(
                self.family, _target_name(board) or "", (cx / sw, cy / sh),
                ((x1 - x0) / 2 / sw, (y1 - y0) / 2 / sh), _received(req)))
        mw, mh = model_space(self.family, _received(req))
        x = _fmt(min(max(cx / sw, 0.0), 0.999) * mw)
        y = _fmt(min(max(cy / sh, 0.0), 0.999) * mh)
        if self.family == "uitars":
            return Behaviour.reply(f"Action: click(point='<point>{x} {y}</point>')")
        if self.family in ("qwen", "qwen3"):
            return Behaviour.reply(json.dumps([{"point_2d": [x, y], "label": "target"}]))
        return Behaviour.reply(f"({x}, {y})")


def _target_name(board: Board) -> str | None:
    """The text or icon description of the target the board's episode plans to click."""
    op = board.intent.op if board.intent is not None else None
    return op.text if isinstance(op, ClickText) else (
        op.description if isinstance(op, ClickIcon) else None)


def grounding_space(variant: str, received: tuple[int, int]) -> tuple[float, float]:
    """The far right and bottom edge in a grounding variant's numbers, for an image of
    ``received`` (w, h): 0..1 (SeeClick, ShowUI, GUI-Actor's printed point), 0..1000
    (OS-Atlas, UGround, Aria-UI) or pixels of the Qwen2.5-VL smart-resize (Jedi, GTA1 with
    its 4096x2160 cap, UI-Venus-Ground). Written apart from the family's geometry, so that
    a wrong geometry there fails the run instead of agreeing with itself."""
    w, h = received
    if variant in ("seeclick", "showui", "gui-actor"):
        return 1.0, 1.0
    if variant in ("os-atlas", "uground", "aria-ui"):
        return 1000.0, 1000.0
    hh, ww = smart_resize(h, w, 28, 3136, 4096 * 2160 if variant == "gta1" else 12845056)
    return float(ww), float(hh)


def grounding_answer(variant: str, target: str, centre: tuple[float, float],
                     half: tuple[float, float], received: tuple[int, int]) -> str:
    """A grounding model's answer in its own format (grounding.py's table has each one's
    source): ``centre`` and the box's ``half`` size as fractions of the screen."""
    mw, mh = grounding_space(variant, received)
    fx, fy = (min(max(v, 0.0), 0.999) for v in centre)
    x, y = fx * mw, fy * mh
    box = (max(0.0, fx - half[0]) * mw, max(0.0, fy - half[1]) * mh,
           min(0.999, fx + half[0]) * mw, min(0.999, fy + half[1]) * mh)
    b = [_fmt(v) for v in box]
    if variant == "seeclick":  # two decimals, as its README's answers
        return f"({fx:.2f},{fy:.2f})"
    if variant == "showui":
        return f"[{fx:.2f}, {fy:.2f}]"
    if variant == "gui-actor":  # the action head's point as its inference prints it
        return f"[{fx:.4f}, {fy:.4f}]"
    if variant == "os-atlas":
        return (f"<|object_ref_start|>{target}<|object_ref_end|><|box_start|>({b[0]},{b[1]}),"
                f"({b[2]},{b[3]})<|box_end|>")
    if variant == "uground":
        return f"({_fmt(x)}, {_fmt(y)})"
    if variant == "aria-ui":
        return f"[{_fmt(x)}, {_fmt(y)}]"
    if variant == "jedi":
        return ('<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click", '
                f'"coordinate": [{_fmt(x)}, {_fmt(y)}]}}}}\n</tool_call>')
    if variant == "gta1":
        return f"({_fmt(x)},{_fmt(y)})"
    if variant == "venus-ground":
        return f"[{b[0]},{b[1]},{b[2]},{b[3]}]"
    raise ValueError(f"no grounding answer for {variant!r}")


def _received(req: RecordedRequest) -> tuple[int, int]:
    """The size of the last image of the request: the current screen."""
    images = req.images()
    if not images:
        raise ValueError("a planner request without a screenshot")
    return images[-1].size


def _vocabulary(op: Operation) -> tuple[str, dict[str, Any]]:
    """An operation as ``tools`` function / ``json`` op name and arguments (``llm parse``)."""
    match op:
        case OpenApp(name=n):
            return "open_app", {"name": n}
        case ClickText(text=t):
            return "click_text", {"text": t}
        case ClickIcon(description=d, position=p):
            return "click_icon", {"description": d, "position": p}
        case TypeText(text=t):
            return "type", {"text": t}
        case PageDown():
            return "scroll_down", {}
        case PageUp():
            return "scroll_up", {}
        case Back():
            return "back", {}
        case Exit():
            return "home", {}
        case Enter():
            return "enter", {}
        case Wait():
            return "wait", {}
        case Stop():
            return "stop", {}
    raise ValueError(f"the stand-in has no answer for {op!r}")


def _fmt(v: float) -> int:
    return int(round(v))


def _uitars_call(op: Operation, point: tuple[float, float] | None,
                 space: tuple[float, float], rng: random.Random) -> str:
    mw, mh = space
    match op:
        case ClickText() | ClickIcon() if point is not None:
            x, y = _fmt(point[0]), _fmt(point[1])
            box = rng.choice([f"'<|box_start|>({x},{y})<|box_end|>'", f"'({x},{y})'",
                              f"'<point>{x} {y}</point>'"])
            return f"click(start_box={box})"
        case OpenApp(name=n):
            return f"open_app(app_name='{n}')"
        case TypeText(text=t):
            return "type(content='" + t.replace("'", "\\'") + "')"
        case PageDown():
            return f"scroll(start_box='({_fmt(mw / 2)},{_fmt(mh / 2)})', direction='down')"
        case Back():
            return "press_back()"
        case Exit():
            return "press_home()"
        case Enter():  # UI-TARS's hotkey (its computer action space); the parser takes it
            return "hotkey(key='enter')"
        case Stop():
            return "finished(content='The task is done.')"
    return "wait()"  # a target it cannot see: a model waits for the screen


def _qwen_args(op: Operation, point: tuple[float, float] | None,
               space: tuple[float, float]) -> dict[str, Any]:
    mw, mh = space
    match op:
        case ClickText() | ClickIcon() if point is not None:
            return {"action": "click", "coordinate": [_fmt(point[0]), _fmt(point[1])]}
        case OpenApp(name=n):
            return {"action": "open", "text": n}
        case TypeText(text=t):
            return {"action": "type", "text": t}
        case PageDown():  # the finger drags the content up
            return {"action": "swipe", "coordinate": [_fmt(mw / 2), _fmt(mh * 0.7)],
                    "coordinate2": [_fmt(mw / 2), _fmt(mh * 0.3)]}
        case Back():
            return {"action": "system_button", "button": "Back"}
        case Exit():
            return {"action": "system_button", "button": "Home"}
        case Enter():
            return {"action": "system_button", "button": "Enter"}
        case Stop():
            return {"action": "terminate", "status": "success"}
    return {"action": "wait", "time": 2}


def _autoglm_call(op: Operation, point: tuple[float, float] | None,
                  space: tuple[float, float]) -> str:
    match op:
        # Enter: AutoGLM has no key action; it taps the soft keyboard's action key (the
        # point StandInPolicy found for it), as a person would.
        case ClickText() | ClickIcon() | Enter() if point is not None:
            return f'do(action="Tap", element=[{_fmt(point[0])},{_fmt(point[1])}])'
        case OpenApp(name=n):
            return f'do(action="Launch", app="{n}")'
        case TypeText(text=t):
            return f'do(action="Type", text="{t}")'
        case PageDown():
            return 'do(action="Swipe", start=[500,700], end=[500,300])'
        case Back():
            return 'do(action="Back")'
        case Exit():
            return 'do(action="Home")'
        case Stop():
            return 'finish(message="The task is done.")'
    return 'do(action="Wait", duration="2 seconds")'


# ---- the policy: the real LLM planner, with the stand-in told what to answer -----------------


def where(phone: SimPhone) -> str:
    """The page the phone shows (its screen and that screen's parameters: which product,
    which note), for telling whether a tap navigated."""
    return f"{phone.current_screen()} {sorted(phone.screen_params().items())!r}"


@dataclass(frozen=True)
class Aimed:
    """A tap the stand-in meant for a target: the operation, the target's box (device
    pixels) and the screen it was aimed on."""

    op: Operation
    box: tuple[int, int, int, int]
    screen: str
    went_back: bool = False


class StandInPolicy:
    """The agent's ``LLMPolicy`` (the family's prompt, parser and mapping over the real
    client); before each call the oracle decides what the stand-in is to answer. The
    oracle sees the history with the operations it meant (a coordinate family's tap stands
    for the ``Click text`` it was), so its script fixes (retry a step without effect, wait
    for a target that is not on the screen yet) work for every family."""

    name = "llm"

    def __init__(self, llm: LLMPolicy, oracle: OraclePolicy, board: Board, phone: SimPhone,
                 coordinates: bool, task: Task | None = None, *, boxes: bool = False,
                 stats: Counter[str] | None = None) -> None:
        self.llm = llm
        self.boxes = boxes or coordinates  # find the target's box (for the stand-in grounder)
        self.oracle = oracle
        self.task = task if task is not None else oracle.task
        self.board = board
        self.phone = phone
        self.coordinates = coordinates
        self._pending: Operation | None = None
        self._meant: dict[int, tuple[Operation, bool]] = {}  # history index -> (op, not seen)
        self._aimed: Aimed | None = None  # the last tap meant for a target, until judged
        # missed taps made good ("back_after_a_miss", "retap_after_a_miss"), on the board
        self.stats: Counter[str] = stats if stats is not None else Counter()
        self._retapping = False  # the pending op is a missed tap tried again (once only)

    @property
    def image_view(self) -> tuple[int, int] | None:
        return self.llm.image_view

    def _oracle_ctx(self, ctx: StepContext) -> StepContext:
        history = []
        for i, rec in enumerate(ctx.history):
            meant = self._meant.get(i)
            if meant is not None:
                op, unseen = meant
                rec = msgspec.structs.replace(rec, action=op,
                                              result="not found" if unseen else rec.result)
            history.append(rec)
        return dataclasses.replace(ctx, history=tuple(history)) if history else ctx

    def _after_a_miss(self) -> Operation | None:
        """What a model does that sees its last tap missed: the stand-in's noise puts a tap
        off its target, and a real model, looking at the next screen, sees that the page
        it meant to reach is not there (or its target is still waiting). It goes Back once
        if the stray tap left the screen, then taps the target again, once. Judged from the
        simulator's ground truth: where the tap landed against the target's box."""
        aimed, self._aimed = self._aimed, None
        if aimed is None:
            return None
        if aimed.went_back:  # the Back after a stray tap: is the target's screen back?
            if where(self.phone) != aimed.screen:
                return None  # Back did not undo the stray tap: go on as the oracle says
        else:
            touch = self.phone.last_touch
            if touch is None:
                return None  # no tap happened (not found, refused): the oracle's fixes apply
            x0, y0, x1, y1 = aimed.box
            if x0 <= touch[0] <= x1 and y0 <= touch[1] <= y1:
                return None
            if where(self.phone) != aimed.screen:
                self._aimed = dataclasses.replace(aimed, went_back=True)
                self.stats["back_after_a_miss"] += 1
                return Back()
        self.stats["retap_after_a_miss"] += 1
        self._retapping = True
        return aimed.op

    async def decide(self, ctx: StepContext) -> Decision:
        if self._pending is None:
            self._pending = await anyio.to_thread.run_sync(self._after_a_miss)
        if self._pending is None:
            self._pending = (await self.oracle.decide(self._oracle_ctx(ctx))).operation or Stop()
        op = self._pending
        box = None
        if self.boxes and isinstance(op, ClickText | ClickIcon):
            el = await anyio.to_thread.run_sync(resolve, self.phone, op)
            box = el.bbox if el is not None else None
        aimed = isinstance(op, ClickText | ClickIcon) or (
            isinstance(op, Enter) and self.board.family in NO_ENTER)
        if isinstance(op, Enter) and self.board.family in NO_ENTER:
            el = await anyio.to_thread.run_sync(submit_target, self.phone)
            box = el.bbox if el is not None else None
        nav = ""
        if isinstance(op, OpenApp) and self.board.family in NO_OPEN:
            nav, el = await anyio.to_thread.run_sync(open_app_step, self.phone, op.name)
            box = el.bbox if el is not None else None
        field = None
        if isinstance(op, TypeText) and self.board.family in NEW_STANDINS:
            el = await anyio.to_thread.run_sync(focused_field, self.phone)
            field = el.bbox if el is not None else None
        self.board.intent = Intent("plan", op=op, box=box, earlier_screens=len(ctx.history),
                                   field=field, nav=nav)
        d = await self.llm.decide(ctx)
        if d.operation is not None and nav not in ("", "tap"):
            return d  # a step toward the app's icon: the oracle's step is still to come
        if d.operation is not None:
            unseen = self.coordinates and aimed and box is None
            self._meant[len(ctx.history)] = (op, unseen)
            self._pending = None
            first_try = not self._retapping
            self._retapping = False
            self.phone.last_touch = None
            if aimed and box is not None and first_try:
                self._aimed = Aimed(op, box, await anyio.to_thread.run_sync(where, self.phone))
        return d

    async def choose(
        self, ctx: StepContext, target: str, image: bytes, labels: Sequence[int],
        texts: Sequence[str], points: Sequence[tuple[int, int]] = (), reason: str = "",
        crops: Sequence[bytes] = (),
    ) -> Choice:
        right = await self.oracle.choose(self._oracle_ctx(ctx), target, image, labels, texts,
                                         points, reason=reason, crops=crops)
        self.board.intent = Intent("choose", choice=right.index,
                                   earlier_screens=len(ctx.history))
        return await self.llm.choose(ctx, target, image, labels, texts, points, reason=reason,
                                     crops=crops)

    async def check_completion(self, ctx: StepContext) -> Completion:
        # The stand-in answers from the phone's real state, not "yes" on trust: a Stop
        # before the task is done is told what is missing, as a good model would see.
        done, reason = await anyio.to_thread.run_sync(task_state, self.task, self.phone)
        self.board.intent = Intent("complete", complete=done, reason=reason,
                                   earlier_screens=len(ctx.history))
        return await self.llm.check_completion(ctx)


def submit_target(phone: SimPhone) -> Element | None:
    """Where a model with no Enter action taps to submit what it typed (ground truth): the
    soft keyboard's action key (search / return) when a keyboard with keys is up, else a
    suggestion row that repeats the focused field's text (what a person taps under a search
    box when the keyboard shows none, e.g. the ADB Keyboard's bar); None: neither is on the
    screen (the stand-in then waits, as a model would for the screen)."""
    elements = phone.elements()
    keys = [e for e in elements if e.kind == "key" and e.desc == "Enter"]
    if keys:
        return keys[-1]
    field = next((e for e in elements if e.editable and e.focused), None)
    typed = field.text.strip().lower() if field is not None else ""
    rows = [e for e in elements if typed and e.clickable and not e.editable
            and e.text.strip().lower() == typed]
    return rows[0] if rows else None


# ---- scoring ---------------------------------------------------------------------------------


def _events(directory: str) -> list[dict[str, Any]]:
    from recording.reader import read_events

    path = Path(directory) / "events.jsonl"
    events, _ = read_events(path, path.name)
    return events


def event_counts(res: SuiteResult) -> Counter[str]:
    """What the recorded events say: unusable replies per role, grounding sources."""
    c: Counter[str] = Counter()
    for ep in res.episodes:
        for ev in _events(ep.directory):
            kind = ev.get("event")
            if kind == "llm_usage":
                c[f"calls_{ev.get('purpose')}"] += 1
            elif kind == "plan" and ev.get("operation") is not None:
                c["decided_plan"] += 1
            elif kind == "choice":
                c["decided_choose"] += 1
            elif kind == "reflection" and ev.get("verdict") in ("complete", "incomplete") \
                    and "step budget" not in str(ev.get("reason")):
                c["decided_reflect"] += 1
            elif kind == "grounded":
                c[f"grounded_{ev.get('source')}"] += 1
    return c


def family_summary(res: SuiteResult, model: StandInModel) -> dict[str, Any]:
    c = event_counts(res)
    n = max(1, len(res.episodes))
    failures = sum(max(0, c[f"calls_{k}"] - c[f"decided_{k}"]) for k in ("plan", "choose", "reflect"))
    transient = [e for e in res.episodes
                 if e.status == "failed" and TRANSIENT_REASON.search(e.reason or "")]
    st = model.stats
    return {
        "SU": round(sum(r.score.su for r in res.results) / n, 4),
        "parse_failures": failures,
        "malformed_sent": st["malformed_sent"],
        "retries": st["retries"],
        "episodes_failed_by_transient_errors": len(transient),
        "snapped": c["grounded_snapped"],
        "points_off_sent": st["points_off"],
        "missed_taps_retapped": st["retap_after_a_miss"],
        "back_after_a_miss": st["back_after_a_miss"],
        "grounded": {k.removeprefix("grounded_"): v for k, v in sorted(c.items())
                     if k.startswith("grounded_")},
        "image_tokens_per_task": round(st["image_tokens"] / n, 1),
        "v1_image_tokens_per_task": round(st["v1_image_tokens"] / n, 1),
        "image_tokens_vs_v1": round(st["image_tokens"] / st["v1_image_tokens"], 3)
        if st["v1_image_tokens"] else None,
        "calls_per_task": round(st["calls"] / n, 2),
        "n_episodes": len(res.episodes),
        "failed_reasons": sorted({(e.reason or "")[:160] for e in res.episodes
                                  if e.status != "succeeded"})[:6],
        "wall_s": round(res.wall_s, 1),
    }


# ---- running ---------------------------------------------------------------------------------


def grounder_overrides(url: str, family: str) -> list[str]:
    """The config of a hybrid run: the grounder role at the stand-in grounder's server."""
    return [f"llm.roles.grounder.base_url={url}",
            f"llm.roles.grounder.model={GROUNDER_MODELS[family]}", "llm.family.grounder=auto",
            "perception.text_grounding=hybrid", "perception.icon_grounding=hybrid"]


async def run_family(family: str, args: argparse.Namespace, chosen: list[type[Task]],
                     overrides: list[str], grounding: str = "ocr",
                     ) -> tuple[dict[str, Any], SuiteResult]:
    """One family on the tasks and seeds; ``grounding = "hybrid"``: with the stand-in
    grounder on a server of its own (a grounder served elsewhere), same seeds."""
    from contextlib import ExitStack

    from models.llm import LLMClient

    model = StandInModel(family, noise=args.noise, timeout_s=args.llm_timeout_s)
    hybrid = grounding == "hybrid"
    grounder = StandInGrounder(model, args.grounder_family) if hybrid else None
    label = f"{family}+{grounding}" if hybrid else family
    with ExitStack() as servers:
        srv = servers.enter_context(OpenAIServer(policy=model.answer, keep_requests=False))
        extra: list[str] = []
        if grounder is not None:
            gsrv = servers.enter_context(OpenAIServer(policy=grounder.answer,
                                                      keep_requests=False))
            extra = grounder_overrides(gsrv.base_url, args.grounder_family)
        name = MODELS.get(family, MODELS["react"])
        kind = NEW_STANDINS[family][0] if family in NEW_STANDINS else family
        cfg = load_host_config(args.config or default_config_path(), overrides=[
            f"llm.base_url={srv.base_url}", "llm.api_key=sk-bench-stand-in",
            f"llm.models.planner={name}", f"llm.family.planner={kind}",
            # every role is the same model, so each asks in that family's way
            f"llm.models.chooser={name}", f"llm.family.chooser={kind}",
            f"llm.models.reflector={name}", f"llm.family.reflector={kind}",
            f"llm.timeout_s={args.llm_timeout_s}", "llm.requests_per_minute=100000",
            *extra, *overrides])
        async with LLMClient(cfg.llm) as llm:
            coordinates = family in COORDINATE

            def make(task: Task, phone: SimPhone) -> Policy:
                board = model.register(task, phone, phone.info.serial)
                inner = LLMPolicy(llm, RoleSetup.from_settings(cfg.llm),
                                  keep_screenshots=cfg.agent.keep_screenshots,
                                  max_reasks=cfg.agent.max_reasks)
                return StandInPolicy(inner, OraclePolicy(task, phone), board, phone, coordinates,
                                     task, boxes=hybrid, stats=board.stats)

            try:
                res = await run_suite(chosen, args.seeds, devices=args.devices,
                                      out_dir=args.out / label, cfg=cfg, make_policy=make,
                                      planner=f"stand-in:{label}", llm=llm,
                                      on_episode=lambda ep: model.release(ep.serial))
            finally:
                model.close()
    summary = family_summary(res, model)
    if grounder is not None:
        summary["grounder_sent"] = dict(grounder.stats)
    return summary, res


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mobagent bench model_families",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--families", default=",".join(FAMILIES),
                   help=f"comma-separated, of {', '.join(MODELS)}, or all (default: the first "
                   "six families)")
    p.add_argument("--noise", type=float, default=0.1, help="share of answers that go wrong")
    p.add_argument("--seeds", type=lambda s: parse_ints(s, "seed"), default=[0])
    p.add_argument("--tiers", type=lambda s: parse_ints(s, "tier"), default=[1, 2, 3])
    p.add_argument("--tasks", default="", help="comma-separated task ids or app rows (default all)")
    p.add_argument("--devices", type=int, default=4, help="phones driven at once")
    p.add_argument("--out", type=Path, required=True, help="results directory")
    p.add_argument("--oracle", action="store_true",
                   help="also run the oracle planner on the same tasks and seeds (its SU)")
    p.add_argument("--llm-timeout-s", type=float, default=5.0,
                   help="llm.timeout_s for the run (a timeout answer waits past it)")
    p.add_argument("--grounding", default="ocr",
                   help="ocr, hybrid or ocr,hybrid: each family run once per mode on the same "
                        "seeds; hybrid adds the stand-in grounder (perception.*_grounding)")
    p.add_argument("--grounder-family", default="qwen3", choices=tuple(GROUNDER_MODELS),
                   help="the stand-in grounder's format and coordinate space")
    p.add_argument("--config", help="agent config (default: $MOBAGENT_CONFIG or configs/default.toml)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one config value (repeatable)")
    return p


def _table(rows: dict[str, dict[str, Any]], oracle_su: float | None) -> str:
    head = (f"{'family':14} {'SU':>5} {'dSU':>6} {'parse_f':>7} {'malf':>5} {'retries':>7} "
            f"{'transient':>9} {'snapped':>7} {'grndr':>5} {'off':>4} {'retap':>5} {'back':>4} "
            f"{'img_tok':>8} {'v1_tok':>8} {'ratio':>6}")
    out = [head, "-" * len(head)]
    for name, r in rows.items():  # name: the family, "+hybrid" with the stand-in grounder
        d = "" if oracle_su is None else f"{r['SU'] - oracle_su:+.2f}"
        out.append(f"{name:14} {r['SU']:5.2f} {d:>6} {r['parse_failures']:7d} "
                   f"{r['malformed_sent']:5d} {r['retries']:7d} "
                   f"{r['episodes_failed_by_transient_errors']:9d} {r['snapped']:7d} "
                   f"{r['grounded'].get('grounder', 0):5d} {r['points_off_sent']:4d} "
                   f"{r['missed_taps_retapped']:5d} {r['back_after_a_miss']:4d} "
                   f"{r['image_tokens_per_task']:8.0f} {r['v1_image_tokens_per_task']:8.0f} "
                   f"{(r['image_tokens_vs_v1'] or 0):6.3f}")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    families = family_list(args.families)
    unknown = [f for f in families if f not in MODELS]
    if unknown or not families:
        print(f"model_families: unknown family {', '.join(unknown) or '(none)'}: use "
              f"{', '.join(MODELS)}", file=sys.stderr)
        return 2
    if not 0 <= args.noise <= 1 or not 1 <= args.devices <= 64 or args.llm_timeout_s <= 0:
        print("model_families: --noise is 0..1, --devices 1..64, --llm-timeout-s > 0",
              file=sys.stderr)
        return 2
    modes = [m.strip() for m in args.grounding.split(",") if m.strip()]
    if not modes or set(modes) - {"ocr", "hybrid"}:
        print("model_families: --grounding is ocr, hybrid or ocr,hybrid", file=sys.stderr)
        return 2
    wanted = {w.strip() for w in args.tasks.split(",") if w.strip()} or None
    chosen = [t for t in TASKS if t.tier in args.tiers
              and (wanted is None or t.task_id() in wanted or t.app in wanted)]
    if not chosen:
        print(f"model_families: no task matches --tasks {args.tasks!r}", file=sys.stderr)
        return 2
    try:
        base = load_host_config(args.config or default_config_path(), overrides=list(args.set))
    except ConfigError as exc:
        print(f"model_families: config error: {exc}", file=sys.stderr)
        return 2
    configure_logging(msgspec.structs.replace(base.log, level="error"))

    async def everything() -> tuple[dict[str, dict[str, Any]], float | None]:
        oracle_su = None
        if args.oracle:
            res = await run_suite(chosen, args.seeds, devices=args.devices,
                                  out_dir=args.out / "oracle", cfg=base,
                                  make_policy=oracle_policy, planner="oracle")
            oracle_su = round(sum(r.score.su for r in res.results) / max(1, len(res.results)), 4)
            print(f"oracle: SU {oracle_su:.3f} on {len(res.results)} episodes "
                  f"({res.wall_s:.0f} s)", file=sys.stderr, flush=True)
        rows: dict[str, dict[str, Any]] = {}
        for fam in families:
            for mode in modes:
                key = fam if mode == "ocr" else f"{fam}+{mode}"
                rows[key], _ = await run_family(fam, args, chosen, list(args.set), mode)
                print(f"{key}: SU {rows[key]['SU']:.3f} ({rows[key]['wall_s']:.0f} s)",
                      file=sys.stderr, flush=True)
        return rows, oracle_su

    rows, oracle_su = anyio.run(everything)
    print(_table(rows, oracle_su))
    summary = {"families": rows, "oracle_SU": oracle_su, "noise": args.noise,
               "seeds": args.seeds, "tasks": [t.task_id() for t in chosen],
               "devices": args.devices, "stand_in": "benchmark-only: reads the reference "
               "solution and the simulator's ground-truth boxes",
               "grounding": modes}
    if "hybrid" in modes:
        summary["stand_in_grounder"] = {
            "family": args.grounder_family, "assumed_not_measured": True,
            "elsewhere": GROUNDER_ELSEWHERE, "none": GROUNDER_NONE,
            "spread_of_half_side": GROUNDER_SPREAD}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))
    return 0


# ---- the newer families' stand-ins (issue 31) -------------------------------------------------
# Each key is what --families takes: (llm.family.planner, the served name the stand-in poses
# as, which picks the variant), and the model's coordinate space. The answers below are each
# family's trained format (its module's docstring has the public source).

NEW_STANDINS: dict[str, tuple[str, str]] = {
    "agentcpm": ("agentcpm", "openbmb/AgentCPM-GUI"),
    "glm": ("glm", "zai-org/GLM-4.5V"),
    "cogagent": ("cogagent", "THUDM/cogagent-9b-20241220"),
    "venus": ("venus", "inclusionAI/UI-Venus-1.5-8B"),
    "venus-1.0": ("venus", "inclusionAI/UI-Venus-Navi-7B"),
    "gelab": ("gelab", "stepfun-ai/GELab-Zero-4B-preview"),
    "holo": ("holo", "Hcompany/Holo2-8B"),
    "holo-1.5": ("holo", "Hcompany/Holo1.5-7B"),
    "holo-1": ("holo", "Hcompany/Holo1-7B"),
    "claude": ("claude", "claude-sonnet-4-5"),
    "gemini": ("gemini", "gemini-2.5-computer-use-preview-10-2025"),
    "gui-owl": ("qwen", "mPLUG/GUI-Owl-7B"),
    "gui-owl-1.5": ("gui-owl-1.5", "mPLUG/GUI-Owl-1.5-8B"),
    "mai-ui": ("mai-ui", "Tongyi-MAI/MAI-UI-8B"),
    "uitars-doubao": ("uitars-doubao", "doubao-1-5-ui-tars-250428"),
    # issue 39: OpenAI's computer use (GA batch, preview) and OpenCUA's pyautogui code
    "openai": ("openai", "gpt-5.4"),
    "openai-preview": ("openai-preview", "computer-use-preview"),
    "opencua": ("opencua", "OpenCUA/OpenCUA-7B"),
    # a grounding model (OS-Atlas Base, 0..1000 box tokens): a localizer, like Holo
    "grounding": ("grounding", "OS-Copilot/OS-Atlas-Base-7B"),
}
# The Holo models localize one element a reply (a tap): they cannot open an app, type or
# scroll, so a planner of theirs cannot finish a Mobile-Eval task (they are grounders).
LOCALIZERS = ("holo", "holo-1.5", "holo-1", "grounding")


def new_model_space(key: str, received: tuple[int, int]) -> tuple[float, float] | None:
    """The far right and bottom edge in the model's numbers (None: not a newer family)."""
    w, h = received
    if key in ("venus-1.0", "holo-1.5", "holo-1", "gui-owl", "opencua"):
        # Qwen2.5-VL processors: pixels of the smart-resize (factor 28) of the image received
        hh, ww = smart_resize(h, w, 28, 3136, 12845056)
        return float(ww), float(hh)
    if key in ("claude", "openai", "openai-preview"):  # pixels of the screenshot as sent
        return float(w), float(h)
    if key == "mai-ui":  # 0-999, divided by 999
        return 999.0, 999.0
    if key in NEW_STANDINS:  # 0-1000 (or 0-999 divided by 1000: same numbers below 999)
        return 1000.0, 1000.0
    return None


@dataclass
class Aim:
    """Where the newer families' answers point, in the model's space: the target's centre
    (``point``) and half-size (``half``), the focused field's centre (``field``), the
    screen's edges (``space``); ``nav``: a step toward an app's icon for a family with no
    open-app action ("home", "drawer")."""

    space: tuple[float, float]
    point: tuple[float, float] | None = None
    half: tuple[float, float] = (20.0, 20.0)
    field: tuple[float, float] | None = None
    nav: str = ""


def _i(v: float) -> int:
    return int(round(v))


def _box(aim: Aim) -> list[int]:
    assert aim.point is not None
    (x, y), (hx, hy), (mw, mh) = aim.point, aim.half, aim.space
    return [_i(max(0.0, x - hx)), _i(max(0.0, y - hy)), _i(min(mw - 1, x + hx)), _i(min(mh - 1, y + hy))]


def new_family_reply(key: str, op: Operation, aim: Aim, rng: random.Random) -> Behaviour:
    """The planner's answer of the newer family ``key`` for ``op``, in its format."""
    mw, mh = aim.space
    cx, top, low = _i(mw / 2), _i(mh * 0.3), _i(mh * 0.7)
    tap = aim.point is not None and isinstance(op, ClickText | ClickIcon | OpenApp | Enter)
    p = (_i(aim.point[0]), _i(aim.point[1])) if aim.point is not None else (cx, cx)
    fp = (_i(aim.field[0]), _i(aim.field[1])) if aim.field is not None else (cx, _i(mh * 0.15))
    if key == "agentcpm":  # keys, not names; no open-app action: it taps the icon
        obj: dict[str, Any] = {"thought": "下一步"}
        if tap:
            obj["POINT"] = list(p)
        elif aim.nav == "home" or isinstance(op, Exit):
            obj["PRESS"] = "HOME"
        elif aim.nav == "drawer" or isinstance(op, PageDown):  # the finger moves up
            obj.update(POINT=[cx, low], to="up")
        elif isinstance(op, TypeText):
            obj["TYPE"] = op.text
        elif isinstance(op, Back | Enter):
            obj["PRESS"] = "BACK" if isinstance(op, Back) else "ENTER"
        elif isinstance(op, Stop):
            obj["STATUS"] = "finish"
        else:
            obj["duration"] = 1000
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        return Behaviour.reply(rng.choice([text, f"<think>看屏幕。</think><act>{text}</act>"]))
    if key in ("glm", "cogagent"):
        return Behaviour.reply(_glm_reply(key, op, aim, tap, p, fp, rng))
    if key in ("venus", "venus-1.0"):
        match op:
            case _ if tap:
                act = f"Click(box=({p[0]}, {p[1]}))"
            case OpenApp(name=n):
                act = f"Launch(app='{n}')"
            case TypeText(text=t):
                act = "Type(content='" + t.replace("'", "\\'") + "')"
            case PageDown():
                act = f"Scroll(start=({cx}, {low}), end=({cx}, {top}))"
            case Back():
                act = "PressBack()"
            case Exit():
                act = "PressHome()"
            case Enter():
                act = "PressEnter()"
            case Stop():
                act = "Finished(content='done')"
            case _:
                act = "Wait()"
        return Behaviour.reply(f"<think>The next step.</think>\n<action>{act}</action>\n"
                               "<conclusion>Did the next step.</conclusion>")
    if key == "gelab":  # tab-separated fields; no Enter in its prompt: taps the key instead
        match op:
            case _ if tap:
                kv = f"action:CLICK\tpoint:{p[0]},{p[1]}"
            case OpenApp(name=n):
                kv = f"action:AWAKE\tvalue:{n}"
            case TypeText(text=t):
                kv = f"action:TYPE\tvalue:{t}\tpoint:{fp[0]},{fp[1]}"
            case PageDown():
                kv = f"action:SLIDE\tpoint1:{cx},{low}\tpoint2:{cx},{top}"
            case Back():
                kv = "action:BACK"
            case Exit():
                kv = "action:HOME"
            case Stop():
                kv = "action:COMPLETE\treturn:任务完成"
            case _:
                kv = "action:WAIT\tvalue:2"
        sep = rng.choice(["\t", "\n"])
        return Behaviour.reply(f"<THINK> 下一步 </THINK>\nexplain:执行下一步{sep}{kv}{sep}summary:已执行")
    if key in LOCALIZERS:  # one point a reply
        if not tap:
            return Behaviour.reply("The target is not an element on the screen.")
        form = {"holo-1": f"Click({p[0]}, {p[1]})",
                "holo-1.5": json.dumps({"action": "click_absolute", "x": p[0], "y": p[1]}),
                "holo": json.dumps({"x": p[0], "y": p[1]}),
                "grounding": "<|object_ref_start|>the target<|object_ref_end|><|box_start|>"
                             + "({},{}),({},{})".format(*_box(aim)) + "<|box_end|>"}[key]
        return Behaviour.reply(form)
    if key == "claude":
        name, args = _claude_call(op, tap, p, cx, _i(mh / 2))
        return Behaviour(text=rng.choice([None, "I'll do the next step."]),
                         tool_calls=((name, json.dumps(args)),))
    if key in ("openai", "openai-preview"):
        name, args = _openai_call(op, tap, p)
        if name == "computer" and key == "openai":
            # the GA tool's batch: one action, sometimes with a trailing wait the model adds
            # (dropped: one action a step)
            batch = [args["action"]] + ([{"type": "wait"}] if rng.random() < 0.3 else [])
            args = {"actions": batch}
        return Behaviour(text=rng.choice([None, "I'll do the next step."]),
                         tool_calls=((name, json.dumps(args)),))
    if key == "opencua":
        code = _opencua_code(op, tap, p, rng)
        return Behaviour.reply("## Thought:\nThe next step of the task.\n\n## Action:\nDo the next step.\n\n"
                               f"## Code:\n```python\n{code}\n```")
    if key == "gemini":
        name, args = _gemini_call(op, tap, p, fp)
        return Behaviour(text=None, tool_calls=((name, json.dumps(args)),))
    if key in ("gui-owl", "gui-owl-1.5", "mai-ui"):
        args = _qwen_args(op, p if tap else None, aim.space)
        if key == "mai-ui":
            if isinstance(op, PageDown):  # MAI-UI swipes by direction (the finger's)
                args = {"action": "swipe", "direction": "up"}
            if isinstance(op, Enter) and not tap:
                args = {"action": "system_button", "button": "enter"}
            if isinstance(op, Stop):
                args = {"action": "terminate", "status": "success"}
        call = json.dumps({"name": "mobile_use", "arguments": args})
        if key == "gui-owl-1.5":
            return Behaviour.reply(f"Action: do the next step.\n<tool_call>\n{call}\n</tool_call>")
        if key == "mai-ui":
            return Behaviour.reply(f"<thinking>\nThe next step.\n</thinking>\n<tool_call>\n{call}\n</tool_call>")
        return Behaviour.reply(f"<thinking>\nThe next step.\n</thinking>\n<tool_call>\n{call}\n</tool_call>\n"
                               "<conclusion>\nDid the next step.\n</conclusion>")
    if key == "uitars-doubao":
        match op:
            case _ if tap:
                act = rng.choice([f"click(point='<point>{p[0]} {p[1]}</point>')",
                                  f"click(start_box='<bbox>{' '.join(map(str, _box(aim)))}</bbox>')"])
            case OpenApp(name=n):
                act = f"open_app(app_name='{n}')"
            case TypeText(text=t):
                act = "type(content='" + t.replace("'", "\\'") + "')"
            case PageDown():
                act = f"scroll(point='<point>{cx} {cx}</point>', direction='down')"
            case Back():
                act = "press_back()"
            case Exit():
                act = "press_home()"
            case Enter():
                act = "hotkey(key='enter')"
            case Stop():
                act = "finished(content='done')"
            case _:
                act = "wait()"
        colon = rng.choice([":", "："])
        return Behaviour.reply(f"Thought: the next step.\nAction{colon} {act}")
    raise ValueError(f"no stand-in for family {key!r}")


def _glm_reply(key: str, op: Operation, aim: Aim, tap: bool, p: tuple[int, int],
               fp: tuple[int, int], rng: random.Random) -> str:
    mw, mh = aim.space
    if key == "cogagent":
        box = f"[[{','.join(map(str, _box(aim)))}]]" if aim.point is not None else ""
        match op:
            case _ if tap:
                g = f"CLICK(box={box}, element_info='the target')"
            case OpenApp(name=n):
                g = f"LAUNCH(app='{n}', url='None')"
            case TypeText(text=t):
                g = f"TYPE(box=[[{fp[0]-40},{fp[1]-20},{fp[0]+40},{fp[1]+20}]], text='{t}', element_info='the field')"
            case PageDown():
                g = f"SCROLL_DOWN(box=[[0,200,{_i(mw) - 1},800]], step_count=5, element_info='the list')"
            case Enter():
                g = "KEY_PRESS(key='Return')"
            case Back():
                g = "KEY_PRESS(key='Back')"
            case Exit():
                g = "KEY_PRESS(key='Home')"
            case Stop():
                g = "END()"
            case PageUp():
                g = f"SCROLL_UP(box=[[0,200,{_i(mw) - 1},800]], step_count=5, element_info='the list')"
            case _:  # CogAgent has no wait: a hover, which changes nothing on a phone
                g = f"HOVER(box=[[0,200,{_i(mw) - 1},800]], element_info='the loading page')"
        return ("Status: the screen shows [[0,0,999,80]] a status bar.\nPlan: do the task.\n"
                f"Action: the next step.\nGrounded Operation: {g}{rng.choice(['', ' <<一般操作>>'])}")
    obj: dict[str, Any]
    match op:
        case _ if tap:
            obj = {"action_type": "click", "box_2d": [_box(aim)]}
        case OpenApp(name=n):
            obj = {"action_type": "open_app", "app_name": n}
        case TypeText(text=t):
            obj = {"action_type": "input_text", "text": t}
        case PageDown():  # the finger's direction
            obj = {"action_type": "swipe", "direction": "up"}
        case Enter():
            obj = {"action_type": "keyboard_enter"}
        case Back():
            obj = {"action_type": "navigate_back"}
        case Exit():
            obj = {"action_type": "navigate_home"}
        case Stop():
            obj = {"action_type": "status", "goal_status": "complete"}
        case _:
            obj = {"action_type": "wait"}
    action = rng.choice([json.dumps(obj), repr(obj), f"<|begin_of_box|>{json.dumps(obj)}<|end_of_box|>"])
    return (f"<think>The next step.</think><answer>Memory: []\nReason: the next step.\n"
            f"Action: {action}</answer>")


def _claude_call(op: Operation, tap: bool, p: tuple[int, int], cx: int, cy: int
                 ) -> tuple[str, dict[str, Any]]:
    match op:
        case _ if tap:
            return "computer", {"action": "left_click", "coordinate": list(p)}
        case OpenApp(name=n):
            return "open_app", {"name": n}
        case TypeText(text=t):
            return "computer", {"action": "type", "text": t}
        case PageDown():
            return "computer", {"action": "scroll", "coordinate": [cx, cy], "scroll_direction": "down",
                                "scroll_amount": 5}
        case Enter():
            return "computer", {"action": "key", "text": "Return"}
        case Back():
            return "computer", {"action": "key", "text": "Back"}
        case Exit():
            return "computer", {"action": "key", "text": "Home"}
        case Stop():
            return "done", {"summary": "The task is done."}
    return "computer", {"action": "wait", "duration": 1}


def _openai_call(op: Operation, tap: bool, p: tuple[int, int]) -> tuple[str, dict[str, Any]]:
    """OpenAI computer use through the functions the family offers (``computer`` with one
    ``action``; the GA caller wraps it in ``actions``)."""
    match op:
        case _ if tap:
            return "computer", {"action": {"type": "click", "button": "left", "x": p[0], "y": p[1]}}
        case OpenApp(name=n):
            return "open_app", {"name": n}
        case TypeText(text=t):
            return "computer", {"action": {"type": "type", "text": t}}
        case PageDown():
            return "computer", {"action": {"type": "scroll", "x": p[0], "y": p[1], "scroll_x": 0, "scroll_y": 600}}
        case Enter():
            return "computer", {"action": {"type": "keypress", "keys": ["ENTER"]}}
        case Back():
            return "computer", {"action": {"type": "keypress", "keys": ["ESC"]}}
        case Exit():
            return "computer", {"action": {"type": "keypress", "keys": ["HOME"]}}
        case Stop():
            return "done", {"summary": "The task is done."}
    return "computer", {"action": {"type": "wait"}}


def _opencua_code(op: Operation, tap: bool, p: tuple[int, int], rng: random.Random) -> str:
    """OpenCUA's code for ``op``: pyautogui, or the phone functions its prompt declares."""
    match op:
        case _ if tap:
            return f"pyautogui.click(x={p[0]}, y={p[1]})"
        case OpenApp(name=n):
            return f"computer.open_app(name={n!r})"
        case TypeText(text=t):
            return f"pyautogui.write(message={t!r})"
        case PageDown():
            return rng.choice(["pyautogui.scroll(-5)", f"pyautogui.moveTo(x={p[0]}, y={p[1]})\npyautogui.scroll(-5)"])
        case Enter():
            return "pyautogui.press(keys=['enter'])"
        case Back():
            return "computer.back()"
        case Exit():
            return "computer.home()"
        case Stop():
            return "computer.terminate(status='success')"
    return "computer.wait()"


def _gemini_call(op: Operation, tap: bool, p: tuple[int, int], fp: tuple[int, int]
                 ) -> tuple[str, dict[str, Any]]:
    match op:
        case _ if tap:
            return "click_at", {"x": p[0], "y": p[1]}
        case OpenApp(name=n):
            return "open_app", {"app_name": n}
        case TypeText(text=t):  # the reference submits in its own step (key Enter)
            return "type_text_at", {"x": fp[0], "y": fp[1], "text": t, "press_enter": False}
        case PageDown():
            return "scroll_document", {"direction": "down"}
        case Enter():
            return "key_combination", {"keys": "Enter"}
        case Back():
            return "go_back", {}
        case Exit():
            return "go_home", {}
        case Stop():
            return "done", {"summary": "The task is done."}
    return "wait_5_seconds", {}


def new_family_malformed(key: str, rng: random.Random) -> Behaviour:
    """An unusable planner answer in the newer family ``key``'s typical ways (each one its
    parser must re-ask on, never execute)."""
    loop = " ".join(["click"] * 12)
    qwen_bad = [Behaviour.reply('<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", '
                                '"coordinate": [23'),
                Behaviour.reply('<tool_call>\n{"name": "mobile_use", "arguments": {}}\n</tool_call>')]
    bad: dict[str, list[Behaviour]] = {
        "agentcpm": [Behaviour.reply('{"thought":"点击搜索","POINT":[52'),
                     Behaviour.reply('{"thought":"输入","POINT":[500,500],"TYPE":"abc"}'),
                     Behaviour.reply('<think>先看看屏幕' + "。" * 3 + "</think>")],
        "glm": [Behaviour.reply('<answer>Memory: []\nReason: tap it\nAction: {"action_type": "click", '
                                '"box_2d": [['),
                Behaviour.reply("<answer>Memory: []\nReason: I should tap the button.</answer>"),
                Behaviour.reply('Action: {"action_type": "teleport"}')],
        "cogagent": [Behaviour.reply("Status: a list.\nPlan: tap it.\nAction: tap the button."),
                     Behaviour.reply("Action: tap it.\nGrounded Operation: CLICK(box=[[12,"),
                     Behaviour.reply("Action: right-click.\nGrounded Operation: RIGHT_CLICK(box=[[1,2,3,4]])")],
        "venus": [Behaviour.reply("<think>tap it</think>\n<action>Click(box=(</action>"),
                  Behaviour.reply("<think>I need to look at the screen.</think>"),
                  Behaviour.reply("<action>Teleport(place='home')</action>")],
        "gelab": [Behaviour.reply("<THINK> 点击 </THINK>\nexplain:点击\taction:CLICK\tpoint:\tsummary:x"),
                  Behaviour.reply("<THINK> 我需要先看一下屏幕上的内容"),
                  Behaviour.reply("<THINK> x </THINK>\nexplain:x\taction:FLY\tsummary:x")],
        "holo": [Behaviour.reply("I cannot find that element."), Behaviour.reply('{"x": 12'),
                 Behaviour.reply(loop)],
        "grounding": [Behaviour.reply("<|object_ref_start|>x<|object_ref_end|><|box_start|>(12,"),
                      Behaviour.reply("NONE"), Behaviour.reply("The element is at the top.")],
        "claude": [Behaviour.reply("I'll tap the button on the screen."),
                   Behaviour.tool_call("computer", json.dumps({"action": "mouse_move", "coordinate": [10, 10]})),
                   Behaviour.tool_call("computer", json.dumps({"action": "left_click"})),
                   Behaviour.tool_call("computer", '{"action": "left_cl')],
        "gemini": [Behaviour.tool_call("list_apps", "{}"),
                   Behaviour.tool_call("click_at", '{"x": 5'),
                   Behaviour.reply("I will click the button.")],
        "gui-owl": [*qwen_bad, Behaviour.reply("<thinking>\ntap it\n</thinking>\n<conclusion>\ntap\n</conclusion>")],
        "gui-owl-1.5": [*qwen_bad, Behaviour.reply("Action: tap the search box.")],
        "mai-ui": [*qwen_bad, Behaviour.reply("<thinking>\nI will tap the box.\n</thinking>")],
        "openai": [Behaviour.tool_call("computer", json.dumps({"actions": [{"type": "keypress", "keys": ["CTRL", "O"]}]})),
                   Behaviour.tool_call("computer", json.dumps({"actions": [{"type": "move", "x": 10, "y": 10}]})),
                   Behaviour.tool_call("computer", '{"actions": [{"type": "cli'),
                   Behaviour.reply("I clicked the button.")],
        "openai-preview": [Behaviour.tool_call("computer", json.dumps({"action": {"type": "click"}})),
                           Behaviour.tool_call("computer", json.dumps({"action": {"type": "keypress", "keys": ["ALT", "TAB"]}})),
                           Behaviour.reply("I will click the button.")],
        "opencua": [Behaviour.reply("## Action:\nClick the button.\n\n## Code:\n```python\npyautogui.hotkey('ctrl', 'o')\n```"),
                    Behaviour.reply("## Action:\nClick the button.\n\n## Code:\n```python\npyautogui.click(x=12,\n```"),
                    Behaviour.reply("## Thought:\nI need to look at the screen first."),
                    Behaviour.reply("## Code:\n```python\npyautogui.moveTo(x=10, y=10)\n```")],
        "uitars-doubao": [Behaviour.reply("Thought: tap it.\nAction：click(point='')"),
                          Behaviour.reply("Thought: tap it.\nAction："),
                          Behaviour.reply("Thought: " + loop)],
    }
    base = {"venus-1.0": "venus", "holo-1.5": "holo", "holo-1": "holo"}.get(key, key)
    return rng.choice(bad[base])


def focused_field(phone: SimPhone) -> Element | None:
    """The focused text field (where a typing answer that names a field points)."""
    return next((e for e in phone.elements() if e.editable and e.focused), None)


def open_app_step(phone: SimPhone, name: str) -> tuple[str, Element | None]:
    """The next step toward opening app ``name`` for a model with no open-app action
    (AgentCPM-GUI): tap its icon when it is on the screen ("tap"), else open the app
    drawer from the home screen or scroll it ("drawer"), else go home ("home")."""
    want = name.strip().lower()
    icons = [e for e in phone.elements() if e.kind == "app_icon" and e.text.strip().lower() == want]
    if icons:
        return "tap", icons[0]
    if phone.drawer_open() or phone.foreground() == phone.home_component().split("/")[0]:
        return "drawer", None
    return "home", None


MODELS.update({k: model for k, (_, model) in NEW_STANDINS.items()})
COORDINATE = (*COORDINATE, *NEW_STANDINS)
NO_ENTER = (*NO_ENTER, "gelab", *LOCALIZERS)  # GELab's prompt has no Enter; Holo only taps
# AgentCPM-GUI's schema has no open-app action (POINT, to, PRESS, TYPE, STATUS, duration):
# it opens an app by tapping its icon, from the home screen or the app drawer.
NO_OPEN: tuple[str, ...] = ("agentcpm", *LOCALIZERS)
# Pinned variant names that are a stand-in already listed.
ALIASES = {"uitars-1.5": "uitars", "qwen2.5": "qwen", "glm-cogagent": "cogagent"}


def family_list(spec: str) -> list[str]:
    """``--families``: comma-separated stand-in names (every registered family and variant,
    see ``MODELS``), pinned variant names (``uitars-1.5``, ``qwen2.5``), or ``all``."""
    out: list[str] = []
    for f in (x.strip().lower() for x in spec.split(",")):
        for name in (list(MODELS) if f == "all" else [ALIASES.get(f, f)] if f else []):
            if name not in out:
                out.append(name)
    return out


# AgentConfig is re-exported for callers that build one (tests)
__all__ = ["AgentConfig", "StandInModel", "StandInPolicy", "gpt4o_image_tokens", "main",
           "model_space"]

if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
