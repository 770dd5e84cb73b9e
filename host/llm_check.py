"""``mobagent llm check``: one call per configured role, to see that each answers and fits.

Each role (planner, chooser, reflector, and the grounder when it is configured: a
``perception.*_grounding`` that asks it, or ``[llm.roles.grounder]`` / ``llm.models.grounder``
set) gets one screenshot of the simulated launcher with its own prompt through the real
client and its settings (endpoint, key, model, request parameters, image size). The
planner's prompt, request options and parser are its model family's, picked as the agent
picks it (``llm.family.planner``, ``auto`` from the model name, the image fitted within the
role's ``max_image_side``), so a point in the reply is mapped to the launcher's pixels as
the agent would map it; the chooser and the completion check keep their prompts
(``models/llm/prompts/``) and answer in their role's family (``llm.family.chooser`` /
``.reflector``: a function or a JSON schema for tools / json, see
``models/llm/families/answers.py``); the grounder is asked for the Settings icon in its
family's grounding prompt (``models/llm/grounder.py``, as perception asks it). Per role it
prints: reachable or not (with the error, which names the endpoint and never the key), the
model, the family, the endpoint, latency, tokens, cost when priced, the reply (truncated),
whether it parsed and what it mapped to (the grounder's point: the launcher icon it falls
in). No re-asks: the point is to see the model's first answer.

Exit codes: 0 every role answered and parsed; 1 one did not; 2 a config error (no key).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import anyio
import msgspec
from PIL import Image, ImageDraw

from actors.config import AgentConfig
from actors.planner import RoleSetup
from models.llm import ChatMessage, LLMClient, LLMConfigError, LLMError, Role
from models.llm.errors import ParseError
from models.llm.families import Family, ToolCall
from models.llm.families.answers import AnswerFormat, answer_format
from models.llm.grounder import grounder_family, grounder_messages, parse_grounder_reply
from models.llm.prompts.chooser import chooser_messages, parse_choice
from models.llm.prompts.completion import completion_messages, parse_completion
from models.llm.prompts.planner import PlannerInput
from models.llm.settings import RoleModels, RoleSettings
from protocol.operations import format_operation
from runtime.cli import EXIT_FAIL, EXIT_OK, EXIT_USAGE, config_from_args
from runtime.config import secret_values
from runtime.log import configure_logging, redactor

ROLES: tuple[Role, ...] = ("planner", "chooser", "reflector")
ALL_ROLES: tuple[Role, ...] = (*ROLES, "grounder")
INSTRUCTION = "Open the Settings app."
GROUND_TARGET = "the Settings app icon"


def grounder_configured(cfg: AgentConfig) -> bool:
    """Whether the agent would ask a grounder (``perception.text_grounding`` /
    ``icon_grounding``), or its role is configured (``[llm.roles.grounder]``,
    ``llm.models.grounder``)."""
    return (cfg.perception.grounder_needed() or cfg.llm.roles.grounder != RoleSettings()
            or cfg.llm.models.grounder != RoleModels().grounder)


def default_roles(cfg: AgentConfig) -> tuple[Role, ...]:
    """The roles ``llm check`` probes by default: the grounder too when it is configured."""
    return ALL_ROLES if grounder_configured(cfg) else ROLES


@dataclass(frozen=True)
class Probe:
    """One role's prompt, its request options, and the parser of its reply (text and tool
    calls; the mapping printed as text)."""

    messages: list[ChatMessage]
    parse: Callable[[str, tuple[ToolCall, ...]], str]
    options: dict[str, Any] = field(default_factory=dict)
    answer: AnswerFormat | None = None  # the chooser's / reflector's: reads the reply back


@dataclass
class RoleResult:
    role: str
    model: str
    endpoint: str
    reachable: bool
    family: str = ""  # the role's model family ("" for react)
    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    reply: str = ""
    parsed: bool = False
    mapped: str = ""  # what the reply maps to, or why it does not parse
    error: str = ""
    # What the role's model cannot do in this role (a grounding-only model as the planner).
    warning: str = ""


def launcher_screen(seed: int = 0) -> tuple[bytes, list[tuple[str, tuple[int, int, int, int]]]]:
    """A PNG of the simulated phone's launcher and its labelled app icons (label, box)."""
    from sim.phone import SimPhone  # host may use the simulator; only this command needs it
    from sim.phone_api import DeviceInfo

    phone = SimPhone(DeviceInfo("llm-check"), seed=seed)
    phone.clock = lambda: 0.0  # no spinner or toast mid-render
    img = phone.screenshot().convert("RGB")
    icons = [(el.text, tuple(el.bbox)) for el in phone.elements()
             if el.kind == "app_icon" and el.text]
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue(), icons  # type: ignore[return-value]


