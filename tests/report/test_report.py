"""The HTML report: rendered from a recorded run, opened in real headless Chromium."""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from recording.report import load_run, render_report
from runtime.cli import main
from tests.report.conftest import open_in_chromium, record_sync
from tests.report.synth import EpisodeSpec, episode_messages, images_in, row_box

INJECTION = ('<script>document.title="pwned"</script>'
             '<img src=x onerror="document.body.setAttribute(\'data-pwned\',\'1\')">'
             '"><b>bold</b> & </dd></section>')


class Steps(HTMLParser):
    """Collects each step section's attributes and the overlay shapes inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.steps: list[dict[str, str | None]] = []
        self.shapes: list[list[tuple[str, dict[str, str | None]]]] = []
        self.imgs: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section" and "step" in (a.get("class") or "").split():
            self.steps.append(a)
            self.shapes.append([])
        elif tag in ("rect", "circle") and self.shapes:
            self.shapes[-1].append((tag, a))
        elif tag == "img":
            self.imgs.append(a)


def _run(tmp_path: Path) -> tuple[Path, list[EpisodeSpec], int]:
    specs = [
        EpisodeSpec("ep-wifi", "emulator-5554", "Open Settings and turn on Wi-Fi", 3,
                    ambiguous_step=2, thought=INJECTION),
        EpisodeSpec("ep-battery", "emulator-5556", "Open Battery <b>now</b>", 1,
                    status="failed", base_ts=1_780_000_100.0),
    ]
    run = tmp_path / "run"
    msgs = [m for s in specs for m in episode_messages(s)]
    record_sync(run, msgs)
    return run, specs, images_in(msgs)


def test_report_in_chromium(tmp_path: Path) -> None:
    run, specs, n_images = _run(tmp_path)
    report = render_report(run)
    assert report == run / "report.html"
    page = open_in_chromium(report, tmp_path, size=(1280, 1600))
    # every image loaded (the page's script counts naturalWidth > 0 after load)
    assert page.body_attr("data-images-total") == str(n_images)
    assert page.body_attr("data-images-loaded") == str(n_images)
    parsed = Steps()
    parsed.feed(page.dom)
    # one step element per recorded step, per episode, in step order
    for spec in specs:
        got = [int(s["data-step"] or -1) for s in parsed.steps if s["data-episode"] == spec.episode_id]
        assert got == list(range(1, spec.steps + 2)), (spec.episode_id, got)
    # the injected markup stayed text: no script ran, no element appeared
    assert page.body_attr("data-pwned") is None
    assert "<title>pwned" not in page.dom and "mobagent report" in page.dom
    assert "&lt;script&gt;document.title" in page.dom
    # the overlay of step 1: tap point at the grounded row's centre, its box drawn
    first = parsed.steps.index(next(s for s in parsed.steps if s["data-episode"] == "ep-wifi"))
    shapes = parsed.shapes[first]
    box = row_box(0)
    tap = next(a for t, a in shapes if t == "circle" and a.get("class") == "tap")
    assert (float(tap["cx"] or 0), float(tap["cy"] or 0)) == box.center
    rect = next(a for t, a in shapes if t == "rect" and a.get("class") == "grounded")
    assert float(rect["width"] or 0) == box.right - box.left
    # the Ambiguous step draws its candidates
    second = parsed.shapes[first + 1]
    assert sum(1 for t, a in second if a.get("class") == "cand") == 2
    # the screenshot shows a real page: right size, not blank, and the phone screens in it
    assert page.screenshot is not None
    shot = Image.open(page.screenshot).convert("RGB")
    assert shot.size == (1280, 1600)
    colors = shot.resize((64, 80)).getcolors(64 * 80) or []
    assert len(colors) > 20, "the screenshot looks blank"


def test_malformed_lines_are_noted_not_fatal(tmp_path: Path) -> None:
    run, specs, _ = _run(tmp_path)
    events = run / "ep-battery" / "events.jsonl"
    good = events.read_text()
    events.write_text(good.replace("\n", "\n[1, 2]\n", 1)
                      + '{"event": "plan", "step": -4}\nnot json at all\n{"event": "pla')
    (run / "ep-wifi" / "episode.json").write_text("{broken")
    report = render_report(run)
    notes = load_run(run).all_notes
    assert any("ep-battery/events.jsonl line 2: not a JSON object" in n for n in notes), notes
    assert any("bad 'step'" in n for n in notes)
    assert any("not valid JSON" in n for n in notes)
    assert any("truncated line" in n for n in notes)
    assert any("episode.json" in n for n in notes)
    page = report.read_text()
    assert "truncated line" in page and 'class="notes"' in page
    # the good lines are all still there
    assert len(re.findall(r'<section class="step"[^>]*data-episode="ep-battery"', page)) == 2


def test_missing_image_and_escaping_in_raw_html(tmp_path: Path) -> None:
    run, _, _ = _run(tmp_path)
    frame = next((run / "ep-wifi" / "frames").glob("1-*.png"))
    frame.unlink()
    page = render_report(run).read_text()
    assert INJECTION not in page and "<b>now</b>" not in page
    assert "&lt;b&gt;now&lt;/b&gt;" in page
    assert "screenshot missing" in page
    assert any("is missing" in n for n in load_run(run).all_notes)
    # only the page's own script, allowed by hash in the CSP
    assert page.count("<script>") == 1 and "script-src &#39;sha256-" in page


def test_results_table(tmp_path: Path) -> None:
    run, _, _ = _run(tmp_path)
    results = {
        "n_episodes": 2, "n_errors": 0,
        "overall": {"n_episodes": 2, "SU": 0.5, "PS": 0.75, "RE": 1.25, "CR": 0.6},
        "tiers": {"1": {"n_episodes": 1, "SU": 1.0, "PS": 1.0, "RE": 1.25, "CR": 1.0},
                  "2": {"n_episodes": 1, "SU": 0.0, "PS": 0.5, "RE": None, "CR": 0.2}},
        "episodes": [{"task_id": "<t1>", "app": "Settings", "tier": 1, "seed": 0,
                      "score": {"su": 1.0, "ps": 1.0, "re": 1.25, "cr": 1.0}}],
    }
    (run / "results.json").write_text(json.dumps(results))
    page = render_report(run).read_text()
    section = page[page.index('class="mobile-eval"'):]
    assert "instruction tier 1" in section and "60.0%" in section and "1.25" in section
    assert "&lt;t1&gt;" in section and "<t1>" not in section


def test_report_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, _, _ = _run(tmp_path)
    assert main(["report", str(run)]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == str(run / "report.html") and "2 episodes, 6 steps" in out.err
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "not a directory" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty)]) == 1
    assert (empty / "report.html").exists()
    assert "no recorded episodes" in capsys.readouterr().err


KEYS = ["event", "step", "ts", "device", "episode_id", "frame_id", "file", "marked_file",
        "width", "height", "x", "y", "box", "candidates", "operation", "phases", "total_s",
        "prompt_tokens", "completion_tokens", "latency_s", "verdict", "status", "steps", "text",
        "task", "closest", "observation", "thought", "action", "parse_error", "ok", "detail",
        "score", "source", "reason", "_src"]
KINDS = ["frame", "plan", "grounded", "ambiguous", "not_found", "action_done", "reflection",
         "step_timing", "llm_usage", "episode_started", "episode_finished", "error", "weird"]


def test_hostile_events_never_crash(tmp_path: Path) -> None:
    """Valid JSON with wrong types in every field renders (and escapes) without raising."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    values = st.recursive(
        st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats()
        | st.text(max_size=20) | st.sampled_from(["../../etc/passwd", "/abs.png", "<i>x</i>"]),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                    max_size=4),
        max_leaves=8,
    )
    event = st.fixed_dictionaries(
        {"event": st.sampled_from(KINDS)},
        optional={k: values for k in KEYS if k != "event"} | {"step": st.integers(0, 5)},
    )
    counter = iter(range(10**6))

    examples = int(os.environ.get("REPORT_FUZZ_EXAMPLES", "25"))

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(event, min_size=1, max_size=12))
    def check(events: list[dict[str, object]]) -> None:
        run = tmp_path / f"r{next(counter)}"
        (run / "ep").mkdir(parents=True)
        (run / "ep" / "events.jsonl").write_text(
            "\n".join(json.dumps(e, allow_nan=True) for e in events) + "\n")
        page = render_report(run).read_text()
        assert "<i>x</i>" not in page and 'data-episodes="1"' in page

    check()


