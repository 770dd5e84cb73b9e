"""The simulated phone's H.264 encoder: what MediaCodec hands scrcpy's SurfaceEncoder.

MediaCodec gives the encoder's SPS/PPS once as a separate buffer flagged
BUFFER_FLAG_CODEC_CONFIG, then one access unit per frame (scrcpy's
server/src/main/java/com/genymobile/scrcpy/video/SurfaceEncoder.java and
device/Streamer.java at v3.3.4 send each as one packet). libx264 (through PyAV) repeats its
headers inside key frames instead, so each packet is split at its Annex-B start codes: the
SPS and PPS go out as a config packet when they change, the other NAL units as the frame.
The encoder runs with the ultrafast preset and the zerolatency tune: no B-frames and no
look-ahead, so every frame comes out of encode() at once, as a phone's hardware encoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import av
import numpy as np

from runtime.errors import MobagentError

NAL_SPS, NAL_PPS = 7, 8
_START = b"\x00\x00\x01"


class EncoderError(MobagentError, RuntimeError):
    """libx264 failed to open or to encode a frame."""


@dataclass(frozen=True, slots=True)
class Packet:
    payload: bytes  # Annex-B NAL units, each with its start code
    config: bool  # SPS/PPS (MediaCodec's BUFFER_FLAG_CODEC_CONFIG)
    key_frame: bool
    pts_us: int


def split_nals(data: bytes) -> list[bytes]:
    """The NAL units of an Annex-B buffer, each keeping its own start code."""
    starts: list[int] = []
    i = data.find(_START)
    while i >= 0:
        # a 4-byte start code (00 00 00 01) belongs to the unit after it
        starts.append(i - 1 if i > 0 and data[i - 1] == 0 else i)
        i = data.find(_START, i + 3)
    starts.append(len(data))
    return [data[a:b] for a, b in zip(starts, starts[1:], strict=False) if b > a]


def nal_type(nal: bytes) -> int:
    at = nal.find(_START) + 3
    return nal[at] & 0x1F if at < len(nal) else -1


class H264Encoder:
    """One encoding session at a fixed size; ``encode`` takes RGB frames in order."""

    def __init__(self, width: int, height: int, bit_rate: int, fps_hint: float) -> None:
        if width <= 0 or height <= 0 or width % 2 or height % 2:
            raise EncoderError(f"H.264 needs an even, positive size, got {width}x{height}")
        self.width, self.height = width, height
        try:
            ctx = av.CodecContext.create("libx264", "w")
        except (av.FFmpegError, ValueError) as e:  # an FFmpeg build without libx264
            raise EncoderError(f"libx264 is not available: {e}") from e
        assert isinstance(ctx, av.VideoCodecContext)
        ctx.width, ctx.height = width, height
        ctx.pix_fmt = "yuv420p"
        ctx.time_base = Fraction(1, 1_000_000)
        ctx.framerate = Fraction(round(fps_hint or 60))
        ctx.bit_rate = max(bit_rate, 100_000)
        # key frames are forced by the caller (KEY_I_FRAME_INTERVAL), never by x264
        ctx.options = {"preset": "ultrafast", "tune": "zerolatency", "keyint": "100000",
                       "scenecut": "0", "threads": "2"}
        try:
            ctx.open()
        except av.FFmpegError as e:
            raise EncoderError(f"libx264 did not open at {width}x{height}: {e}") from e
        self._ctx: av.VideoCodecContext | None = ctx
        self._config = b""

    def encode(self, rgb: np.ndarray, pts_us: int, key_frame: bool) -> list[Packet]:
        """One frame (H x W x 3 uint8 at the encoder's size): a config packet first when the
        SPS/PPS are new, then the frame's packet."""
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        frame = frame.reformat(format="yuv420p")
        frame.pts = pts_us
        if self._ctx is None:
            raise EncoderError("the encoder is closed")
        frame.time_base = self._ctx.time_base
        if key_frame:
            frame.pict_type = av.video.frame.PictureType.I
        try:
            encoded = self._ctx.encode(frame)
        except av.FFmpegError as e:
            raise EncoderError(f"libx264 failed on a frame: {e}") from e
        out: list[Packet] = []
        for packet in encoded:
            nals = split_nals(bytes(packet))
            config = b"".join(n for n in nals if nal_type(n) in (NAL_SPS, NAL_PPS))
            media = b"".join(n for n in nals if nal_type(n) not in (NAL_SPS, NAL_PPS))
            if config and config != self._config:
                self._config = config
                out.append(Packet(config, config=True, key_frame=False, pts_us=0))
            if media:
                out.append(Packet(media, config=False, key_frame=bool(packet.is_keyframe),
                                  pts_us=pts_us))
        return out

    def close(self) -> None:
        """Drop the codec context (PyAV frees it with the last reference)."""
        self._ctx = None
