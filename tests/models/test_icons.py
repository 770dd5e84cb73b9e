"""The offline Material-icon matcher and the icon grounding path."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from models.detector import OpenCvProposer, Proposal
from models.grounding import Perception, ground_icon_in
from models.icons import IconScores, MaterialIconMatcher, load_codepoints
from protocol.messages import Ambiguous, Grounded, NotFound
from tests.fixtures.data import RicoDev
from tests.models.conftest import Screen, inside, read_bgr


@pytest.fixture(scope="module")
def matcher() -> MaterialIconMatcher:
    try:
        return MaterialIconMatcher()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


def test_codepoints_cover_the_font(matcher: MaterialIconMatcher) -> None:
    assert len(matcher.codepoints) >= 2000
    assert matcher.codepoints["arrow_back"] == 0xE5C4


def test_codepoint_file_formats(tmp_path) -> None:  # type: ignore[no-untyped-def]
    plain = tmp_path / "codepoints"
    plain.write_text("search e8b6\nmore_vert e5d4\n")
    scss = tmp_path / "_variables.scss"
    scss.write_text('$x: map-merge((\n\t"search": e8b6,\n\t"10k": e951,\n), $x);\n')
    assert load_codepoints(plain) == {"search": 0xE8B6, "more_vert": 0xE5D4}
    assert load_codepoints(scss) == {"search": 0xE8B6, "10k": 0xE951}


@pytest.mark.parametrize("description,expected", [
    ("Navigate up", "arrow_back"), ("More options", "more_vert"), ("search", "search"),
    ("plus", "add"), ("add", "add"), ("heart", "favorite"), ("like button", "favorite"),
    ("back", "arrow_back"), ("My Location", "my_location"), ("Zoom in", "zoom_in"),
    ("Flash off", "flash_off"), ("the settings gear icon", "settings"),
])
def test_descriptions_map_to_icon_names(matcher: MaterialIconMatcher, description: str,
                                        expected: str) -> None:
    assert expected in matcher.icon_names(description)


def test_no_fitting_icon_means_no_judgement(matcher: MaterialIconMatcher) -> None:
    assert matcher.icon_names("Team Logo") == []
    frame = np.full((200, 200, 3), 255, dtype=np.uint8)
    assert matcher.score(frame, [(0, 0, 50, 50)], "Team Logo") is None


@pytest.fixture(scope="module")
def toolbar_screen() -> tuple[Screen, dict[str, tuple[float, float, float, float]]]:
    s = Screen()
    s.draw.rectangle((0, 0, 1080, 200), fill=(33, 150, 243))
    drawn = {
        "arrow_back": s.icon((40, 64), "\ue5c4", fill=(255, 255, 255)),
        "search": s.icon((850, 64), "\ue8b6", fill=(255, 255, 255)),
        "more_vert": s.icon((970, 64), "\ue5d4", fill=(255, 255, 255)),
        "favorite": s.icon((120, 700), "\ue87d"),
        "share": s.icon((480, 700), "\ue80d"),
        "delete": s.icon((840, 700), "\ue872"),
        "add": s.icon((900, 1700), "\ue145"),
    }
    s.text((200, 90), "Inbox", size=52, fill=(255, 255, 255))
    s.text((120, 1000), "Photo from Tuesday", size=44)
    return s, drawn


@pytest.mark.parametrize("description,target", [
    ("navigate up", "arrow_back"), ("search", "search"), ("more options", "more_vert"),
    ("heart", "favorite"), ("share", "share"), ("delete", "delete"), ("plus", "add"),
])
def test_icon_grounding_on_a_drawn_screen(matcher: MaterialIconMatcher, toolbar_screen: tuple[
        Screen, dict[str, tuple[float, float, float, float]]], description: str, target: str) -> None:
    screen, drawn = toolbar_screen
    bgr = cv2.cvtColor(screen.array(), cv2.COLOR_RGB2BGR)
    result = ground_icon_in(bgr, OpenCvProposer().detect(bgr), description, matcher)
    if isinstance(result, Grounded):
        assert inside(result.point, drawn[target], slack=6)
    else:  # never a wrong confident pick; when unsure, the right icon is among the marks
        assert isinstance(result, Ambiguous), result
        assert any(inside(c.box.center, drawn[target], slack=6) for c in result.candidates)


def test_most_drawn_icons_are_picked_confidently(matcher: MaterialIconMatcher, toolbar_screen: tuple[
        Screen, dict[str, tuple[float, float, float, float]]]) -> None:
    screen, drawn = toolbar_screen
    bgr = cv2.cvtColor(screen.array(), cv2.COLOR_RGB2BGR)
    props = OpenCvProposer().detect(bgr)
    queries = {"navigate up": "arrow_back", "search": "search", "more options": "more_vert",
               "heart": "favorite", "share": "share", "delete": "delete", "plus": "add"}
    grounded = sum(isinstance(ground_icon_in(bgr, props, q, matcher), Grounded) for q in queries)
    assert grounded >= 5


def test_position_narrows_the_icon_search(matcher: MaterialIconMatcher, toolbar_screen: tuple[
        Screen, dict[str, tuple[float, float, float, float]]]) -> None:
    screen, drawn = toolbar_screen
    p = Perception(matcher=matcher)
    result = p.ground_icon(screen.image, "more options", position="top right")
    assert isinstance(result, Grounded) and inside(result.point, drawn["more_vert"], slack=6)


def test_icon_grounding_edge_cases(matcher: MaterialIconMatcher) -> None:
    blank = np.full((1920, 1080, 3), 255, dtype=np.uint8)
    assert isinstance(ground_icon_in(blank, [], "search", matcher), NotFound)
    props = [Proposal(box=(10, 200, 60, 250)), Proposal(box=(500, 900, 560, 960)),
             Proposal(box=(900, 10, 950, 60))]  # the last one sits in the status bar: never a target
    # no icon name fits: the candidates are marked for the planner, never a guess
    result = ground_icon_in(blank, props, "Team Logo", matcher)
    assert isinstance(result, Ambiguous) and len(result.candidates) == 2
    assert all(c.box.center[1] > 100 for c in result.candidates)
    # blank crops never produce a confident match
    assert not isinstance(ground_icon_in(blank, props, "search", matcher), Grounded)
    # a position with nothing in it falls back to the whole screen, and says so
    result = ground_icon_in(blank, props, "Team Logo", None, position="bottom right")
    assert isinstance(result, Ambiguous) and "whole screen" in result.reason


def test_matcher_on_rico_descriptions(rico_dev: RicoDev, matcher: MaterialIconMatcher) -> None:
    """Described Rico icons whose description names a Material icon: confident picks are
    mostly right, and the right icon is usually among the marks otherwise."""
    proposer = OpenCvProposer()
    right = wrong = marked_right = marked = queries = 0
    for screen in rico_dev.screens:
        targets = [t for t in screen.icon_targets if matcher.icon_names(t["description"])]
        if not targets:
            continue
        bgr = read_bgr(screen.image_path)
        props = proposer.detect(bgr)
        for t in targets:
            queries += 1
            result = ground_icon_in(bgr, props, t["description"], matcher)
            box = tuple(t["bbox"])
            if isinstance(result, Grounded):
                right += inside(result.point, box)
                wrong += not inside(result.point, box)
            elif isinstance(result, Ambiguous):
                marked += 1
                marked_right += any(inside(c.box.center, box) for c in result.candidates)
    print(f"\nicon matcher on rico-dev: {queries} queries, grounded right {right}, wrong {wrong}, "
          f"ambiguous {marked} (right one marked in {marked_right})")
    assert queries >= 20
    assert right >= 10 and right >= 4 * wrong


@pytest.fixture(scope="module")
def back_arrow_screen() -> tuple[Screen, tuple[float, float, float, float]]:
    """An app bar whose only icon is the back arrow, over a list of text rows: the screen on
    which an episode's `Click icon (thumb up, left)` once grounded the arrow at 0.936."""
    s = Screen()
    s.draw.rectangle((0, 0, 1080, 72), fill=(25, 118, 210))  # status bar
    s.draw.rectangle((0, 72, 1080, 240), fill=(33, 150, 243))
    arrow = s.icon((36, 120), "\ue5c4", fill=(255, 255, 255))
    s.text((170, 126), "Comments", size=56, fill=(255, 255, 255))
    for k, line in enumerate(("Great article, thanks", "I disagree with the second point",
                              "Where can I read more?", "Shared it with my team")):
        s.text((60, 320 + 180 * k), line, size=44)
        s.text((60, 380 + 180 * k), f"{k + 2} hours ago", size=34, fill=(120, 120, 120))
    return s, arrow


