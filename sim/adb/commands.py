"""The device's shell: runs parsed shell lines against a Phone, with device-shaped output.

Each command gets plain, already-unquoted argv strings; nothing a command receives is
ever parsed as shell again, so `input text 'a;rm -rf /'` types exactly `a;rm -rf /`.
"""

from __future__ import annotations

import base64
import binascii
import posixpath
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from devices.adb import ADB_KEYBOARD, KEY_A, KEY_CTRL_LEFT, KEY_DEL
from sim.adb import shell as sh
from sim.adb import system
from sim.adb.encode import screencap
from sim.adb.fs import VirtualFS
from sim.adb.keycodes import parse_keycode
from sim.phone_api import Phone

NOT_FOUND = 127


class Sink:
    """Where one file descriptor's bytes go."""

    def write(self, data: bytes) -> None:
        raise NotImplementedError


@dataclass
class OutputSink(Sink):
    """The stream back to the adb client; keeps stdout/stderr order."""

    fd: int
    chunks: list[tuple[int, bytes]]

    def write(self, data: bytes) -> None:
        if data:
            self.chunks.append((self.fd, data))


@dataclass
class BufferSink(Sink):
    buf: bytearray = field(default_factory=bytearray)

    def write(self, data: bytes) -> None:
        self.buf += data


class NullSink(Sink):
    def write(self, data: bytes) -> None:
        pass


@dataclass
class Ctx:
    phone: Phone
    fs: VirtualFS
    stdin: bytes
    stdout: Sink
    stderr: Sink

    def out(self, text: str | bytes) -> None:
        self.stdout.write(text.encode() if isinstance(text, str) else text)

    def err(self, text: str | bytes) -> None:
        self.stderr.write(text.encode() if isinstance(text, str) else text)


Handler = Callable[[Ctx, list[str]], int]


@dataclass
class Result:
    chunks: list[tuple[int, bytes]]  # (1 = stdout | 2 = stderr, bytes), in order
    status: int

    @property
    def stdout(self) -> bytes:
        return b"".join(d for fd, d in self.chunks if fd == 1)

    @property
    def stderr(self) -> bytes:
        return b"".join(d for fd, d in self.chunks if fd == 2)

    @property
    def output(self) -> bytes:
        return b"".join(d for _, d in self.chunks)


def _sleep(seconds: float) -> None:
    if seconds > 0:
        time.sleep(seconds)


def _int_arg(text: str) -> int:
    """Android's input accepts floats for coordinates; it truncates them."""
    return int(float(text))


# ---- screen ------------------------------------------------------------------------------