def test_run_latency_and_step_strip(tmp_path: Path) -> None:
    from recording.report import percentile

    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == pytest.approx(4.8)
    assert percentile([7.0], 95) == 7.0
    run, specs, _ = _run(tmp_path)
    page = render_report(run).read_text()
    table = page[page.index('<table class="latency">'):]
    table = table[:table.index("</table>")]
    n_steps = sum(s.steps + 1 for s in specs)
    # every synthetic step spends 1.40 s in "plan" and 1.95 s in all
    assert re.search(rf"<td>plan</td><td class=\"n\">{n_steps}</td><td class=\"n\">1.40 s</td>",
                     table), table
    assert "<td>step total</td>" in table and "1.95 s" in table
    for spec in specs:
        strip = page[page.index(f'data-episode="{spec.episode_id}"'):]
        strip = strip[strip.index('<span class="strip">'):]
        strip = strip[:strip.index("</span>")]
        assert strip.count("<a ") == spec.steps + 1


def test_secrets_stay_redacted_in_the_report(tmp_path: Path) -> None:
    """A key the model echoed into its Thought is redacted on the way to disk, and the
    report (which only shows what is on disk) never brings it back."""
    from runtime.log import REDACTED, Redactor

    secret = "sk-test-0123456789abcdef"
    spec = EpisodeSpec("ep-key", "emulator-5554", "Open Settings", 1,
                       thought=f"my key is {secret} <b>x</b>")
    run = tmp_path / "run"
    record_sync(run, episode_messages(spec), redact=Redactor([secret]))
    page = render_report(run).read_text()
    assert secret not in page
    assert f"my key is {REDACTED} &lt;b&gt;x&lt;/b&gt;" in page


