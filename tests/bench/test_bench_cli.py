"""`mobagent bench NAME` finds each benchmark and hands it its own arguments."""

from __future__ import annotations

import pytest

from bench.cli import BENCHMARKS, register
from runtime.cli import build_parser


def test_every_listed_benchmark_has_a_main() -> None:
    import importlib

    for name in BENCHMARKS:
        assert callable(importlib.import_module(f"bench.{name}").main), name


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_bench_passes_its_arguments_through(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["bench", name, "--help"])
    with pytest.raises(SystemExit) as exc:
        args.func(args)
    assert exc.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_unknown_benchmark_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["bench", "nope"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
