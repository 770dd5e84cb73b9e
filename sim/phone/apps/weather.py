"""Weather: today's conditions and a 5-day forecast (highs and lows in °C).

The forecast is fixed per seed (``forecast``), starting at the phone's today, so a task
can know the temperatures the agent should read.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta

from sim.phone.app import App, Ctx, Screen
from sim.phone.widgets import Chip, Divider, IconButton, ListItem, Media, Row, Text

PACKAGE = "com.sim.weather"
CITY = "Hangzhou"
CONDITIONS = (("Sunny", "wb_sunny"), ("Partly cloudy", "wb_cloudy"), ("Cloudy", "cloud"),
              ("Light rain", "grain"), ("Thunderstorms", "thunderstorm"))


@dataclass(frozen=True)
class Day:
    day: date
    condition: str
    icon: str
    high: int
    low: int


def forecast(seed: int, today: date) -> list[Day]:
    """Five days from today; seed 0 is a fixed, gently warming week."""
    highs: tuple[int, ...]
    lows: tuple[int, ...]
    conds: tuple[int, ...]
    if seed == 0:
        highs, lows, conds = (21, 23, 19, 24, 26), (12, 13, 11, 14, 15), (1, 0, 3, 1, 0)
    else:
        rng = random.Random(seed * 101 + 3)
        base = rng.randint(5, 28)
        highs = tuple(base + rng.randint(-4, 4) for _ in range(5))
        lows = tuple(h - rng.randint(5, 10) for h in highs)
        conds = tuple(rng.randrange(len(CONDITIONS)) for _ in range(5))
    return [Day(today + timedelta(days=i), CONDITIONS[c][0], CONDITIONS[c][1], h, lo)
            for i, (h, lo, c) in enumerate(zip(highs, lows, conds, strict=True))]


@dataclass
class WeatherState:
    seed: int = 0
    unit: str = "C"
    views: list[str] = field(default_factory=list)


def _init(st: WeatherState, seed: int) -> None:
    st.seed = seed


def _deg(c: int, unit: str) -> str:
    return f"{c}°" if unit == "C" else f"{round(c * 9 / 5 + 32)}°"


def main(ctx: Ctx[WeatherState]) -> Screen:
    st = ctx.state
    days = forecast(st.seed, ctx.now.date())

    def unit(u: str) -> None:
        st.unit = u

    rows: list = []
    for i, d in enumerate(days):
        label = "Today" if i == 0 else d.day.strftime("%a %-d")
        rows.append(ListItem(label, d.condition, icon=d.icon, icon_color="#4A90D9",
                             trailing_text=f"{_deg(d.high, st.unit)} / {_deg(d.low, st.unit)}",
                             id=f"day:{i}"))
    body = [
        Media("#4A90D9", "wb_cloudy", 160, CITY, desc="Current weather"),
        Text(f"Now {_deg(18, st.unit)}  Partly cloudy", "title", id="now"),
        Text(f"H:{_deg(days[0].high, st.unit)}  L:{_deg(days[0].low, st.unit)}", "body2", muted=True),
        Row([Chip("°C", selected=st.unit == "C", on_tap=lambda: unit("C")),
             Chip("°F", selected=st.unit == "F", on_tap=lambda: unit("F"))]),
        Divider(),
        Text("5-day forecast", "subtitle", id="forecast_title"),
        *rows,
        Divider(),
        Text("Humidity 64% · Wind 12 km/h NE · UV index 3", "body2", muted=True),
    ]
    return Screen(title=CITY, body=body,
                  actions=[IconButton("add_location_alt", lambda: ctx.toast("Search for a city"),
                                      "Add location"),
                           IconButton("more_vert", lambda: ctx.toast("Settings"), "More options")])


APP: App[WeatherState] = App(
    package=PACKAGE, label="Weather", icon="wb_sunny", state=WeatherState,
    screens={"main": main}, color="#4A90D9", activity=".WeatherActivity", init=_init,
)