@pytest.mark.parametrize("description", ["thumb up", "thumbs up", "like", "delete", "share"])
def test_a_lone_unrelated_icon_is_not_grounded(matcher: MaterialIconMatcher, back_arrow_screen:
        tuple[Screen, tuple[float, float, float, float]], description: str) -> None:
    screen, arrow = back_arrow_screen
    bgr = cv2.cvtColor(screen.array(), cv2.COLOR_RGB2BGR)
    props = OpenCvProposer().detect(bgr)
    assert any(inside(p.center, arrow) for p in props)  # the arrow is proposed
    result = ground_icon_in(bgr, props, description, matcher, position="left")
    assert not isinstance(result, Grounded), result


def test_the_lone_icon_that_fits_is_still_grounded(matcher: MaterialIconMatcher, back_arrow_screen:
        tuple[Screen, tuple[float, float, float, float]]) -> None:
    screen, arrow = back_arrow_screen
    bgr = cv2.cvtColor(screen.array(), cv2.COLOR_RGB2BGR)
    props = OpenCvProposer().detect(bgr)
    for description in ("navigate up", "back", "arrow back"):
        result = ground_icon_in(bgr, props, description, matcher, position="top left")
        assert isinstance(result, Grounded) and inside(result.point, arrow, slack=6), result
    # and a thumb up drawn where the arrow was is grounded as one
    thumb = Screen()
    thumb.image.paste(screen.image)
    thumb.draw.rectangle((0, 72, 160, 240), fill=(33, 150, 243))
    box = thumb.icon((36, 120), "\ue8dc", fill=(255, 255, 255))
    bgr = cv2.cvtColor(thumb.array(), cv2.COLOR_RGB2BGR)
    result = ground_icon_in(bgr, OpenCvProposer().detect(bgr), "thumb up", matcher,
                            position="left")
    assert isinstance(result, Grounded) and inside(result.point, box, slack=6), result


