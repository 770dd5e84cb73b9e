"""The ``mobagent`` command line: serve | submit | watch, plus plug-in commands.

Other packages add subcommands through the entry-point group ``mobagent.commands``: each
entry point is a callable ``register(subparsers) -> None`` that adds an argparse subparser
and sets ``func=(args) -> int`` with ``set_defaults``; it may replace a built-in command:
the agent's ``serve`` (actors/serve.py: the fleet with the agent on every phone) replaces
the bare host runtime here, which it still runs for ``serve --runtime-only``. ``prepare``
and ``run_until_signalled`` are the helpers such a command uses. The runtime never imports
them directly. A plug-in command that is missing (a broken install) says so when run.

Exit codes: 0 success, 1 failure (episode failed, broker unreachable, ...), 2 usage or
configuration error, 3 timed out, 130 interrupted.
"""

from __future__ import annotations

import argparse
import signal
import sys
import uuid
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any, TypeVar

import anyio
import msgspec
import structlog

from runtime import topics
from runtime.broker import BrokerStartError, configured_address
from runtime.bus import Bus, BusError
from runtime.config import (
    ConfigError,
    RuntimeConfig,
    default_config_path,
    load_config,
    secret_values,
)
from runtime.events import event_json, human_line
from runtime.log import configure_logging
from runtime.messages import (
    DeviceStatus,
    EpisodeFinished,
    EpisodeStarted,
    Error,
    HostStatus,
    Instruction,
    Message,
)

log = structlog.get_logger(__name__)

ENTRY_POINT_GROUP = "mobagent.commands"
# Commands other packages provide (entry points); named here so a broken install says so.
PLUGIN_COMMANDS = {
    "sim": "run simulated phones",
    "run": "run one instruction on a phone",
    "bench": "run the benchmarks",
    "report": "render an HTML report of recorded episodes",
    "demo": "the main job on embedded defaults",
    "replay": "re-run a recorded episode's actions on a device",
}
EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

S = TypeVar("S", bound=msgspec.Struct)


def config_from_args(args: argparse.Namespace, schema: type[S], **kw: Any) -> S:
    """Load ``schema`` the way every command does: --config (or the default), env, --set."""
    path = getattr(args, "config", None) or default_config_path()
    overrides = list(getattr(args, "set", None) or [])
    if getattr(args, "broker", None):
        overrides.append(f"bus.url={args.broker}")
    return load_config(path, schema, overrides=overrides, **kw)


R = TypeVar("R", bound=RuntimeConfig)


def prepare(args: argparse.Namespace, schema: type[R], *, quiet: bool = False) -> R:
    """What every command does first: load ``schema`` (other packages' sections are skipped
    unless ``schema`` knows them), set up logging with its secrets redacted, check bus.url."""
    cfg = config_from_args(args, schema, unknown_sections="ignore")
    log_cfg = cfg.log
    if getattr(args, "log_level", None):
        log_cfg = msgspec.structs.replace(log_cfg, level=args.log_level)
    elif quiet and log_cfg.level in ("debug", "info"):
        log_cfg = msgspec.structs.replace(log_cfg, level="warning")
    configure_logging(log_cfg, secret_values(cfg))
    configured_address(cfg)  # a bad bus.url is a config error now, not a crash later
    return cfg


def run_until_signalled(fn: Callable[[], Any], interrupted: int = EXIT_INTERRUPTED) -> int:
    """Run ``fn`` until done or SIGINT/SIGTERM (which cancel it cleanly: exit ``interrupted``)."""
    result: list[int] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            async def on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for _ in signals:
                        result.append(interrupted)
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(on_signal)
            result.append(await fn())
            tg.cancel_scope.cancel()

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        return interrupted
    except BaseExceptionGroup as group:
        # Task groups wrap errors; an expected one (broker down, ...) is a message, not a trace.
        expected = (BusError, BrokerStartError, ConfigError, OSError)
        rest = group.split(expected)[1]
        if rest is not None:
            raise
        for exc in _leaves(group):
            print(f"mobagent: {exc}", file=sys.stderr)
        return EXIT_FAIL
    return result[0] if result else interrupted


# The names other packages imported before these helpers were public; kept working.
_run_async = run_until_signalled


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


# ---- serve -------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    from runtime.host import serve

    cfg = prepare(args, RuntimeConfig)
    return run_until_signalled(lambda: serve(cfg), interrupted=EXIT_OK)  # a stop request is not a failure


