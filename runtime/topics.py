"""The topic scheme, in one place (versioned ``mobagent/v1``).

::

    mobagent/v1/devices/{serial}/instructions     in: Instruction (QoS 1)
    mobagent/v1/devices/{serial}/control          in: Cancel | Approve | Answer | Steer (QoS 1)
                                                  out: Question (the agent's Ask)
    mobagent/v1/devices/{serial}/status           retained DeviceStatus (LWT: offline)
    mobagent/v1/devices/{serial}/events/{kind}    out: every step message
    mobagent/v1/devices/{serial}/screen           out: Screen, a small JPEG of each Frame
                                                  (QoS 0, for watchers: the dashboard)
    mobagent/v1/devices/{serial}/requests/{kind}  host-internal: FrameRequest | GroundRequest
                                                  | ActRequest | ReflectRequest (answered
                                                  by step events carrying the request_id)
    mobagent/v1/fleet/instructions                in: Instruction for any free phone
                                                  (a shared subscription on MQTT 5 brokers)
    mobagent/v1/fleet/watching                    in: Watching, a watcher's lease on screens
                                                  and full frames (every host takes it)
    $share/{group}/mobagent/v1/devices/+/requests/{kind}
                                                  how a pool of workers (``mobagent
                                                  perceive``) splits one kind of request
    mobagent/v1/hosts/{host}/status               retained HostStatus (LWT: offline)
    mobagent/v1/hosts/{host}/events/{kind}        out: host-level events (errors, ...)

A serial or host name becomes one topic level, so it must not contain ``/``, ``+``, ``#``
or NUL and must not start with ``$``; ``check_name`` says so with a clear error.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from runtime.errors import MobagentError
from runtime.messages import (
    Answer,
    Approve,
    Cancel,
    DeviceStatus,
    HostStatus,
    Instruction,
    Msg,
    Question,
    Steer,
    kind_of,
)

VERSION: Final = "v1"
ROOT: Final = f"mobagent/{VERSION}"
SHARE_GROUP: Final = "mobagent"
_BAD_CHARS: Final = frozenset("/+#\x00")


class TopicError(MobagentError, ValueError):
    pass


def check_name(name: str, what: str = "serial") -> str:
    """A device serial or host name usable as one topic level, or ``TopicError``."""
    if not name:
        raise TopicError(f"{what} is empty")
    if len(name.encode()) > 200:
        raise TopicError(f"{what} is longer than 200 bytes")
    bad = sorted(set(name) & _BAD_CHARS)
    if bad:
        raise TopicError(f"{what} {name!r} contains {', '.join(map(repr, bad))}")
    if name.startswith("$"):
        raise TopicError(f"{what} {name!r} starts with '$'")
    return name


def device_instructions(serial: str) -> str:
    return f"{ROOT}/devices/{check_name(serial)}/instructions"


def device_control(serial: str) -> str:
    return f"{ROOT}/devices/{check_name(serial)}/control"


def device_status(serial: str) -> str:
    return f"{ROOT}/devices/{check_name(serial)}/status"


def device_event(serial: str, kind: str | type[Msg] | Msg) -> str:
    return f"{ROOT}/devices/{check_name(serial)}/events/{_kind(kind)}"


def device_screen(serial: str) -> str:
    return f"{ROOT}/devices/{check_name(serial)}/screen"


def device_request(serial: str, kind: str | type[Msg] | Msg) -> str:
    """Where a request of ``kind`` for one device's services goes."""
    return f"{ROOT}/devices/{check_name(serial)}/requests/{_kind(kind)}"


def fleet_instructions() -> str:
    return f"{ROOT}/fleet/instructions"


def fleet_watching() -> str:
    """Where watchers declare what they read (``Watching``); every host subscribes."""
    return f"{ROOT}/fleet/watching"


def shared_fleet_instructions() -> str:
    """The MQTT 5 shared-subscription filter: each fleet instruction goes to one host."""
    return shared(fleet_instructions(), SHARE_GROUP)


def shared(filter_: str, group: str) -> str:
    """``filter_`` as an MQTT 5 shared subscription: each message goes to one subscriber
    of ``group`` (on 3.1.1 the bus subscribes the plain filter, so every one gets it)."""
    return f"$share/{check_name(group, 'share group')}/{filter_}"


def host_status(host: str) -> str:
    return f"{ROOT}/hosts/{check_name(host, 'host')}/status"


def host_event(host: str, kind: str | type[Msg] | Msg) -> str:
    return f"{ROOT}/hosts/{check_name(host, 'host')}/events/{_kind(kind)}"


