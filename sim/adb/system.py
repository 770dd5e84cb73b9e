"""The phone's system side as its profile prints it: power, keyguard, windows, displays,
input methods, intent resolution; and what the phone's DeviceState does to frames and input.

Every template below copies a real output (its source is named beside it; the same
sources are in tests/data/adb_outputs.toml) and fills in the simulated phone's values.
Where no real output of a form was found, the template follows the AOSP code that prints
it, and says so.
"""

from __future__ import annotations

import threading
import time

from PIL import Image, ImageDraw

from devices.adb import ADB_KEYBOARD
from sim.phone_api import DeviceState, Phone
from sim.profiles import DeviceProfile

ADB_KEYBOARD_PACKAGE = ADB_KEYBOARD.partition("/")[0]
HOME_CATEGORY = "android.intent.category.HOME"

KEY_POWER, KEY_SLEEP, KEY_WAKEUP, KEY_MENU = 26, 223, 224, 82
KEY_ENTER, KEY_DEL, KEY_0, KEY_9 = 66, 67, 7, 16


def profile(phone: Phone) -> DeviceProfile:
    return phone.info.profile


# ---- components ------------------------------------------------------------------------


def full_component(component: str) -> str:
    """'pkg/.Act' -> 'pkg/pkg.Act' (window titles print the class in full)."""
    pkg, _, cls = component.partition("/")
    return f"{pkg}/{pkg}{cls}" if cls.startswith(".") else component


def short_component(component: str) -> str:
    """'pkg/pkg.Act' -> 'pkg/.Act' (ComponentName.flattenToShortString)."""
    pkg, _, cls = component.partition("/")
    return f"{pkg}/{cls[len(pkg):]}" if cls.startswith(pkg + ".") else component


def home_component(phone: Phone) -> str:
    """What HOME resolves to: the profile's launcher, else the phone's own."""
    launcher = profile(phone).launcher
    return full_component(launcher) if launcher else phone.home_component()


def app_component(phone: Phone) -> str:
    """The focused app, with the phone's launcher shown as the profile's."""
    focus = phone.focused_window()
    return home_component(phone) if focus == phone.home_component() else focus


def focus_window(phone: Phone) -> str:
    """The title of the focused window: SystemUI's keyguard window over a locked phone
    (Android 11+ `NotificationShade`, Android 10 `StatusBar`: both in
    devices/adb_output.py's SystemUI windows, the first from
    https://github.com/kaeawc/auto-mobile/issues/6078)."""
    if phone.device_state.locked:
        return "StatusBar" if profile(phone).window_form == "a10" else "NotificationShade"
    return app_component(phone)


def own_package(phone: Phone, package: str) -> str:
    """The phone's package for one the ADB side names (the profile's launcher -> the phone's)."""
    if package == profile(phone).launcher_package:
        return phone.home_component().partition("/")[0]
    return package


def packages(phone: Phone) -> list[str]:
    """Installed packages, with the profile's launcher and without an absent ADB Keyboard."""
    out = phone.packages()
    launcher = profile(phone).launcher_package
    if launcher is not None:
        home = phone.home_component().partition("/")[0]
        out = [launcher, *(p for p in out if p != home)]
    if phone.device_state.adb_keyboard == "absent":
        out = [p for p in out if p != ADB_KEYBOARD_PACKAGE]
    return out


def resolve_activity(phone: Phone, category: str | None, package: str | None) -> str | None:
    """The component an intent resolves to, or None: HOME -> the launcher; a package ->
    its launcher activity (the launcher's is HOME's)."""
    home = home_component(phone)
    if package is None:
        return home if category == HOME_CATEGORY else None
    if package == home.partition("/")[0]:
        return home
    if package not in packages(phone) or category == HOME_CATEGORY:
        return None
    return phone.launcher_activity(package)


# ---- input methods ---------------------------------------------------------------------


def installed_imes(phone: Phone) -> list[str]:
    absent = phone.device_state.adb_keyboard == "absent"
    return [i for i in phone.imes() if not (absent and i == ADB_KEYBOARD)]


def enabled_imes(phone: Phone) -> list[str]:
    on = phone.device_state.adb_keyboard == "enabled"
    return [i for i in phone.imes() if on or i != ADB_KEYBOARD]


def select_ime(phone: Phone, ime: str) -> bool:
    """`ime set` / `settings put secure default_input_method`: only an enabled one."""
    if ime not in enabled_imes(phone) or not phone.set_ime(ime):
        return False
    phone.device_state.ime_set_at = time.monotonic()
    return True


