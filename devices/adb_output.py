"""adb's text, read as real phones write it: pure functions over the output of shell commands.

Android 7 to 15 and the vendors' builds print the same facts in different places: the
foreground app is ``mCurrentFocus`` on one phone, a ``Window #N`` block on another and
``topResumedActivity`` on a third. Each function here takes the text of one command (any of
the forms listed in its docstring) and returns the fact, or None when the text does not
say. Nothing here runs a command: ``devices/adb.py`` runs them. The names and signatures
are a stable surface; tests/devices/test_adb_output.py holds them against real outputs
collected from public issue threads and test fixtures (tests/data/adb_outputs.toml), each
with its source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from runtime.errors import MobagentError

Wakefulness = Literal["awake", "asleep", "dozing"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# A component as adb prints it: ``pkg/.Activity`` or ``pkg/pkg.Activity`` (the activity
# may hold ``$`` for an inner class).
_PACKAGE = r"[A-Za-z][\w]*(?:\.[\w]+)+"
_COMPONENT = re.compile(rf"({_PACKAGE})/([\w.$]+)")
# ``Window{4330b6c0 u0 pkg/Activity paused=false}`` (the ``u0`` is missing before 4.2).
_WINDOW = re.compile(r"Window\{[0-9a-f]+(?: u\d+)? ([^}\s]+)")
_RECORD = re.compile(rf"ActivityRecord\{{[0-9a-f]+ u?\d+ ({_PACKAGE})/")


class AdbOutputError(MobagentError, ValueError):
    """Output that holds none of what it must (a screenshot with no PNG in it)."""


# ---- the foreground app --------------------------------------------------------------

def foreground_package(text: str) -> str | None:
    """The package in the foreground, from ``dumpsys window`` (``windows`` or
    ``displays``), ``dumpsys activity activities`` or ``dumpsys activity top``.

    The focused window wins when it names an activity; a focus window with no activity
    (the notification shade, a TV overlay) gives way to the focused app under it.
    """
    focus = _focus_window(text)
    if focus is not None and (component := _COMPONENT.match(focus)) is not None:
        return component.group(1)
    if focus in _SYSTEM_UI_WINDOWS:  # the shade or the lock screen is over the app
        return "com.android.systemui"
    for pattern in (r"mFocusedApp=.*?", r"(?:mResumedActivity|topResumedActivity|ResumedActivity|"
                    r"mFocusedActivity)[:=] ?.*?"):
        for m in re.finditer(pattern + _RECORD.pattern, text):
            return m.group(1)
    top = _activity_top(text) or _window_blocks(text)
    if top is not None:
        return top
    if focus is not None and re.fullmatch(_PACKAGE, focus) and focus[0].islower():
        return focus  # a window titled with its package (a toast, an app's own popup)
    return None


# Focus windows that name no package: SystemUI's own surfaces over whatever app is below.
_SYSTEM_UI_WINDOWS = frozenset({"NotificationShade", "StatusBar", "Keyguard", "StatusBarBouncer"})


def _focus_window(text: str) -> str | None:
    """The first ``mCurrentFocus`` that is not null (a foldable prints one per display)."""
    for m in re.finditer(r"mCurrentFocus=(\S.*)", text):
        window = _WINDOW.search(m.group(1))
        if window is not None:
            return window.group(1)
    return None


def _activity_top(text: str) -> str | None:
    """``dumpsys activity top``: the resumed ACTIVITY, else the last one listed (the top)."""
    blocks = re.split(r"(?m)^\s*ACTIVITY ", text)[1:]
    if not blocks:
        return None
    resumed = [b for b in blocks if re.search(r"mResumed=true", b)]
    m = _COMPONENT.match((resumed or blocks)[-1])
    return m.group(1) if m else None


def _window_blocks(text: str) -> str | None:
    """Android 13/14 ``dumpsys window windows`` with no ``mCurrentFocus``: the topmost
    application window that is not hidden (blocks are listed top first)."""
    blocks = re.split(r"(?m)^\s*Window #\d+ ", text)[1:]
    for block in blocks:
        head, _, body = block.partition("\n")
        window = _WINDOW.match(head)
        component = _COMPONENT.fullmatch(window.group(1)) if window else None
        if component is not None and "isVisible=false" not in body:
            return component.group(1)
    return None


# ---- power and lock ------------------------------------------------------------------

def wakefulness(text: str) -> Wakefulness | None:
    """Awake, asleep or dozing, from ``dumpsys power`` (``mWakefulness=``, Samsung's
    ``getWakefulnessLocked()=``, before Android 5 ``mScreenOn=``) or ``dumpsys window
    policy`` (``mAwake=``, ``screenState=``). A dreaming phone (its screen saver) counts as dozing: it must be
    woken before an app can be used."""
    m = re.search(r"(?:mWakefulness|getWakefulnessLocked\(\))=(\w+)", text)
    if m is not None:
        state = m.group(1).lower()
        return {"awake": "awake", "asleep": "asleep", "dozing": "dozing",
                "dreaming": "dozing"}.get(state)  # type: ignore[return-value]
    m = re.search(r"\bmAwake=(true|false)", text)
    if m is not None:
        return "awake" if m.group(1) == "true" else "asleep"
    m = re.search(r"\binteractiveState=INTERACTIVE_STATE_(\w+)", text)
    if m is not None:
        return "awake" if m.group(1) == "AWAKE" else "asleep"
    m = re.search(r"\bscreenState=SCREEN_STATE_(ON|OFF)", text)
    if m is not None:
        return "awake" if m.group(1) == "ON" else "asleep"
    # Before Android 5 (``mScreenOn=``), and some Samsung builds (``Display Power: state=``).
    m = re.search(r"\bmScreenOn=(true|false)|Display Power: state=(ON|OFF|DOZE\w*)", text)
    if m is not None:
        on = m.group(1) or m.group(2)
        return "awake" if on in ("true", "ON") else "dozing" if on.startswith("DOZE") \
            else "asleep"
    return None


_KEYGUARD_FLAGS = (r"mShowingLockscreen", r"mDreamingLockscreen", r"isStatusBarKeyguard",
                   r"mKeyguardShowing", r"keyguardShowing", r"KeyguardShowing")


def keyguard_showing(text: str) -> bool | None:
    """Whether the lock screen is up, from ``dumpsys window`` / ``dumpsys window policy``
    (``mShowingLockscreen``, ``isStatusBarKeyguard``, the ``KeyguardServiceDelegate``
    ``showing=``), ``dumpsys activity`` (``mKeyguardShowing``) or ``dumpsys trust``
    (``deviceLocked``)."""
    seen: list[bool] = []
    for flag in _KEYGUARD_FLAGS:
        seen += [v == "true" for v in re.findall(rf"\b{flag}[=:] ?(true|false)\b", text)]
    if seen:
        return any(seen)
    delegate = re.search(r"KeyguardServiceDelegate\s*\n\s*showing=(true|false)", text)
    if delegate is not None:
        return delegate.group(1) == "true"
    monitor = re.search(r"KeyguardStateMonitor[\s\S]*?mIsShowing=(true|false)", text)
    if monitor is not None:
        return monitor.group(1) == "true"
    trust = re.search(r"\bdeviceLocked=(\d|true|false)", text)
    if trust is not None:
        return trust.group(1) in ("1", "true")
    return None


def keyguard_secure(text: str) -> bool | None:
    """Whether the lock screen asks for a PIN, pattern or password, from ``dumpsys window
    policy`` (the ``KeyguardServiceDelegate`` block's ``secure=``); None when not said."""
    m = re.search(r"KeyguardServiceDelegate[\s\S]*?\n\s*secure=(true|false)\b", text)
    return None if m is None else m.group(1) == "true"


# ---- the screen ----------------------------------------------------------------------

def input_size(text: str) -> tuple[int, int] | None:
    """(width, height) that ``input`` uses, from ``wm size``: the override wins over the
    physical size; other lines (warnings, a linker's noise) are ignored."""
    sizes = dict(re.findall(r"(?m)^\s*(Physical|Override) size: (\d+x\d+)\s*$", text))
    got = sizes.get("Override") or sizes.get("Physical")
    if got is None:
        return None
    w, h = got.split("x")
    return int(w), int(h)


def screen_density(text: str) -> int | None:
    """The density (dpi) apps are laid out at, from ``wm density``: the override wins over
    the physical density, as in ``wm size``."""
    dens = dict(re.findall(r"(?m)^\s*(Physical|Override) density: (\d+)\s*$", text))
    got = dens.get("Override") or dens.get("Physical")
    return int(got) if got else None


_ROTATIONS = {"0": 0, "1": 1, "2": 2, "3": 3, "Rotation0": 0, "Rotation90": 1,
              "Rotation180": 2, "Rotation270": 3, "ROTATION_0": 0, "ROTATION_90": 1,
              "ROTATION_180": 2, "ROTATION_270": 3}


def rotation(text: str) -> int | None:
    """The default display's rotation in quarter turns (0 is the natural portrait), from
    ``dumpsys display`` (the viewport's ``orientation=``, ``mCurrentOrientation=``),
    ``dumpsys input`` (``SurfaceOrientation: 1`` to Android 12, ``InputDeviceOrientation:``
    ``1`` or ``Rotation90`` after) or ``dumpsys window displays`` (``mCurrentRotation=``)."""
    for pattern in (r"DisplayViewport\{type=INTERNAL[^}]*?\borientation=(\d)",
                    r"DisplayViewport\{[^}]*?\borientation=(\d)",
                    r"\bmCurrentOrientation=(\d)\b",
                    r"\b(?:SurfaceOrientation|InputDeviceOrientation): (\w+)",
                    r"\bmCurrentRotation=(\w+)", r"\bmRotation=(\d)\b"):
        m = re.search(pattern, text)
        if m is not None and m.group(1) in _ROTATIONS:
            return _ROTATIONS[m.group(1)]
    return None


def properties(text: str) -> dict[str, str]:
    """``getprop``'s listing (``[ro.product.model]: [Pixel 8]`` lines) as a dict."""
    return dict(re.findall(r"(?m)^\[([^\]]+)\]: \[(.*)\]\s*$", text))


def display_ids(text: str) -> list[str]:
    """The display ids in ``dumpsys SurfaceFlinger --display-id``, as strings (they exceed
    2^53, so a float would round them), in the order listed."""
    return re.findall(r"(?m)^Display (\d+)\b", text)


def png_payload(data: bytes) -> bytes:
    """The PNG in ``screencap -p``'s output, without what some phones print before it (the
    multi-display warning, a linker's complaint)."""
    at = data.find(PNG_SIGNATURE)
    if at < 0:
        head = data[:200].decode("utf-8", "replace").strip()
        raise AdbOutputError(f"no PNG in the screenshot ({len(data)} bytes)"
                             + (f"; it begins: {head!r}" if head else ""))
    return data[at:]


# ---- keyboards and launching ---------------------------------------------------------

_IME_ID = re.compile(rf"{_PACKAGE}/[\w.$]+")


def input_methods(text: str) -> list[str]:
    """The input-method ids in ``ime list -s`` / ``-a``, ``settings get secure
    enabled_input_methods`` / ``default_input_method`` (``:``-separated, with ``;``
    subtypes), ``settings list secure`` or ``dumpsys input_method``, each once, in order.
    An error (``ime`` refused) holds none."""
    if "Exception" in text or "not found" in text:
        return []
    seen: dict[str, None] = {}
    for line in text.splitlines():
        key, eq, _ = line.strip().partition("=")
        if eq and key not in _IME_KEYS:
            continue  # another setting of `settings list secure`, another dumpsys field
        for m in _IME_ID.finditer(line):
            seen.setdefault(m.group(0))
    return list(seen)


# The ``key=`` lines that hold input-method ids (settings and dumpsys input_method).
_IME_KEYS = frozenset({"default_input_method", "enabled_input_methods", "mId", "mCurMethodId",
                       "mSelectedMethodId", "mCurId"})


def launcher_component(text: str) -> str | None:
    """``pkg/activity`` from ``cmd package resolve-activity`` (``--brief``: the last line;
    without it, the ``ActivityInfo`` ``name=`` and ``packageName=``); None when no
    activity was found."""
    if "No activity found" in text:
        return None
    name = re.search(r"^\s*name=([\w.$]+)", text, re.M)
    package = re.search(r"^\s*packageName=([\w.]+)", text, re.M)
    if name and package:
        return f"{package.group(1)}/{name.group(1)}"
    for line in reversed(text.strip().splitlines()):
        m = _COMPONENT.fullmatch(line.strip())
        if m is not None:
            return m.group(0)
    return None


# ---- failures ------------------------------------------------------------------------

FailureKind = Literal["inject_events_permission", "secure_settings_permission",
                      "ime_unavailable", "activity_not_found", "no_launchable_activity",
                      "no_physical_keys", "permission_denied", "command_unsupported"]


@dataclass(frozen=True)
class ShellFailure:
    """What a shell command's output says went wrong, and the fix in one sentence."""

    kind: FailureKind
    hint: str
    line: str  # the line of the output that says so (never a stack frame)


# First match wins: the vendor permissions before the generic denial.
_FAILURES: tuple[tuple[FailureKind, re.Pattern[str], str], ...] = (
    ("inject_events_permission", re.compile(r".*INJECT_EVENTS permission.*"),
     "The phone refuses injected input: on Xiaomi/Redmi/POCO turn on Developer options > "
     "USB debugging (Security settings), then reconnect; on vivo turn on "
     "'USB simulate click' (USB模拟点击)."),
    ("secure_settings_permission", re.compile(r".*WRITE_SECURE_SETTINGS.*"),
     "The phone refuses secure settings (ime set, settings put): on OPPO/OnePlus/realme "
     "(ColorOS) turn on Developer options > Disable permission monitoring; on Xiaomi turn "
     "on USB debugging (Security settings)."),
    ("ime_unavailable", re.compile(r".*(?:Unknown input method .*|Unknown id: .*"
                                   r"|cannot be selected for user.*)"),
     "The keyboard is not installed or not enabled: run `mobagent devices setup --ime-apk "
     "ADBKeyboard.apk`, or `adb shell ime enable com.android.adbkeyboard/.AdbIME`."),
    ("no_physical_keys", re.compile(r".*SYS_KEYS has no physical keys.*"),
     "monkey needs --pct-syskeys 0 on a phone without hardware keys."),
    ("no_launchable_activity", re.compile(r".*(?:No activities found to run|"
                                          r"No activity found).*"),
     "The app is not installed, or has no launcher activity: check the package name "
     "with `adb shell pm list packages`."),
    ("activity_not_found", re.compile(r".*(?:Error: Activity not started.*|"
                                      r"Error: Activity class \{.*\} does not exist.*|"
                                      r"Error type 3.*)"),
     "The activity could not be started: check the component with `adb shell cmd package "
     "resolve-activity --brief PACKAGE`."),
    ("permission_denied", re.compile(r".*(?:SecurityException.*|Permission denied.*|"
                                     r"Permission Denial.*)"),
     "The shell user may not do this on this phone: check the vendor's developer options "
     "(Xiaomi: USB debugging (Security settings); OPPO: Disable permission monitoring)."),
    ("command_unsupported", re.compile(r".*(?:: not found|inaccessible or not found|"
                                       r"Unknown command.*|Can't find service.*)"),
     "This Android version lacks the command: update the phone, or use the fallback."),
)


def shell_failure(output: str, exit_code: int | None = None) -> ShellFailure | None:
    """The failure a shell command's output reports (some exit 0 on failure: ``am start``
    prints ``Error: Activity not started`` and exits 0), or None when it reports none."""
    for kind, pattern, hint in _FAILURES:
        m = pattern.search(output)
        if m is not None:
            return ShellFailure(kind=kind, hint=hint, line=_clean(m.group(0)))
    if exit_code == 251 and "monkey" in output:  # monkey's own exit code for SYS_KEYS
        return ShellFailure("no_physical_keys", _FAILURES[3][2], output.strip()[:200])
    return None


def _clean(line: str) -> str:
    """The failure's line, without the ``java.lang.`` and ``Exception occurred while
    executing`` preambles, at most 300 characters."""
    line = re.sub(r"^.*?(java\.lang\.)?(?=\w*(SecurityException|Error))", "", line.strip())
    return line[:300]
