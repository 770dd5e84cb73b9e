"""The host-local store of decoded frames that the agent's services share.

Capture fills it with the pixels it already has; perception and the reflector read them
there. This is a local fast path only: a frame it lacks is decoded from ``Frame.data`` as
received from the bus (and then kept), so a service on another host still works.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import anyio
import numpy as np

from devices.codecs import decode_rgb
from protocol.messages import Frame
from runtime.cpu_ledger import CpuLedger, charging, stage


@dataclass
class _Stored:
    frame: Frame
    rgb: np.ndarray | None = None
    view: bytes = b""  # the LLM-sized JPEG capture made, when asked for


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

    def put(self, frame: Frame, rgb: np.ndarray | None = None, view: bytes = b"") -> None:
        frames = self._frames.setdefault(frame.device, OrderedDict())
        got = frames.get(frame.frame_id)
        if got is not None:
            if rgb is not None and got.rgb is None:
                got.rgb = rgb
            got.view = got.view or view
            return
        frames[frame.frame_id] = _Stored(frame, rgb, view)
        while len(frames) > self.per_device * self.KEPT_ENCODED:
            frames.popitem(last=False)
        for i, old in enumerate(frames.values()):
            if i >= len(frames) - self.per_device:
                break
            old.rgb = None  # the pixels of older frames go; their bytes stay

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

    async def rgb(self, frame_id: str, device: str = "") -> tuple[Frame, np.ndarray]:
        """The frame and its pixels; decodes ``Frame.data`` once when only the bytes are here."""
        got = self._find(frame_id, device)
        if got is None:
            raise KeyError(f"frame {frame_id!r} is not known on this host (too old, or its "
                           "Frame event never arrived)")
        if got.rgb is None:
            data, owner = got.frame.data, got.frame.device

            def decode() -> np.ndarray:
                with charging(self.ledger, owner), stage("decode"):
                    return decode_rgb(data)

            got.rgb = await anyio.to_thread.run_sync(decode, limiter=self._limiter)
            self.decoded += 1
        return got.frame, got.rgb

    def forget(self, device: str) -> None:
        self._frames.pop(device, None)
