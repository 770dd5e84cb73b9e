"""Grounding: turn `Click text (T)` / `Click icon (description, position)` into a screen point.

The LLM never gives coordinates; this module finds them on a frame and answers with one of
the protocol's grounding messages (`protocol.messages.GroundResult`, frame id left to the
caller):
- `Grounded`: one confident match, with the point to tap, the evidence box and how it matched;
- `Ambiguous`: several candidates, or one uncertain one, numbered and drawn on ONE image (plus a
  crop each), for the planner to choose from (or reject) in one LLM call (Mobile-Agent's
  approach); `reason` says why it could not pick;
- `NotFound`: nothing matched; `closest` lists what is on screen so the LLM can correct itself.

`Perception` is the facade the perception engine and the benchmarks call: thread-safe, one
per host, caching OCR and icon proposals per frame.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Literal, Protocol, TypeVar

import cv2
import msgspec
import numpy as np
from cachetools import LRUCache
from PIL import Image, ImageDraw, ImageFont

from devices.codecs import encode_jpeg, encode_png
from models.detector import (
    Detector,
    DetectorSettings,
    Proposal,
    dedupe,
    drawn_rows,
    drop_large,
    filter_by_position,
    make_detector,
    position_region,
)
from models.icons import IconScores
from models.ocr import (
    ImageInput,
    LineFilter,
    Ocr,
    OcrCache,
    OcrCacheSettings,
    OcrLine,
    OcrResult,
    OcrSettings,
    to_bgr,
)
from models.providers import resolve as resolve_providers
from protocol.messages import Ambiguous, Box, Candidate, Grounded, GroundResult, NotFound
from runtime.cpu_ledger import stage

# -- results: the protocol's answers (Grounded | Ambiguous | NotFound), frame id left "" -----

Rect = tuple[float, float, float, float]  # a screen rectangle as OCR and detection find it
Point = tuple[int, int]


def pixel_box(rect: Rect) -> Box:
    """``rect`` as the protocol's ``Box``: whole pixels, none negative."""
    return Box(max(0, int(rect[0])), max(0, int(rect[1])), max(0, int(rect[2])),
               max(0, int(rect[3])))


def grounded(rect: Rect, source: str, score: float = 1.0,
             point: Point | None = None) -> Grounded:
    """The answer for one confident target: ``point`` (the centre of ``rect`` by default) in
    ``rect``, found by ``source``; the frame id is the caller's to fill in."""
    x, y = point if point is not None else box_center(rect)
    return Grounded(frame_id="", x=max(0, int(x)), y=max(0, int(y)), box=pixel_box(rect),
                    source=source, score=float(score))


# -- settings --------------------------------------------------------------------------------


class TextMatchSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    fuzzy_min: float = 0.75  # similarity (0..1) below which a line is not a fuzzy match
    fuzzy_margin: float = 0.08  # the best fuzzy match must beat the next by this much
    # Without an exact line match, a match is only Grounded when it is unique and strong (see
    # `match_text`); otherwise it is Ambiguous, so the planner confirms it or says none fits.
    confident_fuzzy: float = 0.9  # a unique whole-line fuzzy match at least this similar
    # A unique whole-word match is Grounded when the rest of its line is at most this share
    # of the query's length (normalised characters): "Inbox 3" for "Inbox", not "10:30" for "10".
    word_extra_frac: float = 0.25
    # ... and so is a unique whole-word match of a query at least this long (normalised
    # characters), however long its line: a link in a paragraph or a name in a flowing list
    # ("Soomaaliga" in "Soomaaliga shqip srpski"). 0: off.
    word_certain_len: int = 6
    max_candidates: int = 6  # Ambiguous shows at most this many
    closest: int = 5  # NotFound lists this many texts
    merge_row_gap: float = 1.2  # lines on one row closer than this many line heights are joined


class IconSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    max_area_frac: float = 0.05  # Mobile-Agent drops boxes over 5 % of the screen
    status_bar_frac: float = 0.0375  # icons centred in the status bar (24 dp) are never targets
    dedupe_iou: float = 0.5
    min_score: float = 0.75  # below: never a confident pick (right picks on Rico score >= 0.88)
    margin: float = 0.06  # best minus second best needed for a confident pick
    # A confident pick must also look more like the description than like any unrelated one,
    # by this much on its own crop (the matcher's `IconScores.margins`): the best of the
    # few boxes a position filter leaves is otherwise any icon ("thumb up" on a back arrow).
    rival_margin: float = 0.05
    top_k: int = 5
    max_match: int = 96  # at most this many boxes (best proposal scores) go to the matcher
    matcher: Literal["auto", "material", "clip", "none"] = "auto"


GroundingMode = Literal["ocr", "model", "hybrid"]


class PerceptionSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    ocr: OcrSettings = msgspec.field(default_factory=OcrSettings)
    # how a phone's frame that changed in places is re-read (models/ocr.py, OcrCache)
    ocr_cache: OcrCacheSettings = msgspec.field(default_factory=OcrCacheSettings)
    text: TextMatchSettings = msgspec.field(default_factory=TextMatchSettings)
    icons: IconSettings = msgspec.field(default_factory=IconSettings)
    detector: DetectorSettings = msgspec.field(default_factory=DetectorSettings)
    clip_dir: str = ""  # a folder with image.onnx, text.onnx and the BPE vocab; empty: no CLIP
    # onnxruntime execution providers for OCR, the ONNX detector and CLIP, in order; empty:
    # CUDA when present, else CPU. One asked for but missing fails at start
    # (models/providers.py), unless allow_cpu_fallback.
    providers: tuple[str, ...] = ()
    allow_cpu_fallback: bool = False
    cache_frames: int = 32
    timeout_s: float = 30.0
    # Who grounds a named target: "ocr" (OCR lines / icon proposals and the matcher, no
    # model), "model" (the llm.roles.grounder model alone) or "hybrid" (OCR and the matcher
    # first; the grounder for an Ambiguous or NotFound answer, and for every icon; its point
    # snaps to the OCR line or icon box it falls in; an exact OCR text match outranks it).
    text_grounding: GroundingMode = "ocr"
    icon_grounding: GroundingMode = "ocr"
    # A text grounding on a phone's frame nobody has read yet recognises first the lines
    # long enough and short enough to be its query exactly (``exact_line_fits``), and the
    # rest only when none of those is: the same answer as a whole-frame read's (an exact
    # line decides alone), for less of the recogniser. The lines left unread are read when
    # something needs the whole frame's text.
    query_first: bool = True

    def grounder_needed(self) -> bool:
        return self.text_grounding != "ocr" or self.icon_grounding != "ocr"


