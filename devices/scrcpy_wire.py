"""The scrcpy 3.3.4 wire: every byte layout between a scrcpy client and its server, both ways.

A pure module (no I/O): the host-side client and the simulated phone's server
(``sim/adb/scrcpy_server.py``) both build and read their bytes here, so they cannot drift
apart. Every layout cites scrcpy's source at the v3.3.4 tag (commit ``fb6381f5``); paths are
relative to the repository root, ``S/`` = ``server/src/main/java/com/genymobile/scrcpy/``.
All integers are big-endian (Java's DataOutputStream, ``app/src/util/binary.h``).

There is no compatibility between scrcpy versions (``doc/develop.md``): 4.x changed the
frame header and the codec meta, so this module speaks 3.3.4 only.
"""

from __future__ import annotations

import secrets
import struct
from typing import Final, TypeAlias

import msgspec

from runtime.errors import MobagentError

SCRCPY_VERSION: Final = "3.3.4"
# PREBUILT_SERVER_SHA256 in install_release.sh at v3.3.4.
SERVER_SHA256: Final = "8588238c9a5a00aa542906b6ec7e6d5541d9ffb9b5d0f6e1bc0e365e2303079e"
# app/src/server.c: #define SC_DEVICE_SERVER_PATH
DEVICE_SERVER_PATH: Final = "/data/local/tmp/scrcpy-server.jar"
SERVER_CLASS: Final = "com.genymobile.scrcpy.Server"

# Codec ids: 4 ASCII bytes as a u32 (S/video/VideoCodec.java, S/audio/AudioCodec.java).
CODEC_H264: Final = 0x68323634  # "h264"
CODEC_H265: Final = 0x68323635  # "h265"
CODEC_AV1: Final = 0x00617631  # "\0av1"
CODEC_OPUS: Final = 0x6F707573  # "opus"
CODEC_AAC: Final = 0x00616163  # "\0aac"
CODEC_FLAC: Final = 0x666C6163  # "flac"
CODEC_RAW: Final = 0x00726177  # "\0raw"
# S/device/Streamer.java writeDisableStream(): sent instead of a codec id.
CODEC_DISABLED: Final = 0  # the stream is disabled (e.g. no audio capture), go on without it
CODEC_ERROR: Final = 1  # configuration error, stop
VIDEO_CODECS: Final = {"h264": CODEC_H264, "h265": CODEC_H265, "av1": CODEC_AV1}
AUDIO_CODECS: Final = {"opus": CODEC_OPUS, "aac": CODEC_AAC, "flac": CODEC_FLAC, "raw": CODEC_RAW}

# app/src/control_msg.h: SC_CONTROL_MSG_MAX_SIZE, ..._INJECT_TEXT_MAX_LENGTH,
# ..._CLIPBOARD_TEXT_MAX_LENGTH; S/control/DeviceMessageWriter.java MESSAGE_MAX_SIZE.
CONTROL_MSG_MAX_SIZE: Final = 1 << 18
INJECT_TEXT_MAX_LENGTH: Final = 300
CLIPBOARD_TEXT_MAX_LENGTH: Final = CONTROL_MSG_MAX_SIZE - 14
DEVICE_MSG_MAX_SIZE: Final = 1 << 18
DEVICE_CLIPBOARD_TEXT_MAX_LENGTH: Final = DEVICE_MSG_MAX_SIZE - 5

# S/device/DesktopConnection.java: DEVICE_NAME_FIELD_LENGTH.
DEVICE_NAME_FIELD_LENGTH: Final = 64
CODEC_META_SIZE: Final = 12
FRAME_HEADER_SIZE: Final = 12
# S/device/Streamer.java: PACKET_FLAG_CONFIG, PACKET_FLAG_KEY_FRAME.
PACKET_FLAG_CONFIG: Final = 1 << 63
PACKET_FLAG_KEY_FRAME: Final = 1 << 62
PTS_MASK: Final = PACKET_FLAG_KEY_FRAME - 1

# Android constants the messages carry (android/input.h, KeyEvent/MotionEvent).
ACTION_DOWN: Final = 0
ACTION_UP: Final = 1
ACTION_MOVE: Final = 2
POINTER_ID_MOUSE: Final = 0xFFFFFFFFFFFFFFFF  # -1 (app/src/control_msg.h)
POINTER_ID_GENERIC_FINGER: Final = 0xFFFFFFFFFFFFFFFE  # -2
POINTER_ID_VIRTUAL_FINGER: Final = 0xFFFFFFFFFFFFFFFD  # -3
COPY_KEY_NONE: Final = 0
COPY_KEY_COPY: Final = 1
COPY_KEY_CUT: Final = 2


class ScrcpyWireError(MobagentError, ValueError):
    """Bytes or a command line that do not follow the scrcpy 3.3.4 protocol."""