def _marked(png: bytes, boxes: Sequence[tuple[int, int, int, int]]) -> bytes:
    """The screen with numbered boxes, the way perception marks an Ambiguous."""
    with Image.open(io.BytesIO(png)) as im:
        img = im.convert("RGB")
    draw = ImageDraw.Draw(img)
    for n, (x0, y0, x1, y1) in enumerate(boxes, start=1):
        draw.rectangle((x0, y0, x1, y1), outline=(255, 0, 0), width=6)
        draw.rectangle((x0, y0, x0 + 44, y0 + 44), fill=(255, 0, 0))
        draw.text((x0 + 14, y0 + 10), str(n), fill=(255, 255, 255))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def family_label(family: Family) -> str:
    """``uitars 1.5``, ``qwen 3``, ``react``: the family and the variant the model implies."""
    variant = getattr(family, "variant", "")
    return f"{family.name} {variant}" if variant else family.name


def probes(family: Family, seed: int = 0, role_families: dict[str, str] | None = None,
           grounder: Family | None = None) -> dict[Role, Probe]:
    """Each role's probe; the planner's in ``family`` (points mapped to the launcher's
    pixels from the image the family sends), the chooser's and the reflector's answers in
    ``role_families`` (default react); the grounder's (when ``grounder``, its family) asks
    for the Settings icon and says which icon its point falls in."""
    fams = role_families or {}
    png, icons = launcher_screen(seed)
    with Image.open(io.BytesIO(png)) as im:
        geom = family.geometry(*im.size)

    def plan(text: str, calls: tuple[ToolCall, ...]) -> str:
        return format_operation(family.parse(text, geom, calls).operation)

    # The chooser: "Settings" among two boxed icons, the target second (a guess says less).
    target = next((i for i in icons if i[0].lower() == "settings"), icons[0] if icons else None)
    other = next((i for i in icons if i is not target), None)
    boxed = [b for b in (other, target) if b is not None]
    labels = list(range(1, len(boxed) + 1))

    def choose(text: str, calls: tuple[ToolCall, ...]) -> str:
        label = parse_choice(text, labels)
        if label is None:
            return "none of the boxes"
        name = boxed[label - 1][0]
        return f"box {label} ({name}){'' if boxed[label - 1] is target else ' - not the target'}"

    def complete(text: str, calls: tuple[ToolCall, ...]) -> str:
        v = parse_completion(text)
        return f"complete: {'yes' if v.complete else 'no'}" + (f" ({v.reason})" if v.reason else "")

    chooser = answer_format(fams.get("chooser", "react"), "choice", labels)
    reflector = answer_format(fams.get("reflector", "react"), "completion")
    table: dict[Role, Probe] = {
        "planner": Probe(family.planner_messages(PlannerInput(instruction=INSTRUCTION,
                                                              screenshot=png), geom),
                         plan, family.request_options()),
        "chooser": Probe(chooser_messages(
            instruction=INSTRUCTION, target=target[0] if target else "Settings",
            image=_marked(png, [b[1] for b in boxed]), labels=labels,
            texts=[b[0] for b in boxed]), choose, chooser.options, chooser),
        "reflector": Probe(completion_messages(instruction=INSTRUCTION, history=(),
                                               screenshot=png), complete, reflector.options,
                           reflector),
    }
    if grounder is not None:
        table["grounder"] = grounder_probe(grounder, png, icons)
    return table


def grounder_probe(family: Family, png: bytes,
                   icons: Sequence[tuple[str, tuple[int, int, int, int]]]) -> Probe:
    """The grounder asked where the launcher's Settings icon is, as perception asks it."""
    with Image.open(io.BytesIO(png)) as im:
        size = im.size
    geom = family.geometry(*size)

    def ground(text: str, calls: tuple[ToolCall, ...]) -> str:
        got = parse_grounder_reply(text, geom, family)
        if got is None:
            return "not on the screen"
        x, y = got.point
        inside = next((name for name, (x0, y0, x1, y1) in icons
                       if x0 <= x <= x1 and y0 <= y <= y1), None)
        where = f"the {inside} icon" if inside else "no icon"
        miss = "" if inside is not None and inside.lower() == "settings" else " - not the target"
        return f"point ({x}, {y}): on {where}{miss}"

    return Probe(grounder_messages(family, geom, GROUND_TARGET, "", png), ground)