# -- text normalisation ----------------------------------------------------------------------


def normalize(text: str) -> tuple[str, list[int]]:
    """Case-folded, NFKC (full-width -> ASCII) text without spaces, punctuation or accents.

    Returns the normalised string and, for each of its characters, the index of the
    original character it came from (so that a match can be mapped back to char boxes).
    Spaces are dropped because OCR loses them in small text ("Other modules" -> "Othermodules").
    Accents on Latin, Greek and Cyrillic letters are dropped because the recogniser often
    misses them ("Français" is read "Francais"); other scripts keep their marks.
    """
    out: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        folded = unicodedata.normalize("NFKC", ch).casefold()
        if folded and ord(folded[0]) < 0x0530:
            folded = "".join(c for c in unicodedata.normalize("NFD", folded)
                             if unicodedata.category(c) != "Mn")
        for c in folded:
            cat = unicodedata.category(c)
            # Punctuation, separators, controls and marks such as (R)/(TM) are dropped;
            # currency and math signs ($, +) stay: they carry meaning.
            if cat[0] in "PZC" or cat in ("So", "Sk") or c.isspace():
                continue
            out.append(c)
            index.append(i)
    return "".join(out), index


# Marks that apps draw in several look-alike forms (a separator bullet, a minus sign): folded
# to one form each, so that a query made only of them ("•", "-") can still be matched.
_SYMBOL_FORMS = str.maketrans({**{c: "·" for c in "•·∙・‧⋅●◦"},
                               **{c: "-" for c in "‐‑‒–—―−﹣－"}})


def normalize_symbols(text: str) -> tuple[str, list[int]]:
    """For a query that `normalize` empties (punctuation only): the text with only spaces
    dropped and look-alike marks folded, with the index map `normalize` also returns."""
    out: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        for c in unicodedata.normalize("NFKC", ch).casefold().translate(_SYMBOL_FORMS):
            if not c.isspace():
                out.append(c)
                index.append(i)
    return "".join(out), index


_ELLIPSIS = re.compile(r"\s*(?:\.{2,}|…+)\s*$")


_CONFUSABLES = str.maketrans({"o": "0", "l": "1", "i": "1", "|": "1"})


def fold_confusables(norm: str) -> str:
    """Map characters OCR confuses (O/0, l/1/I) to one form; used for a second exact pass."""
    return norm.translate(_CONFUSABLES)


def similarity(a: str, b: str) -> float:
    if not a or not b:
        return 0.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def best_window(query: str, text: str) -> tuple[float, int, int]:
    """The best fuzzy match of `query` inside a longer `text`: (similarity, start, end)."""
    n, m = len(query), len(text)
    if m <= n:
        return similarity(query, text), 0, m
    best = (0.0, 0, m)
    for width in {max(1, n - 1), n, n + 1}:
        for s in range(0, m - width + 1):
            r = similarity(query, text[s : s + width])
            if r > best[0]:
                best = (r, s, s + width)
    return best


# -- drawing ---------------------------------------------------------------------------------

_FONT_CANDIDATES = (
    "/usr/share/fonts/truetype/roboto/unhinted/RobotoTTF/Roboto-Bold.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
)


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    for path in _FONT_CANDIDATES:
        try:
            return ImageFont.truetype(path, size)
        except OSError:
            continue
    return ImageFont.load_default()


def mark_candidates(rgb: np.ndarray, boxes: Sequence[Rect], quality: int = 85) -> bytes:
    """The frame as JPEG with each box outlined and numbered 1..n."""
    with stage("encode"):
        return _mark_candidates(rgb, boxes, quality)


