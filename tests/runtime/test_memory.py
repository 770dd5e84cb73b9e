"""runtime/memory.py: glibc's malloc is told to return large freed blocks, unless the user
tunes it already."""

from __future__ import annotations

import platform

import pytest

from runtime.memory import bound_malloc


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_glibc_takes_the_bounds() -> None:
    assert bound_malloc() is True


@pytest.mark.parametrize("var, value", [("MOBAGENT_MALLOC", "default"),
                                        ("MALLOC_ARENA_MAX", "4"),
                                        ("MALLOC_MMAP_THRESHOLD_", "65536")])
def test_the_environment_keeps_its_own_settings(monkeypatch: pytest.MonkeyPatch, var: str,
                                               value: str) -> None:
    monkeypatch.setenv(var, value)
    assert bound_malloc() is False
