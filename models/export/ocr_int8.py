"""int8 OCR models for `OcrSettings.det_quant` / `rec_quant`, written into the OCR cache.

    python -m models.export.ocr_int8 --calibrate DIR [--models ppocrv4] [--parts det,rec]
                                     [--mode static|dynamic] [--screens 24]

"static" quantizes weights and activations (QDQ, int8 weights per channel, uint8
activations; the recogniser's convolutions alone, `STATIC_OP_TYPES`), its activation ranges calibrated on what the detector and recogniser see when
our pipeline reads the screenshots in DIR (a folder in rico-dev's format, DIR/screens/*.jpg,
or any folder of .png/.jpg): the detector's scaled frames and the recogniser's line batches.
"dynamic" quantizes the weights alone and needs no screenshots (the runtime makes it itself
on first use). The files land in `models.ocr.ocr_cache_dir()`, named by the fp32 model's hash,
the mode and the recipe (`models.ocr.quant_recipe`), next to a .json saying how they were made; the runtime finds
them there. Calibrate on one dev set and measure on another (bench/grounding.py).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec
import numpy as np

from models.ocr import (
    MODEL_SETS,
    STATIC_OP_TYPES,
    Ocr,
    OcrSettings,
    model_source,
    quant_recipe,
    quantized_path,
    to_bgr,
    write_atomic,
)
from models.quantize import quantize_dynamic_bytes, quantize_static_bytes

Part = Literal["det", "rec"]
class _Recording:
    """An onnxruntime session that keeps a copy of every input it is run on."""

    def __init__(self, session: Any, store: list[np.ndarray]) -> None:
        self._session = session
        self._store = store

    def run(self, names: Any, feed: dict[str, np.ndarray], *args: Any) -> Any:
        self._store.append(np.array(next(iter(feed.values()))))
        return self._session.run(names, feed, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def screenshots(folder: Path, n: int, seed: int = 0) -> list[Path]:
    """Up to n screenshots of a folder (rico-dev's format or a plain folder), a seeded draw."""
    root = folder / "screens" if (folder / "screens").is_dir() else folder
    files = sorted(p for p in root.iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
    random.Random(seed).shuffle(files)
    return files[:n] if n > 0 else files


def calibration_inputs(settings: OcrSettings, images: Sequence[Path]) -> dict[Part, list[np.ndarray]]:
    """What the fp32 detector and recogniser are run on while our pipeline (these settings,
    int8 off, no crop cache) reads the images: the inputs a quantized model will see."""
    fp32 = msgspec.structs.replace(settings, det_quant="none", rec_quant="none", rec_cache=0)
    ocr = Ocr(fp32, providers=["CPUExecutionProvider"])
    got: dict[Part, list[np.ndarray]] = {"det": [], "rec": []}
    ocr._det.infer.session = _Recording(ocr._det.infer.session, got["det"])
    ocr._rec.session.session = _Recording(ocr._rec.session.session, got["rec"])
    for path in images:
        ocr.run_bgr(to_bgr(path))
    return got


def build(models: str, parts: Sequence[Part], mode: Literal["dynamic", "static"],
          calibrate: Sequence[Path] = (), n_screens: int = 24,
          settings: OcrSettings | None = None) -> dict[Part, Path]:
    """Write the int8 files of ``parts`` into the OCR cache; their paths."""
    settings = settings or OcrSettings(models=models)  # type: ignore[arg-type]
    images = [p for folder in calibrate for p in screenshots(folder, n_screens)]
    if mode == "static" and not images:
        raise SystemExit("static quantization needs screenshots: --calibrate DIR")
    inputs = calibration_inputs(settings, images) if mode == "static" else {}
    out: dict[Part, Path] = {}
    for part in parts:
        t0 = time.perf_counter()
        source = model_source(models, part)
        data = (quantize_static_bytes(source, inputs[part], STATIC_OP_TYPES[part])
                if mode == "static" else quantize_dynamic_bytes(source))
        path = quantized_path(models, part, mode, source)
        write_atomic(path, data)
        info = {"models": models, "part": part, "mode": mode,
                "recipe": quant_recipe(part, mode),
                "calibration": [str(c.resolve()) for c in calibrate],
                "calibration_images": len(images),
                "calibration_inputs": len(inputs.get(part, [])),
                "seconds": round(time.perf_counter() - t0, 1)}
        write_atomic(path.with_suffix(".json"), json.dumps(info, indent=1).encode())
        out[part] = path
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models", default="ppocrv4", choices=sorted(MODEL_SETS))
    p.add_argument("--parts", default="det,rec", help="det, rec or det,rec")
    p.add_argument("--mode", default="static", choices=["static", "dynamic"])
    p.add_argument("--calibrate", type=Path, action="append", default=[],
                   help="a folder of screenshots (rico-dev's format or plain); repeatable")
    p.add_argument("--screens", type=int, default=24,
                   help="screenshots drawn from each folder (0: all)")
    args = p.parse_args(argv)
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    if not parts or any(x not in ("det", "rec") for x in parts):
        p.error("--parts takes det, rec or det,rec")
    for part, path in build(args.models, parts, args.mode, args.calibrate,
                            args.screens).items():
        print(f"{part}: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