class ScrcpyOptionError(ScrcpyWireError):
    """A server argument the real server rejects (its IllegalArgumentException text)."""


def socket_name(scid: int) -> str:
    """The device socket's abstract name (S/device/DesktopConnection.java getSocketName)."""
    if scid == -1:
        return "scrcpy"
    if not 0 <= scid < 1 << 31:
        raise ScrcpyWireError(f"scid must be a 31-bit non-negative int or -1, got {scid}")
    return f"scrcpy_{scid:08x}"


def random_scid() -> int:
    """A random 31-bit scid, as app/src/scrcpy.c (sc_rand_u32 & 0x7FFFFFFF)."""
    return secrets.randbits(31)


# --- control messages, client -> device ---------------------------------------------------
# Layouts: app/src/control_msg.c sc_control_msg_serialize (client) and
# S/control/ControlMessageReader.java (server) at v3.3.4; type numbers from
# S/control/ControlMessage.java TYPE_*.

TYPE_INJECT_KEYCODE: Final = 0
TYPE_INJECT_TEXT: Final = 1
TYPE_INJECT_TOUCH_EVENT: Final = 2
TYPE_INJECT_SCROLL_EVENT: Final = 3
TYPE_BACK_OR_SCREEN_ON: Final = 4
TYPE_EXPAND_NOTIFICATION_PANEL: Final = 5
TYPE_EXPAND_SETTINGS_PANEL: Final = 6
TYPE_COLLAPSE_PANELS: Final = 7
TYPE_GET_CLIPBOARD: Final = 8
TYPE_SET_CLIPBOARD: Final = 9
TYPE_SET_DISPLAY_POWER: Final = 10
TYPE_ROTATE_DEVICE: Final = 11
TYPE_UHID_CREATE: Final = 12
TYPE_UHID_INPUT: Final = 13
TYPE_UHID_DESTROY: Final = 14
TYPE_OPEN_HARD_KEYBOARD_SETTINGS: Final = 15
TYPE_START_APP: Final = 16
TYPE_RESET_VIDEO: Final = 17


def _utf8_truncate(text: str, max_len: int) -> bytes:
    """UTF-8 of ``text`` cut at a character boundary to at most ``max_len`` bytes
    (app/src/util/str.c sc_str_utf8_truncation_index; S/util/StringUtils.getUtf8TruncationIndex)."""
    raw = text.encode("utf-8")
    if len(raw) <= max_len:
        return raw
    end = max_len
    while end > 0 and (raw[end] & 0xC0) == 0x80:  # a continuation byte: back off
        end -= 1
    return raw[:end]


def float_to_u16fp(value: float) -> int:
    """Pressure in [0, 1] as u16 fixed point (app/src/util/binary.h sc_float_to_u16fp)."""
    if not 0.0 <= value <= 1.0:
        raise ScrcpyWireError(f"pressure must be in [0, 1], got {value}")
    return min(int(value * 0x10000), 0xFFFF)


def u16fp_to_float(value: int) -> float:
    """S/util/Binary.java u16FixedPointToFloat: 0xffff is exactly 1."""
    return 1.0 if value == 0xFFFF else value / 0x10000


def scroll_to_i16fp(value: float) -> int:
    """A scroll amount in [-16, 16] as i16 fixed point, the range of 3.3.1+
    (app/src/control_msg.c: normalised by 16, clamped, then sc_float_to_i16fp truncates)."""
    norm = max(-1.0, min(1.0, value / 16))
    return min(int(norm * 0x8000), 0x7FFF)


def i16fp_to_scroll(value: int) -> float:
    """S/control/ControlMessageReader.java: Binary.i16FixedPointToFloat(v) * 16."""
    return 16.0 if value == 0x7FFF else value / 0x8000 * 16


class InjectKeycode(msgspec.Struct, frozen=True, tag=TYPE_INJECT_KEYCODE):
    """[0][action u8][keycode i32][repeat u32][metastate i32] = 14 bytes."""

    action: int
    keycode: int
    repeat: int = 0
    metastate: int = 0

    def encode(self) -> bytes:
        return struct.pack(">BBiIi", TYPE_INJECT_KEYCODE, self.action, self.keycode,
                           self.repeat, self.metastate)


class InjectText(msgspec.Struct, frozen=True, tag=TYPE_INJECT_TEXT):
    """[1][len u32][UTF-8]; the client truncates to 300 bytes (INJECT_TEXT_MAX_LENGTH)."""

    text: str

    def encode(self) -> bytes:
        raw = _utf8_truncate(self.text, INJECT_TEXT_MAX_LENGTH)
        return struct.pack(">BI", TYPE_INJECT_TEXT, len(raw)) + raw


