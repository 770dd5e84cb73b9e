"""adb's text, read as real phones write it: pure functions over the output of shell commands.

Android 4.4 to 16 and the vendors' builds print the same facts in different places: the
foreground app is ``mCurrentFocus`` on one phone, a ``Window #N`` block on another and
``topResumedActivity`` on a third. Each function here takes the text of one command (any of
the forms listed in its docstring) and returns the fact, or None when the text does not
say. The text may come as another tool quoted it (a log line per output line, a Markdown
quote, CRLF, colours, a string's escaped repr): every reader first takes it back to what
the phone printed, in one place (``printed``). Nothing here runs a command:
``devices/adb.py`` runs them. The names and signatures are a stable surface;
tests/devices/test_adb_output.py holds them against real outputs collected from public
issue threads and test fixtures (tests/data/adb_outputs.toml), each with its source.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Concatenate, Literal, ParamSpec, TypeVar

from runtime.errors import MobagentError

Wakefulness = Literal["awake", "asleep", "dozing"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# A component as adb prints it: ``pkg/.Activity`` or ``pkg/pkg.Activity`` (the activity
# may hold ``$`` for an inner class).
_PACKAGE = r"[A-Za-z][\w]*(?:\.[\w]+)+"
_COMPONENT = re.compile(rf"({_PACKAGE})/([\w.$]+)")
# ``Window{4330b6c0 u0 pkg/Activity paused=false}``: its title, up to the brace. The ``u0``
# is missing before 4.2; some copies lose the space after it (``u0com.pkg/.A``).
_WINDOW = re.compile(r"Window\{[0-9a-f]+\s+(?:u-?\d+(?![\w.]*/)\s*|u\d+(?=[a-z]))?"
                     r"([^{}]*?)\s*(?:paused=\w+)?\}")
# ``ActivityRecord{1e44eb8 u0 pkg/.A t653}``; before Android 4.2 there is no user.
_RECORD = re.compile(rf"ActivityRecord\{{[0-9a-f]+(?: u?\d+)? ({_PACKAGE})/")

P = ParamSpec("P")
T = TypeVar("T")


class AdbOutputError(MobagentError, ValueError):
    """Output that holds none of what it must (a screenshot with no PNG in it)."""


# ---- the text as the phone printed it ------------------------------------------------

# What a tool that quotes adb's output puts before each of its lines, one piece at a time:
# a Markdown quote, a date or a time, a dmesg stamp, a logcat header, a [tag], a <logger>,
# a (thread), a log level. getprop's own ``[key]: [value]`` lines are no tag.
_PREFIX = re.compile(r"""[ \t]*(?:
      >+
    | \[[^\[\]\n]{0,60}\d\d:\d\d:\d\d[^\[\]\n]{0,80}\]
    | \[?\d{4}[-/.]\d\d[-/.]\d\d[T\ ]\d\d:\d\d:\d\d(?:[.,:]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?
    | [A-Z][a-z]{2}\ +\d\d?\ \d\d:\d\d:\d\d
    | \[?\d\d-\d\d(?:-\d{4})?[T\ ]\d\d:\d\d:\d\d(?:[.,:]\d+)?\]?
    | \[?\d\d:\d\d:\d\d(?:[.,:]\d+)?\]?(?:/[VDIWEFA]:)?
    | \[\s*\d+\.\d+\]
    | \d+\s+\d+\s+[VDIWEFA]\s+[^\s:]+\s*:
    | [VDIWEFA]/[^\s(:]+\s*\(\s*\d+\):
    | \[[A-Za-z][\w.@:/\ -]{0,40}\](?!:\s*\[):?
    | <[\w.$-]+>
    | [\w.$-]+(?::[\w.$-]+)*\.(?:py|js|ts|java|kt|go|rs|rb|cs):\d+(?::\d+)?:?
    | \([\w-]+\)
    | (?:DEBUG|INFO|WARN|WARNING|ERROR|TRACE|VERBOSE|CRITICAL|FATAL)(?::[\w.]+)?:
    | (?:DEBUG|INFO|WARN|WARNING|ERROR|TRACE|VERBOSE)(?:[ \t]+[\w.$]+(?:[ \t]+-|:))?(?=[ \t])
    | (?:info|debug|warn|error):(?=[ \t]*\[)
    )""", re.X)
# After a prefix: ``12:00:01 INFO Tag - ``, fastlane's ``[15:01:49]: ▸ ``.
_SEPARATOR = re.compile(r"[ \t]*[-|:>»▸•→](?=[ \t])")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|(?<![\w\]])\[(?:\d{1,3}(?:;\d{1,3})*)?m(?![\]\w])")
_ESCAPED = re.compile(r"\\r\\n|\\[nrt\"']")
_UNESCAPE = {"\\r\\n": "\n", "\\n": "\n", "\\r": "\n", "\\t": "\t", '\\"': '"', "\\'": "'"}


def _unquote_line(line: str) -> str:
    """One line without what a log or a quote put before it; the line's own indentation
    after that prefix stays (less the one space that separated them)."""
    stripped = False
    while True:
        m = _PREFIX.match(line) or (_SEPARATOR.match(line) if stripped else None)
        if m is None or m.end() == 0:
            return line[1:] if stripped and line.startswith(" ") else line
        line, stripped = line[m.end():], True


def printed(text: str) -> str:
    """The text as the phone printed it, from a copy another tool made: escaped newlines
    (a log that printed the string's repr) made real, CRLF and CR made LF, ANSI colours
    and each line's quoting prefix removed. What the phone printed itself passes through
    (but a ``[Tag]`` at a line's start, which is read as a log's tag)."""
    if "\\n" in text and text.count("\\n") > text.count("\n"):
        text = _ESCAPED.sub(lambda m: _UNESCAPE[m.group(0)], text)
    text = _ANSI.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    return "\n".join(_unquote_line(line) for line in text.split("\n"))


def _as_printed(fn: Callable[Concatenate[str, P], T]) -> Callable[Concatenate[str, P], T]:
    """The reader sees its text as the phone printed it (``printed``)."""
    @functools.wraps(fn)
    def read(text: str, *args: P.args, **kwargs: P.kwargs) -> T:
        return fn(printed(text), *args, **kwargs)
    return read


# ---- the foreground app --------------------------------------------------------------

@_as_printed
def foreground_package(text: str) -> str | None:
    """The package in the foreground, from ``dumpsys window`` (``windows`` or
    ``displays``), ``dumpsys activity activities`` or ``dumpsys activity top``.

    The focused window wins when it names an activity; a focus window with no activity
    (the notification shade, a TV overlay) gives way to the focused app under it; a
    starting window (``Splash Screen pkg``) names the app it starts.
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
    top = _activity_top(text) or _window_blocks(text) or _input_target(text)
    if top is not None:
        return top
    if focus is not None:  # a window titled with its package (a toast, a TV overlay, a splash)
        last = focus.rsplit(None, 1)[-1] if focus else ""
        if re.fullmatch(_PACKAGE, last) and last[0].islower():
            return last
    return None


# Focus windows that name no package: SystemUI's own surfaces over whatever app is below.
_SYSTEM_UI_WINDOWS = frozenset({"NotificationShade", "StatusBar", "Keyguard", "StatusBarBouncer"})


def _focus_window(text: str) -> str | None:
    """The title of the first ``mCurrentFocus`` (``mFocusedWindow`` on some builds) that
    is not null; a foldable prints one per display."""
    for m in re.finditer(r"(?:mCurrentFocus|mFocusedWindow)=(\S.*)", text):
        window = _WINDOW.search(m.group(1))
        if window is not None and window.group(1):
            return window.group(1)
    return None


def _activity_top(text: str) -> str | None:
    """``dumpsys activity top``: the resumed ACTIVITY, else the last one listed (the top),
    unless the dump timed out (``DUMP TIMEOUT``): then the list stops short of the top."""
    blocks = re.split(r"(?m)^\s*ACTIVITY ", text)[1:]
    if not blocks:
        return None
    resumed = [b for b in blocks if re.search(r"mResumed=true", b)]
    if not resumed and re.search(r"DUMP TIMEOUT|Failure while dumping", text):
        return None
    m = _COMPONENT.match((resumed or blocks)[-1])
    return m.group(1) if m else None


def _window_blocks(text: str) -> str | None:
    """Android 13/14 ``dumpsys window windows`` with no ``mCurrentFocus``: the topmost
    application window that is not hidden (blocks are listed top first)."""
    blocks = re.split(r"(?m)^\s*Window #\d+ ", text)[1:]
    for block in blocks:
        head, _, body = block.partition("\n")
        window = _WINDOW.match(head)
        title = window.group(1).split() if window else []
        component = _COMPONENT.fullmatch(title[0]) if title else None
        if component is not None and "isVisible=false" not in body:
            return component.group(1)
    return None


def _input_target(text: str) -> str | None:
    """The window the keyboard types into (``mInputMethodTarget``, ``imeInputTarget``),
    which TV builds print when they omit the focus."""
    for m in re.finditer(r"(?:mInputMethod(?:Input)?Target|imeInputTarget)=(\S.*)", text):
        window = _WINDOW.search(m.group(1))
        component = _COMPONENT.match(window.group(1)) if window else None
        if component is not None:
            return component.group(1)
    return None


# ---- power and lock ------------------------------------------------------------------

_WAKEFULNESS: dict[str, Wakefulness] = {"awake": "awake", "asleep": "asleep",
                                        "dozing": "dozing", "dreaming": "dozing"}
# What a display state says of the screen: lit, off, or an always-on display (doze).
_BY_DISPLAY: dict[str, Wakefulness] = {"on": "awake", "off": "asleep", "doze": "dozing"}
_DISPLAY_STATES = {"on": "on", "vr": "on", "on_suspend": "on", "true": "on", "off": "off",
                   "false": "off", "doze": "doze", "doze_suspend": "doze"}


@_as_printed
def wakefulness(text: str) -> Wakefulness | None:
    """Awake, asleep or dozing, from ``dumpsys power`` (``mWakefulness=``, Samsung's
    ``getWakefulnessLocked()=``, ``mWakefulnessRaw=``, before Android 5 ``mScreenOn=``,
    ``Display Power: state=``), ``dumpsys display`` (``mScreenState=``) or ``dumpsys window
    policy`` (``mAwake=``, ``interactiveState=``, ``screenState=``). A dreaming phone (its
    screen saver) counts as dozing: it must be woken before an app can be used. A phone
    that is not interactive while its screen shows something (``DOZE``, an always-on
    display) is dozing."""
    display = _display_state(text)
    m = re.search(r"\b(?:m|get)?wakeful+ness(?:Raw|Locked\(\))?\s*[=:]\s*"
                  r"(awake|asleep|dozing|dreaming)\b", text, re.I)
    if m is not None:
        state = _WAKEFULNESS[m.group(1).lower()]
        return "dozing" if state == "asleep" and display == "doze" else state
    m = re.search(r"\b(?:mAwake|mInteractive)=(true|false)\b|"
                  r"\binteractiveState=INTERACTIVE_STATE_(\w+)", text)
    if m is not None:
        if m.group(1) == "true" or m.group(2) == "AWAKE":
            return "awake"
        return "dozing" if display in ("on", "doze") else "asleep"
    return _BY_DISPLAY.get(display) if display else None


def _display_state(text: str) -> str | None:
    """"on", "off" or "doze", from what the power or display service says of the screen
    (Samsung's and Android 5+'s ``Display Power: state=``, ``mScreenState=``, the window
    policy's ``screenState=``, Android 4's ``mScreenOn=``), or None."""
    for pattern in (r"Display Power: state=(\w+)", r"\bmScreenState=(\w+)",
                    r"\bmGlobalDisplayState=(\w+)",
                    r"\bscreenState=SCREEN_STATE_(\w+)", r"\bmScreenOn(?:Fully)?=(true|false)"):
        m = re.search(pattern, text)
        if m is not None and m.group(1).lower() in _DISPLAY_STATES:
            return _DISPLAY_STATES[m.group(1).lower()]
    return None


_KEYGUARD_FLAGS = re.compile(r"\b(?:mShowingLockscreen|mDreamingLockscreen|isStatusBarKeyguard|"
                             r"(?:m|mIs|is)?[Kk]eyguardShowing)[=:] ?(true|false)\b")


@_as_printed
def keyguard_showing(text: str) -> bool | None:
    """Whether the lock screen is up, from ``dumpsys window`` / ``dumpsys window policy``
    (``mShowingLockscreen``, ``isStatusBarKeyguard``, ``isKeyguardShowing``, the
    ``KeyguardServiceDelegate`` ``showing=``), ``dumpsys activity`` (``mKeyguardShowing``)
    or ``dumpsys trust`` (``deviceLocked``)."""
    seen = [v == "true" for v in _KEYGUARD_FLAGS.findall(text)]
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


@_as_printed
def keyguard_secure(text: str) -> bool | None:
    """Whether the lock screen asks for a PIN, pattern or password, from ``dumpsys window
    policy`` (the ``KeyguardServiceDelegate`` block's ``secure=``); None when not said."""
    m = re.search(r"KeyguardServiceDelegate[\s\S]*?\n\s*secure=(true|false)\b", text)
    return None if m is None else m.group(1) == "true"


# ---- the screen ----------------------------------------------------------------------

@_as_printed
def input_size(text: str) -> tuple[int, int] | None:
    """(width, height) that ``input`` uses, from ``wm size``: the override wins over the
    physical size; other lines (warnings, a linker's noise) are ignored."""
    sizes = dict(re.findall(r"(?m)^\s*(Physical|Override) size: (\d+x\d+)\s*$", text))
    got = sizes.get("Override") or sizes.get("Physical")
    if got is None:
        return None
    w, h = got.split("x")
    return int(w), int(h)


@_as_printed
def screen_density(text: str) -> int | None:
    """The density (dpi) apps are laid out at, from ``wm density``: the override wins over
    the physical density, as in ``wm size``."""
    dens = dict(re.findall(r"(?m)^\s*(Physical|Override) density: (\d+)\s*$", text))
    got = dens.get("Override") or dens.get("Physical")
    return int(got) if got else None


_ROTATIONS = {"0": 0, "1": 1, "2": 2, "3": 3, "Rotation0": 0, "Rotation90": 1,
              "Rotation180": 2, "Rotation270": 3, "ROTATION_0": 0, "ROTATION_90": 1,
              "ROTATION_180": 2, "ROTATION_270": 3}


@_as_printed
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


@_as_printed
def properties(text: str) -> dict[str, str]:
    """``getprop``'s listing (``[ro.product.model]: [Pixel 8]`` lines) as a dict."""
    return dict(re.findall(r"(?m)^\[([^\]]+)\]: \[(.*)\]\s*$", text))


@_as_printed
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

_IME_ID = re.compile(rf"(?<![\w.$]){_PACKAGE}/[\w.$]+")  # from a word's start: linear


@_as_printed
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


@_as_printed
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
                      "no_physical_keys", "permission_denied", "command_unsupported",
                      "binder_failure", "device_offline", "unknown"]


@dataclass(frozen=True)
class ShellFailure:
    """What a shell command's output says went wrong, and the fix in one sentence."""

    kind: FailureKind
    hint: str
    line: str  # the line of the output that says so (never a stack frame)


UNKNOWN_HINT = ("The phone reported a failure of a kind not known here: read its line, and "
                "run the command by hand with `adb shell` to see all it prints.")


def _line_with(alternatives: str, flags: int = 0) -> re.Pattern[str]:
    """The first line that holds one of ``alternatives``; anchored at line starts, so a
    search is linear in the output (an unanchored ``.*X.*`` is quadratic on a long line)."""
    return re.compile(rf"^[^\n]*?(?:{alternatives})[^\n]*", re.M | flags)


# First match wins: the vendor permissions before the generic denial; what the phone
# said before adb's own transport errors (a second phone's "still authorizing" beside an
# answer); what an old Android lacks last.
_FAILURES: tuple[tuple[FailureKind, re.Pattern[str], str], ...] = (
    ("inject_events_permission", _line_with(r"INJECT_EVENTS permission"),
     "The phone refuses injected input: on Xiaomi/Redmi/POCO turn on Developer options > "
     "USB debugging (Security settings), then reconnect; on vivo turn on "
     "'USB simulate click' (USB模拟点击)."),
    ("secure_settings_permission",
     _line_with(r"(?:does not have|requires:?|denial[^\n]{0,120}?)\s*android\.permission\."
                r"WRITE_SECURE_SETTINGS", re.I),
     "The phone refuses secure settings (ime set, settings put): on OPPO/OnePlus/realme "
     "(ColorOS) turn on Developer options > Disable permission monitoring; on Xiaomi turn "
     "on USB debugging (Security settings)."),
    ("ime_unavailable", _line_with(r"Unknown input method |Unknown id: |"
                                   r"cannot be selected for user"),
     "The keyboard is not installed or not enabled: run `mobagent devices setup --ime-apk "
     "ADBKeyboard.apk`, or `adb shell ime enable com.android.adbkeyboard/.AdbIME`."),
    ("no_physical_keys", _line_with(r"SYS_KEYS has no physical keys"),
     "monkey needs --pct-syskeys 0 on a phone without hardware keys."),
    ("no_launchable_activity", _line_with(r"No activities found to run|No activity found|"
                                          r"Unknown package:|Package \S+ is not installed"),
     "The app is not installed, or has no launcher activity: check the package name "
     "with `adb shell pm list packages`."),
    ("activity_not_found", _line_with(r"Error: Activity not started|"
                                      r"Error: Activity class \S+ does not exist|Error type 3"),
     "The activity could not be started: check the component with `adb shell cmd package "
     "resolve-activity --brief PACKAGE`."),
    ("binder_failure", _line_with(r"Failure calling service|Failed transaction|"
                                  r"FAILED_TRANSACTION|DeadObjectException|"
                                  r"TransactionTooLargeException"),
     "The system service did not answer the call (binder): SELinux refuses it from a root "
     "or app shell on some ROMs; run it from a plain `adb shell`, or reboot the phone."),
    ("permission_denied", _line_with(r"Security ?Exception|Permission denied|Permission Denial|"
                                     r"avc:\s+denied|Operation not permitted", re.I),
     "The shell user may not do this on this phone: check the vendor's developer options "
     "(Xiaomi: USB debugging (Security settings); OPPO: Disable permission monitoring)."),
    # (no word boundary before "device": the server's FAIL frame glues its length to it)
    ("device_offline", _line_with(r"device (?:offline|unauthorized|still authorizing|"
                                  r"'[^']*' not found|not found)\b|"
                                  r"\bno devices(?:/emulators)? found|"
                                  r"\berror: (?:closed|protocol fault)\b|"
                                  r"\b(?:cannot|could not|failed to) connect to "
                                  r"(?:daemon|TCP port|'?[\w.-]+:\d+)"),
     "adb lost the phone or its server (offline, closed, not found, refused): replug it or "
     "run `adb reconnect` (`adb start-server` for the server); on a phone that asks, accept "
     "the USB debugging prompt."),
    ("command_unsupported", _line_with(r": not found|inaccessible or not found|"
                                       r"(?i:unknown command|no such command|unknown option)|"
                                       r"Can't find service|"
                                       r"service: [^\n]{0,200}?(?:does not exist|not found)|"
                                       r"No shell command implementation|^\s*[Uu]sage: \w"),
     "This Android version lacks the command: update the phone, or use the fallback."),
)

_HINTS = {kind: hint for kind, _, hint in _FAILURES}

# Lines that say a command failed even when it exits 0 (``am`` prints its errors and
# exits 0), and the exception line of a Java stack trace.
_FAILURE_LINE = re.compile(r"(?m)^\s*(?:Error\b|error:|Failure\b|Exception occurred while "
                           r"executing|(?:Caused by: )?[\w.$]*(?:Exception|Error)(?::|$)).*")
_EXCEPTION_LINE = re.compile(r"(?m)^\s*(?:Caused by: )?[\w.$]+(?:Exception|Error): .*")


@_as_printed
def shell_failure(output: str, exit_code: int | None = None) -> ShellFailure | None:
    """The failure a shell command's output reports (some exit 0 on failure: ``am start``
    prints ``Error: Activity not started`` and exits 0), or None when it reports none.

    A failure of no known kind (a non-zero exit, an ``Error:`` line, a Java exception)
    is still a failure: kind ``unknown``, with the line that says the most."""
    for kind, pattern, hint in _FAILURES:
        m = pattern.search(output)
        if m is not None:
            return ShellFailure(kind=kind, hint=hint, line=_clean(m.group(0)))
    if exit_code == 251 and "monkey" in output:  # monkey's own exit code for SYS_KEYS
        return ShellFailure("no_physical_keys", _HINTS["no_physical_keys"], output.strip()[:200])
    said = _EXCEPTION_LINE.search(output) or _FAILURE_LINE.search(output)
    if said is not None or exit_code not in (None, 0):
        return ShellFailure("unknown", UNKNOWN_HINT,
                            _clean(said.group(0)) if said else _last_line(output, exit_code))
    return None


def _last_line(output: str, exit_code: int | None) -> str:
    """The last line of a failed command's output that is not a stack frame."""
    lines = [ln.strip() for ln in output.splitlines()
             if ln.strip() and not ln.strip().startswith("at ")]
    return lines[-1][:300] if lines else f"exit {exit_code} with no output"


def _clean(line: str) -> str:
    """The failure's line, without the ``java.lang.`` and ``Exception occurred while
    executing`` preambles, at most 300 characters."""
    line = re.sub(r"^.*?(java\.lang\.)?(?=\w*(SecurityException|Error))", "",
                  line.strip()[:1000], count=1)  # one cut: a second would eat a letter
    return line[:300]
