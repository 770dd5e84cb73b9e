"""Text grounding: normalisation, match order, the 0/1/many paths, and the Rico dev set."""

from __future__ import annotations

import io

import cv2
import msgspec
import numpy as np
import pytest
from PIL import Image

from models.grounding import (
    Perception,
    TextMatchSettings,
    ground_text_in,
    match_text,
    normalize,
)
from models.ocr import Ocr, OcrLine, OcrResult
from protocol.messages import Ambiguous, Box, Grounded, NotFound
from tests.fixtures.data import RicoDev
from tests.models.conftest import Screen, inside, read_bgr


def line(text: str, box: tuple[float, float, float, float], chars: bool = False) -> OcrLine:
    x1, y1, x2, y2 = box
    cb: tuple[tuple[float, float, float, float], ...] = ()
    if chars:
        step = (x2 - x1) / max(1, len(text))
        cb = tuple((x1 + i * step, y1, x1 + (i + 1) * step, y2) for i in range(len(text)))
    return OcrLine(text=text, score=0.9, box=box, quad=((x1, y1), (x2, y1), (x2, y2), (x1, y2)),
                   char_boxes=cb)


# -- normalisation and match order (pure logic) ----------------------------------------------


def test_normalize_folds_case_width_space_and_punctuation() -> None:
    assert normalize("Other modules")[0] == normalize("Othermodules")[0] == "othermodules"
    assert normalize("ＷＩ－ＦＩ　Ｓｅｔｔｉｎｇｓ")[0] == normalize("wi-fi settings")[0]
    assert normalize("Sign in!")[0] == "signin"
    assert normalize("$300,000")[0] == "$300000"
    norm, index = normalize("A b.c")
    assert norm == "abc" and index == [0, 2, 4]


def test_exact_line_beats_word_inside_a_line() -> None:
    lines = [line("Sign in with Google", (0, 0, 400, 40)), line("Sign in", (0, 100, 120, 140))]
    matches, _ = match_text(lines, "sign in")
    assert [m.method for m in matches] == ["exact"] and matches[0].box == (0, 100, 120, 140)


def test_word_inside_a_line_taps_the_sub_box() -> None:
    lines = [line("Turn on Airplane mode", (100, 0, 520, 40), chars=True)]
    matches, _ = match_text(lines, "Airplane")
    assert len(matches) == 1 and matches[0].method == "word"
    # unique, on word boundaries and at least `word_certain_len` long: certain
    assert matches[0].certain
    x1, _, x2, _ = matches[0].box
    step = 420 / len("Turn on Airplane mode")
    assert x1 == pytest.approx(100 + 8 * step) and x2 == pytest.approx(100 + 16 * step)
    # a short word inside a longer line is for the planner to confirm
    short, _ = match_text(lines, "mode")
    assert len(short) == 1 and not short[0].certain
    off = TextMatchSettings(word_certain_len=0)
    assert not match_text(lines, "Airplane", off)[0][0].certain


# -- certain vs uncertain: what may be Grounded without an exact line match ------------------


def ground(lines: list[OcrLine], query: str) -> Grounded | Ambiguous | NotFound:
    return ground_text_in(OcrResult(width=1080, height=1920, lines=tuple(lines)), None, query)


# An Ambiguous answer's reason names the kind of its first candidate (ground_text_in).
KIND_IN_REASON = {"exact": "match exactly", "word": "(the text inside a longer line",
                  "prefix": "(a line cut short with an ellipsis", "fuzzy": "(a similar text"}


def first_kind(result: Ambiguous, kind: str) -> bool:
    return KIND_IN_REASON[kind] in result.reason


def test_exact_line_is_grounded_and_beats_a_word_elsewhere() -> None:
    result = ground([line("Save note", (0, 0, 300, 40), chars=True),
                     line("Save", (0, 900, 100, 940))], "Save")
    assert isinstance(result, Grounded) and result.source == "exact" and result.point[1] > 900


