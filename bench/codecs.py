"""JPEG encoders: the one frame codec (``devices.codecs``, OpenCV) against the Pillow paths
it replaced, in the same run on the same screens.

    .venv/bin/python -m bench.codecs [--rounds 20] [--out DIR]

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
lower is closer). The last line is one JSON object with the ratios.
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

from devices.codecs import decode_rgb, encode_jpeg, encode_png, fit_jpeg, shrink
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
    p.add_argument("--out", type=Path, default=None, help="write codecs.json here")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    result = measure(args.rounds)
    print(f"{'job':8} {'old ms':>8} {'new ms':>8} {'new/old':>8} {'old B':>8} {'new B':>8} "
          f"{'old err':>8} {'new err':>8}")
    for job, r in result.items():
        print(f"{job:8} {r['old_ms']:8.2f} {r['new_ms']:8.2f} {r['ratio']:8.3f} "
              f"{r['old_bytes']:8.0f} {r['new_bytes']:8.0f} {r['old_error']:8.2f} "
              f"{r['new_error']:8.2f}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "codecs.json").write_text(json.dumps(result, indent=2))
    print(json.dumps({job: r["ratio"] for job, r in result.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
