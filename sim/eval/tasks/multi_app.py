"""The Multi-App row: Calendar -> Notes, Weather -> Notes, Chrome -> Notes."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date
from typing import TYPE_CHECKING

from protocol.operations import ClickIcon, ClickText, OpenApp, TypeText
from sim.eval.checks import (
    Check,
    fresh_start,
    in_app,
    new_notes,
    note_text,
    notes_snapshot,
    on_screen,
)
from sim.eval.task import Milestone, Task, norm_text
from sim.eval.tasks.everyday import (
    LAKERS_QUERY,
    LAKERS_SUGGESTION,
    chrome_search_steps,
    chrome_searched,
)
from sim.phone.apps import calendar, notes, weather
from sim.phone.apps.notes import Note
from sim.phone.system import Perturbation

if TYPE_CHECKING:
    from sim.phone import SimPhone

NOTES = notes.PACKAGE
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")


def today_for(seed: int) -> date:
    """The phone's date on this seed (its clock is fixed per seed)."""
    return Perturbation.from_seed(seed).now.date()


def date_pattern(d: date) -> str:
    """A regex (on normalised text) for d written the usual ways: 'March 15, 2024',
    '15 Mar', '2024-03-15', '3/15/2024', '15/03/2024'."""
    full, abbr = MONTHS[d.month - 1], MONTHS[d.month - 1][:3]
    m = f"(?:{full}|{abbr})"
    day, mon = rf"0?{d.day}(?:st|nd|rd|th)?", f"0?{d.month}"
    forms = [rf"\b{m} {day}\b", rf"\b{day} (?:of )?{m}\b", rf"\b{d.year} {mon} 0?{d.day}\b",
             rf"\b{mon} 0?{d.day} {d.year}\b", rf"\b0?{d.day} {mon} {d.year}\b"]
    return "|".join(forms)


def long_date(d: date) -> str:
    return f"{d.strftime('%B')} {d.day}, {d.year}"


def _write_note(text: str, done: Check) -> list[Milestone]:
    return [
        Milestone("Notes open", in_app(NOTES), (OpenApp("Notes"),)),
        Milestone("new note editor", on_screen(NOTES, "edit"), (ClickIcon("add", "bottom right"),)),
        Milestone("note saved", done, (ClickText("Note"), TypeText(text), ClickText("Save"))),
    ]


class _NoteAfterTask(Task):
    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)
        self.before: list[Note] = notes_snapshot(phone)

    def new_note_texts(self, phone: SimPhone) -> list[str]:
        return [norm_text(note_text(n)) for n in new_notes(phone, self.before)]


class CalendarDateNote(_NoteAfterTask):
    app, tier = "Multi-App", 1

    def is_successful(self, phone: SimPhone) -> bool:
        rx = re.compile(r"today is.*(?:" + date_pattern(today_for(self.seed)) + ")")
        return any(rx.search(t) for t in self.new_note_texts(phone))

    def milestones(self) -> Sequence[Milestone]:
        text = f"Today is {long_date(today_for(self.seed))}"
        return [Milestone("Calendar seen", in_app(calendar.PACKAGE), (OpenApp("Calendar"),)),
                *_write_note(text, self.is_successful)]


class WeatherAnalysisNote(_NoteAfterTask):
    app, tier = "Multi-App", 2
    min_temps = 3  # how many of the forecast's temperatures the note must quote

    def forecast(self) -> list[weather.Day]:
        return weather.forecast(self.seed, today_for(self.seed))

    def is_successful(self, phone: SimPhone) -> bool:
        temps = {d.high for d in self.forecast()} | {d.low for d in self.forecast()}
        for t in self.new_note_texts(phone):
            quoted = {int(n) for n in re.findall(r"-?\d+", t)} & temps
            if len(quoted) >= min(self.min_temps, len(temps)):
                return True
        return False

    def milestones(self) -> Sequence[Milestone]:
        days = self.forecast()
        warm = max(days, key=lambda d: d.high)
        cool = min(days, key=lambda d: d.low)
        text = ("Temperature analysis for the next 5 days: highs "
                + ", ".join(str(d.high) for d in days) + " C; lows "
                + ", ".join(str(d.low) for d in days) + f" C. Warmest on {warm.day.strftime('%A')} "
                f"({warm.high} C), coolest night on {cool.day.strftime('%A')} ({cool.low} C).")
        return [Milestone("Weather seen", in_app(weather.PACKAGE), (OpenApp("Weather"),)),
                *_write_note(text, self.is_successful)]


class LakersNewsNote(_NoteAfterTask):
    """Chrome's simulated results carry no score, so the check asks for a Lakers search and
    a new note about the Lakers game (not a particular score)."""

    app, tier = "Multi-App", 3
    news = ("Sports news: the Lakers played today. The game result is on the web: "
            "a hard-fought night for Los Angeles.")

    def is_successful(self, phone: SimPhone) -> bool:
        return chrome_searched("lakers")(phone) and any(
            "lakers" in t for t in self.new_note_texts(phone))

    def milestones(self) -> Sequence[Milestone]:
        return [*chrome_search_steps(LAKERS_QUERY, LAKERS_SUGGESTION),
                *_write_note(self.news, self.is_successful)]


TASKS: list[type[Task]] = [CalendarDateNote, WeatherAnalysisNote, LakersNewsNote]
