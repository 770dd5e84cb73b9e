"""Fixtures for the recorder/report tests: record messages through the real Actor API,
and open a page in real headless Chromium."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from protocol.messages import Message, Msg
from recording.recorder import Recorder
from runtime import topics
from runtime.actor import Router
from runtime.log import Redactor

CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)


class NullBus:
    """The recorder publishes nothing but its own errors; those land here."""

    def __init__(self) -> None:
        self.published: list[tuple[str, Msg]] = []

    async def publish(self, topic: str, msg: Msg, *, qos: int = 1, retain: bool = False) -> None:
        self.published.append((topic, msg))


async def record(
    out_dir: Path, msgs: Sequence[Message], *, redact: Redactor | None = None,
    serial: str | None = None,
) -> Recorder:
    """Route ``msgs`` (on their event topics) through a Router into a running Recorder."""
    recorder = Recorder(NullBus(), out_dir, serial, redact=redact or Redactor())
    router = Router(buffer=len(msgs) + 1)
    inbox = router.attach(recorder)
    async with anyio.create_task_group() as tg:
        tg.start_soon(recorder.run, inbox)
        for m in msgs:
            await router.dispatch(topics.device_event(m.device or "nodev", m), m)
        router.close()
    assert recorder.failed == 0, recorder.bus.published  # type: ignore[attr-defined]
    return recorder


def record_sync(out_dir: Path, msgs: Sequence[Message], **kw: Any) -> Recorder:
    return anyio.run(functools.partial(record, out_dir, msgs, **kw))


@dataclass
class Page:
    dom: str
    screenshot: Path | None

    def body_attr(self, name: str) -> str | None:
        m = re.search(r"<body\b[^>]*\b" + re.escape(name) + r'="([^"]*)"', self.dom)
        return m.group(1) if m else None


def open_in_chromium(
    page: Path, tmp: Path, *, screenshot: bool = True, size: tuple[int, int] = (1280, 1800)
) -> Page:
    """Load ``page`` in headless Chromium; the DOM after load (and scripts) plus a screenshot."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium); the report test "
                    "needs a real browser")
    shot = tmp / "screenshot.png"
    args = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--hide-scrollbars", f"--user-data-dir={tmp / 'chromium-profile'}",
        "--virtual-time-budget=10000", "--dump-dom",
    ]
    if screenshot:
        args += [f"--screenshot={shot}", f"--window-size={size[0]},{size[1]}"]
    proc = subprocess.run(
        [*args, page.resolve().as_uri()], capture_output=True, timeout=90,
        stdin=subprocess.DEVNULL,
    )
    dom = proc.stdout.decode("utf-8", errors="replace")
    assert proc.returncode == 0 and "<html" in dom, (
        f"chromium failed ({proc.returncode}): {proc.stderr.decode(errors='replace')[-2000:]}"
    )
    return Page(dom=dom, screenshot=shot if screenshot and shot.exists() else None)
