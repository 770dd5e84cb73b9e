"""The real rendered phone (sim.phone.SimPhone) behind the ADB side, through adb + adbutils.

Only the sim.phone_api.Phone contract is assumed here, so these checks hold whatever apps
the phone side ships. Skipped, with the reason, while sim.phone cannot be imported.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from PIL import Image, ImageChops

from sim.fleet import SimFleet
from tests.fixtures.adb import AdbServer, import_sim_phone

LAUNCHER_HINTS = ("launcher", "home")


def _body(img: Image.Image) -> Image.Image:
    """The screen without the status bar (its clock ticks) and the navigation bar."""
    w, h = img.size
    return img.convert("RGB").crop((0, h // 10, w, h - h // 10))


def _same(a: Image.Image, b: Image.Image) -> bool:
    return ImageChops.difference(_body(a), _body(b)).getbbox() is None


@pytest.fixture(scope="module")
def fleet(adb_server: AdbServer) -> Iterator[SimFleet]:
    import_sim_phone()
    with SimFleet(8, adb_port=adb_server.port) as f:
        yield f


def _apps(fleet: SimFleet, serial: str) -> list[str]:
    # The apps with a launcher activity (the listing also has system packages, as on a phone)
    apps = set(fleet.phone(serial).packages())
    installed = [p for p in fleet.device(serial).list_packages() if p in apps]
    return [p for p in installed if not any(h in p for h in LAUNCHER_HINTS)
            and "inputmethod" not in p and "adbkeyboard" not in p]


def test_screenshot_through_adb_is_the_phone_screen(fleet: SimFleet) -> None:
    serial = fleet.serials[0]
    phone = fleet.phone(serial)
    got = fleet.device(serial).screenshot(error_ok=False)
    assert got.size == (phone.info.width, phone.info.height)
    assert _same(got, phone.screenshot())
    # As on a phone, `pm list packages` lists the system packages besides the apps.
    listed = set(fleet.device(serial).list_packages())
    assert set(phone.packages()) <= listed and "android" in listed


def test_app_start_current_and_home(fleet: SimFleet) -> None:
    serial = fleet.serials[1]
    d = fleet.device(serial)
    d.keyevent("KEYCODE_HOME")
    home = d.screenshot()
    apps = _apps(fleet, serial)
    assert len(apps) >= 3, apps
    for pkg in apps[:3]:
        d.app_start(pkg)
        assert d.app_current().package == pkg
        assert fleet.phone(serial).focused_window().startswith(pkg + "/")
        assert not _same(d.screenshot(), home), f"starting {pkg} did not change the screen"
        d.keyevent("KEYCODE_HOME")
        assert _same(d.screenshot(), home)
    d.app_start(apps[0])
    d.app_stop(apps[0])
    d.keyevent(3)
    assert d.app_current().package != apps[0]


def test_input_changes_the_next_screenshot(fleet: SimFleet) -> None:
    serial = fleet.serials[2]
    d = fleet.device(serial)
    d.keyevent("HOME")
    w, h = d.window_size()
    before = d.screenshot()
    d.swipe(w // 2, int(h * 0.8), w // 2, int(h * 0.2), 0.2)  # up: the app drawer opens
    after_swipe = d.screenshot()
    d.click(w // 2, h // 2)
    after_tap = d.screenshot()
    assert not (_same(before, after_swipe) and _same(after_swipe, after_tap)), \
        "neither a swipe nor a tap changed the launcher"


def test_eight_real_phones_no_cross_talk(fleet: SimFleet) -> None:
    serials = fleet.serials
    assert len(serials) == 8
    apps = _apps(fleet, serials[0])

    def work(i: int) -> tuple[str, Image.Image]:
        d = fleet.device(serials[i])
        d.keyevent("HOME")
        pkg = apps[i % len(apps)]
        d.app_start(pkg)
        return d.app_current().package, d.screenshot()

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(8)))
    for i, (current, shot) in enumerate(results):
        assert current == apps[i % len(apps)]
        assert _same(shot, fleet.phone(serials[i]).screenshot())


def _centre(phone: Any, **query: Any) -> tuple[int, int]:
    """Where to tap, from the phone's ground truth (the test API; the agent has no such thing)."""
    found = phone.find(**query)
    assert found, f"nothing on screen matches {query}: {phone.current_screen()}"
    x, y = found[-1].center
    return int(x), int(y)


def test_notes_flow_through_adb(fleet: SimFleet) -> None:
    """Tap, type (input text and the ADB Keyboard), BACK and Save through adb; the effects
    land in the app's state and in the next screenshot."""
    serial = fleet.serials[3]
    phone: Any = fleet.phone(serial)
    d = fleet.device(serial)
    d.app_start("com.mobagent.notes")
    phone.settle()
    assert phone.current_screen() == "com.mobagent.notes/main"
    before = d.screenshot()
    d.click(*_centre(phone, kind="fab"))
    assert phone.current_screen() == "com.mobagent.notes/edit"
    d.click(*_centre(phone, id="title"))
    assert phone.keyboard_visible() and phone.focused_field() == "title"
    hostile = "Buy%smilk;rm -rf / $(reboot)"
    d.send_keys(hostile)
    notes = phone.state("com.mobagent.notes")
    assert notes.draft_title == "Buy milk;rm -rf / $(reboot)"
    with_keyboard = d.screenshot()
    assert not _same(with_keyboard, before)
    d.shell(["ime", "set", "com.android.adbkeyboard/.AdbIME"])
    d.click(*_centre(phone, id="body"))
    text = "中文 😀 שלום %s"
    d.shell(["am", "broadcast", "-a", "ADB_INPUT_TEXT", "--es", "msg", text])
    assert notes.draft_body == text
    d.keyevent("KEYCODE_BACK")  # closes the keyboard first, the screen stays
    assert not phone.keyboard_visible() and phone.current_screen() == "com.mobagent.notes/edit"
    d.click(*_centre(phone, text="Save", kind="button"))
    assert phone.current_screen() == "com.mobagent.notes/main"
    assert (notes.notes[-1].title, notes.notes[-1].body) == ("Buy milk;rm -rf / $(reboot)", text)
    default_ime = phone.imes()[0]
    assert d.shell2(["ime", "set", default_ime], v2=True).returncode == 0
    assert phone.current_ime() == default_ime
    assert phone.crashes == []


def test_frozen_phone_ignores_adb_input(fleet: SimFleet) -> None:
    serial = fleet.serials[4]
    phone: Any = fleet.phone(serial)
    d = fleet.device(serial)
    d.keyevent("HOME")
    home = d.screenshot()
    phone.faults.frozen = True
    try:
        d.app_start("com.mobagent.notes")
        d.click(*_centre(phone, kind="app_icon"))
        assert d.shell2("input keyevent 4", v2=True).returncode == 0  # accepted, ignored
        assert phone.current_screen() == "launcher" and _same(d.screenshot(), home)
    finally:
        phone.faults.frozen = False
    d.app_start("com.mobagent.notes")
    assert d.app_current().package == "com.mobagent.notes"
