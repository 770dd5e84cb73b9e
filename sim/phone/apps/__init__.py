"""The app registry: every installed app, in canonical launcher order (seed 0).

To add an app: write a module with an ``APP = App(...)`` and add one line below.
"""

from __future__ import annotations

from typing import Any

from sim.phone.app import App
from sim.phone.apps import (
    alibaba,
    amazon_music,
    calendar,
    chrome,
    extras,
    gmail,
    maps,
    notes,
    play_store,
    settings,
    tiktok,
    weather,
    youtube,
)

APPS: list[App[Any]] = [
    *extras.FIRST,
    notes.APP,
    chrome.APP,
    settings.APP,
    # Mobile-Eval apps (issue 4) go here, one line each.
    alibaba.APP,
    amazon_music.APP,
    gmail.APP,
    maps.APP,
    play_store.APP,
    tiktok.APP,
    youtube.APP,
    calendar.APP,
    weather.APP,
    *extras.LAST,
]
