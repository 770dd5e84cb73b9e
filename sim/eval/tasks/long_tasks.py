"""Tier 4: tasks in the style of Mobile-Eval-E. Most need something read in one app (a
temperature, a date, a price, a title, a rating) written in another; two are one app's long
job with sub-goals, one of which needs ``Clear`` (YouTube's search box keeps its query).

What the agent must read varies by seed where the app's content does (the weather, the date,
YouTube's feed), so a fixed answer does not pass. Checks read app state only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from protocol.operations import (
    Back,
    Clear,
    ClickIcon,
    ClickText,
    Enter,
    OpenApp,
    Operation,
    PageDown,
    PageUp,
    TypeText,
)
from sim.eval.checks import (
    Check,
    field_focused,
    fresh_start,
    in_app,
    new_notes,
    note_text,
    notes_snapshot,
    on_screen,
    page_downs_to_show,
    scrolls_to_show,
)
from sim.eval.task import Milestone, Task, norm_text
from sim.eval.tasks.everyday import CHROME, FRIENDS, GMAIL, chrome_searched, place_page
from sim.eval.tasks.media import YT
from sim.eval.tasks.multi_app import _write_note, date_pattern, long_date, today_for
from sim.eval.tasks.shopping import ALI
from sim.phone.apps import alibaba, calendar, maps, play_store, weather, youtube
from sim.phone.apps.gmail import GmailState
from sim.phone.apps.notes import Note
from sim.phone.apps.youtube import YouTubeState
from sim.phone.system import SETTINGS_PACKAGE

if TYPE_CHECKING:
    from sim.phone import SimPhone

MULTI = "Multi-App"


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:\.\d+)?", text))


class _Long(Task):
    tier = 4

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)
        self.before: list[Note] = notes_snapshot(phone)

    def new_note_texts(self, phone: SimPhone) -> list[str]:
        return [norm_text(note_text(n)) for n in new_notes(phone, self.before)]

    def raw_note_texts(self, phone: SimPhone) -> list[str]:
        """The new notes' text, lower case, punctuation kept (prices and distances: "0.95")."""
        return [note_text(n).lower() for n in new_notes(phone, self.before)]

    def forecast(self) -> list[weather.Day]:
        return weather.forecast(self.seed, today_for(self.seed))


def _mail_sent(address: str, ok: Check | None = None, *, text_ok: re.Pattern[str] | None = None
               ) -> Check:
    """A mail to ``address`` was sent whose subject and body match ``text_ok``."""
    def check(phone: SimPhone) -> bool:
        for m in phone.state_as(GMAIL, GmailState).sent:
            if m.to.strip().lower() == address.lower() and (
                    text_ok is None or text_ok.search(norm_text(f"{m.subject} {m.body}"))):
                return True
        return False
    return check


def _send_mail(address: str, subject: str, body: str, done: Check) -> list[Milestone]:
    def drafted(phone: SimPhone) -> bool:
        d = phone.state_as(GMAIL, GmailState).draft
        return d is not None and d.to.strip().lower() == address.lower()

    def written(phone: SimPhone) -> bool:
        d = phone.state_as(GMAIL, GmailState).draft
        return d is not None and bool(d.body.strip())

    return [
        Milestone("Gmail open", in_app(GMAIL), (OpenApp("Gmail"),)),
        Milestone("composing", on_screen(GMAIL, "compose"), (ClickText("Compose"),)),
        Milestone("recipient filled", drafted, (ClickText("To"), TypeText(address))),
        Milestone("message written", written,
                  (ClickText("Subject"), TypeText(subject), ClickText("Compose email"),
                   TypeText(body))),
        Milestone("sent", done, (ClickIcon("send", "top right"),)),
    ]


class _MailTask(_Long):
    def make_params(self, seed: int) -> dict[str, str]:
        return {"address": FRIENDS[(seed + 2) % len(FRIENDS)]}


# --- one app's value into another -------------------------------------------------------------


