"""Incremental OCR against whole-frame reads: row bands vs rectangles (`models/ocr.py` OcrCache).

    python bench/incremental.py --data ../shared/data/rico-dev --data ../shared/data/droidbot-dev
                                [--limit N] [--json OUT]

For each set, pairs of frames (A, B) of one size: the phone's previous frame A is read whole,
then B incrementally, once per mode (``bands``: full-width row bands, the way before
rectangles; ``rects``: `OcrCacheSettings.rects`), and B is also read whole. The pairs:
- ``real``: consecutive screens of the set (the same app in droidbot-dev, neighbouring Rico
  ids: a crawl's next screen), most of them page changes, which both modes read whole;
- ``row``: a list-row-sized band redrawn with new text (`bench.grounding.changed_frame`);
- ``counter``: a number at the right edge replaced (a counter, a price, a time);
- ``toggle``: a switch at the right edge flipped (no text changes);
- ``places``: a counter, a toggle and a text cursor, in three places.

Per mode and kind it prints how many B were read incrementally, how many of those gave the
same lines as the whole-frame read (their normalised texts, as a multiset), the lines
missed and extra against it, and per incremental read the detector's input (kpx,
`note("det_px")`) and the thread CPU of detection and recognition. Recognition batches pad
lines to the widest of each run, so a line can read differently in another batch: a
mismatch is not always the region's fault. The Ocr runs without its line cache, so each
mode pays its own recognition. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.grounding import Screen, changed_frame, load  # noqa: E402
from models.grounding import normalize  # noqa: E402
from models.ocr import Ocr, OcrCache, OcrCacheSettings, OcrResult, OcrSettings  # noqa: E402
from runtime.cpu_ledger import CpuLedger, charging  # noqa: E402

MODES = {"bands": OcrCacheSettings(rects=False), "rects": OcrCacheSettings(rects=True)}
KINDS = ("real", "row", "counter", "toggle", "places")


def _font_scale(h: int) -> float:
    return h / 1920 * 1.6


def counter(bgr: np.ndarray, k: int, y_frac: float = 0.0) -> np.ndarray:
    """A number at the right edge, in a white box, changed from the frame before's."""
    out = bgr.copy()
    h, w = out.shape[:2]
    y = int(h * (y_frac or 0.25 + 0.13 * (k % 5)))
    box_h = int(h * 0.035)
    cv2.rectangle(out, (int(w * 0.80), y), (int(w * 0.96), y + box_h), (255, 255, 255), -1)
    cv2.putText(out, f"{(k * 37) % 90 + 10}", (int(w * 0.82), y + int(box_h * 0.8)),
                cv2.FONT_HERSHEY_SIMPLEX, _font_scale(h), (30, 30, 30), max(1, h // 640),
                cv2.LINE_AA)
    return out


def toggle(bgr: np.ndarray, k: int, y_frac: float = 0.0) -> np.ndarray:
    """A switch at the right edge drawn on (a pill and its knob)."""
    out = bgr.copy()
    h, w = out.shape[:2]
    y = int(h * (y_frac or 0.3 + 0.11 * (k % 5)))
    r = int(h * 0.012)
    x0, x1 = int(w * 0.84), int(w * 0.92)
    cv2.rectangle(out, (x0, y - r), (x1, y + r), (200, 140, 40), -1)
    cv2.circle(out, (x1, y), int(r * 1.4), (230, 160, 50), -1)
    return out


def cursor(bgr: np.ndarray, k: int) -> np.ndarray:
    """A text cursor (a thin vertical bar) in the left half."""
    out = bgr.copy()
    h, w = out.shape[:2]
    x, y = int(w * (0.15 + 0.05 * (k % 4))), int(h * (0.2 + 0.15 * (k % 4)))
    cv2.rectangle(out, (x, y), (x + max(2, w // 400), y + int(h * 0.025)), (20, 120, 230), -1)
    return out


def pairs(screens: list[Screen], kind: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    if kind == "real":
        return [(f"{a.sid}>{b.sid}", a.bgr, b.bgr) for a, b in itertools.pairwise(screens)
                if a.bgr.shape == b.bgr.shape]
    out = []
    for k, s in enumerate(screens):
        if kind == "row":
            b = changed_frame(s.bgr, k)
        elif kind == "counter":
            # the frame before had another number there: both are drawn
            out.append((s.sid, counter(s.bgr, k), counter(s.bgr, k + 1)))
            continue
        elif kind == "toggle":
            b = toggle(s.bgr, k)
        else:
            b = cursor(toggle(counter(s.bgr, k + 1), k + 2), k)
            out.append((s.sid, counter(s.bgr, k), b))
            continue
        out.append((s.sid, s.bgr, b))
    return out


def texts(result: OcrResult) -> Counter[str]:
    return Counter(t for t in (normalize(ln.text)[0] for ln in result.lines) if t)


def measure(screens: list[Screen], ocr: Ocr, kinds: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in kinds:
        rows: dict[str, dict[str, Any]] = {
            m: {"pairs": 0, "incremental": 0, "same": 0, "missed": 0, "extra": 0,
                "full_lines": 0, "det_kpx": [], "cpu_s": [], "read_frac": []} for m in MODES}
        for pid, a, b in pairs(screens, kind):
            full = ocr.run_bgr(b)
            want = texts(full)
            for mode, settings in MODES.items():
                row = rows[mode]
                row["pairs"] += 1
                cache = OcrCache(ocr, settings)
                cache.read(a, "phone")
                ledger = CpuLedger()
                t0 = time.thread_time()
                with charging(ledger, "phone"):
                    got, how = cache.read(b, "phone")
                cpu = time.thread_time() - t0
                if how != "band":
                    continue
                have = texts(got)
                row["incremental"] += 1
                row["same"] += have == want
                row["missed"] += sum((want - have).values())
                row["extra"] += sum((have - want).values())
                row["full_lines"] += sum(want.values())
                row["det_kpx"].append(ledger.counts("phone").get("det_px", 0.0) / 1e3)
                row["cpu_s"].append(cpu)
                row["read_frac"].append(cache.last_read_frac)
                if have != want:
                    print(f"  {kind} {mode} {pid}: missed {sorted((want - have).elements())} "
                          f"extra {sorted((have - want).elements())}", flush=True)
        for mode, row in rows.items():
            for key in ("det_kpx", "cpu_s", "read_frac"):
                vals = row[key]
                row[key] = float(np.mean(vals)) if vals else float("nan")
            print(f"{kind:<8} {mode:<6} incremental {row['incremental']}/{row['pairs']}, "
                  f"same lines as whole {row['same']}/{row['incremental']}, missed "
                  f"{row['missed']} extra {row['extra']} of {row['full_lines']} lines; "
                  f"per read: det {row['det_kpx']:.1f} kpx, CPU {row['cpu_s']:.3f} s, "
                  f"area read {row['read_frac']:.3f}", flush=True)
        b_, r_ = rows["bands"], rows["rects"]
        if b_["det_kpx"] > 0 and r_["incremental"]:
            print(f"{kind:<8} rects/bands: det px x{r_['det_kpx'] / b_['det_kpx']:.2f}, "
                  f"CPU x{r_['cpu_s'] / b_['cpu_s']:.2f}", flush=True)
        out[kind] = rows
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", type=Path, action="append", default=[], required=True,
                   help="a folder in rico-dev's format (repeat for several sets)")
    p.add_argument("--limit", type=int, help="only the first N screens of each set")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"of {', '.join(KINDS)}")
    p.add_argument("--json", type=Path, help="also write the summary JSON here")
    args = p.parse_args(argv)
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    if not kinds or any(k not in KINDS for k in kinds):
        p.error(f"--kinds: of {', '.join(KINDS)}")
    # One onnxruntime thread: all of a model's CPU is this thread's (runtime/cpu_ledger.py).
    ocr = Ocr(OcrSettings(rec_cache=0, threads=1))
    summary: dict[str, Any] = {}
    for data in args.data:
        print(f"== {data.name}", flush=True)
        summary[data.name] = measure(load(data, args.limit), ocr, kinds)
    text = json.dumps(summary)
    if args.json:
        args.json.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
