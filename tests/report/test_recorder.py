"""The recorder: events.jsonl + frames + episode.json, dedupe, disorder, hostile ids."""

from __future__ import annotations

import json
import random
from pathlib import Path

import anyio
import pytest

from protocol.messages import CODEC, Ambiguous, Error, Frame, Plan
from recording.recorder import Recorder, safe_name
from runtime import topics
from runtime.actor import run_actors
from runtime.bus import Bus, parse_broker_url
from runtime.config import BusConfig
from runtime.log import Redactor
from tests.report.conftest import NullBus, record_sync
from tests.report.synth import EpisodeSpec, episode_messages, images_in


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_episode_layout(tmp_path: Path) -> None:
    msgs = episode_messages(EpisodeSpec("ep-a", "dev1", "Turn on Wi-Fi", 3, ambiguous_step=2))
    rec = record_sync(tmp_path, msgs)
    ep = tmp_path / "ep-a"
    events = _lines(ep / "events.jsonl")
    assert len(events) == len(msgs) == rec.recorded
    assert [e["event"] for e in events] == [type(m).__struct_config__.tag for m in msgs]
    frames = [e for e in events if e["event"] == "frame"]
    sent = [m for m in msgs if isinstance(m, Frame)]
    assert len(frames) == len(sent)
    for line, msg in zip(frames, sent, strict=True):
        assert line["data"] == {"bytes": len(msg.data)}  # not inline
        assert line["file"] == f"frames/{msg.step}-{msg.frame_id}.png"
        assert (ep / line["file"]).read_bytes() == msg.data
    amb = next(e for e in events if e["event"] == "ambiguous")
    marked = next(m for m in msgs if isinstance(m, Ambiguous))
    assert amb["marked_file"].endswith("-marked.jpg")
    assert (ep / amb["marked_file"]).read_bytes() == marked.marked_image
    assert len(list((ep / "frames").iterdir())) == images_in(msgs)
    summary = json.loads((ep / "episode.json").read_text())
    assert summary["status"] == "succeeded" and summary["steps"] == 4
    assert summary["instruction"] == "Turn on Wi-Fi" and summary["device"] == "dev1"
    assert summary["tokens"]["calls"] == 5  # 4 plans + 1 choose
    assert summary["tokens"]["prompt"] == sum(1200 + n for n in range(1, 5)) + 600
    assert summary["duration_s"] == pytest.approx(5.0)


def test_duplicates_and_out_of_order(tmp_path: Path) -> None:
    msgs = episode_messages(EpisodeSpec("ep-b", "dev2", "Open Battery", 2))
    noisy = msgs + msgs[::3]  # QoS 1 redeliveries
    random.Random(7).shuffle(noisy)
    rec = record_sync(tmp_path, noisy)
    events = _lines(tmp_path / "ep-b" / "events.jsonl")
    assert len(events) == len(msgs)
    assert rec.duplicates == len(msgs[::3])
    summary = json.loads((tmp_path / "ep-b" / "episode.json").read_text())
    # episode.json counts every event, including those that came after EpisodeFinished
    assert summary["events"] == len(msgs)
    assert summary["instruction"] == "Open Battery" and summary["status"] == "succeeded"


def test_hostile_ids_stay_inside(tmp_path: Path) -> None:
    out = tmp_path / "run"
    frame = Frame(frame_id="../../x/y", sha256="", width=2, height=2, format="png", data=b"\x89PNG",
                  device="d", episode_id="../../../escape", step=1)
    record_sync(out, [frame])
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and all(p.is_relative_to(out) for p in written)
    assert safe_name("../../../escape") != safe_name("__.._.._escape")  # no collisions
    assert safe_name("ep-1") == "ep-1"


def test_secrets_redacted_and_unassigned(tmp_path: Path) -> None:
    secret = "sk-THIS-IS-SECRET-42"
    plan = Plan(observation="o", thought=f"the key is {secret}", action="Back",
                device="d", episode_id="ep-c", step=1)
    stray = Error(topic="t", reason="no episode", device="d")
    streamed = Frame(frame_id="s", sha256="", width=1, height=1, format="png", data=b"x",
                     device="d")
    record_sync(tmp_path, [plan, stray, streamed], redact=Redactor([secret]))
    text = (tmp_path / "ep-c" / "events.jsonl").read_text()
    assert secret not in text and "the key is" in text
    assert _lines(tmp_path / "unassigned.jsonl")[0]["reason"] == "no episode"
    assert not list(tmp_path.rglob("frames"))  # a streamed frame is not written


@pytest.mark.anyio
async def test_through_real_broker(tmp_path: Path, mosquitto) -> None:  # type: ignore[no-untyped-def]
    """The recorder under run_actors on a real mosquitto, with redeliveries and another phone."""
    msgs = episode_messages(EpisodeSpec("ep-live", "phone1", "Open Display", 2))
    other = episode_messages(EpisodeSpec("ep-other", "phone2", "x", 1))
    cfg = BusConfig(url=mosquitto.url)
    addr = parse_broker_url(mosquitto.url)
    async with Bus(cfg, addr, persistent=False, codec=CODEC) as sub, Bus(cfg, addr, persistent=False, codec=CODEC) as pub:
        recorder = Recorder(sub, tmp_path, "phone1", redact=Redactor())
        await sub.subscribe(recorder.inbox[0])  # before publishing; run_actors repeats it
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_actors, sub, [recorder])
            for m in msgs[:5] + other[:3] + msgs + msgs[-3:]:
                topic = topics.device_event(m.device, m)
                await pub.publish(topic, m)
            with anyio.fail_after(20):
                # the recorder has no completion signal; poll its counters
                while recorder.recorded + recorder.duplicates < len(msgs) + 8:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    _check_live(tmp_path, recorder, len(msgs), images_in(msgs))


def _check_live(tmp_path: Path, recorder: Recorder, n_msgs: int, n_images: int) -> None:
    summary = tmp_path / "ep-live" / "episode.json"
    assert recorder.failed == 0
    events = _lines(tmp_path / "ep-live" / "events.jsonl")
    assert len(events) == n_msgs and recorder.duplicates == 8
    assert json.loads(summary.read_text())["status"] == "succeeded"
    assert not (tmp_path / "ep-other").exists()
    assert len(list((tmp_path / "ep-live" / "frames").iterdir())) == n_images


def test_failed_write_is_retried_on_redelivery(tmp_path: Path) -> None:
    msgs = episode_messages(EpisodeSpec("ep-d", "dev", "x", 1))
    frame = next(m for m in msgs if isinstance(m, Frame))
    rec = Recorder(NullBus(), tmp_path, redact=Redactor())
    (tmp_path / "ep-d").write_text("in the way")  # the episode dir cannot be made
    topic = topics.device_event("dev", frame)
    with pytest.raises(OSError):
        anyio.run(rec.handle, topic, frame)
    (tmp_path / "ep-d").unlink()
    anyio.run(rec.handle, topic, frame)  # the redelivery is not mistaken for a duplicate
    assert rec.recorded == 1 and rec.duplicates == 0
    assert len(_lines(tmp_path / "ep-d" / "events.jsonl")) == 1