class WeatherTomorrowNote(_Long):
    app, name = MULTI, "weather-note"

    def is_successful(self, phone: SimPhone) -> bool:
        high = str(self.forecast()[1].high)
        return any("high" in t and high in _numbers(t) for t in self.new_note_texts(phone))

    def milestones(self) -> Sequence[Milestone]:
        high = self.forecast()[1].high
        return [Milestone("Weather seen", in_app(weather.PACKAGE), (OpenApp("Weather"),)),
                *_write_note(f"Tomorrow's high: {high} C", self.is_successful)]


class CalendarDateEmail(_MailTask):
    app, name = MULTI, "calendar-email"

    def done(self) -> Check:
        return _mail_sent(self.params["address"],
                          text_ok=re.compile(r"meet.*(?:" + date_pattern(today_for(self.seed)) + ")"))

    def is_successful(self, phone: SimPhone) -> bool:
        return self.done()(phone)

    def milestones(self) -> Sequence[Milestone]:
        day = long_date(today_for(self.seed))
        return [Milestone("Calendar seen", in_app(calendar.PACKAGE), (OpenApp("Calendar"),)),
                *_send_mail(self.params["address"], "Meeting", f"Let us meet on {day}.",
                            self.done())]


class YouTubeTitleInChrome(_Long):
    app, name = MULTI, "youtube-title-chrome"

    def title(self) -> str:
        return youtube.home_feed(self.seed)[0].title

    def is_successful(self, phone: SimPhone) -> bool:
        return chrome_searched(*self.title().split())(phone)

    def milestones(self) -> Sequence[Milestone]:
        title = self.title()
        return [Milestone("YouTube's feed seen", in_app(YT), (OpenApp("YouTube"),)),
                Milestone("Chrome open", in_app(CHROME), (OpenApp("Chrome"),)),
                Milestone("search box focused", field_focused(CHROME, "omnibox_edit"),
                          (ClickText("Search Google or type URL"),)),
                Milestone("title searched", self.is_successful, (TypeText(title), Enter()))]


CAPS = [p for p in alibaba.CATALOG if "cap" in p.tags]
CHEAPEST_CAP = min(CAPS, key=lambda p: float(p.price.split("$")[1].split("-")[0]))


class CheapestCapNote(_Long):
    app, name = MULTI, "cheapest-cap-note"

    @staticmethod
    def searched(phone: SimPhone) -> bool:
        return any("cap" in q.lower() for q in phone.state_as(ALI, alibaba.AlibabaState).searches)

    def is_successful(self, phone: SimPhone) -> bool:
        low = CHEAPEST_CAP.price.split("$")[1].split("-")[0]
        return self.searched(phone) and any(low in _numbers(t) and "cap" in t
                                            for t in self.raw_note_texts(phone))

    def milestones(self) -> Sequence[Milestone]:
        searched = self.searched
        return [Milestone("Alibaba.com open", in_app(ALI), (OpenApp("Alibaba.com"),)),
                Milestone("search box focused", field_focused(ALI, "query"),
                          (ClickText("Search products"),)),
                Milestone("caps listed", searched, (TypeText("caps"), ClickText("Search"))),
                *_write_note(f"Cheapest cap: {CHEAPEST_CAP.title}, {CHEAPEST_CAP.price}",
                             self.is_successful)]


class WestLakeDistanceNote(_Long):
    app, name = MULTI, "west-lake-distance"

    def is_successful(self, phone: SimPhone) -> bool:
        km = f"{maps.PLACE['west-lake'].distance_km:.1f}"
        seen = "west-lake" in phone.state_as(maps.PACKAGE, maps.MapsState).places_opened
        return seen and any(km in _numbers(t) for t in self.raw_note_texts(phone))

    def milestones(self) -> Sequence[Milestone]:
        km = f"{maps.PLACE['west-lake'].distance_km:.1f}"
        return [Milestone("Maps open", in_app(maps.PACKAGE), (OpenApp("Maps"),)),
                Milestone("search box focused", field_focused(maps.PACKAGE, "query"),
                          (ClickText("Search here"),)),
                Milestone("West Lake's page", place_page("west-lake"),
                          (TypeText("Hangzhou West Lake"), Enter())),
                *_write_note(f"West Lake is {km} km away", self.is_successful)]


