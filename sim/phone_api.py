"""The contract between the simulated phone (sim/phone/) and its ADB front end (sim/adb/).

The ADB side parses wire bytes and shell lines and calls these methods with plain,
already-unescaped values; the phone side owns screens, apps, state and rendering.
Methods are called from the ADB server's threads, so an implementation serialises them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from PIL import Image


@dataclass
class Faults:
    """Fault injection switches, flipped by tests through the test API."""

    drop_connections: bool = False  # the ADB transport closes every connection and refuses new ones
    refuse_screencap: bool = False  # screencap fails with a non-zero exit
    corrupt_screencap: bool = False  # screencap returns truncated/garbled bytes
    frozen: bool = False  # the screen stops changing; input is accepted but does nothing
    slow_s: float = 0.0  # extra delay added to every shell command


@dataclass
class LatencyProfile:
    """Per-command delays applied by the ADB side; 'instant' is all zeros."""

    name: str = "instant"
    screencap_s: float = 0.0
    input_s: float = 0.0
    other_s: float = 0.0

    @classmethod
    def named(cls, name: str) -> LatencyProfile:
        if name == "instant":
            return cls()
        if name == "realistic":
            return cls(name="realistic", screencap_s=0.25, input_s=0.05, other_s=0.02)
        raise ValueError(f"unknown latency profile {name!r} (instant, realistic)")


@dataclass
class DeviceInfo:
    serial: str
    product_name: str = "mobagent_sim"
    model: str = "MobAgent_Sim"
    device: str = "mobagent_sim"
    width: int = 1080
    height: int = 2400
    density: int = 420
    sdk: int = 34
    release: str = "14"
    props: dict[str, str] = field(default_factory=dict)


class Phone(Protocol):
    info: DeviceInfo
    faults: Faults
    latency: LatencyProfile

    # screen
    def screenshot(self) -> Image.Image:
        """The current screen as an RGB(A) image of info.width x info.height."""
        ...

    def orientation(self) -> int:  # 0..3, as `dumpsys display` reports it
        ...

    # input (coordinates in screen pixels)
    def tap(self, x: int, y: int) -> None: ...
    def long_press(self, x: int, y: int, duration_ms: int) -> None: ...
    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int) -> None: ...
    def type_text(self, text: str) -> None:
        """Literal text into the focused field; no focused field types nothing."""
        ...

    def key(self, keycode: int) -> None: ...
    def key_combination(self, keycodes: list[int]) -> None:
        """Keys held down together (`input keycombination`), e.g. Ctrl+A."""
        ...

    # activities and packages
    def packages(self) -> list[str]: ...
    def start_activity(self, component: str) -> str | None:
        """Start 'pkg/.Activity'; return None on success or an am-style error line."""
        ...

    def launch(self, package: str) -> bool:
        """Start a package's launcher activity (monkey); False if not installed."""
        ...

    def force_stop(self, package: str) -> None: ...
    def focused_window(self) -> str:
        """'pkg/pkg.Activity' of the focused window, for dumpsys' mCurrentFocus line."""
        ...

    # input methods
    def imes(self) -> list[str]: ...
    def current_ime(self) -> str: ...
    def set_ime(self, ime_id: str) -> bool: ...