async def check_roles(llm: LLMClient, roles: Sequence[Role], *, seed: int = 0,
                      max_reply: int = 300, family: Family | None = None) -> list[RoleResult]:
    """Each role once, one after another (so latencies do not queue behind each other).
    ``family``: the planner's (None: exactly as the agent's planner picks it)."""
    setup = RoleSetup.from_settings(llm.settings, planner=family)
    fam, role_fams = setup.planner, {"chooser": setup.chooser, "reflector": setup.reflector}
    grounder = grounder_family(llm.settings) if "grounder" in roles else None
    if grounder is not None:
        role_fams["grounder"] = family_label(grounder)
    plan = await anyio.to_thread.run_sync(probes, fam, seed, role_fams, grounder)
    picked = family_label(fam)
    if llm.settings.family.planner.strip().lower() == "auto":
        picked += " (auto, from the model name)"
    out: list[RoleResult] = []
    for role in roles:
        rc = llm.role_config(role)
        probe = plan[role]
        own = str(getattr(llm.settings.family, role)).strip().lower()
        shown = picked if role == "planner" else (
            "" if role_fams[role] == "react" else
            role_fams[role] + (" (auto, from the model name)" if own == "auto" else ""))
        res = RoleResult(role=role, model=rc.model, endpoint=rc.endpoint, reachable=False,
                         family=shown,
                         warning=str(getattr(fam, "limitation", "")) if role == "planner" else "")
        t0 = time.monotonic()
        try:
            reply = await llm.chat(role, probe.messages, options=probe.options or None)
        except LLMError as exc:
            res.latency_s = time.monotonic() - t0
            res.error = f"{type(exc).__name__}: {exc}"
            out.append(res)
            continue
        res.reachable = True
        res.latency_s = reply.latency_s
        res.prompt_tokens, res.completion_tokens = reply.prompt_tokens, reply.completion_tokens
        res.cost_usd = reply.cost_usd
        calls = tuple(ToolCall(n, a) for n, a in reply.tool_calls)
        text = reply.text.strip() or "; ".join(f"{c.name}({c.arguments})" for c in calls)
        res.reply = text if len(text) <= max_reply else text[: max_reply - 1] + "…"
        try:
            read = probe.answer.text(reply) if probe.answer is not None else reply.text
            res.mapped = probe.parse(read, calls)
            res.parsed = True
        except ParseError as exc:
            res.mapped = exc.message
        out.append(res)
    return out


def human(res: RoleResult) -> str:
    head = f"{res.role:<9} {'reachable' if res.reachable else 'UNREACHABLE'}  model={res.model}"
    if res.family:
        head += f"  family={res.family}"
    head += f"  endpoint={res.endpoint}  latency={res.latency_s:.2f}s"
    if res.warning:
        head += f"\n  WARNING: the planner is {res.warning}"
    if not res.reachable:
        return f"{head}\n  error: {res.error}"
    cost = f"  cost=${res.cost_usd:.4f}" if res.cost_usd is not None else ""
    lines = [f"{head}  tokens={res.prompt_tokens}+{res.completion_tokens}{cost}"]
    lines.append("  reply: " + " | ".join(res.reply.splitlines()))
    mapped = " | ".join(res.mapped.splitlines())
    lines.append(f"  parsed: {'yes' if res.parsed else 'NO'} -> {mapped}")
    return "\n".join(lines)


def cmd_check(args: argparse.Namespace) -> int:
    cfg = config_from_args(args, AgentConfig, unknown_sections="ignore")
    configure_logging(msgspec.structs.replace(cfg.log, level="warning"), secret_values(cfg))
    roles = ([r.strip() for r in args.roles.split(",") if r.strip()] if args.roles is not None
             else list(default_roles(cfg)))
    bad = [r for r in roles if r not in ALL_ROLES]
    if bad or not roles:
        print(f"mobagent llm check: unknown role(s) {bad}; roles are {', '.join(ALL_ROLES)}",
              file=sys.stderr)
        return EXIT_USAGE
    # A check should answer in seconds, not sit out a long outage in the retry budget.
    settings = msgspec.structs.replace(cfg.llm, retry_budget_s=min(cfg.llm.retry_budget_s,
                                                                   args.budget_s))
    try:
        llm = LLMClient(settings)
    except LLMConfigError as exc:
        print(f"mobagent llm check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        family = RoleSetup.from_settings(llm.settings).planner  # as the agent picks it
        if "grounder" in roles:
            grounder_family(llm.settings)
    except ValueError as exc:
        print(f"mobagent llm check: llm.family: {exc}", file=sys.stderr)
        return EXIT_USAGE

    async def go() -> list[RoleResult]:
        async with llm:
            return await check_roles(llm, roles, seed=args.seed,
                                     max_reply=args.max_reply, family=family)

    results = anyio.run(go)
    scrub = redactor()
    for res in results:
        if args.json:
            row: dict[str, Any] = asdict(res)
            print(scrub.text(json.dumps(row, ensure_ascii=False)))
        else:
            print(scrub.text(human(res)))
    return EXIT_OK if all(r.reachable and r.parsed for r in results) else EXIT_FAIL


def add_check(llm_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = llm_sub.add_parser(
        "check", help="send each configured role one screenshot and show what it answers",
        description="One call per role with the simulated launcher's screenshot and the "
                    "role's prompt: reachable, model, latency, tokens, the reply, whether it "
                    "parsed and what it maps to. Exit 0 when every role answered usably.")
    p.add_argument("--roles", default=None,
                   help="comma-separated (default: planner, chooser, reflector, and the "
                        "grounder when it is configured)")
    p.add_argument("--seed", type=int, default=0, help="the simulated phone's seed")
    p.add_argument("--max-reply", type=int, default=300, help="characters of each reply shown")
    p.add_argument("--budget-s", type=float, default=20.0,
                   help="retry budget per call (at most llm.retry_budget_s)")
    p.add_argument("--json", action="store_true", help="one JSON object per role")
    p.set_defaults(func=cmd_check)
