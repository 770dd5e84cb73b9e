"""A stand-in for the simulated phone: a solid colour screen that records every call.

Behind the real ADB side (``sim/adb/``), where a test or a benchmark needs many phones that
cost nothing to render and whose received taps, swipes and text can be read back
(``calls_of``). ``recording_phone`` is a ``sim.fleet`` phone factory that builds them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from sim.phone_api import DeviceInfo, DeviceState, Faults, LatencyProfile, Phone

INPUT_CALLS = ("tap", "long_press", "swipe", "type_text", "key", "key_combination")
# far apart after H.264 and a PNG: the number of inputs (mod 6) is read back from a frame
INPUT_COLOURS = ((220, 40, 40), (40, 200, 40), (40, 40, 220), (220, 220, 40), (40, 220, 220),
                 (220, 40, 220))


def inputs_shown(rgb: Any) -> int:
    """The number of inputs (mod 6) a ``shows_input`` phone's screenshot shows."""
    mean = rgb.reshape(-1, 3).mean(axis=0)
    return min(range(len(INPUT_COLOURS)),
               key=lambda i: sum((float(m) - c) ** 2 for m, c in zip(mean, INPUT_COLOURS[i],
                                                                     strict=True)))


@dataclass
class RecordingPhone:
    """A stand-in for the real simulated phone: a solid colour screen that records calls."""

    info: DeviceInfo
    faults: Faults = field(default_factory=Faults)
    latency: LatencyProfile = field(default_factory=LatencyProfile)
    device_state: DeviceState = field(default_factory=DeviceState)
    colour: tuple[int, int, int] = (30, 120, 200)
    calls: list[tuple[object, ...]] = field(default_factory=list)
    installed: list[str] = field(default_factory=lambda: [
        "com.android.settings", "com.mobagent.notes", "com.mobagent.browser",
        "com.android.adbkeyboard"])
    home: str = "com.mobagent.launcher/com.mobagent.launcher.Launcher"
    focus: str = "com.mobagent.launcher/com.mobagent.launcher.Launcher"
    ime_ids: list[str] = field(default_factory=lambda: [
        "com.android.inputmethod.latin/.LatinIME", "com.android.adbkeyboard/.AdbIME"])
    ime: str = "com.android.inputmethod.latin/.LatinIME"
    rotation: int = 0
    # The screen's colour is INPUT_COLOURS[inputs received % 6], and screenshots are not
    # recorded: every tap, key or text visibly changes the screen, as on an app that counts
    # them (a streamed screen, polled 60 times a second, is then cheap and shows each input).
    shows_input: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _inputs: int = 0
    _images: dict[int, Image.Image] = field(default_factory=dict)

    def _record(self, *call: object) -> None:
        with self._lock:
            self.calls.append(call)
            if call[0] in INPUT_CALLS:
                self._inputs += 1

    @property
    def inputs(self) -> int:
        """Taps, presses, swipes, keys and texts received."""
        with self._lock:
            return self._inputs

    def calls_of(self, name: str) -> list[tuple[object, ...]]:
        with self._lock:
            return [c[1:] for c in self.calls if c[0] == name]

    def screenshot(self) -> Image.Image:
        if self.shows_input:
            shown = self.inputs % len(INPUT_COLOURS)
            with self._lock:  # one image per colour: the stream's encoder sees it unchanged
                img = self._images.get(shown)
                if img is None:
                    img = self._images[shown] = Image.new(
                        "RGB", (self.info.width, self.info.height), INPUT_COLOURS[shown])
            return img
        self._record("screenshot")
        return Image.new("RGB", (self.info.width, self.info.height), self.colour)

    def orientation(self) -> int:
        return self.rotation

    def screen_read(self) -> None:
        """No clock to move: nothing here lasts a while on screen."""

    def tap(self, x: int, y: int) -> None:
        self._record("tap", x, y)

    def long_press(self, x: int, y: int, duration_ms: int) -> None:
        self._record("long_press", x, y, duration_ms)

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int) -> None:
        self._record("swipe", x1, y1, x2, y2, duration_ms)

    def type_text(self, text: str) -> None:
        self._record("type_text", text)

    def key(self, keycode: int) -> None:
        self._record("key", keycode)

    def key_combination(self, keycodes: list[int]) -> None:
        self._record("key_combination", tuple(keycodes))

    def packages(self) -> list[str]:
        return list(self.installed)

    def start_activity(self, component: str) -> str | None:
        pkg, _, act = component.partition("/")
        if pkg not in self.installed or not act:
            return (f"Error type 3\nError: Activity class {{{component}}} does not exist.")
        self._record("start_activity", component)
        self.focus = f"{pkg}/{pkg + act if act.startswith('.') else act}"
        return None

    def launch(self, package: str) -> bool:
        if package not in self.installed:
            return False
        self._record("launch", package)
        self.focus = f"{package}/{package}.MainActivity"
        return True

    def force_stop(self, package: str) -> None:
        self._record("force_stop", package)

    def home_component(self) -> str:
        return self.home

    def launcher_activity(self, package: str) -> str | None:
        if package == self.home.partition("/")[0]:
            return self.home
        return f"{package}/{package}.MainActivity" if package in self.installed else None

    def focused_window(self) -> str:
        return self.focus

    def imes(self) -> list[str]:
        return list(self.ime_ids)

    def current_ime(self) -> str:
        return self.ime

    def set_ime(self, ime_id: str) -> bool:
        if ime_id not in self.ime_ids:
            return False
        self.ime = ime_id
        return True


def _check_phone(p: RecordingPhone) -> Phone:
    return p  # mypy checks that the stand-in satisfies the Protocol


def recording_phone(info: DeviceInfo, seed: int = 0) -> RecordingPhone:
    """A sim.fleet phone factory that builds stand-ins; the colour tells phones apart."""
    n = sum(map(ord, info.serial)) + seed
    return RecordingPhone(info, colour=(n * 37 % 256, n * 91 % 256, n * 13 % 256))
