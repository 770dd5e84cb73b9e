"""devices/scrcpy_wire.py against scrcpy's own test vectors at v3.3.4.

The byte strings below are copied from Genymobile/scrcpy at tag v3.3.4 (commit fb6381f5):
``app/tests/test_control_msg_serialize.c`` (client -> device) and
``app/tests/test_device_msg_deserialize.c`` (device -> client). Each test names its function.
"""

import pytest

from devices import scrcpy_wire as w

# --- app/tests/test_control_msg_serialize.c @v3.3.4 ---------------------------------------
HELLO = b"hello, world!"
VECTORS = [
    # test_serialize_inject_keycode: ACTION_UP, AKEYCODE_ENTER, repeat 5, SHIFT_ON|SHIFT_LEFT_ON
    (w.InjectKeycode(action=1, keycode=66, repeat=5, metastate=0x41),
     bytes([0, 0x01, 0, 0, 0, 0x42, 0, 0, 0, 0x05, 0, 0, 0, 0x41])),
    # test_serialize_inject_text
    (w.InjectText("hello, world!"), bytes([1, 0, 0, 0, 0x0D]) + HELLO),
    # test_serialize_inject_touch_event
    (w.InjectTouchEvent(action=0, pointer_id=0x1234567887654321, x=100, y=200,
                        screen_width=1080, screen_height=1920, pressure=1.0,
                        action_button=1, buttons=1),
     bytes([2, 0x00, 0x12, 0x34, 0x56, 0x78, 0x87, 0x65, 0x43, 0x21,
            0, 0, 0, 0x64, 0, 0, 0, 0xC8, 0x04, 0x38, 0x07, 0x80, 0xFF, 0xFF,
            0, 0, 0, 1, 0, 0, 0, 1])),
    # test_serialize_inject_scroll_event (the ±16 range of 3.3.1+)
    (w.InjectScrollEvent(x=260, y=1026, screen_width=1080, screen_height=1920,
                         hscroll=16, vscroll=-16, buttons=1),
     bytes([3, 0, 0, 0x01, 0x04, 0, 0, 0x04, 0x02, 0x04, 0x38, 0x07, 0x80,
            0x7F, 0xFF, 0x80, 0x00, 0, 0, 0, 1])),
    # test_serialize_back_or_screen_on
    (w.BackOrScreenOn(action=1), bytes([4, 0x01])),
    # test_serialize_expand_notification_panel / _settings_panel / collapse_panels
    (w.ExpandNotificationPanel(), bytes([5])),
    (w.ExpandSettingsPanel(), bytes([6])),
    (w.CollapsePanels(), bytes([7])),
    # test_serialize_get_clipboard: SC_COPY_KEY_COPY
    (w.GetClipboard(copy_key=w.COPY_KEY_COPY), bytes([8, 1])),
    # test_serialize_set_clipboard: 27 bytes
    (w.SetClipboard(sequence=0x0102030405060708, paste=True, text="hello, world!"),
     bytes([9, 1, 2, 3, 4, 5, 6, 7, 8, 1, 0, 0, 0, 0x0D]) + HELLO),
    # test_serialize_set_display_power
    (w.SetDisplayPower(on=True), bytes([10, 0x01])),
    # test_serialize_rotate_device
    (w.RotateDevice(), bytes([11])),
    # test_serialize_uhid_create
    (w.UhidCreate(id=42, vendor_id=0x1234, product_id=0x5678, name="ABC",
                  report_desc=bytes(range(1, 12))),
     bytes([12, 0, 42, 0x12, 0x34, 0x56, 0x78, 3, 65, 66, 67, 0, 11, *range(1, 12)])),
    # test_serialize_uhid_input
    (w.UhidInput(id=42, data=bytes([1, 2, 3, 4, 5])), bytes([13, 0, 42, 0, 5, 1, 2, 3, 4, 5])),
    # test_serialize_uhid_destroy
    (w.UhidDestroy(id=42), bytes([14, 0, 42])),
    # test_serialize_open_hard_keyboard
    (w.OpenHardKeyboardSettings(), bytes([15])),
    # test_serialize_start_app
    (w.StartApp("firefox"), bytes([16, 7]) + b"firefox"),
    # test_serialize_reset_video
    (w.ResetVideo(), bytes([17])),
]


@pytest.mark.parametrize(("msg", "expected"), VECTORS, ids=lambda v: type(v).__name__)
def test_control_messages_match_scrcpys_vectors(msg: w.ControlMessage, expected: bytes) -> None:
    assert msg.encode() == expected
    assert w.decode_control(expected) == (msg, len(expected))


def test_sizes_asserted_by_scrcpys_tests() -> None:
    by_type = {type(m): e for m, e in VECTORS}
    assert len(by_type[w.InjectTouchEvent]) == 32
    assert len(by_type[w.SetClipboard]) == 27
    assert len(by_type[w.InjectKeycode]) == 14
    assert len(by_type[w.InjectScrollEvent]) == 21


