"""SimPhone: the simulated Android phone behind the ADB front end (sim.phone_api.Phone).

It keeps a task (back stack) per app, the focused field, dialogs and the launcher page,
lays the current frame out from app state, and paints it with Pillow. Every public
method takes one lock: the ADB side calls in from its server threads. The rendered frame
is cached until something changes (an input, a test-API call, app state, a timer).
"""

from __future__ import annotations

import random
import threading
import time
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from PIL import Image

from devices.adb import ADB_KEYBOARD  # the one IME id the driver and the phone agree on
from sim.phone import keycodes, systemui
from sim.phone.app import App, Ctx, Navigator, Screen
from sim.phone.canvas import Action, Box, Element, Hit, Layout, contains, paint, repaint
from sim.phone.clock import FRAME_S, StepClock
from sim.phone.launcher import (
    LAUNCHER_COMPONENT,
    LAUNCHER_PACKAGE,
    drawer_order,
    home_pages,
    layout_drawer,
    layout_launcher,
    wallpaper,
)
from sim.phone.system import SETTINGS_PACKAGE, Perturbation, SystemSettings
from sim.phone.theme import DARK, LIGHT, Metrics, hex_rgb
from sim.phone.widgets import Dialog, TextField
from sim.phone_api import DeviceInfo, DeviceState, Faults, LatencyProfile

GBOARD = "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME"
IME_PACKAGES = ("com.google.android.inputmethod.latin", "com.android.adbkeyboard")
TOAST_S = 2.0
LONG_PRESS_MS = 500

T = TypeVar("T")


class PhoneError(ValueError):
    """A test-API call that names something the phone does not have."""


class _AppCrash(Exception):
    """An app's screen function or callback raised: the app 'keeps stopping'."""

    def __init__(self, package: str, error: BaseException) -> None:
        super().__init__(f"{package}: {type(error).__name__}: {error}")
        self.package = package


@dataclass
class Entry:
    """One screen on an app's back stack."""

    screen: str
    params: dict[str, Any] = field(default_factory=dict)
    scroll: int = 0
    dialog: Dialog | None = None  # a one-off dialog from ctx.show_dialog
    autofocused: bool = False  # Screen.autofocus has been applied once


@dataclass
class Frame:
    """One laid-out frame: what is where, and what input does."""

    layout: Layout
    base: Image.Image
    hits: list[Hit]  # bottom to top
    nav_hits: list[Hit]  # the navigation bar: works even while loading
    modal: Box | None  # a dialog's box: taps elsewhere only dismiss it
    dismiss: Action | None
    body: Box  # the scrolling viewport
    max_scroll: int
    on_swipe: Callable[[str], None] | None
    loading: bool
    autofocus: str | None = None
    keyboard: Box | None = None  # the soft keyboard's area; it stays usable over a dialog
    base_key: tuple[Any, ...] = ()  # what base is, so frames on the same base can be compared


