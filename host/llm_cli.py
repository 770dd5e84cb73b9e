"""``mobagent llm ...``: commands for when a model misbehaves.

``check`` (host/llm_check.py) calls each configured role once; further subcommands register
here beside it.
"""

from __future__ import annotations

import argparse

from host.llm_check import add_check


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("llm", help="check the configured models",
                       description="Commands for the LLM roles' models.")
    llm_sub = p.add_subparsers(dest="llm_command", metavar="SUBCOMMAND", required=True)
    add_check(llm_sub)
