"""Chrome, Gmail, Google Maps, Notes and Settings tasks."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from protocol.operations import ClickIcon, ClickText, OpenApp, PageDown, TypeText
from sim.eval.checks import (
    Check,
    field_focused,
    fresh_start,
    in_app,
    mentions,
    new_notes,
    note_text,
    notes_editor_has,
    notes_snapshot,
    on_screen,
    page_downs_to_show,
)
from sim.eval.task import Milestone, Task, norm_text
from sim.phone.apps import chrome, gmail, maps, notes
from sim.phone.apps.chrome import ChromeState
from sim.phone.apps.gmail import GmailState
from sim.phone.apps.maps import MapsState
from sim.phone.apps.notes import Note

if TYPE_CHECKING:
    from sim.phone import SimPhone

# --- Chrome ---------------------------------------------------------------------------------

CHROME = chrome.PACKAGE
LAKERS_QUERY = "Lakers game"  # typed; the reference then taps the suggestion "... today"
LAKERS_SUGGESTION = "Lakers game today"


def _chrome(phone: SimPhone) -> ChromeState:
    return phone.state_as(CHROME, ChromeState)


def chrome_searched(*words: str) -> Check:
    return lambda phone: any(mentions(q, *words) for q in _chrome(phone).searches)


def opened_result_after_search(*words: str) -> Check:
    """A result page (not a search page) was opened after a matching search."""
    def check(phone: SimPhone) -> bool:
        hist = _chrome(phone).history
        for i, url in enumerate(hist):
            if url.startswith(chrome.SEARCH_URL) and mentions(url[len(chrome.SEARCH_URL):]
                                                              .replace("+", " "), *words):
                if any(not u.startswith(chrome.SEARCH_URL) for u in hist[i + 1:]):
                    return True
        return False
    return check


def chrome_search_steps(typed: str, tap: str) -> list[Milestone]:
    return [
        Milestone("Chrome open", in_app(CHROME), (OpenApp("Chrome"),)),
        Milestone("search box focused", field_focused(CHROME, "omnibox_edit"),
                  (ClickText("Search Google or type URL"),)),
        Milestone("searched", chrome_searched(*typed.split()), (TypeText(typed), ClickText(tap))),
    ]


def short_result_title(query: str, seed: int) -> str:
    """A result title short enough to fit on one line, for the reference to tap."""
    titles = [r.title for r in chrome.results_for(query, seed)]
    return min(titles, key=len)


class ChromeLakers(Task):
    app, tier = "Chrome", 1

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def is_successful(self, phone: SimPhone) -> bool:
        return chrome_searched("lakers")(phone)

    def milestones(self) -> Sequence[Milestone]:
        return chrome_search_steps(LAKERS_QUERY, LAKERS_SUGGESTION)


class ChromeTaylorSwift(Task):
    app, tier = "Chrome", 2

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def is_successful(self, phone: SimPhone) -> bool:
        return chrome_searched("taylor swift")(phone)

    def milestones(self) -> Sequence[Milestone]:
        return chrome_search_steps("Taylor Swift", "Taylor Swift")


class ChromeLakersResult(Task):
    """The abstract version: find the game's result, i.e. search and open a result page."""

    app, tier = "Chrome", 3

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def is_successful(self, phone: SimPhone) -> bool:
        return opened_result_after_search("lakers")(phone)

    def milestones(self) -> Sequence[Milestone]:
        title = short_result_title(LAKERS_SUGGESTION, self.seed)
        return [*chrome_search_steps(LAKERS_QUERY, LAKERS_SUGGESTION),
                Milestone("a result opened", opened_result_after_search("lakers"), (ClickText(title),))]


# --- Gmail ----------------------------------------------------------------------------------

GMAIL = gmail.PACKAGE
FRIENDS = ("alex.chen@example.com", "maria.garcia@example.com", "li.wei@example.com",
           "sam.taylor@example.com", "jordan.lee@example.com", "kim.park@example.com")
WORK_SUBJECT = "My new work"
WORK_BODY = "Hi! I have started a new job as a software engineer. I will tell you more soon."


def _gmail(phone: SimPhone) -> GmailState:
    return phone.state_as(GMAIL, GmailState)