WHATSAPP = next(a for a in play_store.CATALOG if a.package == "com.whatsapp")


class WhatsAppRatingEmail(_MailTask):
    app, name = MULTI, "whatsapp-rating-email"

    def done(self) -> Check:
        return _mail_sent(self.params["address"],
                          text_ok=re.compile(r"whatsapp.*\b" + re.escape(norm_text(WHATSAPP.rating))))

    def is_successful(self, phone: SimPhone) -> bool:
        seen = WHATSAPP.package in phone.state_as(play_store.PACKAGE, play_store.PlayState).pages_opened
        return seen and self.done()(phone)

    def milestones(self) -> Sequence[Milestone]:
        def page(phone: SimPhone) -> bool:
            return phone.current_screen() == f"{play_store.PACKAGE}/details" and \
                phone.screen_params().get("app") == WHATSAPP.package
        return [Milestone("Play Store open", in_app(play_store.PACKAGE), (OpenApp("Play Store"),)),
                Milestone("search box focused", field_focused(play_store.PACKAGE, "query"),
                          (ClickText("Search apps & games"),)),
                Milestone("WhatsApp's page", page, (TypeText("WhatsApp"), ClickText(WHATSAPP.name))),
                *_send_mail(self.params["address"], "WhatsApp rating",
                            f"WhatsApp is rated {WHATSAPP.rating} stars.", self.is_successful)]


class WarmestDayEmail(_MailTask):
    app, name = MULTI, "warmest-day-email"

    def warmest(self) -> weather.Day:
        return max(self.forecast(), key=lambda d: d.high)

    def done(self) -> Check:
        d = self.warmest()
        days = {x.day.strftime("%A").lower() for x in self.forecast() if x.high == d.high}
        rx = re.compile(rf"\b{d.high}\b")

        def check(phone: SimPhone) -> bool:
            for m in phone.state_as(GMAIL, GmailState).sent:
                t = norm_text(f"{m.subject} {m.body}")
                if m.to.strip().lower() == self.params["address"] and rx.search(t) and (
                        any(day in t or day[:3] in t.split() for day in days)
                        or re.search(date_pattern(d.day), t)):
                    return True
            return False
        return check

    def is_successful(self, phone: SimPhone) -> bool:
        return self.done()(phone)

    def milestones(self) -> Sequence[Milestone]:
        d = self.warmest()
        return [Milestone("Weather seen", in_app(weather.PACKAGE), (OpenApp("Weather"),)),
                *_send_mail(self.params["address"], "Warmest day",
                            f"The warmest day is {d.day.strftime('%A')}, with a high of {d.high} C.",
                            self.done())]


class DateAndWeatherNote(_Long):
    """Three apps: the date from Calendar, the high from Weather, both into one note."""

    app, name = MULTI, "date-weather-note"

    def is_successful(self, phone: SimPhone) -> bool:
        rx = re.compile(date_pattern(today_for(self.seed)))
        high = str(self.forecast()[0].high)
        return any(rx.search(t) and high in _numbers(rx.sub(" ", t))
                   for t in self.new_note_texts(phone))

    def milestones(self) -> Sequence[Milestone]:
        day = long_date(today_for(self.seed))
        high = self.forecast()[0].high
        return [Milestone("Calendar seen", in_app(calendar.PACKAGE), (OpenApp("Calendar"),)),
                Milestone("Weather seen", in_app(weather.PACKAGE), (OpenApp("Weather"),)),
                *_write_note(f"{day}: the high today is {high} C", self.is_successful)]


# --- one app's long job ----------------------------------------------------------------------------


