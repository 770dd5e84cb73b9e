"""JPEG encoders: the one frame codec (``devices.codecs``, OpenCV) against the Pillow paths
it replaced, and capture's ``encode`` stage against its former self, in the same run on the
same screens.

    .venv/bin/python -m bench.codecs [--rounds 20] [--jobs llm,marked,capture]
                                     [--screens DIR ...] [--out DIR]

Two jobs, each on a simulated phone's home screen and a settings screen (1080x2400):

- ``llm``: an encoded frame (PNG, as a PNG capture or a saved screenshot reaches the LLM
  client) to a JPEG of at most 1024 px at quality 85 with optimised Huffman tables. Before:
  the client's own Pillow encoder (decode, ``thumbnail`` with Lanczos, ``save``). After:
  ``devices.codecs.fit_jpeg`` (OpenCV decode, area shrink, encode).
- ``marked``: perception's marked candidates, a full-size RGB frame to JPEG at quality 85.
  Before: ``Image.save``. After: ``devices.codecs.encode_jpeg``.

Reported per job: CPU ms per call (``time.process_time``, all threads, median of the
screens), new/old ratio, bytes of each, and the mean absolute pixel difference of each
output against the source at the output's size (how much the JPEG changed the picture;
lower is closer).

- ``capture``: capture's ``encode`` stage on one frame (``actors.capture.encode_capture``,
  the agent's defaults: a JPEG frame at quality 80, the LLM's 1024-px view at 85, the
  watchers' 360-px screen), against the former stage (``former_capture_encode``: each
  JPEG converting its own input, the black area read on the full frame). Frames: the
  simulated phone's home screen and app screens (1080x2400), and the first ``--per-dir``
  JPEG screenshots of each ``--screens DIR`` (e.g. /work/shared/data/droidbot-dev/screens),
  as they are. Reported: the thread CPU ms (``time.thread_time``: what the CPU ledger
  charges) of the stage and of each part, median over the frames of each frame's median
  over ``--rounds`` calls, old and new alternated; their ratio; the frame as the engine
  takes it after another screen (``changed``), after itself with one pixel changed where
  the first look does not compare (``one_px``, the worst case) and after the same pixels
  (``same``: compared, the last encoding taken), each against the former stage, which
  hashed and encoded every frame alike; and whether the new stage
  made the same bytes (frame, view, screen), digest and black area as the old on every
  frame, and the same black area on each frame darkened to means of 1-12 (the threshold
  is 6; decisions may part only within a hair of it, counted as ``dark_differ``).

The last line is one JSON object with the ratios.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from actors.capture import (
    BlackArea,
    Encoded,
    black_area,
    encode_capture,
    encode_frame,
    pixel_sha,
    same_pixels,
    small_views,
)
from devices.codecs import (
    decode_rgb,
    encode_jpeg,
    encode_png,
    fit_jpeg,
    shrink,
)
from sim.phone.phone import SimPhone
from sim.phone_api import DeviceInfo

SIDE, QUALITY = 1024, 85


def former_llm_jpeg(data: bytes, max_side: int = SIDE, quality: int = QUALITY) -> bytes:
    """The baseline: the LLM client's Pillow encoder before it used ``fit_jpeg``."""
    with Image.open(io.BytesIO(data)) as img:
        if img.format == "JPEG" and max(img.size) <= max_side:
            return data
        img.load()
        out = img.convert("RGB") if img.mode != "RGB" else img.copy()
    if max(out.size) > max_side:
        out.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    out.save(buf, format="JPEG", quality=quality, optimize=True)
    return buf.getvalue()


def former_marked_jpeg(rgb: np.ndarray, quality: int = QUALITY) -> bytes:
    """The baseline: ``mark_candidates``' Pillow save before it used ``encode_jpeg``."""
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


# -- capture's encode stage as it was, the baseline -------------------------------------------
BLACK_MEAN, APP_TOP, APP_BOTTOM, BAR_TOP, BAR_BOTTOM = 6.0, 0.06, 0.92, 0.035, 0.94


def former_is_black(rgb: np.ndarray) -> bool:
    small = rgb[::8, ::8]
    return float(small.mean()) < BLACK_MEAN and float(small.std()) < 4.0


def former_black_area(rgb: np.ndarray) -> BlackArea | None:
    if former_is_black(rgb):
        return "frame"
    h = rgb.shape[0]
    if not former_is_black(rgb[int(h * APP_TOP):int(h * APP_BOTTOM)]):
        return None
    top, bottom = rgb[:max(1, int(h * BAR_TOP)):2, ::2], rgb[int(h * BAR_BOTTOM)::2, ::2]
    return "app" if not (former_is_black(top) and former_is_black(bottom)) else "frame"


FRAME_Q, VIEW, VIEW_Q, SCREEN = 80, 1024, 85, 360  # the agent's defaults


def former_capture_encode(rgb: np.ndarray) -> Encoded:
    """The baseline: ``CaptureEngine._take``'s work before ``encode_capture``."""
    sha = pixel_sha(rgb)
    dark = former_black_area(rgb)
    data = encode_frame(rgb, "jpeg", FRAME_Q)
    view, screen = small_views(rgb, VIEW, VIEW_Q, SCREEN)
    return Encoded(sha, dark, data, view, screen)


