"""The scrcpy 3.3.4 server as the simulated phone runs it: ``CLASSPATH=<jar> app_process /
com.genymobile.scrcpy.Server 3.3.4 k=v...`` on the device shell.

Byte layouts come from devices/scrcpy_wire.py (each cites scrcpy's source); the behaviour
here follows scrcpy's server at the v3.3.4 tag, ``S/`` = ``server/src/main/java/com/
genymobile/scrcpy/``: Server.java (start-up, log lines, exit status), Options.java (the
arguments), CleanUp.java (the jar is unlinked at start), DesktopConnection.java (sockets,
dummy byte, device meta), Streamer.java and video/SurfaceEncoder.java (the video stream),
control/Controller.java (the control socket) and audio/AudioEncoder.java (no audio before
Android 11). Taps, keys and text go through the same functions as ``input``
(sim/adb/commands.py inject_*), so both paths act alike. With a device cost
(sim/device_cost.py) an injection costs the small ``control_s`` of a running server, not
``input``'s process start, and the stream's bytes cross the phone's USB hub; the encode is
not charged (a phone's hardware encoder; the simulated one's x264 spends real CPU).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import cv2
import numpy as np
from PIL import Image

from devices import scrcpy_wire as wire
from runtime.errors import MobagentError
from sim.adb import commands, system
from sim.adb.abstract import AbstractSockets, Accepted, AddressInUse, ConnectionRefused
from sim.adb.fs import VirtualFS
from sim.adb.h264 import EncoderError, H264Encoder, Packet
from sim.adb.wire import StreamClosed
from sim.phone_api import Phone

log = logging.getLogger(__name__)

Invocation = wire.ServerInvocation
Log = Callable[[int, str], Awaitable[None]]  # (fd 1 | 2, text) onto the shell stream

# S/video/SurfaceEncoder.java: KEY_REPEAT_PREVIOUS_FRAME_AFTER 100_000 µs, KEY_I_FRAME_INTERVAL 10 s.
REPEAT_AFTER_S = 0.1
KEY_FRAME_INTERVAL_S = 10.0
# A page change on a phone is a window transition of about 300 ms (Android's
# config_mediumAnimTime is 400 ms, activity transitions ~300 ms); its frames are a cross-fade.
ANIMATION_S = 0.3
ANIMATED_CHANGE = 0.25  # a change over this share of the screen is a page change, animated
DEFAULT_FPS = 60.0  # a phone's panel refresh when max_fps is not given
POLL_S = 1 / 60  # how often the screen is looked at (a display's vsync)
CLIPBOARD_POLL_S = 0.1
ABORTED = 134  # mksh's status for a child killed by SIGABRT ("Aborted")
KILLED = 137  # ... and by SIGKILL (128 + 9)
KILL_POLL_S = 0.02  # how often a running server looks at Faults.scrcpy_kills
# Controller's touch gesture -> `input` gesture: under the touch slop it is a tap or a press.
TOUCH_SLOP_DP = 8
LONG_PRESS_MS = 400
META_CTRL_ON = 0x1000  # android.view.KeyEvent.META_CTRL_ON
INJECT_DENIED = ("java.lang.SecurityException: Injecting input events requires the caller "
                 "(or the source of the instrumentation, if any) to have the INJECT_EVENTS "
                 "permission.")


class ServerExit(MobagentError):
    """The server process ends with this status (an uncaught exception's 1, a fatal error)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def device_line(phone: Phone) -> str:
    """Server.internalMain's first INFO line: Device: [MANUFACTURER] BRAND MODEL (Android X)."""
    props = commands.device_props(phone)
    manufacturer = props.get("ro.product.manufacturer", "unknown")
    brand = props.get("ro.product.brand", manufacturer)
    return (f"[server] INFO: Device: [{manufacturer}] {brand} {phone.info.model} "
            f"(Android {phone.info.release})\n")


def _java_error(message: str, exception: str, frames: list[str]) -> str:
    """Ln.e(message, throwable): the line, then printStackTrace (S/util/Ln.java)."""
    stack = "".join(f"\tat {f}\n" for f in frames)
    return f"[server] ERROR: {message}\n{exception}: {message}\n{stack}"


_MAIN_FRAMES = ["com.genymobile.scrcpy.Server.internalMain(Server.java:238)",
                "com.genymobile.scrcpy.Server.main(Server.java:215)",
                "com.android.internal.os.RuntimeInit.nativeFinishInit(Native Method)",
                "com.android.internal.os.RuntimeInit.main(RuntimeInit.java:355)"]


async def run_app_process(invocation: wire.ServerInvocation, phone: Phone, fs: VirtualFS,
                          sockets: AbstractSockets, out: Log, shell_closed: anyio.Event) -> int:
    """The whole life of ``app_process``: returns its exit status."""
    jar = invocation.classpath
    node = fs.get(fs.norm(jar)) if jar else None
    if node is None or node.is_dir or invocation.class_name != wire.SERVER_CLASS:
        # ART aborts on "could not find class" (logcat: ClassNotFoundException: Didn't find
        # class ... on path: DexPathList); the shell only prints "Aborted" (scrcpy issues
        # #268, #953, #5178).
        await out(2, "Aborted \n")
        return ABORTED
    try:
        _, options = wire.parse_server_args(invocation.args)
    except wire.ScrcpyOptionError as e:
        # Server.main: Ln.e(t.getMessage(), t), exit status 1
        kind = ("java.lang.NumberFormatException" if str(e).startswith("For input string")
                else "java.lang.IllegalArgumentException")
        await out(2, _java_error(str(e), kind,
                                 ["com.genymobile.scrcpy.Options.parse(Options.java:299)",
                                  *_MAIN_FRAMES]))
        return 1
    for key in options.unknown:
        await out(2, f"[server] WARN: Unknown server option: {key}\n")
    if options.log_level in ("verbose", "debug", "info"):  # Ln.i after Ln.initLogLevel
        await out(1, device_line(phone))
    if options.cleanup:
        # CleanUp.main unlinks the jar as soon as the clean-up process starts (the server's
        # classes are loaded already), not at exit.
        with contextlib.suppress(OSError):
            fs.remove(fs.norm(jar))
    session = ScrcpySession(phone, options, sockets, out)
    try:
        return await session.serve(shell_closed)
    except ServerExit as e:
        return e.status


@dataclass
class _Touch:
    x: int
    y: int
    t: float
    last: tuple[int, int] = (0, 0)


@dataclass
class _Screen:
    """What the video stream shows and is heading to (arrays at the video size)."""

    shown: np.ndarray
    target: np.ndarray
    source: Image.Image | None = None  # the phone image ``target`` was made from
    fade_from: np.ndarray | None = None
    fade_t0: float = 0.0
    last_sent: float = float("-inf")
    last_key: float = float("-inf")
    repeat_due: float | None = None
    packets: int = 0


@dataclass
class _Sockets:
    video: Accepted | None = None
    audio: Accepted | None = None
    control: Accepted | None = None
    all: list[Accepted] = field(default_factory=list)


class ScrcpySession:
    """One running server: its sockets, its encoder, its controller."""

    def __init__(self, phone: Phone, options: wire.ServerOptions, sockets: AbstractSockets,
                 out: Log) -> None:
        self.phone = phone
        self.options = options
        self.registry = sockets
        self.out = out
        self.size = wire.limit_size(phone.info.width, phone.info.height, options.max_size)
        self.fps = options.max_fps if options.max_fps > 0 else DEFAULT_FPS
        self.socks = _Sockets()
        self._write_lock = anyio.Lock()
        self._clipboard_seen = phone.device_state.clipboard
        self._reset_video = False
        self._touches: dict[int, _Touch] = {}
        self._slop = TOUCH_SLOP_DP * phone.info.density / 160

    async def log(self, level: str, message: str) -> None:
        order = ["verbose", "debug", "info", "warn", "error"]
        if order.index(level) >= order.index(self.options.log_level):
            fd = 1 if level in ("verbose", "debug", "info") else 2
            await self.out(fd, f"[server] {level.upper()}: {message}\n")

    async def serve(self, shell_closed: anyio.Event) -> int:
        status = 0
        kills_at_start = self.phone.faults.scrcpy_kills
        self.phone.device_state.streams += 1
        try:
            async with anyio.create_task_group() as tg:
                async def end_with_shell() -> None:
                    await shell_closed.wait()
                    tg.cancel_scope.cancel()

                async def die_when_killed() -> None:
                    # SIGKILL: no clean-up, no log line; what the controller had not read
                    # yet is never applied (the sockets close under it)
                    # (a plain field the test API bumps from any thread: polled, as
                    # sim/adb/server.py polls drop_connections)
                    while True:
                        if self.phone.faults.scrcpy_kills > kills_at_start:
                            raise ServerExit(KILLED)
                        await anyio.sleep(KILL_POLL_S)

                tg.start_soon(end_with_shell)
                tg.start_soon(die_when_killed)
                if not await self._open():
                    tg.cancel_scope.cancel()
                    return 1
                await self._run_streams()
                tg.cancel_scope.cancel()
        except* ServerExit as group:  # raised in a task (a kill, an encoder error): grouped
            status = _first_exit(group).status
        finally:
            self.phone.device_state.streams -= 1
            for conn in self.socks.all:
                conn.close()
                with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                    await conn.stream.close()
        return status

    async def _open(self) -> bool:
        """DesktopConnection.open: forward mode listens and accepts video, audio, control in
        order, the dummy byte after the first; reverse mode connects through `adb reverse`."""
        opts = self.options
        name = wire.socket_name(opts.scid)
        if not opts.tunnel_forward:
            return await self._connect_reverse(name)
        try:
            listener = self.registry.listen(name)
        except AddressInUse as e:
            await self.out(2, _java_error(str(e), "java.io.IOException", _MAIN_FRAMES[:2]))
            return False
        try:
            for i, kind in enumerate(self._wanted()):
                conn = await listener.accept()
                self.socks.all.append(conn)
                setattr(self.socks, kind, conn)
                if i == 0 and opts.send_dummy_byte:
                    await conn.stream.write(b"\x00")
        finally:
            listener.close()  # once all are accepted, nothing listens on the name any more
        await self._send_device_meta()
        return True

    def _wanted(self) -> list[str]:
        opts = self.options
        return [k for k, on in (("video", opts.video), ("audio", opts.audio),
                                ("control", opts.control)) if on]

    async def _connect_reverse(self, name: str) -> bool:
        """DesktopConnection.open, reverse mode: connect once per socket, in order, to the
        name `adb reverse` made adbd listen on (no dummy byte)."""
        for kind in self._wanted():
            try:
                stream = await self.registry.connect(name)
            except (ConnectionRefused, StreamClosed) as e:
                await self.out(2, _java_error(
                    str(e) if isinstance(e, ConnectionRefused) else "Connection refused",
                    "java.io.IOException",
                    ["android.net.LocalSocketImpl.connectLocal(Native Method)",
                     "android.net.LocalSocketImpl.connect(LocalSocketImpl.java:259)",
                     "com.genymobile.scrcpy.device.DesktopConnection.connect"
                     "(DesktopConnection.java:43)", *_MAIN_FRAMES[:2]]))
                return False
            conn = Accepted(stream)
            self.socks.all.append(conn)
            setattr(self.socks, kind, conn)
        await self._send_device_meta()
        return True

    async def _send_device_meta(self) -> None:
        first = self.socks.all[0] if self.socks.all else None
        if first is not None and self.options.send_device_meta:
            await first.stream.write(wire.encode_device_meta(self.phone.info.model))

    async def _run_streams(self) -> None:
        """The streams run until one ends (the client closed a socket) or the server fails."""
        async with anyio.create_task_group() as tg:
            async def guarded(job: Callable[[], Awaitable[None]]) -> None:
                try:
                    await job()
                except (StreamClosed, anyio.BrokenResourceError, anyio.ClosedResourceError,
                        ConnectionError):
                    pass
                tg.cancel_scope.cancel()

            if self.socks.video is not None:
                tg.start_soon(guarded, self._video)
            if self.socks.audio is not None:
                tg.start_soon(guarded, self._audio)
            if self.socks.control is not None:
                tg.start_soon(guarded, self._control)
                if self.options.clipboard_autosync:
                    tg.start_soon(guarded, self._clipboard_autosync)

    # ------------------------------------------------------------------ audio

    async def _audio(self) -> None:
        """AudioEncoder.encode: before Android 11 the stream is disabled (codec id 0) and
        mirroring goes on; the simulated phone has no audio source after it either."""
        conn = self.socks.audio
        assert conn is not None
        if self.phone.info.sdk < 30:
            await self.log("warn", "Audio disabled: it is not supported before Android 11")
        else:
            await self.log("warn", "Audio disabled: the simulated phone captures no audio")
        if self.options.send_codec_meta:
            await conn.stream.write(wire.encode_codec_id(wire.CODEC_DISABLED))
        await conn.done.wait()

    # ------------------------------------------------------------------ video

    async def _video(self) -> None:
        conn = self.socks.video
        assert conn is not None
        if self.options.video_codec != "h264":
            # the simulated phone has only an H.264 encoder: a configuration error
            await self.log("error", f"Could not find any {self.options.video_codec} encoder")
            await conn.stream.write(wire.encode_codec_id(wire.CODEC_ERROR))
            raise ServerExit(1)
        w, h = self.size
        if self.options.send_codec_meta:  # Streamer.writeVideoHeader
            await conn.stream.write(wire.CodecMeta(wire.CODEC_H264, w, h).encode())
        t0 = time.monotonic()
        while True:
            self._reset_video = False
            try:
                encoder = H264Encoder(w, h, self.options.video_bit_rate, self.fps)
            except EncoderError as e:
                await self.log("error", f"Encoding error: {e}")
                raise ServerExit(1) from e
            try:
                await self._encode_until_reset(conn, encoder, t0)
            finally:
                encoder.close()

    async def _encode_until_reset(self, conn: Accepted, encoder: H264Encoder, t0: float) -> None:
        first = await anyio.to_thread.run_sync(self._grab, None, abandon_on_cancel=True)
        assert first is not None
        screen = _Screen(shown=first[1], target=first[1], source=first[0])
        await self._send(conn, encoder, screen, _const(screen.target), t0, key=True)
        while not self._reset_video:
            await anyio.sleep(POLL_S)
            grabbed = await anyio.to_thread.run_sync(self._grab, screen, abandon_on_cancel=True)
            now = time.monotonic()
            if grabbed is not None:
                screen.source, new = grabbed
                if _changed_share(screen.shown, new) >= ANIMATED_CHANGE:
                    # the change was drawn since the last look: its first frame is one
                    # display frame into the animation, not a copy of the old picture
                    screen.fade_from, screen.fade_t0 = screen.shown, now - POLL_S
                else:
                    screen.fade_from = None
                screen.target = new
            if now - screen.last_sent < 1 / self.fps:
                continue  # max_fps: the encoder drops frames over the rate
            make = self._next_frame(screen, now)
            if make is not None:
                key = now - screen.last_key >= KEY_FRAME_INTERVAL_S
                await self._send(conn, encoder, screen, make, t0, key=key)
            elif screen.repeat_due is not None and now >= screen.repeat_due:
                await self._send(conn, encoder, screen, _const(screen.shown), t0, key=False,
                                 repeat=True)

    def _next_frame(self, screen: _Screen, now: float) -> Callable[[], np.ndarray] | None:
        """How to make the frame to show now (run in the encoding thread), or None when the
        stream already shows the target."""
        target = screen.target
        if screen.fade_from is not None:
            p = (now - screen.fade_t0) / ANIMATION_S
            if p < 1:
                # decelerating, as Android's window animations open (most of the change in
                # the first frames); alpha out of 256
                k = int(256 * (1 - (1 - p) ** 2))
                source = screen.fade_from
                return lambda: _blend(source, target, k)
            screen.fade_from = None
            return _const(target)
        if screen.shown is not target:
            return _const(target)
        return None

    def _grab(self, screen: _Screen | None) -> tuple[Image.Image, np.ndarray] | None:
        """The phone's screen at the video size, or None when it is unchanged (runs in a
        worker thread: rendering and scaling never block the adb transport)."""
        img = system.frame(self.phone)
        if screen is not None and img is screen.source:
            return None
        w, h = self.size
        rgb = img.convert("RGB")
        if rgb.size != (w, h):
            rgb = rgb.resize((w, h), Image.Resampling.BILINEAR)
        arr = np.asarray(rgb, dtype=np.uint8)
        if screen is not None and np.array_equal(arr, screen.target):
            screen.source = img
            return None
        return img, arr

    async def _send(self, conn: Accepted, encoder: H264Encoder, screen: _Screen,
                    make: Callable[[], np.ndarray], t0: float, key: bool,
                    repeat: bool = False) -> None:
        now = time.monotonic()
        pts = int((now - t0) * 1_000_000)

        def render_and_encode() -> tuple[np.ndarray, list[Packet]]:
            frame = make()
            return frame, encoder.encode(frame, pts, key)

        # not abandoned on cancel: the encoder must not be dropped while a frame is in it
        frame, packets = await anyio.to_thread.run_sync(render_and_encode)
        data = b"".join(self._framed(p) for p in packets)
        if data:
            cost = self.phone.latency.cost
            if cost is not None:  # the cable is the phone's bottleneck, not the socket
                await cost.charge_stream(len(data))
            await conn.stream.write(data)
        screen.packets += len(packets)
        screen.shown, screen.last_sent = frame, now
        if key or any(p.key_frame for p in packets):
            screen.last_key = now
        moving = screen.fade_from is not None
        screen.repeat_due = None if repeat or moving else now + REPEAT_AFTER_S

    def _framed(self, packet: Packet) -> bytes:
        if not self.options.send_frame_meta:
            return packet.payload
        header = wire.FrameHeader(size=len(packet.payload), pts_us=packet.pts_us,
                                  config=packet.config, key_frame=packet.key_frame)
        return header.encode() + packet.payload

    # ------------------------------------------------------------------ control

    async def _control(self) -> None:
        conn = self.socks.control
        assert conn is not None
        buf = bytearray()
        while True:
            data = await conn.stream.read()
            if data is None:
                return
            buf += data
            while True:
                try:
                    got = wire.decode_control(buf)
                except wire.ScrcpyWireError as e:
                    # Controller: a ControlProtocolException ends the controller, then the server
                    await self.out(2, _java_error(
                        "Controller error",
                        "com.genymobile.scrcpy.control.ControlProtocolException",
                        ["com.genymobile.scrcpy.control.ControlMessageReader.read"
                         "(ControlMessageReader.java:59)"]).replace(
                        "ControlProtocolException: Controller error",
                        f"ControlProtocolException: {str(e).split(' (')[0]}"))
                    return
                if got is None:
                    break
                msg, used = got
                del buf[:used]
                await self._apply(msg)

    async def _device_message(self, msg: wire.DeviceMessage) -> None:
        conn = self.socks.control
        assert conn is not None
        async with self._write_lock:
            await conn.stream.write(msg.encode())

    async def _in_thread(self, fn: Callable[[], None]) -> None:
        """One injection (or app start) by the running server, off the event loop."""
        cost = self.phone.latency.cost
        if cost is not None:
            await cost.charge_control()
        await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
        # A step clock (sim/phone/clock.py) moves per adb screencap; a host on the stream
        # never runs one, so here phone time moves per action instead: one a step either way.
        self.phone.screen_read()

    async def _inject_allowed(self) -> None:
        """Xiaomi's refusal of injected input applies to scrcpy too: the controller thread
        dies on the SecurityException and the server with it."""
        if system.input_refused(self.phone, "scrcpy") is not None:
            await self.out(2, "[server] ERROR: Exception on thread Thread[control-recv,5,main]\n"
                              f"{INJECT_DENIED}\n")
            raise ServerExit(1)

    async def _apply(self, msg: wire.ControlMessage) -> None:
        phone = self.phone
        if isinstance(msg, wire.InjectTouchEvent):
            await self._touch(msg)
        elif isinstance(msg, wire.InjectKeycode):
            if msg.action == wire.ACTION_DOWN:
                await self._inject_allowed()
                await self._in_thread(lambda: self._key(msg.keycode, msg.metastate))
        elif isinstance(msg, wire.InjectText):
            await self._text(msg.text)
        elif isinstance(msg, wire.InjectScrollEvent):
            await self._scroll(msg)
        elif isinstance(msg, wire.BackOrScreenOn):
            await self._back_or_screen_on(msg.action)
        elif isinstance(msg, wire.GetClipboard):
            if not self.options.clipboard_autosync:  # else autosync has sent it already
                await self._device_message(wire.DeviceClipboard(phone.device_state.clipboard))
        elif isinstance(msg, wire.SetClipboard):
            await self._set_clipboard(msg)
        elif isinstance(msg, wire.ResetVideo):
            await self.log("info", "Video capture reset")
            self._reset_video = True
        elif isinstance(msg, wire.StartApp):
            await self._start_app(msg.name)
        elif isinstance(msg, wire.SetDisplayPower):
            await self.log("info", f"Device display turned {'on' if msg.on else 'off'}")
        # panels, rotation, UHID and the keyboard settings change nothing on this phone

    def _key(self, keycode: int, metastate: int) -> None:
        if metastate & META_CTRL_ON and system.usable(self.phone.device_state):
            self.phone.key_combination([commands.KEY_CTRL_LEFT, keycode])
        else:
            commands.inject_keys(self.phone, [keycode])

    async def _text(self, text: str) -> None:
        """Controller.injectText: characters the virtual key map has no keys for are skipped."""
        await self._inject_allowed()
        typed = []
        for c in text:
            if 32 <= ord(c) < 127 or c in "\t\n":
                typed.append(c)
            else:
                await self.log("warn", f"Could not inject char u+{ord(c):04x}")
        if typed:
            await self._in_thread(lambda: commands.inject_text(self.phone, "".join(typed)))

    def _to_screen(self, x: int, y: int, w: int, h: int) -> tuple[int, int] | None:
        """PositionMapper.map: a point on the video to the display, or None when the event
        was made for another video size (Controller ignores it)."""
        if not self.options.video:
            return x, y  # no display data: raw coordinates
        vw, vh = self.size
        if (w, h) != (vw, vh):
            return None
        return (x * self.phone.info.width // vw, y * self.phone.info.height // vh)

    async def _touch(self, msg: wire.InjectTouchEvent) -> None:
        point = self._to_screen(msg.x, msg.y, msg.screen_width, msg.screen_height)
        if point is None:
            return
        await self._inject_allowed()
        now = time.monotonic()
        action = msg.action & 0xFF
        if action == wire.ACTION_DOWN:
            self._touches[msg.pointer_id] = _Touch(*point, now, point)
            return
        touch = self._touches.get(msg.pointer_id)
        if touch is None:
            return
        touch.last = point
        if action != wire.ACTION_UP:
            return  # MOVE: the gesture's path is applied at UP
        del self._touches[msg.pointer_id]
        duration = int((now - touch.t) * 1000)
        x2, y2 = point
        if abs(x2 - touch.x) < self._slop and abs(y2 - touch.y) < self._slop:
            if duration < LONG_PRESS_MS:
                await self._in_thread(lambda: commands.inject_tap(self.phone, touch.x, touch.y))
            else:
                await self._in_thread(lambda: commands.inject_swipe(
                    self.phone, touch.x, touch.y, touch.x, touch.y, duration))
            return
        await self._in_thread(lambda: commands.inject_swipe(
            self.phone, touch.x, touch.y, x2, y2, max(duration, 1)))

    async def _scroll(self, msg: wire.InjectScrollEvent) -> None:
        """A wheel notch scrolls 64 dp (ViewConfiguration's scroll factor): as a drag."""
        point = self._to_screen(msg.x, msg.y, msg.screen_width, msg.screen_height)
        if point is None:
            return
        await self._inject_allowed()
        step = 64 * self.phone.info.density / 160
        dx, dy = int(msg.hscroll * step), int(msg.vscroll * step)
        if abs(dx) < self._slop and abs(dy) < self._slop:
            return
        x, y = point
        await self._in_thread(lambda: commands.inject_swipe(self.phone, x, y, x + dx, y + dy,
                                                            100))

    async def _back_or_screen_on(self, action: int) -> None:
        """Controller.pressBackOrTurnScreenOn: BACK on a screen that is on, else POWER (DOWN)."""
        await self._inject_allowed()
        if self.phone.device_state.awake:
            if action == wire.ACTION_DOWN:
                await self._in_thread(lambda: commands.inject_keys(self.phone, [4]))
        elif action == wire.ACTION_DOWN:
            await self._in_thread(lambda: commands.inject_keys(self.phone, [26]))

    async def _set_clipboard(self, msg: wire.SetClipboard) -> None:
        """Controller.setClipboard: set (no echo to the client), PASTE if asked, then ACK."""
        self.phone.device_state.clipboard = msg.text
        self._clipboard_seen = msg.text
        await self.log("info", "Device clipboard set")
        if msg.paste:
            await self._inject_allowed()
            await self._in_thread(lambda: commands.inject_keys(self.phone,
                                                               [commands.KEYCODE_PASTE]))
        if msg.sequence != 0:
            await self._device_message(wire.AckClipboard(msg.sequence))

    async def _clipboard_autosync(self) -> None:
        """The clipboard listener: a change made on the phone goes to the client."""
        while True:
            await anyio.sleep(CLIPBOARD_POLL_S)
            text = self.phone.device_state.clipboard
            if text != self._clipboard_seen:
                self._clipboard_seen = text
                await self._device_message(wire.DeviceClipboard(text))

    async def _start_app(self, name: str) -> None:
        force = name.startswith("+")
        package = name.lstrip("+")
        if package.startswith("?") or package not in self.phone.packages():
            await self.log("warn", f'No app found for package "{package}"')
            return
        await self.log("info", f'Starting app "{package}" [{package}] on display 0...')

        def start() -> None:
            if force:
                self.phone.force_stop(package)
            self.phone.launch(package)

        await self._in_thread(start)


def _first_exit(group: BaseExceptionGroup[ServerExit]) -> ServerExit:
    first = group.exceptions[0]
    return first if isinstance(first, ServerExit) else _first_exit(first)


def _const(frame: np.ndarray) -> Callable[[], np.ndarray]:
    return lambda: frame


def _blend(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """a * (256 - k) / 256 + b * k / 256 (a cross-fade step), in OpenCV's fixed point: a
    sixth of numpy's time at 1080x2400, which a phone's GPU would not spend on the CPU."""
    return cv2.addWeighted(a, (256 - k) / 256, b, k / 256, 0.0)


def _changed_share(a: np.ndarray, b: np.ndarray) -> float:
    """The share of the screen the bounding box of the changed (subsampled) pixels covers:
    a page or a keyboard coming in is most of it, a typed character or the clock a sliver."""
    sa, sb = a[::4, ::4], b[::4, ::4]
    if sa.shape != sb.shape:
        return 1.0
    rows, cols = np.nonzero(np.any(sa != sb, axis=-1))
    if rows.size == 0:
        return 0.0
    box = (rows.max() - rows.min() + 1) * (cols.max() - cols.min() + 1)
    return float(box / (sa.shape[0] * sa.shape[1]))


def is_app_process(command: str) -> wire.ServerInvocation | None:
    """The pieces of a plain ``[CLASSPATH=X] app_process DIR CLASS ARGS`` line, None for
    anything else (a line with shell operators goes to the device shell)."""
    if any(c in command for c in ";&|<>`$\n"):
        return None
    return wire.split_server_command(command)
