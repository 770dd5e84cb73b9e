"""The page's controls, as the bus messages ``mobagent submit`` and the control topic use.

``control_message(request, state)`` turns one WebSocket request (a JSON object with a
``type``) into ``(topic, message)``, or raises ``ControlError`` with a reason the page
shows. Nothing here publishes; the server does, with its own bus connection, so the page
never holds broker credentials.
"""

from __future__ import annotations

import uuid
from typing import Any

from host.dashboard.state import FleetState
from protocol.messages import Answer, Approve, Cancel, Instruction, Msg, Steer
from runtime import topics
from runtime.errors import MobagentError

KINDS = ("submit", "cancel", "steer", "approve", "answer")


class ControlError(MobagentError, ValueError):
    pass


def _text(req: dict[str, Any], key: str, max_chars: int, *, required: bool = True) -> str:
    value = req.get(key, "")
    if not isinstance(value, str):
        raise ControlError(f"{key} must be text")
    if required and not value.strip():
        raise ControlError(f"{key} is empty")
    if len(value) > max_chars:
        raise ControlError(f"{key} has {len(value)} characters; the limit is {max_chars}")
    return value.strip()


def _phone(req: dict[str, Any], state: FleetState) -> str:
    serial = req.get("serial")
    if not isinstance(serial, str) or not serial:
        raise ControlError("no phone named")
    try:
        topics.check_name(serial)
    except topics.TopicError as exc:
        raise ControlError(str(exc)) from None
    if serial not in state.phones:
        raise ControlError(f"no phone {serial!r} on the bus")
    return serial


def control_message(req: dict[str, Any], state: FleetState, *,
                    max_chars: int = 2000) -> tuple[str, Msg]:
    kind = req.get("type")
    if kind not in KINDS:
        raise ControlError(f"unknown control {kind!r}; expected one of {', '.join(KINDS)}")
    if kind == "submit":
        text = _text(req, "text", max_chars)
        ident = uuid.uuid4().hex
        if not req.get("serial"):  # the fleet: the first free phone takes it
            return topics.fleet_instructions(), Instruction(id=ident, text=text,
                                                            correlation_id=ident)
        serial = _phone(req, state)
        return topics.device_instructions(serial), Instruction(
            id=ident, text=text, device=serial, correlation_id=ident)
    serial = _phone(req, state)
    tile = state.phones[serial].tile
    ids: dict[str, Any] = {"device": serial, "episode_id": tile.episode_id}
    msg: Msg
    if kind == "cancel":
        if tile.status not in ("busy", "waiting"):
            raise ControlError(f"{serial} runs no episode")
        msg = Cancel(reason=_text(req, "reason", max_chars, required=False)
                     or "cancelled from the dashboard", **ids)
    elif kind == "steer":
        msg = Steer(text=_text(req, "text", max_chars), **ids)
    elif kind == "approve":
        approved = req.get("approved")
        if not isinstance(approved, bool):
            raise ControlError("approved must be true or false")
        msg = Approve(approved=approved, note=_text(req, "note", max_chars, required=False),
                      **ids)
    else:
        msg = Answer(text=_text(req, "text", max_chars), **ids)
    return topics.device_control(serial), msg
