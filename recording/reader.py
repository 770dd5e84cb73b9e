"""The one reader of what the recorder wrote: ``<episode>/events.jsonl`` back into dicts.

Every consumer of a recording (the report, ``replay``, the Mobile-Eval runner's scoring)
reads through here, so the format has one writer (``recording.recorder``) and one reader.
A malformed line (truncated tail, bad JSON, wrong types) is skipped with a note, never an
exception: a recording cut off mid-write is still worth reading.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

EVENTS_NAME = "events.jsonl"
MAX_NOTES_PER_FILE = 50


def _num(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


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
    """The events in one events.jsonl, in file order; bad lines are skipped with a note each."""
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


def episode_dirs(run_dir: Path) -> list[Path]:
    """Every directory under ``run_dir`` (itself included) holding an events.jsonl, sorted;
    hidden directories are skipped."""
    return sorted(
        {p.parent for p in run_dir.rglob(EVENTS_NAME)
         if not any(part.startswith(".") for part in p.relative_to(run_dir).parts)},
        key=lambda p: p.as_posix(),
    )


def episode_events_file(path: Path) -> Path:
    """The events.jsonl of one episode named by its directory (or the file itself).

    Raises FileNotFoundError when there is none, ValueError when ``path`` holds several.
    """
    files = [path] if path.is_file() else [d / EVENTS_NAME for d in episode_dirs(path)]
    if not files:
        raise FileNotFoundError(f"no {EVENTS_NAME} under {path}")
    if len(files) > 1:
        raise ValueError(f"{path} holds {len(files)} episodes; name one episode directory")
    return files[0]
