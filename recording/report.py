"""A static HTML report of a recorded run: ``render_report(run_dir) -> run_dir/report.html``.

It reads what the recorder wrote (``<episode>/events.jsonl``, ``<episode>/frames/``,
``<episode>/episode.json``) and, when present, the Mobile-Eval runner's ``results.json``.
The page is one file plus the recorded images, by relative path: no server, nothing
fetched. Per episode: a summary and a timeline with one ``<section class="step"
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

Everything that came from the model or the device is HTML-escaped, and a Content
Security Policy allows only the page's own (hashed) script, so a Thought cannot inject
markup or code. A malformed line (truncated file, bad JSON, wrong types) becomes a note
shown in the report (and returned in ``Run.notes``), never an exception.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import html
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec

from protocol.operations import Operation, format_operation

REPORT_NAME = "report.html"
EVENTS_NAME = "events.jsonl"
RESULTS_NAME = "results.json"
MAX_NOTES_PER_FILE = 50
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


def _check_event(obj: Any) -> tuple[dict[str, Any] | None, str]:
    """A usable event dict (with ``step`` and ``ts`` normalised) or the reason it is not."""
    if not isinstance(obj, dict):
        return None, f"not a JSON object but {type(obj).__name__}"
    kind = obj.get("event")
    if not isinstance(kind, str) or not kind:
        return None, "no 'event' kind"
    step = obj.get("step", 0)
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        return None, f"{kind}: bad 'step' {step!r}"
    obj["step"] = step
    obj["ts"] = _num(obj.get("ts"))
    return obj, ""


def read_events(path: Path, label: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The events in one events.jsonl; bad lines are skipped with a note each."""
    notes: list[str] = []
    events: list[dict[str, Any]] = []
    seen: set[str] = set()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return [], [f"{label}: cannot read ({exc.strerror or exc})"]
    lines = raw.split(b"\n")
    truncated_tail = bool(lines and lines[-1].strip())  # no final newline: maybe cut off
    skipped = 0
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        text = line.decode("utf-8", errors="replace")
        problem = ""
        try:
            obj, problem = _check_event(json.loads(text))
        except json.JSONDecodeError as exc:
            obj = None
            cut = truncated_tail and i == len(lines)
            problem = ("truncated line (the file ends mid-line)" if cut
                       else f"not valid JSON ({exc.msg} at column {exc.colno})")
        except (ValueError, RecursionError) as exc:
            obj, problem = None, f"unreadable ({type(exc).__name__})"
        if obj is None:
            skipped += 1
            if skipped <= MAX_NOTES_PER_FILE:
                notes.append(f"{label} line {i}: {problem}; skipped")
            continue
        if text in seen:  # the same event twice (a redelivery recorded by another writer)
            continue
        seen.add(text)
        events.append(obj)
    if skipped > MAX_NOTES_PER_FILE:
        notes.append(f"{label}: {skipped - MAX_NOTES_PER_FILE} more bad lines skipped")
    return events, notes


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
    dirs = sorted(
        {p.parent for p in run_dir.rglob(EVENTS_NAME)
         if not any(part.startswith(".") for part in p.relative_to(run_dir).parts)},
        key=lambda p: p.as_posix(),
    )
    for ep_dir in dirs:
        run.episodes.append(load_episode(ep_dir, run_dir))
    run.episodes.sort(key=lambda ep: (ep.start_ts if ep.start_ts is not None else math.inf,
                                      ep.dirname))
    _load_results(run)
    return run


# ---- formatting -------------------------------------------------------------------------


def esc(value: Any) -> str:
    return html.escape(_s(value), quote=True)


def _secs(value: float | None) -> str:
    if value is None:
        return "–"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.2f} s"
    return f"{value / 60:.1f} min"


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


def _badge(text: str, cls: str) -> str:
    return f'<span class="badge {esc(cls)}">{esc(text)}</span>'


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


# ---- rendering: one step ----------------------------------------------------------------


