"""Request/response over the bus, generic over the services that answer.

- ``Requests.call``: publish a request and await the event carrying its ``request_id``, under
  one deadline (``RequestTimeout``; an ``Error`` reply is ``RequestFailed``), optionally
  publishing it again while unanswered (``resend_after_s``) for services behind a shared
  subscription (``actors/perception_remote.py``).
- ``ReplyRouter``: resolves those waiters by request id (a late or duplicate reply is
  ignored) and keeps the frames it sees in the ``FrameStore``.
- ``ServiceActor[E]``: the base of a host-level service. It serves requests of its kinds for
  the phones in its registry (``E`` is what it needs of a phone's entry: each service names
  that as a Protocol, ``actors/services.py`` builds the entries), several at once and
  bounded, drops duplicate request ids and answers a failure with an ``Error``.
- ``DeviceRegistry[E]``: the phones a host serves, by serial (hot-plug re-registers).
- ``LoopbackBus``: delivers requests to in-process actors through a ``runtime.actor.Router``
  instead of a broker (tests, one-off tools); events still go out on the real publisher.

The step's messages in order: docs/architecture.md ("One step, as messages").
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar

import anyio
import msgspec
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream

from actors.frames import FrameStore
from protocol.messages import Error, Frame, Msg, kind_of
from runtime import topics
from runtime.actor import Actor, Envelope, Publisher, Router
from runtime.dedupe import SeenIds
from runtime.errors import MobagentError

log = structlog.get_logger(__name__)

M = TypeVar("M", bound=Msg)


def new_request_id() -> str:
    return uuid.uuid4().hex[:16]


class RequestError(MobagentError, RuntimeError):
    """A request to a service failed (an ``Error`` reply) or got no answer in time."""


class RequestFailed(RequestError):
    pass


class RequestTimeout(RequestError):
    pass


# ---- the phones this host serves -------------------------------------------------------


class Registered(Protocol):
    """What the registry needs of a phone's entry; each service names the rest it uses
    (``actors/services.py`` builds the entries, with every engine)."""

    @property
    def serial(self) -> str: ...


E = TypeVar("E", bound=Registered)
E_co = TypeVar("E_co", bound=Registered, covariant=True)


class Entries(Protocol[E_co]):
    """A service's view of the registry: look a phone up."""

    def get(self, serial: str) -> E_co | None: ...


class DeviceRegistry(Generic[E]):
    """Serial -> entry; agents register (and re-register on hot-plug) at run time."""

    def __init__(self) -> None:
        self._entries: dict[str, E] = {}

    def put(self, entry: E) -> None:
        self._entries[entry.serial] = entry

    def get(self, serial: str) -> E | None:
        return self._entries.get(serial)

    def remove(self, serial: str, entry: E | None = None) -> None:
        if entry is None or self._entries.get(serial) is entry:
            self._entries.pop(serial, None)

    def __contains__(self, serial: object) -> bool:
        return serial in self._entries

    def __len__(self) -> int:
        return len(self._entries)


# ---- replies -----------------------------------------------------------------------------


class _Waiter:
    def __init__(self) -> None:
        self.event = anyio.Event()
        self.reply: Msg | None = None


class ReplyRouter(Actor):
    """Resolves ``Requests`` waiters by the ``request_id`` of the events it receives."""

    name = "replies"

    def __init__(self, bus: Publisher, frames: FrameStore | None = None) -> None:
        super().__init__(bus)
        self.inbox = (topics.device_events_filter(None),)
        self.frames = frames
        self._waiting: dict[str, _Waiter] = {}
        self.resolved = 0
        self.unmatched = 0  # replies nobody waits for (late, duplicate, another host's)

    def expect(self, request_id: str) -> _Waiter:
        waiter = self._waiting[request_id] = _Waiter()
        return waiter

    def forget(self, request_id: str) -> None:
        self._waiting.pop(request_id, None)

    @property
    def pending(self) -> int:
        return len(self._waiting)

    async def handle(self, topic: str, msg: Msg) -> None:
        self.deliver(msg)

    def deliver(self, msg: Msg) -> bool:
        if isinstance(msg, Frame) and self.frames is not None:
            self.frames.put(msg)  # a no-op when capture already stored it with its pixels
        rid = getattr(msg, "request_id", "")
        if not rid:
            return False
        waiter = self._waiting.get(rid)
        if waiter is None or waiter.reply is not None:
            self.unmatched += 1
            return False
        waiter.reply = msg
        waiter.event.set()
        self.resolved += 1
        return True


class Requests:
    """The planner's side of request/response: ``call`` publishes and awaits the reply."""

    def __init__(self, bus: Publisher, replies: ReplyRouter) -> None:
        self.bus = bus
        self.replies = replies
        self.resent = 0  # requests published again after a try went unanswered

    async def call(self, req: M, *, timeout_s: float, expect: tuple[type[Msg], ...],
                   resend_after_s: float | None = None) -> Msg:
        """``resend_after_s``: publish the same request (same id) again each time this long
        passes without an answer, until ``timeout_s``: for a service behind a shared
        subscription, where a worker that died with the request leaves it to another."""
        rid: str = getattr(req, "request_id", "")
        if not rid or not req.device:
            raise ValueError("a request needs a request_id and a device")
        kind = kind_of(type(req))
        topic = topics.device_request(req.device, req)
        waiter = self.replies.expect(rid)
        try:
            with anyio.fail_after(timeout_s):
                await self.bus.publish(topic, req)
                while resend_after_s is not None:
                    with anyio.move_on_after(resend_after_s):
                        await waiter.event.wait()
                    if waiter.event.is_set():
                        break
                    self.resent += 1
                    log.info("request_resent", kind=kind, request_id=rid, device=req.device,
                             after_s=resend_after_s)
                    await self.bus.publish(topic, req)
                await waiter.event.wait()
        except TimeoutError:
            raise RequestTimeout(f"no answer to {kind} {rid} for {req.device} within "
                                 f"{timeout_s:g}s") from None
        finally:
            self.replies.forget(rid)
        reply = waiter.reply
        if isinstance(reply, Error):
            raise RequestFailed(f"{kind} for {req.device} failed: {reply.reason}"
                                + (f": {reply.detail}" if reply.detail else ""))
        if not isinstance(reply, expect):
            got = kind_of(type(reply)) if reply is not None else "nothing"
            raise RequestFailed(f"{kind} for {req.device} was answered by {got}")
        return reply