def _mark_candidates(rgb: np.ndarray, boxes: Sequence[Rect], quality: int) -> bytes:
    img = Image.fromarray(rgb)
    draw = ImageDraw.Draw(img)
    w = img.width
    line_w = max(2, w // 270)
    font = _font(max(14, w // 30))
    colors = ((230, 25, 75), (0, 130, 200), (60, 180, 75), (245, 130, 48), (145, 30, 180),
              (70, 240, 240), (240, 50, 230), (128, 128, 0))
    for i, box in enumerate(boxes):
        color = colors[i % len(colors)]
        x1, y1, x2, y2 = (int(round(v)) for v in box)
        draw.rectangle((x1, y1, x2, y2), outline=color, width=line_w)
        label = str(i + 1)
        tb = draw.textbbox((0, 0), label, font=font)
        tw, th = tb[2] - tb[0] + 2 * line_w, tb[3] - tb[1] + 2 * line_w
        lx, ly = x1, y1 - th if y1 - th >= 0 else y2
        ly = min(ly, img.height - th)
        draw.rectangle((lx, ly, lx + tw, ly + th), fill=color)
        draw.text((lx + line_w - tb[0], ly + line_w - tb[1]), label, fill=(255, 255, 255), font=font)
    return encode_jpeg(np.asarray(img), quality)


def crop_png(rgb: np.ndarray, box: Rect, pad_frac: float = 0.15) -> bytes:
    h, w = rgb.shape[:2]
    x1, y1, x2, y2 = box
    px, py = (x2 - x1) * pad_frac + 4, (y2 - y1) * pad_frac + 4
    xa, ya = max(0, int(x1 - px)), max(0, int(y1 - py))
    xb, yb = min(w, int(x2 + px) + 1), min(h, int(y2 + py) + 1)
    if xb <= xa or yb <= ya:
        return b""
    with stage("encode"):
        return encode_png(rgb[ya:yb, xa:xb])


def box_center(box: Rect) -> Point:
    return (int(round((box[0] + box[2]) / 2)), int(round((box[1] + box[3]) / 2)))


# -- text grounding --------------------------------------------------------------------------


class TextMatch(msgspec.Struct, frozen=True):
    box: Rect
    label: str
    score: float
    method: str
    certain: bool = True  # False: a word/fuzzy match that the planner should confirm


def _row_groups(lines: Sequence[OcrLine], gap: float) -> list[OcrLine]:
    """Neighbouring lines on one row joined into one, so that a phrase split by the detector
    ("Sign" | "in") still matches; only the joined lines (2+ parts) are returned."""
    joined: list[OcrLine] = []
    ordered = sorted(lines, key=lambda ln: (ln.box[1], ln.box[0]))
    used = [False] * len(ordered)
    for i, a in enumerate(ordered):
        if used[i]:
            continue
        row = [a]
        for j in range(i + 1, len(ordered)):
            b, last = ordered[j], row[-1]
            lh = max(1.0, last.box[3] - last.box[1])
            same_row = abs(((b.box[1] + b.box[3]) / 2) - ((last.box[1] + last.box[3]) / 2)) < lh * 0.5
            if same_row and 0 <= b.box[0] - last.box[2] < lh * gap:
                row.append(b)
                used[j] = True
        if len(row) > 1:
            text = " ".join(r.text for r in row)
            chars: list[Rect] = []
            if all(r.char_boxes for r in row):
                for k, r in enumerate(row):
                    chars.extend(r.char_boxes)
                    if k < len(row) - 1:  # the joining space gets the gap as its box
                        nxt = row[k + 1]
                        chars.append((r.box[2], r.box[1], nxt.box[0], r.box[3]))
            box = (min(r.box[0] for r in row), min(r.box[1] for r in row),
                   max(r.box[2] for r in row), max(r.box[3] for r in row))
            joined.append(OcrLine(text=text, score=min(r.score for r in row), box=box,
                                  quad=((box[0], box[1]), (box[2], box[1]), (box[2], box[3]),
                                        (box[0], box[3])), char_boxes=tuple(chars)))
    return joined


def _column_pairs(lines: Sequence[OcrLine]) -> list[OcrLine]:
    """Two lines stacked in one view ("06:00 PM ET" over "Sun 03/26") joined into one."""
    out: list[OcrLine] = []
    ordered = sorted(lines, key=lambda ln: (ln.box[1], ln.box[0]))
    for i, a in enumerate(ordered):
        lh = max(1.0, a.box[3] - a.box[1])
        for b in ordered[i + 1:]:
            if b.box[1] - a.box[3] > lh:
                break
            overlap = min(a.box[2], b.box[2]) - max(a.box[0], b.box[0])
            if b.box[1] >= a.box[3] - lh * 0.3 and overlap > 0.3 * min(
                    a.box[2] - a.box[0], b.box[2] - b.box[0]):
                box = (min(a.box[0], b.box[0]), a.box[1], max(a.box[2], b.box[2]), b.box[3])
                out.append(OcrLine(text=f"{a.text}\n{b.text}", score=min(a.score, b.score),
                                   box=box, quad=((box[0], box[1]), (box[2], box[1]),
                                                  (box[2], box[3]), (box[0], box[3]))))
                break
    return out


def _separated(line: OcrLine, i: int) -> bool:
    """Whether characters i and i+1 of a line stand apart (a word gap whose space was lost, or
    an icon read as a letter: "QManage" for a ticket icon next to "Manage"), judged from the
    char boxes: their centres lie much further apart than the line's usual spacing."""
    boxes = line.char_boxes
    if len(boxes) < 4 or i < 0 or i + 1 >= len(boxes):
        return False
    centres = [(b[0] + b[2]) / 2 for b in boxes]
    steps = sorted(centres[k + 1] - centres[k] for k in range(len(centres) - 1))
    usual = steps[len(steps) // 2]
    return usual > 0 and centres[i + 1] - centres[i] > 1.8 * usual


def match_text(lines: Sequence[OcrLine], query: str,
               settings: TextMatchSettings | None = None) -> tuple[list[TextMatch], list[str]]:
    """Candidate boxes for `query`, best first, and the closest texts (for NotFound).

    Order: exact line -> word/phrase inside a line (the sub-box) -> fuzzy. An exact match
    decides alone. Without one, the word matches come first and the fuzzy ones after them,
    and each is marked `certain` only when it is unique on screen and strong:
    - a word/phrase match: on word boundaries in the line as read, no other place matches,
      and the rest of the line is short (at most `word_extra_frac` of the query's normalised
      length: "Inbox 3" for "Inbox", not "Save note" for "Save" nor "10:30" for "10");
    - a fuzzy match: the whole line (not a window of it), similarity >= `confident_fuzzy`,
      and no other line within `fuzzy_margin` of it.
    Everything else is uncertain: the caller answers Ambiguous, even with one candidate,
    because a word found inside another line, or a near-miss spelling, is often a different
    element than the one meant (the target itself may be unread or hidden).
    """
    s = settings or TextMatchSettings()
    q, _ = normalize(query)
    if not q:
        return _match_symbols(lines, query), []
    normed = [(ln, *normalize(ln.text)) for ln in lines]
    joined = [(ln, *normalize(ln.text)) for ln in _row_groups(lines, s.merge_row_gap)]
    exact = _exact_matches(lines, query, q, normed, joined)
    if exact:
        return exact, []
    word_matches = _word_matches(q, normed + joined, s)
    fuzzy, closest, literal = _fuzzy_matches(q, normed + joined, s)
    if word_matches:
        # The word matches lead; fuzzy lines elsewhere are offered after them, for the
        # planner to choose from, but never make a word match certain.
        extra_fuzzy = _unique_boxes(word_matches + [
            msgspec.structs.replace(m, certain=False) for m in fuzzy
            if m.label not in literal])[len(word_matches):]
        if extra_fuzzy and word_matches[0].certain:
            word_matches = [msgspec.structs.replace(word_matches[0], certain=False)]
        return word_matches + extra_fuzzy, []
    prefixes = _prefix_matches(lines, q, fuzzy)
    if prefixes:
        return prefixes, closest
    return fuzzy, closest


# A line as matched: the line, its normalised text, and the index map ``normalize`` returns.
Normed = tuple[OcrLine, str, list[int]]


def _exact_matches(lines: Sequence[OcrLine], query: str, q: str, normed: list[Normed],
                   joined: list[Normed]) -> list[TextMatch]:
    """Lines (or lines joined on a row, or with the OCR confusables folded, or two stacked
    lines for a two-line query) whose normalised text is the query's, most literal first."""
    exact = [TextMatch(ln.box, ln.text, ln.score, "exact") for ln, n, _ in normed if n == q]
    if not exact:
        exact = [TextMatch(ln.box, ln.text, ln.score, "exact") for ln, n, _ in joined if n == q]
    if not exact:
        fq = fold_confusables(q)
        exact = [TextMatch(ln.box, ln.text, ln.score, "exact") for ln, n, _ in normed + joined
                 if fold_confusables(n) == fq]
    if not exact and "\n" in query:
        stacked = [(ln, normalize(ln.text)[0]) for ln in _column_pairs(lines)]
        exact = [TextMatch(ln.box, ln.text, ln.score, "exact") for ln, n in stacked
                 if fold_confusables(n) == fold_confusables(q)]
    if not exact:
        return []
    # Several exact places: the most literal reading (case, spaces, symbols) first.
    as_typed = " ".join(query.split())
    exact.sort(key=lambda m: -similarity(as_typed, " ".join(m.label.split())))
    return _unique_boxes(exact)


def _word_matches(q: str, candidates: list[Normed], s: TextMatchSettings) -> list[TextMatch]:
    """The query found inside lines (the sub-box), the shortest rest of line first; certain
    only when it is the one place and on word boundaries (see ``match_text``)."""
    inner: list[tuple[bool, int, TextMatch]] = []  # (on word boundaries, extra chars, match)
    # Found as read, else with the OCR confusables folded ("Issues" in "lssues 131"); the fold
    # maps one character to one, so the index map still holds.
    folded = not any(q in n for _, n, _ in candidates)
    fq = fold_confusables(q) if folded else q
    for ln, n, idx in candidates:
        n = fold_confusables(n) if folded else n
        start = n.find(fq)
        while start >= 0:
            a, b = idx[start], idx[start + len(q) - 1] + 1
            # A match on word boundaries ("Sign in" in "Sign in now") beats one inside a
            # word ("in" in "Sign"); spaces can be lost, so the latter still counts.
            bounded = (a == 0 or not ln.text[a - 1].isalnum() or _separated(ln, a - 1)) and (
                b >= len(ln.text) or not ln.text[b].isalnum() or _separated(ln, b - 1))
            inner.append((bounded, len(n) - len(q),
                          TextMatch(ln.span_box(a, b), ln.text, ln.score, "word", False)))
            start = n.find(fq, start + 1)
    # Inside a word only for longer queries: "ok" inside "Bookmarks" is no match.
    words = [(extra, m) for bounded, extra, m in inner if bounded] or (
        [(extra, m) for _, extra, m in inner] if len(q) >= 4 else [])
    # The line closest to the query as a whole first ("Add" in "+ Add" before "Add" in
    # "Click + to add a list"): the shortest rest of line is the likeliest label.
    words.sort(key=lambda t: t[0])
    word_matches = _unique_boxes([m for _, m in words])
    if len(word_matches) == 1 and any(bounded for bounded, _, _ in inner):
        extra = min(e for e, _ in words)
        if extra <= s.word_extra_frac * len(q) or 0 < s.word_certain_len <= len(q):
            word_matches = [msgspec.structs.replace(word_matches[0], certain=True)]
    return word_matches


def _fuzzy_matches(q: str, candidates: list[Normed],
                   s: TextMatchSettings) -> tuple[list[TextMatch], list[str], set[str]]:
    """The lines (or windows of long lines) most similar to the query, the closest texts
    (for NotFound), and the lines holding the query verbatim (the word stage's)."""
    scored: list[tuple[float, bool, TextMatch]] = []  # (similarity, whole line, match)
    literal: set[str] = set()  # lines holding the query verbatim: judged by the word stage
    for ln, n, idx in candidates:
        if q in n:
            literal.add(ln.text)
        if not n:
            continue
        if len(n) > len(q) * 1.5 and len(q) >= 3:
            r, a, b = best_window(q, n)
            # Penalise a window lightly: a whole-line match is stronger evidence.
            r *= 0.97
            box = ln.span_box(idx[a], idx[b - 1] + 1) if b > a else ln.box
            whole = False
        else:
            r, box, whole = similarity(q, n), ln.box, True
        scored.append((r, whole, TextMatch(box, ln.text, r, "fuzzy", False)))
    scored.sort(key=lambda t: -t[0])
    closest = list(dict.fromkeys(m.label for _, _, m in scored[: s.closest * 2]))[: s.closest]
    # Short strings ("10", "PE") are never matched fuzzily: one wrong character is a new word.
    floor = 1.01 if len(q) <= 3 else s.fuzzy_min if len(q) > 5 else max(s.fuzzy_min, 0.8)
    good = [(r, whole, m) for r, whole, m in scored if r >= floor]
    fuzzy: list[TextMatch] = []
    if good:
        top = good[0][0]
        near = [m for r, _, m in good if top - r < s.fuzzy_margin]
        fuzzy = _unique_boxes(near)
        if len(fuzzy) == 1 and good[0][1] and top >= s.confident_fuzzy:
            fuzzy = [msgspec.structs.replace(fuzzy[0], certain=True)]
    return fuzzy, closest, literal


def _prefix_matches(lines: Sequence[OcrLine], q: str,
                    fuzzy: list[TextMatch]) -> list[TextMatch]:
    """A line the screen cut short with an ellipsis ("yuanshen_..." for "yuanshen_3.0.0.apk"):
    its readable part begins the query. It ranks above a fuzzy match, and is certain only
    when alone and covering at least half of the query. [] when no line is cut short so."""
    prefixes: list[TextMatch] = []
    for ln in lines:
        cut = _ELLIPSIS.search(ln.text)
        p = normalize(ln.text[: cut.start()])[0] if cut else ""
        if len(p) >= 3 and len(p) < len(q) and fold_confusables(q).startswith(
                fold_confusables(p)):
            prefixes.append(TextMatch(ln.box, ln.text, len(p) / len(q), "prefix", False))
    if not prefixes:
        return []
    prefixes.sort(key=lambda m: -m.score)
    out = _unique_boxes(prefixes + [msgspec.structs.replace(m, certain=False) for m in fuzzy])
    if len(out) == 1 and out[0].score >= 0.5 and len(normalize(out[0].label)[0]) >= 6:
        out = [msgspec.structs.replace(out[0], certain=True)]
    return out


def _match_symbols(lines: Sequence[OcrLine], query: str) -> list[TextMatch]:
    """Matches for a query of marks alone ("•", "-", "/"): a line that is just those marks
    (certain when it is the only place), else the marks inside lines (uncertain)."""
    q, _ = normalize_symbols(query)
    if not q:
        return []
    exact: list[TextMatch] = []
    inner: list[TextMatch] = []
    for ln in lines:
        n, idx = normalize_symbols(ln.text)
        if n == q:
            exact.append(TextMatch(ln.box, ln.text, ln.score, "exact"))
            continue
        start = n.find(q)
        while start >= 0:
            span = ln.span_box(idx[start], idx[start + len(q) - 1] + 1)
            inner.append(TextMatch(span, ln.text, ln.score, "word", False))
            start = n.find(q, start + 1)
    if exact:
        return _unique_boxes(exact)
    return _unique_boxes(inner)


def _unique_boxes(matches: list[TextMatch]) -> list[TextMatch]:
    """Drop matches whose box is (nearly) the same place as an earlier one."""
    out: list[TextMatch] = []
    for m in matches:
        c = box_center(m.box)
        if any(o.box[0] <= c[0] <= o.box[2] and o.box[1] <= c[1] <= o.box[3] for o in out):
            continue
        out.append(m)
    return out


_KINDS = {"word": "the text inside a longer line", "prefix": "a line cut short with an ellipsis"}


def ground_text_in(ocr: OcrResult, rgb: np.ndarray | None, query: str,
                   settings: TextMatchSettings | None = None,
                   position: str | None = None) -> GroundResult:
    """Ground `query` on an OCR result; `rgb` (the frame) is needed to draw Ambiguous marks."""
    s = settings or TextMatchSettings()
    if not query or not (normalize(query)[0] or normalize_symbols(query)[0]):
        return NotFound(frame_id="", query=query)
    lines = placed_lines(ocr, rgb, position)
    matches, closest = match_text(lines, query, s)
    if not matches:
        return NotFound(frame_id="", query=query,
                        closest=closest or [ln.text for ln in ocr.lines[: s.closest]])
    if len(matches) == 1 and matches[0].certain:
        m = matches[0]
        return grounded(m.box, m.method, m.score)
    shown = matches[: s.max_candidates]
    more = f"; showing {len(shown)}" if len(shown) < len(matches) else ""
    if shown[0].method == "exact":
        reason = f"{len(matches)} places match exactly{more}"
    else:
        kinds = " or ".join(dict.fromkeys(_KINDS.get(m.method, "a similar text")
                                          for m in matches))
        order = ("; the shortest line holding it first"
                 if shown[0].method == "word" and len(shown) > 1 else "")
        reason = (f"no exact match, only {len(matches)} uncertain candidate"
                  f"{'s' if len(matches) > 1 else ''} ({kinds}){order}{more}: confirm one, "
                  "or none")
    return _ambiguous(rgb, [(m.box, m.label) for m in shown], reason)


def placed_lines(ocr: OcrResult, rgb: np.ndarray | None,
                 position: str | None) -> Sequence[OcrLine]:
    """The lines of ``ocr`` inside a named ``position`` (all of them without one)."""
    if not position:
        return ocr.lines
    (x0, x1), (y0, y1) = position_region(position)
    # Halves of what the app draws, as for icons (`drawn_rows`); without the frame, of it all.
    top, bottom = drawn_rows(rgb) if rgb is not None else (0, ocr.height)
    tall = max(1, bottom - top)
    return [ln for ln in ocr.lines if x0 <= ln.center[0] / max(1, ocr.width) <= x1
            and y0 <= (ln.center[1] - top) / tall <= y1]


# How long a line read exactly as a query of u units is (a wide character, CJK, 2 units;
# others 1), along its quad, in multiples of its height: at most EXACT_MAX[0] * u +
# EXACT_MAX[1], at least EXACT_MIN[0] * u + EXACT_MIN[1]. Fit on rico-dev's 804 lines read
# (every one inside but four, "PC" and "PC用" on wide buttons), checked on droidbot-dev's
# 2,361 (docs/perception.md, "Reading the query's lines first").
EXACT_MAX = (1.0, 1.5)
EXACT_MIN = (0.2, -0.5)


def text_units(text: str) -> int:
    """A text's length in units: 2 for a wide (East Asian wide or full-width) character."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def exact_line_fits(query: str) -> LineFilter | None:
    """Whether a line of a given length and height (px along its quad) can read exactly as
    ``query`` (see ``EXACT_MAX``); None for a query of marks alone (matched otherwise)."""
    q, _ = normalize(query)
    if not q:
        return None
    u = text_units(q)
    longest, shortest = EXACT_MAX[0] * u + EXACT_MAX[1], EXACT_MIN[0] * u + EXACT_MIN[1]

    def fits(length: float, height: float) -> bool:
        return shortest * height <= length <= longest * height

    return fits


def has_exact_line(ocr: OcrResult, rgb: np.ndarray | None, query: str,
                   position: str | None) -> bool:
    """Whether a line of ``ocr`` (inside ``position``) reads exactly as ``query``: then
    ``match_text`` answers from those lines alone, whatever the others say."""
    q, _ = normalize(query)
    return bool(q) and any(normalize(ln.text)[0] == q
                           for ln in placed_lines(ocr, rgb, position))


def _ambiguous(rgb: np.ndarray | None, items: Sequence[tuple[Rect, str]],
               reason: str) -> Ambiguous:
    """Candidates numbered 1..n, each with its close-up, and the frame with all of them
    marked (JPEG); without ``rgb``, neither picture."""
    cands = [Candidate(index=i + 1, box=pixel_box(box), text=label,
                       crop=crop_png(rgb, box) if rgb is not None else b"")
             for i, (box, label) in enumerate(items)]
    marked = mark_candidates(rgb, [box for box, _ in items]) if rgb is not None else b""
    return Ambiguous(frame_id="", candidates=cands, marked_image=marked, image_format="jpeg",
                     reason=reason)


# -- icon grounding --------------------------------------------------------------------------


class IconMatcher(Protocol):
    """Judges proposal boxes against a description; None when it cannot judge it at all."""

    def judge(self, bgr: np.ndarray, boxes: Sequence[Rect], description: str) -> IconScores | None: ...


def icon_candidates(bgr: np.ndarray, proposals: Sequence[Proposal], settings: IconSettings,
                    position: str | None = None) -> tuple[list[Proposal], str]:
    """The boxes an icon query chooses among (Mobile-Agent's filters: large boxes dropped,
    overlaps deduplicated, the status bar and then the position filter), and a note for the
    reason when the position held none and the whole screen was used instead."""
    s = settings
    h, w = bgr.shape[:2]
    props = dedupe(drop_large(proposals, w, h, s.max_area_frac), s.dedupe_iou)
    props = [p for p in props if p.center[1] > s.status_bar_frac * h]
    if position:
        in_place = filter_by_position(props, position, w, h, drawn_rows(bgr))
        if in_place:
            return in_place, ""
        if props:
            return props, f"nothing icon-like in the {position}; candidates from the whole screen. "
    return props, ""


def ground_icon_in(bgr: np.ndarray, proposals: Sequence[Proposal], description: str,
                   matcher: IconMatcher | None, settings: IconSettings | None = None,
                   position: str | None = None, *, draw: bool = True) -> GroundResult:
    """Mobile-Agent's icon path: drop large boxes, dedupe, position filter, match, pick.
    ``draw=False`` leaves an Ambiguous answer without its marked image and crops (a bench
    that only counts answers)."""
    s = settings or IconSettings()
    props, note = icon_candidates(bgr, proposals, s, position)
    if not props:
        return NotFound(frame_id="", query=description)
    props = sorted(props, key=lambda p: -p.score)[: max(1, s.max_match)]
    rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB) if draw else None
    boxes = [p.box for p in props]
    judged = matcher.judge(bgr, boxes, description) if matcher is not None else None
    if judged is None:
        top = list(range(min(s.top_k, len(props))))
        return _ambiguous(rgb, [(boxes[i], "") for i in top],
                          note + "no matcher can judge this description; pick one")
    scores, margins = judged.scores, judged.margins
    # Nested boxes around one icon (glyph, ripple, button) are one place: keep the best-scored
    # box of each place, so the runner-up is a different place on screen.
    order: list[int] = []
    for i in sorted(range(len(boxes)), key=lambda i: -scores[i]):
        c = box_center(boxes[i])
        if not any(_contains(boxes[j], c) or _contains(boxes[i], box_center(boxes[j]))
                   for j in order):
            order.append(i)
    best = scores[order[0]]
    second = scores[order[1]] if len(order) > 1 else 0.0
    i = order[0]
    unlike = margins is not None and margins[i] < s.rival_margin
    if best >= s.min_score and best - second >= s.margin and not unlike:
        return grounded(boxes[i], "icon", best)
    top = order[: s.top_k]
    why = f"no confident icon match (best {best:.2f}, next {second:.2f})"
    if unlike:
        rival = judged.rivals[i] if judged.rivals else "another icon"
        alike = "more" if margins is not None and margins[i] < 0 else "almost as much"
        why = (f"no icon here clearly looks like {description!r}: the best match ({best:.2f}) "
               f"looks {alike} like {rival!r}; pick one only if it fits, else none")
    # No label: a score is not text the planner could read in the box (the reason has it).
    return _ambiguous(rgb, [(boxes[i], "") for i in top], note + why)


def _contains(box: Rect, point: Point) -> bool:
    return box[0] <= point[0] <= box[2] and box[1] <= point[1] <= box[3]


def _gap(box: Rect, point: Point) -> float:
    """Distance from ``point`` to ``box`` (0 inside it)."""
    dx = max(box[0] - point[0], 0.0, point[0] - box[2])
    dy = max(box[1] - point[1], 0.0, point[1] - box[3])
    return float((dx * dx + dy * dy) ** 0.5)


class Snap(msgspec.Struct, frozen=True):
    point: Point
    box: Rect  # the element it is in or snapped to; the point itself when none
    source: str  # "ocr" | "icon" (inside one, kept) | "snapped" | "model" (used as given)


def snap_point(point: Point, ocr_boxes: Sequence[Rect], icon_boxes: Sequence[Rect],
               radius: float) -> Snap:
    """Hybrid grounding of a model's point against what perception sees.

    Inside an OCR line or an icon box, the point is kept (the model aimed at that element,
    and where inside it is its business). Otherwise, when exactly one element lies within
    ``radius`` pixels, the point snaps to that element's centre: a model's point is often a
    few pixels off a small target, and a miss on a phone does nothing or worse. With none or
    several elements that near, the point is used as given: guessing between two would be
    perception overriding the model without evidence."""
    x, y = point
    here: Rect = (float(x), float(y), float(x), float(y))
    for boxes, source in ((ocr_boxes, "ocr"), (icon_boxes, "icon")):
        for b in boxes:
            if _contains(b, point):
                return Snap(point, b, source)
    near: list[Rect] = []
    for b in (*ocr_boxes, *icon_boxes):
        # The detector also proposes text regions and nested boxes: a box that holds the
        # centre of one already counted (or whose centre it holds) is the same element.
        if _gap(b, point) <= radius and not any(
            _contains(k, box_center(b)) or _contains(b, box_center(k)) for k in near
        ):
            near.append(b)
    if len(near) == 1:
        c = box_center(near[0])
        return Snap(c, near[0], "snapped")
    return Snap(point, here, "model")


def _innermost(boxes: Sequence[Rect], point: Point) -> Rect | None:
    """The smallest of ``boxes`` holding ``point`` (nested proposals: the element itself)."""
    inside = [b for b in boxes if _contains(b, point)]
    return min(inside, key=lambda b: (b[2] - b[0]) * (b[3] - b[1])) if inside else None


def grounder_result(point: Point, box: Rect | None = None,
                    snap_to: Sequence[Rect] = ()) -> Grounded:
    """The grounder's answer as ``Grounded`` (source ``grounder``): snapped to the centre of
    the (innermost) OCR line or icon box of ``snap_to`` it falls in, else as given."""
    inner = _innermost(snap_to, point)
    if inner is not None:
        return grounded(inner, "grounder")
    return grounded(box or (point[0], point[1], point[0], point[1]), "grounder", point=point)


def merge_grounder(first: GroundResult, point: Point | None, box: Rect | None,
                   snap_to: Sequence[Rect], exact: Sequence[Rect] = ()) -> GroundResult:
    """Hybrid grounding: ``first`` (OCR's or the matcher's answer) and the grounder's
    ``point`` (None: it found nothing, or was not asked). With exact OCR text matches
    (``exact``), a point on none of them loses: ``first`` stands, an ``Ambiguous`` saying
    so in its reason (a ``Grounded`` exact match is kept as it is)."""
    if point is None:
        return first
    if exact and _innermost(exact, point) is None:
        if isinstance(first, Ambiguous):
            why = (f"the grounding model pointed at ({point[0]}, {point[1]}), on none of the "
                   "exact text matches: OCR's exact matches win. ")
            return msgspec.structs.replace(first, reason=why + first.reason)
        return first
    return grounder_result(point, box, [*exact, *snap_to])


def _rect(box: Box) -> Rect:
    return (float(box.left), float(box.top), float(box.right), float(box.bottom))


def icon_disagreement(first: GroundResult, placed: Grounded,
                      rgb: np.ndarray | None) -> GroundResult:
    """Hybrid icons: the grounder's answer ``placed``, unless the matcher was confident
    (``first`` Grounded) about another place; then both, numbered for the chooser (the
    grounder's first), since neither has the evidence to overrule the other."""
    if not isinstance(first, Grounded) or _contains(_rect(first.box), placed.point):
        return placed
    return _ambiguous(rgb, [(_rect(placed.box), ""), (_rect(first.box), "")],
                      "the grounding model (1) and the icon matcher (2) point at different "
                      "places: pick the one that fits the description, or none")


# -- the facade ------------------------------------------------------------------------------

T = TypeVar("T")


def frame_hash(bgr: np.ndarray) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(str(bgr.shape).encode())
    h.update(np.ascontiguousarray(bgr).data)
    return h.hexdigest()


def _bgr(image: ImageInput) -> np.ndarray:
    """``to_bgr``, its CPU the ``decode`` stage (``runtime.cpu_ledger``)."""
    with stage("decode"):
        return to_bgr(image)


class Perception:
    """Text and icon grounding on frames; one instance serves every device of a host.

    Frames can be PIL images, RGB numpy arrays, encoded bytes or paths. Pass `frame_id`
    (e.g. the capture's sha) to skip hashing, and `device` to let OCR re-read only the
    regions that changed since that device's previous frame.
    """

    def __init__(self, settings: PerceptionSettings | None = None, *, ocr: Ocr | None = None,
                 detector: Detector | None = None, matcher: IconMatcher | None = None) -> None:
        self.settings = settings or PerceptionSettings()
        # Resolved now, not when a model first loads: a missing accelerator fails at start.
        self.providers = resolve_providers(self.settings.providers,
                                           allow_cpu_fallback=self.settings.allow_cpu_fallback)
        self._ocr = ocr
        self._ocr_cache: OcrCache | None = None
        self._detector = detector
        self._matcher = matcher
        self._matcher_ready = matcher is not None
        self._lock = threading.RLock()
        # By frame hash: the work needs the pixels, so the cache is a map, not lru_cache.
        self._ocr_results: LRUCache[str, OcrResult] = LRUCache(max(1, self.settings.cache_frames))
        self._proposals: LRUCache[str, list[Proposal]] = LRUCache(max(1, self.settings.cache_frames))
        # OCR reads by (device, kind): full | band | unchanged (models.ocr.OcrCache),
        # cached (this frame was read before, e.g. speculatively) or deferred (a whole-frame
        # read read_text_unless_full left undone); for meters and benches.
        self.ocr_runs: Counter[tuple[str, str]] = Counter()

    # lazily built parts: constructing the OCR sessions costs about a second
    @property
    def ocr_engine(self) -> Ocr:
        with self._lock:
            if self._ocr is None:
                self._ocr = Ocr(self.settings.ocr, providers=self._providers_for(
                    self.settings.ocr.providers), allow_cpu_fallback=self.settings.allow_cpu_fallback)
            return self._ocr

    @property
    def detector(self) -> Detector:
        with self._lock:
            if self._detector is None:
                self._detector = make_detector(
                    self.settings.detector,
                    providers=self._providers_for(self.settings.detector.providers),
                    allow_cpu_fallback=self.settings.allow_cpu_fallback)
            return self._detector

    @property
    def matcher(self) -> IconMatcher | None:
        with self._lock:
            if not self._matcher_ready:
                self._matcher = _make_matcher(self.settings, self.providers)
                self._matcher_ready = True
            return self._matcher

    def warm(self, size: tuple[int, int] = (1080, 1920)) -> None:
        """Load the OCR models and run them once on a made-up ``size`` (w, h) frame: loading
        costs about a second and onnxruntime's first runs cost more than later ones, once
        per process, not per frame. Nothing is cached by frame or counted as a read."""
        w, h = size
        bgr = np.full((h, w, 3), 255, np.uint8)
        for i in range(4):
            cv2.putText(bgr, f"Warm up line {i}", (40, h // 5 * (i + 1)),
                        cv2.FONT_HERSHEY_SIMPLEX, 1.5, (0, 0, 0), 3)
        self.ocr_engine.run_bgr(bgr)

    def prepare(self, stop: threading.Event | None = None) -> dict[str, tuple[int, int]]:
        """Load the OCR models and prepare the input shapes they ran before (and, on a fresh
        install, the recogniser's common ones): ``Ocr.prepare``. Safe beside reads: a step
        that needs the models meanwhile waits for the load, then runs."""
        return self.ocr_engine.prepare(stop)

    def _providers_for(self, own: Sequence[str]) -> list[str]:
        """A model's own providers (``perception.ocr.providers``, ...) when it has them,
        else perception's."""
        if not own:
            return self.providers
        return resolve_providers(own, allow_cpu_fallback=self.settings.allow_cpu_fallback)

    def _remember(self, cache: LRUCache[str, T], key: str, value: T) -> None:
        with self._lock:  # cachetools' caches are not thread-safe
            cache[key] = value

    def read_text(self, image: ImageInput, *, frame_id: str | None = None,
                  device: str | None = None) -> OcrResult:
        """OCR of a frame, cached by frame hash."""
        bgr = _bgr(image)
        return self._read_text(bgr, frame_id or frame_hash(bgr), device)

    def read_text_unless_full(self, image: ImageInput, *, frame_id: str | None = None,
                              device: str) -> OcrResult | None:
        """``read_text`` when the frame is cached, unchanged or takes a band re-read; None
        (counted as ``deferred``, nothing read) when it would take a whole-frame read. With
        ``query_first`` the changed places' lines are found but left unread (the grounding
        reads those it can use): the result is then the lines read so far."""
        bgr = _bgr(image)
        return self._read(bgr, frame_id or frame_hash(bgr), device, whole=False)

    def _read_text(self, bgr: np.ndarray, key: str, device: str | None) -> OcrResult:
        got = self._read(bgr, key, device, whole=True)
        assert got is not None
        return got

    def _read(self, bgr: np.ndarray, key: str, device: str | None,
              whole: bool) -> OcrResult | None:
        with self._lock:
            hit = self._ocr_results.get(key)
        if hit is not None:
            self._count(device, "cached")
            return hit
        kind: str = "full"
        if device is not None:
            cache = self._cache()
            if whole:
                result, kind = cache.read(bgr, device)
            else:
                # a speculative read: with query_first the lines stay unread until a
                # grounding picks its own (a changed place's detector still runs now)
                ahead = cache.read_unless_full(
                    bgr, device, wanted=_no_line if self.settings.query_first else None)
                if ahead is None:
                    self._count(device, "deferred")
                    return None
                if ahead[0].unread:
                    self._count(device, ahead[1])
                    return ahead[0].result
                result, kind = ahead[0].result, ahead[1]
        else:
            result = self.ocr_engine.run_bgr(bgr)
        self._remember(self._ocr_results, key, result)
        self._count(device, kind)
        return result

    def _count(self, device: str | None, kind: str) -> None:
        with self._lock:
            self.ocr_runs[(device or "", kind)] += 1

    def proposals(self, image: ImageInput, *, frame_id: str | None = None) -> list[Proposal]:
        bgr = _bgr(image)
        return self._proposals_for(bgr, frame_id or frame_hash(bgr))

    def _proposals_for(self, bgr: np.ndarray, key: str) -> list[Proposal]:
        with self._lock:
            hit = self._proposals.get(key)
        if hit is not None:
            return hit
        with stage("icons"):
            props = self.detector.detect(bgr)
        self._remember(self._proposals, key, props)
        return props

    def ground_text(self, image: ImageInput, text: str, *, position: str | None = None,
                    frame_id: str | None = None, device: str | None = None) -> GroundResult:
        bgr = _bgr(image)
        key = frame_id or frame_hash(bgr)
        rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        ocr = self._read_for_query(bgr, rgb, key, device, text, position)
        with stage("match"):
            return ground_text_in(ocr, rgb, text, self.settings.text, position)

    def _read_for_query(self, bgr: np.ndarray, rgb: np.ndarray, key: str,
                        device: str | None, query: str, position: str | None) -> OcrResult:
        """The frame's read for grounding ``query``: with ``query_first`` on a phone's frame
        not read yet, its lines that can be the query exactly (counted ``first`` when one
        is and the rest stays unread); else the whole frame's."""
        fits = exact_line_fits(query) if self.settings.query_first and device else None
        if fits is not None and device is not None:
            with self._lock:
                hit = self._ocr_results.get(key)
            if hit is None:
                got, kind = self._cache().read_wanted(bgr, device, fits)
                if not got.unread:  # nothing left unread: the whole frame's read
                    self._remember(self._ocr_results, key, got.result)
                    self._count(device, kind)
                    return got.result
                if has_exact_line(got.result, rgb, query, position):
                    self._count(device, "first")
                    return got.result
        return self._read_text(bgr, key, device)

    def _cache(self) -> OcrCache:
        with self._lock:
            if self._ocr_cache is None:
                self._ocr_cache = OcrCache(self.ocr_engine, self.settings.ocr_cache)
            return self._ocr_cache

    def ground_icon(self, image: ImageInput, description: str, *, position: str | None = None,
                    frame_id: str | None = None) -> GroundResult:
        bgr = _bgr(image)
        props = self._proposals_for(bgr, frame_id or frame_hash(bgr))
        matcher = self.matcher
        with stage("match"):
            return ground_icon_in(bgr, props, description, matcher, self.settings.icons,
                                  position)

    def text_boxes(self, image: ImageInput, query: str, *, frame_id: str | None = None,
                   device: str | None = None) -> tuple[list[Rect], list[Rect]]:
        """The frame's OCR line boxes, and those of the lines matching ``query`` exactly
        (what a grounder's point snaps to, and what outranks it)."""
        bgr = _bgr(image)
        lines = self._read_text(bgr, frame_id or frame_hash(bgr), device).lines
        with stage("match"):
            matches, _ = match_text(lines, query, self.settings.text)
        return [ln.box for ln in lines], [m.box for m in matches if m.method == "exact"]

    def icon_boxes(self, image: ImageInput, *, frame_id: str | None = None) -> list[Rect]:
        """The icon proposals an icon query chooses among (``icon_candidates``)."""
        bgr = _bgr(image)
        props = self._proposals_for(bgr, frame_id or frame_hash(bgr))
        with stage("match"):
            return [p.box for p in icon_candidates(bgr, props, self.settings.icons)[0]]

    def ground_point(self, image: ImageInput, point: Point, *, radius: float,
                     frame_id: str | None = None, device: str | None = None) -> Grounded:
        """A model's point checked against the frame's OCR lines and icon boxes
        (``snap_point``); ``method`` says what happened. Icons are only detected when no
        text line holds the point, since detection costs more than the cached OCR."""
        bgr = _bgr(image)
        key = frame_id or frame_hash(bgr)
        lines = [ln.box for ln in self._read_text(bgr, key, device).lines]
        snap = snap_point(point, lines, [], 0)
        if snap.source == "model":
            icons = [p.box for p in self._proposals_for(bgr, key)]
            snap = snap_point(point, lines, icons, radius)
        return grounded(snap.box, snap.source, point=snap.point)


def _no_line(length: float, height: float) -> bool:
    """No line: a read that leaves every line it can unread."""
    return False


def _make_matcher(settings: PerceptionSettings,
                  providers: Sequence[str] = ()) -> IconMatcher | None:
    kind = settings.icons.matcher
    if kind == "none":
        return None
    if kind == "clip" or (kind == "auto" and settings.clip_dir):
        from models.clip import ClipError, ClipMatcher

        if not settings.clip_dir:
            raise ClipError('icons.matcher = "clip" needs perception.clip_dir: a folder written '
                            "by `python -m models.export.clip`")
        return ClipMatcher.from_dir(settings.clip_dir, providers, settings.allow_cpu_fallback)
    from models.icons import MaterialIconMatcher

    return MaterialIconMatcher()