class InjectTouchEvent(msgspec.Struct, frozen=True, tag=TYPE_INJECT_TOUCH_EVENT):
    """[2][action u8][pointer id u64][x i32][y i32][w u16][h u16][pressure u16fp]
    [action button i32][buttons i32] = 32 bytes. (w, h) is the video size the client saw;
    the server ignores the event when it differs from the current one (Controller.injectTouch)."""

    action: int
    pointer_id: int
    x: int
    y: int
    screen_width: int
    screen_height: int
    pressure: float = 1.0
    action_button: int = 0
    buttons: int = 0

    def encode(self) -> bytes:
        return struct.pack(">BBQiiHHHii", TYPE_INJECT_TOUCH_EVENT, self.action,
                           self.pointer_id & 0xFFFFFFFFFFFFFFFF, self.x, self.y,
                           self.screen_width, self.screen_height,
                           float_to_u16fp(self.pressure), self.action_button, self.buttons)


class InjectScrollEvent(msgspec.Struct, frozen=True, tag=TYPE_INJECT_SCROLL_EVENT):
    """[3][x i32][y i32][w u16][h u16][hscroll i16fp][vscroll i16fp][buttons i32] = 21 bytes;
    scroll amounts in [-16, 16] (3.3.1+, commit 7c8bdccb)."""

    x: int
    y: int
    screen_width: int
    screen_height: int
    hscroll: float
    vscroll: float
    buttons: int = 0

    def encode(self) -> bytes:
        return struct.pack(">BiiHHhhi", TYPE_INJECT_SCROLL_EVENT, self.x, self.y,
                           self.screen_width, self.screen_height,
                           scroll_to_i16fp(self.hscroll), scroll_to_i16fp(self.vscroll),
                           self.buttons)


class BackOrScreenOn(msgspec.Struct, frozen=True, tag=TYPE_BACK_OR_SCREEN_ON):
    """[4][action u8]: BACK when the screen is on, POWER (on DOWN) when it is off."""

    action: int

    def encode(self) -> bytes:
        return bytes((TYPE_BACK_OR_SCREEN_ON, self.action))


class ExpandNotificationPanel(msgspec.Struct, frozen=True, tag=TYPE_EXPAND_NOTIFICATION_PANEL):
    """[5]"""

    def encode(self) -> bytes:
        return bytes((TYPE_EXPAND_NOTIFICATION_PANEL,))


class ExpandSettingsPanel(msgspec.Struct, frozen=True, tag=TYPE_EXPAND_SETTINGS_PANEL):
    """[6]"""

    def encode(self) -> bytes:
        return bytes((TYPE_EXPAND_SETTINGS_PANEL,))


class CollapsePanels(msgspec.Struct, frozen=True, tag=TYPE_COLLAPSE_PANELS):
    """[7]"""

    def encode(self) -> bytes:
        return bytes((TYPE_COLLAPSE_PANELS,))


class GetClipboard(msgspec.Struct, frozen=True, tag=TYPE_GET_CLIPBOARD):
    """[8][copy key u8] (COPY_KEY_NONE/COPY/CUT)."""

    copy_key: int = COPY_KEY_NONE

    def encode(self) -> bytes:
        return bytes((TYPE_GET_CLIPBOARD, self.copy_key))


class SetClipboard(msgspec.Struct, frozen=True, tag=TYPE_SET_CLIPBOARD):
    """[9][sequence u64][paste u8][len u32][UTF-8] = 14 + n bytes; sequence 0 asks no ACK."""

    sequence: int
    paste: bool
    text: str

    def encode(self) -> bytes:
        raw = _utf8_truncate(self.text, CLIPBOARD_TEXT_MAX_LENGTH)
        return struct.pack(">BQBI", TYPE_SET_CLIPBOARD, self.sequence,
                           1 if self.paste else 0, len(raw)) + raw


class SetDisplayPower(msgspec.Struct, frozen=True, tag=TYPE_SET_DISPLAY_POWER):
    """[10][on u8] (3.x; SET_SCREEN_POWER_MODE in 2.x)."""

    on: bool

    def encode(self) -> bytes:
        return bytes((TYPE_SET_DISPLAY_POWER, 1 if self.on else 0))


class RotateDevice(msgspec.Struct, frozen=True, tag=TYPE_ROTATE_DEVICE):
    """[11]"""

    def encode(self) -> bytes:
        return bytes((TYPE_ROTATE_DEVICE,))


class UhidCreate(msgspec.Struct, frozen=True, tag=TYPE_UHID_CREATE):
    """[12][id u16][vendor u16][product u16][name len u8][name][desc len u16][desc]."""

    id: int
    vendor_id: int
    product_id: int
    name: str
    report_desc: bytes

    def encode(self) -> bytes:
        name = _utf8_truncate(self.name, 127)
        return (struct.pack(">BHHHB", TYPE_UHID_CREATE, self.id, self.vendor_id,
                            self.product_id, len(name)) + name
                + struct.pack(">H", len(self.report_desc)) + self.report_desc)


