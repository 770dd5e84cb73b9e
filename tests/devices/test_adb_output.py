"""devices/adb_output.py against the dev corpus of real adb outputs (tests/data/adb_outputs.toml),
each case with its public source."""

from __future__ import annotations

import io
import tomllib
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from devices import adb_output
from devices.adb_output import AdbOutputError

CORPUS = Path(__file__).resolve().parents[1] / "data" / "adb_outputs.toml"
CASES: list[dict[str, Any]] = tomllib.loads(CORPUS.read_text())["case"]


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (1, 1), (200, 10, 10)).save(out, format="PNG")
    return out.getvalue()


def read(case: dict[str, Any]) -> Any:
    """What the function under test reads from the case's text."""
    fn = case["function"]
    if fn == "png_payload":
        return adb_output.png_payload(case["text"].encode() + _png()) == _png() and "png"
    if fn == "shell_failure":
        got = adb_output.shell_failure(case["text"], case.get("exit_code"))
        return got.kind if got else None
    got = getattr(adb_output, fn)(case["text"])
    return list(got) if isinstance(got, tuple) else got


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_a_real_output_is_read_as_the_phone_meant_it(case: dict[str, Any]) -> None:
    assert case["source"], "every case names its source"
    want = None if case.get("none") else case["expect"]
    if case["function"] == "input_methods" and case.get("none"):
        want = []
    assert read(case) == want


def test_every_function_of_the_surface_has_real_cases() -> None:
    have = {c["function"] for c in CASES}
    assert have == {"foreground_package", "wakefulness", "keyguard_showing", "input_size",
                    "display_ids", "png_payload", "input_methods", "launcher_component",
                    "shell_failure", "keyguard_secure", "rotation"}


@pytest.mark.parametrize("case", [c for c in CASES if c["function"] == "shell_failure"
                                  and not c.get("none")], ids=lambda c: c["id"])
def test_a_failure_names_its_fix_and_never_a_stack_frame(case: dict[str, Any]) -> None:
    got = adb_output.shell_failure(case["text"], case.get("exit_code"))
    assert got is not None and got.hint.endswith(".")
    assert not got.line.lstrip().startswith("at ") and "\tat " not in got.line
    assert len(got.line) <= 300


def test_a_screenshot_without_a_png_is_a_clear_error() -> None:
    with pytest.raises(AdbOutputError, match="no PNG in the screenshot.*Multiple displays"):
        adb_output.png_payload(b"[Warning] Multiple displays were found\n")
    assert adb_output.png_payload(_png()) == _png()


def test_display_ids_keep_every_digit() -> None:
    got = adb_output.display_ids(
        'Display 4619827259835644672 (HWC display 0): port=0 pnpId=GGL displayName="EMU_display_0"')
    assert got == ["4619827259835644672"] and int(got[0]) > 2**53


def test_a_quiet_output_is_no_failure() -> None:
    assert adb_output.shell_failure("", 0) is None
    assert adb_output.shell_failure("Events injected: 1\n", 0) is None