# ---- submit ------------------------------------------------------------------------------


def _client_bus(cfg: RuntimeConfig, prefix: str) -> Bus:
    return Bus(
        cfg.bus, configured_address(cfg), client_id=f"{prefix}-{uuid.uuid4().hex[:10]}",
        persistent=False, max_payload_bytes=cfg.limits.max_payload_bytes,
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


def _about(msg: Message, instruction_id: str) -> bool:
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
    if not args.instruction.strip():
        print("mobagent submit: the instruction is empty", file=sys.stderr)
        return EXIT_USAGE
    if len(args.instruction) > cfg.limits.max_instruction_chars:
        print(f"mobagent submit: the instruction has {len(args.instruction)} characters; "
              f"the limit is {cfg.limits.max_instruction_chars}", file=sys.stderr)
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


# ---- the parser --------------------------------------------------------------------------


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {text}")
    return value


def whole_number(low: int, high: int | None = None, what: str = "") -> Callable[[str], int]:
    """An argparse ``type``: a whole number from ``low`` to ``high`` (no upper bound: None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"{what or 'it'} must be {bound}, not {value}")
        return value

    return parse


def _not_installed(name: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        print(f"mobagent {name}: this command's package is not installed or failed to load "
              "(reinstall with `pip install -e .`, see the message above)", file=sys.stderr)
        return EXIT_USAGE

    return run


SubParsers = argparse._SubParsersAction  # the type argparse gives add_subparsers


def _add_submit(sub: SubParsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("submit", help="send an instruction to a phone and wait for the outcome",
                       description="Publish an instruction and print the episode's outcome.")
    p.add_argument("device", help="the phone's serial")
    p.add_argument("instruction", help="what to do, in plain words")
    p.add_argument("--id", help="instruction id (default: random); resubmitting an id is a no-op")
    p.add_argument("--task", help="evaluation task id this instruction belongs to")
    p.add_argument("--timeout", type=_positive, default=600.0, metavar="SECONDS",
                   help="give up waiting after this long (default 600)")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.set_defaults(func=cmd_submit)


def _add_watch(sub: SubParsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("watch", help="tail the event stream",
                       description="Print events as they happen, for one phone or all.")
    p.add_argument("device", nargs="?", help="only this phone's events")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--count", type=whole_number(1, what="count"), help="exit after this many events")
    p.add_argument("--timeout", type=_positive, metavar="SECONDS", help="exit after this long")
    p.set_defaults(func=cmd_watch)


def build_parser(load_plugins: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mobagent",
        description="Drive a fleet of Android phones with vision-based agents over MQTT.",
    )
    parser.add_argument("--config", metavar="PATH",
                        help="TOML config (default: $MOBAGENT_CONFIG or configs/default.toml)")
    parser.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", default=[],
                        help="override one config value (repeatable)")
    parser.add_argument("--broker", metavar="URL",
                        help="broker URL, e.g. mqtt://host:1883 (same as --set bus.url=URL)")
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # Plug-ins first: one may replace a built-in (the fleet's ``serve`` replaces the bare one).
    if load_plugins:
        _load_plugins(sub)
    if "serve" not in sub.choices:  # no agent plug-in (actors/serve.py): the bare runtime
        p = sub.add_parser("serve", help="run the host runtime (embedded broker unless bus.url is set)",
                           description="Run the host runtime until interrupted.")
        p.add_argument("--runtime-only", action="store_true",
                       help="the host runtime alone (what this build's serve always is)")
        p.set_defaults(func=cmd_serve)
    if "submit" not in sub.choices:
        _add_submit(sub)
    if "watch" not in sub.choices:
        _add_watch(sub)
    for name, help_ in PLUGIN_COMMANDS.items():
        if name not in sub.choices:
            q = sub.add_parser(name, help=f"{help_} (not installed)")
            q.set_defaults(func=_not_installed(name))
    return parser


def _load_plugins(sub: SubParsers[argparse.ArgumentParser]) -> None:
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in sub.choices:
            continue
        try:
            register = ep.load()
            register(sub)
        except Exception as exc:  # a broken plug-in must not break the other commands
            print(f"mobagent: command {ep.name!r} could not be loaded: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"mobagent: config error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (BusError, BrokerStartError) as exc:
        print(f"mobagent: {exc}", file=sys.stderr)
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