def cmd_screencap(ctx: Ctx, args: list[str]) -> int:
    usage = "usage: screencap [-hp] [-d display-id] [FILENAME]\n"
    png, path, display = False, None, None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-p":
            png = True
        elif a == "-h":
            ctx.err(usage)
            return 1
        elif a == "-d":
            i += 1
            if i >= len(args) or not args[i].isdigit():
                ctx.err(usage)
                return 1
            display = args[i]
        elif a.startswith("-"):
            ctx.err(f"screencap: invalid option -- '{a[1:]}'\n{usage}")
            return 1
        else:
            path = a
        i += 1
    phone = ctx.phone
    cost = phone.latency.cost
    if cost is None:  # the cost model charges the encode and the transfer below instead
        _sleep(phone.latency.screencap_s)
    if phone.faults.refuse_screencap:
        ctx.err("Capturing failed.\n")
        return 1
    phone.screen_read()
    if path is not None and path.endswith(".png"):
        png = True
    if display is None and len(system.display_ids(phone)) > 1:
        ctx.err(system.MULTI_DISPLAY_WARNING)
    data = screencap(phone, png)
    if phone.faults.corrupt_screencap:
        rng = random.Random(len(data))
        cut = max(16, len(data) // 3)
        data = data[:8] + bytes(rng.getrandbits(8) for _ in range(min(cut, 4096)))
    if path is None:
        if cost is not None:
            cost.charge_capture(phone.info.width * phone.info.height, len(data), png)
        ctx.out(data)
        return 0
    if cost is not None:  # encoded on the phone; the file stays there (no transfer)
        cost.charge_capture(phone.info.width * phone.info.height, 0, png)
    try:
        ctx.fs.write(path, data)
    except OSError:
        ctx.err(f"Error opening file: {path} (No such file or directory)\n")
        return 1
    return 0


def cmd_wm(ctx: Ctx, args: list[str]) -> int:
    info = ctx.phone.info
    if args[:1] == ["size"] and len(args) == 1:
        ctx.out(f"Physical size: {info.width}x{info.height}\n")
        return 0
    if args[:1] == ["density"] and len(args) == 1:
        ctx.out(f"Physical density: {info.density}\n")
        return 0
    if args == ["dismiss-keyguard"]:
        system.dismiss_keyguard(ctx.phone.device_state)
        return 0
    if args[:1] in (["size"], ["density"]):
        ctx.err("Error: changing the display is not supported on this device\n")
        return 255
    ctx.err("Window manager (window) commands:\n  size [reset|WxH|WdpxHdp]\n  density [reset|DENSITY]\n")
    return 255 if args else 0


# ---- input -------------------------------------------------------------------------------

INPUT_SOURCES = {
    "keyboard", "dpad", "gamepad", "touchscreen", "touchpad", "touchnavigation", "stylus",
    "trackball", "mouse", "joystick", "rotaryencoder",
}
INPUT_COMMANDS = {"text", "keyevent", "tap", "swipe", "draganddrop", "keycombination", "press",
                  "roll", "motionevent"}
INPUT_USAGE = """Usage: input [<source>] [-d DISPLAY_ID] <command> [<arg>...]

The commands and default sources are:
      text <string> (Default: keyboard)
      keyevent [--longpress|--duration <duration to hold key down in ms>] [--doubletap] [--async] [--delay <duration between keycodes in ms>] <key code number or name> ... (Default: keyboard)
      tap <x> <y> (Default: touchscreen)
      swipe <x1> <y1> <x2> <y2> [duration(ms)] (Default: touchscreen)
      draganddrop <x1> <y1> <x2> <y2> [duration(ms)] (Default: touchscreen)
      press (Default: trackball)
      roll <dx> <dy> (Default: trackball)
"""


def android_input_text(text: str) -> str:
    """Android's `input text` unescaping: `%s` is a space (exactly as InputShellCommand)."""
    buf = list(text)
    escape = False
    i = 0
    while i < len(buf):
        if escape:
            escape = False
            if buf[i] == "s":
                buf[i] = " "
                del buf[i - 1]
                i -= 1
        if buf[i] == "%":
            escape = True
        i += 1
    return "".join(buf)


# The gestures `input` injects, shared with the scrcpy server's control socket
# (sim/adb/scrcpy_server.py), so a tap or a key does the same on both paths.
KEYCODE_PASTE = 279  # android.view.KeyEvent.KEYCODE_PASTE


def inject_tap(phone: Phone, x: int, y: int) -> None:
    if system.usable(phone.device_state):
        phone.tap(x, y)


def inject_swipe(phone: Phone, x1: int, y1: int, x2: int, y2: int, duration_ms: int) -> None:
    if system.swipe(phone, y1, y2):
        return
    if (x1, y1) == (x2, y2) and duration_ms >= 400:
        phone.long_press(x1, y1, duration_ms)
    else:
        phone.swipe(x1, y1, x2, y2, duration_ms)


def inject_keys(phone: Phone, codes: list[int]) -> None:
    """Key presses; PASTE types the clipboard into the focused field, as an EditText does."""
    for code in system.keys(phone, codes):
        if code == KEYCODE_PASTE:
            if phone.device_state.clipboard:
                phone.type_text(phone.device_state.clipboard)
        else:
            phone.key(code)


def inject_text(phone: Phone, text: str) -> None:
    if not system.text(phone, text):
        phone.type_text(text)


def cmd_input(ctx: Ctx, args: list[str]) -> int:
    args = list(args)
    if args and args[0] in INPUT_SOURCES:
        args.pop(0)
    if len(args) >= 2 and args[0] == "-d":
        if not args[1].lstrip("-").isdigit():
            ctx.err(f"Error: Invalid display id: {args[1]}\n")
            return 255
        args = args[2:]
    if not args:
        ctx.err(INPUT_USAGE)
        return 1
    command, rest = args[0], args[1:]
    phone = ctx.phone

    def bad() -> int:
        ctx.err(f"Error: Invalid arguments for command: {command}\n{INPUT_USAGE}")
        return 255

    # `input` starts a process on the phone before anything is injected (sim/device_cost.py)
    cost = phone.latency.cost
    if cost is not None:
        cost.charge_input()
    else:
        _sleep(phone.latency.input_s)
    refused = system.input_refused(phone, command) if command in INPUT_COMMANDS else None
    if refused is not None:
        ctx.err(refused)
        return 255
    try:
        if command == "text":
            if not rest:
                return bad()
            text = android_input_text(rest[0])
            if any(ord(c) > 126 or (ord(c) < 32 and c not in "\t\n") for c in text):
                # the virtual key map has no keys for these: KeyCharacterMap.getEvents()
                # returns null and InputShellCommand dies on it, as on a real device
                ctx.err("Exception occurred while executing 'text':\n"
                        "java.lang.NullPointerException: Attempt to get length of null array\n"
                        "\tat com.android.server.input.InputShellCommand.sendText"
                        "(InputShellCommand.java:289)\n")
                return 255
            inject_text(phone, text)
            return 0
        if command == "keyevent":
            codes: list[int] = []
            it = iter(rest)
            for a in it:
                if a in ("--longpress", "--doubletap", "--async"):
                    continue
                elif a in ("--duration", "--delay"):
                    next(it, None)
                else:
                    code = parse_keycode(a)
                    if code is None:
                        ctx.err(f"Error: Unknown keycode: {a}\n")
                        return 255
                    codes.append(code)
            if not codes:
                return bad()
            inject_keys(phone, codes)  # no long-press key semantics on the simulated phone
            return 0
        if command == "tap":
            if len(rest) != 2:
                return bad()
            inject_tap(phone, _int_arg(rest[0]), _int_arg(rest[1]))
            return 0
        if command in ("swipe", "draganddrop"):
            if len(rest) not in (4, 5):
                return bad()
            x1, y1, x2, y2 = (_int_arg(a) for a in rest[:4])
            duration = int(rest[4]) if len(rest) == 5 else (300 if command == "swipe" else 1000)
            if duration < 0:
                return bad()
            inject_swipe(phone, x1, y1, x2, y2, duration)
            return 0
        if command == "keycombination":
            if phone.info.sdk < 33:  # `input keycombination` came with Android 13
                ctx.err(f"Error: Unknown command: {command}\n{INPUT_USAGE}")
                return 1
            combo: list[int] = []
            for a in rest:
                if a.startswith("-"):
                    continue
                code = parse_keycode(a)
                if code is None:
                    ctx.err(f"Error: Unknown keycode: {a}\n")
                    return 255
                combo.append(code)
            if len(combo) < 2:
                return bad()
            if system.usable(phone.device_state):
                phone.key_combination(combo)
            return 0
        if command in ("press", "roll", "motionevent"):
            return 0
    except ValueError:
        return bad()
    ctx.err(f"Error: Unknown command: {command}\n{INPUT_USAGE}")
    return 1


# ---- activity manager, packages, input methods ---------------------------------------------


def _extras(args: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        if args[i] in ("--es", "--ei", "--ez", "--el", "--ef", "--eu") and i + 2 < len(args):
            out[args[i + 1]] = args[i + 2]
            i += 3
        elif args[i] in ("--eia", "--esa") and i + 2 < len(args):
            out[args[i + 1]] = args[i + 2]
            i += 3
        else:
            i += 1
    return out


def _flag(args: list[str], name: str) -> str | None:
    for i, a in enumerate(args[:-1]):
        if a == name:
            return args[i + 1]
    return None


def _adb_keyboard(ctx: Ctx, action: str, extras: dict[str, str]) -> None:
    """What the ADB Keyboard IME does with its broadcasts, when it is the current IME."""
    phone = ctx.phone
    if not system.adb_keyboard_listening(phone):
        return
    msg = extras.get("msg")
    if action == "ADB_INPUT_TEXT" and msg is not None:
        phone.type_text(msg)
    elif action == "ADB_INPUT_B64" and msg is not None:
        try:
            text = base64.b64decode(msg, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return
        phone.type_text(text)
    elif action == "ADB_INPUT_CHARS" and "chars" in extras:
        try:
            phone.type_text("".join(chr(int(c)) for c in extras["chars"].split(",")))
        except ValueError:
            return
    elif action == "ADB_INPUT_CODE" and "code" in extras and extras["code"].isdigit():
        phone.key(int(extras["code"]))
    elif action == "ADB_CLEAR_TEXT":  # the IME deletes the field's whole text
        phone.key_combination([KEY_CTRL_LEFT, KEY_A])
        phone.key(KEY_DEL)


_PACKAGE = re.compile(r"[A-Za-z]\w*(?:\.\w+)+")
_NO_VALUE = {"--brief", "--components", "-W", "-S", "-R"}  # options that take no value


def _intent_package(args: list[str]) -> str | None:
    """The package an intent names: `-p PKG`, or a package name last, after the options."""
    pkg = _flag(args, "-p")
    if pkg is None and args and _PACKAGE.fullmatch(args[-1]) \
            and (len(args) == 1 or not args[-2].startswith("-") or args[-2] in _NO_VALUE):
        pkg = args[-1]
    return pkg


def _start_intent(ctx: Ctx, args: list[str]) -> int:
    """`am start` without -n: the intent resolves as `cmd package resolve-activity` does (the
    default phone: only HOME). Unresolved, a real phone prints the error and exits 0
    (tests/data/adb_outputs.toml, am-start-unresolved-pixel2)."""
    phone = ctx.phone
    action, category, pkg = _flag(args, "-a"), _flag(args, "-c"), _intent_package(args)
    parts = ([f"act={action}"] if action else []) + ([f"cat=[{category}]"] if category else [])
    intent = " ".join(parts)
    tail = f" pkg={pkg}" if pkg else ""
    ctx.out(f"Starting: Intent {{ {intent}{tail} }}\n")
    target = None
    if action in (None, "android.intent.action.MAIN"):
        if system.profile(phone).real:
            target = system.resolve_activity(phone, category, pkg)
        elif category == system.HOME_CATEGORY:
            target = system.home_component(phone)
    if target is not None:
        _sleep(phone.latency.other_s)
        if target == system.home_component(phone):
            phone.key(3)  # the launcher is what HOME resolves to
        else:
            phone.launch(target.partition("/")[0])
        return 0
    ctx.err(f"Error: Activity not started, unable to resolve Intent "
            f"{{ {intent} flg=0x10000000{tail} }}\n")
    return system.profile(phone).am_unresolved_status


def cmd_am(ctx: Ctx, args: list[str]) -> int:
    phone = ctx.phone
    sub, rest = (args[0], args[1:]) if args else ("", [])
    if sub in ("start", "start-activity"):
        component = _flag(rest, "-n")
        if component is None:
            return _start_intent(ctx, rest)
        _sleep(phone.latency.other_s)
        ctx.out(f"Starting: Intent {{ cmp={component} }}\n")
        if system.profile(phone).real and \
                system.full_component(component) == system.home_component(phone):
            phone.key(3)  # the profile's launcher is the phone's own home
            return 0
        error = phone.start_activity(component)
        if error is not None:
            ctx.err(error if error.endswith("\n") else error + "\n")
            return 1
        return 0
    if sub == "force-stop":
        if not rest:
            ctx.err("Error: no package specified\n")
            return 255
        phone.force_stop(system.own_package(phone, rest[-1]))
        return 0
    if sub == "broadcast":
        action = _flag(rest, "-a")
        extras = _extras(rest)
        desc = f"act={action} " if action else ""
        has = " (has extras)" if extras else ""
        ctx.out(f"Broadcasting: Intent {{ {desc}flg=0x400000{has} }}\n")
        _sleep(phone.latency.input_s)
        if action is not None and action.startswith("ADB_"):
            _adb_keyboard(ctx, action, extras)
        ctx.out("Broadcast completed: result=0\n")
        return 0
    ctx.err("Activity manager (activity) commands:\n  start [-n COMPONENT]\n  force-stop PACKAGE\n"
            "  broadcast [-a ACTION] [--es KEY VALUE]\n")
    return 255 if sub else 0


# monkey on a phone without hardware keys: its SYS_KEYS share (2% by default) has nothing to
# send, so it aborts with exit 251 unless `--pct-syskeys 0` (tests/data/adb_outputs.toml,
# monkey-sys-keys-airtest).
NO_SYS_KEYS = "** SYS_KEYS has no physical keys but with factor 2.0%.\n"


def cmd_monkey(ctx: Ctx, args: list[str]) -> int:
    package = _flag(args, "-p")
    if package is None:
        ctx.err("** Error: No packages specified\n")
        return 1
    ctx.out("  bash arg: " + "\n  bash arg: ".join(args) + "\n")
    ctx.out(f"args: [{', '.join(args)}]\n")
    phone = ctx.phone
    if not system.profile(phone).hardware_keys and _flag(args, "--pct-syskeys") not in ("0", "0.0"):
        ctx.out(NO_SYS_KEYS)
        return 251
    _sleep(phone.latency.other_s)
    if package not in system.packages(phone) or not phone.launch(system.own_package(phone, package)):
        ctx.err("** No activities found to run, monkey aborted.\n")
        return 252
    ctx.out("Events injected: 1\n## Network stats: elapsed time=5ms (0ms mobile, 0ms wifi, 5ms not connected)\n")
    return 0


# What a phone has besides its apps: system packages, most without a launcher activity (a
# name like "calendar" is also a content provider's, as on a real phone).
SYSTEM_PACKAGES = (
    "android", "com.android.systemui", "com.android.phone", "com.android.shell",
    "com.android.providers.calendar", "com.android.providers.contacts",
    "com.android.providers.media", "com.android.providers.settings",
    "com.android.providers.downloads", "com.android.bluetooth", "com.android.nfc",
    "com.android.location.fused", "com.android.packageinstaller", "com.android.wallpaper",
    "com.google.android.gms", "com.google.android.gsf", "com.google.android.webview",
    "com.google.android.youtube.music.widget", "com.google.android.apps.maps.overlay",
    "com.android.chrome.trichrome", "com.google.android.tts", "com.android.vending.billing",
)


def cmd_pm(ctx: Ctx, args: list[str]) -> int:
    phone = ctx.phone
    if args[:2] == ["list", "packages"]:
        flags = {a for a in args[2:] if a.startswith("-")}
        words = [a for a in args[2:] if not a.startswith("-")]
        apps = set(system.packages(phone))
        launcher = system.profile(phone).launcher_package
        system_pkgs = set(SYSTEM_PACKAGES) | {
            p for p in apps if p.startswith(("com.android.", "com.google.")) or p == launcher}
        if "-3" in flags:
            listed = apps - system_pkgs
        elif "-s" in flags:
            listed = system_pkgs
        else:
            listed = apps | system_pkgs
        for pkg in sorted(listed):
            if not words or words[0] in pkg:
                path = f"/data/app/~~{pkg}/base.apk=" if "-f" in flags else ""
                ctx.out(f"package:{path}{pkg}\n")
        return 0
    if args[:1] == ["path"] and len(args) == 2:
        if args[1] in system.packages(phone):
            ctx.out(f"package:/data/app/{args[1]}/base.apk\n")
            return 0
        return 1
    if args[:1] == ["resolve-activity"]:
        rest = list(args[1:])
        if "--user" in rest[:-1]:  # `--user 0`: the one user there is
            del rest[rest.index("--user"):rest.index("--user") + 2]
        category = _flag(rest, "-c")
        target = system.resolve_activity(phone, category, _intent_package(rest))
        ctx.out(system.resolve_output(phone, target, "--brief" in rest,
                                      category == system.HOME_CATEGORY))
        return 0
    ctx.err("Package manager (package) commands:\n  list packages [FILTER]\n  path PACKAGE\n"
            "  resolve-activity [--brief] [-a ACTION] [-c CATEGORY] [PACKAGE]\n")
    return 255 if args else 0


def cmd_ime(ctx: Ctx, args: list[str]) -> int:
    """`ime list [-a] [-s]`, `ime enable ID`, `ime set ID`: `-a` lists the installed input
    methods, without it the enabled ones; only an enabled one can be set (AOSP's
    InputMethodManagerService shell command: "IME is not found or not enabled")."""
    phone = ctx.phone
    st = phone.device_state
    if args[:1] == ["list"]:
        imes = system.installed_imes(phone) if "-a" in args[1:] else system.enabled_imes(phone)
        if "-s" in args[1:]:
            for ime in imes:
                ctx.out(ime + "\n")
        else:
            for ime in imes:
                pkg, _, svc = ime.partition("/")
                ctx.out(f"{ime}:\n  mId={ime} mSettingsActivity=null\n  Service:\n"
                        f"    ServiceInfo:\n      name={svc}\n      packageName={pkg}\n")
        return 0
    refused = system.ime_change_refused(phone) if args[:1] in (["set"], ["enable"]) else None
    if refused is not None:
        ctx.err(refused)
        return 255
    if args[:1] == ["set"] and len(args) == 2:
        if system.select_ime(phone, args[1]):
            ctx.out(f"Input method {args[1]} selected for user #0\n")
            return 0
        ctx.err(f"Unknown input method {args[1]} cannot be selected for user #0\n")
        return 255
    if args[:1] == ["enable"] and len(args) == 2:
        ime = args[1]
        if ime in system.enabled_imes(phone):
            ctx.out(f"Input method {ime}: already enabled for user #0\n")
            return 0
        if ime in system.installed_imes(phone):
            st.adb_keyboard = "enabled"
            ctx.out(f"Input method {ime}: now enabled for user #0\n")
            return 0
        ctx.err(f"Unknown input method {ime} cannot be enabled for user #0\n")
        return 255
    ctx.err("ime <command>:\n  list [-a] [-s]\n  enable ID\n  set ID\n")
    return 255 if args else 0


def cmd_settings(ctx: Ctx, args: list[str]) -> int:
    """`settings get|put secure default_input_method|enabled_input_methods`: the current
    IME and the enabled ones (`:`-separated); any other key reads as unset ("null"), as
    Android prints, and a put of it is kept nowhere."""
    phone = ctx.phone
    if len(args) == 3 and args[0] == "get" and args[1] in ("system", "secure", "global"):
        value = "null"
        if args[1:] == ["secure", "default_input_method"]:
            value = phone.current_ime()
        elif args[1:] == ["secure", "enabled_input_methods"]:
            value = ":".join(system.enabled_imes(phone))
        ctx.out(value + "\n")
        return 0
    if len(args) == 4 and args[0] == "put" and args[1] in ("system", "secure", "global"):
        refused = system.settings_write_refused(phone, args[1])
        if refused is not None:
            ctx.err(refused)
            return 255
        if args[1:3] == ["secure", "default_input_method"]:
            system.select_ime(phone, args[3])
        elif args[1:3] == ["secure", "enabled_input_methods"] and \
                phone.device_state.adb_keyboard != "absent":
            on = ADB_KEYBOARD in args[3].split(":")
            phone.device_state.adb_keyboard = "enabled" if on else "disabled"
        return 0
    ctx.err("usage:  settings [--user <USER_ID> | current] get namespace key\n"
            "        settings [--user <USER_ID> | current] put namespace key value\n")
    return 255


def cmd_dumpsys(ctx: Ctx, args: list[str]) -> int:
    phone = ctx.phone
    info = phone.info
    if args[:1] == ["window"]:
        ctx.out(system.dumpsys_window(phone, args[1] if len(args) > 1 else None))
        return 0
    if args[:1] == ["power"]:
        ctx.out(system.dumpsys_power(phone))
        return 0
    if args[:1] == ["SurfaceFlinger"]:
        ctx.out(system.surfaceflinger_display_ids(phone))
        return 0
    if args[:1] == ["input_method"]:
        ctx.out(system.dumpsys_input_method(phone))
        return 0
    if args[:1] == ["display"]:
        o = phone.orientation()
        w, h = (info.width, info.height) if o % 2 == 0 else (info.height, info.width)
        ctx.out(
            "DISPLAY MANAGER (dumpsys display)\n"
            "  mOnlyCode=false\n  mSafeMode=false\n"
            f"  mViewports=[DisplayViewport{{type=INTERNAL, valid=true, isActive=true, displayId=0, "
            f"uniqueId='local:4619827259835644672', physicalPort=0, orientation={o}, "
            f"logicalFrame=Rect(0, 0 - {w}, {h}), physicalFrame=Rect(0, 0 - {w}, {h}), "
            f"deviceWidth={w}, deviceHeight={h}}}]\n"
            f"  mDefaultDisplayDensity={info.density}\n"
            f"  mCurrentOrientation={o}\n"
        )
        return 0
    if args[:1] == ["activity"]:
        short = system.short_component(system.app_component(phone))
        if args[1:2] == ["top"]:
            ctx.out(f"TASK {short.partition('/')[0]} id=12 userId=0\n"
                    f"  ACTIVITY {short} 8e7f6a5 pid=4321\n")
        else:
            ctx.out("ACTIVITY MANAGER ACTIVITIES (dumpsys activity activities)\n"
                    f"  mResumedActivity: ActivityRecord{{8e7f6a5 u0 {short} t12}}\n"
                    f"  ResumedActivity: ActivityRecord{{8e7f6a5 u0 {short} t12}}\n")
        return 0
    if not args:
        ctx.out("Currently running services:\n  SurfaceFlinger\n  activity\n  display\n"
                "  input_method\n  package\n  power\n  window\n")
        return 0
    ctx.err(f"Can't find service: {args[0]}\n")
    return 0


# ---- system --------------------------------------------------------------------------------


def device_props(phone: Phone) -> dict[str, str]:
    info = phone.info
    props = {
        "ro.product.name": info.product_name,
        "ro.product.model": info.model,
        "ro.product.device": info.device,
        "ro.product.brand": info.profile.brand,
        "ro.product.manufacturer": info.profile.manufacturer,
        "ro.product.cpu.abi": "x86_64",
        "ro.build.version.sdk": str(info.sdk),
        "ro.build.version.release": info.release,
        "ro.build.type": "userdebug",
        "ro.serialno": info.serialno or info.serial,
        "ro.sf.lcd_density": str(info.density),
        "ro.debuggable": "1",
        "sys.boot_completed": "1",
        "persist.sys.locale": "en-US",
    }
    props.update(info.props)
    return props


def cmd_getprop(ctx: Ctx, args: list[str]) -> int:
    props = device_props(ctx.phone)
    if not args:
        for k in sorted(props):
            ctx.out(f"[{k}]: [{props[k]}]\n")
        return 0
    ctx.out(props.get(args[0], args[1] if len(args) > 1 else "") + "\n")
    return 0


def cmd_echo(ctx: Ctx, args: list[str]) -> int:
    newline = True
    if args[:1] == ["-n"]:
        newline, args = False, args[1:]
    ctx.out(" ".join(args) + ("\n" if newline else ""))
    return 0


def cmd_true(ctx: Ctx, args: list[str]) -> int:
    return 0


def cmd_false(ctx: Ctx, args: list[str]) -> int:
    return 1


def cmd_sleep(ctx: Ctx, args: list[str]) -> int:
    try:
        seconds = float(args[0]) if args else -1.0
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 60:
        ctx.err(f"sleep: invalid number '{args[0] if args else ''}'\n")
        return 1
    time.sleep(seconds)
    return 0


def cmd_ls(ctx: Ctx, args: list[str]) -> int:
    paths = [a for a in args if not a.startswith("-")] or ["/"]
    status = 0
    for p in paths:
        entry = ctx.fs.get(p)
        if entry is None:
            ctx.err(f"ls: {p}: No such file or directory\n")
            status = 1
        elif entry.is_dir:
            for name in ctx.fs.listdir(p):
                ctx.out(name + "\n")
        else:
            ctx.out(p + "\n")
    return status


def cmd_rm(ctx: Ctx, args: list[str]) -> int:
    flags = "".join(a[1:] for a in args if a.startswith("-"))
    recursive, force = "r" in flags or "R" in flags, "f" in flags
    status = 0
    for p in (a for a in args if not a.startswith("-")):
        try:
            ctx.fs.remove(p, recursive=recursive)
        except FileNotFoundError:
            if not force:
                ctx.err(f"rm: {p}: No such file or directory\n")
                status = 1
        except IsADirectoryError:
            ctx.err(f"rm: {p}: is a directory\n")
            status = 1
    return status


# Kernel files the shell reads that live with the phone, not in its file tree.
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


def cmd_cat(ctx: Ctx, args: list[str]) -> int:
    if not args:
        ctx.out(ctx.stdin)
        return 0
    status = 0
    for p in args:
        if p == BOOT_ID_PATH:
            ctx.out(ctx.phone.info.boot_id + "\n")
            continue
        try:
            ctx.out(ctx.fs.read(p))
        except FileNotFoundError:
            ctx.err(f"cat: {p}: No such file or directory\n")
            status = 1
        except IsADirectoryError:
            ctx.err(f"cat: {p}: Is a directory\n")
            status = 1
    return status


def cmd_mkdir(ctx: Ctx, args: list[str]) -> int:
    parents = "-p" in args
    status = 0
    for p in (a for a in args if not a.startswith("-")):
        try:
            ctx.fs.mkdir(p, parents=parents)
        except FileExistsError:
            ctx.err(f"mkdir: '{p}': File exists\n")
            status = 1
        except OSError:
            ctx.err(f"mkdir: '{p}': No such file or directory\n")
            status = 1
    return status


def cmd_grep(ctx: Ctx, args: list[str]) -> int:
    """toybox grep's common subset: -E -F -i -v -c -q; a pattern, then files or stdin."""
    flags = ""
    rest: list[str] = []
    for i, a in enumerate(args):
        if a == "--":
            rest += args[i + 1:]
            break
        if a.startswith("-") and len(a) > 1 and not rest:
            flags += a[1:]
        else:
            rest.append(a)
    unknown = set(flags) - set("EFivcqe")
    if unknown or not rest:
        ctx.err(f"grep: {'unknown option ' + ''.join(sorted(unknown)) if unknown else 'no pattern'}\n"
                "usage: grep [-EFivcq] PATTERN [FILE...]\n")
        return 2
    pattern, files = rest[0], rest[1:]
    try:
        regex = re.compile(re.escape(pattern) if "F" in flags else pattern,
                           re.IGNORECASE if "i" in flags else 0)
    except re.error as e:
        ctx.err(f"grep: bad regex '{pattern}': {e}\n")
        return 2
    sources: list[tuple[str, bytes]] = []
    status = 1
    for p in files or ["-"]:
        if p == "-":
            sources.append((p, ctx.stdin))
            continue
        try:
            sources.append((p, ctx.fs.read(p)))
        except OSError:
            ctx.err(f"grep: {p}: No such file or directory\n")
            status = 2
    count = 0
    for name, data in sources:
        for line in data.decode("utf-8", errors="replace").splitlines():
            if bool(regex.search(line)) != ("v" in flags):
                count += 1
                if not ("c" in flags or "q" in flags):
                    ctx.out((f"{name}:" if len(files) > 1 else "") + line + "\n")
    if "c" in flags:
        ctx.out(f"{count}\n")
    if count:
        return 0
    return status


def cmd_sh(ctx: Ctx, args: list[str]) -> int:
    """`sh -c LINE`: a child shell with its own `$?`; nothing else (no script files)."""
    if len(args) >= 2 and args[0] == "-c":
        child = DeviceShell(ctx.phone, ctx.fs)
        result = child.run(args[1])
        for fd, data in result.chunks:
            (ctx.stdout if fd == 1 else ctx.stderr).write(data)
        return result.status
    ctx.err(f"{sh.SH}: only `sh -c COMMAND` is supported here\n")
    return 2


_SERVICES = {"package": "pm", "activity": "am", "input": "input", "window": "wm",
             "input_method": "ime", "display": "dumpsys", "settings": "settings"}


def cmd_cmd(ctx: Ctx, args: list[str]) -> int:
    """`cmd SERVICE ...`: the binder shell-command entry that pm/am/input/wm/ime wrap."""
    if not args:
        ctx.err("cmd: No service specified; use -l to list all running services.\n")
        return 20
    if args[0] == "-l":
        ctx.out("Currently running services:\n" + "".join(f"  {s}\n" for s in sorted(_SERVICES)))
        return 0
    target = _SERVICES.get(args[0])
    if target is None:
        ctx.err(f"cmd: Can't find service: {args[0]}\n")
        return 20
    if target == "dumpsys":
        return cmd_dumpsys(ctx, ["display", *args[1:]])
    return COMMANDS[target](ctx, args[1:])


COMMANDS: dict[str, Handler] = {
    "am": cmd_am,
    "cat": cmd_cat,
    "cmd": cmd_cmd,
    "dumpsys": cmd_dumpsys,
    "echo": cmd_echo,
    "false": cmd_false,
    "getprop": cmd_getprop,
    "grep": cmd_grep,
    "ime": cmd_ime,
    "input": cmd_input,
    "ls": cmd_ls,
    "mkdir": cmd_mkdir,
    "monkey": cmd_monkey,
    "pm": cmd_pm,
    "rm": cmd_rm,
    "screencap": cmd_screencap,
    "settings": cmd_settings,
    "sh": cmd_sh,
    "sleep": cmd_sleep,
    "true": cmd_true,
    "wm": cmd_wm,
}


class _Exit(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class DeviceShell:
    """One shell session: `$?` carries over between lines, like a shell process."""

    def __init__(self, phone: Phone, fs: VirtualFS) -> None:
        self.phone = phone
        self.fs = fs
        self.env: dict[str, str] = {"?": "0", "HOME": "/", "PATH": "/system/bin", "0": sh.SH,
                                    "USER": "shell", "ANDROID_DATA": "/data"}
        self.exited = False  # `exit` ran: an interactive session ends

    def run(self, line: str) -> Result:
        chunks: list[tuple[int, bytes]] = []
        out, err = OutputSink(1, chunks), OutputSink(2, chunks)
        try:
            steps = sh.parse(line)
        except sh.ShellSyntaxError as e:
            err.write(f"{sh.SH}: {e}\n".encode())
            self.env["?"] = "1"
            return Result(chunks, 1)
        status = int(self.env["?"])
        for step in steps:
            if step.connector == "&&" and status != 0:
                continue
            if step.connector == "||" and status == 0:
                continue
            try:
                status = self._pipeline(step.pipeline, out, err)
            except _Exit as e:
                self.exited = True
                status = e.status
                self.env["?"] = str(status)
                break
            self.env["?"] = str(status)
        return Result(chunks, status)

    def _pipeline(self, pipeline: sh.Pipeline, out: Sink, err: Sink) -> int:
        stdin = b""
        status = 0
        for i, command in enumerate(pipeline):
            last = i == len(pipeline) - 1
            pipe = BufferSink()
            status = self._simple(command, stdin, out if last else pipe, err)
            stdin = bytes(pipe.buf)
        return status

    def _simple(self, command: sh.SimpleCommand, stdin: bytes, out: Sink, err: Sink) -> int:
        argv = [w.expand(self.env) for w in command.words]
        sinks: dict[int, Sink] = {1: out, 2: err}
        files: list[tuple[str, BufferSink, bool]] = []
        for r in command.redirects:
            target = r.target.expand(self.env)
            if r.mode == ">&":
                if target in ("1", "2"):
                    sinks[r.fd] = sinks[int(target)]
                continue
            if r.mode == "<":
                try:
                    stdin = self.fs.read(target)
                except OSError:
                    err.write(f"{sh.SH}: can't open '{target}': No such file or directory\n".encode())
                    return 1
                continue
            if target == "/dev/null":
                sinks[r.fd] = NullSink()
                continue
            parent = self.fs.get(posixpath.dirname(self.fs.norm(target)))
            if parent is None or not parent.is_dir:
                err.write(f"{sh.SH}: can't create {target}: No such file or directory\n".encode())
                return 1
            buf = BufferSink()
            files.append((target, buf, r.mode == ">>"))
            sinks[r.fd] = buf
        if not argv:
            status = 0
        else:
            status = self._exec(argv, Ctx(self.phone, self.fs, stdin, sinks[1], sinks[2]))
        for path, buf, append in files:
            try:
                self.fs.write(path, bytes(buf.buf), append=append)
            except OSError:
                err.write(f"{sh.SH}: can't create {path}: Is a directory\n".encode())
                status = 1
        return status

    def _exec(self, argv: list[str], ctx: Ctx) -> int:
        name = argv[0]
        _sleep(self.phone.faults.slow_s)
        if name == "exit":
            try:
                raise _Exit(int(argv[1]) & 0xFF if len(argv) > 1 else int(self.env["?"]))
            except ValueError:
                ctx.err(f"{sh.SH}: exit: {argv[1]}: bad number\n")
                return 2
        handler = COMMANDS.get(posixpath.basename(name) if name.startswith("/system/bin/") else name)
        if handler is None:
            ctx.err(f"{sh.SH}: {name}: inaccessible or not found\n")
            return NOT_FOUND
        if name not in ("screencap", "input", "am", "sleep"):
            _sleep(self.phone.latency.other_s)
        try:
            return handler(ctx, argv[1:])
        except Exception as e:  # a phone-side bug must not kill the transport
            ctx.err(f"{name}: internal error: {type(e).__name__}: {e}\n")
            return 1
