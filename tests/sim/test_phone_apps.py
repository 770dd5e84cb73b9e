"""The built-in apps' main flows (Notes, Settings, Chrome) and the launcher, in-process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image, ImageChops

from sim.phone import SimPhone, SystemSettings
from sim.phone.apps import chrome, notes
from sim.phone.apps.chrome import ChromeState, results_for
from sim.phone.apps.notes import Note, NotesState
from sim.phone.system import SETTINGS_PACKAGE
from sim.phone_api import DeviceInfo


@pytest.fixture
def phone() -> Iterator[SimPhone]:
    p = SimPhone(DeviceInfo("apps"), seed=0)
    yield p
    assert p.crashes == []


def one(p: SimPhone, text: str | None = None, **kw: Any) -> Any:
    found = p.find(text, **kw)
    assert len(found) == 1, (text, kw, [(e.kind, e.text) for e in p.elements()])
    return found[0]


def tap(p: SimPhone, text: str | None = None, **kw: Any) -> None:
    p.tap_element(one(p, text, **kw))


def open_from_launcher(p: SimPhone, label: str) -> None:
    """Swipe through launcher pages until the icon shows, then tap it."""
    p.key(3)
    w, h = p.info.width, p.info.height
    for _ in range(4):
        icons = p.find(label, kind="app_icon")
        if icons:
            p.tap_element(icons[0])
            return
        p.swipe(w * 9 // 10, h // 2, w // 10, h // 2, 200)
    raise AssertionError(f"no {label} icon on any launcher page")


def bg_luma(img: Image.Image) -> int:
    """The luma of the most common pixel value: the screen's background."""
    colors = img.convert("L").getcolors(256)
    assert colors is not None
    luma = max(colors)[1]
    assert isinstance(luma, int)
    return luma