class UhidInput(msgspec.Struct, frozen=True, tag=TYPE_UHID_INPUT):
    """[13][id u16][size u16][data]."""

    id: int
    data: bytes

    def encode(self) -> bytes:
        return struct.pack(">BHH", TYPE_UHID_INPUT, self.id, len(self.data)) + self.data


class UhidDestroy(msgspec.Struct, frozen=True, tag=TYPE_UHID_DESTROY):
    """[14][id u16]."""

    id: int

    def encode(self) -> bytes:
        return struct.pack(">BH", TYPE_UHID_DESTROY, self.id)


class OpenHardKeyboardSettings(msgspec.Struct, frozen=True, tag=TYPE_OPEN_HARD_KEYBOARD_SETTINGS):
    """[15]"""

    def encode(self) -> bytes:
        return bytes((TYPE_OPEN_HARD_KEYBOARD_SETTINGS,))


class StartApp(msgspec.Struct, frozen=True, tag=TYPE_START_APP):
    """[16][len u8][name]: a package, ``?label`` to search by label, ``+`` to force-stop first."""

    name: str

    def encode(self) -> bytes:
        raw = _utf8_truncate(self.name, 255)
        return bytes((TYPE_START_APP, len(raw))) + raw


class ResetVideo(msgspec.Struct, frozen=True, tag=TYPE_RESET_VIDEO):
    """[17]: restart the encoder, so a fresh config packet and key frame follow."""

    def encode(self) -> bytes:
        return bytes((TYPE_RESET_VIDEO,))


ControlMessage: TypeAlias = (
    InjectKeycode | InjectText | InjectTouchEvent | InjectScrollEvent | BackOrScreenOn
    | ExpandNotificationPanel | ExpandSettingsPanel | CollapsePanels | GetClipboard
    | SetClipboard | SetDisplayPower | RotateDevice | UhidCreate | UhidInput | UhidDestroy
    | OpenHardKeyboardSettings | StartApp | ResetVideo
)

_EMPTY: Final[dict[int, ControlMessage]] = {
    TYPE_EXPAND_NOTIFICATION_PANEL: ExpandNotificationPanel(),
    TYPE_EXPAND_SETTINGS_PANEL: ExpandSettingsPanel(),
    TYPE_COLLAPSE_PANELS: CollapsePanels(),
    TYPE_ROTATE_DEVICE: RotateDevice(),
    TYPE_OPEN_HARD_KEYBOARD_SETTINGS: OpenHardKeyboardSettings(),
    TYPE_RESET_VIDEO: ResetVideo(),
}
# Fixed sizes, the type byte included.
_FIXED: Final = {TYPE_INJECT_KEYCODE: 14, TYPE_INJECT_TOUCH_EVENT: 32,
                 TYPE_INJECT_SCROLL_EVENT: 21, TYPE_BACK_OR_SCREEN_ON: 2,
                 TYPE_GET_CLIPBOARD: 2, TYPE_SET_DISPLAY_POWER: 2, TYPE_UHID_DESTROY: 3}


def _decode_fixed(kind: int, body: bytes) -> ControlMessage:
    if kind == TYPE_INJECT_KEYCODE:
        action, keycode, repeat, meta = struct.unpack(">BiIi", body)
        return InjectKeycode(action, keycode, repeat, meta)
    if kind == TYPE_INJECT_TOUCH_EVENT:
        action, pid, x, y, w, h, pressure, abutton, buttons = struct.unpack(">BQiiHHHii", body)
        return InjectTouchEvent(action, pid, x, y, w, h, u16fp_to_float(pressure), abutton,
                                buttons)
    if kind == TYPE_INJECT_SCROLL_EVENT:
        x, y, w, h, hs, vs, buttons = struct.unpack(">iiHHhhi", body)
        return InjectScrollEvent(x, y, w, h, i16fp_to_scroll(hs), i16fp_to_scroll(vs), buttons)
    if kind == TYPE_BACK_OR_SCREEN_ON:
        return BackOrScreenOn(body[0])
    if kind == TYPE_GET_CLIPBOARD:
        return GetClipboard(body[0])
    if kind == TYPE_SET_DISPLAY_POWER:
        return SetDisplayPower(body[0] != 0)
    return UhidDestroy(struct.unpack(">H", body)[0])


def _utf8(raw: bytes) -> str:
    # Java's new String(bytes, UTF_8) replaces malformed input; so do we.
    return raw.decode("utf-8", errors="replace")


