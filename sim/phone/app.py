"""The declarative app model: an App is a package, a label, a launcher icon, a state
dataclass and named screens; a screen is a function of a Ctx that returns a Screen.

Screens are rebuilt from state for every frame, so callbacks only change state or
navigate (ctx.go / ctx.back / ctx.show_dialog); nothing holds widget objects across frames.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sim.phone.widgets import BottomNav, Dialog, Fab, IconButton, Widget

if TYPE_CHECKING:
    from sim.phone.system import SystemSettings

S = TypeVar("S")


@dataclass
class Screen:
    """What one screen shows. The body scrolls when it is taller than the viewport."""

    title: str = ""
    body: Sequence[Widget] = ()
    back: bool = False  # an arrow_back in the top bar (BACK does the same)
    actions: Sequence[IconButton] = ()  # top bar icons, right aligned
    top: Widget | None = None  # a widget in place of the title bar (e.g. a SearchBar)
    header: Sequence[Widget] = ()  # fixed (non-scrolling) widgets under the top bar, e.g. Tabs
    fab: Fab | None = None
    bottom: BottomNav | None = None
    dialog: Dialog | None = None  # a state-driven dialog over the screen
    on_swipe: Callable[[str], None] | None = None  # 'up'/'down'/'left'/'right' instead of scrolling
    large_title: bool = False
    background: str | None = None  # '#RRGGBB' instead of the theme's background
    full_screen: bool = False  # no top bar at all (video feeds); status/nav bars still drawn
    autofocus: str | None = None  # a field id focused when the screen opens (keyboard up)


class Navigator:
    """What a Ctx needs from the phone; SimPhone implements it."""

    def nav_go(self, package: str, screen: str, params: dict[str, Any], replace: bool) -> None:
        raise NotImplementedError

    def nav_back(self) -> None:
        raise NotImplementedError

    def nav_dialog(self, dialog: Dialog | None) -> None:
        raise NotImplementedError

    def nav_toast(self, message: str) -> None:
        raise NotImplementedError

    def nav_open_app(self, package: str, screen: str | None, params: dict[str, Any]) -> None:
        raise NotImplementedError

    def nav_state(self, package: str) -> Any:
        raise NotImplementedError


@dataclass
class Ctx(Generic[S]):
    """Everything a screen function sees: its app's state, the screen's parameters,
    the seed, the system settings, and navigation."""

    app: App[Any]
    state: S
    params: dict[str, Any]
    seed: int
    perturbed: bool  # seed != 0: screens may shuffle list orders (use ctx.shuffled)
    system: SystemSettings
    now: datetime
    _nav: Navigator

    def go(self, screen: str, **params: Any) -> None:
        """Push a screen of this app (BACK returns here)."""
        self._nav.nav_go(self.app.package, screen, params, False)

    def replace(self, screen: str, **params: Any) -> None:
        """Replace the current screen (BACK does not return to it)."""
        self._nav.nav_go(self.app.package, screen, params, True)

    def back(self) -> None:
        self._nav.nav_back()

    def show_dialog(self, dialog: Dialog | None) -> None:
        """A one-off dialog over this screen (None closes it)."""
        self._nav.nav_dialog(dialog)

    def show_menu(self, items: Sequence[tuple[str, Callable[[], None]]]) -> None:
        """An overflow menu (the one a ⋮ opens); choosing an item closes it first."""
        def close_then(action: Callable[[], None]) -> Callable[[], None]:
            def run() -> None:
                self._nav.nav_dialog(None)
                action()
            return run

        self._nav.nav_dialog(Dialog("", buttons=[(text, close_then(a)) for text, a in items], menu=True))

    def toast(self, message: str) -> None:
        self._nav.nav_toast(message)

    def open_app(self, package: str, screen: str | None = None, **params: Any) -> None:
        """Switch to another app (an intent), optionally at one of its screens."""
        self._nav.nav_open_app(package, screen, params)

    def state_of(self, package: str) -> Any:
        """Another app's state (e.g. a share target)."""
        return self._nav.nav_state(package)

    def rng(self, name: str = "") -> random.Random:
        """A random generator fixed by (seed, app, name): content that varies by seed."""
        key = f"{self.seed}/{self.app.package}/{name}".encode()
        return random.Random(zlib.crc32(key))

    def shuffled(self, items: Sequence[Any], name: str = "") -> list[Any]:
        """items in canonical order on seed 0, in a seed-determined order otherwise."""
        out = list(items)
        if self.perturbed:
            self.rng("order/" + name).shuffle(out)
        return out


ScreenFn = Callable[[Ctx[Any]], Screen]


@dataclass
class App(Generic[S]):
    """One installed app. Register it in sim/phone/apps/__init__.py (one line)."""

    package: str  # e.g. 'com.android.chrome'
    label: str  # the launcher label, e.g. 'Chrome'
    icon: str  # a Material icon name for the launcher, e.g. 'public'
    state: Callable[[], S]  # the state factory (usually the dataclass itself)
    screens: dict[str, ScreenFn]
    home: str = "main"  # the screen the launcher opens
    color: str = "#1A73E8"  # the launcher icon's background
    activity: str = ".MainActivity"  # what dumpsys/app_current report for the home screen
    activities: dict[str, str] = field(default_factory=dict)  # '.SettingsActivity' -> screen
    init: Callable[[S, int], None] | None = None  # fill seeded content: init(state, seed)
    on_stop: Callable[[S], None] | None = None  # force-stop: drop drafts and the like
    examples: dict[str, dict[str, Any]] = field(default_factory=dict)  # screen -> params (gallery)

    def __post_init__(self) -> None:
        if "/" in self.package or not self.package or "." not in self.package:
            raise ValueError(f"app package {self.package!r} is not a Java-style package name")
        if self.home not in self.screens:
            raise ValueError(f"app {self.package}: home screen {self.home!r} is not in screens")
        for act, screen in self.activities.items():
            if screen not in self.screens:
                raise ValueError(f"app {self.package}: activity {act} names unknown screen {screen!r}")

    def new_state(self, seed: int) -> S:
        st = self.state()
        if self.init is not None:
            self.init(st, seed)
        return st

    def component(self, activity: str | None = None) -> str:
        """'pkg/pkg.Activity', as dumpsys window prints mCurrentFocus."""
        act = activity or self.activity
        return f"{self.package}/{self.package}{act}" if act.startswith(".") else f"{self.package}/{act}"
