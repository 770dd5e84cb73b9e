"""Episode results -> the paper's table shape and the runner's summary JSON.

Table 2 of Mobile-Agent has one row per app and, for each of the three instruction tiers,
the columns SU, PS, RE, CR. Here every cell is a mean over the seeds run; RE is the mean
over successful episodes of reference steps / agent steps ("-" when none succeeded), and
the "steps" column shows mean agent steps / reference steps, as the paper's RE cell does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sim.eval.instructions import APP_ROWS
from sim.eval.metrics import Aggregate, EpisodeScore, aggregate


@dataclass(frozen=True)
class EpisodeResult:
    task_id: str
    app: str
    tier: int
    seed: int
    score: EpisodeScore
    error: str | None = None  # the runner's own failure (not the agent's), if any


def _fmt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}%" if pct else f"{x:.2f}"


def table_by_app_and_tier(results: Sequence[EpisodeResult], tiers: Sequence[int]) -> str:
    """Rows: apps (in the paper's order) and Avg.; column groups: one per tier."""
    head1 = f"{'App':<14}" + "".join(f" | {'INSTRUCTION ' + str(t):<36}" for t in tiers)
    head2 = f"{'':<14}" + "".join(
        f" | {'SU':>5} {'PS':>5} {'RE':>5} {'steps':>9} {'CR':>7}" for _ in tiers)
    lines = [head1, head2, "-" * len(head2)]
    rows = [a for a in APP_ROWS if any(r.app == a for r in results)]
    for label, pick in [(a, a) for a in rows] + [("Avg.", None)]:
        cells = []
        for t in tiers:
            sel = [r for r in results if r.tier == t and (pick is None or r.app == pick)]
            cells.append(_cell(sel))
        lines.append(f"{label:<14}" + "".join(f" | {c}" for c in cells))
    return "\n".join(lines)


def _cell(sel: Sequence[EpisodeResult]) -> str:
    if not sel:
        return f"{'':>36}"
    agg = aggregate([r.score for r in sel])
    steps = sum(r.score.steps for r in sel) / len(sel)
    ref = sum(r.score.reference_steps for r in sel) / len(sel)
    return (f"{_fmt(agg.su):>5} {_fmt(agg.ps):>5} {_fmt(agg.re):>5} "
            f"{f'{steps:.1f}/{ref:.1f}':>9} {_fmt(agg.cr, pct=True):>7}")


def summary(results: Sequence[EpisodeResult], tiers: Sequence[int]) -> dict[str, object]:
    """The runner's last line: n_episodes, overall and per-tier SU/PS/RE/CR."""
    overall = aggregate([r.score for r in results])
    per_tier: dict[str, dict[str, float | int | None]] = {}
    for t in tiers:
        per_tier[str(t)] = _metrics(aggregate([r.score for r in results if r.tier == t]))
    return {
        "n_episodes": len(results),
        "n_errors": sum(1 for r in results if r.error),
        "overall": _metrics(overall),
        "tiers": per_tier,
    }


def _metrics(agg: Aggregate) -> dict[str, float | int | None]:
    d = agg.as_dict()
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in d.items()}