# ---- services ------------------------------------------------------------------------------


def answer(reply: M, req: Msg) -> M:
    """``reply`` carrying the ids of ``req`` (device, episode, step, correlation, request)."""
    return msgspec.structs.replace(
        reply, device=req.device, episode_id=req.episode_id, step=req.step,
        correlation_id=req.correlation_id, request_id=getattr(req, "request_id", ""),
        trace_id=req.trace_id, span_id=req.span_id)


class ServiceActor(Actor, Generic[E]):
    """A host-level service: requests of ``kinds`` for registered devices, concurrently;
    ``E`` is what it needs of a registered phone (its entry)."""

    kinds: tuple[type[Msg], ...] = ()
    concurrency: int = 16
    publish_timeout_s: float = 15.0
    serve_timeout_s: float = 60.0  # a request that runs longer is answered with an Error

    def __init__(self, bus: Publisher, registry: Entries[E], *,
                 concurrency: int | None = None) -> None:
        super().__init__(bus)
        self.registry = registry
        self.inbox = (topics.device_requests_filter(None),)
        if concurrency is not None:
            self.concurrency = max(1, concurrency)
        self.handler_timeout_s = self.serve_timeout_s + 5.0
        self._seen = SeenIds(4096)
        self.in_flight = 0
        self.served = 0
        self.duplicates = 0
        self.ignored = 0  # requests for phones this host does not serve
        self._tg: anyio.abc.TaskGroup | None = None

    def wants(self, msg: Msg) -> bool:
        """Cheap filter run before a task is spawned for ``msg``."""
        return isinstance(msg, self.kinds)

    async def run(self, inbox: MemoryObjectReceiveStream[Envelope]) -> None:
        slots = anyio.Semaphore(self.concurrency)
        async with anyio.create_task_group() as tg, inbox:
            self._tg = tg
            tg.start_soon(self.main)
            async for topic, msg in inbox:
                if not self.wants(msg):
                    continue
                await slots.acquire()  # bounded: at most `concurrency` in flight
                tg.start_soon(self._serve_one, slots, topic, msg)
            tg.cancel_scope.cancel()
        self._tg = None

    async def _serve_one(self, slots: anyio.Semaphore, topic: str, msg: Msg) -> None:
        self.in_flight += 1
        try:
            await self._handle_one(topic, msg)
        finally:
            self.in_flight -= 1
            slots.release()

    async def handle(self, topic: str, msg: Msg) -> None:
        entry = self.registry.get(msg.device)
        if entry is None:
            self.ignored += 1
            return  # another host's phone (requests are subscribed with a wildcard)
        await self.answer_once(topic, msg, lambda: self.serve(entry, msg))

    async def answer_once(self, topic: str, msg: Msg,
                          work: Callable[[], Awaitable[Msg]]) -> None:
        """Answer ``msg`` with what ``work`` returns, or an ``Error``; a request id seen
        before is dropped (its first copy is answered)."""
        rid = getattr(msg, "request_id", "")
        if rid and not self._seen.first_time(rid):
            self.duplicates += 1
            return
        reply: Msg
        try:
            with (structlog.contextvars.bound_contextvars(device=msg.device,
                                                          episode=msg.episode_id),
                  anyio.fail_after(self.serve_timeout_s)):
                reply = await work()
        except anyio.get_cancelled_exc_class():
            raise
        except TimeoutError:
            reply = Error(topic=topic, reason=f"{self.name}: timed out",
                          detail=f"no result within {self.serve_timeout_s:g}s")
        except Exception as exc:  # the asker gets the reason; the service goes on
            log.warning("service_failed", service=self.name, device=msg.device,
                        episode=msg.episode_id, error=f"{type(exc).__name__}: {exc}")
            reply = Error(topic=topic, reason=f"{self.name} failed",
                          detail=f"{type(exc).__name__}: {exc}"[:2000])
        self.served += 1
        await self.reply(answer(reply, msg))

    async def serve(self, entry: E, req: Msg) -> Msg:
        raise NotImplementedError

    async def reply(self, msg: Msg) -> None:
        with anyio.fail_after(self.publish_timeout_s):
            await self.bus.publish(topics.device_event(msg.device, msg), msg)


# ---- without a broker -------------------------------------------------------------------------


class LoopbackBus:
    """Delivers to in-process actors through ``router``; events also go to ``outer``."""

    def __init__(self, outer: Publisher, router: Router) -> None:
        self.outer = outer
        self.router = router

    async def publish(self, topic: str, msg: Msg, *, qos: int = 1, retain: bool = False) -> None:
        if "/requests/" not in topic:
            try:
                await self.outer.publish(topic, msg, qos=qos, retain=retain)
            except Exception as exc:  # the local reply matters more than the event copy
                log.warning("loopback_publish_failed", topic=topic, error=str(exc))
        await self.router.dispatch(topic, msg)