def capture_encode(rgb: np.ndarray) -> Encoded:
    return encode_capture(rgb, b"", fmt="jpeg", quality=FRAME_Q, view_side=VIEW,
                          view_quality=VIEW_Q, screen_side=SCREEN)


def thread_ms(fn: Callable[[], object], rounds: int) -> float:
    """Median thread CPU ms of ``fn`` over ``rounds`` calls, after one to warm up."""
    fn()
    times = []
    for _ in range(rounds):
        t0 = time.thread_time()
        fn()
        times.append(time.thread_time() - t0)
    return 1000 * statistics.median(times)


def capture_parts(rgb: np.ndarray, before: np.ndarray
                  ) -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    """(old, new) of each part of the stage on ``rgb``; the new parts as ``encode_capture``
    runs them (the black area on the view). The last
    three rows are the frame as ``CaptureEngine`` takes it after another frame: ``changed``
    after ``before`` (another screen), ``one_px`` after ``rgb`` with one pixel changed in
    a row the first look skips (the worst case: compared whole, then encoded), ``same``
    after the same pixels (compared whole, and the last encoding taken)."""
    view = shrink(rgb, VIEW)
    one_px, copy = rgb.copy(), rgb.copy()
    one_px[rgb.shape[0] // 2 + 1, rgb.shape[1] // 3] ^= 1

    def taken(previous: np.ndarray) -> Callable[[], object]:
        return lambda: same_pixels(previous, rgb) or capture_encode(rgb)

    def old() -> object:
        return former_capture_encode(rgb)

    return {
        "sha": (lambda: pixel_sha(rgb), lambda: pixel_sha(rgb)),
        "frame": (lambda: encode_frame(rgb, "jpeg", FRAME_Q),
                  lambda: encode_frame(rgb, "jpeg", FRAME_Q)),
        "views": (lambda: small_views(rgb, VIEW, VIEW_Q, SCREEN),
                  lambda: small_views(rgb, VIEW, VIEW_Q, SCREEN)),
        "black": (lambda: former_black_area(rgb), lambda: black_area(view, 1)),
        "stage": (old, lambda: capture_encode(rgb)),
        "changed": (old, taken(before)),
        "one_px": (old, taken(one_px)),
        "same": (old, taken(copy)),
    }


def darkened(rgb: np.ndarray, mean: float) -> np.ndarray:
    """``rgb`` scaled to about ``mean`` brightness (a dark theme, a dimmed or secure frame)."""
    return np.clip(rgb.astype(np.float32) * (mean / max(1.0, float(rgb.mean()))), 0,
                   255).astype(np.uint8)


def measure_capture(frames: dict[str, np.ndarray], rounds: int) -> dict[str, Any]:
    per: dict[str, dict[str, list[float]]] = {}
    same = dark_same = dark_differ = 0
    shown = list(frames.values())
    for i, rgb in enumerate(shown):
        old, new = former_capture_encode(rgb), capture_encode(rgb)
        same += old == new
        for mean in (1, 2, 3, 4, 5, 5.5, 6.5, 7, 8, 10, 12):
            dim = darkened(rgb, mean)
            if former_capture_encode(dim).dark == capture_encode(dim).dark:
                dark_same += 1
            else:
                dark_differ += 1
        for part, (old_fn, new_fn) in capture_parts(rgb, shown[i - 1]).items():
            row = per.setdefault(part, {"old": [], "new": []})
            # Alternate old and new so a change in machine load hits both alike.
            o1, n1 = thread_ms(old_fn, rounds), thread_ms(new_fn, rounds)
            o2, n2 = thread_ms(old_fn, rounds), thread_ms(new_fn, rounds)
            row["old"].append(statistics.median((o1, o2)))
            row["new"].append(statistics.median((n1, n2)))
    out: dict[str, Any] = {}
    for part, row in per.items():
        old_ms, new_ms = statistics.median(row["old"]), statistics.median(row["new"])
        out[part] = {"old_ms": round(old_ms, 3), "new_ms": round(new_ms, 3),
                     "ratio": round(new_ms / old_ms, 3)}
    out["frames"] = len(frames)
    out["same_output"] = same
    out["dark_same"], out["dark_differ"] = dark_same, dark_differ
    return out


def capture_frames(dirs: list[Path], per_dir: int) -> dict[str, np.ndarray]:
    """The simulated phone's home screen and first screen of each app, then the first
    ``per_dir`` JPEGs of each directory."""
    frames = dict(screens())
    phone = SimPhone(DeviceInfo("bench"))
    for app in phone.apps():
        p = SimPhone(DeviceInfo("bench"))
        p.clock = lambda: 0.0
        try:
            p.open(app.package, app.home, **app.examples.get(app.home, {}))
            p.settle()
        except Exception:
            continue  # a screen that needs more set-up than its examples: not this bench's
        frames[app.package] = np.ascontiguousarray(np.asarray(p.screenshot().convert("RGB")))
    for d in dirs:
        for f in sorted(d.glob("*.jpg"))[:per_dir]:
            frames[f"{d.name}/{f.name}"] = decode_rgb(f.read_bytes())
    return frames


def screens() -> dict[str, np.ndarray]:
    phone = SimPhone(DeviceInfo("bench"))
    home = np.ascontiguousarray(np.asarray(phone.screenshot().convert("RGB")))
    phone.launch("com.android.settings")
    settings = np.ascontiguousarray(np.asarray(phone.screenshot().convert("RGB")))
    return {"home": home, "settings": settings}


def cpu_ms(fn: Callable[[], object], rounds: int) -> float:
    fn()  # warm up
    t0 = time.process_time()
    for _ in range(rounds):
        fn()
    return 1000 * (time.process_time() - t0) / rounds


def pixel_error(jpeg: bytes, source: np.ndarray) -> float:
    out = decode_rgb(jpeg)
    ref = shrink(source, max(out.shape[:2]))
    if ref.shape != out.shape:  # a rounding apart at the edge: compare what both cover
        h, w = min(ref.shape[0], out.shape[0]), min(ref.shape[1], out.shape[1])
        ref, out = ref[:h, :w], out[:h, :w]
    return float(np.abs(ref.astype(np.int16) - out.astype(np.int16)).mean())


def measure(rounds: int) -> dict[str, Any]:
    jobs: dict[str, dict[str, list[float]]] = {}
    for rgb in screens().values():
        png = encode_png(rgb)
        cases = {
            "llm": (lambda png=png: former_llm_jpeg(png), lambda png=png: fit_jpeg(png, SIDE, QUALITY)),
            "marked": (lambda rgb=rgb: former_marked_jpeg(rgb),
                       lambda rgb=rgb: encode_jpeg(rgb, QUALITY)),
        }
        for job, (old, new) in cases.items():
            row = jobs.setdefault(job, {})
            # Alternate old and new so a change in machine load hits both alike.
            for name, fn in (("old", old), ("new", new), ("old", old), ("new", new)):
                row.setdefault(f"{name}_ms", []).append(cpu_ms(fn, max(1, rounds // 2)))
            for name, fn in (("old", old), ("new", new)):
                data = fn()
                row.setdefault(f"{name}_bytes", []).append(len(data))
                row.setdefault(f"{name}_error", []).append(pixel_error(data, rgb))
    out: dict[str, Any] = {}
    for job, row in jobs.items():
        med = {key: statistics.median(vals) for key, vals in row.items()}
        out[job] = {key: round(val, 2) for key, val in med.items()}
        out[job]["ratio"] = round(med["new_ms"] / med["old_ms"], 3)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=20, help="calls per measurement")
    p.add_argument("--jobs", default="llm,marked,capture",
                   help="comma-separated: llm, marked (the encoders), capture (the stage)")
    p.add_argument("--screens", type=Path, action="append", default=[],
                   help="capture: a directory of JPEG screenshots to add (repeatable)")
    p.add_argument("--per-dir", type=int, default=20, help="capture: screenshots per --screens")
    p.add_argument("--out", type=Path, default=None, help="write codecs.json here")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    jobs = set(args.jobs.split(","))
    if not jobs <= {"llm", "marked", "capture"}:
        p.error(f"unknown job(s): {', '.join(sorted(jobs - {'llm', 'marked', 'capture'}))}")
    result: dict[str, Any] = {}
    if jobs & {"llm", "marked"}:
        result = {job: r for job, r in measure(args.rounds).items() if job in jobs}
        print(f"{'job':8} {'old ms':>8} {'new ms':>8} {'new/old':>8} {'old B':>8} "
              f"{'new B':>8} {'old err':>8} {'new err':>8}")
        for job, r in result.items():
            print(f"{job:8} {r['old_ms']:8.2f} {r['new_ms']:8.2f} {r['ratio']:8.3f} "
                  f"{r['old_bytes']:8.0f} {r['new_bytes']:8.0f} {r['old_error']:8.2f} "
                  f"{r['new_error']:8.2f}")
    if "capture" in jobs:
        frames = capture_frames(args.screens, args.per_dir)
        cap = measure_capture(frames, args.rounds)
        print(f"capture's encode stage, thread CPU ms per frame, median of {cap['frames']} "
              "frames (each its median of --rounds calls)")
        print(f"{'part':8} {'old ms':>8} {'new ms':>8} {'new/old':>8}")
        for part in ("sha", "frame", "views", "black", "stage", "changed", "one_px", "same"):
            r = cap[part]
            print(f"{part:8} {r['old_ms']:8.3f} {r['new_ms']:8.3f} {r['ratio']:8.3f}")
        print(f"same bytes, digest and black area as before: {cap['same_output']}/"
              f"{cap['frames']} frames; darkened frames deciding alike: {cap['dark_same']}, "
              f"apart: {cap['dark_differ']}")
        result["capture"] = cap
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "codecs.json").write_text(json.dumps(result, indent=2))
    print(json.dumps({job: r["ratio"] if job != "capture" else r["stage"]["ratio"]
                      for job, r in result.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