def sent_to(address: str, empty: bool | None) -> Check:
    """A mail to address was sent; empty=True: no subject and no body; False: about work."""
    def check(phone: SimPhone) -> bool:
        for m in _gmail(phone).sent:
            if m.to.strip().lower() != address.lower():
                continue
            text = f"{m.subject} {m.body}"
            if empty is None or (empty and not text.strip()):
                return True
            if empty is False and re.search(r"\b(work|job|position|role)\b", norm_text(text)):
                return True
        return False
    return check


def draft_to(address: str) -> Check:
    def check(phone: SimPhone) -> bool:
        d = _gmail(phone).draft
        return d is not None and d.to.strip().lower() == address.lower()
    return check


class _GmailTask(Task):
    def make_params(self, seed: int) -> dict[str, str]:
        return {"address": FRIENDS[seed % len(FRIENDS)]}

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def compose_to(self) -> list[Milestone]:
        a = self.params["address"]
        return [
            Milestone("Gmail open", in_app(GMAIL), (OpenApp("Gmail"),)),
            Milestone("composing", on_screen(GMAIL, "compose"), (ClickText("Compose"),)),
            Milestone("recipient filled", draft_to(a), (ClickText("To"), TypeText(a))),
        ]


class GmailEmpty(_GmailTask):
    app, tier = "Gmail", 1

    def is_successful(self, phone: SimPhone) -> bool:
        return sent_to(self.params["address"], empty=True)(phone)

    def milestones(self) -> Sequence[Milestone]:
        return [*self.compose_to(),
                Milestone("sent", self.is_successful, (ClickIcon("send", "top right"), ClickText("OK")))]


class _GmailNewWork(_GmailTask):
    def is_successful(self, phone: SimPhone) -> bool:
        return sent_to(self.params["address"], empty=False)(phone)

    def milestones(self) -> Sequence[Milestone]:
        def written(phone: SimPhone) -> bool:
            d = _gmail(phone).draft
            return d is not None and bool(d.body.strip())
        return [*self.compose_to(),
                Milestone("message written", written,
                          (ClickText("Subject"), TypeText(WORK_SUBJECT),
                           ClickText("Compose email"), TypeText(WORK_BODY))),
                Milestone("sent", self.is_successful, (ClickIcon("send", "top right"),))]


class GmailNewWork(_GmailNewWork):
    app, tier = "Gmail", 2


class GmailTellFriend(_GmailNewWork):
    app, tier = "Gmail", 3


# --- Google Maps ----------------------------------------------------------------------------

MAPS = maps.PACKAGE


def _maps(phone: SimPhone) -> MapsState:
    return phone.state_as(MAPS, MapsState)


def navigating(place: str | None = None, category: str | None = None) -> Check:
    def check(phone: SimPhone) -> bool:
        p = _maps(phone).navigating_to
        return p is not None and (place is None or p == place) and \
            (category is None or maps.PLACE[p].category == category)
    return check


def place_page(place: str | None, category: str | None = None) -> Check:
    def check(phone: SimPhone) -> bool:
        if phone.current_screen() not in (f"{MAPS}/place", f"{MAPS}/directions"):
            return False
        pid = str(phone.screen_params().get("id"))
        return (place is None or pid == place) and \
            (category is None or maps.PLACE[pid].category == category)
    return check


def _west_lake() -> list[Milestone]:
    return [
        Milestone("Maps open", in_app(MAPS), (OpenApp("Maps"),)),
        Milestone("search box focused", field_focused(MAPS, "query"), (ClickText("Search here"),)),
        Milestone("West Lake's page", place_page("west-lake"),
                  (TypeText("Hangzhou West Lake"), ClickText("West Lake"))),
        Milestone("directions", on_screen(MAPS, "directions"), (ClickText("Directions"),)),
        Milestone("navigating", navigating(place="west-lake"), (ClickText("Start"),)),
    ]


class MapsWestLake(Task):
    app, tier = "Google Maps", 1

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def is_successful(self, phone: SimPhone) -> bool:
        return navigating(place="west-lake")(phone)

    def milestones(self) -> Sequence[Milestone]:
        return _west_lake()