def test_word_in_a_longer_line_is_ambiguous_with_one_marked_candidate() -> None:
    # The button "Save" was not read, but the title "Save note" was: tapping the title
    # confidently would be wrong, so the planner must confirm the only candidate.
    result = ground([line("Save note", (0, 0, 300, 40), chars=True),
                     line("Cancel", (0, 900, 160, 940))], "Save")
    assert isinstance(result, Ambiguous), result
    assert len(result.candidates) == 1 and first_kind(result, "word")
    assert result.candidates[0].text == "Save note" and result.candidates[0].box.center[0] < 150
    assert "uncertain" in result.reason


def test_whole_word_with_a_short_rest_stays_grounded() -> None:
    # "Inbox 3" (an unread count) for "Inbox": unique, on word boundaries, rest <= 25 %.
    result = ground([line("Inbox 3", (0, 0, 280, 40), chars=True),
                     line("Sent", (0, 100, 120, 140))], "Inbox")
    assert isinstance(result, Grounded) and result.source == "word"
    # but not "10" in "10:30": the rest is as long as the query
    assert isinstance(ground([line("10:30", (0, 0, 200, 40), chars=True)], "10"), Ambiguous)


def test_a_lost_space_next_to_an_icon_counts_as_a_word_boundary() -> None:
    # "Q" is a ticket icon read as a letter, far left of the text: the char boxes show the gap.
    step = 20.0
    chars = [(0.0, 0.0, step, 40.0)] + [(80 + k * step, 0.0, 80 + (k + 1) * step, 40.0)
                                        for k in range(len("Manage Your Tickets"))]
    glued = OcrLine(text="QManage Your Tickets", score=0.9, box=(0, 0, chars[-1][2], 40),
                    quad=((0, 0), (chars[-1][2], 0), (chars[-1][2], 40), (0, 40)),
                    char_boxes=tuple(chars))
    result = ground([glued], "Manage Your Tickets")
    assert isinstance(result, Grounded) and result.source == "word" and result.box.left >= 80
    # the same letters evenly spaced are one word: "Manage..." inside it is not certain
    even = line("QManage Your Tickets", (0, 0, 420, 40), chars=True)
    assert isinstance(ground([even], "Manage Your Tickets"), Ambiguous)


def test_word_matches_in_several_lines_are_ambiguous() -> None:
    result = ground([line("Open Settings", (0, 0, 300, 40), chars=True),
                     line("Settings saved", (0, 500, 300, 540), chars=True)], "Settings")
    assert isinstance(result, Ambiguous) and len(result.candidates) == 2
    assert {c.text for c in result.candidates} == {"Open Settings", "Settings saved"}


def test_fuzzy_match_is_grounded_only_when_strong_and_unique() -> None:
    # one character off in a long word, whole line, nothing else close: Grounded
    strong = ground([line("Notifications", (0, 0, 300, 40)), line("Display", (0, 100, 200, 140))],
                    "Notificatons")
    assert isinstance(strong, Grounded) and strong.source == "fuzzy"
    # "Note" vs "Notes" is a different element as often as not: confirm it
    weak = ground([line("Notes", (0, 0, 200, 40)), line("Display", (0, 100, 200, 140))], "Notez")
    assert isinstance(weak, Ambiguous) and len(weak.candidates) == 1 and first_kind(weak, "fuzzy")
    # two lines equally close: both offered
    two = ground([line("Setting", (0, 0, 200, 40)), line("Settings", (0, 300, 200, 340))],
                 "Settinga")
    assert isinstance(two, Ambiguous) and len(two.candidates) == 2
    # and a fuzzy window inside a longer line is never certain
    window = ground([line("Open the Bluetoth settings", (0, 0, 500, 40), chars=True)],
                    "Bluetooth")
    assert isinstance(window, Ambiguous) and first_kind(window, "fuzzy")


def test_several_exact_places_put_the_most_literal_reading_first() -> None:
    result = ground([line("Ticketmaster", (0, 0, 300, 40)), line("ticketmaster@", (0, 500, 300, 540))],
                    "ticketmaster\u00ae")
    assert isinstance(result, Ambiguous) and first_kind(result, "exact")
    assert [c.text for c in result.candidates] == ["ticketmaster@", "Ticketmaster"]


