"""OCR speed per frame, each set-up in its own process, the set-ups alternating by round.

    python bench/ocr_speed.py --data ../shared/data/rico-dev [--rounds 3] [--size 1080x1920]
                              [--no-default] [--json OUT]
    python bench/ocr_speed.py --images DIR --setups providers   # CUDA against CPU

`bench/grounding.py` interleaves every set-up in one process, where one set-up's onnxruntime
pool threads, still spinning after its run, slow the next one's. Here each set-up runs alone
in a fresh process (frames decoded first, 3 warm-up reads, then one timed read per frame);
the rounds alternate the set-ups so that they share the machine's drift. Reported per set-up:
the median over rounds of its per-frame p50, and its p50 ratio against our defaults in the
same round (median over rounds). The set-ups: our defaults, the previous defaults (det side
736, detector threads spinning, every line read at 48 px, low-density screens not scaled up)
and rapidocr's own defaults. ``--setups providers`` compares our defaults on the CPU
against the same on CUDA instead (``scripts/gpu-check`` runs it). ``--images DIR`` reads
every PNG/JPEG in a folder instead of a rico-dev folder. The last line printed is one JSON
object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.grounding import load, rapidocr_default  # noqa: E402
from models.ocr import Ocr, OcrSettings  # noqa: E402

SETUPS: dict[str, dict[str, Any] | None] = {  # None: rapidocr's own pipeline
    "ours (the defaults)": {},
    "previous defaults": {"det_side": 736, "det_spin": True, "rec_height_tall": 0,
                          "det_small_short": 0},
    "rapidocr defaults": None,
}
PROVIDER_SETUPS: dict[str, dict[str, Any] | None] = {
    "CPU": {"providers": ["CPUExecutionProvider"]},
    "CUDA": {"providers": ["CUDAExecutionProvider"]},
}


def frames(data: Path | None, images: Path | None, size: tuple[int, int]) -> list[Any]:
    """The BGR frames of that size: rico-dev's screens, or every image in a folder."""
    if images is not None:
        import cv2

        out = [cv2.imread(str(f)) for f in sorted(images.iterdir())
               if f.suffix.lower() in (".png", ".jpg", ".jpeg")]
        return [b for b in out if b is not None and (b.shape[1], b.shape[0]) == size]
    assert data is not None
    return [s.bgr for s in load(data, None) if (s.bgr.shape[1], s.bgr.shape[0]) == size]


def worker(data: Path | None, images: Path | None, size: tuple[int, int],
           setup: str) -> dict[str, float]:
    """One set-up in this process: the p50 seconds per frame."""
    imgs = frames(data, images, size)
    if not imgs:
        raise SystemExit(f"no {size[0]}x{size[1]} frames in {images or data}")
    overrides = json.loads(setup)
    if overrides is None:
        run = rapidocr_default()
    else:
        run = Ocr(msgspec.convert(overrides, OcrSettings)).run_bgr
    for bgr in imgs[:3]:
        run(bgr)
    times = []
    for bgr in imgs:
        t0 = time.perf_counter()
        run(bgr)
        times.append(time.perf_counter() - t0)
    return {"p50_s": statistics.median(times), "frames": len(imgs)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", type=Path, help="a folder in rico-dev's format")
    src.add_argument("--images", type=Path, help="a folder of PNG/JPEG screenshots")
    p.add_argument("--setups", choices=("defaults", "providers"), default="defaults",
                   help="ours against earlier/rapidocr defaults, or ours on CPU against CUDA")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--size", default="1080x1920", help="only frames of this WxH")
    p.add_argument("--no-default", action="store_true", help="skip rapidocr's own pipeline")
    p.add_argument("--json", type=Path, help="also write the summary JSON here")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        w, h = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        p.error(f"--size takes WxH, got {args.size!r}")
    if args.worker is not None:
        print(json.dumps(worker(args.data, args.images, (w, h), args.worker)))
        return 0
    if args.images is not None and not args.images.is_dir():
        print(f"error: {args.images} is not a folder", file=sys.stderr)
        return 2
    if args.data is not None and not (args.data / "screens").is_dir():
        print(f"error: {args.data} has no screens/ folder (expected rico-dev's format)",
              file=sys.stderr)
        return 2
    table = PROVIDER_SETUPS if args.setups == "providers" else SETUPS
    setups = {k: v for k, v in table.items() if not (args.no_default and v is None)}
    names = list(setups)
    p50s: dict[str, list[float]] = {n: [] for n in names}
    n_frames = 0
    for r in range(max(1, args.rounds)):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            source = ["--images", str(args.images)] if args.images else ["--data", str(args.data)]
            cmd = [sys.executable, str(Path(__file__).resolve()), *source,
                   "--size", args.size, "--worker", json.dumps(setups[name])]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
            if done.returncode != 0:
                print(f"error: {name} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
                return 1
            res = json.loads(done.stdout.strip().splitlines()[-1])
            p50s[name].append(res["p50_s"])
            n_frames = res["frames"]
            print(f"round {r + 1}/{args.rounds}  {name:<22} p50 {res['p50_s']:.3f}s", flush=True)
    ours = names[0]
    summary: dict[str, Any] = {"size": args.size, "frames": n_frames, "rounds": args.rounds,
                               "setups": args.setups}
    for name in names:
        ratios = [a / b for a, b in zip(p50s[name], p50s[ours], strict=True)]
        summary[name] = {"p50_s": statistics.median(p50s[name]), "p50_s_rounds": p50s[name],
                         f"ratio_vs_{'ours' if args.setups == 'defaults' else ours}":
                         statistics.median(ratios)}
        print(f"{name:<22} p50 {statistics.median(p50s[name]):.3f}s (rounds "
              f"{', '.join(f'{v:.3f}' for v in p50s[name])}); x{statistics.median(ratios):.2f} "
              f"of {ours}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
