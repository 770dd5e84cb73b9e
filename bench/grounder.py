"""``bench/grounding.py --grounder URL --grounder-model NAME [--grounder-family F]``: a real
grounding model (``llm.roles.grounder``, served anywhere OpenAI-compatible: vLLM on a GPU
host) measured on the dev sets, the grounder alone (``perception.*_grounding = "model"``).

Every visible text target (asked as ``Click text``) and every described icon target (as
``Click icon``) is one request through the product's client and the family's prompt and
mapping; a hit is the answered point inside the ground-truth box. Reported per set: text
and icon accuracy with 95 % Wilson intervals, the answers that said "not there" or held no
point, and the call latency p50/p95."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
import cv2
import msgspec

from actors.perception import grounder_target
from models.llm import LLMClient, LLMError, LLMSettings
from models.llm.grounder import ModelGrounder
from protocol.operations import ClickIcon, ClickText, Operation

if TYPE_CHECKING:
    from bench.grounding import Screen


def grounder_settings(url: str, model: str, family: str = "auto",
                      timeout_s: float = 60.0) -> LLMSettings:
    """Every role at ``url`` (nothing else is asked); the key from $OPENAI_API_KEY when the
    server needs one."""
    return msgspec.convert({"base_url": url, "timeout_s": timeout_s, "retry_budget_s": 30.0,
                            "family": {"grounder": family},
                            "roles": {"grounder": {"model": model}}}, LLMSettings)


def _queries(s: Screen) -> list[tuple[str, Operation, tuple[float, ...]]]:
    out: list[tuple[str, Operation, tuple[float, ...]]] = []
    for t, why in zip(s.text_targets, s.hidden or [""] * len(s.text_targets), strict=True):
        if not why and t.get("text"):
            out.append(("text", ClickText(t["text"]), tuple(t["bbox"])))
    out += [("icon", ClickIcon(t["description"]), tuple(t["bbox"]))
            for t in s.icon_targets if t.get("description")]
    return out


async def measure(screens: Sequence[Screen], grounder: ModelGrounder) -> dict[str, Any]:
    from bench.grounding import fmt_share, inside, pct, wilson

    hits = {"text": [0, 0], "icon": [0, 0]}
    none = failed = 0
    took: list[float] = []
    for s in screens:
        ok, png = cv2.imencode(".png", s.bgr)
        h, w = s.bgr.shape[:2]
        for kind, op, box in _queries(s):
            t0 = time.perf_counter()
            try:
                ans = await grounder.locate(grounder_target(op), png.tobytes(), (w, h))
            except LLMError as exc:
                failed += 1
                print(f"  {s.sid} {kind}: {exc}", flush=True)
                continue
            took.append(time.perf_counter() - t0)
            hits[kind][1] += 1
            if ans is None:
                none += 1
            elif inside(ans.point, box):  # type: ignore[arg-type]
                hits[kind][0] += 1
    out: dict[str, Any] = {"model": grounder.family.name, "failed_calls": failed,
                           "not_there_or_unusable": none, "unusable": grounder.unusable,
                           "latency_p50_s": pct(took, 50) if took else None,
                           "latency_p95_s": pct(took, 95) if took else None}
    for kind, (k, n) in hits.items():
        out[f"{kind}_accuracy"] = k / n if n else None
        out[f"{kind}_accuracy_ci"] = wilson(k, n) if n else None
        out[f"n_{kind}"] = n
        print(f"  grounder {kind}: {fmt_share(k, n)} ({k}/{n})", flush=True)
    return out


def run(sets: dict[str, list[Screen]], args: argparse.Namespace) -> dict[str, Any]:
    """``--grounder``: each set measured with the grounder alone."""
    settings = grounder_settings(args.grounder, args.grounder_model, args.grounder_family)

    async def everything() -> dict[str, Any]:
        async with LLMClient(settings) as llm:
            grounder = ModelGrounder.from_settings(llm, settings)
            result: dict[str, Any] = {}
            for label, screens in sets.items():
                print(f"[{label}] grounder {args.grounder_model} at {args.grounder}", flush=True)
                result[label] = await measure(screens, grounder)
            return result

    return {"grounder": {"url": args.grounder, "model": args.grounder_model,
                         "family": args.grounder_family, "sets": anyio.run(everything)}}
