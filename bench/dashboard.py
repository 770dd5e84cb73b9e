"""Dashboard load: what ``mobagent dashboard`` costs while N simulated phones stream.

    python bench/dashboard.py --phones 16,32 --browsers 2 --llm-delay 3 --out DIR

The phones and their work are the fleet benchmark's swipes workload (``bench/fleet.py``
``run_n``: N simulated phones speaking real adb in ``--sim-procs`` processes, the agent loop
under the fleet manager, every step's Frame published on the bus, a loopback scripted LLM
after ``--llm-delay``). For each N it runs that workload twice, back to back, on the same
broker (mosquitto when installed, else the embedded one):

1. **without** the dashboard;
2. **with** it open: the dashboard in its own process (``run_dashboard`` as ``mobagent
   dashboard`` runs it, subscribed to the broker) and ``--browsers`` WebSocket clients in a
   third process (the ``websockets`` client, each a browser's feed: it reads and parses
   every message the page would get).

Reported per N: the dashboard process's own CPU seconds per wall second, per minute and per
frame (all its threads, from the first frame's Screen it receives to the last), the frames
each browser got per phone per second while that phone streamed (mean and max; the server
promises at most ``--max-fps``, checked as a count bound over each browser's whole
connection), the frames dropped as stale (a newer frame replaced one still waiting for its
browser), the phones' own frame rate on the bus, and
the fleet's ratio (steps/s over N x one phone's rate at N = 1, measured once first) with and
without the dashboard, and the cost: 1 - ratio_with / ratio_without.

The wall-clock ratio is noisy on a shared machine, so each run also counts the CPU seconds
of the fleet's own processes (this process: the agent loop, the fleet manager, capture and
the scripted LLM; the simulated phones' processes) and of mosquitto, per step: the
dashboard's cost to the fleet is then also 1 - cpu_per_step_without / cpu_per_step_with
turned around (how much more CPU a step takes with it open). ``--repeats R`` runs R
without/with pairs per N, interleaved (each pair back to back, the order alternating pair
by pair: A B B A A B ..., so a drift in the machine's load favours neither), and reports
each cost per pair, their median, mean and a 95 % confidence interval of the mean over the
pairs (Student's t). Writes DIR/dashboard.json; the last printed line is one JSON object,
per N.

The browsers, the dashboard, the phones, mosquitto and the fleet all share this machine's
cores: on a small machine the figures include that contention (say so next to them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402

ROLE_SERVE, ROLE_BROWSERS = "_serve", "_browsers"  # this module's helper processes


def quiet() -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    logging.getLogger("mqtt").setLevel(logging.CRITICAL)


# ---- the dashboard process -------------------------------------------------------------


def serve_main(argv: list[str]) -> int:
    """The dashboard as ``mobagent dashboard`` runs it, its counters printed when stdin says
    stop: first ``{"url": ...}``, then the report."""
    import msgspec

    from host.dashboard.config import DashboardConfig
    from host.dashboard.feed import ClientFeed, Hub
    from host.dashboard.server import Dashboard, run_dashboard
    from protocol.messages import Msg, Screen

    p = argparse.ArgumentParser(prog="bench.dashboard _serve")
    p.add_argument("--broker", required=True)
    p.add_argument("--max-fps", type=float, required=True)
    args = p.parse_args(argv)
    quiet()

    class KeepingHub(Hub):
        """The hub, keeping every feed it made (a closed browser's counters too)."""

        def __init__(self, *a: Any) -> None:
            super().__init__(*a)
            self.made: list[ClientFeed] = []

        def connect(self) -> ClientFeed:
            feed = super().connect()
            self.made.append(feed)
            return feed

    class MeteredDashboard(Dashboard):
        def __init__(self, *a: Any) -> None:
            super().__init__(*a)
            self.hub = self.kept = KeepingHub(self.state, self.settings.max_fps)
            self.frames_in = 0
            self.first: tuple[float, float] | None = None  # (wall, this process's CPU)
            self.last: tuple[float, float] | None = None
            self.per_phone: dict[str, list[Any]] = {}  # serial -> [frames, first, last]

        def apply(self, topic: str, msg: Msg) -> None:
            if isinstance(msg, Screen) and msg.device:  # a frame's small JPEG
                self.frames_in += 1
                self.last = (time.monotonic(), time.process_time())
                self.first = self.first or self.last
                seen = self.per_phone.setdefault(msg.device, [0, self.last[0], 0.0])
                seen[0], seen[2] = seen[0] + 1, self.last[0]
            super().apply(topic, msg)

        def bus_fps_per_phone(self) -> float | None:
            """Each phone's frame rate on the bus while it streamed, the mean over phones."""
            rates = [(k - 1) / (last - first) for k, first, last in self.per_phone.values()
                     if k > 1 and last > first]
            return round(statistics.mean(rates), 3) if rates else None

        def report(self) -> dict[str, Any]:
            wall = cpu = 0.0
            if self.first and self.last:
                wall, cpu = self.last[0] - self.first[0], self.last[1] - self.first[1]
            return {"frames_in": self.frames_in, "window_s": round(wall, 3),
                    "cpu_s": round(cpu, 3),
                    "cpu_s_per_s": round(cpu / wall, 4) if wall > 0 else None,
                    "frames_sent": sum(f.frames.sent for f in self.kept.made),
                    "frames_dropped_stale": sum(f.frames.dropped for f in self.kept.made),
                    "feeds": len(self.kept.made), "bus_fps_per_phone": self.bus_fps_per_phone()}

    async def go() -> None:
        cfg = DashboardConfig()
        cfg = msgspec.structs.replace(cfg, bus=msgspec.structs.replace(cfg.bus, url=args.broker))
        settings = msgspec.structs.replace(cfg.dashboard, port=0, bind="127.0.0.1",
                                           max_fps=args.max_fps)
        dash = MeteredDashboard(settings)
        async with anyio.create_task_group() as tg:
            url = await tg.start(lambda task_status: run_dashboard(
                cfg, settings, dashboard=dash, task_status=task_status))
            print(json.dumps({"url": url}), flush=True)
            await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            tg.cancel_scope.cancel()
        print(json.dumps(dash.report()), flush=True)

    anyio.run(go)
    return 0


# ---- the browsers' process -------------------------------------------------------------


def browsers_main(argv: list[str]) -> int:
    """``--count`` WebSocket clients on the page's socket, each counting the frames it gets
    per phone; ``{"connected": K}``, then (when stdin says stop) what each got."""
    from websockets.asyncio.client import connect

    p = argparse.ArgumentParser(prog="bench.dashboard _browsers")
    p.add_argument("--url", required=True)
    p.add_argument("--count", type=int, required=True)
    args = p.parse_args(argv)
    ws_url = "ws" + args.url.split("?")[0].removeprefix("http").rstrip("/") + "/ws"
    got: list[dict[str, Any]] = [{"frames": {}, "first": {}, "last": {}, "messages": 0}
                                 for _ in range(args.count)]

    async def browser(i: int, *, task_status: Any) -> None:
        mine = got[i]
        async with connect(ws_url, max_size=None, open_timeout=30) as ws:
            mine["opened"] = time.monotonic()
            task_status.started()
            async for raw in ws:
                msg = json.loads(raw)
                mine["messages"] += 1
                if msg.get("type") == "frame":
                    serial, now = msg["serial"], time.monotonic()
                    mine["frames"][serial] = mine["frames"].get(serial, 0) + 1
                    mine["first"].setdefault(serial, now)
                    mine["last"][serial] = now

    async def go() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(args.count):
                with anyio.fail_after(60):
                    await tg.start(browser, i)
            print(json.dumps({"connected": args.count}), flush=True)
            await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            closed = time.monotonic()
            tg.cancel_scope.cancel()
        for mine in got:
            mine["window_s"] = closed - mine.pop("opened")
        print(json.dumps({"browsers": got}), flush=True)

    anyio.run(go)
    return 0


# ---- the benchmark ---------------------------------------------------------------------


class Helper:
    """One of this module's helper processes: JSON lines out, "stop" in."""

    def __init__(self, role: str, args: list[str], log: Path) -> None:
        self._log: IO[str] = log.open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.dashboard", role, *args], cwd=ROOT, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log)

    async def line(self, timeout_s: float = 60) -> dict[str, Any]:
        out = self.proc.stdout
        assert out is not None
        with anyio.fail_after(timeout_s):
            text = await anyio.to_thread.run_sync(out.readline, abandon_on_cancel=True)
        if not text:
            raise RuntimeError(f"a helper exited early (rc {self.proc.poll()}); "
                               f"see {self._log.name}")
        value: dict[str, Any] = json.loads(text)
        return value

    async def stop(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()
        return await self.line()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._log.close()


@asynccontextmanager
async def dashboard_open(broker_url: str, args: argparse.Namespace,
                         seen: dict[str, Any]) -> AsyncIterator[None]:
    """The dashboard process and the browsers' process, connected; ``seen`` gets their
    reports when the block ends."""
    serve = Helper(ROLE_SERVE, ["--broker", broker_url, "--max-fps", str(args.max_fps)],
                   args.out / "helpers.log")
    browsers: Helper | None = None
    try:
        url = (await serve.line())["url"]
        browsers = Helper(ROLE_BROWSERS, ["--url", url, "--count", str(args.browsers)],
                          args.out / "helpers.log")
        await browsers.line()
        yield
        seen["browsers"] = (await browsers.stop())["browsers"]
        seen["dashboard"] = await serve.stop()
    finally:
        for helper in (browsers, serve):
            if helper is not None:
                await anyio.to_thread.run_sync(helper.close)


def browser_figures(browsers: list[dict[str, Any]], n: int, max_fps: float) -> dict[str, Any]:
    """Frames per browser per phone per second while the phone streamed, and the cap: no
    browser got more of one phone's frames than ``window * max_fps + 1``."""
    rates, over = [], []
    for b in browsers:
        bound = b["window_s"] * max_fps + 1
        for serial, count in b["frames"].items():
            span = b["last"][serial] - b["first"][serial]
            if count > 1 and span > 0:
                rates.append((count - 1) / span)
            if count > bound:
                over.append(f"{serial}: {count} frames in {b['window_s']:.1f} s")
    phones_seen = [len(b["frames"]) for b in browsers]
    return {
        "fps_per_browser_phone_mean": round(statistics.mean(rates), 3) if rates else None,
        "fps_per_browser_phone_max": round(max(rates), 3) if rates else None,
        "max_fps": max_fps, "cap_held": not over, "cap_exceeded": over[:5],
        "phones_seen_per_browser": f"{min(phones_seen, default=0)}/{n}",
        "frames_received": sum(sum(b["frames"].values()) for b in browsers),
        "messages_per_browser": [b["messages"] for b in browsers],
    }


# Student's t, two-sided 95 %, by degrees of freedom (scipy is not a dependency).
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
       9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def spread(values: list[float | None]) -> dict[str, Any]:
    """Median, mean and a 95 % confidence interval of the mean (Student's t) of per-pair
    values; the interval needs two pairs at least."""
    xs = [v for v in values if v is not None]
    if not xs:
        return {"median": None, "mean": None, "ci95": None, "pairs": 0}
    mean = statistics.mean(xs)
    ci = None
    if len(xs) >= 2:
        df = len(xs) - 1
        t = T95[max(k for k in T95 if k <= df)]  # the next smaller df: a wider interval
        half = t * statistics.stdev(xs) / len(xs) ** 0.5
        ci = [round(mean - half, 4), round(mean + half, 4)]
    return {"median": round(statistics.median(xs), 4), "mean": round(mean, 4), "ci95": ci,
            "pairs": len(xs)}


def per_step(run: dict[str, Any], key: str) -> float | None:
    return run[key] / run["steps"] if run.get(key) is not None and run["steps"] else None


def figures(n: int, pairs: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]],
            max_fps: float) -> dict[str, Any]:
    """One N's figures over its (without, with, what the helpers saw) runs."""
    dashes = [seen["dashboard"] for _, _, seen in pairs]
    cpu, wall = sum(d["cpu_s"] for d in dashes), sum(d["window_s"] for d in dashes)
    frames_in = sum(d["frames_in"] for d in dashes)
    bus = [d["bus_fps_per_phone"] for d in dashes if d["bus_fps_per_phone"] is not None]
    without = statistics.mean(a["ratio"] for a, _, _ in pairs)
    with_ = statistics.mean(b["ratio"] for _, b, _ in pairs)
    ratio_costs = [round(1 - b["ratio"] / a["ratio"], 4) if a["ratio"] else None
                   for a, b, _ in pairs]

    def cpu_cost(key: str) -> list[float | None]:
        out: list[float | None] = []
        for a, b, _ in pairs:
            x, y = per_step(a, key), per_step(b, key)
            out.append(round(y / x - 1, 4) if x and y is not None else None)
        return out

    def mean_per_step(key: str, arm: int) -> float | None:
        xs = [v for v in (per_step(p[arm], key) for p in pairs) if v is not None]
        return round(1000 * statistics.mean(xs), 2) if xs else None

    fleet_costs = cpu_cost("fleet_cpu_s")
    return {
        "n": n, "repeats": len(pairs),
        "dashboard_cpu_s_per_s": round(cpu / wall, 4) if wall > 0 else None,
        "dashboard_cpu_s_per_min": round(60 * cpu / wall, 2) if wall > 0 else None,
        "dashboard_cpu_ms_per_frame": round(1000 * cpu / frames_in, 2) if frames_in else None,
        "fleet_cpu_ms_per_step_without": mean_per_step("fleet_cpu_s", 0),
        "fleet_cpu_ms_per_step_with": mean_per_step("fleet_cpu_s", 1),
        "broker_cpu_ms_per_step_without": mean_per_step("broker_cpu_s", 0),
        "broker_cpu_ms_per_step_with": mean_per_step("broker_cpu_s", 1),
        "fleet_cpu_cost_per_pair": fleet_costs,
        "fleet_cpu_cost": spread(fleet_costs),
        "broker_cpu_cost_per_pair": cpu_cost("broker_cpu_s"),
        "bus_fps_per_phone": round(statistics.mean(bus), 3) if bus else None,
        **browser_figures([b for _, _, seen in pairs for b in seen["browsers"]], n, max_fps),
        "frames_dropped_stale": sum(d["frames_dropped_stale"] for d in dashes),
        "ratio_without": round(without, 4), "ratio_with": round(with_, 4),
        "ratio_cost": round(1 - with_ / without, 4) if without else None,
        "ratio_cost_per_pair": ratio_costs,
        "ratio_cost_spread": spread(ratio_costs),
        "errors": sum(a["errors"] + b["errors"] for a, b, _ in pairs),
        "runs": [{"fleet_without": a, "fleet_with": b, "dashboard": seen["dashboard"]}
                 for a, b, seen in pairs],
    }