def _decode_variable(kind: int, buf: bytes | bytearray | memoryview
                     ) -> tuple[ControlMessage, int] | None:
    """The messages whose size is in their bytes: (message, consumed), or None if incomplete."""
    if kind in (TYPE_INJECT_TEXT, TYPE_SET_CLIPBOARD):
        head = 5 if kind == TYPE_INJECT_TEXT else 14
        if len(buf) < head:
            return None
        (length,) = struct.unpack_from(">I", buf, head - 4)
        if head + length > CONTROL_MSG_MAX_SIZE:
            raise ScrcpyWireError(f"control message of {head + length} bytes exceeds "
                                  f"{CONTROL_MSG_MAX_SIZE}")
        if len(buf) < head + length:
            return None
        text = _utf8(bytes(buf[head:head + length]))
        if kind == TYPE_INJECT_TEXT:
            return InjectText(text), head + length
        sequence, paste = struct.unpack_from(">QB", buf, 1)
        return SetClipboard(sequence, paste != 0, text), head + length
    if kind == TYPE_START_APP:
        if len(buf) < 2 or len(buf) < 2 + buf[1]:
            return None
        return StartApp(_utf8(bytes(buf[2:2 + buf[1]]))), 2 + buf[1]
    if kind == TYPE_UHID_INPUT:
        if len(buf) < 5:
            return None
        uid, size = struct.unpack_from(">HH", buf, 1)
        if len(buf) < 5 + size:
            return None
        return UhidInput(uid, bytes(buf[5:5 + size])), 5 + size
    return _decode_uhid_create(buf)


def _decode_uhid_create(buf: bytes | bytearray | memoryview
                        ) -> tuple[ControlMessage, int] | None:
    if len(buf) < 8:
        return None
    uid, vendor, product, name_len = struct.unpack_from(">HHHB", buf, 1)
    at = 8 + name_len
    if len(buf) < at + 2:
        return None
    (desc_len,) = struct.unpack_from(">H", buf, at)
    end = at + 2 + desc_len
    if len(buf) < end:
        return None
    return UhidCreate(uid, vendor, product, _utf8(bytes(buf[8:at])),
                      bytes(buf[at + 2:end])), end


def decode_control(buf: bytes | bytearray | memoryview) -> tuple[ControlMessage, int] | None:
    """The first control message at the start of a byte stream, and how many bytes it took;
    None while the stream holds only part of it. An unknown type raises ScrcpyWireError (the
    server throws ControlProtocolException("Unknown event type: N") and closes control)."""
    if not buf:
        return None
    kind = buf[0]
    if kind in _EMPTY:
        return _EMPTY[kind], 1
    if kind in _FIXED:
        size = _FIXED[kind]
        if len(buf) < size:
            return None
        return _decode_fixed(kind, bytes(buf[1:size])), size
    if kind in (TYPE_INJECT_TEXT, TYPE_SET_CLIPBOARD, TYPE_START_APP, TYPE_UHID_INPUT,
                TYPE_UHID_CREATE):
        return _decode_variable(kind, buf)
    raise ScrcpyWireError(f"Unknown event type: {kind} (scrcpy {SCRCPY_VERSION} control "
                          "messages are types 0-17)")


# --- device messages, device -> client (S/control/DeviceMessageWriter.java,
# app/src/device_msg.c sc_device_msg_deserialize) --------------------------------------------

DEVICE_TYPE_CLIPBOARD: Final = 0
DEVICE_TYPE_ACK_CLIPBOARD: Final = 1
DEVICE_TYPE_UHID_OUTPUT: Final = 2


class DeviceClipboard(msgspec.Struct, frozen=True, tag=DEVICE_TYPE_CLIPBOARD):
    """[0][len u32][UTF-8], text cut to 256 KiB - 5 bytes at a character boundary."""

    text: str

    def encode(self) -> bytes:
        raw = _utf8_truncate(self.text, DEVICE_CLIPBOARD_TEXT_MAX_LENGTH)
        return struct.pack(">BI", DEVICE_TYPE_CLIPBOARD, len(raw)) + raw


class AckClipboard(msgspec.Struct, frozen=True, tag=DEVICE_TYPE_ACK_CLIPBOARD):
    """[1][sequence u64]: the SET_CLIPBOARD with this sequence is applied."""

    sequence: int

    def encode(self) -> bytes:
        return struct.pack(">BQ", DEVICE_TYPE_ACK_CLIPBOARD, self.sequence)


class UhidOutput(msgspec.Struct, frozen=True, tag=DEVICE_TYPE_UHID_OUTPUT):
    """[2][id u16][size u16][data]."""

    id: int
    data: bytes

    def encode(self) -> bytes:
        return struct.pack(">BHH", DEVICE_TYPE_UHID_OUTPUT, self.id, len(self.data)) + self.data


DeviceMessage: TypeAlias = DeviceClipboard | AckClipboard | UhidOutput


