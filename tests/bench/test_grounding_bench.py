"""bench/grounding.py's statistics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.grounding import sign_test_p


def test_the_sign_test() -> None:
    assert sign_test_p(3, 7) == pytest.approx(0.34375) == sign_test_p(7, 3)
    assert sign_test_p(0, 10) == pytest.approx(2 / 1024)
    assert sign_test_p(5, 5) == 1.0 and sign_test_p(0, 0) == 1.0


def test_the_wilson_interval() -> None:
    from bench.grounding import fmt_share, wilson

    lo, hi = wilson(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)
    lo, hi = wilson(50, 50)  # all right: the interval still has a lower end below 1
    assert hi == pytest.approx(1.0) and 0.92 < lo < 0.93
    assert fmt_share(8, 10) == "0.800 [0.490, 0.943]"


def _score(name: str, hit: list[bool], visible: list[bool], wrong: int = 0,
           ambiguous: int = 0) -> Any:
    from bench.grounding import TextScore

    n_vis = sum(visible)
    acc = sum(h for h, v in zip(hit, visible, strict=True) if v) / n_vis
    return TextScore(name, acc, sum(hit) / len(hit), acc, acc, 0.1, 0.2, 0.1, len(hit), n_vis,
                     sum(hit), wrong, ambiguous, hit, hit, visible)


def test_pooled_counts_the_visible_targets_of_every_set_together() -> None:
    from bench.grounding import pooled

    per_set = {"a": {"x": _score("x", [True, True, False, True], [True, True, True, False])},
               "b": {"x": _score("x", [True, False], [True, True], wrong=1, ambiguous=2),
                     "y": _score("y", [True, True], [True, True])}}
    out = pooled(per_set)
    assert set(out) == {"x"}  # only set-ups run on every set are pooled
    assert out["x"]["n_visible"] == 5 and out["x"]["text_accuracy"] == pytest.approx(3 / 5)
    assert out["x"]["grounded_wrong"] == 1 and out["x"]["ambiguous"] == 2


def test_tuning_picks_on_one_set_and_reports_the_other() -> None:
    from bench.grounding import OURS, choose, tuning

    vis = [True] * 4
    tune = {"v4": _score("v4", [True, True, False, False], vis),
            "v6": _score("v6", [True, True, True, False], vis, wrong=1),
            "v6b": _score("v6b", [True, True, True, False], vis)}
    report = {"v4": _score("v4", [True, True, True, True], vis),
              "v6": _score("v6", [True, False, False, False], vis),
              "v6b": _score("v6b", [True, True, False, False], vis)}
    assert choose(tune, list(tune)) == "v6b"  # as many grounded, fewer wrong taps
    ours = _score("ours (the defaults)", [True, True, True, False], vis)
    out = tuning({"A": {**tune, OURS: ours}, "B": {**report, OURS: ours}}, "A", "B", list(tune))
    assert out["levers"]["v4"]["not_tuned_on_vs_ours"] == {"only_lever": 1, "only_ours": 0,
                                                          "sign_test_p": 1.0}
    assert out["levers"]["v6"]["not_tuned_on_vs_ours"]["only_ours"] == 2
    assert out["picked"] == "v6b"  # what B says does not change the choice
    assert out["levers"]["v6b"]["not_tuned_on"]["text_accuracy"] == pytest.approx(0.5)
    assert out["levers"]["v6b"]["tuned_on"]["text_accuracy"] == pytest.approx(0.75)


def test_bad_set_arguments_are_usage_errors(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from bench.grounding import main

    assert main(["--tune-on", str(tmp_path)]) == 2
    assert "go together" in capsys.readouterr().err
    assert main([]) == 2
    assert main(["--data", str(tmp_path)]) == 2
    assert "no screens/ folder" in capsys.readouterr().err


def test_icons_only_reports_each_set(rico_dev: Any, tmp_path: Path) -> None:
    """`--icons-only` runs no OCR and reports, per set, proposal recall, the matcher with
    and without a position, the absent-icon queries and the position filter's keep-rate."""
    import json

    from bench.grounding import main

    out = tmp_path / "icons.json"
    assert main(["--data", str(rico_dev.root), "--limit", "3", "--icons-only",
                 "--json", str(out)]) == 0
    (figures,) = json.loads(out.read_text())["sets"].values()
    assert 0 < figures["icon_recall"] <= 1 and figures["n_icon"] > 0
    assert figures["matcher_queries"] == figures["matcher_at_position_queries"]
    assert figures["absent_queries"] == 3 * 20 * 5
    assert figures["absent_grounded"] + figures["absent_ambiguous"] + \
        figures["absent_not_found"] == figures["absent_queries"]
    assert 0 <= figures["position_keep_quadrant"] <= 1


