"""``mobagent report DIR``: render the static HTML report of a recorded run.

Registered through the ``mobagent.commands`` entry point ``report``. Exit codes: 0 the
report was written (problems reading some events are listed on stderr, not fatal); 1 no
recorded episode was found (an empty report is still written); 2 DIR is not a directory.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from recording.report import load_run, plural, write_report


def cmd_report(args: argparse.Namespace) -> int:
    run_dir = Path(args.dir)
    if not run_dir.is_dir():
        print(f"mobagent report: {run_dir} is not a directory "
              "(give the directory the recorder wrote to)", file=sys.stderr)
        return 2
    run = load_run(run_dir)
    try:
        out = write_report(run)
    except OSError as exc:
        print(f"mobagent report: cannot write the report in {run_dir}: {exc}", file=sys.stderr)
        return 1
    notes = run.all_notes
    for note in notes[: args.max_notes]:
        print(f"mobagent report: warning: {note}", file=sys.stderr)
    if len(notes) > args.max_notes:
        print(f"mobagent report: warning: … and {len(notes) - args.max_notes} more "
              "(all listed in the report)", file=sys.stderr)
    steps = sum(len(ep.steps) for ep in run.episodes)
    print(out)
    print(f"{plural(len(run.episodes), 'episode')}, {plural(steps, 'step')}", file=sys.stderr)
    if not run.episodes:
        print(f"mobagent report: no recorded episodes (no */events.jsonl) under {run_dir}",
              file=sys.stderr)
        return 1
    return 0


def _max_notes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "report", help="render an HTML report of recorded episodes",
        description="Write DIR/report.html (one static file; images by relative path) from "
                    "the episodes the recorder wrote under DIR.",
    )
    p.add_argument("dir", metavar="DIR", help="the run directory the recorder wrote")
    p.add_argument("--max-notes", type=_max_notes, default=20, metavar="N",
                   help="print at most N reading problems on stderr (default 20)")
    p.set_defaults(func=cmd_report)
