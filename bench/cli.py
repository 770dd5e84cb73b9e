"""``mobagent bench NAME [ARGS...]``: run one of the benchmarks in ``bench/``.

Each benchmark is a module with ``main(argv) -> int`` and its own ``--help``; this command
only finds it, so ``mobagent bench fleet --devices 1,4`` is ``python -m bench.fleet
--devices 1,4``.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

BENCHMARKS = {
    "bus": "bus latency and throughput against raw paho",
    "sim": "simulated phones: screenshots and input commands per second",
    "capture": "raw vs PNG capture paths through adbutils",
    "codecs": "the one JPEG encoder (OpenCV) against the Pillow paths it replaced",
    "grounding": "OCR and grounding on a Rico-format dataset (--data DIR)",
    "ocr_speed": "OCR seconds per frame, each set-up in its own process (--data DIR)",
    "speculation": "what speculative OCR saves while the planner waits",
    "mobile_eval": "Mobile-Eval-sim: SU / PS / RE / CR per tier",
    "model_families": "Mobile-Eval-sim per model family, a stand-in model on loopback (--noise p)",
    "fleet": "steps/s and per-step overhead for 1..N phones",
    "perception_workers": "requests/s on one vs two `mobagent perceive` workers; one killed",
    "soak": "chaos soak: serve on simulated phones while the broker, phones and model fail",
    "dashboard": "the live dashboard's CPU, frames per browser, and its cost to the fleet ratio",
    "memory": "planner prompt tokens per step with memory on and off; the history bound",
}


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "bench", help="run a benchmark (mobagent bench NAME --help)",
        description="Run one benchmark from bench/; the arguments after NAME are its own.",
        epilog="\n".join(f"  {name:12} {what}" for name, what in BENCHMARKS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", choices=sorted(BENCHMARKS), metavar="NAME",
                   help="one of: " + ", ".join(sorted(BENCHMARKS)))
    p.add_argument("args", nargs=argparse.REMAINDER, help="the benchmark's own arguments")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    module = importlib.import_module(f"bench.{args.name}")
    return int(module.main(list(args.args)))
