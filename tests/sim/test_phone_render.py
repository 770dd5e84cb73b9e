"""What the phone draws: size and mode, real anti-aliased text and icon glyphs, the frame
cache, system bars, and the gallery script."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image, ImageChops

from sim.gallery import main as gallery_main
from sim.gallery import make_gallery
from sim.phone import SimPhone
from sim.phone.apps import notes
from sim.phone.canvas import Element
from sim.phone.fonts import icon_char, icon_codepoints
from sim.phone_api import DeviceInfo


def crop(img: Image.Image, el: Element) -> Image.Image:
    return img.crop(el.bbox).convert("L")


def grey_levels(img: Image.Image) -> int:
    colors = img.getcolors(256)
    assert colors is not None
    return len(colors)


@pytest.mark.parametrize(("w", "h", "dpi"), [(1080, 2400, 420), (720, 1600, 320)])
def test_screenshot_size_and_mode(w: int, h: int, dpi: int) -> None:
    p = SimPhone(DeviceInfo("r", width=w, height=h, density=dpi))
    for pkg in (None, notes.PACKAGE):
        if pkg:
            p.launch(pkg)
        img = p.screenshot()
        assert img.size == (w, h) and img.mode == "RGB"
        for el in p.elements():  # every element lies on the screen
            x0, y0, x1, y1 = el.bbox
            assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h, el


def test_text_is_antialiased_truetype() -> None:
    p = SimPhone(DeviceInfo("r"))
    p.launch(notes.PACKAGE)
    img = p.screenshot()
    title = p.find("Notes", kind="title")[0]
    patch = crop(img, title)
    assert grey_levels(patch) > 8  # anti-aliased edges, not a 1-bit bitmap font
    assert 40 <= title.bbox[3] - title.bbox[1] <= 120  # 22 sp at 420 dpi is ~60 px
    dark = sum(patch.histogram()[:128])
    assert 0.05 < dark / (patch.width * patch.height) < 0.6  # glyph strokes, not a filled block


def test_icons_are_glyphs_by_name() -> None:
    assert len(icon_codepoints()) > 2000
    assert icon_char("search") != icon_char("add")
    with pytest.raises(ValueError):
        icon_char("no_such_icon_name")
    p = SimPhone(DeviceInfo("r"))
    p.launch(notes.PACKAGE)
    img = p.screenshot()
    fab = p.find(kind="fab")[0]
    assert fab.icon == "add" and fab.desc == "New note"
    x0, y0, x1, y1 = fab.bbox
    s = (x1 - x0) // 4  # the middle of the button: the plus glyph on its container
    patch = img.crop((x0 + s, y0 + s, x1 - s, y1 - s)).convert("L")
    lo, hi = patch.getextrema()
    assert isinstance(lo, int) and isinstance(hi, int)
    assert grey_levels(patch) > 4 and hi - lo > 60
    more = p.find(icon="more_vert")[0]
    assert more.kind == "icon_button" and more.desc == "More options"


def test_frame_is_cached_until_something_changes() -> None:
    p = SimPhone(DeviceInfo("r"))
    a = p.screenshot()
    assert p.screenshot() is a  # nothing changed: the same frame
    p.launch(notes.PACKAGE)
    b = p.screenshot()
    assert b is not a and ImageChops.difference(a, b).getbbox() is not None
    p.state_as(notes.PACKAGE, notes.NotesState).notes.append(notes.Note("Seeded by a test"))
    assert p.find("Seeded by a test", kind="list_item")
    assert ImageChops.difference(b, p.screenshot()).getbbox() is not None


def test_status_and_navigation_bars() -> None:
    p = SimPhone(DeviceInfo("r"))
    p.launch(notes.PACKAGE)
    status = p.find(kind="status")
    assert any(e.desc == "Clock" and e.text == p.now.strftime("%H:%M") for e in status)
    assert any(e.desc == "Battery" and e.text.endswith("%") for e in status)
    assert {e.icon for e in status} >= {"wifi", "signal_cellular_alt"}
    nav = {e.desc: e for e in p.find(kind="nav_button")}
    assert set(nav) == {"Back", "Home", "Overview"}
    assert all(e.bbox[1] > p.info.height * 0.9 for e in nav.values())
    p.tap_element(nav["Home"])
    assert p.current_screen() == "launcher"


def test_gallery_writes_every_screen(tmp_path: Path) -> None:
    written, failed = make_gallery(tmp_path, scale=0.25, packages=[notes.PACKAGE])
    names = {f.name for f in written}
    assert {"notes_main.png", "notes_edit.png", "notes_search.png"} <= names
    assert failed == []
    with Image.open(tmp_path / "notes_main.png") as img:
        assert img.size == (270, 600)
    assert gallery_main(["--out", str(tmp_path), "--app", "com.no.such"]) == 2