def former_thumbnail(data: bytes, side: int) -> bytes:
    """The baseline: what the dashboard did per frame before capture published a Screen
    (decode the full frame, at a reduced scale for a JPEG, thumbnail, encode)."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        img.draft("RGB", (side, side))
        small = img.convert("RGB")
        small.thumbnail((side, side))
        out = io.BytesIO()
        small.save(out, "JPEG", quality=70)
    return out.getvalue()


def screen_costs(side: int, rounds: int = 20) -> dict[str, Any]:
    """CPU ms per frame of capture's Screen against the dashboard's former thumbnail, and
    the bytes, on one simulated phone's screen (same run, same machine)."""
    import numpy as np

    from actors.capture import small_views
    from devices.codecs import encode_jpeg, encode_png
    from sim.phone.phone import SimPhone
    from sim.phone_api import DeviceInfo

    rgb = np.ascontiguousarray(np.asarray(SimPhone(DeviceInfo("bench")).screenshot().convert("RGB")))
    jpeg, png = encode_jpeg(rgb, 80), encode_png(rgb, 1, unfiltered=True)

    def ms(fn: Any) -> float:
        fn()
        t0 = time.process_time()
        for _ in range(rounds):
            fn()
        return round(1000 * (time.process_time() - t0) / rounds, 2)

    screen = small_views(rgb, 0, 85, side)[1]
    return {"side": side, "capture_screen_ms": ms(lambda: small_views(rgb, 0, 85, side)),
            # beside the LLM's 1024-side view, the screen is shrunk from the view's pixels
            "capture_screen_beside_view_ms": round(
                ms(lambda: small_views(rgb, 1024, 85, side))
                - ms(lambda: small_views(rgb, 1024, 85, 0)), 2),
            "dashboard_thumb_jpeg_ms": ms(lambda: former_thumbnail(jpeg, side)),
            "dashboard_thumb_png_ms": ms(lambda: former_thumbnail(png, side)),
            "screen_bytes": len(screen), "frame_jpeg_bytes": len(jpeg),
            "frame_png_bytes": len(png), "screen_bytes_of_frame": round(len(screen) / len(jpeg), 4)}