def _screen(ep: Episode, step: Step) -> str:
    """The step's screenshot with the tap point and boxes as an SVG overlay."""
    frame: dict[str, Any] | None = None
    for e in step.of("grounded", "ambiguous", "not_found", "ground_request"):
        frame = ep.frames.get(_s(e.get("frame_id")))
        if frame is not None:
            break
    frames = step.of("frame")
    if frame is None and frames:
        frame = frames[0]
    parts: list[str] = []
    if frame is None or not frame.get("_src"):
        why = "no screenshot recorded for this step" if frame is None else "screenshot missing"
        parts.append(f'<div class="noshot">{esc(why)}</div>')
    else:
        w = _num(frame.get("width")) or 0
        h = _num(frame.get("height")) or 0
        overlay = _overlay(step, w, h) if w > 0 and h > 0 else ""
        ratio = f' style="aspect-ratio:{w:g}/{h:g}"' if w > 0 and h > 0 else ""
        parts.append(
            f'<figure class="frame"{ratio}><img src="{esc(frame["_src"])}" '
            f'alt="screen at step {step.number}" data-frame="{esc(frame.get("frame_id"))}">'
            f"{overlay}</figure>"
            f'<figcaption>{esc(frame.get("frame_id"))} · {w:g}×{h:g}{_flags(frame)}</figcaption>'
        )
    others = [f for f in frames if f is not frame and f.get("_src")]
    marked = [a for a in step.of("ambiguous") if a.get("_src")]
    if others or marked:
        parts.append('<div class="thumbs">')
        for f in others:
            parts.append(f'<a href="{esc(f["_src"])}"><img src="{esc(f["_src"])}" '
                         f'alt="frame {esc(f.get("frame_id"))}" '
                         f'title="frame {esc(f.get("frame_id"))}"></a>')
        for a in marked:
            parts.append(f'<a href="{esc(a["_src"])}"><img src="{esc(a["_src"])}" '
                         f'alt="candidates shown to the model" '
                         f'title="candidates shown to the model"></a>')
        parts.append("</div>")
        what = [plural(len(others), "more frame")] if others else []
        what += ["the candidates as the model saw them"] if marked else []
        parts.append(f'<div class="muted thumbs-note">{esc(" · ".join(what))}</div>')
    return f'<div class="shot">{"".join(parts)}</div>'


def _flags(frame: dict[str, Any]) -> str:
    """The capture's flags: "identical" (same pixels as before), "black" (secure window)."""
    flags = [str(f) for f in _list(frame.get("flags")) if f]
    return "".join(" " + _badge(f, "warn") for f in flags)


def _overlay(step: Step, w: float, h: float) -> str:
    shapes: list[str] = []
    unit = max(w, h) / 100  # 1% of the long side
    for a in step.of("ambiguous"):
        for c in _list(a.get("candidates")):
            if not isinstance(c, dict):
                continue
            box = _box(c.get("box"))
            if box is None:
                continue
            left, top, right, bottom = box
            shapes.append(
                f'<rect class="cand" x="{left:g}" y="{top:g}" width="{right - left:g}" '
                f'height="{bottom - top:g}"><title>candidate {esc(c.get("index"))}: '
                f'{esc(c.get("text"))}</title></rect>'
                f'<text class="cand-label" x="{left + unit * 0.6:g}" y="{top + unit * 4:g}" '
                f'font-size="{unit * 4:g}">{esc(c.get("index"))}</text>'
            )
    for g in step.of("grounded"):
        box = _box(g.get("box"))
        if box is not None:
            left, top, right, bottom = box
            shapes.append(
                f'<rect class="grounded" x="{left:g}" y="{top:g}" width="{right - left:g}" '
                f'height="{bottom - top:g}"><title>grounded by {esc(g.get("source") or "?")}'
                f"</title></rect>"
            )
    tap: tuple[float, float] | None = None
    for a in step.of("action_done"):
        x, y = _num(a.get("x")), _num(a.get("y"))
        if x is not None and y is not None:
            tap = (x, y)
    if tap is None:
        for g in step.of("grounded"):
            x, y = _num(g.get("x")), _num(g.get("y"))
            if x is not None and y is not None:
                tap = (x, y)
    if tap is not None:
        x, y = tap
        shapes.append(
            f'<circle class="tap-halo" cx="{x:g}" cy="{y:g}" r="{unit * 3:g}"/>'
            f'<circle class="tap" cx="{x:g}" cy="{y:g}" r="{unit * 0.9:g}">'
            f"<title>tap at ({x:g}, {y:g})</title></circle>"
        )
    if not shapes:
        return ""
    return (f'<svg class="overlay" viewBox="0 0 {w:g} {h:g}" preserveAspectRatio="none" '
            f'xmlns="http://www.w3.org/2000/svg">{"".join(shapes)}</svg>')


