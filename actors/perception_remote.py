"""Perception in worker processes that scale out (``mobagent perceive``).

A host with ``agent.perception = "remote"`` loads no models. Its requests go where the local
``PerceptionService`` would take them, ``devices/{serial}/requests/{kind}``, but carry the
encoded frame (a worker elsewhere has no frame store to look the id up in); the workers
take them through one MQTT 5 shared subscription (``$share/{group}/...``), so each request
goes to one worker and several workers split the load:

=======================  ==========================================  =======================
request                  sent by                                     answer (events/{kind})
=======================  ==========================================  =======================
``ground_request``       the episode (``GroundRequest.frame`` set)   ``grounded`` |
                                                                     ``ambiguous`` |
                                                                     ``not_found``
``read_text_request``    capture, for a ``FrameRequest`` with ``ocr``  ``text_read``
=======================  ==========================================  =======================

A worker that dies holding a request never answers it: the requester publishes the same
request (same id) again each ``agent.perception_resend_s`` until the request's own timeout,
and the broker gives the copy to a worker still subscribed (the workers' sessions are not
persistent, so a dead one's subscription goes with its connection). A slow worker that gets
its own request again drops the copy (``ServiceActor`` dedupes by id); two answers to one
request are possible and the requester keeps the first (``ReplyRouter``). There is no
speculative OCR here: the worker that would read a frame ahead is not the one the grounding
request will reach.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from actors.capture import Captured
from actors.frames import FrameStore
from actors.perception import PerceptionEngine, serve_timeout_for
from actors.rpc import DeviceRegistry, Registered, Requests, ServiceActor, new_request_id
from protocol.messages import GroundRequest, Msg, ReadTextRequest, TextLine, TextRead
from runtime import topics
from runtime.actor import Publisher

DEFAULT_GROUP = "perception"


@dataclass(frozen=True)
class RemoteTimes:
    """How long the host gives a remote perception request, in all and per try."""

    timeout_s: float
    resend_after_s: float

    @classmethod
    def of(cls, perception_timeout_s: float, resend_after_s: float) -> RemoteTimes:
        total = serve_timeout_for(perception_timeout_s)
        # At least two tries inside the request's timeout, whatever the setting says.
        return cls(total, min(resend_after_s, total / 2))


class RemotePerception:
    """The host's side of remote perception for capture: OCR lines over the bus."""

    def __init__(self, requests: Requests, times: RemoteTimes,
                 frames: FrameStore | None = None) -> None:
        self.requests = requests
        self.times = times
        self.frames = frames  # the host's: a frame sent without its bytes gets them there

    async def read_lines(self, captured: Captured, device: str = "") -> list[TextLine]:
        frame = captured.frame
        if not frame.data and self.frames is not None:  # a worker elsewhere needs the bytes
            frame = await self.frames.encoded(frame.frame_id, frame.device)
        req = ReadTextRequest(device=device or frame.device, episode_id=frame.episode_id,
                              step=frame.step, correlation_id=frame.correlation_id,
                              frame_id=frame.frame_id, frame=frame,
                              request_id=new_request_id())
        got = await self.requests.call(req, timeout_s=self.times.timeout_s, expect=(TextRead,),
                                       resend_after_s=self.times.resend_after_s)
        assert isinstance(got, TextRead)
        return list(got.lines)


class PerceptionWorker(ServiceActor[Registered]):
    """Serves ``GroundRequest`` and ``ReadTextRequest`` for any phone, on the frame each
    request carries, from one share group (``topics.shared``)."""

    name = "perception-worker"
    kinds = (GroundRequest, ReadTextRequest)

    def __init__(self, bus: Publisher, engine: PerceptionEngine, *, group: str = DEFAULT_GROUP,
                 concurrency: int | None = None, cpu_threads: int = 2) -> None:
        super().__init__(bus, DeviceRegistry[Registered](), concurrency=concurrency)  # any phone
        self.inbox = tuple(topics.shared(topics.device_requests_filter(None, kind), group)
                           for kind in ("ground_request", "read_text_request"))
        self.engine = engine
        # Decoded frames, so a read and then a grounding of one frame decode it once.
        self.frames = FrameStore(2, limiter=anyio.CapacityLimiter(max(1, cpu_threads)))
        self.serve_timeout_s = serve_timeout_for(engine.timeout_s)
        self.handler_timeout_s = self.serve_timeout_s + 5.0

    async def main(self) -> None:
        await self.engine.prepared_while_running()

    async def handle(self, topic: str, msg: Msg) -> None:
        await self.answer_once(topic, msg, lambda: self.serve_carried(msg))

    async def serve_carried(self, req: Msg) -> Msg:
        assert isinstance(req, GroundRequest | ReadTextRequest)
        frame = req.frame
        if frame is None:
            raise ValueError("the request carries no frame: a perception worker serves hosts "
                             "with agent.perception = \"remote\"")
        if frame.frame_id != req.frame_id:
            raise ValueError(f"the request names frame {req.frame_id!r} but carries "
                             f"{frame.frame_id!r}")
        self.frames.put(frame)
        got, rgb = await self.frames.rgb(frame.frame_id, frame.device)
        captured = Captured(got, rgb, 0.0, 0.0)
        if isinstance(req, GroundRequest):
            return await self.engine.ground(req, captured)
        lines = await self.engine.read_lines(captured, req.device)
        return TextRead(frame_id=req.frame_id, lines=lines)
