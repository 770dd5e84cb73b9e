"""The Device protocol, and its adbutils implementation scoped to one serial.

Every call runs off the event loop (adbutils is blocking) under a timeout. Screenshots
take the raw ``exec:screencap`` path (an RGBA header parsed here, so the phone skips its
slow PNG encode) or ``screencap -p``, falling back to PNG when the raw bytes do not parse.
With ``capture="auto"`` (the default) the first screenshot times both paths and keeps
the faster one: raw on real phones; PNG over the simulated phone's loopback transport,
where 10 MB of raw pixels cost more than the encode. Both are timed again every
``REMEASURE_EVERY`` frames, whichever won (``measurements``, ``chosen``, ``timings``).

Typed text never reaches the device shell unquoted: ASCII goes through ``input text`` in
single quotes (``%s`` for spaces), anything else through the ADB Keyboard's
``ADB_INPUT_B64`` broadcast, whose payload is base64 (no metacharacters).
"""

from __future__ import annotations

import base64
import os
import re
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol, TypeVar

import anyio
import numpy as np

from devices.adb_output import (
    UNKNOWN_HINT,
    ShellFailure,
    Wakefulness,
    display_ids,
    foreground_package,
    input_methods,
    input_size,
    launcher_component,
    png_payload,
    shell_failure,
    wakefulness,
)
from devices.codecs import decode_rgb
from runtime.errors import MobagentError

if TYPE_CHECKING:
    import adbutils

T = TypeVar("T")

DEFAULT_ADB_PORT = 5037
READ_CHUNK = 1 << 20  # bytes per recv when reading a screencap
ADB_KEYBOARD = "com.android.adbkeyboard/.AdbIME"  # the only definition (sim/ imports it)
ADB_KEYBOARD_HELP = (
    "typing non-ASCII text needs the ADB Keyboard IME, which is not installed on {serial}: "
    "download ADBKeyboard.apk from https://github.com/senzhk/ADBKeyBoard/releases, then run "
    "`adb -s {serial} install ADBKeyboard.apk` and "
    f"`adb -s {{serial}} shell ime enable {ADB_KEYBOARD}`"
)
# The real ADB Keyboard drops broadcasts until its service has started after `ime set`
# (Open-AutoGLM waits about a second); the switch itself is visible in the settings.
IME_SWITCH_TIMEOUT_S = 3.0
IME_START_S = 0.5
REMEASURE_EVERY = 200  # auto capture: time both paths again every this many frames
MAIN_ACTION = "android.intent.action.MAIN"
LAUNCHER_CATEGORY = "android.intent.category.LAUNCHER"
HOME_CATEGORY = "android.intent.category.HOME"
KEY_BACK, KEY_HOME, KEY_ENTER = 4, 3, 66
KEY_DEL, KEY_MOVE_END, KEY_CTRL_LEFT, KEY_A = 67, 123, 113, 29
# Without a select-all, ``clear_text`` deletes this many characters from the end of the field.
CLEAR_MAX_CHARS = 256
CapturePath = Literal["raw", "png", "auto"]


def adb_server_port() -> int:
    """The adb server's port, as adb itself picks it: $ANDROID_ADB_SERVER_PORT, else 5037.

    A malformed value is a ``ValueError`` naming it (adb would silently use another port).
    """
    raw = os.environ.get("ANDROID_ADB_SERVER_PORT", str(DEFAULT_ADB_PORT))
    try:
        port = int(raw)
    except ValueError:
        raise ValueError(f"ANDROID_ADB_SERVER_PORT={raw!r} is not a port number") from None
    if not 0 < port < 65536:
        raise ValueError(f"ANDROID_ADB_SERVER_PORT={raw!r} is not a port number")
    return port


# `input text` takes printable ASCII; tabs/newlines and everything else go through the IME.
_INPUT_TEXT_OK = re.compile(r"^[\x20-\x7e]*$")


