"""A static HTML report of a recorded run: ``render_report(run_dir) -> run_dir/report.html``.

It reads what the recorder wrote (``<episode>/events.jsonl`` through ``recording.reader``,
``<episode>/frames/``, ``<episode>/episode.json``) and, when present, the Mobile-Eval
runner's ``results.json``. The page is one file plus the recorded images, by relative
path: no server, nothing fetched. Per episode: a summary and a timeline with one ``<section class="step"
data-step="N">`` per step: the screenshot with the tap point and the grounding boxes
drawn over it in SVG (image-pixel coordinates, so nothing is re-rendered), Observation /
Thought / Action, the grounding result, the action's result, the reflection verdict, the
timing breakdown and the LLM tokens. Per run: counts by status, totals, per-step latency
by phase (p50 / p95 / mean over every StepTiming) and a table of the episodes.

``results.json`` (the Mobile-Eval runner's, optional) is shown as an SU / PS / RE / CR
table when it has the shape of ``sim.eval.report.summary`` (``overall`` and ``tiers``,
at the top level or under ``summary``) and, when it has a list under ``episodes`` /
``results`` / ``tasks`` (rows with task_id, app, tier, seed and SU..CR, directly or under
``score``), as a per-episode table. Any other shape is a note, not an error.

The page is laid out by the jinja2 templates in ``recording/templates/`` (``report.html.j2``,
the page; ``step.html.j2``, one step's macros); this module reads the run and computes what
they draw. Templates autoescape, so everything that came from the model or the device is
HTML-escaped, and a Content Security Policy allows only the page's own (hashed) script, so
a Thought cannot inject markup or code. A malformed line (truncated file, bad JSON, wrong
types) becomes a note shown in the report (and returned in ``Run.notes``), never an
exception.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
import msgspec

from protocol.operations import Operation, format_operation
from recording.reader import EVENTS_NAME, episode_dirs, read_events

REPORT_NAME = "report.html"
RESULTS_NAME = "results.json"
# Kinds that belong to the episode as a whole, not to one step.
EPISODE_KINDS = frozenset({"episode_started", "episode_finished", "instruction",
                           "device_status", "host_status"})
VERDICT_CLASS = {"ok": "good", "complete": "good", "unchanged": "warn", "incomplete": "warn",
                 "wrong_page": "bad", "loop": "bad"}
STATUS_CLASS = {"succeeded": "good", "failed": "bad", "cancelled": "warn", "running": "warn",
                "unfinished": "warn"}
PHASE_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
                "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"]
KNOWN_PHASES = ["capture", "perception", "llm", "approval", "act", "reflection", "plan",
                "ground", "reflect", "choose"]


# ---- the data model ----------------------------------------------------------------------


@dataclass
class Step:
    number: int
    events: list[dict[str, Any]] = field(default_factory=list)

    def of(self, *kinds: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") in kinds]


@dataclass
class Episode:
    dirname: str  # relative to the run dir ("" when the run dir is the episode)
    events: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)  # episode.json, when present
    frames: dict[str, dict[str, Any]] = field(default_factory=dict)  # frame_id -> Frame event
    image_src: dict[str, str] = field(default_factory=dict)  # file (episode-relative) -> src

    @property
    def episode_id(self) -> str:
        for e in self.events:
            if isinstance(e.get("episode_id"), str) and e["episode_id"]:
                return str(e["episode_id"])
        return str(self.summary.get("episode_id") or self.dirname or "episode")

    def first(self, kind: str) -> dict[str, Any] | None:
        return next((e for e in self.events if e.get("event") == kind), None)

    def last(self, kind: str) -> dict[str, Any] | None:
        return next((e for e in reversed(self.events) if e.get("event") == kind), None)

    @cached_property
    def steps(self) -> list[Step]:
        """The timeline; computed once (set ``events`` before the first use)."""
        by_step: dict[int, Step] = {}
        for e in self.events:
            if e.get("event") in EPISODE_KINDS:
                continue
            n = e["step"]
            by_step.setdefault(n, Step(n)).events.append(e)
        return [by_step[n] for n in sorted(by_step)]

    @property
    def device(self) -> str:
        return next((str(e["device"]) for e in self.events if e.get("device")),
                    str(self.summary.get("device") or ""))

    @property
    def instruction(self) -> str:
        started = self.first("episode_started")
        if started is not None:
            return _s(started.get("text"))
        return _s(self.summary.get("instruction"))

    @property
    def task(self) -> str:
        started = self.first("episode_started")
        return _s((started or {}).get("task") or self.summary.get("task") or "")

    @property
    def status(self) -> str:
        finished = self.last("episode_finished")
        if finished is not None:
            return _s(finished.get("status")) or "unfinished"
        return _s(self.summary.get("status")) or "unfinished"

    @property
    def reason(self) -> str:
        return _s((self.last("episode_finished") or {}).get("reason"))

    @property
    def n_steps(self) -> int:
        finished = self.last("episode_finished")
        if finished is not None and isinstance(finished.get("steps"), int):
            return int(finished["steps"])
        return len(self.steps)

    @property
    def start_ts(self) -> float | None:
        started = self.first("episode_started")
        if started is not None and started.get("ts") is not None:
            return float(started["ts"])
        tss = [e["ts"] for e in self.events if e.get("ts") is not None]
        return min(tss) if tss else None

    @property
    def duration_s(self) -> float | None:
        start = self.start_ts
        finished = self.last("episode_finished")
        end: float | None = None
        if finished is not None and finished.get("ts") is not None:
            end = float(finished["ts"])
        else:
            tss = [e["ts"] for e in self.events if e.get("ts") is not None]
            end = max(tss) if tss else None
        if start is None or end is None:
            return None
        return max(0.0, end - start)

    @property
    def tokens(self) -> tuple[int, int, int]:
        """(prompt, completion, calls) over the episode's LlmUsage events."""
        usage = [e for e in self.events if e.get("event") == "llm_usage"]
        return (sum(_int(e.get("prompt_tokens")) for e in usage),
                sum(_int(e.get("completion_tokens")) for e in usage), len(usage))

    @property
    def cost_usd(self) -> float:
        """USD over the episode's LlmUsage events (0 when no model is priced)."""
        return sum(_num(e.get("cost_usd")) or 0.0 for e in self.events
                   if e.get("event") == "llm_usage")

    @property
    def settings(self) -> dict[str, str]:
        """The episode-level choices its EpisodeStarted recorded (planning, reflection, ...)."""
        got = (self.first("episode_started") or {}).get("settings")
        return {str(k): _s(v) for k, v in got.items()} if isinstance(got, dict) else {}

    @property
    def kept_notes(self) -> list[str]:
        """The focus content the planner kept (``note`` events), in order."""
        return [_s(e.get("text")) for e in self.events if e.get("event") == "note"]

    @property
    def progress(self) -> str:
        """The last progress summary (``progress`` events)."""
        return _s((self.last("progress") or {}).get("text"))

    @property
    def phase_totals(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for e in self.events:
            if e.get("event") == "step_timing":
                for name, sec in _phases(e).items():
                    totals[name] = totals.get(name, 0.0) + sec
        return totals


@dataclass
class Run:
    dir: Path
    episodes: list[Episode] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    results: Any = None  # results.json, parsed

    @property
    def all_notes(self) -> list[str]:
        return self.notes + [n for ep in self.episodes for n in ep.notes]


# ---- reading ----------------------------------------------------------------------------


def _s(value: Any) -> str:
    return "" if value is None else str(value)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _num(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _phases(event: dict[str, Any]) -> dict[str, float]:
    phases = event.get("phases")
    if not isinstance(phases, dict):
        return {}
    return {str(k): v for k, val in phases.items() if (v := _num(val)) is not None and v >= 0}


def _image_src(ep: Episode, ep_dir: Path, run_dir: Path, rel: Any, what: str) -> str | None:
    """The page-relative URL of a recorded image, or None (with a note) when unusable."""
    if not isinstance(rel, str) or not rel:
        return None
    if rel in ep.image_src:
        return ep.image_src[rel]
    path = (ep_dir / rel).resolve()
    if Path(rel).is_absolute() or ".." in Path(rel).parts or not path.is_relative_to(
        ep_dir.resolve()
    ):
        ep.notes.append(f"{ep.dirname or '.'}: {what} path {rel!r} leaves the episode dir; ignored")
        return None
    if not path.is_file():
        ep.notes.append(f"{ep.dirname or '.'}: {what} {rel} is missing")
        return None
    src = "/".join(quote(p) for p in path.relative_to(run_dir.resolve()).parts)
    ep.image_src[rel] = src
    return src


def load_episode(ep_dir: Path, run_dir: Path) -> Episode:
    dirname = "" if ep_dir == run_dir else ep_dir.relative_to(run_dir).as_posix()
    ep = Episode(dirname=dirname)
    label = f"{dirname}/{EVENTS_NAME}" if dirname else EVENTS_NAME
    events, notes = read_events(ep_dir / EVENTS_NAME, label)
    ep.notes.extend(notes)
    summary_path = ep_dir / "episode.json"
    if summary_path.is_file():
        try:
            summary = json.loads(summary_path.read_text(encoding="utf-8", errors="replace"))
            if isinstance(summary, dict):
                ep.summary = summary
            else:
                ep.notes.append(f"{dirname or '.'}/episode.json: not a JSON object; ignored")
        except (json.JSONDecodeError, OSError) as exc:
            ep.notes.append(f"{dirname or '.'}/episode.json: unreadable ({exc}); ignored")
    # Arrival order is not time order: sort by time, then file order (steps group later).
    order = {id(e): i for i, e in enumerate(events)}
    events.sort(key=lambda e: (e["ts"] if e["ts"] is not None else math.inf, order[id(e)]))
    ep.events = events
    for e in events:
        if e.get("event") == "frame":
            fid = _s(e.get("frame_id"))
            e["_src"] = _image_src(ep, ep_dir, run_dir, e.get("file"), "frame image")
            if fid and fid not in ep.frames:
                ep.frames[fid] = e
        elif e.get("event") == "ambiguous":
            e["_src"] = _image_src(ep, ep_dir, run_dir, e.get("marked_file"), "marked image")
    return ep


def _load_results(run: Run) -> None:
    path = run.dir / RESULTS_NAME
    if not path.is_file():
        return
    try:
        run.results = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (json.JSONDecodeError, OSError) as exc:
        run.notes.append(f"{RESULTS_NAME}: unreadable ({exc}); no results table")


def load_run(run_dir: str | Path) -> Run:
    """Everything recorded under ``run_dir`` (episodes in any sub-directory, or the dir itself)."""
    run_dir = Path(run_dir)
    run = Run(dir=run_dir)
    if not run_dir.is_dir():
        run.notes.append(f"{run_dir}: not a directory")
        return run
    for ep_dir in episode_dirs(run_dir):
        run.episodes.append(load_episode(ep_dir, run_dir))
    run.episodes.sort(key=lambda ep: (ep.start_ts if ep.start_ts is not None else math.inf,
                                      ep.dirname))
    _load_results(run)
    return run


# ---- formatting (the templates' filters and globals) ------------------------------------


def _secs(value: float | None) -> str:
    if value is None:
        return "–"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.2f} s"
    return f"{value / 60:.1f} min"


def _usd(value: Any) -> str:
    """Money as the report shows it; "–" for none (no model priced)."""
    n = _num(value)
    return f"${n:.4f}" if n else "–"


def _clock(ts: float | None) -> str:
    if ts is None:
        return "–"
    try:
        return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return "–"


def _op_text(op: Any) -> str:
    if not isinstance(op, dict):
        return ""
    try:
        return format_operation(msgspec.convert(op, Operation))
    except (msgspec.ValidationError, TypeError):
        args = ", ".join(f"{k}={v}" for k, v in op.items() if k != "op")
        return f"{op.get('op', '?')} ({args})" if args else _s(op.get("op", "?"))


def _box(value: Any) -> tuple[float, float, float, float] | None:
    if isinstance(value, list | tuple) and len(value) == 4:
        nums = [_num(v) for v in value]
        if all(n is not None for n in nums):
            left, top, right, bottom = (float(n) for n in nums if n is not None)
            if right >= left and bottom >= top:
                return left, top, right, bottom
    return None


def _phase_color(name: str) -> str:
    if name in KNOWN_PHASES:
        return PHASE_COLORS[KNOWN_PHASES.index(name) % len(PHASE_COLORS)]
    return PHASE_COLORS[int(hashlib.sha256(name.encode()).hexdigest(), 16) % len(PHASE_COLORS)]


def _g(value: Any) -> str:
    """A number as Python's ``:g`` writes it (SVG coordinates, box corners)."""
    return f"{value:g}" if isinstance(value, int | float) else _s(value)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in 0..100) of a non-empty list."""
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


# ---- views: what the templates draw, computed here so the templates only lay it out ----


def _screen_view(ep: Episode, step: Step) -> dict[str, Any]:
    """The step's screenshot (the grounded frame, else the step's first) and its overlay."""
    frame: dict[str, Any] | None = None
    for e in step.of("grounded", "ambiguous", "not_found", "ground_request"):
        frame = ep.frames.get(_s(e.get("frame_id")))
        if frame is not None:
            break
    frames = step.of("frame")
    if frame is None and frames:
        frame = frames[0]
    view: dict[str, Any] = {"frame": frame, "why": "", "w": 0.0, "h": 0.0, "shapes": [],
                            "flags": []}
    if frame is None or not frame.get("_src"):
        view["why"] = ("no screenshot recorded for this step" if frame is None
                       else "screenshot missing")
    else:
        w = _num(frame.get("width")) or 0
        h = _num(frame.get("height")) or 0
        view.update(w=w, h=h, shapes=_overlay(step, w, h) if w > 0 and h > 0 else [],
                    # "identical" (same pixels as before), "black" (secure window),
                    # "display_off" (the phone was asleep: woken first), "wake_failed"
                    flags=[str(f) for f in _list(frame.get("flags")) if f])
    others = [f for f in frames if f is not frame and f.get("_src")]
    marked = [a for a in step.of("ambiguous") if a.get("_src")]
    what = [plural(len(others), "more frame")] if others else []
    what += ["the candidates as the model saw them"] if marked else []
    view.update(others=others, marked=marked, thumbs_note=" · ".join(what))
    return view


def _overlay(step: Step, w: float, h: float) -> list[dict[str, Any]]:
    """Candidate boxes, the grounded box and the tap point, in image-pixel coordinates."""
    shapes: list[dict[str, Any]] = []
    unit = max(w, h) / 100  # 1% of the long side
    for a in step.of("ambiguous"):
        for c in _list(a.get("candidates")):
            if not isinstance(c, dict) or (box := _box(c.get("box"))) is None:
                continue
            left, top, right, bottom = box
            shapes.append({"kind": "cand", "left": left, "top": top, "width": right - left,
                           "height": bottom - top, "index": _s(c.get("index")),
                           "text": _s(c.get("text")), "lx": left + unit * 0.6,
                           "ly": top + unit * 4, "fs": unit * 4})
    for g in step.of("grounded"):
        if (box := _box(g.get("box"))) is not None:
            left, top, right, bottom = box
            shapes.append({"kind": "grounded", "left": left, "top": top, "width": right - left,
                           "height": bottom - top, "source": _s(g.get("source") or "?")})
    tap: tuple[float, float] | None = None
    for kind in ("action_done", "grounded"):  # where it tapped, else where it meant to
        for e in step.of(kind):
            x, y = _num(e.get("x")), _num(e.get("y"))
            if x is not None and y is not None:
                tap = (x, y)
        if tap is not None:
            break
    if tap is not None:
        shapes.append({"kind": "tap", "x": tap[0], "y": tap[1], "halo": unit * 3,
                       "r": unit * 0.9})
    return shapes


def _step_head(step: Step) -> dict[str, Any]:
    plans = step.of("plan")
    executed = [p for p in plans if not p.get("parse_error")]
    op = _op_text((executed[-1] if executed else {}).get("operation")) or (
        _op_text((step.of("action_done") or [{}])[-1].get("operation")))
    screen_only = all(e.get("event") == "frame" for e in step.events)
    return {"label": f"Step {step.number}" + (" · screen only" if screen_only else ""),
            "op": op, "verdicts": [_s(r.get("verdict")) for r in step.of("reflection")],
            "when": step.events[0].get("ts") if step.events else None}


def _strip(ep: Episode) -> list[dict[str, Any]]:
    """One link per step, coloured by its last reflection verdict (red on any failure)."""
    links = []
    for step in ep.steps:
        verdicts = [_s(r.get("verdict")) for r in step.of("reflection")]
        plans = [p for p in step.of("plan") if not p.get("parse_error")]
        op = _op_text(plans[-1].get("operation")) if plans else ""
        cls = VERDICT_CLASS.get(verdicts[-1], "warn") if verdicts else "none"
        if step.of("error") or any(a.get("ok") is False for a in step.of("action_done")):
            cls = "bad"
        tip = " · ".join(x for x in (op, verdicts[-1] if verdicts else "") if x)
        links.append({"number": step.number, "cls": cls, "tip": tip})
    return links


def _summary(run: Run) -> dict[str, Any]:
    eps = run.episodes
    tok = [ep.tokens for ep in eps]
    durations = [d for ep in eps if (d := ep.duration_s) is not None]
    return {"n": len(eps), "counts": sorted(Counter(ep.status for ep in eps).items()),
            "steps": sum(ep.n_steps for ep in eps),
            "tokens": sum(p + c for p, c, _ in tok), "calls": sum(n for _, _, n in tok),
            "cost": sum(ep.cost_usd for ep in eps),
            # who placed each grounded target: exact/word/fuzzy (OCR), icon, chooser, grounder
            "grounded_by": sorted(Counter(str(e.get("source") or "?") for ep in eps
                                          for e in ep.events
                                          if e.get("event") == "grounded").items()),
            "time": sum(durations),
            "mean": sum(durations) / len(durations) if durations else None}


def _latency(run: Run) -> list[dict[str, Any]]:
    """Per-step seconds by phase over the whole run (StepTiming), as p50 / p95 / mean."""
    per_phase: dict[str, list[float]] = {}
    totals: list[float] = []
    for ep in run.episodes:
        for e in ep.events:
            if e.get("event") != "step_timing":
                continue
            for name, sec in _phases(e).items():
                per_phase.setdefault(name, []).append(sec)
            total = _num(e.get("total_s"))
            if total is not None:
                totals.append(total)
    order = sorted(per_phase, key=lambda k: (KNOWN_PHASES.index(k) if k in KNOWN_PHASES
                                             else len(KNOWN_PHASES), k))
    rows = [(name, per_phase[name]) for name in order]
    rows += [("step total", totals)] if totals else []
    return [{"name": name, "n": len(xs), "p50": percentile(xs, 50), "p95": percentile(xs, 95),
             "mean": sum(xs) / len(xs)} for name, xs in rows]


def _metric(value: Any, pct: bool = False) -> str:
    v = _num(value)
    if v is None:
        return "–"
    return f"{100 * v:.1f}%" if pct else f"{v:.2f}"


def _metrics(row: dict[str, Any]) -> list[str]:
    def get(name: str) -> Any:
        return row.get(name, row.get(name.lower()))

    return [_metric(get("SU")), _metric(get("PS")), _metric(get("RE")),
            _metric(get("CR"), pct=True)]


def _results(run: Run) -> dict[str, Any] | None:
    """The Mobile-Eval runner's results.json: the summary's per-tier rows, any per-task rows.
    A shape it does not know is a note in ``run.notes``, not an error."""
    res = run.results
    if res is None:
        return None
    if not isinstance(res, dict):
        run.notes.append(f"{RESULTS_NAME}: not a JSON object; no results table")
        return None
    out: dict[str, Any] = {"tiers": None, "n_errors": None, "episodes": [],
                           "columns": ("task_id", "app", "tier", "seed")}
    summary: dict[str, Any] = res["summary"] if isinstance(res.get("summary"), dict) else res
    tiers, overall = summary.get("tiers"), summary.get("overall")
    if isinstance(tiers, dict) or isinstance(overall, dict):
        rows = [{"name": f"instruction tier {name}", "n": row.get("n_episodes", "–"),
                 "metrics": _metrics(row), "total": False}
                for name, row in (tiers.items() if isinstance(tiers, dict) else [])
                if isinstance(row, dict)]
        if isinstance(overall, dict):
            rows.append({"name": "all", "n": overall.get("n_episodes", "–"),
                         "metrics": _metrics(overall), "total": True})
        out.update(tiers=rows, n_errors=summary.get("n_errors"))
    episodes = next((res[k] for k in ("episodes", "results", "tasks")
                     if isinstance(res.get(k), list)), None)
    for row in episodes or []:
        if isinstance(row, dict):
            score: dict[str, Any] = row["score"] if isinstance(row.get("score"), dict) else row
            out["episodes"].append({"cells": [row.get(k, "–") for k in out["columns"]],
                                    "metrics": _metrics(score), "error": row.get("error")})
    if out["tiers"] is None and not episodes:
        run.notes.append(f"{RESULTS_NAME}: no 'overall'/'tiers' or per-episode list; "
                         "no results table")
        return None
    return out


# ---- the page -----------------------------------------------------------------------------


def _truthy(value: Any) -> bool:
    return bool(value) and not isinstance(value, jinja2.Undefined)


def _as_str(value: Any) -> str:
    return "" if isinstance(value, jinja2.Undefined) else _s(value)


@cache
def _env() -> jinja2.Environment:
    # Autoescape every template: Thoughts, OCR text, task names and ids are untrusted.
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("recording", "templates"),
        autoescape=True,
        keep_trailing_newline=True,
    )
    env.filters.update(g=_g, s=_as_str, truthy=_truthy, aslist=_list,
                       dicts=lambda v: [c for c in _list(v) if isinstance(c, dict)])
    env.globals.update(
        secs=_secs, usd=_usd, clock=_clock, op_text=_op_text, num=_num, whole=_int, box=_box,
        phases=_phases, phase_color=_phase_color, plural=plural, anchor=lambda i: f"ep{i}",
        verdict_class=lambda v: VERDICT_CLASS.get(v, "warn"),
        status_class=lambda s: STATUS_CLASS.get(s, "warn"),
        screen_view=_screen_view, step_head=_step_head, strip=_strip,
    )
    return env


def _asset(name: str) -> str:
    return resources.files("recording").joinpath("report_assets", name).read_text(encoding="utf-8")


def render_html(run: Run) -> str:
    """The whole page as a string (notes found while rendering are added to ``run.notes``)."""
    script = _asset("report.js")
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = (f"default-src 'none'; img-src 'self' file: data:; style-src 'unsafe-inline'; "
           f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'")
    results = _results(run)  # before the notes: it may add some
    return _env().get_template("report.html.j2").render(
        run=run, csp=csp, css=_asset("report.css"), script=script,
        title=f"mobagent report: {run.dir.resolve().name}",
        now=dt.datetime.now(dt.UTC).timestamp(), all_notes=run.all_notes,
        summary=_summary(run), latency=_latency(run), results=results,
    )


def render_report(run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` for what is recorded under ``run_dir``; returns its path."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise NotADirectoryError(f"{run_dir} is not a directory")
    return write_report(load_run(run_dir))


def write_report(run: Run) -> Path:
    page = render_html(run)
    out = run.dir / REPORT_NAME
    tmp = out.with_name(f".{REPORT_NAME}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out


def step_html(events: list[dict[str, Any]], number: int) -> str:
    """One step of a live episode, drawn with the report's own macros (the dashboard's
    phone view). ``events`` are the episode's events as ``message_event`` makes them;
    a frame event's ``_src`` is its image's URL (the dashboard gives a data: URL)."""
    ep = Episode(dirname="", events=events)
    ep.frames = {_s(e.get("frame_id")): e for e in events if e.get("event") == "frame"}
    step = next((s for s in ep.steps if s.number == number), Step(number))
    module = _env().get_template("step.html.j2").module
    return str(module.step_section(ep, step, f"step-{number}"))  # type: ignore[attr-defined]
