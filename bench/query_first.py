"""Reading the query's lines first, against the whole frame's read, on real screenshots.

    python -m bench.query_first --data ../shared/data/rico-dev --data ../shared/data/droidbot-dev
                                [--limit N] [--json OUT]

Each text target of each screen is grounded twice on a frame its phone has not read yet
(nothing cached; the OCR line cache off, one thread): by today's read of the whole frame
(`perception.query_first = false`), and by a read of the lines that can be the query
exactly first (`models.grounding.exact_line_fits`), the rest only when none of them is
(`query_first = true`). The two run interleaved, target by target, in one process.

Reported per set: how many answers differ (the aim: none), text grounding and exact reads
with their 95 % intervals for both, wrong taps (a Grounded point outside a visible target's
box) and Ambiguous answers, how many groundings the first lines answered, the lines
recognised and the process CPU a grounding took, as a ratio against the whole frame's.
`EXACT_MAX` and `EXACT_MIN` were fit on rico-dev's lines; droidbot-dev was not looked at.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from bench.grounding import Screen, fmt_share, inside, load, wilson
from models.grounding import Perception, PerceptionSettings, normalize
from models.ocr import Ocr, OcrResult, OcrSettings
from protocol.messages import Ambiguous, Grounded, GroundResult

DEVICE = "bench-phone"


def answer_key(g: GroundResult) -> tuple[Any, ...]:
    """What a planner is told: the point, or the candidates' boxes in order, or nothing."""
    if isinstance(g, Grounded):
        return ("grounded", g.point)
    if isinstance(g, Ambiguous):
        return ("ambiguous", tuple(c.box for c in g.candidates))
    return ("not_found",)


class Tally(msgspec.Struct):
    n: int = 0
    visible: int = 0
    hit: int = 0  # of the visible: the Grounded point / first candidate inside the box
    read: int = 0  # of the visible: the target's text among the lines read
    wrong: int = 0
    ambiguous: int = 0
    cpu_s: float = 0.0
    lines: int = 0  # lines recognised

    def add(self, g: GroundResult, target: dict[str, Any], hidden: str, lines_read: OcrResult,
            cpu: float, recognised: int) -> None:
        point = g.point if isinstance(g, Grounded) else (
            g.candidates[0].box.center if isinstance(g, Ambiguous) else None)
        ok = point is not None and inside(point, tuple(target["bbox"]))
        self.n += 1
        self.ambiguous += isinstance(g, Ambiguous)
        self.cpu_s += cpu
        self.lines += recognised
        if hidden:
            return
        self.visible += 1
        self.hit += ok
        self.wrong += isinstance(g, Grounded) and not ok
        q = normalize(target["text"])[0]
        self.read += q in {normalize(ln.text)[0] for ln in lines_read.lines}


def ground_fresh(p: Perception, screen: Screen, text: str) -> tuple[GroundResult, OcrResult,
                                                                    float, int]:
    """``text`` grounded on a frame the phone has not read: the answer, the lines read by
    then, the process CPU seconds and the lines recognised."""
    p._ocr_results.clear()
    p._cache().forget(DEVICE)
    ocr = p.ocr_engine
    lines0, c0 = ocr.rec_lines, time.process_time()
    g = p.ground_text(screen.bgr, text, frame_id=screen.sid, device=DEVICE)
    cpu = time.process_time() - c0
    seen = p._cache()._prev.get(DEVICE)
    read = seen.reading.result if seen is not None else OcrResult(0, 0, ())
    return g, read, cpu, ocr.rec_lines - lines0


def run_set(screens: list[Screen], whole: Perception, first: Perception) -> dict[str, Any]:
    tallies = {"whole": Tally(), "first": Tally()}
    differ: list[dict[str, Any]] = []
    runs0 = sum(v for (_, kind), v in first.ocr_runs.items() if kind == "first")
    k = 0
    for screen in screens:
        for target, hidden in zip(screen.text_targets, screen.hidden, strict=True):
            if not normalize(target["text"])[0]:
                continue
            got: dict[str, GroundResult] = {}
            order = ("whole", "first") if k % 2 == 0 else ("first", "whole")
            k += 1
            for name in order:
                g, read, cpu, rec = ground_fresh(whole if name == "whole" else first, screen,
                                                 target["text"])
                got[name] = g
                tallies[name].add(g, target, hidden, read, cpu, rec)
            if answer_key(got["whole"]) != answer_key(got["first"]):
                differ.append({"screen": screen.sid, "text": target["text"],
                               "whole": answer_key(got["whole"]),
                               "first": answer_key(got["first"])})
        print(f"  {screen.sid}", end="\r", file=sys.stderr, flush=True)
    answered = sum(v for (_, kind), v in first.ocr_runs.items() if kind == "first") - runs0
    return {"tallies": tallies, "differ": differ, "answered_first": answered}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, action="append", required=True)
    ap.add_argument("--limit", type=int, default=None, help="screens per set")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    # one engine for both (the same models, the same prepared shapes); no line cache: a
    # line read by one set-up must not come free to the other
    ocr = Ocr(OcrSettings(threads=1, rec_cache=0))
    whole = Perception(PerceptionSettings(query_first=False), ocr=ocr)
    first = Perception(PerceptionSettings(query_first=True), ocr=ocr)
    out: dict[str, Any] = {}
    for data in args.data:
        screens = load(data, args.limit)
        ocr.run_bgr(screens[0].bgr)  # first-run allocations are no grounding's cost
        got = run_set(screens, whole, first)
        t = got["tallies"]
        print(f"\n{data.name}: {len(screens)} screens, {t['whole'].n} text targets "
              f"({t['whole'].visible} visible); answers that differ: {len(got['differ'])}; "
              f"answered by the first lines: {got['answered_first']}")
        row: dict[str, Any] = {"screens": len(screens), "targets": t["whole"].n,
                               "differ": got["differ"], "answered_first": got["answered_first"]}
        for name, tally in t.items():
            lo, hi = wilson(tally.hit, tally.visible)
            rlo, rhi = wilson(tally.read, tally.visible)
            print(f"  {name:<6} text acc {fmt_share(tally.hit, tally.visible)}  exact reads "
                  f"{fmt_share(tally.read, tally.visible)}  wrong {tally.wrong}  ambiguous "
                  f"{tally.ambiguous}  lines recognised {tally.lines / max(1, tally.n):.1f} a "
                  f"grounding  CPU {tally.cpu_s / max(1, tally.n):.3f} s a grounding")
            row[name] = {**msgspec.to_builtins(tally), "text_acc": tally.hit / max(1, tally.visible),
                         "text_acc_ci": [lo, hi], "read": tally.read / max(1, tally.visible),
                         "read_ci": [rlo, rhi]}
        ratio = t["first"].cpu_s / max(1e-9, t["whole"].cpu_s)
        lines = t["first"].lines / max(1, t["whole"].lines)
        print(f"  first / whole: CPU x{ratio:.2f}, lines recognised x{lines:.2f}")
        row["cpu_ratio"], row["lines_ratio"] = ratio, lines
        for d in got["differ"][:10]:
            print(f"  differs: {d}")
        out[data.name] = row
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