def decode_device(buf: bytes | bytearray | memoryview) -> tuple[DeviceMessage, int] | None:
    """The first device message at the start of a byte stream and its size, or None while
    incomplete; an unknown type raises ScrcpyWireError."""
    if not buf:
        return None
    kind = buf[0]
    if kind == DEVICE_TYPE_CLIPBOARD:
        if len(buf) < 5:
            return None
        (length,) = struct.unpack_from(">I", buf, 1)
        if 5 + length > DEVICE_MSG_MAX_SIZE:
            raise ScrcpyWireError(f"device message of {5 + length} bytes exceeds "
                                  f"{DEVICE_MSG_MAX_SIZE}")
        if len(buf) < 5 + length:
            return None
        return DeviceClipboard(_utf8(bytes(buf[5:5 + length]))), 5 + length
    if kind == DEVICE_TYPE_ACK_CLIPBOARD:
        if len(buf) < 9:
            return None
        return AckClipboard(struct.unpack_from(">Q", buf, 1)[0]), 9
    if kind == DEVICE_TYPE_UHID_OUTPUT:
        if len(buf) < 5:
            return None
        uid, size = struct.unpack_from(">HH", buf, 1)
        if len(buf) < 5 + size:
            return None
        return UhidOutput(uid, bytes(buf[5:5 + size])), 5 + size
    raise ScrcpyWireError(f"Unknown device message type: {kind}")


# --- video / audio stream (S/device/DesktopConnection.java, S/device/Streamer.java) --------

def encode_device_meta(name: str) -> bytes:
    """The 64-byte device name sent first on the first socket (DesktopConnection.sendDeviceMeta):
    UTF-8 cut at a character boundary to at most 63 bytes, NUL-padded."""
    raw = _utf8_truncate(name, DEVICE_NAME_FIELD_LENGTH - 1)
    return raw.ljust(DEVICE_NAME_FIELD_LENGTH, b"\0")


def decode_device_meta(buf: bytes | bytearray | memoryview) -> str:
    """The device name from the 64-byte field (app/src/server.c device_read_info)."""
    if len(buf) < DEVICE_NAME_FIELD_LENGTH:
        raise ScrcpyWireError(f"device meta is {DEVICE_NAME_FIELD_LENGTH} bytes, got {len(buf)}")
    raw = bytes(buf[:DEVICE_NAME_FIELD_LENGTH])
    return _utf8(raw.split(b"\0", 1)[0])


class CodecMeta(msgspec.Struct, frozen=True):
    """Video stream header (Streamer.writeVideoHeader): [codec id u32][width u32][height u32],
    sent once before the first packet. The audio header is the codec id alone (writeAudioHeader)."""

    codec_id: int
    width: int
    height: int

    def encode(self) -> bytes:
        return struct.pack(">III", self.codec_id, self.width, self.height)

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview) -> CodecMeta:
        if len(buf) < CODEC_META_SIZE:
            raise ScrcpyWireError(f"codec meta is {CODEC_META_SIZE} bytes, got {len(buf)}")
        codec_id, width, height = struct.unpack_from(">III", buf)
        return cls(codec_id, width, height)


def encode_codec_id(codec_id: int) -> bytes:
    """The 4-byte codec id alone: the audio header, or CODEC_DISABLED / CODEC_ERROR
    (Streamer.writeAudioHeader, Streamer.writeDisableStream)."""
    return struct.pack(">I", codec_id)


class FrameHeader(msgspec.Struct, frozen=True):
    """The 12-byte header before each packet (Streamer.writeFrameMeta):
    [u64: bit 63 config, bit 62 key frame, bits 61..0 PTS in µs][u32 payload size].
    A config packet's word is exactly 1<<63 (no PTS, no key flag)."""

    size: int
    pts_us: int = 0
    config: bool = False
    key_frame: bool = False

    def encode(self) -> bytes:
        if self.config:
            word = PACKET_FLAG_CONFIG
        else:
            if not 0 <= self.pts_us <= PTS_MASK:
                raise ScrcpyWireError(f"PTS {self.pts_us} µs does not fit 62 bits")
            word = self.pts_us | (PACKET_FLAG_KEY_FRAME if self.key_frame else 0)
        return struct.pack(">QI", word, self.size)

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview) -> FrameHeader:
        if len(buf) < FRAME_HEADER_SIZE:
            raise ScrcpyWireError(f"frame header is {FRAME_HEADER_SIZE} bytes, got {len(buf)}")
        word, size = struct.unpack_from(">QI", buf)
        if word & PACKET_FLAG_CONFIG:
            return cls(size, 0, config=True)
        return cls(size, word & PTS_MASK, key_frame=bool(word & PACKET_FLAG_KEY_FRAME))


