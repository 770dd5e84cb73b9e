"""The phone's framework behaviour, on a small demo app registered for the test:
keyboard and focus, BACK order, HOME, scrolling, dialogs, crashes, frozen fault."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from PIL import ImageChops

import sim.phone.apps
from sim.phone import ADB_KEYBOARD, App, Ctx, Screen, SimPhone
from sim.phone.apps import notes
from sim.phone.system import Perturbation
from sim.phone.widgets import Button, Dialog, Fab, IconButton, ListItem, TextField, bind
from sim.phone_api import DeviceInfo

DEMO = "com.test.demo"


@dataclass
class DemoState:
    text: str = ""
    note: str = ""
    taps: list[int] = field(default_factory=list)
    long_presses: int = 0
    dialog: bool = False
    submitted: list[str] = field(default_factory=list)
    last: str = ""


def demo_main(ctx: Ctx[DemoState]) -> Screen:
    s = ctx.state

    def set_text(v: str) -> None:
        s.text = v

    def set_note(v: str) -> None:
        s.note = v

    def set_last(v: str) -> None:
        s.last = v

    def submit() -> None:
        s.submitted.append(s.text)

    def long() -> None:
        s.long_presses += 1

    def close() -> None:
        s.dialog = False

    def crash() -> None:
        s.taps.append(1 // len(s.note))  # the note is empty: ZeroDivisionError

    dialog = None
    if s.dialog:
        dialog = Dialog("Rename", "Give it a new name.", (("Cancel", close), ("OK", close)), close,
                        body=[TextField("note", s.note, set_note, hint="Name")])
    return Screen(
        title="Demo",
        actions=[IconButton("more_vert", desc="More options")],
        body=[
            TextField("text", s.text, set_text, hint="Type here", on_submit=submit),
            Button("Open dialog", lambda: setattr(s, "dialog", True)),
            Button("Crash", crash),
            Button("Details", lambda: ctx.go("details", n=7)),
            *[ListItem(f"Row {i}", subtitle="an item", icon="label", on_tap=bind(s.taps.append, i),
                       on_long_press=long if i == 0 else None) for i in range(40)],
            TextField("last", s.last, set_last, hint="The last field"),
        ],
        fab=Fab("add", lambda: ctx.go("details", n=1), desc="Add"),
        dialog=dialog,
    )


def demo_details(ctx: Ctx[DemoState]) -> Screen:
    return Screen(title=f"Details {ctx.params['n']}", back=True)


DEMO_APP: App[DemoState] = App(package=DEMO, label="Demo", icon="science", color="#188038",
                               state=DemoState, screens={"main": demo_main, "details": demo_details},
                               activities={".DetailsActivity": "details"})


@pytest.fixture
def phone(monkeypatch: pytest.MonkeyPatch) -> SimPhone:
    monkeypatch.setattr(sim.phone.apps, "APPS", [*sim.phone.apps.APPS, DEMO_APP])
    p = SimPhone(DeviceInfo("demo"), seed=0)
    p.launch(DEMO)
    return p


def demo(p: SimPhone) -> DemoState:
    return p.state_as(DEMO, DemoState)


def one(p: SimPhone, text: str | None = None, **kw: Any) -> Any:
    found = p.find(text, **kw)
    assert len(found) == 1, (text, kw, found)
    return found[0]


def same(a: Any, b: Any) -> bool:
    return ImageChops.difference(a, b).getbbox() is None


def test_tap_focuses_field_and_shows_keyboard(phone: SimPhone) -> None:
    before = phone.screenshot()
    assert not phone.keyboard_visible()
    assert not phone.find(kind="key")
    phone.tap_element(one(phone, id="text"))
    assert phone.keyboard_visible() and phone.focused_field() == "text"
    keys = phone.find(kind="key")
    assert {k.text for k in keys} >= set("qwertyuiop")
    assert min(k.bbox[1] for k in keys) > phone.info.height // 2  # the keyboard takes the bottom
    assert not same(before, phone.screenshot())
    phone.type_text("héllo wörld ✓")
    assert demo(phone).text == "héllo wörld ✓"
    phone.key(67)
    assert demo(phone).text == "héllo wörld "
    phone.tap_element(one(phone, "q", kind="key"))
    assert demo(phone).text == "héllo wörld q"
    phone.key(66)
    assert demo(phone).submitted == ["héllo wörld q"]


def action_key(p: SimPhone) -> Any:
    keys = [k for k in p.find(kind="key") if k.desc == "Enter"]
    assert len(keys) == 1, keys
    return keys[0]


def test_the_keyboards_action_key_does_the_fields_editor_action(phone: SimPhone) -> None:
    # A field that submits: the drawn key submits it, as Gboard's action key does.
    phone.tap_element(one(phone, id="text"))
    phone.type_text("find me")
    key = action_key(phone)
    assert key.icon == "keyboard_return" and key.clickable
    phone.tap_element(key)
    assert demo(phone).submitted == ["find me"]
    # A plain single-line field: the key is Done (a check mark) and hides the keyboard;
    # the text stays, nothing is submitted.
    phone.key(4)  # BACK: the keyboard goes
    phone.tap_element(one(phone, "Open dialog"))
    phone.tap_element(one(phone, id="note"))
    phone.type_text("the end")
    key = action_key(phone)
    assert key.icon == "done"
    phone.tap_element(key)
    assert not phone.keyboard_visible() and not phone.find(kind="key")
    assert demo(phone).note == "the end" and demo(phone).submitted == ["find me"]
    assert phone.dialog_visible()  # Done is not BACK: the dialog stays
    # The ENTER key event on that field is not the IME's action: the keyboard stays.
    phone.tap_element(one(phone, id="note"))
    phone.key(66)
    assert phone.keyboard_visible() and demo(phone).note == "the end"


def test_type_without_focus_types_nothing(phone: SimPhone) -> None:
    before = phone.screenshot()
    phone.type_text("nobody listens")
    assert demo(phone).text == "" and demo(phone).note == ""
    assert same(before, phone.screenshot())


def test_unicode_arrives_intact(phone: SimPhone) -> None:
    phone.set_ime(ADB_KEYBOARD)
    phone.tap_element(one(phone, id="text"))
    assert one(phone, "ADB Keyboard {ON}", kind="keyboard")
    for s in ("你好，世界", "😀👍🏽", "مرحبا بالعالم", "a;rm -rf /", "%s 'quoted' \"x\""):
        demo(phone).text = ""
        phone.type_text(s)
        assert demo(phone).text == s
        phone.screenshot()  # any text draws (tofu at worst) without raising


def test_back_closes_keyboard_then_dialog_then_screen(phone: SimPhone) -> None:
    phone.tap_element(one(phone, "Details"))
    assert phone.current_screen() == f"{DEMO}/details"
    assert phone.screen_params() == {"n": 7}
    phone.key(4)
    assert phone.current_screen() == f"{DEMO}/main"
    phone.tap_element(one(phone, "Open dialog"))
    assert phone.dialog_visible()
    phone.tap_element(one(phone, id="note"))  # a field inside the dialog
    assert phone.keyboard_visible()
    phone.type_text("renamed")
    assert demo(phone).note == "renamed"
    phone.key(4)
    assert not phone.keyboard_visible() and phone.dialog_visible()
    phone.key(4)
    assert not phone.dialog_visible() and phone.current_screen() == f"{DEMO}/main"
    phone.key(4)
    assert phone.current_screen() == "launcher"


def test_dialog_is_modal(phone: SimPhone) -> None:
    phone.tap_element(one(phone, "Open dialog"))
    row = phone.find("Row 1", kind="list_item")[0]
    assert not row.clickable  # seen under the scrim, but not tappable
    phone.tap(*one(phone, "Rename", kind="title").center)  # inside the dialog: nothing
    assert phone.dialog_visible()
    phone.tap(row.center[0], phone.info.height - phone.info.height // 5)  # outside: dismisses
    assert not phone.dialog_visible() and demo(phone).taps == []


def test_home_goes_to_launcher_and_launch_resumes(phone: SimPhone) -> None:
    phone.tap_element(one(phone, kind="fab"))
    assert phone.current_screen() == f"{DEMO}/details"
    assert phone.focused_window() == f"{DEMO}/{DEMO}.DetailsActivity"
    phone.key(3)
    assert phone.current_screen() == "launcher" and phone.foreground() == "com.android.launcher3"
    assert phone.focused_window().startswith("com.android.launcher3/")
    phone.launch(DEMO)
    assert phone.current_screen() == f"{DEMO}/details"  # the task was kept
    phone.force_stop(DEMO)
    assert phone.current_screen() == "launcher"
    phone.launch(DEMO)
    assert phone.current_screen() == f"{DEMO}/main"
    assert phone.focused_window() == f"{DEMO}/{DEMO}.MainActivity"


def test_start_activity(phone: SimPhone) -> None:
    assert phone.start_activity(f"{DEMO}/.DetailsActivity") is None
    assert phone.current_screen() == f"{DEMO}/details"
    assert phone.start_activity(f"{DEMO}/{DEMO}.MainActivity") is None
    assert phone.current_screen() == f"{DEMO}/main"
    err = phone.start_activity(f"{DEMO}/.Nope")
    assert err is not None and "does not exist" in err and f"{DEMO}.Nope" in err
    err = phone.start_activity("com.no.such/.Main")
    assert err is not None and "does not exist" in err
    assert phone.start_activity("garbage") is not None
    assert phone.launch("com.no.such") is False
    assert phone.launch(DEMO) is True


def test_long_list_scrolls(phone: SimPhone) -> None:
    assert not phone.find("Row 39")
    w, h = phone.info.width, phone.info.height
    for _ in range(10):
        phone.swipe(w // 2, h * 3 // 4, w // 2, h // 4, 300)
    row = one(phone, "Row 39", kind="list_item")
    assert not phone.find(id="text")  # scrolled out of view at the top
    phone.tap_element(row)
    assert demo(phone).taps == [39]
    for _ in range(10):
        phone.swipe(w // 2, h // 4, w // 2, h * 3 // 4, 300)
    assert phone.find(id="text")


def test_long_press(phone: SimPhone) -> None:
    row = one(phone, "Row 0", kind="list_item")
    x, y = row.center
    phone.long_press(x, y, 800)
    assert demo(phone).long_presses == 1 and demo(phone).taps == []
    phone.swipe(x, y, x, y, 900)  # `input swipe` on one spot, held: a long press
    assert demo(phone).long_presses == 2
    phone.swipe(x, y, x, y, 50)  # short: a tap
    assert demo(phone).taps == [0]


def test_app_crash_does_not_kill_the_phone(phone: SimPhone) -> None:
    phone.tap_element(one(phone, "Crash"))
    assert phone.current_screen() == "launcher"
    assert len(phone.crashes) == 1 and "ZeroDivisionError" in phone.crashes[0]
    assert phone.find("Demo keeps stopping", kind="toast")
    phone.launch(DEMO)
    assert phone.current_screen() == f"{DEMO}/main"


def test_frozen_accepts_input_but_nothing_changes(phone: SimPhone) -> None:
    t = [0.0]
    phone.clock = lambda: t[0]
    phone.tap_element(one(phone, "Crash"))  # a toast ("keeps stopping") that times out...
    phone.launch(DEMO)
    phone.nav_toast("a toast that will time out")
    before = phone.screenshot()
    phone.faults.frozen = True
    t[0] += 60  # ...but a frozen screen does not change, even on a timer
    phone.tap_element(one(phone, kind="fab"))
    phone.tap_element(one(phone, id="text"))
    phone.type_text("x")
    phone.swipe(500, 1800, 500, 400, 200)
    phone.key(3)
    phone.key(4)
    assert phone.launch(notes.PACKAGE) is True
    assert phone.current_screen() == f"{DEMO}/main"
    assert demo(phone).text == ""
    assert same(before, phone.screenshot())
    phone.faults.frozen = False
    assert not same(before, phone.screenshot())  # the toast has gone
    phone.tap_element(one(phone, kind="fab"))
    assert phone.current_screen() == f"{DEMO}/details"


def test_loading_spinner_ignores_taps(phone: SimPhone) -> None:
    t = [100.0]
    phone.clock = lambda: t[0]
    phone.force_stop(DEMO)
    phone.perturbation = Perturbation(seed=9, loading_chance=1.0, loading_s=0.5)
    phone.launch(DEMO)
    assert phone.loading() and phone.find(kind="progress")
    fab_at = (phone.info.width - 100, phone.info.height - 300)
    phone.tap(*fab_at)
    assert phone.current_screen() == f"{DEMO}/main"
    t[0] += 0.6
    assert not phone.loading() and not phone.find(kind="progress")
    phone.tap_element(one(phone, kind="fab"))
    assert phone.current_screen() == f"{DEMO}/details"


def test_popup_dialog_on_launch(phone: SimPhone) -> None:
    phone.force_stop(DEMO)
    phone.perturbation = Perturbation(seed=9, popup_chance=1.0)
    phone.launch(DEMO)
    assert phone.dialog_visible()
    titles = [e.text for e in phone.find(kind="title")]
    assert any("Demo" in t for t in titles), titles
    phone.key(4)
    assert not phone.dialog_visible() and phone.current_screen() == f"{DEMO}/main"


def test_imes(phone: SimPhone) -> None:
    assert ADB_KEYBOARD in phone.imes() and phone.current_ime() != ADB_KEYBOARD
    assert phone.set_ime(ADB_KEYBOARD) and phone.current_ime() == ADB_KEYBOARD
    assert not phone.set_ime("com.no.such/.Ime")
    assert "com.android.adbkeyboard" in phone.packages()


def test_test_api_rejects_bad_input(phone: SimPhone) -> None:
    from sim.phone import PhoneError
    with pytest.raises(PhoneError):
        phone.state("com.no.such")
    with pytest.raises(PhoneError):
        phone.set_state(DEMO, "not a DemoState")
    with pytest.raises(PhoneError):
        phone.open(DEMO, "nowhere")
    with pytest.raises(ValueError):
        SimPhone(DeviceInfo("x", width=10, height=10))
    with pytest.raises(ValueError):
        SimPhone(DeviceInfo("x"), seed=-1)
    with pytest.raises(ValueError):
        App(package="nodots", label="x", icon="add", state=DemoState, screens={"main": demo_main})


def test_focusing_a_low_field_scrolls_it_above_the_keyboard(phone: SimPhone) -> None:
    w, h = phone.info.width, phone.info.height
    for _ in range(10):
        phone.swipe(w // 2, h * 3 // 4, w // 2, h // 4, 300)
    last = one(phone, id="last")
    assert last.bbox[3] > h // 2  # at the bottom: where the keyboard will come up
    full_height = last.bbox[3] - last.bbox[1]
    phone.tap_element(last)
    assert phone.focused_field() == "last"
    shown = one(phone, id="last")
    assert shown.bbox[3] - shown.bbox[1] == full_height  # not cut by the keyboard
    assert shown.bbox[3] <= min(k.bbox[1] for k in phone.find(kind="key"))
    phone.type_text("at the end")
    assert demo(phone).last == "at the end"


def test_threads_share_one_phone_safely(phone: SimPhone) -> None:
    """The ADB side calls in from several server threads at once."""
    from concurrent.futures import ThreadPoolExecutor

    w, h = phone.info.width, phone.info.height

    def work(i: int) -> tuple[int, int]:
        for j in range(15):
            (phone.tap(w // 2, h // 3 + j * 40) if i % 3 == 0 else
             phone.swipe(w // 2, h * 3 // 4, w // 2, h // 4, 100) if i % 3 == 1 else phone.key(4))
            img = phone.screenshot()
            phone.elements()
        return img.size

    with ThreadPoolExecutor(6) as pool:
        sizes = set(pool.map(work, range(6)))
    assert sizes == {(w, h)}
    assert phone.crashes == []
