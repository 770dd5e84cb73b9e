"""Calendar: a month grid with today circled and today's agenda.

"Today" is the phone's clock (``ctx.now``), which is fixed per seed.
"""

from __future__ import annotations

import calendar as cal
from dataclasses import dataclass, field
from datetime import date, timedelta

from sim.phone.app import App, Ctx, Screen
from sim.phone.canvas import Element, Layout
from sim.phone.widgets import Divider, Fab, IconButton, ListItem, Text, Widget

PACKAGE = "com.google.android.calendar"
WEEKDAYS = ("S", "M", "T", "W", "T", "F", "S")


@dataclass
class CalendarState:
    month_offset: int = 0  # months shown relative to today's month
    events: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # iso date -> (time, title)


def _init(st: CalendarState, seed: int) -> None:
    st.events = {}


def today_events(day: date) -> list[tuple[str, str]]:
    """A deterministic agenda for a day (so the screen is not empty)."""
    pool = [("9:00 AM", "Team stand-up"), ("12:30 PM", "Lunch with Maria"),
            ("3:00 PM", "Dentist appointment"), ("6:00 PM", "Gym")]
    k = day.toordinal() % 3
    return pool[k:k + 2]


@dataclass
class MonthGrid(Widget):
    """Weekday initials and a 7-column grid of day numbers; today is circled."""

    year: int
    month: int
    today: date | None

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        t = lay.theme
        cell_w = (w - 2 * lay.dp(8)) // 7
        cell_h = lay.dp(48)
        size, weight = lay.style("body2")
        cy = y
        for i, d in enumerate(WEEKDAYS):
            cx = x + lay.dp(8) + i * cell_w + cell_w // 2
            tw = lay.text_width(d, size, "medium")
            lay.text(cx - tw // 2, cy + lay.dp(8), d, size, "medium", t.text_muted)
        cy += lay.dp(36)
        weeks = cal.Calendar(firstweekday=6).monthdayscalendar(self.year, self.month)
        for week in weeks:
            for i, day in enumerate(week):
                if not day:
                    continue
                cx = x + lay.dp(8) + i * cell_w + cell_w // 2
                label = str(day)
                tw = lay.text_width(label, size, weight)
                is_today = self.today is not None and self.today.day == day
                if is_today:
                    r = lay.dp(18)
                    mid = cy + cell_h // 2
                    lay.ellipse((cx - r, mid - r, cx + r, mid + r), t.primary)
                colour = t.on_primary if is_today else t.text
                tb = lay.text(cx - tw // 2, cy + (cell_h - round(size * 1.3)) // 2, label, size,
                              "medium" if is_today else weight, colour)
                lay.element(Element("text", label, tb, id="today" if is_today else f"day:{day}",
                                    checked=is_today))
            cy += cell_h
        return cy - y


def month(ctx: Ctx[CalendarState]) -> Screen:
    st = ctx.state
    today = ctx.now.date()
    first = date(today.year, today.month, 1)
    y, m = first.year, first.month + st.month_offset
    while m > 12:
        y, m = y + 1, m - 12
    while m < 1:
        y, m = y - 1, m + 12

    def shift(n: int) -> None:
        st.month_offset += n

    def back_to_today() -> None:
        st.month_offset = 0

    shown_today = today if (y, m) == (today.year, today.month) else None
    agenda = today_events(today) + st.events.get(today.isoformat(), [])
    body = [
        MonthGrid(y, m, shown_today),
        Divider(),
        Text(f"Today, {today.strftime('%A, %B')} {today.day}, {today.year}", "subtitle", id="today_line"),
        *[ListItem(title, when, icon="event", icon_color="#1A73E8") for when, title in agenda],
        Text(f"Tomorrow, {(today + timedelta(days=1)).strftime('%A')}", "body2", muted=True),
    ]
    return Screen(title=f"{cal.month_name[m]} {y}", body=body,
                  actions=[IconButton("chevron_left", lambda: shift(-1), "Previous month"),
                           IconButton("today", back_to_today, "Today"),
                           IconButton("chevron_right", lambda: shift(1), "Next month")],
                  fab=Fab("add", lambda: ctx.toast("Sign in to add events"), "Create event"))


APP: App[CalendarState] = App(
    package=PACKAGE, label="Calendar", icon="calendar_month", state=CalendarState,
    screens={"main": month}, color="#1A73E8",
    activity="com.android.calendar.AllInOneActivity", init=_init,
)