def _plan_html(p: dict[str, Any]) -> str:
    op = _op_text(p.get("operation"))
    rows = [
        ("Observation", p.get("observation")),
        ("Thought", p.get("thought")),
        ("Action", p.get("action")),
    ]
    rejected = bool(p.get("parse_error"))
    out = [f'<dl class="plan{" rejected" if rejected else ""}">']
    for label, value in rows:
        if label != "Action" and not _s(value).strip():
            continue  # a planner that gives no observation (the oracle) leaves no empty row
        out.append(f"<dt>{label}</dt><dd class=\"{label.lower()}\">{esc(value)}</dd>")
    out.append("</dl>")
    if rejected:
        out.append(f'<p class="bad-text rejected-note">Reply rejected, not executed (re-asked): '
                   f'{esc(p.get("parse_error"))}</p>')
    elif op and op != _s(p.get("action")).strip():
        out.append(f'<p class="muted">parsed as <code>{esc(op)}</code></p>')
    return "".join(out)


def _facts(step: Step) -> list[str]:
    """One line each: grounding, action, reflection, errors."""
    lines: list[str] = []
    answered = step.of("grounded", "ambiguous", "not_found")
    for g in [] if answered else step.of("ground_request"):  # unanswered: say so
        lines.append(f"<li><b>Grounding asked</b> for <code>{esc(_op_text(g.get('operation')))}"
                     f"</code> on {esc(g.get('frame_id'))}, no answer recorded</li>")
    for g in step.of("grounded"):
        box = _box(g.get("box"))
        box_txt = f" box [{', '.join(f'{v:g}' for v in box)}]" if box else ""
        score = _num(g.get("score"))
        lines.append(
            f"<li><b>Grounded</b> at ({esc(g.get('x'))}, {esc(g.get('y'))}){esc(box_txt)} "
            f"by {esc(g.get('source') or '?')}"
            + (f", score {score:.2f}" if score is not None else "") + "</li>"
        )
    for a in step.of("ambiguous"):
        cands = [c for c in _list(a.get("candidates")) if isinstance(c, dict)]
        names = "; ".join(f"{esc(c.get('index'))}: {esc(c.get('text'))}" for c in cands)
        lines.append(f"<li><b>Ambiguous</b>: {len(cands)} candidates ({names})</li>")
    for n in step.of("not_found"):
        closest = n.get("closest") if isinstance(n.get("closest"), list) else []
        lines.append(f"<li><b class=\"bad-text\">Not found</b>: {esc(n.get('query'))}"
                     + (f" (closest: {esc(', '.join(map(str, closest[:5])))})" if closest
                        else "") + "</li>")
    for a in step.of("action_done"):
        ok = a.get("ok") is not False
        where = (f" at ({esc(a.get('x'))}, {esc(a.get('y'))})"
                 if a.get("x") is not None and a.get("y") is not None else "")
        detail = f": {esc(a.get('detail'))}" if a.get("detail") else ""
        lines.append(
            f"<li><b>Action</b> <code>{esc(_op_text(a.get('operation')))}</code>{where} "
            f"{_badge('done' if ok else 'failed', 'good' if ok else 'bad')} "
            f"in {_secs(_num(a.get('duration_s')))}{detail}</li>"
        )
    for r in step.of("reflection"):
        verdict = _s(r.get("verdict")) or "?"
        lines.append(f"<li><b>Reflection</b> {_badge(verdict, VERDICT_CLASS.get(verdict, 'warn'))}"
                     + (f" {esc(r.get('reason'))}" if r.get("reason") else "") + "</li>")
    for e in step.of("error"):
        lines.append(f"<li class=\"bad-text\"><b>Error</b> {esc(e.get('reason'))}"
                     + (f": {esc(e.get('detail'))}" if e.get("detail") else "") + "</li>")
    return lines