# ---- subscription filters -------------------------------------------------------------


def device_events_filter(serial: str | None = None, kind: str = "+") -> str:
    """All events of one device (or of every device, when ``serial`` is None)."""
    dev = "+" if serial is None else check_name(serial)
    return f"{ROOT}/devices/{dev}/events/{kind}"


def device_requests_filter(serial: str | None = None, kind: str = "+") -> str:
    """Requests to one device's services (or every device's, when ``serial`` is None)."""
    dev = "+" if serial is None else check_name(serial)
    return f"{ROOT}/devices/{dev}/requests/{kind}"


def host_events_filter(host: str | None = None) -> str:
    return f"{ROOT}/hosts/{'+' if host is None else check_name(host, 'host')}/events/+"


def all_instructions_filter() -> str:
    return f"{ROOT}/devices/+/instructions"


def all_control_filter() -> str:
    return f"{ROOT}/devices/+/control"


def all_screens_filter() -> str:
    return f"{ROOT}/devices/+/screen"


def all_device_status_filter() -> str:
    return f"{ROOT}/devices/+/status"


def all_host_status_filter() -> str:
    return f"{ROOT}/hosts/+/status"


# ---- parsing ---------------------------------------------------------------------------

Scope = Literal["device", "fleet", "host"]
Channel = Literal["instructions", "control", "status", "events", "requests", "screen",
                  "watching"]


class TopicInfo(msgspec.Struct, frozen=True):
    scope: Scope
    channel: Channel
    name: str | None = None  # the serial (device scope) or host name (host scope)
    kind: str | None = None  # the message kind, for ``events`` and ``requests`` topics

    @property
    def serial(self) -> str | None:
        return self.name if self.scope == "device" else None


def parse(topic: str) -> TopicInfo:
    """Split a concrete topic into its parts; ``TopicError`` when it is not ours."""
    parts = topic.split("/")
    if len(parts) < 3 or f"{parts[0]}/{parts[1]}" != ROOT:
        raise TopicError(f"not a {ROOT} topic: {topic!r}")
    rest = parts[2:]
    if rest == ["fleet", "instructions"]:
        return TopicInfo("fleet", "instructions")
    if rest == ["fleet", "watching"]:
        return TopicInfo("fleet", "watching")
    if len(rest) >= 3 and rest[0] in ("devices", "hosts") and rest[1]:
        scope: Scope = "device" if rest[0] == "devices" else "host"
        name, tail = rest[1], rest[2:]
        if tail == ["status"]:
            return TopicInfo(scope, "status", name)
        if scope == "device" and tail in (["instructions"], ["control"]):
            return TopicInfo(scope, "instructions" if tail[0] == "instructions" else "control", name)
        if scope == "device" and tail == ["screen"]:
            return TopicInfo(scope, "screen", name)
        if len(tail) == 2 and tail[0] == "events" and tail[1]:
            return TopicInfo(scope, "events", name, tail[1])
        if scope == "device" and len(tail) == 2 and tail[0] == "requests" and tail[1]:
            return TopicInfo(scope, "requests", name, tail[1])
    raise TopicError(f"unknown topic: {topic!r}")


def serial_of(topic: str) -> str | None:
    """The device serial named in ``topic``; None for fleet/host topics."""
    return parse(topic).serial


# What each inbound channel may carry; anything else on it is rejected as an Error. A
# ``requests/{kind}`` topic carries exactly that kind (``request_kind``).
INBOUND_KINDS: Final[dict[str, tuple[type[Msg], ...]]] = {
    "instructions": (Instruction,),
    "control": (Cancel, Approve, Answer, Steer, Question),
}
STATUS_KINDS: Final[tuple[type[Msg], ...]] = (DeviceStatus, HostStatus)


def expected_kinds(topic: str) -> tuple[type[Msg], ...] | None:
    """The message types ``topic`` may carry, or None when any message may."""
    try:
        info = parse(topic)
    except TopicError:
        return None
    if info.channel == "status":
        return (DeviceStatus,) if info.scope == "device" else (HostStatus,)
    return INBOUND_KINDS.get(info.channel)


def request_kind(topic: str) -> str | None:
    """The one message kind a ``requests/{kind}`` topic may carry; None for other topics."""
    try:
        info = parse(topic)
    except TopicError:
        return None
    return info.kind if info.channel == "requests" else None


def _kind(kind: str | type[Msg] | Msg) -> str:
    if isinstance(kind, str):
        return check_name(kind, "kind")
    return kind_of(kind if isinstance(kind, type) else type(kind))
