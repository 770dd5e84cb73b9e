"""The contract between the simulated phone (sim/phone/) and its ADB front end (sim/adb/).

The ADB side parses wire bytes and shell lines and calls these methods with plain,
already-unescaped values; the phone side owns screens, apps, state and rendering.
Methods are called from the ADB server's threads, so an implementation serialises them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Literal, Protocol

from PIL import Image

from sim.device_cost import DeviceCost
from sim.profiles import SIM, DeviceProfile, profile_named

IME_WARMUP_S = 0.4  # how long the real ADB Keyboard drops broadcasts after `ime set`


@dataclass
class Faults:
    """Fault injection switches, flipped by tests through the test API."""

    drop_connections: bool = False  # the ADB transport closes every connection and refuses new ones
    refuse_screencap: bool = False  # screencap fails with a non-zero exit
    corrupt_screencap: bool = False  # screencap returns truncated/garbled bytes
    frozen: bool = False  # the screen stops changing; input is accepted but does nothing
    slow_s: float = 0.0  # extra delay added to every shell command
    # adbd answers CNXN with AUTH (a token) and never accepts a key: `adb devices` lists
    # the phone as `unauthorized`, as a phone whose "Allow USB debugging?" is not tapped
    unauthorized: bool = False
    # the ADB Keyboard drops ADB_INPUT_* broadcasts for this long after `ime set`, as the
    # real app does before its service is up (IME_WARMUP_S is the real app's order)
    ime_warmup_s: float = 0.0
    # Raised by one: every scrcpy server running on the phone dies at once, as `kill -9` of
    # its app_process (its sockets close, its shell ends with 137); one started later runs.
    # A count, not a switch, so a kill is one event however fast the client restarts it.
    scrcpy_kills: int = 0


AdbKeyboard = Literal["enabled", "disabled", "absent"]


@dataclass
class DeviceState:
    """What a phone is doing besides its apps: power, lock, keyboards, security switches.
    Flipped by tests (the test API), the fleet and the CLI; the ADB side obeys it."""

    awake: bool = True  # asleep: frames are black, input does nothing but wake keys
    locked: bool = False  # the keyguard is up
    pin: str | None = None  # with a PIN the keyguard stays until the PIN is typed
    adb_keyboard: AdbKeyboard = "enabled"  # absent: not installed; disabled: not in `ime list -s`
    usb_security: bool = False  # Xiaomi's "USB debugging (Security settings)" switch
    bouncer: bool = False  # the PIN pad is up (a swipe on a PIN keyguard)
    typed: str = ""  # what was typed on the PIN pad
    ime_set_at: float = float("-inf")  # monotonic time of the last `ime set`
    clipboard: str = ""  # the primary clip's text (scrcpy's SET_CLIPBOARD, PASTE)
    streams: int = 0  # scrcpy servers running (the host reads the screen with no screencap)


@dataclass
class LatencyProfile:
    """Per-command delays applied by the ADB side; 'instant' is all zeros.

    With ``cost`` (a real phone's own costs, sim/device_cost.py) screencap and ``input``
    are charged by it and their flat delays here are not; without it the flat ones apply.
    'realistic' has both: the cost model on one USB 2 hub, and the flat delays for a
    caller that turns the model off (``cost = None``)."""

    name: str = "instant"
    screencap_s: float = 0.0
    input_s: float = 0.0
    other_s: float = 0.0
    cost: DeviceCost | None = None

    @classmethod
    def named(cls, name: str) -> LatencyProfile:
        if name == "instant":
            return cls()
        if name == "realistic":
            # one hub per profile: SimFleet's phones copy the profile and share it
            return cls(name="realistic", screencap_s=0.25, input_s=0.05, other_s=0.02,
                       cost=DeviceCost.usb2())
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
    profile: DeviceProfile = SIM  # which real phone the ADB side answers as
    serialno: str = ""  # ro.serialno, the USB serial ("": ``serial``); SimFleet's are unique
    # /proc/sys/kernel/random/boot_id: the kernel's random UUID of this boot (one per phone)
    boot_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @classmethod
    def for_profile(cls, serial: str, profile: DeviceProfile | str) -> DeviceInfo:
        """The info of a phone answering as ``profile`` (its name or itself)."""
        p = profile_named(profile) if isinstance(profile, str) else profile
        return cls(serial=serial, product_name=p.product, model=p.model, device=p.device,
                   width=p.width, height=p.height, density=p.density, sdk=p.sdk,
                   release=p.release, profile=p, serialno=p.factory_serial)


class Phone(Protocol):
    info: DeviceInfo
    faults: Faults
    latency: LatencyProfile
    device_state: DeviceState

    # screen
    def screenshot(self) -> Image.Image:
        """The current screen as an RGB(A) image of info.width x info.height."""
        ...

    def orientation(self) -> int:  # 0..3, as `dumpsys display` reports it
        ...

    def screen_read(self) -> None:
        """adb read the screen (``screencap``): a step clock moves (sim/phone/clock.py)."""
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
    def home_component(self) -> str:
        """'pkg/pkg.Activity' of the phone's own launcher (what HOME shows)."""
        ...

    def launcher_activity(self, package: str) -> str | None:
        """'pkg/pkg.Activity' that launches ``package`` (monkey's), None if it has none."""
        ...

    def focused_window(self) -> str:
        """'pkg/pkg.Activity' of the focused window, for dumpsys' mCurrentFocus line."""
        ...

    # input methods
    def imes(self) -> list[str]: ...
    def current_ime(self) -> str: ...
    def set_ime(self, ime_id: str) -> bool: ...