def limit_size(width: int, height: int, max_size: int) -> tuple[int, int]:
    """The video size for a screen and ``max_size`` (S/device/Size.java limit then round8;
    Options.java keeps max_size & ~7)."""
    max_size &= ~7
    portrait = height > width
    major, minor = (height, width) if portrait else (width, height)
    if max_size and major > max_size:
        major, minor = max_size, max_size * minor // major
    if major % 8 or minor % 8:
        major &= ~7  # round down, not to exceed the screen
        minor = min((minor + 4) & ~7, major)  # round to the nearest
    return (minor, major) if portrait else (major, minor)


# --- the server command line (app/src/server.c execute_server; S/Options.java parse) ------

# app/src/server.c validate_string: adb joins argv with spaces into one shell command line.
_SHELL_SPECIAL: Final = frozenset(" ;'\"*$?&`#\\|<>[]{}()!~\r\n")
OptionValue: TypeAlias = str | int | float | bool


def _option_text(key: str, value: OptionValue) -> str:
    if not key or not all(c.isalnum() or c == "_" for c in key):
        raise ScrcpyWireError(f"Invalid server option name: [{key}]")
    text = ("true" if value else "false") if isinstance(value, bool) else str(value)
    if not text or _SHELL_SPECIAL.intersection(text):
        raise ScrcpyWireError(f"Invalid server param: [{key}={text}]")
    return f"{key}={text}"


def server_command(scid: int, options: dict[str, OptionValue],
                   server_path: str = DEVICE_SERVER_PATH) -> str:
    """The shell command that starts the server, as app/src/server.c execute_server builds it:
    ``CLASSPATH=<jar> app_process / com.genymobile.scrcpy.Server 3.3.4 scid=%08x
    log_level=info k=v...``. ``options`` may override log_level; scid is the argument."""
    socket_name(scid)  # validates the range
    options = dict(options)
    log_level = options.pop("log_level", "info")
    if "scid" in options:
        raise ScrcpyWireError("pass scid as the argument, not as an option")
    args = [f"CLASSPATH={server_path}", "app_process", "/", SERVER_CLASS, SCRCPY_VERSION,
            "scid=-1" if scid == -1 else f"scid={scid:08x}", _option_text("log_level", log_level)]
    args += [_option_text(k, v) for k, v in options.items()]
    if any(c in _SHELL_SPECIAL for c in server_path):
        raise ScrcpyWireError(f"Invalid server path: [{server_path}]")
    return " ".join(args)


class ServerOptions(msgspec.Struct, frozen=True):
    """The options the 3.3.4 server acts on (S/Options.java defaults), parsed as it does."""

    scid: int = -1
    log_level: str = "debug"
    video: bool = True
    audio: bool = True
    control: bool = True
    video_codec: str = "h264"
    audio_codec: str = "opus"
    max_size: int = 0
    video_bit_rate: int = 8_000_000
    audio_bit_rate: int = 128_000
    max_fps: float = 0.0
    tunnel_forward: bool = False
    display_id: int = 0
    show_touches: bool = False
    stay_awake: bool = False
    power_off_on_close: bool = False
    clipboard_autosync: bool = True
    downsize_on_error: bool = True
    cleanup: bool = True
    power_on: bool = True
    send_device_meta: bool = True
    send_frame_meta: bool = True
    send_dummy_byte: bool = True
    send_codec_meta: bool = True
    # Options this module only records (crop, video_encoder, camera_*, list_* ...).
    other: dict[str, str] = {}
    # Keys the server does not know: it logs "Unknown server option: KEY" and goes on.
    unknown: tuple[str, ...] = ()


class ServerInvocation(msgspec.Struct, frozen=True):
    """The pieces of an ``app_process`` command line."""

    classpath: str
    class_name: str
    args: tuple[str, ...]


def split_server_command(cmd: str) -> ServerInvocation | None:
    """``CLASSPATH=X app_process / CLASS ARGS...`` taken apart; None if it is not one
    (``app_process`` with a parent dir other than ``/`` is accepted too, as app_process does)."""
    words = cmd.split()
    classpath = ""
    while words and "=" in words[0] and not words[0].startswith("app_process"):
        key, _, value = words.pop(0).partition("=")
        if key == "CLASSPATH":
            classpath = value
    if len(words) < 3 or words[0].rsplit("/", 1)[-1] != "app_process":
        return None
    return ServerInvocation(classpath, words[2], tuple(words[3:]))


_BOOL_KEYS: Final = frozenset({
    "video", "audio", "control", "tunnel_forward", "show_touches", "stay_awake",
    "power_off_on_close", "clipboard_autosync", "downsize_on_error", "cleanup", "power_on",
    "send_device_meta", "send_frame_meta", "send_dummy_byte", "send_codec_meta"})