def adb_keyboard_listening(phone: Phone) -> bool:
    """The ADB Keyboard acts on its broadcasts: current, its service up, the screen usable."""
    st = phone.device_state
    if phone.current_ime() != ADB_KEYBOARD or not st.awake or st.locked:
        return False
    return time.monotonic() - st.ime_set_at >= phone.faults.ime_warmup_s


# ---- power, keyguard and input -----------------------------------------------------------


def usable(st: DeviceState) -> bool:
    """Awake and unlocked: the screen takes touches and keys."""
    return st.awake and not st.locked


def sleep(st: DeviceState) -> None:
    st.awake = False
    st.bouncer, st.typed = False, ""
    if st.pin is not None:  # a secure phone locks as its screen goes off
        st.locked = True


def unlock(st: DeviceState) -> None:
    st.locked, st.bouncer, st.typed = False, False, ""


def dismiss_keyguard(st: DeviceState) -> None:
    """A swipe up, `wm dismiss-keyguard` or MENU: an insecure keyguard goes; a PIN
    keyguard shows its PIN pad instead."""
    if not st.locked or not st.awake:
        return
    if st.pin is None:
        unlock(st)
    else:
        st.bouncer = True


def keys(phone: Phone, codes: list[int]) -> list[int]:
    """Apply the power and keyguard keys; return the codes the foreground app gets."""
    st = phone.device_state
    passed: list[int] = []
    for code in codes:
        if code == KEY_WAKEUP:
            st.awake = True
        elif code == KEY_SLEEP:
            sleep(st)
        elif code == KEY_POWER:
            if st.awake:
                sleep(st)
            else:
                st.awake = True
        elif not st.awake:
            continue
        elif st.locked:
            _keyguard_key(st, code)
        else:
            passed.append(code)
    return passed


def _keyguard_key(st: DeviceState, code: int) -> None:
    if code == KEY_MENU:
        dismiss_keyguard(st)
    elif not st.bouncer:
        return
    elif KEY_0 <= code <= KEY_9:
        st.typed += str(code - KEY_0)
    elif code == KEY_DEL:
        st.typed = st.typed[:-1]
    elif code == KEY_ENTER:
        if st.typed == st.pin:
            unlock(st)
        st.typed = ""


def text(phone: Phone, typed: str) -> bool:
    """`input text` on a phone that is not usable: the PIN pad takes it; True if consumed."""
    st = phone.device_state
    if usable(st):
        return False
    if st.awake and st.bouncer:
        st.typed += typed
    return True


def swipe(phone: Phone, y1: int, y2: int) -> bool:
    """A swipe on a phone that is not usable; a swipe up a fifth of the screen dismisses
    the keyguard. True if consumed."""
    st = phone.device_state
    if usable(st):
        return False
    if st.awake and y1 - y2 >= phone.info.height // 5:
        dismiss_keyguard(st)
    return True


# Xiaomi (MIUI/HyperOS) without "USB debugging (Security settings)": every `input` fails.
# The Android 14 form, from https://github.com/cr4n5/XiaoYuanKouSuan/pull/76 (Xiaomi,
# `input swipe`; its first stack frames); `input` exits 255 on the exception.
INJECT_EVENTS_DENIED = (
    "Exception occurred while executing '{command}':\n"
    "java.lang.SecurityException: Injecting input events requires the caller (or the source "
    "of the instrumentation, if any) to have the INJECT_EVENTS permission.\n"
    "\tat com.android.server.input.InputManagerService.injectInputEventToTarget"
    "(InputManagerService.java:912)\n"
    "\tat android.hardware.input.InputManagerGlobal.injectInputEvent"
    "(InputManagerGlobal.java:1217)\n"
    "\tat android.hardware.input.InputManagerGlobal.injectInputEvent"
    "(InputManagerGlobal.java:1227)\n"
    "\tat com.android.server.input.InputShellCommand.injectMotionEvent"
    "(InputShellCommand.java:196)\n"
)


# ... and `ime enable/set` fail on the secure setting they write. The form of
# https://github.com/zai-org/Open-AutoGLM/issues/106 (`ime` refused the same permission).
SECURE_SETTINGS_DENIED = (
    "Exception occurred while executing 'ime':\n"
    "java.lang.SecurityException: uid 2000 does not have "
    "android.permission.WRITE_SECURE_SETTINGS.\n"
    "\tat android.app.ContextImpl.enforce(ContextImpl.java:2187)\n"
    "\tat android.app.ContextImpl.enforceCallingPermission(ContextImpl.java:2205)\n"
)