class SimPhone(Navigator):
    """A rendered Android phone with apps, driven through sim.phone_api.Phone."""

    def __init__(self, info: DeviceInfo, *, seed: int = 0) -> None:
        from sim.phone.apps import APPS  # the registry imports app modules, which import us

        if not isinstance(info, DeviceInfo):
            raise TypeError(f"info must be a DeviceInfo, not {type(info).__name__}")
        if info.width < 320 or info.height < 480 or info.density < 80:
            raise ValueError(f"screen {info.width}x{info.height} @{info.density}dpi is too small to draw")
        self.info = info
        self.faults = Faults()
        self.latency = LatencyProfile()
        self.device_state = DeviceState()
        self.seed = seed
        self.perturbation = Perturbation.from_seed(seed)
        self.clock: Callable[[], float] = time.monotonic  # replaceable in tests
        self.step_clock: StepClock | None = None  # use_step_clock: repeatable runs
        # Where the last tap or long press landed: ground truth for benchmarks (whether a
        # stand-in model's tap hit its target), never read by the agent.
        self.last_touch: tuple[int, int] | None = None
        self._lock = threading.RLock()
        self._apps: dict[str, App[Any]] = {}
        for app in APPS:
            if app.package in self._apps or app.package == LAUNCHER_PACKAGE:
                raise ValueError(f"app package {app.package} is registered twice")
            self._apps[app.package] = app
        self._home_pages = home_pages(list(self._apps), seed)
        self._drawer = False  # the app drawer is open over the home screen
        self._drawer_scroll = 0
        self._states: dict[str, Any] = {p: a.new_state(seed) for p, a in self._apps.items()}
        if not isinstance(self._states.get(SETTINGS_PACKAGE), SystemSettings):
            self._states.pop(SETTINGS_PACKAGE, None)
            self._system_fallback = SystemSettings()
        self.system.dark_mode = self.perturbation.dark_theme
        self.system.font_scale = self.perturbation.font_scale
        self._tasks: dict[str, list[Entry]] = {}
        self._fg: str | None = None  # None: the launcher
        self._page = 0
        self._focus: str | None = None
        self._selected = False  # the focused field's whole text is selected
        self._select_pending = False  # a field was just focused: select its text if it asks
        self._shift = False
        self._symbols = False
        self._sys_dialog: Dialog | None = None  # a perturbation pop-up
        self._loading_until = 0.0
        self._toast: tuple[str, float] | None = None
        self._ime = GBOARD
        self._launches: dict[str, int] = {}
        self._navs = 0
        self._version = 0
        self._frame_key: tuple[Any, ...] | None = None
        self._frame_cache: Frame | None = None
        self._image_cache: Image.Image | None = None
        # the last painted frame: the next one repaints only where its ops differ
        self._painted: tuple[tuple[Any, ...], list[Any], Image.Image] | None = None
        self.partial_repaint = True  # False: paint every changed frame whole (bench/sim.py)
        self._reveal = False  # scroll the focused field into view at the next layout
        self._last_image: Image.Image | None = None  # what a frozen screen keeps showing
        self.crashes: list[str] = []  # app errors, with tracebacks; tests assert it stays empty

    # ------------------------------------------------------------------ test API (not ADB)

    @property
    def system(self) -> SystemSettings:
        """Phone-wide settings: the Settings app's state."""
        st = self._states.get(SETTINGS_PACKAGE)
        return st if isinstance(st, SystemSettings) else self._system_fallback

    @property
    def now(self) -> datetime:
        """The phone's clock: fixed per seed, so screens are reproducible."""
        return self.perturbation.now

    def apps(self) -> list[App[Any]]:
        return list(self._apps.values())

    def state(self, package: str) -> Any:
        """An app's live state object; mutate it to seed a test (the next frame shows it)."""
        with self._lock:  # the frame key includes repr(state), so edits show without a bump
            try:
                return self._states[package]
            except KeyError:
                raise PhoneError(f"no app {package!r} on this phone") from None

    def state_as(self, package: str, kind: type[T]) -> T:
        st = self.state(package)
        if not isinstance(st, kind):
            raise PhoneError(f"{package} state is a {type(st).__name__}, not a {kind.__name__}")
        return st

    def set_state(self, package: str, state: Any) -> None:
        with self._lock:
            app = self._apps.get(package)
            if app is None:
                raise PhoneError(f"no app {package!r} on this phone")
            template = self._states[package]
            if type(state) is not type(template):
                raise PhoneError(f"{package} state must be a {type(template).__name__}, "
                                 f"not a {type(state).__name__}")
            self._states[package] = state
            self._changed()

    def current_screen(self) -> str:
        """'launcher', or 'package/screen' (e.g. 'com.android.settings/notifications')."""
        with self._lock:
            if self._fg is None:
                return "launcher"
            return f"{self._fg}/{self._tasks[self._fg][-1].screen}"

    def screen_params(self) -> dict[str, Any]:
        with self._lock:
            return {} if self._fg is None else dict(self._tasks[self._fg][-1].params)

    def foreground(self) -> str:
        """The package in front ('com.android.launcher3' on the home screen)."""
        with self._lock:
            return self._fg or LAUNCHER_PACKAGE

    @property
    def launcher_page(self) -> int:
        return self._page

    def home_screen_apps(self) -> list[list[str]]:
        """The packages on each home page (every app is in the drawer as well)."""
        return [list(p) for p in self._home_pages]

    def drawer_open(self) -> bool:
        with self._lock:
            return self._fg is None and self._drawer

    def selected_text(self) -> bool:
        """The focused field's whole text is selected (typing replaces it, DEL clears it)."""
        with self._lock:
            self._frame()
            return self._focus is not None and self._selected

    def elements(self) -> list[Element]:
        """Ground truth for the current frame, top layer last. Tests only, never the agent."""
        with self._lock:
            return list(self._frame().layout.elements)

    def find(self, text: str | None = None, *, icon: str | None = None, kind: str | None = None,
             id: str | None = None, clickable: bool | None = None) -> list[Element]:
        """Elements of the current frame matching every given field (text: exact)."""
        out = []
        for el in self.elements():
            if text is not None and el.text != text:
                continue
            if icon is not None and el.icon != icon:
                continue
            if kind is not None and el.kind != kind:
                continue
            if id is not None and el.id != id:
                continue
            if clickable is not None and el.clickable != clickable:
                continue
            out.append(el)
        return out

    def tap_element(self, el: Element) -> None:
        x, y = el.center
        self.tap(x, y)

    def keyboard_visible(self) -> bool:
        with self._lock:
            self._frame()
            return self._focus is not None

    def focused_field(self) -> str | None:
        with self._lock:
            self._frame()
            return self._focus

    def dialog_visible(self) -> bool:
        return self.dialog_box() is not None

    def forget_launches(self) -> None:
        """Forget which apps were launched: the pop-ups and spinners keyed by an app's launch
        count then come as on a new phone."""
        with self._lock:
            self._launches.clear()

    def dialog_box(self) -> tuple[int, int, int, int] | None:
        """The open dialog's box (left, top, right, bottom), or None when there is none."""
        with self._lock:
            return self._frame().modal

    def loading(self) -> bool:
        return self.clock() < self._loading_until

    def settle(self) -> None:
        """End a loading spinner now (tests need not sleep through it)."""
        with self._lock:
            self._loading_until = 0.0
            self._toast = None
            self._changed()

    def open(self, package: str, screen: str | None = None, **params: Any) -> None:
        """Bring an app to the front at a screen, without pop-ups or spinners (test set-up)."""
        with self._lock:
            app = self._app(package)
            if screen is not None and screen not in app.screens:
                raise PhoneError(f"{package} has no screen {screen!r} ({', '.join(app.screens)})")
            stack = self._tasks.setdefault(package, [Entry(app.home)])
            if screen is not None and stack[-1].screen != screen:
                stack.append(Entry(screen, dict(params)))
            self._fg = package
            self._focus = None
            self._changed()

    # ------------------------------------------------------------------ Phone: screen

    def screenshot(self) -> Image.Image:
        """The current frame. Do not draw on it: it is cached and shared between callers."""
        with self._lock:
            if self.faults.frozen and self._last_image is not None:
                return self._last_image  # a frozen screen shows what it last showed, timers or not
            frame = self._frame()
            if self._image_cache is None:
                self._image_cache = self._paint(frame)
            self._last_image = self._image_cache
            return self._image_cache

    def _paint(self, frame: Frame) -> Image.Image:
        prev = self._painted
        if (self.partial_repaint and prev is not None and frame.base_key
                and prev[0] == frame.base_key):
            img = repaint(prev[2], prev[1], frame.base, frame.layout.ops)
        else:
            img = paint(frame.base, frame.layout.ops)
        self._painted = (frame.base_key, frame.layout.ops, img)
        return img

    def orientation(self) -> int:
        return 0

    def use_step_clock(self, frame_s: float = FRAME_S) -> None:
        """Spinners and toasts on phone time that moves one ``frame_s`` a screen read
        (sim/phone/clock.py): the same actions show the same screens on any host."""
        self.step_clock = self.clock = StepClock(frame_s)

    def screen_read(self) -> None:
        if self.step_clock is not None:
            self.step_clock.tick()

    # ------------------------------------------------------------------ Phone: input

    def tap(self, x: int, y: int) -> None:
        with self._lock:
            if self.faults.frozen:
                return
            self._touch(int(x), int(y), long=False)

    def long_press(self, x: int, y: int, duration_ms: int) -> None:
        with self._lock:
            if self.faults.frozen:
                return
            self._touch(int(x), int(y), long=True)

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int) -> None:
        with self._lock:
            if self.faults.frozen:
                return
            dx, dy = int(x2) - int(x1), int(y2) - int(y1)
            slop = Metrics(self.info.density).dp(12)
            if abs(dx) < slop and abs(dy) < slop:  # `input swipe` on one spot is a press
                self._touch(int(x1), int(y1), long=duration_ms >= LONG_PRESS_MS)
                return
            frame = self._frame()
            if frame.loading or frame.modal is not None:
                return
            if self._fg is None:
                self._launcher_swipe(dx, dy, frame)
                return
            if frame.on_swipe is not None:
                on_swipe = frame.on_swipe
                if abs(dy) >= abs(dx):
                    direction = "up" if dy < 0 else "down"
                else:
                    direction = "left" if dx < 0 else "right"
                self._run(lambda: on_swipe(direction))
                self._changed()
                return
            if abs(dy) >= abs(dx) and contains(frame.body, int(x1), int(y1)):
                entry = self._tasks[self._fg][-1]
                entry.scroll = min(frame.max_scroll, max(0, entry.scroll - dy))
                self._changed()

    def _launcher_swipe(self, dx: int, dy: int, frame: Frame) -> None:
        """Home pages sideways; up opens the app drawer, which scrolls and closes at its top."""
        if self._drawer:
            if abs(dy) >= abs(dx):
                if dy > 0 and self._drawer_scroll == 0:
                    self._drawer = False
                else:
                    self._drawer_scroll = min(frame.max_scroll, max(0, self._drawer_scroll - dy))
                self._changed()
            return
        if abs(dx) > abs(dy):
            n = len(self._home_pages)
            self._page = min(n - 1, max(0, self._page + (1 if dx < 0 else -1)))
        elif dy < 0:
            self._drawer, self._drawer_scroll = True, 0
        self._changed()

    def type_text(self, text: str) -> None:
        with self._lock:
            if self.faults.frozen or not isinstance(text, str) or not text:
                return
            fld = self._focused()
            if fld is None:
                return  # nothing focused: the characters go nowhere, as on a phone
            if not fld.multiline:
                text = text.replace("\r", "").replace("\n", " ")
            # Typing over a selection replaces it; otherwise the text goes after the old one.
            value = text if self._selected else fld.value + text
            self._selected = False
            self._run(lambda: fld.on_change(value))
            self._changed()

    def key_combination(self, keycodes_: list[int]) -> None:
        """Keys held together (`input keycombination`): Ctrl+A selects the field's text."""
        with self._lock:
            if self.faults.frozen:
                return
            held = set(keycodes_)
            if held & {keycodes.CTRL_LEFT, keycodes.CTRL_RIGHT} and keycodes.A in held:
                fld = self._focused()
                self._selected = fld is not None and bool(fld.value)
                self._changed()

    def key(self, keycode: int) -> None:
        with self._lock:
            if self.faults.frozen:
                return
            if keycode == keycodes.HOME:
                self._home()
            elif keycode == keycodes.BACK:
                self._back()
            elif keycode in (keycodes.ENTER, keycodes.NUMPAD_ENTER):
                self._enter()
            elif keycode in (keycodes.DEL, keycodes.FORWARD_DEL):
                fld = self._focused()
                if fld is not None and fld.value:
                    shorter = "" if self._selected else fld.value[:-1]
                    change = fld.on_change
                    self._run(lambda: change(shorter))
                self._selected = False
            elif keycode in keycodes.CURSOR_MOVES:
                self._selected = False  # the caret moves: nothing is selected any more
            elif keycode == keycodes.APP_SWITCH:
                pass  # recents is not simulated
            else:
                ch = keycodes.char_for(keycode)
                if ch is not None:
                    self.type_text(ch)
            self._changed()

    # ------------------------------------------------------------------ Phone: activities

    def packages(self) -> list[str]:
        return [LAUNCHER_PACKAGE, *IME_PACKAGES, *self._apps]

    def start_activity(self, component: str) -> str | None:
        with self._lock:
            pkg, _, act = component.partition("/")
            if not pkg or not act:
                return f"Error: Bad component name: {component}"
            full = act if not act.startswith(".") else pkg + act
            short = "." + full[len(pkg) + 1:] if full.startswith(pkg + ".") else full
            if pkg == LAUNCHER_PACKAGE:
                self._home()
                return None
            app = self._apps.get(pkg)
            screen = None
            if app is not None:
                if short == app.activity or full == app.activity:
                    screen = app.home
                else:
                    screen = app.activities.get(short) or app.activities.get(full)
            if app is None or screen is None:
                return f"Error: Activity class {{{pkg}/{full}}} does not exist."
            if self.faults.frozen:
                return None
            self._launch(app, screen)
            return None

    def launch(self, package: str) -> bool:
        with self._lock:
            if package == LAUNCHER_PACKAGE:
                if not self.faults.frozen:
                    self._home()
                return True
            app = self._apps.get(package)
            if app is None:
                return False
            if not self.faults.frozen:
                self._launch(app, None)
            return True

    def force_stop(self, package: str) -> None:
        with self._lock:
            app = self._apps.get(package)
            if app is None or self.faults.frozen:
                return
            self._tasks.pop(package, None)
            if app.on_stop is not None:
                app.on_stop(self._states[package])
            if self._fg == package:
                self._fg = None
                self._focus = None
                self._sys_dialog = None
                self._loading_until = 0.0
            self._changed()

    def home_component(self) -> str:
        return LAUNCHER_COMPONENT

    def launcher_activity(self, package: str) -> str | None:
        if package == LAUNCHER_PACKAGE:
            return LAUNCHER_COMPONENT
        app = self._apps.get(package)
        return app.component() if app is not None else None

    def focused_window(self) -> str:
        with self._lock:
            if self._fg is None:
                return LAUNCHER_COMPONENT
            app = self._apps[self._fg]
            screen = self._tasks[self._fg][-1].screen
            for act, name in app.activities.items():
                if name == screen:
                    return app.component(act)
            return app.component()

    # ------------------------------------------------------------------ Phone: input methods

    def imes(self) -> list[str]:
        return [GBOARD, ADB_KEYBOARD]

    def current_ime(self) -> str:
        return self._ime

    def set_ime(self, ime_id: str) -> bool:
        with self._lock:
            if ime_id not in self.imes():
                return False
            self._ime = ime_id
            self._changed()
            return True

    # ------------------------------------------------------------------ Navigator (for Ctx)

    def nav_go(self, package: str, screen: str, params: dict[str, Any], replace: bool) -> None:
        app = self._app(package)
        if screen not in app.screens:
            raise PhoneError(f"{package} has no screen {screen!r} ({', '.join(app.screens)})")
        stack = self._tasks.setdefault(package, [Entry(app.home)])
        if replace:
            stack[-1] = Entry(screen, dict(params))
        else:
            stack.append(Entry(screen, dict(params)))
        self._focus = None
        self._navs += 1
        self._maybe_loading(package, f"nav/{self._navs}")

    def nav_back(self) -> None:
        """An app finishing its screen (not the BACK key): keyboard and dialog go with it."""
        self._focus = None
        if self._fg is None:
            return
        stack = self._tasks[self._fg]
        stack[-1].dialog = None
        if len(stack) > 1:
            stack.pop()
        else:
            self._fg = None
        self._changed()

    def nav_dialog(self, dialog: Dialog | None) -> None:
        if self._fg is not None:
            self._tasks[self._fg][-1].dialog = dialog
            self._focus = None

    def nav_toast(self, message: str) -> None:
        self._toast = (message, self.clock() + TOAST_S)

    def nav_open_app(self, package: str, screen: str | None, params: dict[str, Any]) -> None:
        app = self._app(package)
        self._launch(app, None, popups=False)
        if screen is not None:
            self.nav_go(package, screen, params, False)

    def nav_state(self, package: str) -> Any:
        return self._states[self._app(package).package]

    # ------------------------------------------------------------------ internals

    def _app(self, package: str) -> App[Any]:
        app = self._apps.get(package)
        if app is None:
            raise PhoneError(f"no app {package!r} on this phone")
        return app

    def _changed(self) -> None:
        self._version += 1

    def _rng(self, name: str) -> random.Random:
        return random.Random(zlib.crc32(f"{self.seed}/{name}".encode()))

    def _launch(self, app: App[Any], screen: str | None, popups: bool = True) -> None:
        fresh = app.package not in self._tasks
        self._drawer = False  # back on the home screen later, the drawer is closed
        stack = self._tasks.setdefault(app.package, [Entry(app.home)])
        if screen is not None and screen != stack[-1].screen:
            if screen == app.home:
                del stack[1:]
            else:
                stack.append(Entry(screen))
        self._fg = app.package
        self._focus = None
        self._toast = None
        self._changed()
        if fresh and popups:
            n = self._launches[app.package] = self._launches.get(app.package, 0) + 1
            self._maybe_popup(app, n)
            self._maybe_loading(app.package, f"launch/{n}")

    def _maybe_popup(self, app: App[Any], n: int) -> None:
        p = self.perturbation
        rng = self._rng(f"popup/{app.package}/{n}")
        if p.popup_chance <= 0 or rng.random() >= p.popup_chance:
            return

        def close() -> None:
            self._sys_dialog = None

        if rng.random() < 0.5:
            self._sys_dialog = Dialog(
                f"Enjoying {app.label}?", "Tap a star to rate it on Google Play. It only takes a moment.",
                (("Not now", close), ("Rate", close)), close, icon="star")
        else:
            self._sys_dialog = Dialog(
                f"Allow {app.label} to send you notifications?", "",
                (("Don't allow", close), ("Allow", close)), close, icon="notifications",
                cancelable=False)

    def _maybe_loading(self, package: str, name: str) -> None:
        p = self.perturbation
        if p.loading_chance > 0 and self._rng(f"loading/{package}/{name}").random() < p.loading_chance:
            self._loading_until = self.clock() + p.loading_s

    def _home(self) -> None:
        if self._fg is None and not self._drawer:
            self._page = 0  # HOME on the home screen goes to the first page
        self._drawer = False
        self._fg = None
        self._focus = None
        self._sys_dialog = None
        self._loading_until = 0.0
        self._toast = None
        self._changed()

    def _back(self) -> None:
        """BACK closes the keyboard, then a dialog, then the screen."""
        if self._focus is not None:
            self._focus = None
        elif self._fg is None and self._drawer:
            self._drawer = False
        elif self._sys_dialog is not None:
            if self._sys_dialog.on_dismiss is not None:
                self._sys_dialog.on_dismiss()
            self._sys_dialog = None
        elif self._fg is not None:
            stack = self._tasks[self._fg]
            frame = self._frame()
            if stack[-1].dialog is not None:
                stack[-1].dialog = None
            elif frame.modal is not None and frame.dismiss is not None:
                frame.dismiss()
            elif len(stack) > 1:
                stack.pop()
            else:
                self._fg = None  # the task stays in the background, as on Android 12+
        self._changed()

    def _enter(self) -> None:
        fld = self._focused()
        if fld is None:
            return
        if fld.on_submit is not None:
            self._run(fld.on_submit)
            if self._focus is not None and self._focus_is_gone():
                self._focus = None
        elif fld.multiline:
            value, change = fld.value + "\n", fld.on_change
            self._run(lambda: change(value))

    def _focus_is_gone(self) -> bool:
        self._changed()
        return self._focus not in self._frame().layout.fields

    def _focused(self) -> TextField | None:
        fields = self._frame().layout.fields  # laying out first applies a screen's autofocus
        fld = fields.get(self._focus) if self._focus else None
        return fld if isinstance(fld, TextField) else None

    def _request_focus(self, fid: str) -> None:
        # Focusing a field that selects on focus selects its text (Chrome's omnibox); a tap
        # on the field already focused puts the caret there instead.
        self._select_pending = fid != self._focus
        self._selected = False
        self._focus = fid
        self._reveal = True
        self._shift = False
        self._symbols = False

    def _touch(self, x: int, y: int, long: bool) -> None:
        self.last_touch = (x, y)
        frame = self._frame()
        for hit in reversed(frame.nav_hits):
            if contains(hit.box, x, y):
                if hit.on_tap is not None:
                    self._run(hit.on_tap)
                self._changed()
                return
        if frame.loading:
            return  # a spinner: taps are ignored until the content arrives
        in_keyboard = frame.keyboard is not None and contains(frame.keyboard, x, y)
        if frame.modal is not None and not contains(frame.modal, x, y) and not in_keyboard:
            if frame.dismiss is not None:
                self._run(frame.dismiss)
                self._changed()
            return
        for hit in reversed(frame.hits):
            if contains(hit.box, x, y):
                action = hit.on_long_press if long else hit.on_tap
                if action is not None:
                    self._run(action)
                    self._changed()
                return

    # ------------------------------------------------------------------ layout

    def _frame(self) -> Frame:
        now = self.clock()
        loading = now < self._loading_until
        toast = self._toast is not None and now < self._toast[1]
        key = (self._version, loading, toast, repr(self._states), self._ime)
        if self._frame_cache is not None and key == self._frame_key:
            return self._frame_cache
        frame = self._layout_guarded(loading, toast)
        entry = self._tasks[self._fg][-1] if self._fg is not None else None
        if entry is not None and not entry.autofocused and not loading:
            entry.autofocused = True
            want = frame.autofocus
            if want is not None and want in frame.layout.fields and frame.modal is None:
                self._request_focus(want)
                frame = self._layout_guarded(loading, toast)
        if self._focus is not None and self._focus not in frame.layout.fields:
            self._focus = None  # the field went away: so does the keyboard
            frame = self._layout_guarded(loading, toast)
        if self._select_pending:
            self._select_pending = False
            fld = frame.layout.fields.get(self._focus or "")
            if isinstance(fld, TextField) and fld.select_on_focus and fld.value:
                self._selected = True
                frame = self._layout_guarded(loading, toast)
        if self._focus is None:
            self._selected = False
        if self._reveal and self._focus is not None and entry is not None:
            frame = self._reveal_focus(frame, entry, loading, toast)
        self._reveal = False
        self._frame_key = (self._version, loading, toast, repr(self._states), self._ime)
        self._frame_cache = frame
        self._image_cache = None
        return frame

    def _reveal_focus(self, frame: Frame, entry: Entry, loading: bool, toast: bool) -> Frame:
        """Scroll the focused field into view above the keyboard, as adjustResize does."""
        box = frame.layout.field_boxes.get(self._focus or "")
        if box is None:
            return frame
        margin = frame.layout.dp(16)
        top, bottom = frame.body[1], frame.body[3]
        if box[3] > bottom:
            entry.scroll += box[3] - bottom + margin
        elif box[1] < top:
            entry.scroll = max(0, entry.scroll - (top - box[1] + margin))
        else:
            return frame
        return self._layout_guarded(loading, toast)

    def _layout_guarded(self, loading: bool, toast: bool) -> Frame:
        try:
            return self._layout(loading, toast)
        except _AppCrash as e:
            self._crash(e)
            return self._layout(False, True)

    def _crash(self, e: _AppCrash) -> None:
        """Like Android: the app stops, the launcher shows, and a toast says so."""
        cause = e.__cause__ if e.__cause__ is not None else e
        self.crashes.append("".join(traceback.format_exception(cause)))
        app = self._apps.get(e.package)
        self._tasks.pop(e.package, None)
        self._fg = None
        self._focus = None
        self._sys_dialog = None
        self._loading_until = 0.0
        self._toast = (f"{app.label if app else e.package} keeps stopping", self.clock() + TOAST_S)
        self._changed()

    def _run(self, action: Callable[[], None]) -> None:
        """Run an app callback; an exception crashes the app, never the ADB server."""
        pkg = self._fg
        try:
            action()
        except _AppCrash as e:
            self._crash(e)
        except Exception as e:
            crash = _AppCrash(pkg or LAUNCHER_PACKAGE, e)
            crash.__cause__ = e
            self._crash(crash)

    def _layout(self, loading: bool, toast: bool) -> Frame:
        sysset = self.system
        theme = DARK if sysset.dark_mode else LIGHT
        W, H = self.info.width, self.info.height
        metrics = Metrics(self.info.density, sysset.font_scale)
        lay = Layout(metrics, theme, W, H, request_focus=self._request_focus, focus=self._focus,
                     selected=self._selected)
        nav_h = lay.dp(systemui.NAV_DP)
        status_h = lay.dp(systemui.STATUS_DP)
        bottom = H - nav_h
        modal: Box | None = None
        dismiss: Action | None = None
        on_swipe: Callable[[str], None] | None = None
        autofocus: str | None = None
        keyboard: Box | None = None
        body: Box = (0, status_h, W, bottom)
        max_scroll = 0
        base_key: tuple[Any, ...]
        if self._fg is None and self._drawer:
            base = Image.new("RGB", (W, H), theme.bg)
            base_key = ("solid", W, H, theme.bg)
            max_scroll = layout_drawer(lay, drawer_order(list(self._apps.values())), theme,
                                       self._drawer_scroll, status_h, bottom,
                                       self._launch_from_home, self._home_search)
            self._drawer_scroll = min(self._drawer_scroll, max_scroll)
            loading = False
        elif self._fg is None:
            base = wallpaper(W, H, theme.dark)
            base_key = ("wallpaper", W, H, theme.dark)
            npages = len(self._home_pages)
            self._page = min(self._page, npages - 1)
            apps = [self._apps[p] for p in self._home_pages[self._page]]
            layout_launcher(lay, apps, self._page, self.now, status_h, bottom, self._launch_from_home,
                            self._home_search, npages)
            loading = False
        else:
            app = self._apps[self._fg]
            entry = self._tasks[self._fg][-1]
            ctx: Ctx[Any] = Ctx(app, self._states[self._fg], entry.params, self.seed,
                                self.perturbation.shuffle_launcher, sysset, self.now, self)
            try:
                screen = app.screens[entry.screen](ctx)
                if not isinstance(screen, Screen):
                    raise TypeError(f"screen {entry.screen!r} returned {type(screen).__name__}, "
                                    "not a Screen")
            except Exception as e:
                raise _AppCrash(app.package, e) from e
            bg = hex_rgb(screen.background) if screen.background else theme.bg
            base = Image.new("RGB", (W, H), bg)
            base_key = ("solid", W, H, bg)
            on_swipe = screen.on_swipe
            autofocus = screen.autofocus
            try:
                body, max_scroll, modal, dismiss, keyboard = self._layout_app(
                    lay, screen, entry, status_h, bottom, loading)
            except Exception as e:
                raise _AppCrash(app.package, e) from e
        on_wallpaper = self._fg is None and not self._drawer
        systemui.status_bar(lay, sysset, self.now, on_wallpaper=on_wallpaper)
        if self._sys_dialog is not None and self._fg is not None:
            modal = systemui.dialog(lay, self._sys_dialog)
            dismiss = self._sys_dialog.on_dismiss if self._sys_dialog.cancelable else None
        if toast and self._toast is not None:
            systemui.toast(lay, self._toast[0], bottom)
        first_nav = len(lay.hits)
        systemui.nav_bar(lay, lambda: self._back(), lambda: self._home(), lambda: None,
                         on_wallpaper=on_wallpaper)
        nav_hits = lay.hits[first_nav:]
        hits = lay.hits[:first_nav]
        return Frame(lay, base, hits, nav_hits, modal, dismiss, body, max_scroll, on_swipe, loading,
                     autofocus, keyboard, base_key)

    def _layout_app(self, lay: Layout, screen: Screen, entry: Entry, status_h: int, bottom: int,
                    loading: bool) -> tuple[Box, int, Box | None, Action | None, Box | None]:
        W = lay.width
        theme = lay.theme
        y = status_h
        # reserve the bottom: keyboard (when a field is focused), then the bottom nav
        kb_h = 0
        if self._focus is not None:
            kb_h = lay.dp(systemui.ADB_KEYBOARD_DP if self._ime == ADB_KEYBOARD else systemui.KEYBOARD_DP)
        bn_h = lay.dp(systemui.BOTTOM_NAV_DP) if screen.bottom is not None and not kb_h else 0
        body_bottom = bottom - kb_h - bn_h
        # body first (it scrolls under the bars, which are painted over it)
        if screen.full_screen:
            top_h = 0
        elif screen.top is not None:
            top_h = lay.dp(72)
        else:
            top_h = lay.dp(systemui.TOP_BAR_DP) + (lay.dp(56) if screen.large_title else 0)
        header_top = y + top_h
        scratch = Layout(lay.metrics, theme, W, lay.height, focus=self._focus)
        header_h = sum(w.place(scratch, 0, 0, W) for w in screen.header)
        body_top = header_top + header_h
        body: Box = (0, body_top, W, body_bottom)
        if loading:
            systemui.spinner(lay, body)
            content_h = 0
        else:
            lay.clip = body
            cy = body_top - entry.scroll
            for w in screen.body:
                cy += w.place(lay, 0, cy, W)
            content_h = cy + entry.scroll - body_top
            content_h += lay.dp(88) if screen.fab is not None else lay.dp(16)
            lay.clip = None
        max_scroll = max(0, content_h - (body_bottom - body_top))
        if entry.scroll > max_scroll:
            entry.scroll = max_scroll
        # fixed parts over the body
        bg = hex_rgb(screen.background) if screen.background else theme.bg
        if not screen.full_screen:
            lay.rect((0, status_h, W, body_top), bg)
            if screen.top is not None:
                screen.top.place(lay, 0, y, W)
            else:
                systemui.top_bar(lay, y, screen.title, self._back if screen.back else None,
                                 list(screen.actions), screen.large_title)
        else:
            lay.rect((0, 0, W, status_h), (0, 0, 0) if screen.background is None else bg)
        hy = header_top
        for w in screen.header:
            hy += w.place(lay, 0, hy, W)
        if screen.bottom is not None and not kb_h:
            systemui.bottom_nav(lay, bottom, screen.bottom)
        if screen.fab is not None and not kb_h and not loading:
            systemui.fab(lay, body_bottom, screen.fab)
        modal: Box | None = None
        dismiss: Action | None = None
        d = entry.dialog or screen.dialog
        if d is not None and not loading:
            modal = systemui.dialog(lay, d)
            if d.cancelable:
                dismiss = (lambda: setattr(entry, "dialog", None)) if entry.dialog is not None \
                    else d.on_dismiss
        keyboard: Box | None = None
        if kb_h:  # drawn over a dialog, as the IME window is above the app's windows
            keyboard = (0, bottom - kb_h, W, bottom)
            if self._ime == ADB_KEYBOARD:
                systemui.adb_keyboard(lay, bottom)
            else:
                systemui.keyboard(lay, bottom, self._shift, self._symbols, self._key_char,
                                  lambda: self.key(keycodes.DEL), self._editor_action,
                                  self._toggle_shift, self._toggle_symbols, self._enter_icon(lay))
        return body, max_scroll, modal, dismiss, keyboard

    def _enter_icon(self, lay: Layout) -> str:
        """The action key's face, as Gboard draws the field's IME action: a magnifier for a
        search, a return arrow for a field that submits or takes lines, a check mark for
        Done (a plain single-line field)."""
        fld = lay.fields.get(self._focus) if self._focus else None
        if isinstance(fld, TextField) and fld.on_submit is not None:
            return "search" if "search" in fld.id else "keyboard_return"
        if isinstance(fld, TextField) and not fld.multiline:
            return "done"
        return "keyboard_return"

    def _editor_action(self) -> None:
        """The soft keyboard's action key (not the ENTER key event, see ``key``): the IME
        performs the field's editor action. A field that submits (a search box: actionSearch)
        submits, a multi-line one takes a new line, and a plain single-line field is Done:
        TextView's default for IME_ACTION_DONE hides the keyboard (here, as BACK does, the
        field's focus goes with it)."""
        fld = self._focused()
        if fld is None:
            return
        if fld.on_submit is not None or fld.multiline:
            self._enter()
        else:
            self._focus = None
        self._changed()

    def _key_char(self, ch: str) -> None:
        self.type_text(ch)
        if self._shift:
            self._shift = False

    def _toggle_shift(self) -> None:
        self._shift = not self._shift

    def _toggle_symbols(self) -> None:
        self._symbols = not self._symbols

    def _launch_from_home(self, package: str) -> None:
        self._launch(self._apps[package], None)

    def _home_search(self) -> None:
        chrome = self._apps.get("com.android.chrome")
        if chrome is not None:
            self._launch(chrome, None)
            if "search" in chrome.screens:
                self.nav_go(chrome.package, "search", {}, False)

    def __repr__(self) -> str:
        return f"SimPhone({self.info.serial!r}, seed={self.seed})"