class DeviceError(MobagentError, RuntimeError):
    """A device call failed or timed out; the message says which and why. ``failure`` is
    what the phone's output said went wrong (its kind and fix), when it said."""

    def __init__(self, message: str, failure: ShellFailure | None = None) -> None:
        super().__init__(message)
        self.failure = failure


class ShellResult(NamedTuple):
    """A shell line's exit status and its output (stdout and stderr, as adb gives them)."""

    exit_code: int
    output: str


@dataclass(frozen=True)
class Screenshot:
    """One captured screen: RGB pixels, and which path produced them."""

    rgb: np.ndarray  # H x W x 3, uint8
    path: Literal["raw", "png", "stream"]  # stream: a decoded scrcpy frame
    png: bytes = b""  # the PNG the phone sent, when the png path was used

    @property
    def width(self) -> int:
        return int(self.rgb.shape[1])

    @property
    def height(self) -> int:
        return int(self.rgb.shape[0])


class Device(Protocol):
    """What the actors need from a phone. Coordinates are screen pixels."""

    serial: str

    async def screenshot(self) -> Screenshot: ...
    async def tap(self, x: int, y: int) -> None: ...
    async def long_press(self, x: int, y: int, duration_ms: int = 800) -> None: ...
    async def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int = 300) -> None: ...
    async def key(self, keycode: int) -> None: ...
    async def type_text(self, text: str) -> None: ...
    async def clear_text(self) -> None: ...
    async def start_app(self, package: str) -> None: ...
    async def list_packages(self) -> list[str]: ...
    async def current_app(self) -> str: ...
    async def window_size(self) -> tuple[int, int]: ...


# ---- pure helpers (tested on their own) --------------------------------------------------


def parse_raw_screencap(data: bytes) -> np.ndarray:
    """``screencap`` without ``-p``: a 12- or 16-byte header (w, h, format[, colour space])
    then w*h*4 pixel bytes. Returns RGB; ``ValueError`` when the bytes are not that."""
    if len(data) < 12:
        raise ValueError(f"raw screencap too short ({len(data)} bytes)")
    w, h, fmt = struct.unpack_from("<3I", data, 0)
    if not (0 < w <= 16384 and 0 < h <= 16384):
        raise ValueError(f"raw screencap header has an implausible size {w}x{h}")
    n = w * h * 4
    header = len(data) - n
    if header not in (12, 16):
        raise ValueError(f"raw screencap is {len(data)} bytes, expected {n} + a 12/16-byte header")
    if fmt not in (1, 2, 5):  # RGBA_8888, RGBX_8888, BGRA_8888
        raise ValueError(f"raw screencap pixel format {fmt} is not supported")
    px = np.frombuffer(data, dtype=np.uint8, count=n, offset=header).reshape(h, w, 4)
    rgb = px[:, :, [2, 1, 0]] if fmt == 5 else px[:, :, :3]
    return np.ascontiguousarray(rgb)


def decode_png(data: bytes) -> np.ndarray:
    try:
        return decode_rgb(data)
    except ValueError as exc:
        raise ValueError(f"screencap -p did not return a readable PNG: {exc}") from None


def input_text_commands(text: str) -> list[str]:
    """Shell lines that make ``input text`` type exactly ``text`` (printable ASCII only).

    Spaces become ``%s`` (Android's escape); a literal ``%s`` in the text is split across
    two commands so the device never reads it as a space. Each argument is single-quoted
    for the device shell, so no metacharacter is ever interpreted.
    """
    if not _INPUT_TEXT_OK.match(text):
        raise ValueError("input text takes printable ASCII only")
    chunks: list[str] = []
    cur = ""
    for ch in text:
        if ch == "s" and cur.endswith("%"):
            chunks.append(cur)  # "%" ends this chunk; the "s" starts the next one
            cur = ""
        cur += "%s" if ch == " " else ch
    if cur:
        chunks.append(cur)
    return [f"input text {sh_quote(c)}" for c in chunks]