def test_long_texts_are_cut_as_the_client_cuts_them() -> None:
    # test_serialize_inject_text_long: 300 'a' -> length 0x0000012c
    raw = w.InjectText("a" * 400).encode()
    assert raw[:5] == bytes([1, 0, 0, 0x01, 0x2C]) and len(raw) == 5 + 300
    # test_serialize_set_clipboard_long: the whole message is SC_CONTROL_MSG_MAX_SIZE
    raw = w.SetClipboard(0x0102030405060708, True, "a" * w.CLIPBOARD_TEXT_MAX_LENGTH).encode()
    assert len(raw) == w.CONTROL_MSG_MAX_SIZE
    # a cut never splits a character: 299 'a' then a 2-byte char -> 299 bytes
    raw = w.InjectText("a" * 299 + "é").encode()
    assert raw[1:5] == (299).to_bytes(4, "big")


def test_decoding_a_stream_incrementally() -> None:
    msgs = [m for m, _ in VECTORS] + [w.SetClipboard(0, False, "héllo wörld 你好")]
    stream = b"".join(m.encode() for m in msgs)
    out, buf, fed = [], b"", 0
    while fed < len(stream) or buf:
        got = w.decode_control(buf)
        if got is None:
            assert fed < len(stream), "decoder waits for bytes that never come"
            buf += stream[fed:fed + 3]  # a few bytes at a time, splitting every message
            fed += 3
            continue
        msg, used = got
        out.append(msg)
        buf = buf[used:]
    assert out == msgs


def test_unknown_control_type_is_a_clear_error() -> None:
    with pytest.raises(w.ScrcpyWireError, match="Unknown event type: 18"):
        w.decode_control(bytes([18]))
    assert w.decode_control(b"") is None
    assert w.decode_control(bytes([9, 0, 0])) is None


def test_fixed_point_conversions_match_binary_java() -> None:
    assert w.u16fp_to_float(0xFFFF) == 1.0 and w.u16fp_to_float(0x8000) == 0.5
    assert w.float_to_u16fp(0.5) == 0x8000 and w.float_to_u16fp(0.0) == 0
    assert w.i16fp_to_scroll(0x7FFF) == 16.0 and w.i16fp_to_scroll(-0x8000) == -16.0
    assert w.scroll_to_i16fp(1.0) == 0x0800 and w.scroll_to_i16fp(100) == 0x7FFF
    with pytest.raises(w.ScrcpyWireError):
        w.float_to_u16fp(1.5)


# --- app/tests/test_device_msg_deserialize.c @v3.3.4 --------------------------------------

def test_device_messages_match_scrcpys_vectors() -> None:
    clip = bytes([0, 0, 0, 0, 3, 0x41, 0x42, 0x43])  # test_deserialize_clipboard
    assert w.decode_device(clip) == (w.DeviceClipboard("ABC"), 8)
    assert w.DeviceClipboard("ABC").encode() == clip
    ack = bytes([1, 1, 2, 3, 4, 5, 6, 7, 8])  # test_deserialize_ack_set_clipboard
    assert w.decode_device(ack) == (w.AckClipboard(0x0102030405060708), 9)
    assert w.AckClipboard(0x0102030405060708).encode() == ack
    uhid = bytes([2, 0, 42, 0, 5, 1, 2, 3, 4, 5])  # test_deserialize_uhid_output
    assert w.decode_device(uhid) == (w.UhidOutput(42, bytes([1, 2, 3, 4, 5])), 10)
    # test_deserialize_clipboard_big: DEVICE_MSG_MAX_SIZE in all
    big = w.DeviceClipboard("a" * (w.DEVICE_MSG_MAX_SIZE + 10)).encode()
    assert len(big) == w.DEVICE_MSG_MAX_SIZE
    for cut in range(len(clip)):
        assert w.decode_device(clip[:cut]) is None
    with pytest.raises(w.ScrcpyWireError):
        w.decode_device(bytes([7]))


# --- video stream ---------------------------------------------------------------------------

def test_device_meta_is_64_bytes_cut_at_a_character() -> None:
    meta = w.encode_device_meta("Pixel 7")
    assert len(meta) == 64 and meta.startswith(b"Pixel 7\0")
    assert w.decode_device_meta(meta) == "Pixel 7"
    long = w.encode_device_meta("a" * 62 + "你")  # 62 + 3 bytes: the char does not fit in 63
    assert long == b"a" * 62 + b"\0\0" and long[63] == 0