def _timing_html(step: Step) -> str:
    out: list[str] = []
    for t in step.of("step_timing"):
        phases = _phases(t)
        total = _num(t.get("total_s")) or sum(phases.values())
        if not phases:
            out.append(f'<p class="muted">step took {_secs(total)}</p>')
            continue
        span = max(total, sum(phases.values())) or 1.0
        bars = "".join(
            f'<span style="width:{100 * sec / span:.2f}%;background:{_phase_color(name)}" '
            f'title="{esc(name)}: {esc(_secs(sec))}"></span>'
            for name, sec in phases.items()
        )
        legend = " ".join(
            f'<span class="key"><i style="background:{_phase_color(name)}"></i>'
            f"{esc(name)} {esc(_secs(sec))}</span>"
            for name, sec in phases.items()
        )
        out.append(f'<div class="timing"><div class="bar">{bars}</div>'
                   f'<div class="legend">{legend} <b>total {esc(_secs(total))}</b></div></div>')
    usage = step.of("llm_usage")
    if usage:
        rows = "".join(
            f"<tr><td>{esc(u.get('purpose') or '–')}</td><td>{esc(u.get('model'))}</td>"
            f"<td class=\"n\">{_int(u.get('prompt_tokens'))}</td>"
            f"<td class=\"n\">{_int(u.get('completion_tokens'))}</td>"
            f"<td class=\"n\">{esc(_secs(_num(u.get('latency_s'))))}</td></tr>"
            for u in usage
        )
        out.append('<table class="tokens"><tr><th>LLM call</th><th>model</th>'
                   '<th class="n">prompt tok</th><th class="n">completion tok</th>'
                   f'<th class="n">latency</th></tr>{rows}</table>')
    return "".join(out)


def _step_html(ep: Episode, step: Step, anchor: str) -> str:
    plans = step.of("plan")
    executed = [p for p in plans if not p.get("parse_error")]
    title_op = _op_text((executed[-1] if executed else {}).get("operation")) or (
        _op_text((step.of("action_done") or [{}])[-1].get("operation")))
    verdicts = "".join(
        _badge(_s(r.get("verdict")), VERDICT_CLASS.get(_s(r.get("verdict")), "warn"))
        for r in step.of("reflection")
    )
    when = step.events[0].get("ts") if step.events else None
    screen_only = all(e.get("event") == "frame" for e in step.events)
    label = f"Step {step.number}" + (" · screen only" if screen_only else "")
    op_html = f' <code class="op">{esc(title_op)}</code>' if title_op else ""
    head = (f'<h4>{esc(label)}{op_html} {verdicts}'
            f'<span class="muted when">{esc(_clock(when))}</span></h4>')
    body = "".join(_plan_html(p) for p in plans)
    facts = _facts(step)
    if facts:
        body += f'<ul class="facts">{"".join(facts)}</ul>'
    body += _timing_html(step)
    return (f'<section class="step" id="{esc(anchor)}" data-step="{step.number}" '
            f'data-episode="{esc(ep.episode_id)}">{_screen(ep, step)}'
            f'<div class="detail">{head}{body}</div></section>')


