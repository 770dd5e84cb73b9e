"""Text surgery shared by every family's reply parser: what real model replies wrap around
the part that matters, and the small syntaxes (points, boxes, Python-style calls) they use.

Nothing here decides what an action means; each family does that. Everything here raises
``ParseError`` (from ``models.llm.errors``) with a message meant for re-asking the model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec

from models.llm.errors import ParseError
from protocol.operations import Operation

# Full-width and typographic punctuation models (CJK-trained ones above all) write in place
# of the ASCII the grammars use. Only punctuation: letters and CJK text are left as written.
_PUNCT = str.maketrans({
    "\uff1a": ":", "\uff08": "(", "\uff09": ")", "\uff0c": ",", "\u3001": ",", "\uff1d": "=",
    "\uff3b": "[", "\uff3d": "]", "\uff5b": "{", "\uff5d": "}", "\u201c": '"', "\u201d": '"',
    "\u2018": "'", "\u2019": "'", "\uff02": '"', "\uff07": "'", "\u3002": ".", "\uff1b": ";",
})


def normalize_punctuation(text: str) -> str:
    return text.translate(_PUNCT)


def original_spelling(value: str, original: str) -> str:
    """``value``, read from the normalised reply, as ``original`` spelled it: typed text and
    names keep their full-width commas and quotes ("你好，世界" must be typed as written).
    Normalising maps one character to one, so the last span of ``original`` whose normalised
    form is ``value`` is the one the parser read."""
    at = normalize_punctuation(original).rfind(value)
    return original[at:at + len(value)] if at >= 0 else value


# The operations' free-text fields (protocol.operations); positions and directions are
# vocabulary words, not text.
_TEXT_FIELDS = frozenset({"name", "text", "description", "question"})


def with_original_text(op: Operation, original: str) -> Operation:
    """``op`` with each free-text argument restored by ``original_spelling``."""
    changes = {
        f: original_spelling(v, original)
        for f in op.__struct_fields__
        if f in _TEXT_FIELDS and isinstance(v := getattr(op, f), str) and v
    }
    return msgspec.structs.replace(op, **changes) if changes else op



# Reasoning blocks: their content is prose that may mention actions and coordinates.
_THINK_TAGS = ("think", "thinking", "reasoning", "reflection")
# Wrappers whose content IS the answer: only the tags go.
_KEEP_TAGS = ("answer", "conclusion", "tool_call", "action", "output")
# Model vocabulary tokens that serving stacks leak into text, inside calls too
# (`click(start_box='<|box_start|>(1,2)<|box_end|>')`): removed wherever they stand, so no
# operation can carry one as its text.
SPECIAL_TOKENS = (
    "<|begin_of_box|>", "<|end_of_box|>", "<|box_start|>", "<|box_end|>", "<|im_end|>",
    "<|endoftext|>", "<|end|>",
)


def _in_argument(text: str, at: int) -> bool:
    """Whether ``at`` lies inside an open parenthesis of its line: there a tag is text the
    operation carries (``Type (<think>)``), not markup around the answer."""
    line = text[text.rfind("\n", 0, at) + 1:at]
    return line.count("(") > line.count(")")


def _markup(pattern: str, text: str) -> list[re.Match[str]]:
    return [m for m in re.finditer(pattern, text, flags=re.DOTALL | re.IGNORECASE)
            if not _in_argument(text, m.start())]


def _cut(text: str, spans: list[re.Match[str]]) -> str:
    for m in reversed(spans):
        text = text[:m.start()] + "\n" + text[m.end():]
    return text


def strip_reasoning(text: str) -> str:
    """Drop think blocks. A closed block goes whole; a closing tag with no opening one means
    everything before it was thinking; an opening tag never closed leaves the rest in place
    (the action is then found as the LAST structured call, after the prose). A tag inside an
    operation's parentheses is the operation's text and stays."""
    for tag in _THINK_TAGS:
        text = _cut(text, _markup(rf"<{tag}>.*?</{tag}>", text))
        closes = _markup(rf"</{tag}>", text)
        if closes:
            text = text[closes[-1].end():]
        text = _cut(text, _markup(rf"<{tag}>", text))
    return text


def strip_tags(text: str, *, keep_box_tokens: bool = False) -> str:
    """Remove wrapper tags that hold the answer, and the special box tokens (keeping what
    they enclose). A tag inside an operation's parentheses stays, as in strip_reasoning."""
    for tag in _KEEP_TAGS:
        text = _cut(text, _markup(rf"</?{tag}>", text))
    if not keep_box_tokens:
        for tok in SPECIAL_TOKENS:
            text = text.replace(tok, "")
    return text