_INT_KEYS: Final = frozenset({"max_size", "video_bit_rate", "audio_bit_rate", "display_id"})
# Options.java knows these too; they change nothing the simulated server does.
_OTHER_KEYS: Final = frozenset({
    "video_source", "audio_source", "audio_dup", "angle", "crop", "screen_off_timeout",
    "video_codec_options", "audio_codec_options", "video_encoder", "audio_encoder",
    "list_encoders", "list_displays", "list_cameras", "list_camera_sizes", "list_apps",
    "camera_id", "camera_size", "camera_facing", "camera_ar", "camera_fps",
    "camera_high_speed", "new_display", "vd_destroy_content", "vd_system_decorations",
    "capture_orientation", "display_ime_policy"})


def _java_int(value: str, radix: int = 10) -> int:
    """Integer.parseInt: an optional sign and digits, within 32 bits, else
    NumberFormatException("For input string: ...")."""
    try:
        number = int(value, radix) if value and value.strip() == value and "_" not in value \
            else None
    except ValueError:
        number = None
    if number is None or not -(1 << 31) <= number < 1 << 31:
        suffix = "" if radix == 10 else f" under radix {radix}"
        raise ScrcpyOptionError(f'For input string: "{value}"{suffix}')
    return number


def _parse_option(key: str, value: str, fields: dict[str, object]) -> None:
    """One key=value into ``fields`` as S/Options.java parse does, or ScrcpyOptionError."""
    if key == "scid":
        scid = _java_int(value, 16)
        if scid < -1:
            raise ScrcpyOptionError(f"scid may not be negative (except -1 for 'none'): {scid}")
        fields["scid"] = scid
    elif key == "log_level":
        if value.upper() not in ("VERBOSE", "DEBUG", "INFO", "WARN", "ERROR"):
            raise ScrcpyOptionError("No enum constant com.genymobile.scrcpy.util.Ln.Level."
                                    + value.upper())
        fields["log_level"] = value.lower()
    elif key in _BOOL_KEYS:
        fields[key] = value.lower() == "true"  # Boolean.parseBoolean
    elif key in _INT_KEYS:
        fields[key] = _java_int(value) & ~7 if key == "max_size" else _java_int(value)
    elif key == "max_fps":
        try:
            fields[key] = float(value)
        except ValueError:
            raise ScrcpyOptionError(f'Invalid float value for max_fps: "{value}"') from None
    elif key in ("video_codec", "audio_codec"):
        codecs = VIDEO_CODECS if key == "video_codec" else AUDIO_CODECS
        if value not in codecs:
            kind = "Video" if key == "video_codec" else "Audio"
            raise ScrcpyOptionError(f"{kind} codec {value} not supported")
        fields[key] = value
    elif key == "raw_stream":
        if value.lower() == "true":
            for flag in ("send_device_meta", "send_frame_meta", "send_dummy_byte",
                         "send_codec_meta"):
                fields[flag] = False
    elif key in _OTHER_KEYS:
        other = fields.setdefault("other", {})
        assert isinstance(other, dict)
        other[key] = value
    else:
        unknown = fields.setdefault("unknown", ())
        assert isinstance(unknown, tuple)
        fields["unknown"] = (*unknown, key)


def version_mismatch(client_version: str) -> str | None:
    """The real server's message when the client's version is not 3.3.4 (Options.parse)."""
    if client_version == SCRCPY_VERSION:
        return None
    return (f"The server version ({SCRCPY_VERSION}) does not match the client "
            f"({client_version})")


def parse_server_args(args: tuple[str, ...] | list[str]) -> tuple[str, ServerOptions]:
    """The server's own arguments (version, then key=value...) read as Options.parse does:
    a wrong version, a pair with no ``=`` or a bad value raise ScrcpyOptionError with the
    server's text; an unknown key is only listed in ``unknown`` (the server warns)."""
    if not args:
        raise ScrcpyOptionError("Missing client version")
    version = args[0]
    mismatch = version_mismatch(version)
    if mismatch:
        raise ScrcpyOptionError(mismatch)
    fields: dict[str, object] = {}
    for arg in args[1:]:
        key, eq, value = arg.partition("=")
        if not eq:
            raise ScrcpyOptionError(f'Invalid key=value pair: "{arg}"')
        _parse_option(key, value, fields)
    return version, msgspec.convert(fields, ServerOptions)


def parse_server_command(cmd: str) -> tuple[str, ServerOptions]:
    """The version and options of a whole ``CLASSPATH=... app_process / ...Server VER k=v``
    command line (the server side of server_command)."""
    invocation = split_server_command(cmd)
    if invocation is None or invocation.class_name != SERVER_CLASS:
        raise ScrcpyWireError(f"not a scrcpy server command line: {cmd!r}")
    return parse_server_args(invocation.args)