def broker_cpu(broker: Any) -> float | None:
    """mosquitto's CPU seconds so far (None: the embedded broker, or no psutil)."""
    if broker is None:
        return None
    try:
        import psutil
    except ImportError:
        return None
    try:
        t = psutil.Process(broker.proc.pid).cpu_times()
    except psutil.Error:
        return None
    return float(t.user + t.system)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [ROLE_SERVE]:
        return serve_main(argv[1:])
    if argv[:1] == [ROLE_BROWSERS]:
        return browsers_main(argv[1:])
    from host.dashboard.config import DashboardSettings

    defaults = DashboardSettings()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--phones", default="16,32", help="comma-separated N values")
    p.add_argument("--browsers", type=int, default=2, help="browser feeds attached (K)")
    p.add_argument("--steps", type=int, default=8, help="steps per phone per run")
    p.add_argument("--llm-delay", type=float, default=3.0, help="seconds per LLM answer")
    p.add_argument("--max-fps", type=float, default=defaults.max_fps,
                   help=f"dashboard.max_fps (default {defaults.max_fps:g})")
    p.add_argument("--repeats", type=int, default=1,
                   help="without/with pairs per N, in alternating order (the figures pool them)")
    p.add_argument("--sim-procs", type=int, default=2,
                   help="run the phones in this many separate processes (0: in this process)")
    p.add_argument("--out", type=Path, default=Path("bench-out/dashboard"))
    args = p.parse_args(argv)
    try:
        ns = sorted({int(x) for x in args.phones.split(",") if x.strip()})
    except ValueError:
        p.error(f"--phones: expected numbers like 4,16, not {args.phones!r}")
    if not ns or ns[0] < 1 or ns[-1] > 64:
        p.error("--phones: each N must be between 1 and 64")
    if min(args.browsers, args.steps, args.repeats) < 1 or args.llm_delay < 0:
        p.error("--browsers, --steps and --repeats must be >= 1, --llm-delay >= 0")
    import msgspec

    try:  # the config's own bounds (msgspec checks them on conversion, not construction)
        msgspec.convert({"max_fps": args.max_fps}, DashboardSettings)
    except msgspec.ValidationError as exc:
        p.error(f"--max-fps: {exc}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "helpers.log").write_text("")
    quiet()
    from actors.config import AgentSettings

    screens = screen_costs(AgentSettings().screen_side)
    print("a screen for the dashboard, on one simulated 1080x2400 frame: capture makes it in "
          f"{screens['capture_screen_beside_view_ms']:.2f} ms CPU beside the LLM's view, "
          f"{screens['capture_screen_ms']:.2f} ms without ({screens['screen_bytes']} bytes, "
          f"{screens['screen_bytes_of_frame']:.1%} of the {screens['frame_jpeg_bytes']}-byte "
          "JPEG frame); the dashboard thumbnailing the full frame itself took "
          f"{screens['dashboard_thumb_jpeg_ms']:.2f} ms (JPEG frame) and "
          f"{screens['dashboard_thumb_png_ms']:.2f} ms (PNG frame)", flush=True)

    # A private adb server, set before adbutils is imported anywhere.
    from bench.fleet import REMEASURE_EVERY, Mosquitto, SwipesScript, free_port, run_n, summarise

    adb_port = free_port()
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(adb_port)
    os.environ["ADB_EMU"] = "0"
    from bench.openai_loopback import OpenAIServer
    from sim.fleet import ensure_adb_server, stop_adb_server

    ensure_adb_server(adb_port)
    script = SwipesScript(args.steps, args.llm_delay)
    fleet_args = argparse.Namespace(phone="sim", sim_procs=args.sim_procs, loop="agent",
                                    capture_cost="off", remeasure_every=REMEASURE_EVERY,
                                    steps=args.steps, llm_delay=args.llm_delay)
    print("the phones run bench/fleet.py's swipes workload (the agent loop under the fleet "
          f"manager, a scripted loopback LLM after {args.llm_delay:g} s, one Frame per step "
          f"on the bus); {args.browsers} WebSocket clients stand in for the browsers",
          flush=True)
    try:
        broker: Mosquitto | None = Mosquitto()
    except FileNotFoundError:
        broker = None
    results: dict[str, Any] = {}
    try:
        with OpenAIServer(policy=script.answer, keep_requests=False) as srv:

            async def fleet_run(n: int, url: str, previous: list[dict[str, Any]]
                                ) -> dict[str, Any]:
                script.reset()  # each run reuses the jobs' ids
                broker0 = broker_cpu(broker)
                stats = await run_n(n, fleet_args, adb_port, srv.base_url, url)
                out = summarise(stats, previous)
                # The fleet's own processes while the phones worked (bench/fleet.py's
                # window), and the broker (it fans out to one more subscriber when the
                # dashboard is open) over the whole run, its set-up included.
                out["fleet_cpu_s"] = round(stats.cpu_s + stats.sim_cpu_s, 3)
                b1 = broker_cpu(broker)
                out["broker_cpu_s"] = (None if broker0 is None or b1 is None
                                       else round(b1 - broker0, 3))
                return out

            async def runs(url: str) -> None:
                import anyio.to_thread as tt

                tt.current_default_thread_limiter().total_tokens = max(40, 4 * ns[-1])
                one = [await fleet_run(1, url, [])]  # the ideal's step time, no dashboard
                results["1-phone baseline"] = one[0]
                for n in ns:
                    pairs: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = []
                    for rep in range(args.repeats):
                        seen: dict[str, Any] = {}

                        async def opened(n: int = n, seen: dict[str, Any] = seen
                                         ) -> dict[str, Any]:
                            async with dashboard_open(url, args, seen):
                                return await fleet_run(n, url, one)

                        if rep % 2 == 0:  # alternate the order: a drift in the machine's
                            without = await fleet_run(n, url, one)  # load favours neither
                            with_ = await opened()
                        else:
                            with_ = await opened()
                            without = await fleet_run(n, url, one)
                        pairs.append((without, with_, seen))
                    results[str(n)] = figures(n, pairs, args.max_fps)

            async def all_runs() -> None:
                if broker is not None:
                    await runs(f"mqtt://127.0.0.1:{broker.port}")
                    return
                from runtime.broker import embedded_broker
                from runtime.config import BrokerConfig

                async with embedded_broker(BrokerConfig(port=0)) as addr:
                    await runs(addr.url)

            anyio.run(all_runs)
    finally:
        if broker is not None:
            broker.stop()
        stop_adb_server(adb_port)
    per_n = [r for k, r in results.items() if k != "1-phone baseline"]
    print(f"{'N':>3} {'dash cpu/s':>10} {'ms/frame':>8} {'fps/brw/ph':>10} {'cap':>5} "
          f"{'stale':>6} {'ratio w/o':>9} {'ratio w/':>8} {'cost med [95% CI]':>24} "
          f"{'fleet cpu ms/step w/o, w/':>26} {'cpu cost med [95% CI]':>26} {'errors':>6}")

    def pct_ci(sp: dict[str, Any]) -> str:
        if sp["median"] is None:
            return "n/a"
        ci = sp["ci95"]
        inside = "" if ci is None else f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"
        return f"{100 * sp['median']:+.1f}%{inside}"

    nan = float("nan")
    for r in per_n:
        print(f"{r['n']:>3} {r['dashboard_cpu_s_per_s'] or nan:>10.3f} "
              f"{r['dashboard_cpu_ms_per_frame'] or nan:>8.2f} "
              f"{r['fps_per_browser_phone_mean'] or nan:>10.3f} "
              f"{'ok' if r['cap_held'] else 'OVER':>5} {r['frames_dropped_stale']:>6} "
              f"{r['ratio_without']:>9.3f} {r['ratio_with']:>8.3f} "
              f"{pct_ci(r['ratio_cost_spread']):>24} "
              f"{r['fleet_cpu_ms_per_step_without'] or nan:>12.1f}, "
              f"{r['fleet_cpu_ms_per_step_with'] or nan:>11.1f} "
              f"{pct_ci(r['fleet_cpu_cost']):>26} {r['errors']:>6}")
    meta = {"workload": "bench/fleet.py swipes (agent loop)", "llm_delay_s": args.llm_delay,
            "steps_per_phone": args.steps, "browsers": args.browsers, "repeats": args.repeats,
            "max_fps": args.max_fps,
            "screen_side": AgentSettings().screen_side, "sim_procs": args.sim_procs,
            "screen_costs": screens,
            "broker": "mosquitto" if broker is not None else "embedded amqtt",
            "cores": os.cpu_count(), "load_average_at_end": os.getloadavg(),
            "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    (args.out / "dashboard.json").write_text(json.dumps({"meta": meta, "results": results},
                                                        indent=2))
    print(f"wrote {args.out / 'dashboard.json'}")
    keys = ("dashboard_cpu_s_per_s", "dashboard_cpu_s_per_min", "dashboard_cpu_ms_per_frame",
            "fps_per_browser_phone_mean", "fps_per_browser_phone_max",
            "max_fps", "cap_held", "frames_dropped_stale", "bus_fps_per_phone", "ratio_without", "ratio_with", "ratio_cost",
            "ratio_cost_per_pair", "ratio_cost_spread", "fleet_cpu_ms_per_step_without",
            "fleet_cpu_ms_per_step_with", "fleet_cpu_cost", "errors")
    print(json.dumps({str(r["n"]): {k: r[k] for k in keys} for r in per_n}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
