"""Perception on the simulated phone's screens, against its ground-truth elements.

The simulated phone draws with the same fonts as the Material matcher, so icon figures here
say little about real screens (those are measured on Rico); this checks the whole path.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from models.grounding import Perception
from models.ocr import Ocr
from protocol.messages import Ambiguous, Grounded, NotFound
from tests.models.conftest import inside

phone_mod = pytest.importorskip("sim.phone.phone", reason="the simulated phone is not available")
api = pytest.importorskip("sim.phone_api")

APPS = ("com.android.settings", "com.google.android.gm", "com.sim.weather", "com.mobagent.notes")
TEXT_KINDS = {"text", "list_item", "title", "button", "tab", "chip"}


@pytest.fixture(scope="module")
def sim_frames() -> list[tuple[Any, list[Any]]]:
    phone = phone_mod.SimPhone(api.DeviceInfo(serial="perception-test"), seed=0)
    frames = []
    for package in APPS:
        try:
            phone.open(package)
            phone.settle()
        except Exception as exc:  # an app still being built elsewhere must not stop this file
            print(f"skipping {package}: {exc}")
            continue
        frames.append((phone.screenshot(), phone.elements()))
    if not frames:
        pytest.skip("no simulated app could be opened")
    return frames


def test_text_grounding_on_sim_screens(sim_frames: list[tuple[Any, list[Any]]],
                                       ocr_engine: Ocr) -> None:
    perception = Perception(ocr=ocr_engine)
    right = total = 0
    for image, elements in sim_frames:
        w, h = image.size
        counts = Counter(e.text for e in elements)
        for el in elements:
            x0, y0, x1, y1 = el.bbox
            text = el.text
            if (el.kind not in TEXT_KINDS or not text or counts[text] > 1
                    or len(text) > 40 or y1 > h or y0 < 0 or x1 > w):
                continue
            total += 1
            result = perception.ground_text(image, text)
            point = result.point if isinstance(result, Grounded) else (
                result.candidates[0].box.center if isinstance(result, Ambiguous) else None)
            right += point is not None and inside(point, (x0, y0, x1, y1))
    print(f"\ntext grounding on sim screens: {right}/{total}")
    assert total >= 20 and right >= 0.9 * total


def test_icon_grounding_on_sim_screens(sim_frames: list[tuple[Any, list[Any]]]) -> None:
    perception = Perception()
    right = wrong = judged = 0
    for image, elements in sim_frames:
        for el in elements:
            if el.kind not in {"icon_button", "icon", "fab"} or not el.desc:
                continue
            result = perception.ground_icon(image, el.desc)
            assert isinstance(result, Grounded | Ambiguous | NotFound)
            if isinstance(result, Grounded):
                judged += 1
                ok = inside(result.point, el.bbox, slack=8)
                right += ok
                wrong += not ok
    print(f"\nicon grounding on sim screens: {judged} confident picks, {right} right, {wrong} wrong")
    assert right >= 3 * wrong