def test_accents_are_folded() -> None:
    assert normalize("Français")[0] == normalize("Francais")[0] == "francais"
    assert normalize("が")[0] == "が"  # other scripts keep their marks
    assert isinstance(ground([line("Francais", (0, 0, 200, 40))], "Français"), Grounded)


def test_word_boundary_match_preferred_over_inside_a_word() -> None:
    lines = [line("Stopwatch", (0, 0, 200, 40), chars=True), line("Stop now", (0, 100, 200, 140), chars=True)]
    matches, _ = match_text(lines, "Stop")
    assert len(matches) == 1 and matches[0].box[1] == 100


def test_short_query_never_matches_inside_a_word() -> None:
    lines = [line("Bookmarks", (0, 0, 200, 40), chars=True)]
    assert match_text(lines, "OK")[0] == []
    assert len(match_text(lines, "marks")[0]) == 1  # longer: spaces may have been lost


def test_fuzzy_match_and_its_limits() -> None:
    lines = [line("Settings", (0, 0, 200, 40)), line("Display", (0, 100, 200, 140))]
    matches, _ = match_text(lines, "Setings")
    assert len(matches) == 1 and matches[0].method == "fuzzy" and matches[0].label == "Settings"
    assert matches[0].certain  # similarity 0.93, whole line, nothing else close
    # Short strings never match fuzzily: "10" is not "18".
    assert match_text([line("18", (0, 0, 40, 40))], "10")[0] == []
    matches, closest = match_text(lines, "Bluetooth")
    assert matches == [] and "Settings" in closest


def test_ocr_confusables_match_exactly() -> None:
    lines = [line("13m Os - North to Lincoln Heights", (0, 0, 600, 40)),
             line("18m 38s - North to Lincoln Heights", (0, 100, 600, 140))]
    matches, _ = match_text(lines, "13m 0s - North to Lincoln Heights")
    assert len(matches) == 1 and matches[0].box[1] == 0


def test_split_and_stacked_lines_are_joined() -> None:
    row = [line("Sign", (0, 0, 80, 40)), line("in", (95, 0, 130, 40))]
    matches, _ = match_text(row, "Sign in")
    assert len(matches) == 1 and matches[0].box == (0, 0, 130, 40)
    stacked = [line("06:00 PM ET", (0, 0, 200, 30)), line("Sun 03/26", (0, 34, 180, 64))]
    result = ground_text_in(OcrResult(width=400, height=400, lines=tuple(stacked)), None,
                            "06:00 PM ET\nSun 03/26")
    assert isinstance(result, Grounded) and result.box == Box(0, 0, 200, 64)


def test_position_narrows_text_candidates() -> None:
    lines = (line("OK", (100, 100, 160, 140)), line("OK", (100, 1700, 160, 1740)))
    ocr = OcrResult(width=1080, height=1920, lines=lines)
    assert isinstance(ground_text_in(ocr, None, "OK"), Ambiguous)
    bottom = ground_text_in(ocr, None, "OK", position="bottom")
    assert isinstance(bottom, Grounded) and bottom.point[1] > 1000


def test_empty_query_is_not_found_not_a_crash() -> None:
    ocr = OcrResult(width=10, height=10, lines=())
    assert isinstance(ground_text_in(ocr, None, "  ..."), NotFound)
    assert isinstance(ground_text_in(ocr, None, "Settings"), NotFound)


# -- the 0 / 1 / many paths on drawn screens, through the real OCR -----------------------------


@pytest.fixture(scope="module")
def settings_screen() -> Screen:
    s = Screen()
    s.text((60, 20), "12:30", size=36)
    s.text((60, 200), "Wi-Fi", size=52)
    s.text((60, 360), "Bluetooth", size=52)
    s.text((60, 520), "Tap here to turn on Airplane", size=52)
    s.text((120, 1500), "OK", size=56)
    s.text((700, 1500), "OK", size=56)
    return s