def test_launcher_pages_and_dots() -> None:
    phone = SimPhone(DeviceInfo("apps"), seed=3)  # seed 3's home screens hold two pages
    phone.key(3)
    first = {e.text for e in phone.find(kind="app_icon")}
    assert one(phone, kind="page_indicator").text.startswith("Page 1 of ")
    shot = phone.screenshot()
    w, h = phone.info.width, phone.info.height
    phone.swipe(w * 9 // 10, h // 2, w // 10, h // 2, 200)
    assert phone.launcher_page == 1
    second = {e.text for e in phone.find(kind="app_icon")}
    assert second and not first & second
    assert ImageChops.difference(shot, phone.screenshot()).getbbox() is not None
    phone.swipe(w // 10, h // 2, w * 9 // 10, h // 2, 200)
    assert phone.launcher_page == 0
    phone.swipe(w * 9 // 10, h // 2, w // 10, h // 2, 200)
    phone.key(3)  # HOME on the launcher returns to the first page
    assert phone.launcher_page == 0
    labels = {a.label for a in phone.apps()}
    assert {"Notes", "Settings", "Chrome"} <= labels
    assert labels == first | second or len(labels) > len(first | second)


def test_launcher_icon_opens_app(phone: SimPhone) -> None:
    for label, pkg in (("Notes", notes.PACKAGE), ("Chrome", chrome.PACKAGE), ("Settings", SETTINGS_PACKAGE)):
        open_from_launcher(phone, label)
        assert phone.foreground() == pkg


def test_notes_new_note(phone: SimPhone) -> None:
    open_from_launcher(phone, "Notes")
    before = len(phone.state_as(notes.PACKAGE, NotesState).notes)
    tap(phone, kind="fab")
    assert phone.current_screen() == f"{notes.PACKAGE}/edit"
    tap(phone, id="title")
    phone.type_text("Groceries")
    tap(phone, id="body")
    assert phone.focused_field() == "body"
    phone.type_text("apples\npears")
    phone.key(4)  # hide the keyboard so that Save shows
    tap(phone, "Save", kind="button")
    st = phone.state_as(notes.PACKAGE, NotesState)
    assert len(st.notes) == before + 1
    assert st.notes[-1] == Note("Groceries", "apples\npears")
    assert phone.current_screen() == f"{notes.PACKAGE}/main"
    assert one(phone, "Groceries", kind="list_item")


def test_notes_save_icon_with_keyboard_up(phone: SimPhone) -> None:
    phone.launch(notes.PACKAGE)
    tap(phone, kind="fab")
    tap(phone, id="title")
    phone.type_text("Quick")
    assert phone.keyboard_visible()
    tap(phone, icon="check")  # the top bar's Save while typing: saves and leaves the editor
    assert phone.current_screen() == f"{notes.PACKAGE}/main" and not phone.keyboard_visible()
    assert phone.state_as(notes.PACKAGE, NotesState).notes[-1].title == "Quick"


def test_notes_back_discards_edit_and_delete_asks(phone: SimPhone) -> None:
    phone.set_state(notes.PACKAGE, NotesState(notes=[Note("Keep me", "x"), Note("Remove me", "y")]))
    phone.launch(notes.PACKAGE)
    tap(phone, "Keep me", kind="list_item")
    tap(phone, id="title")
    phone.type_text(" changed")
    phone.key(4)
    phone.key(4)  # leave without saving
    assert phone.state_as(notes.PACKAGE, NotesState).notes[0].title == "Keep me"
    tap(phone, "Remove me", kind="list_item")
    tap(phone, icon="delete")
    assert phone.dialog_visible()
    tap(phone, "Delete", kind="button")
    assert [n.title for n in phone.state_as(notes.PACKAGE, NotesState).notes] == ["Keep me"]


def test_settings_dark_mode_switches_theme(phone: SimPhone) -> None:
    phone.launch(SETTINGS_PACKAGE)
    light = phone.screenshot()
    tap(phone, "Display", kind="list_item")
    toggle = one(phone, "Dark mode", kind="toggle")
    assert toggle.checked is False
    phone.tap_element(toggle)
    assert phone.system.dark_mode is True
    assert one(phone, "Dark mode", kind="toggle").checked is True
    phone.key(4)
    assert bg_luma(phone.screenshot()) < 60 < bg_luma(light)


def test_settings_airplane_mode_shows_in_status_bar(phone: SimPhone) -> None:
    phone.launch(SETTINGS_PACKAGE)
    assert not phone.find(icon="airplanemode_active", kind="status")
    tap(phone, "Network & internet", kind="list_item")
    tap(phone, "Airplane mode", kind="toggle")
    assert phone.state_as(SETTINGS_PACKAGE, SystemSettings).airplane_mode
    assert one(phone, icon="airplanemode_active", kind="status")
    assert not phone.find(icon="wifi", kind="status")


def test_settings_network_speed_under_sub_page(phone: SimPhone) -> None:
    phone.launch(SETTINGS_PACKAGE)
    assert not phone.find("Network speed in status bar")
    tap(phone, "Notifications & status bar", kind="list_item")
    tap(phone, "Network speed in status bar", kind="toggle")
    assert phone.system.show_network_speed
    speed = [e for e in phone.find(kind="status") if e.desc == "Network speed"]
    assert len(speed) == 1 and speed[0].text.endswith("KB/s")


def test_settings_search_finds_a_toggle(phone: SimPhone) -> None:
    phone.launch(SETTINGS_PACKAGE)
    tap(phone, id="settings_search")
    assert phone.keyboard_visible()
    phone.type_text("dark")
    tap(phone, "Dark mode", kind="list_item")
    assert phone.current_screen() == f"{SETTINGS_PACKAGE}/display"
    tap(phone, "Dark mode", kind="toggle")
    assert phone.system.dark_mode
    phone.key(4)
    assert phone.current_screen() == f"{SETTINGS_PACKAGE}/main"  # the search was replaced


def test_settings_list_needs_scrolling(phone: SimPhone) -> None:
    phone.launch(SETTINGS_PACKAGE)
    assert not phone.find("About phone")
    w, h = phone.info.width, phone.info.height
    for _ in range(4):
        phone.swipe(w // 2, h * 3 // 4, w // 2, h // 4, 300)
    tap(phone, "About phone", kind="list_item")
    assert phone.current_screen() == f"{SETTINGS_PACKAGE}/about"


def test_chrome_search_results_and_open(phone: SimPhone) -> None:
    open_from_launcher(phone, "Chrome")
    tap(phone, id="ntp_search")
    assert phone.current_screen() == f"{chrome.PACKAGE}/search"
    assert phone.keyboard_visible()  # the omnibox opens focused
    phone.type_text("pet cat")
    phone.key(66)
    assert phone.current_screen() == f"{chrome.PACKAGE}/results"
    st = phone.state_as(chrome.PACKAGE, ChromeState)
    assert st.searches == ["pet cat"] and "q=pet+cat" in st.url
    expected = results_for("pet cat", 0)
    assert expected == results_for("pet cat", 0) and expected != results_for("dog", 0)
    title = one(phone, expected[0].title)
    phone.tap_element(title)
    assert phone.current_screen() == f"{chrome.PACKAGE}/page"
    assert st.url == expected[0].url and st.history[-1] == expected[0].url
    phone.key(4)
    assert phone.current_screen() == f"{chrome.PACKAGE}/results"


def test_chrome_menu_and_history(phone: SimPhone) -> None:
    phone.launch(chrome.PACKAGE)
    st = phone.state_as(chrome.PACKAGE, ChromeState)
    st.history = ["https://example.com/one", "https://example.com/two"]
    tap(phone, icon="more_vert")
    assert phone.dialog_visible()
    assert [e.text for e in phone.find(kind="menu_item")][:2] == ["New tab", "History"]
    phone.key(4)
    assert not phone.dialog_visible()
    tap(phone, icon="more_vert")
    tap(phone, "History", kind="menu_item")
    assert not phone.dialog_visible() and phone.current_screen() == f"{chrome.PACKAGE}/history"
    assert [e.text for e in phone.find(kind="list_item")] == ["example.com/two", "example.com/one"]
    tap(phone, "example.com/one", kind="list_item")
    assert phone.current_screen() == f"{chrome.PACKAGE}/page"
    assert st.url == "https://example.com/one"


def test_chrome_typing_a_url_opens_it(phone: SimPhone) -> None:
    phone.launch(chrome.PACKAGE)
    tap(phone, id="omnibox")
    phone.type_text("example.com/hello")
    phone.key(66)
    st = phone.state_as(chrome.PACKAGE, ChromeState)
    assert st.url == "https://example.com/hello"
    assert one(phone, "Hello", kind="text")


def test_every_screen_of_every_app_lays_out() -> None:
    """Each registered app screen opens (with its example params) without crashing."""
    for app in SimPhone(DeviceInfo("probe")).apps():
        for screen in app.screens:
            p = SimPhone(DeviceInfo("s"), seed=0)
            p.open(app.package, screen, **app.examples.get(screen, {}))
            p.elements()
            if p.crashes and screen not in app.examples and "KeyError" in p.crashes[0]:
                continue  # a screen that needs params the app gives no example for
            assert p.crashes == [], p.crashes
