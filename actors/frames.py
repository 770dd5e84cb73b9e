"""The host-local store of decoded frames that the agent's services share.

Capture fills it with the pixels it already has; perception and the reflector read them
there. This is a local fast path only: a frame it lacks is decoded from ``Frame.data`` as
received from the bus (and then kept), so a service on another host still works.

Capture makes a frame's encoding (``Frame.data``) only when something will read it from
the bus (actors/watching.py); a reader on this host that needs the bytes (the LLM without
a view of its own, the chooser, the grounder, a request to a perception worker) gets them
from ``encoded``: made from the pixels once, on the frame's device's ``encode`` CPU, and
kept with the frame.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal

import anyio
import msgspec
import numpy as np

from devices.codecs import decode_rgb, encode_jpeg, encode_png
from protocol.messages import Frame
from runtime.cpu_ledger import CpuLedger, charging, stage


def encode_frame(rgb: np.ndarray, fmt: Literal["png", "jpeg"], quality: int = 80) -> bytes:
    return encode_png(rgb) if fmt == "png" else encode_jpeg(rgb, quality)


def _gone(frame_id: str) -> KeyError:
    """A frame whose pixels went and that has no bytes to make them again from."""
    return KeyError(f"frame {frame_id!r} is too old: its pixels are gone and it was never "
                    "encoded")


@dataclass
class _Stored:
    frame: Frame
    rgb: np.ndarray | None = None
    view: bytes = b""  # the LLM-sized JPEG capture made, when asked for
    quality: int = 80  # the JPEG quality ``encoded`` makes the frame's bytes at
    # A frame read once for its OCR lines (the actuator's launcher pages): its pixels go
    # first, so a step's "before" frame keeps its own however many pages were read.
    transient: bool = False
    lock: anyio.Lock = field(default_factory=anyio.Lock)  # one encoding of a frame at a time


class FrameStore:
    """The last few frames per device, with their pixels when decoded (host-local).

    The newest ``per_device`` keep their pixels; older ones, up to ``KEPT_ENCODED`` times as
    many, keep only their encoded bytes (decoded again if asked for). A step's "before" frame
    must outlive the frames taken while its action ran: opening an app through the launcher
    reads every home page and drawer page it looks through.
    """

    KEPT_ENCODED = 4

    def __init__(self, per_device: int = 4, limiter: anyio.CapacityLimiter | None = None,
                 ledger: CpuLedger | None = None) -> None:
        self.per_device = max(2, per_device)
        self._frames: dict[str, OrderedDict[str, _Stored]] = {}
        self._limiter = limiter
        self.ledger = ledger  # a decode's CPU, charged to the frame's device
        self.decoded = 0  # frames decoded from bus bytes (the slow path)
        self.encoded_lazily = 0  # frames encoded here because a reader asked (``encoded``)

    def put(self, frame: Frame, rgb: np.ndarray | None = None, view: bytes = b"", *,
            quality: int = 80, transient: bool = False) -> None:
        frames = self._frames.setdefault(frame.device, OrderedDict())
        got = frames.get(frame.frame_id)
        if got is not None:
            if rgb is not None and got.rgb is None:
                got.rgb = rgb
            got.view = got.view or view
            # the newer copy (lines, app filled in), keeping bytes already made
            got.frame = (frame if frame.data or not got.frame.data
                         else msgspec.structs.replace(frame, data=got.frame.data))
            return
        frames[frame.frame_id] = _Stored(frame, rgb, view, quality, transient)
        while len(frames) > self.per_device * self.KEPT_ENCODED:
            frames.popitem(last=False)
        # The pixels of older frames go, their bytes (if any) stay: the newest frame keeps
        # its pixels, and the newest ``per_device`` that are not transient.
        kept = 0
        for i, old in enumerate(reversed(frames.values())):
            if i > 0 and old.transient:
                old.rgb = None
            elif kept < self.per_device:
                kept += 0 if old.transient else 1
            else:
                old.rgb = None

    def _find(self, frame_id: str, device: str = "") -> _Stored | None:
        if device:
            frames = self._frames.get(device)
            return frames.get(frame_id) if frames is not None else None
        for frames in self._frames.values():
            if frame_id in frames:
                return frames[frame_id]
        return None

    def frame(self, frame_id: str, device: str = "") -> Frame | None:
        got = self._find(frame_id, device)
        return got.frame if got is not None else None

    def view(self, frame_id: str, device: str = "") -> bytes:
        """The LLM-sized JPEG capture kept for this frame, or b"" (then use ``Frame.data``)."""
        got = self._find(frame_id, device)
        return got.view if got is not None else b""

    def devices(self) -> list[str]:
        """The phones this store holds frames of."""
        return [d for d, frames in self._frames.items() if frames]

    def latest(self, device: str) -> tuple[Frame, np.ndarray] | None:
        """The newest frame of ``device`` and its pixels (None when none is here)."""
        frames = self._frames.get(device)
        if not frames:
            return None
        got = next(reversed(frames.values()))
        return (got.frame, got.rgb) if got.rgb is not None else None

    async def encoded(self, frame_id: str, device: str = "") -> Frame:
        """The frame with its encoding in ``data``: as it came, or made from its pixels once
        (capture made none: nobody on the bus reads it) on its device's ``encode`` CPU."""
        got = self._known(frame_id, device)
        async with got.lock:
            if got.frame.data:
                return got.frame
            rgb = got.rgb
            if rgb is None:
                raise _gone(frame_id)
            frame, quality = got.frame, got.quality

            def encode() -> bytes:
                with charging(self.ledger, frame.device), stage("encode"):
                    return encode_frame(rgb, frame.format if frame.format == "png" else "jpeg",
                                        quality)

            data = await anyio.to_thread.run_sync(encode, limiter=self._limiter)
            got.frame = msgspec.structs.replace(got.frame, data=data)
            self.encoded_lazily += 1
            return got.frame

    def _known(self, frame_id: str, device: str) -> _Stored:
        got = self._find(frame_id, device)
        if got is None:
            raise KeyError(f"frame {frame_id!r} is not known on this host (too old, or its "
                           "Frame event never arrived)")
        return got

    async def rgb(self, frame_id: str, device: str = "") -> tuple[Frame, np.ndarray]:
        """The frame and its pixels; decodes ``Frame.data`` once when only the bytes are here."""
        got = self._known(frame_id, device)
        if got.rgb is None:
            if not got.frame.data:
                raise _gone(frame_id)
            data, owner = got.frame.data, got.frame.device

            def decode() -> np.ndarray:
                with charging(self.ledger, owner), stage("decode"):
                    return decode_rgb(data)

            got.rgb = await anyio.to_thread.run_sync(decode, limiter=self._limiter)
            self.decoded += 1
        return got.frame, got.rgb

    def forget(self, device: str) -> None:
        self._frames.pop(device, None)