def _yt(phone: SimPhone) -> YouTubeState:
    return phone.state_as(YT, YouTubeState)


class YouTubeTwoSearches(_Long):
    """The second search needs ``Clear``: the box keeps "Stephen Curry" when it comes back."""

    app, name = "YouTube", "two-searches"

    @staticmethod
    def searched(words: str) -> Check:
        return lambda phone: any(words in norm_text(q) for q in _yt(phone).searches)

    @staticmethod
    def lofi_liked(phone: SimPhone) -> bool:
        return any(youtube.VIDEO[v].id == "lofi" for v in _yt(phone).liked)

    def is_successful(self, phone: SimPhone) -> bool:
        return self.searched("stephen curry")(phone) and self.searched("lofi")(phone) and \
            self.lofi_liked(phone)

    def milestones(self) -> Sequence[Milestone]:
        def emptied(phone: SimPhone) -> bool:
            return field_focused(YT, "query")(phone) and not _yt(phone).draft and \
                self.searched("stephen curry")(phone)

        def lofi_open(phone: SimPhone) -> bool:
            return phone.current_screen() == f"{YT}/watch" and phone.screen_params().get("id") == "lofi"

        return [Milestone("YouTube open", in_app(YT), (OpenApp("YouTube"),)),
                Milestone("search box focused", field_focused(YT, "query"),
                          (ClickIcon("search", "top right"),)),
                Milestone("Curry searched", self.searched("stephen curry"),
                          (TypeText("Stephen Curry"), Enter())),
                # Back to the feed, and search again: the box still holds the last query.
                Milestone("old query cleared", emptied,
                          (Back(), Back(), ClickIcon("search", "top right"), Clear())),
                Milestone("lofi searched", self.searched("lofi"), (TypeText("lofi music"), Enter())),
                Milestone("the lo-fi video", lofi_open, (ClickText(youtube.VIDEO["lofi"].title),)),
                Milestone("liked", self.is_successful, (ClickIcon("thumb up", "left"),))]


class SettingsDarkAndAirplane(_Long):
    app, name = "Settings", "dark-and-airplane"

    def setup(self, phone: SimPhone) -> None:
        super().setup(phone)
        phone.system.dark_mode = False  # a seed's dark theme must not pre-solve it
        phone.system.airplane_mode = False

    def is_successful(self, phone: SimPhone) -> bool:
        return phone.system.dark_mode and phone.system.airplane_mode

    def milestones(self) -> Sequence[Milestone]:
        s = self.seed
        down = page_downs_to_show(s, SETTINGS_PACKAGE, None, "Display")
        dark = page_downs_to_show(s, SETTINGS_PACKAGE, "display", "Dark mode")
        # BACK returns to the list where it was scrolled to for Display
        net = scrolls_to_show(s, SETTINGS_PACKAGE, None, "Network & internet", after_downs=down)
        air = page_downs_to_show(s, SETTINGS_PACKAGE, "network", "Airplane mode")
        return [Milestone("Settings open", in_app(SETTINGS_PACKAGE), (OpenApp("Settings"),)),
                Milestone("dark mode on", lambda p: p.system.dark_mode,
                          (*_pages(down), ClickText("Display"), *_pages(dark),
                           ClickText("Dark mode"))),
                Milestone("airplane mode on", self.is_successful,
                          (Back(), *_pages(net), ClickText("Network & internet"), *_pages(air),
                           ClickText("Airplane mode")))]


def _pages(n: int) -> list[Operation]:
    return [PageDown() if n > 0 else PageUp() for _ in range(abs(n))]


TASKS: list[type[Task]] = [
    WeatherTomorrowNote, CalendarDateEmail, YouTubeTitleInChrome, CheapestCapNote,
    WestLakeDistanceNote, WhatsAppRatingEmail, WarmestDayEmail, DateAndWeatherNote,
    YouTubeTwoSearches, SettingsDarkAndAirplane,
]