# ... and so does `settings put secure|global`, in the SettingsProvider's words. The form of
# https://github.com/whyakari/TermuxDisableProcces/issues/1 (a POCO M3).
SETTINGS_WRITE_DENIED = (
    "Exception occurred while executing 'put':\n"
    "java.lang.SecurityException: Permission denial: writing to settings "
    "requires:android.permission.WRITE_SECURE_SETTINGS\n"
    "        at com.android.providers.settings.SettingsProvider.enforceWritePermission"
    "(SettingsProvider.java:2272)\n"
    "        at com.android.providers.settings.SettingsProvider.mutateGlobalSetting"
    "(SettingsProvider.java:1439)\n"
)


def _security_switch_off(phone: Phone) -> bool:
    return profile(phone).needs_usb_security and not phone.device_state.usb_security


def input_refused(phone: Phone, command: str) -> str | None:
    """The error `input COMMAND` prints on this phone, or None when input is allowed."""
    return INJECT_EVENTS_DENIED.format(command=command) if _security_switch_off(phone) else None


def ime_change_refused(phone: Phone) -> str | None:
    """The error `ime enable/set` prints on this phone, or None when it may."""
    return SECURE_SETTINGS_DENIED if _security_switch_off(phone) else None


def settings_write_refused(phone: Phone, namespace: str) -> str | None:
    """The error `settings put secure|global` prints on this phone, or None when it may
    (the `system` namespace needs no secure permission)."""
    return SETTINGS_WRITE_DENIED if namespace != "system" and _security_switch_off(phone) else None


# ---- frames ------------------------------------------------------------------------------

_FRAMES: dict[tuple[str, int, int], Image.Image] = {}
_FRAMES_LOCK = threading.Lock()