def test_the_grounder_flag_measures_a_served_model_on_a_tiny_set(tmp_path: Path) -> None:
    """`--grounder URL --grounder-model NAME`: the loopback server stands for vLLM; the
    text target is answered right, the icon wrong (0..1000, Qwen3-VL's convention)."""
    import json

    import cv2
    import numpy as np

    from bench.grounding import main
    from bench.openai_loopback import Behaviour, OpenAIServer, RecordedRequest

    screens = tmp_path / "set" / "screens"
    screens.mkdir(parents=True)
    cv2.imwrite(str(screens / "s1.png"), np.full((2000, 1000, 3), 250, np.uint8))
    (screens / "s1.json").write_text(json.dumps({
        "image": "s1.png", "width": 1000, "height": 2000,
        "text_targets": [{"text": "OK", "bbox": [100, 100, 300, 200]}],
        "icon_targets": [{"description": "search", "bbox": [800, 1800, 900, 1900]}]}))

    def answer(req: RecordedRequest) -> Behaviour:
        text = " ".join(req.texts())
        return Behaviour.reply('{"point_2d": [200, 75]}' if '"OK"' in text else "(100, 100)")

    out = tmp_path / "g.json"
    with OpenAIServer(policy=answer) as srv:
        assert main(["--data", str(tmp_path / "set"), "--grounder", srv.base_url,
                     "--grounder-model", "Qwen3-VL-8B-Instruct", "--json", str(out)]) == 0
        assert all(r.body and r.body["model"] == "Qwen3-VL-8B-Instruct" for r in srv.requests)
    (got,) = json.loads(out.read_text())["grounder"]["sets"].values()
    assert (got["text_accuracy"], got["n_text"], got["icon_accuracy"], got["n_icon"]) == (1, 1, 0, 1)
    assert got["model"] == "qwen" and got["failed_calls"] == 0
    assert main(["--data", str(tmp_path / "set"), "--grounder", "http://127.0.0.1:9/v1"]) == 2


def test_interleaved_runs_take_each_set_ups_process_cpu() -> None:
    import math

    import numpy as np

    from bench.grounding import Screen, TextScore, cpu_ratio, run_interleaved, timed
    from models.ocr import OcrResult

    def busy(rounds: int) -> Any:
        def engine(bgr: np.ndarray) -> OcrResult:
            x = np.ones((200, 200))
            for _ in range(rounds):
                x = np.tanh(x @ x / 200)
            return OcrResult(width=bgr.shape[1], height=bgr.shape[0], lines=())
        return engine

    screens = [Screen(str(k), np.zeros((8, 8, 3), np.uint8), [], []) for k in range(3)]
    runs = run_interleaved(screens, {"light": timed(busy(1)), "heavy": timed(busy(40))})
    (_, res_l, cpu_l), (_, _, cpu_h) = runs["light"], runs["heavy"]
    assert set(res_l) == {"0", "1", "2"} and len(cpu_l) == len(cpu_h) == 3
    assert all(c > 0 for c in cpu_h) and sum(cpu_h) > 5 * sum(cpu_l)
    a = TextScore("a", 1, 1, 1, 1, 0.1, 0.2, 0.1, 1, 1, 1, 0, 0, [True], [True], [True],
                  cpu_mean=0.2)
    b = TextScore("b", 1, 1, 1, 1, 0.1, 0.2, 0.1, 1, 1, 1, 0, 0, [True], [True], [True],
                  cpu_mean=0.4)
    assert cpu_ratio(a, b) == pytest.approx(0.5)
    assert math.isnan(cpu_ratio(a, TextScore("c", 1, 1, 1, 1, 0.1, 0.2, 0.1, 1, 1, 1, 0, 0,
                                             [True], [True], [True])))


def test_int8_candidates_without_their_files(rico_dev: Any, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Named, a static int8 candidate with no file built stops the bench with the command to
    build it (it would otherwise measure the fp32 fallback under the int8 name); among all
    candidates it is left out with a note."""
    from bench.grounding import main
    from models.ocr import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "ocr"))
    common = ["--data", str(rico_dev.root), "--limit", "1", "--no-levers", "--no-tesseract",
              "--no-icons", "--no-default"]
    assert main([*common, "--models", "int8 static rec"]) == 2
    assert "python -m models.export.ocr_int8 --calibrate" in capsys.readouterr().err
    out = tmp_path / "all.json"
    assert main([*common, "--models", "PP-OCRv4,int8 static rec", "--json", str(out)]) == 2
    capsys.readouterr()
    assert main([*common, "--models", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "note: int8 static det+rec: no det/rec int8 model" in printed
    import json

    models = json.loads(out.read_text())["models"]
    assert "int8 static rec" not in models and "PP-OCRv4" in models
