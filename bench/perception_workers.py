"""Perception workers (``mobagent perceive``): one against two worker processes, and one
killed mid-run, in the same run.

Starts a private mosquitto, then ``mobagent perceive`` processes on it; a host-side client
sends ``GroundRequest``s (a ``Click text`` on a rendered Notes screen, each frame with one
pixel changed and of another phone, so each costs a whole-frame OCR) that carry their frame, ``--concurrency`` at a
time, the way a host with ``agent.perception = "remote"`` does. Reported: requests per
second with one worker and with two (and their ratio), then a run on two workers where one
is SIGKILLed after a third of the requests were answered: how many were answered, lost
(0 is the target) and re-sent. The last printed line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from actors.capture import pixel_sha
from actors.perception_remote import RemoteTimes
from actors.rpc import ReplyRouter, RequestError, Requests, new_request_id
from devices.codecs import encode_jpeg
from protocol.messages import CODEC, Frame, Grounded, GroundRequest
from protocol.operations import ClickText
from runtime.actor import run_actors
from runtime.bus import Bus, parse_broker_url
from runtime.config import BusConfig

SERIAL = "bench-1"


def screen() -> np.ndarray:
    from sim.phone import SimPhone
    from sim.phone.apps import notes
    from sim.phone_api import DeviceInfo

    phone = SimPhone(DeviceInfo(SERIAL))
    phone.launch(notes.PACKAGE)
    return np.asarray(phone.screenshot().convert("RGB"))


def frames(rgb: np.ndarray, count: int, start: int) -> list[Frame]:
    out = []
    for n in range(start, start + count):
        img = rgb.copy()
        img[-1, -1] = (n % 256, n // 256 % 256, 11)
        sha = pixel_sha(img)
        h, w = img.shape[:2]
        # a phone per frame: a worker re-reads only the band that changed since a phone's
        # previous frame, and here every request is to cost a whole-frame read
        out.append(Frame(device=f"{SERIAL}-{n}", episode_id="bench", step=n, frame_id=f"{sha[:12]}-{n}",
                         sha256=sha, width=w, height=h, format="jpeg",
                         data=encode_jpeg(img, 80)))
    return out


class WorkerProcess:
    """``mobagent perceive`` in its own process; ``ready`` once it logged its subscription."""

    def __init__(self, url: str, name: str) -> None:
        cmd = [sys.executable, "-c", "import sys; from runtime.cli import main; sys.exit(main())",
               "--broker", url, "--set", "perception.ocr.threads=1", "perceive"]
        self.name = name
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.ready = threading.Event()
        self.tail: list[str] = []
        # named, so that a soak can tell the bench's own reader from what the host left
        threading.Thread(target=self._read, name=f"{name}-reader", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.tail = [*self.tail[-20:], line.rstrip()]
            if "perceive_ready" in line:
                self.ready.set()

    async def wait_ready(self, timeout_s: float = 120.0) -> None:
        with anyio.fail_after(timeout_s):
            while not self.ready.is_set():
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited: " + "\n".join(self.tail))
                await anyio.sleep(0.1)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


async def drive(requests: Requests, batch: list[Frame], times: RemoteTimes, concurrency: int,
                *, after_answers: tuple[int, Any] | None = None) -> dict[str, Any]:
    """Ground every frame of ``batch``; ``after_answers`` = (n, fn): call fn once n answered."""
    answered: dict[str, int] = {}  # frame id -> the x it was grounded at
    failed: list[str] = []
    slots = anyio.Semaphore(concurrency)

    async def one(frame: Frame) -> None:
        async with slots:
            req = GroundRequest(device=frame.device, episode_id="bench", step=frame.step,
                                frame_id=frame.frame_id, operation=ClickText(text="Notes"),
                                request_id=new_request_id(), frame=frame)
            try:
                got = await requests.call(req, timeout_s=times.timeout_s, expect=(Grounded,),
                                          resend_after_s=times.resend_after_s)
            except RequestError as exc:
                failed.append(str(exc))
                return
            assert isinstance(got, Grounded)
            answered[frame.frame_id] = got.x
            if after_answers is not None and len(answered) == after_answers[0]:
                after_answers[1]()

    resent0, extra0 = requests.resent, requests.replies.unmatched
    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for frame in batch:
            tg.start_soon(one, frame)
    wall = time.perf_counter() - t0
    return {"requests": len(batch), "answered": len(answered),
            "mis_grounded": sum(1 for x in answered.values() if x != next(iter(answered.values()))),
            # answers nobody waited for any more: a re-sent request served twice (ignored)
            "extra_answers": requests.replies.unmatched - extra0,
            "lost": len(batch) - len(answered), "failed": failed[:3],
            "resent": requests.resent - resent0, "wall_s": round(wall, 2),
            "requests_per_s": round(len(answered) / wall, 2) if wall > 0 else 0.0}


async def run(url: str, count: int, concurrency: int, resend_s: float) -> dict[str, Any]:
    rgb = screen()
    batches = [frames(rgb, count, k * count) for k in range(4)]  # each run its own frames
    patient = RemoteTimes(timeout_s=120.0, resend_after_s=100.0)  # no re-send: pure speed
    kill_times = RemoteTimes(timeout_s=120.0, resend_after_s=resend_s)
    cfg = BusConfig(connect_timeout_s=10.0, publish_timeout_s=10.0)
    out: dict[str, Any] = {}
    workers: list[WorkerProcess] = []
    async with Bus(cfg, parse_broker_url(url), client_id=f"bench-host-{os.getpid()}",
                   persistent=False, codec=CODEC) as bus, anyio.create_task_group() as tg:
        replies = ReplyRouter(bus)
        requests = Requests(bus, replies)
        await tg.start(run_actors, bus, [replies])
        try:
            workers.append(WorkerProcess(url, "worker-1"))
            await workers[0].wait_ready()
            await drive(requests, batches[0][:4], patient, concurrency)  # warm-up
            out["one_worker"] = await drive(requests, batches[0][4:], patient, concurrency)
            workers.append(WorkerProcess(url, "worker-2"))
            await workers[1].wait_ready()
            await drive(requests, batches[1][:4], patient, concurrency)
            out["two_workers"] = await drive(requests, batches[1][4:], patient, concurrency)
            kill = (count // 3, workers[1].kill)
            out["two_workers_one_killed"] = await drive(requests, batches[2], kill_times,
                                                        concurrency, after_answers=kill)
        finally:
            for w in workers:
                w.stop()
        tg.cancel_scope.cancel()
    one, two = out["one_worker"]["requests_per_s"], out["two_workers"]["requests_per_s"]
    out["ratio_two_to_one"] = round(two / one, 2) if one else 0.0
    out["resend_after_s"] = resend_s
    out["concurrency"] = concurrency
    out["cpus"] = os.cpu_count()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--url", help="use this MQTT 5 broker instead of a private mosquitto")
    ap.add_argument("--requests", type=int, default=24, help="requests per run (after warm-up)")
    ap.add_argument("--concurrency", type=int, default=8, help="requests in flight at once")
    ap.add_argument("--resend-s", type=float, default=3.0,
                    help="the killed run's per-try timeout (agent.perception_resend_s)")
    ap.add_argument("--out", type=Path, default=Path("out/bench/perception_workers.json"))
    args = ap.parse_args(argv)
    broker = None
    url = args.url
    if not url:
        from bench.mosquitto import MOSQUITTO, MosquittoBroker, free_port

        if MOSQUITTO is None:
            print("bench.perception_workers: mosquitto is not installed (or pass --url)",
                  file=sys.stderr)
            return 2
        broker = MosquittoBroker(workdir=Path(tempfile.mkdtemp(prefix="bench-mosquitto-")),
                                 port=free_port())
        broker.start()
        url = broker.url
    try:
        results = anyio.run(run, url, max(6, args.requests + 4), max(1, args.concurrency),
                            args.resend_s)
    finally:
        if broker is not None:
            broker.remove()  # its temporary workdir too
    for name in ("one_worker", "two_workers", "two_workers_one_killed"):
        r = results[name]
        print(f"{name:24} {r['answered']:3}/{r['requests']:<3} answered  lost {r['lost']}  "
              f"extra answers {r['extra_answers']}  resent {r['resent']:3}  {r['requests_per_s']:6.2f} "
              f"req/s  ({r['wall_s']} s)")
    print(f"two workers / one: {results['ratio_two_to_one']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
