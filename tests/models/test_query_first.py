"""Reading a query's lines first (``perception.query_first``): the same answers as the whole
frame's read, fewer lines recognised, and nothing lost for later reads of the frame."""

from __future__ import annotations

import numpy as np
import pytest

from models.grounding import (
    EXACT_MAX,
    Perception,
    PerceptionSettings,
    exact_line_fits,
    text_units,
)
from models.ocr import Ocr, OcrSettings
from protocol.messages import Ambiguous, Grounded, GroundResult, NotFound
from tests.fixtures.data import RicoDev
from tests.models.conftest import Screen

DEVICE = "phone-1"
LONG = "Notifications from every app you installed appear here"


def screen(*rows: str, size: int = 48) -> np.ndarray:
    s = Screen()
    for i, text in enumerate(rows):
        s.text((60, 200 + 150 * i), text, size=size)
    return s.array()


@pytest.fixture(scope="module")
def ocr() -> Ocr:
    return Ocr(OcrSettings(threads=1, rec_cache=0))  # no line cache: count every line read


def perceptions(ocr: Ocr) -> tuple[Perception, Perception]:
    return (Perception(PerceptionSettings(query_first=True), ocr=ocr),
            Perception(PerceptionSettings(query_first=False), ocr=ocr))


def answer(g: GroundResult) -> object:
    if isinstance(g, Grounded):
        return g.point
    if isinstance(g, Ambiguous):
        return [c.box for c in g.candidates]
    return type(g).__name__


def test_a_label_is_grounded_from_its_own_lines_and_answers_as_the_whole_frame(ocr: Ocr) -> None:
    frame = screen("Wi-Fi", LONG, "Bluetooth", LONG.replace("every", "each"), "Display")
    first, whole = perceptions(ocr)
    n0 = ocr.rec_lines
    got = first.ground_text(frame, "Bluetooth", frame_id="f1", device=DEVICE)
    read_first = ocr.rec_lines - n0
    n0 = ocr.rec_lines
    want = whole.ground_text(frame, "Bluetooth", frame_id="f1", device=DEVICE)
    read_whole = ocr.rec_lines - n0
    assert isinstance(got, Grounded) and answer(got) == answer(want)
    assert first.ocr_runs[(DEVICE, "first")] == 1
    assert read_whole == 5 and read_first == 3  # the two long lines were left unread
    # the frame's text, asked for later, is all of it, in the whole read's order
    assert first.read_text(frame, frame_id="f1", device=DEVICE).texts == \
        whole.read_text(frame, frame_id="f1", device=DEVICE).texts


@pytest.mark.parametrize("query", ["Notifications", "Bluetooth settings", "Displays", "Zebra"])
def test_a_query_no_line_reads_exactly_falls_back_to_the_whole_frame(ocr: Ocr, query: str) -> None:
    """A word inside a long line, a near miss, nothing at all: the lines left first are read
    too, and the answer is the whole frame's."""
    frame = screen("Wi-Fi", LONG, "Bluetooth", "Display")
    first, whole = perceptions(ocr)
    got = first.ground_text(frame, query, frame_id="f2", device=DEVICE)
    want = whole.ground_text(frame, query, frame_id="f2", device=DEVICE)
    assert answer(got) == answer(want)
    assert first.ocr_runs[(DEVICE, "first")] == 0
    if query == "Zebra":
        assert isinstance(got, NotFound) and got.closest == want.closest  # type: ignore[union-attr]


def test_two_exact_places_stay_ambiguous(ocr: Ocr) -> None:
    frame = screen("Save", LONG, "Cancel", "Save")
    first, whole = perceptions(ocr)
    got = first.ground_text(frame, "Save", frame_id="f3", device=DEVICE)
    want = whole.ground_text(frame, "Save", frame_id="f3", device=DEVICE)
    assert isinstance(got, Ambiguous) and answer(got) == answer(want)


def test_unread_lines_outside_a_change_stay_unread_and_are_read_when_needed(ocr: Ocr) -> None:
    """A band re-read after a query-first read: the long line far from the change is neither
    read nor lost; the next whole read of the frame has it."""
    first, whole = perceptions(ocr)
    before = screen("Wi-Fi", LONG, "Bluetooth", "Display", "Sound")
    after = screen("Wi-Fi", LONG, "Bluetooth", "Display", "Battery")
    first.ground_text(before, "Bluetooth", frame_id="b", device=DEVICE)
    n0 = ocr.rec_lines
    got = first.ground_text(after, "Battery", frame_id="a", device=DEVICE)
    assert isinstance(got, Grounded)
    assert ocr.rec_lines - n0 <= 2  # the changed row and a line left before, not the long one
    assert first.read_text(after, frame_id="a", device=DEVICE).texts == \
        whole.read_text(after, frame_id="a", device=DEVICE).texts


def test_a_speculative_read_leaves_the_lines_to_the_grounding(ocr: Ocr) -> None:
    """``read_text_unless_full`` on a changed place runs the detector there and leaves its
    lines unread; the frame is not cached as read, and the grounding then reads its own."""
    first, _ = perceptions(ocr)
    before = screen("Wi-Fi", LONG, "Bluetooth", "Display", "Sound")
    after = screen("Wi-Fi", LONG, "Bluetooth", "Display", "Battery")
    first.read_text(before, frame_id="b2", device=DEVICE)
    n0 = ocr.rec_lines
    assert first.read_text_unless_full(after, frame_id="a2", device=DEVICE) is not None
    assert ocr.rec_lines == n0 and first.ocr_runs[(DEVICE, "band")] == 1
    got = first.ground_text(after, "Battery", frame_id="a2", device=DEVICE)
    assert isinstance(got, Grounded) and ocr.rec_lines - n0 == 1


def test_query_first_is_off_without_a_phone_or_for_marks(ocr: Ocr) -> None:
    frame = screen("Wi-Fi", LONG, "• • •")
    first, _ = perceptions(ocr)
    first.ground_text(frame, "Wi-Fi", frame_id="f4")  # no device: no per-phone state
    first.ground_text(frame, "•", frame_id="f5", device=DEVICE)  # marks alone
    assert first.ocr_runs[(DEVICE, "first")] == 0
    assert exact_line_fits("•") is None and exact_line_fits("+") is not None


def test_the_length_bound_holds_for_rico_dev_lines(rico_dev: RicoDev,
                                                   rico_ocr: dict[str, object]) -> None:
    """The lines EXACT_MAX / EXACT_MIN were fit on: each one fits its own text but the four
    known outliers ("PC" on wide buttons), so a query of that text would read it first."""
    from models.grounding import normalize
    from models.ocr import OcrResult

    outside = []
    for result in rico_ocr.values():
        assert isinstance(result, OcrResult)
        for ln in result.lines:
            fits = exact_line_fits(ln.text)
            if fits is None:
                continue
            q = np.asarray(ln.quad)
            length = max(np.linalg.norm(q[1] - q[0]), np.linalg.norm(q[2] - q[3]))
            height = max(np.linalg.norm(q[3] - q[0]), np.linalg.norm(q[2] - q[1]))
            if not fits(float(length), float(height)):
                outside.append((normalize(ln.text)[0], round(float(length / height), 2)))
    assert len(outside) <= 4, outside
    assert all(ratio > EXACT_MAX[0] * text_units(t) + EXACT_MAX[1] for t, ratio in outside)


def test_text_units_count_wide_characters_twice() -> None:
    assert text_units("wifi") == 4 and text_units("设置") == 4 and text_units("ｗ") == 2
