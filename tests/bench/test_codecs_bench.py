"""bench/codecs.py, job ``capture``: its checks of the new stage against the former one
(same bytes, digest and black area) count what they should; no time is asserted."""

from __future__ import annotations

import numpy as np

from bench.codecs import former_black_area, measure_capture, screens


def test_the_capture_job_finds_the_stages_alike_and_counts_a_difference() -> None:
    home = screens()["home"]
    got = measure_capture({"home": home}, rounds=1)
    assert got["frames"] == 1 and got["same_output"] == 1
    assert got["dark_same"] + got["dark_differ"] == 11 and got["dark_differ"] <= 1
    assert {"sha", "frame", "views", "black", "stage", "changed", "one_px", "same"} <= set(got)
    assert all(got[part]["old_ms"] > 0 for part in ("stage", "same"))


def test_the_baseline_reads_black_as_the_former_capture_did() -> None:
    rgb = np.zeros((2400, 1080, 3), np.uint8)
    assert former_black_area(rgb) == "frame"
    rgb[20:50, 40:160] = 230  # a status bar's clock over a black app
    assert former_black_area(rgb) == "app"
    assert former_black_area(np.full((2400, 1080, 3), 200, np.uint8)) is None