def clean_reply(text: str) -> str:
    """Reasoning dropped, wrappers and box tokens removed, punctuation normalised."""
    return strip_tags(strip_reasoning(normalize_punctuation(text))).strip()


_NUM = r"-?\d+(?:\.\d+)?"


def parse_numbers(raw: str, what: str) -> list[float]:
    return [float(n) for n in re.findall(_NUM, raw)] if raw else []


def parse_point(raw: str, what: str = "point") -> tuple[float, float]:
    """``(x,y)``, ``[x, y]``, ``<point>x y</point>``, ``x,y``; a box (``<bbox>x1 y1 x2 y2</bbox>``,
    ``[x1, y1, x2, y2]``, ``(x1,y1,x2,y2)``) gives its centre. Anything else is unusable,
    including ``'='`` and an empty string."""
    nums = parse_numbers(raw, what)
    if len(nums) == 2:
        return nums[0], nums[1]
    if len(nums) == 4:
        return (nums[0] + nums[2]) / 2, (nums[1] + nums[3]) / 2
    shown = raw.strip()[:60]
    raise ParseError(
        f"could not read a {what} from {shown!r}: give it as (x,y) with two numbers", raw
    )


TRUNCATED = "\0truncated"  # a Call's text when its closing parenthesis is missing


class Call:
    """One Python-style call found in a reply: ``name(key='value', ...)``."""

    __slots__ = ("name", "args", "positional", "text")

    def __init__(self, name: str, args: dict[str, str], positional: str, text: str) -> None:
        self.name = name
        self.args = args
        self.positional = positional  # the argument text when it has no key=
        self.text = text

    @property
    def truncated(self) -> bool:
        """The call's closing ``)`` never came (a reply cut off mid-call)."""
        return self.text == TRUNCATED

    def __repr__(self) -> str:
        return f"Call({self.name!r}, {self.args!r})"


_KEY_RE = re.compile(r"(?:^|,)\s*([A-Za-z_]\w*)\s*=\s*")


def _unquote(v: str) -> str:
    v = v.strip().rstrip(",").strip()
    if len(v) >= 2 and v[0] in "'\"" and v[-1] == v[0]:
        return v[1:-1]
    if v[:1] in "'\"" and v[-1:] not in "'\"":
        return v[1:]  # opened and never closed
    return v


def parse_kwargs(argtext: str) -> tuple[dict[str, str], str]:
    """``key='v', other="w"`` -> ({key: v, other: w}, ""). A value runs to the next
    ``, key=``, so quotes the model left unescaped inside it (``message="say "hi""``) stay
    part of it. Without any ``key=`` the whole text is returned as the positional argument."""
    keys = list(_KEY_RE.finditer(argtext))
    # A key must sit at the start or after a comma that is outside the previous value's
    # quotes; an "=" inside a quoted value (``content='a=b'``) is no key: require that the
    # text before the match holds an even number of the value's quote characters.
    real = [m for m in keys if _outside_quotes(argtext, m.start())]
    if not real or real[0].start() != 0 and argtext[: real[0].start()].strip():
        return {}, _unquote(argtext)
    out: dict[str, str] = {}
    for k, m in enumerate(real):
        end = real[k + 1].start() if k + 1 < len(real) else len(argtext)
        out[m.group(1).lower()] = _unquote(argtext[m.end():end])
    return out, ""


def _outside_quotes(text: str, pos: int) -> bool:
    before = text[:pos]
    # the last "key=" before pos opened a value; count quotes after it
    last = list(_KEY_RE.finditer(before))
    seg = before[last[-1].end():] if last else before
    if not seg:
        return True
    q = seg.lstrip()[:1]
    if q not in ("'", '"'):
        return True
    # the value is closed when its last non-space character is the same quote
    return seg.rstrip().endswith(q) and len(seg.strip()) >= 2