@pytest.fixture(scope="module")
def perception(ocr_engine: Ocr) -> Perception:
    return Perception(ocr=ocr_engine)


def test_one_match_is_grounded_inside_the_drawn_text(settings_screen: Screen,
                                                     perception: Perception) -> None:
    result = perception.ground_text(settings_screen.image, "bluetooth")
    assert isinstance(result, Grounded), result
    assert inside(result.point, settings_screen.boxes["Bluetooth"][0])


def test_word_inside_a_line_lands_on_the_word(settings_screen: Screen,
                                              perception: Perception) -> None:
    # No line reads "Airplane" alone, but it is a whole word, long and found once: grounded on
    # the word's own characters (a link inside a sentence), not on the line's centre.
    line_text = "Tap here to turn on Airplane"
    result = perception.ground_text(settings_screen.image, "Airplane")
    assert isinstance(result, Grounded) and result.source == "word", result
    word = settings_screen.word_box((60, 520), line_text, "Airplane", size=52)
    assert inside(result.point, word, slack=8)
    line_box = settings_screen.boxes[line_text][0]
    assert abs(result.point[0] - (line_box[0] + line_box[2]) / 2) > 30
    # A short word inside the line may be another element's label: one uncertain candidate,
    # on the word, marked for the planner to confirm.
    short = perception.ground_text(settings_screen.image, "turn")
    assert isinstance(short, Ambiguous) and first_kind(short, "word"), short
    assert len(short.candidates) == 1 and short.marked_image and short.candidates[0].crop
    assert inside(short.candidates[0].box.center,
                  settings_screen.word_box((60, 520), line_text, "turn", size=52), slack=8)


def test_many_matches_are_ambiguous_with_one_marked_image(settings_screen: Screen,
                                                          perception: Perception) -> None:
    result = perception.ground_text(settings_screen.image, "OK")
    assert isinstance(result, Ambiguous), result
    assert [c.index for c in result.candidates] == [1, 2]
    drawn = settings_screen.boxes["OK"]
    for box in drawn:
        assert any(inside(c.box.center, box, slack=6) for c in result.candidates)
    marked = Image.open(io.BytesIO(result.marked_image))
    assert marked.size == settings_screen.image.size
    # the marks changed the picture around the candidates
    diff = np.abs(np.asarray(marked, dtype=np.int16) - settings_screen.array().astype(np.int16))
    assert diff.max() > 100
    for c in result.candidates:
        assert Image.open(io.BytesIO(c.crop)).size[0] > 0


def test_zero_matches_list_the_closest_texts(settings_screen: Screen,
                                             perception: Perception) -> None:
    result = perception.ground_text(settings_screen.image, "Bluetoth settings")
    assert isinstance(result, NotFound | Grounded)
    result = perception.ground_text(settings_screen.image, "Display")
    assert isinstance(result, NotFound), result
    assert result.closest and all(isinstance(t, str) for t in result.closest)


def test_results_serialise_for_the_bus(settings_screen: Screen, perception: Perception) -> None:
    for query in ("Bluetooth", "OK", "Display"):
        result = perception.ground_text(settings_screen.image, query)
        decoded = msgspec.msgpack.decode(msgspec.msgpack.encode(result),
                                         type=Grounded | Ambiguous | NotFound)
        assert decoded == result


def test_perception_caches_per_frame_and_accepts_numpy(settings_screen: Screen,
                                                       perception: Perception) -> None:
    a = perception.read_text(settings_screen.image)
    b = perception.read_text(settings_screen.array())  # same pixels, as an RGB array
    assert a is b
    c = perception.read_text(settings_screen.image, frame_id="frame-1")
    assert perception.read_text(settings_screen.image, frame_id="frame-1") is c