def _still(kind: str, w: int, h: int) -> Image.Image:
    """One image object per (kind, size), so the encoder's reuse sees the same frame."""
    key = (kind, w, h)
    with _FRAMES_LOCK:
        img = _FRAMES.get(key)
        if img is None:
            img = Image.new("RGB", (w, h), (0, 0, 0))
            if kind != "off":
                draw = ImageDraw.Draw(img)
                draw.rectangle((0, 0, w, h), fill=(28, 32, 44))
                cx, cy = w // 2, h // 3
                draw.rounded_rectangle((cx - 40, cy - 10, cx + 40, cy + 60), 10, fill=(230, 230, 235))
                draw.arc((cx - 28, cy - 50, cx + 28, cy + 10), 180, 360, fill=(230, 230, 235),
                         width=10)
                label = "Enter PIN" if kind == "pin" else "Swipe up to unlock"
                draw.text((cx - 6 * len(label) // 2, h * 3 // 4), label, fill=(230, 230, 235))
            _FRAMES[key] = img
        return img


def frame(phone: Phone) -> Image.Image:
    """What the screen shows: black asleep, the keyguard locked, else the phone's frame."""
    st = phone.device_state
    w, h = phone.info.width, phone.info.height
    if not st.awake:
        return _still("off", w, h)
    if st.locked:
        return _still("pin" if st.bouncer else "lock", w, h)
    return phone.screenshot()


# ---- dumpsys -----------------------------------------------------------------------------

# `dumpsys power`'s head: https://github.com/openatx/uiautomator2/issues/444; Samsung's
# `getWakefulnessLocked()=` line in place of mWakefulness: flutter/flutter
# dev/devicelab/test/adb_test.dart (FakeDevice.pretendAwakeSamsung).
POWER = ("POWER MANAGER (dumpsys power)\n\nPower Manager State:\n  mDirty=0x0\n"
         "  {key}={state}\n  mWakefulnessChanging=false\n  mIsPowered=false\n  mPlugType=0\n"
         "  mStayOn=false\n  mBootCompleted=true\n  mSystemReady=true\n")


def dumpsys_power(phone: Phone) -> str:
    key = "getWakefulnessLocked()" if profile(phone).samsung_power else "mWakefulness"
    return POWER.format(key=key, state="Awake" if phone.device_state.awake else "Asleep")


# `dumpsys window policy`'s keyguard: appium/appium-adb@8eea1a84:test/unit/lockmgmt.spec.ts
# (isScreenStateOff's dump), with this phone's lock and power.
POLICY = """WINDOW MANAGER POLICY STATE (dumpsys window policy)
    KeyguardServiceDelegate
      showing={locked}
      showingAndNotOccluded={locked}
      inputRestricted={locked}
      occluded=false
      secure={secure}
      dreaming=false
      systemIsReady=true
      deviceHasKeyguard=true
      enabled=true
      offReason=OFF_BECAUSE_OF_USER
      currentUser=-10000
      bootCompleted=true
      screenState=SCREEN_STATE_{screen}
      interactiveState=INTERACTIVE_STATE_{interactive}
      KeyguardStateMonitor
        mIsShowing={locked}
        mSimSecure=false
        mInputRestricted={locked}
        mTrusted=false
        mCurrentUserId=0
"""


def window_policy(phone: Phone) -> str:
    st = phone.device_state
    return POLICY.format(locked=str(st.locked).lower(), secure=str(st.pin is not None).lower(),
                         screen="ON" if st.awake else "OFF",
                         interactive="AWAKE" if st.awake else "SLEEP")


# The default phone's own `dumpsys window` (what the simulator always printed): one window,
# then the focus lines. Android 10 has the same layout, its task a `stackId` (rootTaskId came
# with Android 12) and its mFocusedApp an AppWindowToken
# (https://github.com/openatx/uiautomator2/issues/200).
ONE_WINDOW = """WINDOW MANAGER WINDOWS (dumpsys window windows)
  Window #0 Window{{5a1b2c3 u0 {app}}}:
    mDisplayId=0 {task}=1 mSession=Session{{7c9d2e1 1234:u0a10123}} mClient=android.os.BinderProxy@1f2e3d4
    mHasSurface=true isReadyForDisplay()=true mWindowRemovalAllowed=false

  mCurrentFocus=Window{{5a1b2c3 u0 {focus}}}
  mFocusedApp={focused_app}
"""

# Android 13/14 `dumpsys window windows`: Window #N blocks and no focus line; the block of
# https://github.com/openatx/uiautomator2/issues/952 (mViewVisibility 0x0: shown).
A13_WINDOW = """  Window #{n} Window{{{wid} u0 {title}}}:
    mDisplayId=0 rootTaskId=57 mSession=Session{{8e5857d 8821:u0a10178}} mClient=android.os.BinderProxy@1c9fc79
    mOwnerUid=10178 showForAllUsers=false package={package} appop=NONE
    mAttrs={{(0,0)(fillxfill) sim={{adjust=nothing forwardNavigation}} ty={type} wanim=0x10302fd
      fl=LAYOUT_IN_SCREEN LAYOUT_INSET_DECOR SPLIT_TOUCH HARDWARE_ACCELERATED DRAWS_SYSTEM_BAR_BACKGROUNDS
      bhv=DEFAULT
      fitSides=}}
    Requested w={w} h={h} mLayoutSeq=471
    mViewVisibility=0x0 mHaveFrame=true mObscured=false
"""

# Android 13/14 `dumpsys window displays`: a block per display with its focus lines (a
# foldable prints one pair per display, the idle one null: appium/appium-adb@8eea1a84:
# test/unit/apk-utils.spec.ts); the header and `Display: mDisplayId=` as AOSP's
# DisplayContent.dump prints them.
DISPLAYS_HEADER = "WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)\n"
A13_DISPLAY = ("  Display: mDisplayId={i} rootTasks={tasks}\n"
               "    mFocusedApp={focused_app}\n"
               "    mCurrentFocus={focus}\n")


def _window(title: str) -> str:
    return f"Window{{5a1b2c3 u0 {title}}}"


def _windows_a13(phone: Phone) -> str:
    app = app_component(phone)
    rows = [("NotificationShade", "com.android.systemui", "NOTIFICATION_SHADE", "c1d2e3f")] \
        if phone.device_state.locked else []
    rows.append((app, app.partition("/")[0], "BASE_APPLICATION", "c838dbe"))
    w, h = phone.info.width, phone.info.height
    blocks = [A13_WINDOW.format(n=len(rows) - i, wid=wid, title=title, package=pkg, type=ty,
                                w=w, h=h)
              for i, (title, pkg, ty, wid) in enumerate(rows)]
    return "WINDOW MANAGER WINDOWS (dumpsys window windows)\n" + "".join(blocks)


def _displays_a13(phone: Phone) -> str:
    app = short_component(app_component(phone))
    out = DISPLAYS_HEADER
    for i, _ in enumerate(profile(phone).displays):
        if i == 0:
            out += A13_DISPLAY.format(i=i, tasks=3, focused_app=f"ActivityRecord{{8e7f6a5 u0 {app} t12}}",
                                      focus=_window(focus_window(phone)))
        else:
            out += A13_DISPLAY.format(i=i, tasks=1, focused_app="null", focus="null")
    return out


def dumpsys_window(phone: Phone, section: str | None) -> str:
    """`dumpsys window [SECTION]` in the profile's form; no section prints them all."""
    form = profile(phone).window_form
    if section == "policy":
        return window_policy(phone)
    app, focus = app_component(phone), focus_window(phone)
    if form == "sim":
        text = ONE_WINDOW.format(app=app, task="rootTaskId", focus=focus,
                                 focused_app=f"ActivityRecord{{8e7f6a5 u0 {app} t12}}")
        return text + (window_policy(phone) if section is None else "")
    if form == "a10":
        token = ("AppWindowToken{422df168 token=Token{422def98 "
                 f"ActivityRecord{{8e7f6a5 u0 {short_component(app)} t12}}}}}}")
        windows = ONE_WINDOW.format(app=app, task="stackId", focus=focus, focused_app=token)
        parts = {"windows": windows, "displays": DISPLAYS_HEADER}
    else:
        parts = {"windows": _windows_a13(phone), "displays": _displays_a13(phone)}
    if section in parts:
        return parts[section]
    return window_policy(phone) + "\n" + parts["windows"] + "\n" + parts["displays"]


# `dumpsys SurfaceFlinger --display-id`: one line per display, as
# https://github.com/rayworks/DroidCast/issues/21 and adbutils' emulator quote print it.
DISPLAY_ID = 'Display {id} (HWC display {hwc}): port={port} pnpId={pnp} displayName="{name}"\n'


def surfaceflinger_display_ids(phone: Phone) -> str:
    return "".join(DISPLAY_ID.format(id=i, hwc=hwc, port=port, pnp=pnp, name=name)
                   for i, hwc, port, pnp, name in profile(phone).displays)


def display_ids(phone: Phone) -> list[str]:
    return [d[0] for d in profile(phone).displays]


# `screencap` with several displays and no -d: the warning before the PNG, from
# https://github.com/MaaAssistantArknights/MaaAssistantArknights/pull/16927 (Pixel Fold).
MULTI_DISPLAY_WARNING = (
    "[Warning] Multiple displays were found, but no display id was specified! Defaulting to "
    "the first display found, however this default is not guaranteed to be consistent "
    "across captures. A display id should be specified.\n"
    "A display ID can be specified with the [-d display-id] option.\n"
    'See "dumpsys SurfaceFlinger --display-id" for valid display IDs.\n')


# `dumpsys input_method`: no real output was found (tests/data/adb_outputs.toml); the lines
# devices/adb_output.input_methods reads, as AOSP's InputMethodManagerService dump names them.
def dumpsys_input_method(phone: Phone) -> str:
    lines = ["Current Input Method Manager state:",
             f"  Input Methods: mMethodMapUpdateCount={len(installed_imes(phone))}"]
    for i, ime in enumerate(installed_imes(phone)):
        lines += [f"  InputMethod #{i}:", f"    mId={ime} mSettingsActivity=null"]
    lines += [f"  mCurMethodId={phone.current_ime()}", f"  mCurId={phone.current_ime()}"]
    return "\n".join(lines) + "\n"


# ---- package manager -----------------------------------------------------------------------

# `cmd package resolve-activity`: the ResolveInfo line and ActivityInfo head of
# https://github.com/airsdk/Adobe-Runtime-Support/issues/1430; --brief prints the first
# line, then the component as ComponentName.flattenToShortString (AOSP
# PackageManagerShellCommand.printResolveInfo; no real --brief output was found).
RESOLVE_INFO = "priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault={default}\n"
ACTIVITY_INFO = ("ActivityInfo:\n  name={name}\n  packageName={package}\n"
                 "  enabled=true exported=true directBootAware=false\n")


def resolve_output(phone: Phone, component: str | None, brief: bool, home: bool) -> str:
    if component is None:
        return "No activity found\n"
    head = RESOLVE_INFO.format(default=str(home).lower())
    if brief:
        return head + short_component(component) + "\n"
    pkg, _, cls = full_component(component).partition("/")
    return head + ACTIVITY_INFO.format(name=cls, package=pkg)