def test_memory_is_shown_notes_progress_judge_and_settings(tmp_path: Path) -> None:
    import msgspec

    from protocol.messages import EpisodeStarted, NoteKept, Plan, Progress, Reflection

    spec = EpisodeSpec("ep-mem", "emulator-5554", "Compare two prices", 2)
    msgs = episode_messages(spec)
    plan = next(m for m in msgs if isinstance(m, Plan) and m.step == 1)
    ids = {"device": plan.device, "episode_id": plan.episode_id, "step": 1,
           "correlation_id": plan.correlation_id, "ts": plan.ts + 0.01}
    msgs = [msgspec.structs.replace(m, settings={"planning": "call", "reflection": "both"})
            if isinstance(m, EpisodeStarted) else m for m in msgs]
    msgs += [
        NoteKept(text="price A is $12.99 " + INJECTION, origin="field", **ids),
        Progress(text="PROGRESS shop A read; shop B remains", origin="call", **ids),
        Reflection(verdict="wrong_page", reason="JUDGE the cart opened", source="llm", **ids),
    ]
    run = tmp_path / "run"
    record_sync(run, msgs)
    page = render_report(run).read_text()
    assert INJECTION not in page  # model text stays text
    assert "Note kept</b> (Memory:): price A is $12.99" in page
    assert "Progress</b> (planning call): PROGRESS shop A read" in page
    assert "(LLM judge)" in page and "JUDGE the cart opened" in page
    assert "planning=call, reflection=both" in page
    assert '<dd class="progress">PROGRESS shop A read; shop B remains</dd>' in page
    ep = load_run(run).episodes[0]
    assert ep.kept_notes[0].startswith("price A is $12.99") and ep.settings["planning"] == "call"


def test_cost_per_episode_in_the_report_and_the_summary(tmp_path: Path) -> None:
    """Priced calls: the episode's cost in the run's table, its own summary and each call's
    row; the run's total; an unpriced episode says so instead of $0."""
    import msgspec

    from protocol.messages import LlmUsage

    priced = EpisodeSpec("ep-priced", "emulator-5554", "Open Settings", 2)
    free = EpisodeSpec("ep-free", "emulator-5556", "Open Battery", 1, base_ts=1_780_000_100.0)
    costs = iter([0.0125, 0.0100, 0.0050])
    msgs = [msgspec.structs.replace(m, cost_usd=next(costs)) if isinstance(m, LlmUsage) else m
            for m in episode_messages(priced)]
    assert next(costs, None) is None  # three priced calls: 2 steps + the final Stop
    run = tmp_path / "run"
    record_sync(run, msgs + episode_messages(free))
    page = render_report(run).read_text()

    table = page[page.index('<table class="episodes">'):]
    table = table[:table.index("</table>")]
    assert "<th class=\"n\">cost</th>" in table
    rows = {r.split("</a>")[0].rsplit(">", 1)[-1]: r for r in table.split("<tr>")[2:]}
    assert rows["ep-priced"].endswith('<td class="n">$0.0275</td></tr>')
    assert rows["ep-free"].endswith('<td class="n">–</td></tr>')
    assert "<dt>Cost</dt><dd>$0.0275</dd>" in page  # the run's total
    article = page[page.index('data-episode="ep-priced"'):]
    assert "<dt>Cost</dt><dd>$0.0275</dd>" in article[:article.index("</dl>")]
    assert '<td class="n">$0.0125</td></tr>' in article  # the first call's row

    # the recorder's episode.json carries it too
    (priced_json,) = run.glob("*ep-priced*/episode.json")
    (free_json,) = run.glob("*ep-free*/episode.json")
    assert json.loads(priced_json.read_text())["cost_usd"] == pytest.approx(0.0275)
    assert json.loads(free_json.read_text())["cost_usd"] == 0


def test_watch_shows_the_cost_of_an_episode() -> None:
    import msgspec

    from protocol.messages import EpisodeFinished
    from recording.events import human_line

    topic = "mobagent/v1/devices/p1/events/episode_finished"
    msg = EpisodeFinished(instruction_id="i1", status="failed", steps=4, cost_usd=0.0203,
                          reason="cost cap of $0.02 reached: the LLM calls cost $0.0203")
    assert "episode failed after 4 steps (i1), $0.0203: cost cap" in human_line(topic, msg)
    free = msgspec.structs.replace(msg, cost_usd=0.0, status="succeeded", reason="")
    assert "$" not in human_line(topic, free)
    old = msgspec.json.decode(b'{"kind": "episode_finished", "instruction_id": "i", '
                              b'"status": "succeeded"}', type=EpisodeFinished)
    assert old.cost_usd == 0.0  # older senders still decode


def test_the_summary_counts_grounded_targets_by_source(tmp_path: Path) -> None:
    from recording.report import _summary

    run, _, _ = _run(tmp_path)
    loaded = load_run(run)
    by = dict(_summary(loaded)["grounded_by"])
    assert by and sum(by.values()) == sum(e.get("event") == "grounded" for ep in loaded.episodes for e in ep.events)
    assert "Grounded by</dt><dd>ocr" in render_report(run).read_text()