def test_perception_counts_its_ocr_reads_by_device_and_kind(settings_screen: Screen,
                                                            ocr_engine: Ocr) -> None:
    fresh = Perception(ocr=ocr_engine)
    fresh.read_text(settings_screen.image, frame_id="f1", device="phone-1")
    fresh.read_text(settings_screen.image, frame_id="f1", device="phone-1")  # read before
    fresh.read_text(settings_screen.image, frame_id="f2", device="phone-1")  # same pixels
    fresh.read_text(settings_screen.image, frame_id="f3")  # no device: a whole-frame read
    assert fresh.ocr_runs == {("phone-1", "full"): 1, ("phone-1", "cached"): 1,
                              ("phone-1", "unchanged"): 1, ("", "full"): 1}


def test_bad_image_input_is_a_clear_error(perception: Perception) -> None:
    from models.ocr import ImageError

    with pytest.raises(ImageError):
        perception.ground_text(b"not an image", "OK")
    with pytest.raises(ImageError):
        perception.ground_text(np.zeros((10,), dtype=np.uint8), "OK")


# -- the real screens --------------------------------------------------------------------------


def test_text_grounding_on_every_rico_target(rico_dev: RicoDev,
                                             rico_ocr: dict[str, OcrResult]) -> None:
    """Every ground-truth text target; the figure over the visible ones is the headline.

    Visibility comes from the view hierarchy alone (bench/grounding.py's `hidden_reason`:
    covered by a later-drawn view, under an open side panel, clipped), never from OCR.
    """
    from bench.grounding import hidden_reason, side_panels

    hits = total = vis_hits = vis_total = confident_wrong = hidden_but_read = 0
    for screen in rico_dev.screens:
        ocr = rico_ocr[screen.screen_id]
        panels = side_panels(screen.elements, screen.width, screen.height)
        read = {normalize(ln.text)[0] for ln in ocr.lines}
        for target in screen.text_targets:
            visible = not hidden_reason(target, screen.elements, screen.width, screen.height,
                                        panels)
            total += 1
            vis_total += visible
            result = ground_text_in(ocr, None, target["text"])
            point = result.point if isinstance(result, Grounded) else (
                result.candidates[0].box.center if isinstance(result, Ambiguous) else None)
            ok = point is not None and inside(point, tuple(target["bbox"]))
            hits += ok
            vis_hits += ok and visible
            confident_wrong += isinstance(result, Grounded) and not ok and visible
            hidden_but_read += not visible and normalize(target["text"])[0] in read
    accuracy, vis_accuracy = hits / total, vis_hits / vis_total
    print(f"\ntext grounding on rico-dev: visible {vis_hits}/{vis_total} = {vis_accuracy:.3f}; "
          f"all {hits}/{total} = {accuracy:.3f}; confident wrong on visible: {confident_wrong}; "
          f"hidden by the rule but read by OCR: {hidden_but_read}")
    # Measured with the default settings: visible 0.964, all 0.831, 0 confident wrong,
    # 0 hidden-but-read (about 14 % of the targets are hidden in these screenshots).
    assert total == rico_dev.n_text and 0.8 * total <= vis_total < total
    assert vis_accuracy >= 0.94 and accuracy >= 0.80
    assert confident_wrong <= 2
    assert hidden_but_read <= 2  # the rule does not hide what can be read


def test_grounding_uses_one_ocr_for_many_queries(rico_dev: RicoDev, ocr_engine: Ocr) -> None:
    screen = rico_dev.screens[0]
    frame = cv2.cvtColor(read_bgr(screen.image_path), cv2.COLOR_BGR2RGB)
    p = Perception(ocr=ocr_engine)
    first = p.read_text(frame)
    for target in screen.text_targets:
        p.ground_text(frame, target["text"])
    assert p.read_text(frame) is first


# -- marks alone, and lines the screen cut short ---------------------------------------------


