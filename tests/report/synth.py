"""Synthetic but realistic episodes: real PNG screens and the messages one step publishes."""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from protocol.messages import (
    ActionDone,
    Ambiguous,
    Box,
    Candidate,
    EpisodeFinished,
    EpisodeStarted,
    Frame,
    Grounded,
    GroundRequest,
    LlmUsage,
    Message,
    Plan,
    Reflection,
    StepTiming,
)
from protocol.operations import ClickText, Operation, Stop

W, H = 540, 960
ROW_H = 96
ROW_TOP = 160


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    for path in ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                 "/usr/share/fonts/truetype/roboto/unhinted/RobotoTTF/Roboto-Regular.ttf"):
        try:
            return ImageFont.truetype(path, size)
        except OSError:
            continue
    return ImageFont.load_default()


def row_box(i: int) -> Box:
    top = ROW_TOP + i * ROW_H
    return Box(24, top + 12, W - 24, top + ROW_H - 12)


def screen_png(title: str, rows: list[str], accent: tuple[int, int, int], fmt: str = "PNG") -> bytes:
    """A phone-like screen: status bar, app bar with ``title``, a list of ``rows``."""
    img = Image.new("RGB", (W, H), (250, 250, 250))
    d = ImageDraw.Draw(img)
    d.rectangle((0, 0, W, 40), fill=(30, 30, 30))
    d.text((16, 10), "12:30", fill=(255, 255, 255), font=_font(18))
    d.rectangle((0, 40, W, 140), fill=accent)
    d.text((24, 72), title, fill=(255, 255, 255), font=_font(34))
    for i, label in enumerate(rows):
        b = row_box(i)
        d.rounded_rectangle((b.left, b.top, b.right, b.bottom), radius=10, fill=(235, 238, 242))
        d.ellipse((b.left + 16, b.top + 16, b.left + 56, b.top + 56), fill=accent)
        d.text((b.left + 76, b.top + 20), label, fill=(20, 20, 20), font=_font(28))
    buf = io.BytesIO()
    img.save(buf, fmt)
    return buf.getvalue()


@dataclass
class EpisodeSpec:
    episode_id: str
    device: str
    instruction: str
    steps: int  # steps before the final Stop step
    status: str = "succeeded"
    ambiguous_step: int | None = None  # a step whose grounding is Ambiguous first
    thought: str = "The target is visible; tap it."
    base_ts: float = 1_780_000_000.0


ROWS = ["Network & internet", "Connected devices", "Apps", "Battery", "Display", "Sound"]
COLORS = [(25, 103, 210), (0, 121, 107), (142, 36, 170), (230, 81, 0), (84, 110, 122)]


def episode_messages(spec: EpisodeSpec) -> list[Message]:
    """Every event of one episode, in the order the actors would publish them."""
    ids: dict[str, Any] = {"device": spec.device, "episode_id": spec.episode_id}
    ts = spec.base_ts
    out: list[Message] = [EpisodeStarted(instruction_id=f"i-{spec.episode_id}",
                                         text=spec.instruction, task="settings-wifi", step=0,
                                         ts=ts, **ids)]
    total = spec.steps + 1
    for n in range(1, total + 1):
        last = n == total
        ts += 1.0
        png = screen_png(f"Screen {n}", ROWS, COLORS[n % len(COLORS)])
        fid = f"{spec.device}-f{n}"
        out.append(Frame(frame_id=fid, sha256=hashlib.sha256(png).hexdigest(), width=W, height=H,
                         format="png", data=png, step=n, ts=ts, **ids))
        out.append(LlmUsage(model="gpt-4o", prompt_tokens=1200 + n, completion_tokens=80,
                            latency_s=1.4, purpose="plan", step=n, ts=ts + 0.1, **ids))
        target = ROWS[(n - 1) % len(ROWS)]
        op: Operation = Stop() if last else ClickText(text=target)
        action = "Stop" if last else f"Click text ({target})"
        out.append(Plan(observation=f"Screen {n} lists {len(ROWS)} settings.",
                        thought=spec.thought, action=action, operation=op, step=n,
                        ts=ts + 0.2, **ids))
        x = y = None
        if not last:
            box = row_box((n - 1) % len(ROWS))
            out.append(GroundRequest(frame_id=fid, operation=op, step=n, ts=ts + 0.21, **ids))
            if spec.ambiguous_step == n:
                cands = [Candidate(1, row_box(0), ROWS[0]), Candidate(2, row_box(1), ROWS[1])]
                marked = screen_png("Which one?", ROWS[:2], (120, 120, 120), fmt="JPEG")
                out.append(Ambiguous(frame_id=fid, candidates=cands, marked_image=marked,
                                     image_format="jpeg", step=n, ts=ts + 0.3, **ids))
                out.append(LlmUsage(model="gpt-4o", prompt_tokens=600, completion_tokens=5,
                                    latency_s=0.8, purpose="choose", step=n, ts=ts + 0.35, **ids))
            x, y = box.center
            out.append(Grounded(frame_id=fid, x=x, y=y, box=box, source="ocr", score=0.97,
                                step=n, ts=ts + 0.4, **ids))
        out.append(ActionDone(operation=op, ok=True, x=x, y=y, duration_s=0.12, step=n,
                              ts=ts + 0.5, **ids))
        out.append(Reflection(verdict="complete" if last else "ok",
                              reason="the instruction is done" if last else "", step=n,
                              ts=ts + 0.6, **ids))
        out.append(StepTiming(phases={"capture": 0.08, "perception": 0.3, "plan": 1.4,
                                      "act": 0.12, "reflect": 0.05},
                              total_s=1.95, step=n, ts=ts + 0.7, **ids))
    out.append(EpisodeFinished(instruction_id=f"i-{spec.episode_id}", status=spec.status,  # type: ignore[arg-type]
                               reason="done" if spec.status == "succeeded" else "gave up",
                               steps=total, step=total, ts=ts + 1.0, **ids))
    return out


def images_in(msgs: list[Message]) -> int:
    """How many images the recorder writes for ``msgs`` (frames plus marked images)."""
    return sum(1 for m in msgs if isinstance(m, Frame)
               or (isinstance(m, Ambiguous) and m.marked_image))
