"""Events: every bus message, as a JSON-ready dict, a JSONL file line, or a human line.

Binary fields (frames, marked images) are summarised as their size, never written out,
and secrets are redacted with the logging ``Redactor``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, TextIO

import anyio
import msgspec
import structlog

from protocol.messages import (
    ActionDone,
    Ambiguous,
    EpisodeFinished,
    EpisodeStarted,
    Error,
    Frame,
    Grounded,
    Instruction,
    LlmUsage,
    Msg,
    NotFound,
    Plan,
    Reflection,
    Screen,
    kind_of,
)
from runtime.actor import Actor, Publisher
from runtime.log import Redactor, redactor

log = structlog.get_logger(__name__)
_json = msgspec.json.Encoder()


def _plain(msg: Msg) -> dict[str, Any]:
    """The message as builtins, with every bytes value replaced by ``{"bytes": size}``."""

    def walk(node: Any) -> Any:
        if isinstance(node, bytes):
            return {"bytes": len(node)}
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    out = walk(msgspec.to_builtins(msg, builtin_types=(bytes,)))
    assert isinstance(out, dict)
    return out


def message_event(topic: str, msg: Msg, redact: Redactor | None = None) -> dict[str, Any]:
    """``{"event": kind, "topic": ..., <fields>}`` with bytes summarised and secrets hidden."""
    fields = _plain(msg)
    kind = fields.pop("kind", kind_of(type(msg)))
    event = {"event": kind, "topic": topic, **fields}
    out = (redact or redactor()).value(event)
    assert isinstance(out, dict)
    return out


def event_json(topic: str, msg: Msg, redact: Redactor | None = None) -> str:
    return _json.encode(message_event(topic, msg, redact)).decode()


def _short(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def describe(msg: Msg) -> str:
    """One human line for the message's content (the ``watch`` view)."""
    match msg:
        case Instruction(id=i, text=t):
            return f"instruction {i}: {_short(t)}"
        case EpisodeStarted(instruction_id=i, text=t):
            return f"episode started for {i}: {_short(t)}"
        case EpisodeFinished(instruction_id=i, status=s, steps=n, reason=r, cost_usd=c):
            cost = f", ${c:.4f}" if c > 0 else ""
            return f"episode {s} after {n} steps ({i}){cost}" + (f": {_short(r)}" if r else "")
        case Frame(frame_id=f, width=w, height=h, data=d):
            return f"frame {f} {w}x{h} {len(d)} bytes"
        case Plan(thought=t, action=a):
            return f"plan: {_short(a, 60)} | {_short(t, 60)}"
        case Grounded(x=x, y=y, source=s):
            return f"grounded at ({x}, {y}) by {s or '?'}"
        case Ambiguous(candidates=c):
            return f"ambiguous: {len(c)} candidates"
        case NotFound(query=q, closest=c):
            return f"not found: {_short(q, 40)}; closest {c[:3]}"
        case ActionDone(ok=ok, detail=d):
            return f"action {'done' if ok else 'FAILED'}" + (f": {_short(d)}" if d else "")
        case Reflection(verdict=v, reason=r):
            return f"reflection {v}" + (f": {_short(r)}" if r else "")
        case LlmUsage(purpose=p, model=m, prompt_tokens=pt, completion_tokens=ct,
                      latency_s=lat, cost_usd=cost, cached_tokens=cached):
            cached_note = f" ({cached} cached)" if cached else ""
            return (f"llm {p or 'call'} {m}: {pt}+{ct} tokens{cached_note}, {lat:.2f}s, "
                    f"${cost:.4f}")
        case Error(topic=t, reason=r, detail=d):
            return f"ERROR {r} on {t}" + (f": {_short(d)}" if d else "")
    fields = _plain(msg)
    skip = {"kind", "device", "episode_id", "step", "correlation_id", "ts"}
    rest = ", ".join(f"{k}={v}" for k, v in fields.items() if k not in skip)
    return f"{kind_of(type(msg))} {_short(rest, 100)}"


def human_line(topic: str, msg: Msg, redact: Redactor | None = None) -> str:
    when = dt.datetime.fromtimestamp(msg.ts, dt.UTC).strftime("%H:%M:%S.%f")[:-3]
    where = msg.device or "-"
    step = f" #{msg.step}" if msg.step else ""
    return (redact or redactor()).text(f"{when} {where}{step} {describe(msg)}")


class EventFile:
    """Appends events as JSON lines; writes happen off the event loop."""

    def __init__(self, path: str | Path, redact: Redactor | None = None) -> None:
        self.path = Path(path)
        self.redact = redact
        self._fh: TextIO | None = None

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _write(self, line: str) -> None:
        assert self._fh is not None, "EventFile is not open"
        self._fh.write(line + "\n")
        self._fh.flush()

    async def write(self, topic: str, msg: Msg) -> None:
        await anyio.to_thread.run_sync(self._write, event_json(topic, msg, self.redact))


class EventRecorder(Actor):
    """Mirrors every message under ``filter_`` to an ``EventFile``."""

    name = "event_recorder"

    def __init__(self, bus: Publisher, file: EventFile, filter_: str = "mobagent/v1/#") -> None:
        super().__init__(bus)
        self.file = file
        self.inbox = (filter_,)

    async def handle(self, topic: str, msg: Msg) -> None:
        if isinstance(msg, Screen):
            return  # a small copy of a Frame (recorded itself), made for watchers
        await self.file.write(topic, msg)