def test_a_query_of_marks_alone_matches_its_look_alikes() -> None:
    # "•" and "-" normalise to nothing; they are matched on the marks themselves, with
    # look-alikes folded (a bullet drawn as a middle dot, a minus as a dash).
    alone = ground([line("–", (500, 100, 520, 140)), line("Volume", (0, 100, 200, 140))], "-")
    assert isinstance(alone, Grounded) and alone.source == "exact" and alone.point[0] > 500
    inner = ground([line("Scene4·53d", (0, 0, 200, 40), chars=True)], "•")
    assert isinstance(inner, Ambiguous) and first_kind(inner, "word")
    step = 200 / len("Scene4·53d")
    assert 6 * step <= inner.candidates[0].box.center[0] <= 7 * step
    assert isinstance(ground([line("Volume", (0, 0, 200, 40))], "•"), NotFound)


@pytest.fixture(scope="module")
def cut_short_screen() -> Screen:
    s = Screen()
    s.text((60, 200), "Forgot your password? • Privacy policy", size=44)
    s.text((60, 400), "Snapdragon Profiler - arm…", size=48)
    s.text((60, 600), "Apr 7...", size=48)
    s.text((60, 800), "Downloads", size=48)
    return s


def test_a_separator_bullet_inside_a_line_is_found_on_the_screen(
        cut_short_screen: Screen, perception: Perception) -> None:
    text = "Forgot your password? • Privacy policy"
    result = perception.ground_text(cut_short_screen.image, "•")
    assert isinstance(result, Ambiguous), result
    assert inside(result.candidates[0].box.center,
                  cut_short_screen.word_box((60, 200), text, "•", size=44), slack=20)


def test_an_ellipsized_line_matches_the_start_of_the_query(
        cut_short_screen: Screen, perception: Perception) -> None:
    long = perception.ground_text(cut_short_screen.image, "Snapdragon Profiler - arm64_v8a")
    assert isinstance(long, Grounded) and long.source == "prefix", long
    assert inside(long.point, cut_short_screen.boxes["Snapdragon Profiler - arm…"][0])
    # too little of the query is left to be sure: the planner confirms it
    short = perception.ground_text(cut_short_screen.image, "Apr 7, 2022")
    assert isinstance(short, Ambiguous) and first_kind(short, "prefix"), short
    assert "ellipsis" in short.reason
    assert inside(short.candidates[0].box.center, cut_short_screen.boxes["Apr 7..."][0])
    # a line without an ellipsis is no prefix of anything
    assert isinstance(perception.ground_text(cut_short_screen.image, "Downloads folder"),
                      Ambiguous | NotFound)
    assert not isinstance(perception.ground_text(cut_short_screen.image, "Download manager"),
                          Grounded)


def test_a_word_read_with_confusables_is_still_found_inside_a_line() -> None:
    # "Issues" read "lssues 131" (a tab with its count): the I/l fold finds the word
    result = ground([line("lssues 131", (0, 0, 300, 40), chars=True)], "Issues")
    assert isinstance(result, Grounded) and result.source == "word"
    assert result.box.right <= 200  # the word's characters, not the count


def test_several_word_matches_put_the_shortest_line_first_and_say_so() -> None:
    result = ground([line("Click on top right + to add a list", (0, 0, 700, 40), chars=True),
                     line("+ Add", (0, 900, 120, 940), chars=True)], "Add")
    assert isinstance(result, Ambiguous) and first_kind(result, "word")
    assert [c.text for c in result.candidates] == ["+ Add", "Click on top right + to add a list"]
    assert "shortest line holding it first" in result.reason


def test_text_positions_are_halves_of_what_the_app_draws() -> None:
    # A 1080x2340 capture of an app drawn 1920 high (the rest black): a label at y 1100 is
    # in the app's bottom half, though in the frame's top half.
    rgb = np.zeros((2340, 1080, 3), dtype=np.uint8)
    rgb[:1920] = 250
    ocr = OcrResult(width=1080, height=2340, lines=(line("Save", (100, 1080, 220, 1120)),))
    assert isinstance(ground_text_in(ocr, rgb, "Save", position="bottom"), Grounded)
    assert isinstance(ground_text_in(ocr, rgb, "Save", position="top"), NotFound)
    # without the frame the halves are the frame's
    assert isinstance(ground_text_in(ocr, None, "Save", position="top"), Grounded)