# ---- rendering: episodes and the run ------------------------------------------------------


def _anchor(ep: Episode, index: int) -> str:
    return f"ep{index}"


def _step_strip(ep: Episode, anchor: str) -> str:
    """One link per step, coloured by its last reflection verdict."""
    links = []
    for step in ep.steps:
        verdicts = [_s(r.get("verdict")) for r in step.of("reflection")]
        plans = [p for p in step.of("plan") if not p.get("parse_error")]
        op = _op_text(plans[-1].get("operation")) if plans else ""
        cls = VERDICT_CLASS.get(verdicts[-1], "warn") if verdicts else "none"
        if step.of("error") or any(a.get("ok") is False for a in step.of("action_done")):
            cls = "bad"
        tip = " · ".join(x for x in (op, verdicts[-1] if verdicts else "") if x)
        links.append(f'<a class="badge {cls}" href="#{esc(anchor)}-s{step.number}" '
                     f'title="{esc(tip)}">{step.number}</a>')
    return f'<span class="strip">{" ".join(links)}</span>' if links else ""


def _episode_html(ep: Episode, index: int) -> str:
    prompt, completion, calls = ep.tokens
    status = ep.status
    anchor = _anchor(ep, index)
    facts = [
        ("Instruction", esc(ep.instruction) or '<span class="muted">(no EpisodeStarted)</span>'),
        ("Status", _badge(status, STATUS_CLASS.get(status, "warn"))
         + (f" {esc(ep.reason)}" if ep.reason else "")),
        ("Device", esc(ep.device) or "–"),
        ("Task", esc(ep.task) or "–"),
        ("Steps", str(ep.n_steps)),
        ("Started", esc(_clock(ep.start_ts))),
        ("Duration", esc(_secs(ep.duration_s))),
        ("Tokens", f"{prompt + completion} ({prompt} prompt + {completion} completion, "
                   f"{calls} calls)"),
    ]
    strip = _step_strip(ep, anchor)
    if strip:
        facts.append(("Timeline", strip))
    totals = ep.phase_totals
    if totals:
        facts.append(("Time by phase", ", ".join(
            f"{esc(k)} {esc(_secs(v))}" for k, v in sorted(totals.items(), key=lambda kv: -kv[1])
        )))
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    notes = ""
    if ep.notes:
        notes = ('<div class="notes"><b>Problems reading this episode</b><ul>'
                 + "".join(f"<li>{esc(n)}</li>" for n in ep.notes) + "</ul></div>")
    steps = ep.steps
    timeline = "".join(_step_html(ep, s, f"{anchor}-s{s.number}") for s in steps) or (
        '<p class="muted">No steps recorded.</p>')
    return (f'<article class="episode" id="{anchor}" data-episode="{esc(ep.episode_id)}" '
            f'data-status="{esc(status)}" data-steps="{len(steps)}">'
            f'<h2>{esc(ep.episode_id)} {_badge(status, STATUS_CLASS.get(status, "warn"))}</h2>'
            f'<dl class="summary">{dl}</dl>{notes}<div class="timeline">{timeline}</div>'
            f"</article>")