class MapsGasStation(Task):
    app, tier = "Google Maps", 2

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def is_successful(self, phone: SimPhone) -> bool:
        return navigating(category="gas_station")(phone)

    def milestones(self) -> Sequence[Milestone]:
        return [
            Milestone("Maps open", in_app(MAPS), (OpenApp("Maps"),)),
            Milestone("nearby gas stations", on_screen(MAPS, "category"), (ClickText("Gas"),)),
            Milestone("a station's page", place_page(None, "gas_station"),
                      (ClickText("Sinopec Gas Station"),)),
            Milestone("directions", on_screen(MAPS, "directions"), (ClickText("Directions"),)),
            Milestone("navigating", self.is_successful, (ClickText("Start"),)),
        ]


class MapsWestLakeWay(MapsWestLake):
    app, tier = "Google Maps", 3


# --- Notes ----------------------------------------------------------------------------------

NOTES = notes.PACKAGE


class _NotesTask(Task):
    content = ""  # what the reference types ('' for an empty new note)
    pattern = ""  # what a new note must match (a regex on normalised text; '' for any)

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)
        self.before: list[Note] = notes_snapshot(phone)

    def is_successful(self, phone: SimPhone) -> bool:
        rx = re.compile(self.pattern)
        return any(rx.search(norm_text(note_text(n))) for n in new_notes(phone, self.before))

    def milestones(self) -> Sequence[Milestone]:
        start = [Milestone("Notes open", in_app(NOTES), (OpenApp("Notes"),)),
                 Milestone("new note editor", on_screen(NOTES, "edit"), (ClickIcon("add", "bottom right"),))]
        if not self.content:
            return [*start, Milestone("saved", self.is_successful, (ClickText("Save"),))]
        return [*start,
                Milestone("text written", notes_editor_has(self.pattern),
                          (ClickText("Note"), TypeText(self.content))),
                Milestone("saved", self.is_successful, (ClickText("Save"),))]


class NotesCreate(_NotesTask):
    app, tier = "Notes", 1


class NotesHello(_NotesTask):
    app, tier = "Notes", 2
    content = "Hello, this is a note"
    pattern = r"hello this is a note"


class NotesMeeting(_NotesTask):
    app, tier = "Notes", 3
    content = "meeting at 3pm"
    pattern = r"meeting at (3 ?pm|3 00 ?pm|15 00)"


# --- Settings -------------------------------------------------------------------------------

SETTINGS = "com.android.settings"


class _SettingsToggle(Task):
    flag = ""  # a SystemSettings field
    section = ""
    toggle = ""

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)
        setattr(phone.system, self.flag, False)  # a seed's dark theme must not pre-solve it

    def is_successful(self, phone: SimPhone) -> bool:
        return bool(getattr(phone.system, self.flag))

    def milestones(self) -> Sequence[Milestone]:
        screen = {"Display": "display", "Network & internet": "network",
                  "Notifications & status bar": "notifications"}[self.section]
        down = page_downs_to_show(self.seed, SETTINGS, None, self.section)
        down2 = page_downs_to_show(self.seed, SETTINGS, screen, self.toggle)
        return [Milestone("Settings open", in_app(SETTINGS), (OpenApp("Settings"),)),
                Milestone(self.section, on_screen(SETTINGS, screen),
                          (*[PageDown()] * down, ClickText(self.section))),
                Milestone(f"{self.toggle} on", self.is_successful,
                          (*[PageDown()] * down2, ClickText(self.toggle)))]


class SettingsDarkMode(_SettingsToggle):
    app, tier = "Settings", 1
    flag, section, toggle = "dark_mode", "Display", "Dark mode"


class SettingsAirplane(_SettingsToggle):
    app, tier = "Settings", 2
    flag, section, toggle = "airplane_mode", "Network & internet", "Airplane mode"


class SettingsNetworkSpeed(_SettingsToggle):
    app, tier = "Settings", 3
    flag, section, toggle = ("show_network_speed", "Notifications & status bar",
                             "Network speed in status bar")


TASKS: list[type[Task]] = [ChromeLakers, ChromeTaylorSwift, ChromeLakersResult, GmailEmpty,
                           GmailNewWork, GmailTellFriend, MapsWestLake, MapsGasStation,
                           MapsWestLakeWay, NotesCreate, NotesHello, NotesMeeting,
                           SettingsDarkMode, SettingsAirplane, SettingsNetworkSpeed]