def find_calls(text: str, names: Sequence[str]) -> list[Call]:
    """Every ``name(...)`` in ``text`` for the given names (case-insensitive), in order. The
    argument runs to the last ``)`` on the call's line: arguments may hold parentheses,
    and a call is one line. A call with no closing parenthesis is truncated: ParseError."""
    if not names:
        return []
    pattern = re.compile(
        r"(?<![\w.])(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
        + r")\s*\(",
        re.IGNORECASE,
    )
    calls: list[Call] = []
    for m in pattern.finditer(text):
        line_end = text.find("\n", m.end())
        line = text[m.end(): line_end if line_end >= 0 else len(text)]
        close = line.rfind(")")
        if close < 0:
            calls.append(Call(m.group(1).lower(), {}, "", TRUNCATED))
            continue
        argtext = line[:close]
        args, positional = parse_kwargs(argtext)
        calls.append(Call(m.group(1).lower(), args, positional, m.group(0) + line[: close + 1]))
    return calls


def last_call(text: str, names: Sequence[str], *, syntax: str) -> Call:
    calls = find_calls(text, names)
    if not calls:
        raise ParseError(f"no action call found. Answer with one action, e.g. {syntax}", text)
    call = calls[-1]
    if call.truncated:
        raise ParseError(f"the {call.name}(...) call is cut off: its closing ')' is missing", text)
    return call


def degenerate(text: str) -> str | None:
    """Why ``text`` is a degenerate reply (a looping model), or None. The same word over and
    over is the usual failure of small models at temperature 0."""
    words = re.findall(r"\w+", text.lower())
    if len(words) >= 8:
        top = max(words.count(w) for w in set(words))
        if top / len(words) > 0.6:
            return "the reply repeats the same word over and over"
    return None


def json_objects(text: str) -> list[dict[str, object]]:
    """Every top-level JSON object in ``text`` that decodes, in order (prose around them,
    code fences and tags are skipped)."""
    import msgspec  # local: only the JSON-speaking families need it

    decoder = msgspec.json.Decoder()
    out: list[dict[str, object]] = []
    pos = 0
    while True:
        start = text.find("{", pos)
        if start < 0:
            return out
        depth, end, quote, esc = 0, -1, False, False
        for k in range(start, len(text)):
            c = text[k]
            if quote:
                if esc:
                    esc = False
                elif c == "\\":
                    esc = True
                elif c == '"':
                    quote = False
            elif c == '"':
                quote = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    end = k + 1
                    break
        if end < 0:
            pos = start + 1
            continue
        try:
            obj = decoder.decode(text[start:end])
        except msgspec.DecodeError:
            pos = start + 1
            continue
        if isinstance(obj, dict):
            out.append(obj)
        pos = end


def label_re(word: str) -> re.Pattern[str]:
    """A ``Word: value`` answer line, the label perhaps in bold (``**Word:**``); group 1 is
    the value."""
    return re.compile(rf"^(?:\*\*|__)?{word}(?:\*\*|__)?\s*:(?:\*\*|__)?\s*(.*)$", re.IGNORECASE)


REASON_RE = label_re("reason")  # the completion check's and the judge's ``Reason:`` line


# A markdown code fence line, which answer parsers skip.
FENCE_RE = re.compile(r"^[ \t]*```[\w-]*[ \t]*$")
_WRAPPERS = ("```", "`", "**", "__")


def unwrap_answer(s: str) -> str:
    """An answer without the wrapping a model adds: one pair of backticks or ``**``, and
    one trailing period."""
    s = s.strip()
    for w in _WRAPPERS:
        if len(s) > 2 * len(w) and s.startswith(w) and s.endswith(w):
            s = s[len(w):-len(w)].strip()
            break
    # No canonical action ends with "." (arguments end with ")"), so this never eats text.
    if s.endswith("."):
        s = s[:-1].rstrip()
    return s


def kept_memory(text: str) -> str:
    """A ``Memory:`` field as kept: "" when it says there is nothing to keep."""
    flat = text.strip().strip(".").strip().lower()
    return "" if flat in ("", "none", "nothing", "n/a", "-", "no", "(none)", "nothing new") else text.strip()
