"""``react``: Mobile-Agent's Observation / Thought / Action text (Mobile-Agent, Wang et al.
2024, github.com/X-PLUG/MobileAgent: an operation named by its target's text or icon, which
perception grounds), read tolerantly: its system prompt (``planner_system``), its action
grammar (``parse_operation``) and its reply parser (``parse_planner_reply``).

Coordinates: ``Tap (x, y)``, ``Long press (x, y)``, ``Swipe (x1, y1, x2, y2)`` are pixels of
the screenshot as sent (the client may downscale it), mapped back to the screen here.
Image: the screenshot as captured (the client applies ``max_image_side``).

The action grammar, one line, keywords case-insensitive::

    action    := nullary | keyword ws* "(" argument ")"
    nullary   := "Page up" | "Page down" | "Back" | "Exit" | "Wait" | "Stop"
    keyword   := "Open app" | "Click text" | "Click icon" | "Long press" | "Type"
               | "Swipe" | "Ask"

The argument is everything between the ``(`` after the keyword and the ``)`` that ends
the line (the outermost pair), so it may itself hold parentheses and commas, balanced or
not: ``Type (Hello, world (again))`` types ``Hello, world (again)``. Surrounding whitespace
in an argument is dropped. In ``Click icon (description, position)`` the LAST comma
separates the position, which must be one of ``POSITIONS`` (missing: ``center``).
``Swipe`` takes a direction. Cosmetics a model often adds are tolerated: one pair of
wrapping backticks or ``**``, and one trailing period. Anything else (an unknown keyword,
text after a nullary operation or after the closing parenthesis, a missing parenthesis)
is a ``ParseError`` whose message tells the model what to fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from models.llm.errors import ParseError
from models.llm.families.base import FamilyBase, FamilyReply, Geometry, ToolCall
from models.llm.messages import ChatMessage
from models.llm.opvocab import operation_from_call
from models.llm.prompts.planner import PlannerInput, planner_messages
from models.llm.replytext import (
    FENCE_RE,
    clean_reply,
    degenerate,
    kept_memory,
    unwrap_answer,
    with_original_text,
)
from protocol.operations import (
    DIRECTIONS,
    LINE_BREAKS,
    POSITIONS,
    Ask,
    Back,
    Clear,
    ClickIcon,
    ClickText,
    Direction,
    Enter,
    Exit,
    LongPress,
    LongPressPoint,
    Note,
    OpenApp,
    Operation,
    PageDown,
    PageUp,
    Position,
    Stop,
    Swipe,
    SwipePoints,
    TapPoint,
    TypeText,
    Wait,
    operation_problem,
)

# (syntax as taught, what it does); the order is the prompt's order.
OPERATION_GUIDE: tuple[tuple[str, str], ...] = (
    ("Open app (name)", "open the app whose icon label on the home screen is exactly `name`."),
    ("Click text (text)", "tap the place where `text` is written on the screen; copy the words "
                          "exactly as they appear."),
    ("Click icon (description, position)", "tap an icon that has no text. `description` says "
                                           "what it looks like (shape and colour, e.g. magnifying "
                                           "glass); `position` is where it is: one of "
                                           + ", ".join(POSITIONS) + "."),
    ("Long press (text)", "touch and hold the place where `text` is written."),
    ("Tap (x, y)", "tap the point x, y (pixels of the screenshot) when no text or icon "
                   "description names the target."),
    ("Long press (x, y)", "touch and hold the point x, y (pixels of the screenshot)."),
    ("Swipe (x1, y1, x2, y2)", "drag a finger from x1, y1 to x2, y2 (pixels of the screenshot), "
                               "e.g. to move a slider."),
    ("Type (text)", "type `text` into the input field that has the focus (tap the field first if "
                    "no field is focused)."),
    ("Page up", "scroll the content up, to see what is above."),
    ("Page down", "scroll the content down, to see what is below."),
    ("Swipe (direction)", "swipe the screen " + "/".join(DIRECTIONS) + ", e.g. to change "
                          "home-screen pages or dismiss a card."),
    ("Back", "go back to the previous screen."),
    ("Enter", "press the Enter key, e.g. to submit a search."),
    ("Clear", "empty the input field that has the focus (a field keeps its old text)."),
    ("Exit", "leave the app and go to the home screen."),
    ("Wait", "do nothing this step, because the screen is still loading."),
    ("Ask (question)", "ask the user a question when the instruction leaves a choice you cannot "
                       "make yourself."),
    ("Note (text)", "keep `text` for later steps (a price, a name, a date you will need in "
                    "another app); the phone is not touched."),
    ("Stop", "the instruction is fully done; end the task."),
)


_NULLARY: dict[str, Callable[[], Operation]] = {
    "page up": PageUp, "page down": PageDown, "back": Back, "exit": Exit, "wait": Wait,
    "stop": Stop, "enter": Enter, "clear": Clear,
}


_UNARY_SYNTAX: dict[str, str] = {
    "open app": "Open app (name)", "click text": "Click text (text)",
    "click icon": "Click icon (description, position)", "long press": "Long press (text)",
    "type": "Type (text)", "swipe": "Swipe (direction)", "ask": "Ask (question)",
    "tap": "Tap (x, y)", "note": "Note (text)",
}


_NULLARY_SYNTAX = {k: k.capitalize() for k in _NULLARY}


# Longest keywords first; a keyword must end at a non-word character ("Typed" is no "Type").
_KEYWORD_RE = re.compile(
    r"(open\s+app|click\s+text|click\s+icon|long\s+press|page\s+up|page\s+down"
    r"|type|swipe|back|exit|wait|ask|stop|enter|clear|tap|note)(?!\w)",
    re.IGNORECASE,
)


# Phrasings models use for the canonical keywords, rewritten before the grammar applies.
# Anchored at the start of the action and ending at a non-word character.
_SYNONYMS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(rf"^(?:{pat})(?!\w)", re.IGNORECASE), canon)
    for pat, canon in (
        (r"(?:click|tap)\s+(?:on\s+)?(?:the\s+)?text", "Click text"),
        (r"(?:click|tap)\s+(?:on\s+)?(?:the\s+)?icon", "Click icon"),
        (r"(?:open|launch|start)\s+(?:the\s+)?app(?:lication)?|launch", "Open app"),
        (r"scroll\s+down", "Page down"),
        (r"scroll\s+up", "Page up"),
        (r"(?:go|press|navigate)\s+back", "Back"),
        (r"(?:go|press|return)\s+(?:to\s+(?:the\s+)?)?home(?:\s+screen)?|home", "Exit"),
        (r"press\s+(?:the\s+)?enter(?:\s+key)?", "Enter"),
        (r"clear\s+(?:the\s+)?(?:text|field|input|search)(?:\s+(?:field|box|bar))?", "Clear"),
        (r"long[\s-]+(?:press|tap)|press\s+and\s+hold", "Long press"),
        (r"click(?:\s+on)?|tap\s+on", "Tap"),
        (r"(?:finish|done|task\s+complete)", "Stop"),
    )
)


_POINT_ARG_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*$")


_SWIPE_ARG_RE = re.compile(r"^\s*" + r"\s*,\s*".join([r"(-?\d+(?:\.\d+)?)"] * 4) + r"\s*$")


_QUOTES = ("\"", "'", "`")


def _synonym(s: str) -> str:
    for pat, canon in _SYNONYMS:
        m = pat.match(s)
        if m is not None:
            return canon + s[m.end():]
    return s


def _unquote(arg: str) -> str:
    """``"hello"`` -> ``hello``: a model quoting its argument does not mean to type quotes."""
    if len(arg) >= 2 and arg[0] in _QUOTES and arg[-1] == arg[0]:
        return arg[1:-1].strip()
    return arg


_SYNTAX_LIST = "; ".join(s for s, _ in OPERATION_GUIDE)


def _shown(text: str) -> str:
    """``text`` as an error message quotes it: at most 80 characters (the message goes
    back to the model, so a hostile reply must not grow the next prompt)."""
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _unknown(action: str) -> ParseError:
    shown = action if len(action) <= 80 else action[:77] + "..."
    return ParseError(
        f"unknown operation {shown!r}. The action must be exactly one of: {_SYNTAX_LIST}",
        action,
    )


_POSITION_WORDS = {"upper": "top", "lower": "bottom", "middle": "center", "centre": "center"}


def _norm_choice(value: str) -> str:
    words = value.replace("-", " ").replace("_", " ").lower().split()
    return " ".join(_POSITION_WORDS.get(w, w) for w in words)


def _position(raw: str, action: str) -> Position:
    norm = _norm_choice(raw)
    for p in POSITIONS:
        if p == norm:
            return p
    raise ParseError(
        f"unknown position {raw.strip()!r} in {action!r}. After the last comma of Click icon "
        f"comes one of: {', '.join(POSITIONS)}",
        action,
    )


def _direction(raw: str, action: str) -> Direction:
    norm = _norm_choice(raw)
    for d in DIRECTIONS:
        if d == norm:
            return d
    raise ParseError(
        f"unknown direction {raw.strip()!r} in {action!r}: use Swipe (left), Swipe (right), "
        "Swipe (up) or Swipe (down)",
        action,
    )


def parse_operation(action: str) -> Operation:
    """One action in the grammar above -> an ``Operation``; anything else -> ``ParseError``."""
    s = unwrap_answer(action)
    if not s:
        raise ParseError(f"the action is empty. It must be exactly one of: {_SYNTAX_LIST}", action)
    if any(c in LINE_BREAKS for c in s):
        raise ParseError("the action must be on one line", action)
    s = _synonym(s)
    m = _KEYWORD_RE.match(s)
    if m is None:
        raise _unknown(s)
    keyword = " ".join(m.group(1).lower().split())
    rest = s[m.end():]
    if keyword == "swipe" and rest.strip().lower() in DIRECTIONS:  # "Swipe up"
        return Swipe(_direction(rest, s))
    submit = False
    if keyword == "type":  # "Type (text) + Enter": type, then submit
        t = re.sub(r"\s*\+\s*enter\s*$", "", rest, flags=re.IGNORECASE)
        submit, rest = t != rest, t

    if keyword in _NULLARY:
        if rest.strip():
            raise ParseError(
                f"{_NULLARY_SYNTAX[keyword]} takes no argument and nothing may follow it; got "
                f"{rest.strip()!r} in {_shown(s)}. Give exactly one action.",
                action,
            )
        return _NULLARY[keyword]()

    syntax = _UNARY_SYNTAX[keyword]
    r = rest.strip()
    if not r:
        raise ParseError(f"{syntax.split(' (')[0]} needs its argument: write {syntax}", action)
    if not r.startswith("("):
        raise ParseError(f"expected '(' after {syntax.split(' (')[0]!r} in {_shown(s)}: write {syntax}", action)
    if not r.endswith(")"):
        close = r.rfind(")")
        if close < 0:
            raise ParseError(f"unbalanced parentheses in {_shown(s)}: the closing ')' is "
                             "missing", action)
        raise ParseError(
            f"unexpected text {_shown(r[close + 1:].strip())} after the closing ')' in "
            f"{_shown(s)}. "
            "Give exactly one action and nothing after it.",
            action,
        )
    arg = _unquote(r[1:-1].strip())
    if not arg:
        raise ParseError(f"empty argument in {_shown(s)}: write {syntax}", action)

    op: Operation
    point = _POINT_ARG_RE.match(arg)
    if keyword in ("tap", "click text") and point is not None:
        op = TapPoint(round(float(point.group(1))), round(float(point.group(2))))
    elif keyword == "long press" and point is not None:
        op = LongPressPoint(round(float(point.group(1))), round(float(point.group(2))))
    elif keyword == "swipe" and (four := _SWIPE_ARG_RE.match(arg)) is not None:
        op = SwipePoints(*(round(float(g)) for g in four.groups()))
    elif keyword == "tap":  # Tap (Save): a target named in words
        op = ClickText(arg)
    elif keyword == "open app":
        op = OpenApp(arg)
    elif keyword == "click text":
        op = ClickText(arg)
    elif keyword == "long press":
        op = LongPress(arg)
    elif keyword == "type":
        op = TypeText(arg, submit=submit)
    elif keyword == "ask":
        op = Ask(arg)
    elif keyword == "note":
        op = Note(arg)
    elif keyword == "swipe":
        op = Swipe(_direction(arg, s))
    else:  # click icon: the last comma separates the position
        desc, comma, pos = arg.rpartition(",")
        if not comma:
            op = ClickIcon(arg, "center")
        else:
            if not desc.strip():
                raise ParseError(f"the icon description is empty in {_shown(s)}: write {syntax}", action)
            op = ClickIcon(desc.strip(), _position(pos, s))
    problem = operation_problem(op)
    if problem is not None:
        raise ParseError(f"{problem} in {_shown(s)}", action)
    return op


class PlannerReply(msgspec.Struct, frozen=True):
    observation: str
    thought: str
    action: Operation
    action_text: str  # the Action line as the model wrote it
    summary: str = ""  # a trailing "Summary:" (Mobile-Agent-v2 style memory), kept
    progress: str = ""  # a trailing "Progress:" line, kept
    memory: str = ""  # a trailing "Memory:" line (focus content to keep), kept
    dropped: tuple[str, ...] = ()  # actions after the first in the reply: not run


# A label line: "Action: ...", "**Action:** ...", "## Action", "### Action ###" (content on
# the following lines). Full-width colons are normalised before this applies.
_LABEL_RE = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?(observation|thoughts?|action|summary|progress|memory)"
    r"[ \t]*(?:(?:\*\*|__)[ \t]*)?(?::|#{1,6}[ \t]*$|$)(?:\*\*|__)?[ \t]*(.*)$",
    re.IGNORECASE,
)




_TRAILING = ("summary", "progress", "memory")


_FORMAT_HINT = (
    "Reply in exactly this format:\nObservation: <what the screen shows>\n"
    "Thought: <what to do next and why>\nAction: <one operation>"
)


def _pair(v: object) -> list[float] | None:
    if isinstance(v, list | tuple) and len(v) == 2 and all(
        isinstance(n, int | float) and not isinstance(n, bool) for n in v
    ):
        return [float(n) for n in v]
    return None


def _with_xy(args: dict[str, Any]) -> dict[str, Any]:
    """Qwen-VL's ``mobile_use`` arguments in a JSON action (``{"action": "click",
    "coordinate": [x, y]}``, a swipe's ``coordinate2``) as the vocabulary's x, y / x1..y2."""
    a, b = _pair(args.get("coordinate")), _pair(args.get("coordinate2") or args.get("end_coordinate"))
    if a is None or "x" in args or "x1" in args:
        return args
    if b is not None:
        return {**args, "x1": a[0], "y1": a[1], "x2": b[0], "y2": b[1]}
    return {**args, "x": a[0], "y": a[1]}


def _json_action(text: str) -> tuple[Operation, str] | None:
    """The last JSON object in ``text`` that has an "action" key (or "op", as ``llm parse``
    and the json family write it), as an operation: ``{"action": "Click text (Save)"}`` or
    ``{"action": "click_text", "text": "Save"}`` (arguments beside it or under
    "args"/"arguments"/"params")."""
    decoder = msgspec.json.Decoder()
    found: tuple[Operation, str] | None = None
    for m in re.finditer(r"\{", text):
        depth, end = 0, -1
        for k in range(m.start(), len(text)):
            if text[k] == "{":
                depth += 1
            elif text[k] == "}":
                depth -= 1
                if depth == 0:
                    end = k + 1
                    break
        if end < 0:
            continue
        try:
            obj = decoder.decode(text[m.start():end])
        except msgspec.DecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        named = "action" if isinstance(obj.get("action"), str) else "op"
        if not isinstance(obj.get(named), str):
            continue
        name = obj[named].strip()
        args: dict[str, Any] = obj
        for key in ("args", "arguments", "params", "parameters"):
            if isinstance(obj.get(key), dict):
                args = obj[key]
        try:
            op = parse_operation(name)  # a whole operation as text
        except ParseError:
            op = operation_from_call(name, _with_xy(args))
        found = (op, name)
    return found


def parse_planner_reply(text: str) -> PlannerReply:
    """A ReAct reply, read the way real models write it.

    Think blocks and ``<answer>``-style wrappers are dropped, full-width punctuation is
    normalised, labels may be markdown (``**Action:**``, ``### Action ###``). The LAST
    ``Action`` label wins (an "Action:" mentioned earlier in prose is not the answer); its
    operation is on the label's line or the next one. Observation and Thought are the last
    such sections before it (empty when missing). ``Summary:``/``Progress:`` after the action
    are kept as fields; any other text after the action is an error (it is often a second
    action). Without an Action label, a JSON object with an "action" key is accepted."""
    why = degenerate(text)
    if why is not None:
        raise ParseError(f"{why}. {_FORMAT_HINT}", text)
    cleaned = clean_reply(text)
    lines = [ln for ln in cleaned.splitlines() if not FENCE_RE.match(ln)]
    found: list[tuple[str, int, str]] = []  # (label, line index, rest of the line)
    for i, line in enumerate(lines):
        m = _LABEL_RE.match(line)
        if m:
            word = m.group(1).lower()
            label = "thought" if word.startswith("thought") else word
            found.append((label, i, m.group(2)))
    actions = [k for k, f in enumerate(found) if f[0] == "action"]
    if not actions:
        js = _json_action(cleaned)
        if js is not None:
            return PlannerReply("", "", js[0], js[1])
        raise ParseError(f"no 'Action:' line. {_FORMAT_HINT}", text)
    ai = actions[-1]

    def section(k: int) -> str:
        _, start, first = found[k]
        end = found[k + 1][1] if k + 1 < len(found) else len(lines)
        body = [first, *lines[start + 1:end]]
        return "\n".join(body).strip()

    def last_before(label: str) -> str:
        ks = [k for k in range(ai) if found[k][0] == label]
        return section(ks[-1]) if ks else ""

    _, a_line, a_first = found[ai]
    end = found[ai + 1][1] if ai + 1 < len(found) else len(lines)
    after = [ln.strip() for ln in lines[a_line + 1:end] if ln.strip()]
    action_text = a_first.strip()
    if not action_text:
        if not after:
            raise ParseError("the Action line is empty: give one operation after 'Action:'", text)
        action_text, after = after[0], after[1:]
    trailing = found[ai + 1:]
    if after or any(f[0] not in _TRAILING for f in trailing):
        extra = after[0] if after else lines[trailing[0][1]].strip()
        raise ParseError(
            f"unexpected text after the action: {extra[:80]!r}. The reply must end with the "
            "single Action line (Progress: and Memory: lines may follow it).",
            text,
        )
    fields = {f[0]: section(k) for k, f in enumerate(found) if k > ai}
    for label in _TRAILING:  # also accepted before the Action (models put them either side)
        fields.setdefault(label, last_before(label))
    if action_text.lstrip().startswith("{"):
        js = _json_action(action_text)
        if js is None:
            raise ParseError(f"could not read the JSON action {action_text[:80]!r}", text)
        op = js[0]
    else:
        op = parse_operation(action_text)
    op = with_original_text(op, text)
    return PlannerReply(
        last_before("observation"), last_before("thought"), op, action_text,
        summary=fields["summary"], progress=fields["progress"], memory=kept_memory(fields["memory"]),
    )


_GUIDE_NO_NOTE = tuple(g for g in OPERATION_GUIDE if not g[0].startswith("Note"))


def planner_system(*, progress: bool = False, memory: bool = False) -> str:
    """The planner's system prompt; ``progress`` / ``memory`` ask for the trailing
    ``Progress:`` / ``Memory:`` lines (and ``memory`` teaches ``Note (text)``)."""
    guide = OPERATION_GUIDE if memory else _GUIDE_NO_NOTE
    fmt = (
        "Observation: <what the current screen shows that matters for the instruction>\n"
        "Thought: <what the next step must be, and why>\n"
        "Action: <one action from the list>"
    )
    tail = ""
    if progress:
        fmt += "\nProgress: <what is done so far, this action included, and what remains>"
    if memory:
        fmt += ("\nMemory: <content on this screen that a later step will need (a price, a "
                "name, a time), or None>")
    if progress or memory:
        tail = ("\n\nThe lines after the Action are kept for the next turns: the progress "
                "replaces the previous one, memory is added to your notes.")
    return (
        "You operate an Android phone on behalf of a user. Each turn you get the user's "
        "instruction, what was done so far, and a screenshot of the phone as it is now. You "
        "choose the single next action.\n\n"
        "Actions (write the chosen one exactly in this syntax):\n"
        + "\n".join(f"- {syntax}: {what}" for syntax, what in guide)
        + "\n\nArgument rules: put the argument in parentheses right after the action's name, "
        "and write nothing after the closing parenthesis. An argument may contain commas and "
        "parentheses; in Click icon the last comma separates the position.\n\n"
        + ("Reply in exactly this format, with nothing after the Action line:\n"
           if not (progress or memory) else "Reply in exactly this format:\n")
        + fmt + tail
    )


PLANNER_SYSTEM = planner_system()


def react_planner_messages(inp: PlannerInput, *, keep_screenshots: int = 1,
                           max_history: int = 30) -> list[ChatMessage]:
    """The planner's prompt under the ReAct system prompt."""
    system = planner_system(progress=inp.reply_progress, memory=inp.reply_memory)
    return planner_messages(inp, keep_screenshots=keep_screenshots, max_history=max_history,
                            system=system)


class ReactFamily(FamilyBase):
    name = "react"

    def planner_messages(
        self, inp: PlannerInput, geom: Geometry, *, keep_screenshots: int = 1
    ) -> list[ChatMessage]:
        return react_planner_messages(inp, keep_screenshots=keep_screenshots)

    def parse_model(self, text: str, tool_calls: Sequence[ToolCall]) -> FamilyReply:
        if not text.strip():
            raise ParseError("the reply is empty: answer in the Observation/Thought/Action format")
        r = parse_planner_reply(text)
        return FamilyReply(r.action, r.thought, r.action_text, r.summary, r.observation,
                           progress=r.progress, memory=r.memory)
