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


# ---- outputs quoted by other tools, and failures of no known kind -------------------------

# How tools quote adb's output (each seen in the corpus's sources): a Markdown quote, Appium's
# [debug] [ADB] tags, Python logging, a timestamped log, logcat's threadtime header, CRLF,
# ANSI colours, and a log that printed the string's repr (escaped newlines).
QUOTINGS = {
    "markdown": lambda text: "\n".join("> " + line for line in text.split("\n")),
    "appium": lambda text: "\n".join("[debug] [ADB] " + line for line in text.split("\n")),
    "python-logging": lambda text: "\n".join("DEBUG:adbutils:" + line for line in text.split("\n")),
    "timestamped": lambda text: "\n".join(f"2024-05-01 10:00:{i % 60:02d},123 INFO Main - {line}"
                                          for i, line in enumerate(text.split("\n"))),
    "logcat": lambda text: "\n".join("05-01 10:00:00.123  1234  1234 I adb     : " + line
                                     for line in text.split("\n")),
    "crlf": lambda text: text.replace("\n", "\r\n"),
    "ansi": lambda text: "\n".join(f"\x1b[32m{line}\x1b[0m" for line in text.split("\n")),
    "repr": lambda text: text.replace("\n", "\\n").replace("\t", "\\t"),
}
TEXT_CASES = [c for c in CASES if c["function"] != "png_payload" and "\\" not in c["text"]]


@pytest.mark.parametrize("quoting", sorted(QUOTINGS))
def test_a_quoted_output_reads_as_the_phone_printed_it(quoting: str) -> None:
    """Every real output of the corpus, quoted as another tool quotes it, reads the same."""
    quote = QUOTINGS[quoting]
    changed = [c["id"] for c in TEXT_CASES
               if read({**c, "text": quote(c["text"])}) != read(c)]
    assert changed == []


def test_printed_leaves_what_the_phone_printed_alone() -> None:
    by_id = {c["id"]: c for c in CASES}
    for name in ("window-a13-window-blocks-no-focus-line", "power-full-awake", "resolve-activity-full",
                 "activities-resumed-old-watch", "trust-device-locked", "input-xiaomi-a10-inject-events",
                 "input-help-unknown-command-usage"):
        assert adb_output.printed(by_id[name]["text"]) == by_id[name]["text"], name
    listing = "[ro.product.model]: [Pixel 8]\n[ro.build.version.sdk]: [34]\n"
    assert adb_output.printed(listing) == listing


@pytest.mark.parametrize("case", TEXT_CASES, ids=[c["id"] for c in TEXT_CASES])
def test_a_failed_command_is_a_failure_with_its_text(case: dict[str, Any]) -> None:
    """Whatever a failed command printed (here: every real output of the corpus, as if its
    command had exited 1), it comes back as a failure whose line is from that text."""
    got = adb_output.shell_failure(case["text"], 1)
    assert got is not None and got.hint.endswith(".") and len(got.line) <= 300
    assert got.line in adb_output.printed(case["text"]) or got.line == "exit 1 with no output"
    assert not got.line.startswith("at ")


def test_an_unknown_failure_is_kind_unknown_with_its_line() -> None:
    by_id = {c["id"]: c for c in CASES}
    got = adb_output.shell_failure(by_id["am-startservice-not-found"]["text"], 0)
    assert got is not None and got.kind == "unknown"
    assert got.line == "Error: Not found; no service started."
    got = adb_output.shell_failure(by_id["pm-grant-unknown-permission-a12"]["text"], 255)
    assert got is not None and got.kind == "unknown"
    assert got.line.startswith("java.lang.IllegalArgumentException: Unknown permission")
    assert adb_output.shell_failure("", 137) == adb_output.ShellFailure(
        "unknown", adb_output.UNKNOWN_HINT, "exit 137 with no output")