def test_codec_meta_and_frame_headers() -> None:
    meta = w.CodecMeta(w.CODEC_H264, 1080, 2400)
    assert meta.encode() == b"h264" + (1080).to_bytes(4, "big") + (2400).to_bytes(4, "big")
    assert w.CodecMeta.decode(meta.encode()) == meta
    assert w.encode_codec_id(w.CODEC_DISABLED) == b"\0\0\0\0"
    config = w.FrameHeader(size=30, pts_us=123, config=True).encode()
    assert config == (1 << 63).to_bytes(8, "big") + (30).to_bytes(4, "big")
    assert w.FrameHeader.decode(config) == w.FrameHeader(30, 0, config=True)
    key = w.FrameHeader(size=1000, pts_us=33_333, key_frame=True)
    assert key.encode()[:8] == ((1 << 62) | 33_333).to_bytes(8, "big")
    assert w.FrameHeader.decode(key.encode()) == key
    plain = w.FrameHeader(size=5, pts_us=(1 << 62) - 1)
    assert w.FrameHeader.decode(plain.encode()) == plain
    with pytest.raises(w.ScrcpyWireError):
        w.FrameHeader(size=1, pts_us=1 << 62).encode()


@pytest.mark.parametrize(("size", "max_size", "expected"), [
    ((1080, 2400), 0, (1080, 2400)),
    ((1080, 2400), 1024, (464, 1024)),  # 1024*1080/2400 = 460.8 -> 460 -> nearest 8 = 464
    ((1080, 2400), 1027, (464, 1024)),  # max_size & ~7
    ((2400, 1080), 800, (800, 360)),
    ((1082, 2402), 0, (1080, 2400)),  # round8: major down, minor to nearest
    ((720, 1280), 1920, (720, 1280)),
])
def test_limit_size_is_size_limit_then_round8(size: tuple[int, int], max_size: int,
                                              expected: tuple[int, int]) -> None:
    assert w.limit_size(*size, max_size) == expected


def test_socket_names() -> None:
    assert w.socket_name(0x0A1B2C3D) == "scrcpy_0a1b2c3d"
    assert w.socket_name(-1) == "scrcpy"
    assert all(0 <= w.random_scid() < 1 << 31 for _ in range(100))
    with pytest.raises(w.ScrcpyWireError):
        w.socket_name(1 << 31)


# --- the server command line ----------------------------------------------------------------

def test_server_command_is_what_the_official_client_runs() -> None:
    cmd = w.server_command(0x12345678, {"tunnel_forward": True, "audio": False,
                                        "max_size": 1920, "max_fps": 30})
    assert cmd == ("CLASSPATH=/data/local/tmp/scrcpy-server.jar app_process / "
                   "com.genymobile.scrcpy.Server 3.3.4 scid=12345678 log_level=info "
                   "tunnel_forward=true audio=false max_size=1920 max_fps=30")
    version, opts = w.parse_server_command(cmd)
    assert version == "3.3.4"
    assert (opts.scid, opts.tunnel_forward, opts.audio, opts.max_size, opts.max_fps) == \
        (0x12345678, True, False, 1920, 30.0)
    assert opts.log_level == "info" and opts.video and opts.control and opts.cleanup
    with pytest.raises(w.ScrcpyWireError, match="Invalid server param"):
        w.server_command(1, {"crop": "1 2"})
    with pytest.raises(w.ScrcpyWireError):
        w.server_command(1, {"video_encoder": "a;rm"})


def test_parse_as_the_server_does() -> None:
    # develop.md "Standalone server" example, with this version
    _, opts = w.parse_server_args(["3.3.4", "tunnel_forward=true", "audio=false",
                                   "control=false", "cleanup=false", "raw_stream=true",
                                   "max_size=1923", "frobnicate=1", "crop=10:10:0:0"])
    assert opts.scid == -1 and not opts.control and not opts.cleanup
    assert not (opts.send_device_meta or opts.send_frame_meta or opts.send_dummy_byte
                or opts.send_codec_meta)
    assert opts.max_size == 1920 and opts.unknown == ("frobnicate",)
    assert opts.other == {"crop": "10:10:0:0"}
    _, opts = w.parse_server_args(["3.3.4", "audio=yes", "video=TRUE"])
    assert not opts.audio and opts.video  # Boolean.parseBoolean
    with pytest.raises(w.ScrcpyOptionError,
                       match=r"^The server version \(3\.3\.4\) does not match the client \(2\.7\)$"):
        w.parse_server_args(["2.7", "scid=1"])
    with pytest.raises(w.ScrcpyOptionError, match='Invalid key=value pair: "oops"'):
        w.parse_server_args(["3.3.4", "oops"])
    with pytest.raises(w.ScrcpyOptionError, match="Video codec vp9 not supported"):
        w.parse_server_args(["3.3.4", "video_codec=vp9"])
    with pytest.raises(w.ScrcpyOptionError, match='For input string: "big"'):
        w.parse_server_args(["3.3.4", "max_size=big"])
    with pytest.raises(w.ScrcpyOptionError, match="Missing client version"):
        w.parse_server_args([])
    assert w.split_server_command("ls -l") is None
    inv = w.split_server_command("CLASSPATH=/x.jar app_process / com.genymobile.scrcpy.Server 3.3.4")
    assert inv == w.ServerInvocation("/x.jar", w.SERVER_CLASS, ("3.3.4",))