def sh_quote(arg: str) -> str:
    """Always single-quoted for the device's sh (a quote inside becomes '\\'')."""
    return "'" + arg.replace("'", "'\\''") + "'"


def needs_ime(text: str) -> bool:
    """True when ``text`` cannot go through ``input text``."""
    return not _INPUT_TEXT_OK.match(text)


def b64_broadcast_command(text: str) -> str:
    msg = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return f"am broadcast -a ADB_INPUT_B64 --es msg {msg}"


def clear_commands(select_all: bool, max_chars: int = CLEAR_MAX_CHARS) -> list[str]:
    """Shell lines that empty the focused field without the ADB Keyboard.

    ``select_all``: Ctrl+A then DEL (``input keycombination``, Android 13+). Otherwise the
    cursor goes to the end and DEL is pressed ``max_chars`` times, 64 key codes per line.
    """
    if select_all:
        return [f"input keycombination {KEY_CTRL_LEFT} {KEY_A}", f"input keyevent {KEY_DEL}"]
    dels = [KEY_DEL] * max_chars
    return [f"input keyevent {KEY_MOVE_END}"] + [
        "input keyevent " + " ".join(map(str, dels[i:i + 64])) for i in range(0, len(dels), 64)]


def parse_package_list(out: str) -> list[str]:
    """``pm list packages`` -> package names (``package:com.x`` lines; ``-f`` paths dropped)."""
    pkgs = []
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("package:"):
            pkg = line[len("package:"):].rsplit("=", 1)[-1].strip()
            if re.fullmatch(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+", pkg):
                pkgs.append(pkg)
    return pkgs


# ---- the adbutils implementation ---------------------------------------------------------


class AdbDevice:
    """One phone through an adb server; all calls off the loop, each under ``timeout_s``."""

    def __init__(
        self,
        serial: str,
        *,
        client: adbutils.AdbClient | None = None,
        capture: CapturePath = "auto",
        timeout_s: float = 15.0,
    ) -> None:
        import adbutils  # late: ANDROID_ADB_SERVER_PORT must be set before the first import

        self.serial = serial
        self.capture = capture
        self.timeout_s = timeout_s
        self._client = client or adbutils.AdbClient(host="127.0.0.1", socket_timeout=timeout_s)
        self._dev = self._client.device(serial)
        self._raw_ok: bool | None = None if capture == "auto" else capture == "raw"
        self._ime_ready = False
        self._select_all: bool | None = None  # does `input keycombination` work? (unknown yet)
        self._display: str | None = None  # the display id screencap is given ("" for none)
        self._captures = 0
        self._raw_broken = False  # raw bytes did not parse: PNG for good
        self.remeasure_every = REMEASURE_EVERY
        self.measurements = 0  # auto: how often both paths were timed
        self.timings: dict[str, float | None] = {}  # auto: the last measurement per path
        self.decode_cpu_s = 0.0  # thread CPU spent decoding PNG screenshots

    def __repr__(self) -> str:
        return f"AdbDevice({self.serial!r})"

    @property
    def device(self) -> adbutils.AdbDevice:
        """adbutils' device (the scrcpy stream opens its sockets through it)."""
        return self._dev

    async def _call(self, what: str, fn: Callable[[], T], timeout_s: float | None = None) -> T:
        limit = timeout_s or self.timeout_s
        try:
            with anyio.fail_after(limit):
                return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
        except TimeoutError:
            raise DeviceError(f"{self.serial}: {what} timed out after {limit:g}s") from None
        except DeviceError:
            raise
        except Exception as exc:
            raise DeviceError(f"{self.serial}: {what} failed: {type(exc).__name__}: {exc}") from None

    def _shell(self, cmd: str) -> str:
        """Run one shell line; a non-zero exit is a DeviceError with its output."""
        res = self._dev.shell2(cmd, timeout=self.timeout_s, rstrip=True, v2=True)
        if res.returncode != 0:
            # Never None on a non-zero exit: a kind not known here is "unknown", with its line.
            failure = shell_failure(res.output or "", res.returncode) \
                or ShellFailure("unknown", UNKNOWN_HINT, f"exit {res.returncode}")
            raise DeviceError(f"`{cmd[:60]}` exited {res.returncode}: {failure.line} "
                              f"[{failure.kind}] {failure.hint}", failure)
        return str(res.output)

    async def shell(self, cmd: str) -> str:
        return await self._call(cmd.split(" ", 1)[0], lambda: self._shell(cmd))

    def _shell_result(self, cmd: str) -> ShellResult:
        res = self._dev.shell2(cmd, timeout=self.timeout_s, rstrip=True, v2=True)
        return ShellResult(int(res.returncode), str(res.output or ""))

    async def shell_result(self, cmd: str, timeout_s: float | None = None) -> ShellResult:
        """One shell line's exit status and output, whatever they are (a check reads them:
        ``Can't find service`` exits 0, a refused ``input`` exits non-zero)."""
        return await self._call(cmd.split(" ", 1)[0], lambda: self._shell_result(cmd), timeout_s)

    # -- screen --------------------------------------------------------------------------

    def _exec_bytes(self, cmd: str) -> bytes:
        with self._dev.open_transport(timeout=self.timeout_s) as c:
            c.send_command("exec:" + cmd)
            c.check_okay()
            # adbutils' read_until_close appends 4 KB chunks to a bytes object: quadratic,
            # about a second of copying for a 10 MB raw frame. Large reads, joined once.
            chunks = []
            while chunk := c.recv(READ_CHUNK):  # public alias of the socket recv
                chunks.append(chunk)
            return b"".join(chunks)

    def _display_flag(self) -> str:
        """`` -d ID`` on a phone with several displays (a foldable), read once: without it
        screencap picks one by itself and prints a warning before the image."""
        if self._display is None:
            out = self._dev.shell2("dumpsys SurfaceFlinger --display-id", timeout=self.timeout_s,
                                   rstrip=True, v2=True)
            ids = display_ids(out.output or "") if out.returncode == 0 else []
            self._display = ids[0] if len(ids) > 1 else ""
        return f" -d {self._display}" if self._display else ""

    def _screenshot_raw(self) -> Screenshot:
        return Screenshot(parse_raw_screencap(self._exec_bytes("screencap" + self._display_flag())),
                          "raw")

    def _screenshot_png(self) -> Screenshot:
        # past the warning some phones print before the image
        data = png_payload(self._exec_bytes("screencap -p" + self._display_flag()))
        cpu = time.thread_time()
        rgb = decode_png(data)
        self.decode_cpu_s += time.thread_time() - cpu  # the host's part of a PNG screenshot
        return Screenshot(rgb, "png", png=data)

    def _screenshot(self) -> Screenshot:
        if self.capture == "raw":
            return self._screenshot_raw()
        if self.capture == "png" or self._raw_broken:
            return self._screenshot_png()
        self._captures += 1
        if self._captures % self.remeasure_every == 0:
            self._raw_ok = None  # the link or the phone may have changed: measure again
        if self._raw_ok is None:
            return self._measure()
        if not self._raw_ok:
            return self._screenshot_png()
        try:
            return self._screenshot_raw()
        except ValueError:
            self._raw_broken = True  # the format changed under us: PNG from now on
            return self._screenshot_png()

    def _measure(self) -> Screenshot:
        """With "auto": time both paths and keep the faster one. On real phones raw usually
        wins (no on-device PNG encode); over a slow transport PNG can."""
        t0 = time.perf_counter()
        try:
            raw: Screenshot | None = self._screenshot_raw()
        except ValueError:
            raw = None
        t1 = time.perf_counter()
        png = self._screenshot_png()
        t2 = time.perf_counter()
        self._raw_broken = raw is None
        self._raw_ok = raw is not None and (t1 - t0) <= (t2 - t1)
        self.timings = {"raw": t1 - t0 if raw is not None else None, "png": t2 - t1}
        self.measurements += 1
        return png

    @property
    def chosen(self) -> Literal["raw", "png"] | None:
        """The path screenshots take now (None: "auto" has not measured yet)."""
        if self.capture != "auto":
            return self.capture
        if self._raw_broken or self._raw_ok is False:
            return "png"
        return "raw" if self._raw_ok else None

    async def screenshot(self) -> Screenshot:
        return await self._call("screencap", self._screenshot)

    async def window_size(self) -> tuple[int, int]:
        out = await self.shell("wm size")
        size = input_size(out)
        if size is None:
            raise DeviceError(f"{self.serial}: cannot read the screen size from {out!r}")
        return size

    # -- input ---------------------------------------------------------------------------

    async def tap(self, x: int, y: int) -> None:
        await self.shell(f"input tap {int(x)} {int(y)}")

    async def long_press(self, x: int, y: int, duration_ms: int = 800) -> None:
        await self.shell(f"input swipe {int(x)} {int(y)} {int(x)} {int(y)} {int(duration_ms)}")

    async def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int = 300) -> None:
        await self.shell(
            f"input swipe {int(x1)} {int(y1)} {int(x2)} {int(y2)} {int(duration_ms)}"
        )

    async def key(self, keycode: int) -> None:
        await self.shell(f"input keyevent {int(keycode)}")

    def _ensure_ime(self) -> None:
        """The ADB Keyboard is installed and enabled (checked once). ``ime list -s`` lists
        enabled keyboards only, so an installed but disabled one is found in ``-a`` and
        enabled here."""
        if self._ime_ready:
            return
        if ADB_KEYBOARD not in input_methods(self._shell("ime list -s")):
            if ADB_KEYBOARD not in input_methods(self._shell("ime list -a")):
                raise DeviceError(ADB_KEYBOARD_HELP.format(serial=self.serial))
            self._shell(f"ime enable {ADB_KEYBOARD}")
        self._ime_ready = True

    def _wait_ime_active(self) -> None:
        """After ``ime set``: wait (at most IME_SWITCH_TIMEOUT_S) until the ADB Keyboard is
        the active method, then IME_START_S more, since the real keyboard registers its
        broadcast receiver only once its service has started and drops what comes before."""
        deadline = time.monotonic() + IME_SWITCH_TIMEOUT_S
        while self._shell("settings get secure default_input_method").strip() != ADB_KEYBOARD:
            if time.monotonic() > deadline:
                raise DeviceError(f"{self.serial}: the ADB Keyboard did not become the active "
                                  f"input method within {IME_SWITCH_TIMEOUT_S:g}s of `ime set`")
            time.sleep(0.1)
        time.sleep(IME_START_S)

    def _with_adb_keyboard(self, broadcast: str) -> None:
        """One ADB Keyboard broadcast, with the user's keyboard put back after it, as
        Open-AutoGLM's Type does (switch, type, ``ime set`` the original). The ADB
        Keyboard draws a bar and no keys, so left on, it would take away the search/return
        key a model taps to submit (a model with no Enter action, AutoGLM, has no other
        way) and the keyboard the user sees on their phone."""
        self._ensure_ime()
        user = self._shell("settings get secure default_input_method").strip()
        switch = user != ADB_KEYBOARD
        if switch:
            self._shell(f"ime set {ADB_KEYBOARD}")
            self._wait_ime_active()
        try:
            self._shell(broadcast)
        finally:
            # "null" or nothing: no IME was set (a fresh emulator); nothing to restore
            if switch and user and user != "null":
                self._shell(f"ime set {user}")

    def _type(self, text: str) -> None:
        if not text:
            return
        if needs_ime(text):
            self._with_adb_keyboard(b64_broadcast_command(text))
            return
        for cmd in input_text_commands(text):
            self._shell(cmd)

    async def type_text(self, text: str) -> None:
        await self._call("type", lambda: self._type(text), self.timeout_s * 2)

    def _clear(self) -> None:
        if self._ime_ready:  # the ADB Keyboard is known here: it clears the whole field
            self._with_adb_keyboard("am broadcast -a ADB_CLEAR_TEXT")
            return
        if self._select_all is not False:
            try:
                for cmd in clear_commands(select_all=True):
                    self._shell(cmd)
                self._select_all = True
                return
            except DeviceError:
                self._select_all = False  # no `input keycombination` before Android 13
        for cmd in clear_commands(select_all=False):
            self._shell(cmd)

    async def clear_text(self) -> None:
        """Empty the focused text field (fields keep their text: a search box its last query)."""
        await self._call("clear", self._clear, self.timeout_s * 2)

    # -- apps ----------------------------------------------------------------------------

    def _start_app(self, package: str) -> None:
        """The launcher activity, resolved, then ``am start -n`` (which prints its errors
        and exits 0); ``monkey --pct-syskeys 0`` where it cannot be resolved (before
        Android 7), since plain monkey exits 251 on phones without hardware keys."""
        resolved = self._dev.shell2(f"cmd package resolve-activity --brief -a {MAIN_ACTION} "
                                    f"-c {LAUNCHER_CATEGORY} {package}",
                                    timeout=self.timeout_s, rstrip=True, v2=True)
        component = launcher_component(resolved.output or "") if resolved.returncode == 0 \
            else None
        if component is not None and component.startswith(package + "/"):
            out = self._shell(f"am start -n {component}")
            failure = shell_failure(out, 0)
            if failure is not None:
                raise DeviceError(f"{self.serial}: {failure.line} [{failure.kind}] {failure.hint}",
                                  failure)
            return
        self._shell(f"monkey --pct-syskeys 0 -p {package} -c {LAUNCHER_CATEGORY} 1")

    async def start_app(self, package: str) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+", package):
            raise DeviceError(f"{self.serial}: {package!r} is not a package name")
        await self._call("start app", lambda: self._start_app(package))

    def _home_package(self) -> str | None:
        out = self._dev.shell2(f"cmd package resolve-activity --brief -a {MAIN_ACTION} "
                               f"-c {HOME_CATEGORY}", timeout=self.timeout_s, rstrip=True,
                               v2=True)
        component = launcher_component(out.output or "") if out.returncode == 0 else None
        return component.split("/")[0] if component else None

    async def home_package(self) -> str | None:
        """The launcher HOME resolves to (``com.miui.home``, ``com.sec.android.app.launcher``,
        ...), None where the phone cannot say (before Android 7)."""
        return await self._call("resolve home", self._home_package)

    async def push(self, local: str, remote: str, timeout_s: float = 120.0) -> None:
        """Copy a file onto the phone (adb's sync protocol)."""
        await self._call("push", lambda: self._dev.sync.push(local, remote), timeout_s)

    async def list_packages(self) -> list[str]:
        """The installed packages, as ``pm list packages`` names them."""
        return parse_package_list(await self.shell("pm list packages"))

    async def current_app(self) -> str:
        """The foreground package. Android 10 moved ``mCurrentFocus`` out of ``dumpsys window
        windows`` into ``displays`` (appium#13420); before 10, ``displays`` has none."""
        for section in ("displays", "windows"):
            got = foreground_package(await self.shell(f"dumpsys window {section}"))
            if got:
                return got
        return ""

    async def wakefulness(self) -> Wakefulness | None:
        """Awake, asleep or dozing (``dumpsys power``, else ``dumpsys window policy``);
        None where the phone does not say."""
        for cmd in ("dumpsys power", "dumpsys window policy"):
            res = await self.shell_result(cmd)
            state = wakefulness(res.output) if res.exit_code == 0 else None
            if state is not None:
                return state
        return None
