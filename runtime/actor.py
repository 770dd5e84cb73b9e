"""Actors: a handler per inbound message, supervised, isolated from each other.

An actor declares the topic filters it consumes (``inbox``); a ``Router`` fans the bus's
single message stream out to the actors whose filters match, each through its own bounded
queue, so a slow or dead actor never blocks another. A handler runs under a timeout inside
the actor's task group, and its failure becomes a structured ``Error`` event instead of a
crash. ``supervise`` restarts an actor whose loop itself dies, with backoff, so one
device's failure never takes down another device's actors. ``run_actors`` wires it all to
a bus.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable, Sequence
from typing import Protocol

import aiomqtt
import anyio
import msgspec
import structlog
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from runtime.bus import Backoff
from runtime.messages import Error, Msg

log = structlog.get_logger(__name__)

Envelope = tuple[str, Msg]


class Publisher(Protocol):
    async def publish(self, topic: str, msg: Msg, *, qos: int = 1, retain: bool = False) -> None: ...


class BusLike(Publisher, Protocol):
    async def subscribe(self, filter_: str, qos: int = 1) -> None: ...

    def messages(self) -> AsyncIterable[Envelope]: ...


def topic_matches(topic: str, filter_: str) -> bool:
    """MQTT filter matching (``+``, ``#``, ``$share/group/`` stripped): aiomqtt's own rule."""
    return aiomqtt.Topic(topic).matches(filter_)


class Actor:
    """Subclass, set ``name`` and ``inbox``, implement ``handle`` (and maybe ``main``)."""

    name: str = "actor"
    inbox: Sequence[str] = ()
    handler_timeout_s: float = 30.0
    error_topic: str = ""  # where handler errors are published; empty = log only

    def __init__(self, bus: Publisher) -> None:
        self.bus = bus
        self.handled = 0
        self.failed = 0

    async def handle(self, topic: str, msg: Msg) -> None:
        raise NotImplementedError

    async def main(self) -> None:
        """Background work that lives as long as the actor (optional); returns when done."""

    async def run(self, inbox: MemoryObjectReceiveStream[Envelope]) -> None:
        """Handle messages in arrival order until the inbox closes; ``main`` alongside."""
        async with anyio.create_task_group() as tg, inbox:
            tg.start_soon(self.main)
            async for topic, msg in inbox:
                await self._handle_one(topic, msg)
            tg.cancel_scope.cancel()

    async def _handle_one(self, topic: str, msg: Msg) -> None:
        try:
            with anyio.fail_after(self.handler_timeout_s):
                await self.handle(topic, msg)
            self.handled += 1
        except TimeoutError:
            self.failed += 1
            await self.report(topic, msg, "handler timed out", f"after {self.handler_timeout_s}s")
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # a bad message must not kill the actor
            self.failed += 1
            await self.report(topic, msg, "handler failed", f"{type(exc).__name__}: {exc}")

    async def report(self, topic: str, msg: Msg | None, reason: str, detail: str) -> None:
        """Log a problem and publish it as an ``Error`` event (best effort)."""
        log.warning("actor_error", actor=self.name, topic=topic, reason=reason, detail=detail)
        if not self.error_topic:
            return
        err = Error(topic=topic, reason=f"{self.name}: {reason}", detail=detail[:2000])
        if msg is not None:
            err = msgspec.structs.replace(
                err, device=msg.device, episode_id=msg.episode_id, step=msg.step,
                correlation_id=msg.correlation_id,
            )
        try:
            with anyio.fail_after(5):
                await self.bus.publish(self.error_topic, err)
        except Exception as exc:  # reporting is best effort; the log line above stands
            log.warning("error_report_failed", actor=self.name, error=str(exc))


class Router:
    """Fans one stream of (topic, message) out to the actors whose inbox matches."""

    def __init__(self, buffer: int = 256) -> None:
        self._buffer = buffer
        self._routes: list[tuple[Actor, MemoryObjectSendStream[Envelope]]] = []
        self.dropped = 0

    def attach(self, actor: Actor) -> MemoryObjectReceiveStream[Envelope]:
        send, receive = anyio.create_memory_object_stream[Envelope](self._buffer)
        self._routes.append((actor, send))
        return receive

    def detach(self, receive: MemoryObjectReceiveStream[Envelope]) -> None:
        receive.close()

    async def dispatch(self, topic: str, msg: Msg) -> int:
        """Deliver to every matching actor; returns how many received it.

        Never waits on an actor: a full inbox drops the message for that actor only, with
        an ``Error`` event, so one stuck actor cannot stall the others.
        """
        delivered = 0
        for actor, send in list(self._routes):
            if not any(topic_matches(topic, f) for f in actor.inbox):
                continue
            try:
                send.send_nowait((topic, msg))
                delivered += 1
            except anyio.WouldBlock:
                self.dropped += 1
                await actor.report(topic, msg, "inbox full", f"dropped after {self._buffer} queued")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._routes = [r for r in self._routes if r[1] is not send]
        return delivered

    async def pump(self, messages: AsyncIterable[Envelope]) -> None:
        async for topic, msg in messages:
            await self.dispatch(topic, msg)

    def close(self) -> None:
        for _, send in self._routes:
            send.close()
        self._routes.clear()


async def restart_with_backoff(
    body: Callable[[], Awaitable[None]],
    on_crash: Callable[[BaseException, int, float], Awaitable[None]],
    *,
    backoff: Backoff | None = None,
    healthy_after_s: float = 10.0,
    max_restarts: int | None = None,
) -> None:
    """Run ``body`` until it returns; when it raises, run it again after a backoff delay.

    ``on_crash(cause, restarts, delay)`` hears of each crash first (``cause`` is the error
    inside any task-group wrapping). A run that lasted ``healthy_after_s`` resets the
    backoff; past ``max_restarts`` the cause is raised. Cancellation is never caught.
    """
    backoff = backoff or Backoff(0.5, 30.0)
    restarts = 0
    while True:
        started = anyio.current_time()
        try:
            await body()
            return
        except Exception as exc:
            cause = root_cause(exc)
            restarts += 1
            if anyio.current_time() - started > healthy_after_s:
                backoff.reset()
            delay = backoff.next_delay()
            await on_crash(cause, restarts, delay)
            if max_restarts is not None and restarts > max_restarts:
                raise cause from exc if cause is not exc else None
            await anyio.sleep(delay)


async def supervise(
    actor: Actor,
    router: Router,
    *,
    backoff: Backoff | None = None,
    healthy_after_s: float = 10.0,
    max_restarts: int | None = None,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``actor`` until cancelled, restarting it with backoff if its loop crashes.

    ``task_status.started`` fires once the actor's first inbox is attached to the router, so
    nothing routed after that point can miss it.
    """
    attached = False

    async def once() -> None:
        nonlocal attached
        inbox = router.attach(actor)
        if not attached:
            attached = True
            task_status.started()
        try:
            await actor.run(inbox)  # returns when the inbox closed: a clean shutdown
        except Exception:
            router.detach(inbox)
            raise

    async def crashed(cause: BaseException, restarts: int, delay: float) -> None:
        what = f"{type(cause).__name__}: {cause}"
        log.error("actor_crashed", actor=actor.name, error=what, restart=restarts,
                  retry_in_s=round(delay, 2))
        await actor.report("", None, "actor crashed", what)

    await restart_with_backoff(once, crashed, backoff=backoff, healthy_after_s=healthy_after_s,
                               max_restarts=max_restarts)


def root_cause(exc: BaseException) -> BaseException:
    """The single error inside (nested) task-group exception groups, else ``exc`` itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def run_actors(
    bus: BusLike, actors: Sequence[Actor], *, buffer: int = 256,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Subscribe every actor's inbox on ``bus`` and run them, supervised, until cancelled.

    ``task_status.started`` fires when every subscription is acknowledged and every actor's
    inbox is attached: a message published after that reaches its actors.
    """
    router = Router(buffer)
    for f in dict.fromkeys(f for a in actors for f in a.inbox):
        await bus.subscribe(f)
    try:
        async with anyio.create_task_group() as tg:
            for actor in actors:
                await tg.start(supervise, actor, router)
            task_status.started()
            await router.pump(bus.messages())
            tg.cancel_scope.cancel()  # the bus closed
    finally:
        router.close()
