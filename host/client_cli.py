"""``mobagent submit`` and ``mobagent watch``: a client of a running host, over the bus.

``submit`` publishes an instruction and waits for its episode's outcome; ``watch`` prints
the event stream, one human line (or JSON object) per event.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import Any

import anyio

from host.host_runtime import instruction_problem
from protocol.messages import (
    CODEC,
    DeviceStatus,
    EpisodeFinished,
    EpisodeStarted,
    Error,
    HostStatus,
    Instruction,
    Msg,
)
from recording.events import event_json, human_line
from runtime import topics
from runtime.broker import configured_address
from runtime.bus import Bus
from runtime.cli import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    positive,
    prepare,
    run_until_signalled,
    whole_number,
)
from runtime.config import RuntimeConfig

# ---- submit ------------------------------------------------------------------------------


def _client_bus(cfg: RuntimeConfig, prefix: str) -> Bus:
    return Bus(
        cfg.bus, configured_address(cfg), client_id=f"{prefix}-{uuid.uuid4().hex[:10]}",
        persistent=False, max_payload_bytes=cfg.limits.max_payload_bytes, codec=CODEC,
    )


async def submit(
    cfg: RuntimeConfig, serial: str, text: str, *, instruction_id: str, task: str | None,
    timeout_s: float, as_json: bool, out: Any = None,
) -> int:
    out = out or sys.stdout
    instr = Instruction(
        id=instruction_id, text=text, task=task, device=serial, correlation_id=instruction_id
    )
    async with _client_bus(cfg, "mobagent-submit") as bus:
        await bus.subscribe(topics.device_events_filter(serial, "episode_started"))
        await bus.subscribe(topics.device_events_filter(serial, "episode_finished"))
        await bus.subscribe(topics.device_events_filter(serial, "error"))
        await bus.publish(topics.device_instructions(serial), instr)
        print(f"submitted {instruction_id} to {serial}", file=sys.stderr)
        with anyio.move_on_after(timeout_s):
            async for topic, msg in bus.messages():
                if not _about(msg, instruction_id):
                    continue
                if isinstance(msg, EpisodeStarted):
                    print(human_line(topic, msg), file=sys.stderr)
                    continue
                print(event_json(topic, msg) if as_json else human_line(topic, msg), file=out)
                if isinstance(msg, EpisodeFinished):
                    return EXIT_OK if msg.status == "succeeded" else EXIT_FAIL
                return EXIT_FAIL  # an Error about our instruction (refused, ...)
    print(f"no outcome for {instruction_id} within {timeout_s:g}s "
          f"(is `mobagent serve` running with a device {serial!r}?)", file=sys.stderr)
    return EXIT_TIMEOUT


def _about(msg: Msg, instruction_id: str) -> bool:
    if isinstance(msg, EpisodeStarted | EpisodeFinished):
        return msg.instruction_id == instruction_id
    return isinstance(msg, Error) and msg.correlation_id == instruction_id


def cmd_submit(args: argparse.Namespace) -> int:
    cfg = prepare(args, RuntimeConfig, quiet=True)
    try:
        topics.check_name(args.device, "device")
    except topics.TopicError as exc:
        print(f"mobagent submit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    problem = instruction_problem(args.instruction, max_chars=cfg.limits.max_instruction_chars)
    if problem is not None:
        print(f"mobagent submit: {problem}", file=sys.stderr)
        return EXIT_USAGE
    return run_until_signalled(lambda: submit(
        cfg, args.device, args.instruction, instruction_id=args.id or uuid.uuid4().hex,
        task=args.task, timeout_s=args.timeout, as_json=args.json,
    ))


# ---- watch -------------------------------------------------------------------------------


async def watch(
    cfg: RuntimeConfig, serial: str | None, *, as_json: bool, count: int | None,
    timeout_s: float | None, out: Any = None,
) -> int:
    out = out or sys.stdout
    seen = 0
    async with _client_bus(cfg, "mobagent-watch") as bus:
        await bus.subscribe(topics.device_events_filter(serial))
        await bus.subscribe(topics.device_status(serial) if serial
                            else topics.all_device_status_filter())
        if serial is None:
            await bus.subscribe(topics.host_events_filter())
            await bus.subscribe(topics.all_host_status_filter())
        with anyio.move_on_after(timeout_s if timeout_s is not None else float("inf")):
            async for topic, msg in bus.messages():
                if as_json:
                    line = event_json(topic, msg)
                elif isinstance(msg, DeviceStatus | HostStatus):
                    who = msg.host if isinstance(msg, HostStatus) else topics.serial_of(topic)
                    line = f"status {who}: {msg.state}"
                else:
                    line = human_line(topic, msg)
                print(line, file=out, flush=True)
                seen += 1
                if count is not None and seen >= count:
                    return EXIT_OK
    return EXIT_OK if count is None else EXIT_TIMEOUT


def cmd_watch(args: argparse.Namespace) -> int:
    cfg = prepare(args, RuntimeConfig, quiet=True)
    if args.device is not None:
        try:
            topics.check_name(args.device, "device")
        except topics.TopicError as exc:
            print(f"mobagent watch: {exc}", file=sys.stderr)
            return EXIT_USAGE
    return run_until_signalled(lambda: watch(
        cfg, args.device, as_json=args.json, count=args.count, timeout_s=args.timeout,
    ))




def register_submit(sub: Any) -> None:
    p = sub.add_parser("submit", help="send an instruction to a phone and wait for the outcome",
                       description="Publish an instruction and print the episode's outcome.")
    p.add_argument("device", help="the phone's serial")
    p.add_argument("instruction", help="what to do, in plain words")
    p.add_argument("--id", help="instruction id (default: random); resubmitting an id is a no-op")
    p.add_argument("--task", help="evaluation task id this instruction belongs to")
    p.add_argument("--timeout", type=positive, default=600.0, metavar="SECONDS",
                   help="give up waiting after this long (default 600)")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.set_defaults(func=cmd_submit)


def register_watch(sub: Any) -> None:
    p = sub.add_parser("watch", help="tail the event stream",
                       description="Print events as they happen, for one phone or all.")
    p.add_argument("device", nargs="?", help="only this phone's events")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--count", type=whole_number(1, what="count"), help="exit after this many events")
    p.add_argument("--timeout", type=positive, metavar="SECONDS", help="exit after this long")
    p.set_defaults(func=cmd_watch)


