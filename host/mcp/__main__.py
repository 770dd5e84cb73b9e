"""``python -m host.mcp [options]``: ``mobagent mcp`` without the console script (an MCP
client's config can start it this way from a checkout whose install predates the command).
The options are ``mobagent``'s global ones and ``mobagent mcp``'s, in any order."""

from __future__ import annotations

import argparse
import sys

from host.mcp.cli import DESCRIPTION, add_arguments
from runtime.cli import EXIT_USAGE, ConfigError, add_global_options


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m host.mcp", description=DESCRIPTION)
    add_global_options(parser)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"mobagent: config error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
