"""Small state predicates and set-up helpers shared by the Mobile-Eval tasks.

Everything here reads or seeds app state through SimPhone's test API; nothing looks at
pixels. Predicates are built as closures so that milestones can hold them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sim.eval.task import norm_text
from sim.phone.apps.notes import PACKAGE as NOTES
from sim.phone.apps.notes import Note, NotesState

if TYPE_CHECKING:
    from sim.phone import SimPhone

Check = Callable[["SimPhone"], bool]
HOME_KEY = 3


def fresh_start(phone: SimPhone) -> None:
    """Every app back to its seeded state, no app running, on the launcher's first page.

    A phone reused between episodes then starts each task the same way a new one does, also
    the launch pop-ups and spinners (perturbations that belong to the phone, dark theme and
    font scale, are kept).
    """
    phone.forget_launches()
    for app in phone.apps():
        phone.force_stop(app.package)
        phone.set_state(app.package, app.new_state(phone.seed))
    phone.system.dark_mode = phone.perturbation.dark_theme
    phone.system.font_scale = phone.perturbation.font_scale
    phone.key(HOME_KEY)
    phone.key(HOME_KEY)  # HOME on the launcher: page 1
    phone.settle()


def in_app(package: str) -> Check:
    return lambda phone: phone.foreground() == package


def on_screen(package: str, *screens: str) -> Check:
    names = {f"{package}/{s}" for s in screens}
    return lambda phone: phone.current_screen() in names


def field_focused(package: str, field_id: str) -> Check:
    return lambda phone: phone.foreground() == package and phone.focused_field() == field_id


def state_of(phone: SimPhone, package: str) -> Any:
    return phone.state(package)


def mentions(text: str, *words: str) -> bool:
    """Every word/phrase appears in text, ignoring case and punctuation."""
    t = norm_text(text)
    return all(norm_text(w) in t for w in words)


def same_text(a: str, b: str) -> bool:
    return norm_text(a) == norm_text(b)


# --- Notes --------------------------------------------------------------------------------


def notes_snapshot(phone: SimPhone) -> list[Note]:
    st = phone.state_as(NOTES, NotesState)
    return [Note(n.title, n.body) for n in st.notes]


def new_notes(phone: SimPhone, before: list[Note]) -> list[Note]:
    """Notes added since set-up. Notes appends a new note at the end, so these are the ones
    past the initial count; an existing note that was edited is not new (a task that says
    "create a new note" is not done by overwriting the shopping list)."""
    return list(phone.state_as(NOTES, NotesState).notes[len(before):])


def note_text(n: Note) -> str:
    return f"{n.title}\n{n.body}"


def notes_editor_has(pattern: str) -> Check:
    """The open Notes editor's draft (title or body) matches a regex on normalised text."""
    rx = re.compile(pattern)

    def check(phone: SimPhone) -> bool:
        st = phone.state_as(NOTES, NotesState)
        return phone.current_screen() == f"{NOTES}/edit" and bool(
            rx.search(norm_text(f"{st.draft_title} {st.draft_body}")))
    return check


# --- reference solutions -------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def scrolls_to_show(seed: int, package: str, screen: str | None, text: str,
                    after_downs: int = 0, limit: int = 6) -> int:
    """How many ``Page down``s (negative: ``Page up``s) the seed's phone needs before ``text``
    is on the screen, starting ``after_downs`` page downs from the top of the screen.

    A seed shuffles lists and scales fonts, so a row on the first screen of seed 0 may be
    below the fold on another seed; a reference solution scrolls as a person would. Measured
    on a phone of the default size (the benchmark's), swiping the way the actuator does; a
    row counts as shown when the navigation bar cuts none of it (OCR reads it whole).
    """
    from sim.phone import SimPhone
    from sim.phone.systemui import NAV_DP
    from sim.phone.theme import Metrics
    from sim.phone_api import DeviceInfo

    def page(phone: SimPhone, down: bool) -> None:
        w, h = phone.info.width, phone.info.height
        y1, y2 = (int(h * 0.7), int(h * 0.3)) if down else (int(h * 0.3), int(h * 0.7))
        phone.swipe(w // 2, y1, w // 2, y2, 300)

    for step in (1, -1):
        phone = SimPhone(DeviceInfo("reference"), seed=seed)
        phone.open(package, screen)
        bottom = phone.info.height - Metrics(phone.info.density).dp(NAV_DP)
        for _ in range(after_downs):
            page(phone, True)
        for n in range(limit + 1):
            if any(el.bbox[3] < bottom - 1 for el in phone.find(text)):
                return n * step
            page(phone, step > 0)
    raise ValueError(f"{text!r} is not on {package}/{screen} within {limit} pages (seed {seed})")


def page_downs_to_show(seed: int, package: str, screen: str | None, text: str) -> int:
    """``scrolls_to_show`` from the top of the screen (never negative there)."""
    return scrolls_to_show(seed, package, screen, text)