def test_the_unrelated_descriptions_decide(matcher: MaterialIconMatcher, back_arrow_screen:
        tuple[Screen, tuple[float, float, float, float]]) -> None:
    """The arrow's crop, judged for "remove" (a minus bar, which it resembles at 0.63),
    correlates more with another icon of the font, arrow_back: a negative margin, and the
    rival is named for the reason."""
    screen, arrow = back_arrow_screen
    bgr = cv2.cvtColor(screen.array(), cv2.COLOR_RGB2BGR)
    pad = (arrow[0] - 8, arrow[1] - 8, arrow[2] + 8, arrow[3] + 8)
    judged = matcher.judge(bgr, [pad], "remove")
    assert judged is not None and judged.margins is not None and judged.rivals is not None
    assert judged.scores[0] > 0.55 and judged.margins[0] < 0, judged
    assert judged.rivals[0] == "arrow back", judged
    thumb = matcher.judge(bgr, [pad], "thumb up")
    assert thumb is not None and thumb.margins is not None and thumb.margins[0] < 0, thumb
    fits = matcher.judge(bgr, [pad], "navigate up")
    assert fits is not None and fits.margins is not None and fits.margins[0] > 0.05, fits


class _Fixed:
    """A matcher with fixed answers: the pick rule alone, without any drawing."""

    def __init__(self, scores: list[float], margins: list[float] | None) -> None:
        self.scores, self.margins = scores, margins

    def judge(self, bgr: np.ndarray, boxes: object, description: str) -> IconScores:
        return IconScores(scores=self.scores, margins=self.margins,
                          rivals=["arrow back"] * len(self.scores) if self.margins else None)


def test_a_confident_score_needs_its_margin_over_the_rivals() -> None:
    frame = np.full((1920, 1080, 3), 255, dtype=np.uint8)
    props = [Proposal(box=(20, 150, 120, 250))]
    lone = ground_icon_in(frame, props, "thumb up", _Fixed([0.94], [0.01]))
    assert isinstance(lone, Ambiguous) and "'arrow back'" in lone.reason
    assert isinstance(ground_icon_in(frame, props, "thumb up", _Fixed([0.94], [0.2])), Grounded)
    # a matcher without rivals (margins None) keeps the score-and-margin rule
    assert isinstance(ground_icon_in(frame, props, "thumb up", _Fixed([0.94], None)), Grounded)