def _run_summary_html(run: Run) -> str:
    eps = run.episodes
    counts = Counter(ep.status for ep in eps)
    tok = [ep.tokens for ep in eps]
    durations = [d for ep in eps if (d := ep.duration_s) is not None]
    total_steps = sum(ep.n_steps for ep in eps)
    status_badges = " ".join(
        f"{_badge(s, STATUS_CLASS.get(s, 'warn'))} {n}" for s, n in sorted(counts.items())
    ) or "–"
    facts = [
        ("Episodes", str(len(eps))),
        ("By status", status_badges),
        ("Steps", str(total_steps)),
        ("Tokens", f"{sum(p + c for p, c, _ in tok)} in {sum(n for _, _, n in tok)} LLM calls"),
        ("Episode time", f"{esc(_secs(sum(durations)))} in all"
                         + (f", {esc(_secs(sum(durations) / len(durations)))} mean"
                            if durations else "")),
    ]
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    rows = []
    for i, ep in enumerate(eps):
        p, c, _ = ep.tokens
        instr = ep.instruction
        short = instr if len(instr) <= 90 else instr[:89] + "…"
        rows.append(
            f'<tr><td><a href="#{_anchor(ep, i)}">{esc(ep.episode_id)}</a></td>'
            f"<td>{esc(ep.device)}</td><td>{esc(ep.task)}</td>"
            f'<td title="{esc(instr)}">{esc(short)}</td>'
            f"<td>{_badge(ep.status, STATUS_CLASS.get(ep.status, 'warn'))}</td>"
            f'<td class="n">{ep.n_steps}</td><td class="n">{esc(_secs(ep.duration_s))}</td>'
            f'<td class="n">{p + c}</td></tr>'
        )
    table = ""
    if rows:
        table = ('<table class="episodes"><tr><th>episode</th><th>device</th><th>task</th>'
                 '<th>instruction</th><th>status</th><th class="n">steps</th>'
                 '<th class="n">duration</th><th class="n">tokens</th></tr>'
                 + "".join(rows) + "</table>")
    return (f'<section class="run"><dl class="summary">{dl}</dl>{_latency_html(run)}{table}'
            f"</section>")


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in 0..100) of a non-empty list."""
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _latency_html(run: Run) -> str:
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
    if not per_phase and not totals:
        return ""
    order = sorted(per_phase, key=lambda k: (KNOWN_PHASES.index(k) if k in KNOWN_PHASES
                                             else len(KNOWN_PHASES), k))
    rows = [(name, per_phase[name]) for name in order] + ([("step total", totals)] if totals
                                                          else [])
    body = "".join(
        f'<tr{" class=total" if name == "step total" else ""}><td>{esc(name)}</td>'
        f'<td class="n">{len(xs)}</td><td class="n">{esc(_secs(percentile(xs, 50)))}</td>'
        f'<td class="n">{esc(_secs(percentile(xs, 95)))}</td>'
        f'<td class="n">{esc(_secs(sum(xs) / len(xs)))}</td></tr>'
        for name, xs in rows
    )
    return ('<table class="latency"><tr><th>step latency by phase</th><th class="n">steps</th>'
            '<th class="n">p50</th><th class="n">p95</th><th class="n">mean</th></tr>'
            f"{body}</table>")


def _metric(value: Any, pct: bool = False) -> str:
    v = _num(value)
    if v is None:
        return "–"
    return f"{100 * v:.1f}%" if pct else f"{v:.2f}"


def _metric_cells(row: dict[str, Any]) -> str:
    def get(name: str) -> Any:
        return row.get(name, row.get(name.lower()))

    return (f'<td class="n">{esc(_metric(get("SU")))}</td><td class="n">{esc(_metric(get("PS")))}'
            f'</td><td class="n">{esc(_metric(get("RE")))}</td>'
            f'<td class="n">{esc(_metric(get("CR"), pct=True))}</td>')


def _results_html(run: Run) -> str:
    """The Mobile-Eval runner's results.json: the summary's per-tier table, any per-task rows."""
    res = run.results
    if res is None:
        return ""
    if not isinstance(res, dict):
        run.notes.append(f"{RESULTS_NAME}: not a JSON object; no results table")
        return ""
    head = ('<tr><th>{}</th><th class="n">episodes</th><th class="n">SU</th><th class="n">PS</th>'
            '<th class="n">RE</th><th class="n">CR</th></tr>')
    parts: list[str] = []
    summary: dict[str, Any] = res["summary"] if isinstance(res.get("summary"), dict) else res
    tiers = summary.get("tiers")
    overall = summary.get("overall")
    if isinstance(tiers, dict) or isinstance(overall, dict):
        rows = []
        for name, row in (tiers or {}).items() if isinstance(tiers, dict) else []:
            if isinstance(row, dict):
                rows.append(f"<tr><td>instruction tier {esc(name)}</td>"
                            f'<td class="n">{esc(row.get("n_episodes", "–"))}</td>'
                            f"{_metric_cells(row)}</tr>")
        if isinstance(overall, dict):
            rows.append(f'<tr class="total"><td>all</td>'
                        f'<td class="n">{esc(overall.get("n_episodes", "–"))}</td>'
                        f"{_metric_cells(overall)}</tr>")
        parts.append(f'<table class="results">{head.format("")}{"".join(rows)}</table>')
        if summary.get("n_errors"):
            parts.append(f'<p class="bad-text">{esc(summary.get("n_errors"))} episodes failed '
                         f"in the runner itself (not the agent).</p>")
    episodes = next((res[k] for k in ("episodes", "results", "tasks")
                     if isinstance(res.get(k), list)), None)
    if episodes:
        keys = ("task_id", "app", "tier", "seed")
        rows = []
        for row in episodes:
            if not isinstance(row, dict):
                continue
            score: dict[str, Any] = row["score"] if isinstance(row.get("score"), dict) else row
            cells = "".join(f"<td>{esc(row.get(k, '–'))}</td>" for k in keys)
            err = f' title="{esc(row.get("error"))}" class="bad-text"' if row.get("error") else ""
            rows.append(f"<tr{err}>{cells}{_metric_cells(score)}</tr>")
        parts.append('<details><summary>Per episode</summary><table class="results"><tr>'
                     + "".join(f"<th>{k}</th>" for k in keys)
                     + '<th class="n">SU</th><th class="n">PS</th><th class="n">RE</th>'
                       '<th class="n">CR</th></tr>' + "".join(rows) + "</table></details>")
    if not parts:
        run.notes.append(f"{RESULTS_NAME}: no 'overall'/'tiers' or per-episode list; "
                         "no results table")
        return ""
    return f'<section class="mobile-eval"><h2>Mobile-Eval results</h2>{"".join(parts)}</section>'


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _notes_html(run: Run) -> str:
    """Run-level problems in full; each episode's problems are listed in its own section."""
    total = len(run.all_notes)
    if not total:
        return ""
    items = [f"<li>{esc(n)}</li>" for n in run.notes[:200]]
    items += [f'<li><a href="#{_anchor(ep, i)}">{esc(ep.dirname or ep.episode_id)}</a>: '
              f"{plural(len(ep.notes), 'problem')} (listed there)</li>"
              for i, ep in enumerate(run.episodes) if ep.notes]
    return (f'<div class="notes" id="notes"><b>{plural(total, "problem")} reading the run; '
            f"bad lines were skipped, the rest of the report is complete</b>"
            f"<ul>{''.join(items)}</ul></div>")


def _asset(name: str) -> str:
    return resources.files("recording").joinpath("report_assets", name).read_text(encoding="utf-8")


def render_html(run: Run) -> str:
    """The whole page as a string (notes found while rendering are added to ``run.notes``)."""
    css = _asset("report.css")
    script = _asset("report.js")
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = (f"default-src 'none'; img-src 'self' file: data:; style-src 'unsafe-inline'; "
           f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'")
    results = _results_html(run)
    episodes = "".join(_episode_html(ep, i) for i, ep in enumerate(run.episodes))
    notes_html = _notes_html(run)
    title = f"mobagent report: {run.dir.resolve().name}"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{css}</style></head>"
        f'<body data-episodes="{len(run.episodes)}">'
        f'<header><h1>{esc(title)}</h1><p class="muted">{plural(len(run.episodes), "episode")} · '
        f'rendered {esc(_clock(dt.datetime.now(dt.UTC).timestamp()))} · '
        f'<span id="images-status">images: checking…</span></p></header>'
        f"<main>{notes_html}{_run_summary_html(run)}{results}{episodes}</main>"
        f"<script>{script}</script></body></html>\n"
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
