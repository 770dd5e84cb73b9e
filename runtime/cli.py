"""The ``mobagent`` command line: every command is a plug-in (``serve``, ``submit``, ...).

Other packages add subcommands through the entry-point group ``mobagent.commands``: each
entry point is a callable ``register(subparsers) -> None`` that adds an argparse subparser
and sets ``func=(args) -> int`` with ``set_defaults``; ``host/`` provides
the product's commands. ``prepare``
and ``run_until_signalled`` are the helpers such a command uses. The runtime never imports
them directly. A plug-in command that is missing (a broken install) says so when run.

Exit codes: 0 success, 1 failure (episode failed, broker unreachable, ...), 2 usage or
configuration error, 3 timed out, 130 interrupted.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any, TypeVar

import anyio
import msgspec
import structlog

from runtime.broker import BrokerStartError, configured_address
from runtime.bus import BusError
from runtime.config import (
    ConfigError,
    RuntimeConfig,
    default_config_path,
    load_config,
    secret_values,
)
from runtime.log import configure_logging
from runtime.memory import bound_malloc

log = structlog.get_logger(__name__)

ENTRY_POINT_GROUP = "mobagent.commands"
# Commands other packages provide (entry points); named here so a broken install says so.
PLUGIN_COMMANDS = {
    "serve": "run the host: the fleet with the agent on every phone",
    "submit": "send an instruction to a phone and wait for the outcome",
    "watch": "tail the event stream",
    "sim": "run simulated phones",
    "run": "run one instruction on a phone",
    "bench": "run the benchmarks",
    "report": "render an HTML report of recorded episodes",
    "demo": "the main job on embedded defaults",
    "replay": "re-run a recorded episode's actions on a device",
    "doctor": "check every phone adb lists: ready, or what to fix",
    "devices": "prepare the phones (devices setup --ime-apk FILE)",
    "mcp": "serve the fleet to MCP clients",
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


# ---- the parser --------------------------------------------------------------------------


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {text}")
    return value


def listen_address(text: str) -> str:
    """An argparse ``type`` for ``--bind``: an address to listen on, never empty."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an address to listen on (127.0.0.1, 0.0.0.0, ...), "
                                         "not an empty string")
    return text.strip()


def with_given(settings: S, **given: object) -> S:
    """``settings`` with each option the command line gave (the ones not None)."""
    return msgspec.structs.replace(settings, **{k: v for k, v in given.items() if v is not None})


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


def add_global_options(parser: argparse.ArgumentParser) -> None:
    """``--config``, ``--set``, ``--broker``, ``--log-level``: what every command reads."""
    parser.add_argument("--config", metavar="PATH",
                        help="TOML config (default: $MOBAGENT_CONFIG or configs/default.toml)")
    parser.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", default=[],
                        help="override one config value (repeatable)")
    parser.add_argument("--broker", metavar="URL",
                        help="broker URL, e.g. mqtt://host:1883 (same as --set bus.url=URL)")
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"))


def build_parser(load_plugins: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mobagent",
        description="Drive a fleet of Android phones with vision-based agents over MQTT.",
    )
    add_global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    if load_plugins:
        _load_plugins(sub)
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
    bound_malloc()  # before the threads and buffers: a long-running host's RSS stays flat
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
