"""Hybrid grounding of a model's point: kept inside an element, snapped to the one element
near it, used as given otherwise."""

from __future__ import annotations

from models.grounding import snap_point

SAVE = (100.0, 100.0, 200.0, 140.0)  # an OCR line
GEAR = (300.0, 100.0, 340.0, 140.0)  # an icon box


def test_inside_an_element_is_kept() -> None:
    s = snap_point((110, 105), [SAVE], [GEAR], 24)
    assert (s.point, s.source, s.box) == ((110, 105), "ocr", SAVE)
    s = snap_point((335, 138), [SAVE], [GEAR], 24)
    assert (s.point, s.source) == ((335, 138), "icon")


def test_near_exactly_one_element_snaps_to_its_centre() -> None:
    s = snap_point((150, 155), [SAVE], [GEAR], 24)  # 15 px below Save
    assert (s.point, s.source, s.box) == ((150, 120), "snapped", SAVE)
    s = snap_point((350, 120), [SAVE], [GEAR], 24)  # 10 px right of the gear
    assert (s.point, s.source) == ((320, 120), "snapped")


def test_far_or_between_two_is_used_as_given() -> None:
    assert snap_point((150, 300), [SAVE], [GEAR], 24).source == "model"
    between = snap_point((250, 120), [SAVE], [GEAR], 60)  # 50 px from both
    assert (between.point, between.source) == ((250, 120), "model")
    assert snap_point((150, 155), [SAVE], [], 0).source == "model"  # radius 0: no snapping


def test_the_same_element_seen_twice_counts_once() -> None:
    # The detector proposes the label's text region too, and nested boxes for one icon.
    text_proposal = (104.0, 101.0, 196.0, 139.0)
    s = snap_point((150, 155), [SAVE], [text_proposal, GEAR], 24)
    assert (s.point, s.source) == ((150, 120), "snapped")
    s = snap_point((350, 120), [], [GEAR, (305.0, 105.0, 335.0, 135.0)], 24)
    assert (s.point, s.source) == ((320, 120), "snapped")
