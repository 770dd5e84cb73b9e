"""Device profiles: which real phone a simulated phone answers as (`--device-profile NAME`).

A profile is data: the phone's identity (getprop), its screen, its launcher, and which of
the real output forms its Android version and vendor print (``dumpsys window``'s layout,
Samsung's ``dumpsys power`` line, the displays SurfaceFlinger lists, whether monkey finds
hardware keys, whether ``input`` needs Xiaomi's security switch). The templates the forms
fill in are in sim/adb/system.py, each beside the real output it copies. ``sim`` is the
default phone, answering exactly as the simulated phone always has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Which `dumpsys window` layout: "sim" the default phone's own (focus lines after one
# window block, whatever the section asked); "a10" Android 10 (mCurrentFocus at the end
# of `dumpsys window windows`); "a13" Android 13/14 (`windows` is Window #N blocks only,
# mCurrentFocus moved to `dumpsys window displays`).
WindowForm = Literal["sim", "a10", "a13"]

# `dumpsys SurfaceFlinger --display-id`'s id of the emulator's display, from
# openatx/adbutils@7c43ec68:adbutils/screenshot.py (tests/data/adb_outputs.toml).
EMULATOR_DISPLAY_ID = "4619827259835644672"


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    summary: str
    manufacturer: str
    brand: str
    model: str
    device: str
    sdk: int
    release: str
    width: int
    height: int
    density: int
    # what HOME resolves to, `pkg/.Activity`; None: the simulated phone's own launcher
    launcher: str | None = None
    window_form: WindowForm = "a13"
    # Samsung prints `getWakefulnessLocked()=Awake` where AOSP prints `mWakefulness=Awake`
    samsung_power: bool = False
    # (id, HWC display, port, pnpId, displayName) per display, first the default one
    displays: tuple[tuple[str, int, int, str, str], ...] = (
        (EMULATOR_DISPLAY_ID, 0, 0, "GGL", "EMU_display_0"),)
    hardware_keys: bool = False  # monkey's SYS_KEYS events need physical keys
    am_unresolved_status: int = 0  # real `am start` exits 0 on an unresolvable intent
    # Xiaomi: `input` is refused until "USB debugging (Security settings)" is on
    needs_usb_security: bool = False
    real: bool = True  # False only for `sim`: the forms below are the simulator's own
    # the USB serial every unit of this model reports (a shared factory serial); "":
    # each phone its own (SimFleet makes them unique across processes)
    factory_serial: str = ""

    @property
    def product(self) -> str:
        return self.device

    @property
    def launcher_package(self) -> str | None:
        return self.launcher.partition("/")[0] if self.launcher else None


# The default phone: what `mobagent sim` always was (its own dumpsys layout, monkey that
# never checks keys, `am start` that exits 1 on an unresolvable intent).
SIM = DeviceProfile(
    name="sim", summary="the simulator's own phone (default; its outputs as before profiles)",
    manufacturer="MobAgent", brand="mobagent", model="MobAgent_Sim", device="mobagent_sim",
    sdk=34, release="14", width=1080, height=2400, density=420, window_form="sim",
    hardware_keys=True, am_unresolved_status=1, real=False)

# Launchers: Pixel's is the mCurrentFocus of Pixel dumps (com.google.android.apps.
# nexuslauncher/.NexusLauncherActivity); One UI's com.sec.android.app.launcher with its
# activities.LauncherActivity; MIUI/HyperOS's com.miui.home/.launcher.Launcher (the top
# activity in https://github.com/bytedance/Fastbot_Android/issues/119).
PIXEL_LAUNCHER = "com.google.android.apps.nexuslauncher/.NexusLauncherActivity"

PROFILES: dict[str, DeviceProfile] = {p.name: p for p in (
    SIM,
    DeviceProfile(
        name="pixel-14", summary="Pixel 8 on Android 14 (sdk 34)",
        manufacturer="Google", brand="google", model="Pixel 8", device="shiba",
        sdk=34, release="14", width=1080, height=2400, density=420,
        launcher=PIXEL_LAUNCHER),
    DeviceProfile(
        name="samsung-13", summary="Galaxy S22 on Android 13 (One UI 5), Samsung's dumpsys power",
        manufacturer="samsung", brand="samsung", model="SM-S901B", device="r0s",
        sdk=33, release="13", width=1080, height=2340, density=420,
        launcher="com.sec.android.app.launcher/.activities.LauncherActivity",
        samsung_power=True),
    DeviceProfile(
        name="xiaomi-hyperos",
        summary="Xiaomi 14 on HyperOS (Android 14): input and ime set refused until USB "
                "debugging (Security settings) is on",
        manufacturer="Xiaomi", brand="Xiaomi", model="23127PN0CG", device="houji",
        sdk=34, release="14", width=1200, height=2670, density=480,
        launcher="com.miui.home/.launcher.Launcher", needs_usb_security=True),
    DeviceProfile(
        name="foldable-14",
        summary="Pixel Fold on Android 14: two displays, screencap warns without -d",
        manufacturer="Google", brand="google", model="Pixel Fold", device="felix",
        sdk=34, release="14", width=1080, height=2092, density=420,
        launcher=PIXEL_LAUNCHER,
        # the line format of the real one-display outputs, one line per display; no
        # real two-display output was found, so these two ids (port 0 outer, port 1
        # inner) are ours
        displays=((EMULATOR_DISPLAY_ID, 0, 0, "GGL", "Outer Display"),
                  ("4619827259835644673", 1, 1, "GGL", "Inner Display"))),
    DeviceProfile(
        name="android-10", summary="Pixel 3a on Android 10 (sdk 29)",
        manufacturer="Google", brand="google", model="Pixel 3a", device="sargo",
        sdk=29, release="10", width=1080, height=2220, density=440,
        launcher=PIXEL_LAUNCHER, window_form="a10"),
    # Low-cost phones that all report the factory serial 0123456789ABCDEF: two side by
    # side in `adb devices` (https://github.com/camalot/madb/issues/1), with their
    # transport ids (https://github.com/pbreault/adb-idea/issues/100), "cheap Chinese
    # devices". Their builds are AOSP's, so the Android 10 forms; the name is generic
    # (MediaTek's reference builds say "alps"), the shared serial is the point.
    DeviceProfile(
        name="lowcost-10",
        summary="a low-cost Android 10 phone reporting the shared factory serial "
                "0123456789ABCDEF",
        manufacturer="alps", brand="alps", model="Android 10 Go", device="k62v1_64",
        sdk=29, release="10", width=720, height=1600, density=320,
        launcher=PIXEL_LAUNCHER, window_form="a10", factory_serial="0123456789ABCDEF"),
)}


def profile_named(name: str) -> DeviceProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown device profile {name!r} ({', '.join(PROFILES)})") from None
