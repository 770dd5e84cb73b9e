"""Mobile-Eval-sim: the 33 Mobile-Eval tasks on simulated phones, scored on app state.

    .venv/bin/python -m bench.mobile_eval --planner oracle --seeds 0-4 --tiers 1,2,3 \\
        --devices 2 --out runs/mobile-eval [--transport adb|inprocess] [--tasks notes-1,...]

Prints a progress bar, the paper's table (per app and tier: SU, PS, RE, CR), writes
DIR/results.json and one trajectory per episode under DIR/episodes/, and ends with one
JSON line: n_episodes and overall and per-tier SU/PS/RE/CR.

The ``oracle`` planner is a benchmark-only policy: it issues each task's reference solution
step by step through the NORMAL perception path (models.grounding.Perception on the
screenshot; input through adb or the phone's input methods), so it measures everything
except the LLM's judgement. It never reads coordinates or the element tree to act, with one
labelled exception, the PERFECT CHOOSER: when perception answers ``Ambiguous``, it picks the
candidate whose box overlaps the reference target (found in the phone's ground truth), as a
perfect LLM chooser would. Like a script, it also
- dismisses a pop-up it can read ("Not now", "Don't allow") before acting,
- waits ``--settle-s`` after each action that can navigate (a tap during a spinner is lost),
- retries an operation whose target was not found once, after a short wait,
- then closes the keyboard (BACK) if it just typed, and scrolls down up to twice looking
  for the target; each of these counts as an extra step; then it moves on.
Until the agent loop (issue 6) lands, this runner drives the oracle's operations itself;
``--planner llm`` says so.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PIL import Image  # noqa: E402

from runtime.operations import (  # noqa: E402
    Back,
    ClickIcon,
    ClickText,
    Exit,
    LongPress,
    OpenApp,
    Operation,
    PageDown,
    PageUp,
    Stop,
    Swipe,
    TypeText,
    Wait,
)
from sim.eval.episode import EpisodeLog, run_episode  # noqa: E402
from sim.eval.ground_truth import resolve  # noqa: E402
from sim.eval.metrics import EpisodeScore  # noqa: E402
from sim.eval.report import EpisodeResult, summary, table_by_app_and_tier  # noqa: E402
from sim.eval.task import Task  # noqa: E402
from sim.eval.tasks import TASKS, get_task  # noqa: E402
from sim.phone_api import DeviceInfo  # noqa: E402

KEY_HOME, KEY_BACK = 3, 4
DISMISS = ("Not now", "Don't allow", "No thanks")
RETRY_WAIT_S = 1.0
SCROLL_SEARCH = 2
SETTLE_S = 1.0  # after an action that can navigate: the sim's spinners last up to 0.8 s


class Driver(Protocol):
    """What the oracle may do to a phone: exactly what adb can."""

    serial: str
    size: tuple[int, int]

    def screenshot(self) -> Image.Image: ...
    def tap(self, x: int, y: int) -> None: ...
    def type_text(self, text: str) -> None: ...
    def key(self, code: int) -> None: ...
    def swipe(self, x1: int, y1: int, x2: int, y2: int, ms: int) -> None: ...
    def launch(self, package: str) -> bool: ...


class InProcessDriver:
    """Calls the phone's ADB-facing methods directly (no sockets)."""

    def __init__(self, phone: Any) -> None:
        self.phone = phone
        self.serial = phone.info.serial
        self.size = (phone.info.width, phone.info.height)

    def screenshot(self) -> Image.Image:
        return self.phone.screenshot().convert("RGB")

    def tap(self, x: int, y: int) -> None:
        self.phone.tap(x, y)

    def type_text(self, text: str) -> None:
        self.phone.type_text(text)

    def key(self, code: int) -> None:
        self.phone.key(code)

    def swipe(self, x1: int, y1: int, x2: int, y2: int, ms: int) -> None:
        self.phone.swipe(x1, y1, x2, y2, ms)

    def launch(self, package: str) -> bool:
        return bool(self.phone.launch(package))


class AdbDriver:
    """The real path: adbutils -> adb server -> the simulated phone's ADB front end."""

    def __init__(self, device: Any, size: tuple[int, int]) -> None:
        self.device = device
        self.serial = device.serial
        self.size = size

    def screenshot(self) -> Image.Image:
        png = self.device.shell(["screencap", "-p"], encoding=None, timeout=30)
        return Image.open(io.BytesIO(png)).convert("RGB")

    def tap(self, x: int, y: int) -> None:
        self.device.shell(["input", "tap", str(x), str(y)], timeout=30)

    def type_text(self, text: str) -> None:
        # `input text` takes %s for a space; the list form is shell-quoted by adbutils.
        self.device.shell(["input", "text", text.replace(" ", "%s")], timeout=30)

    def key(self, code: int) -> None:
        self.device.shell(["input", "keyevent", str(code)], timeout=30)

    def swipe(self, x1: int, y1: int, x2: int, y2: int, ms: int) -> None:
        self.device.shell(["input", "swipe", str(x1), str(y1), str(x2), str(y2), str(ms)], timeout=30)

    def launch(self, package: str) -> bool:
        out = self.device.shell(["monkey", "-p", package, "-c", "android.intent.category.LAUNCHER", "1"],
                                timeout=30)
        return "No activities found" not in str(out)


# -- the oracle planner ------------------------------------------------------------------------


def _point(p: Sequence[int]) -> tuple[int, int]:
    return (int(p[0]), int(p[1]))


def _box(b: Sequence[float]) -> tuple[float, float, float, float]:
    return (float(b[0]), float(b[1]), float(b[2]), float(b[3]))


def _overlap(a: Sequence[float], b: Sequence[float]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return max(0.0, w) * max(0.0, h)


@dataclass
class Grounding:
    kind: str  # grounded | ambiguous | not_found
    method: str = ""
    point: tuple[int, int] | None = None
    box: tuple[float, float, float, float] | None = None
    candidates: int = 0
    chooser: bool = False  # the PERFECT CHOOSER picked among candidates
    reason: str = ""

    def as_dict(self) -> dict[str, object]:
        return {k: v for k, v in vars(self).items() if v not in (None, "", 0, False)}


class OraclePlanner:
    """Issues a reference solution through perception (see the module docstring)."""

    def __init__(self, perception: Any, driver: Driver, phone: Any, packages: dict[str, str],
                 settle_s: float = SETTLE_S) -> None:
        self.perception = perception
        self.settle_s = settle_s
        self.typed_last = False  # the previous operation typed: the keyboard is probably up
        self.driver = driver
        self.phone = phone  # ground truth: ONLY for the perfect chooser (and scoring, outside)
        self.packages = packages
        self.last: Grounding | None = None
        self.frame: Image.Image | None = None  # the frame the pop-up check just read

    def ground(self, op: ClickText | ClickIcon | LongPress, frame: Image.Image) -> Grounding:
        from models.grounding import Ambiguous, Grounded

        if isinstance(op, ClickIcon):
            r = self.perception.ground_icon(frame, op.description, position=op.position)
        else:
            r = self.perception.ground_text(frame, op.text)
        if isinstance(r, Grounded):
            return Grounding("grounded", r.method, _point(r.point), _box(r.box))
        if isinstance(r, Ambiguous):
            # PERFECT CHOOSER: the candidate overlapping the reference target (ground truth).
            target = resolve(self.phone, op)
            best = max(r.candidates, key=lambda c: _overlap(c.box, target.bbox)) if target else None
            if best is None or target is None or _overlap(best.box, target.bbox) <= 0:
                best = r.candidates[0]  # no overlap: the chooser has nothing better than #1
            return Grounding("ambiguous", r.method, _point(best.point), _box(best.box),
                             len(r.candidates), chooser=True, reason=r.reason)
        return Grounding("not_found", reason=getattr(r, "reason", ""))

    def dismiss_popup(self, frame: Image.Image, op: Operation) -> Operation | None:
        """Tap a pop-up's dismissive button if one is readable (and is not the target)."""
        from models.grounding import normalize

        texts = {normalize(t)[0] for t in self.perception.read_text(frame).texts}
        target = normalize(getattr(op, "text", ""))[0]
        for word in DISMISS:
            key = normalize(word)[0]
            if key in texts and key != target:
                g = self.ground(ClickText(word), frame)
                if g.point is not None:
                    self.driver.tap(*g.point)
                    time.sleep(self.settle_s)
                    return ClickText(word)
        return None

    def page(self, down: bool) -> None:
        w, h = self.driver.size
        # 0.6 -> 0.25 of the height: the swipe starts above a soft keyboard (top at ~0.66)
        a, b = (int(h * 0.6), int(h * 0.25)) if down else (int(h * 0.25), int(h * 0.6))
        self.driver.swipe(w // 2, a, w // 2, b, 300)

    def perform(self, op: Operation) -> tuple[bool, str, list[Operation]]:
        """Do op; wait for the screen to settle after anything that can navigate."""
        out = self._perform(op)
        self.typed_last = isinstance(op, TypeText)
        if self.settle_s and not isinstance(op, TypeText | Stop):
            time.sleep(self.settle_s)  # as a script waits: a tap during a spinner is lost
        return out

    def _perform(self, op: Operation) -> tuple[bool, str, list[Operation]]:
        self.last = None
        self.frame = None
        recovery: list[Operation] = []
        if isinstance(op, ClickText | ClickIcon | LongPress | PageDown | PageUp | Swipe):
            frame = self.driver.screenshot()
            popped = self.dismiss_popup(frame, op)
            if popped is not None:
                recovery.append(popped)
            else:
                self.frame = frame  # still current: grounding reuses it (and its OCR)
        match op:
            case OpenApp(name=name):
                pkg = self.packages.get(name.lower())
                if pkg is None:
                    return False, f"no package known for {name!r}", recovery
                return self.driver.launch(pkg), "", recovery
            case ClickText() | ClickIcon() | LongPress():
                return self.click(op, recovery)
            case TypeText(text=text):
                self.driver.type_text(text)
                return True, "", recovery
            case PageDown():
                self.page(down=True)
                return True, "", recovery
            case PageUp():
                self.page(down=False)
                return True, "", recovery
            case Swipe(direction=d):
                w, h = self.driver.size
                dx = {"left": -1, "right": 1}.get(d, 0) * int(w * 0.35)
                dy = {"up": -1, "down": 1}.get(d, 0) * int(h * 0.25)
                self.driver.swipe(w // 2 - dx, h // 2 - dy, w // 2 + dx, h // 2 + dy, 300)
                return True, "", recovery
            case Back():
                self.driver.key(KEY_BACK)
                return True, "", recovery
            case Exit():
                self.driver.key(KEY_HOME)
                return True, "", recovery
            case Wait():
                time.sleep(RETRY_WAIT_S)
                return True, "", recovery
            case Stop():
                return True, "", recovery
        return False, f"unsupported operation {op!r}", recovery

    def click(self, op: ClickText | ClickIcon | LongPress,
              recovery: list[Operation]) -> tuple[bool, str, list[Operation]]:
        g = self.ground(op, self.frame or self.driver.screenshot())
        if g.point is None:  # retry once, after a wait (a spinner, an animation)
            time.sleep(RETRY_WAIT_S)
            g = self.ground(op, self.driver.screenshot())
        if g.point is None and self.typed_last:  # the keyboard may hide it: close it
            self.driver.key(KEY_BACK)
            recovery.append(Back())
            time.sleep(self.settle_s)
            g = self.ground(op, self.driver.screenshot())
        scrolls = 0
        while g.point is None and scrolls < SCROLL_SEARCH:  # below the fold?
            self.page(down=True)
            recovery.append(PageDown())
            scrolls += 1
            time.sleep(self.settle_s)
            g = self.ground(op, self.driver.screenshot())
        self.last = g
        if g.point is None:
            return False, f"not found: {g.reason}", recovery
        x, y = g.point
        if isinstance(op, LongPress):
            self.driver.swipe(x, y, x, y, 800)
        else:
            self.driver.tap(x, y)
        return True, g.kind, recovery


# -- running episodes --------------------------------------------------------------------------


def package_map() -> dict[str, str]:
    """Launcher label -> package, plus the names the paper's instructions use."""
    from sim.phone.apps import APPS

    out = {a.label.lower(): a.package for a in APPS}
    aliases = {"google maps": "maps", "google play": "play store", "play": "play store",
               "alibaba": "alibaba.com"}
    for alias, label in aliases.items():
        if label in out:
            out[alias] = out[label]
    return out


@dataclass(frozen=True)
class RunConfig:
    perception: Any
    packages: dict[str, str]
    out_dir: Path
    frames: bool = False
    settle_s: float = SETTLE_S


def run_one(task: Task, phone: Any, driver: Driver, cfg: RunConfig,
            ep_dir: Path | None) -> tuple[EpisodeLog, list[dict[str, object]]]:
    """The reference solution, then Stop, issued by the oracle; milestones read per step."""
    oracle = OraclePlanner(cfg.perception, driver, phone, cfg.packages, cfg.settle_s)
    groundings: list[dict[str, object]] = []

    def perform(op: Operation) -> tuple[bool, str, Sequence[Operation]]:
        ok, detail, recovery = oracle.perform(op)
        groundings.append(oracle.last.as_dict() if oracle.last else {})
        if cfg.frames and ep_dir is not None:
            img = driver.screenshot()
            img.thumbnail((540, 1200))
            img.save(ep_dir / f"step{len(groundings) - 1:02d}.jpg", quality=70)
        return ok, detail, recovery

    return run_episode(task, phone, [*task.reference, Stop()], perform), groundings


def episode_jobs(task_ids: Sequence[str], seeds: Sequence[int]) -> list[tuple[str, int]]:
    return [(t, s) for s in seeds for t in task_ids]


def worker_inprocess(jobs: queue.Queue[tuple[str, int]], out: queue.Queue[Any], cfg: RunConfig,
                     index: int) -> None:
    from sim.phone import SimPhone

    while True:
        try:
            tid, seed = jobs.get_nowait()
        except queue.Empty:
            return
        phone = SimPhone(DeviceInfo(f"sim{index:02d}"), seed=seed)
        out.put(_episode(tid, seed, phone, InProcessDriver(phone), cfg))


def _episode(tid: str, seed: int, phone: Any, driver: Driver, cfg: RunConfig) -> EpisodeResult:
    task = get_task(tid)(seed)
    ep_dir = cfg.out_dir / "episodes" / f"{tid}_seed{seed}"
    ep_dir.mkdir(parents=True, exist_ok=True)
    try:
        task.setup(phone)
        log, groundings = run_one(task, phone, driver, cfg, ep_dir)
        score = log.score(task)
        data = log.as_dict()
        steps = [s.as_dict() for s in log.steps]
        for step, g in zip((s for s in steps if not s["recovery"]), groundings, strict=False):
            step["grounding"] = g
        data["steps"] = steps
        data["score"] = vars(score)
        (ep_dir / "trajectory.json").write_text(json.dumps(data, indent=1))
        return EpisodeResult(tid, task.app, task.tier, seed, score)
    except Exception as e:  # a runner failure is recorded, not fatal to the run
        err = f"{type(e).__name__}: {e}"
        (ep_dir / "error.txt").write_text(err)
        zero = EpisodeScore(0.0, 0.0, None, 0.0, 0, len(task.reference), 0)
        return EpisodeResult(tid, task.app, task.tier, seed, zero, error=err)


def run_adb(jobs_list: list[tuple[str, int]], devices: int, cfg: RunConfig,
            done: Callable[[EpisodeResult], None]) -> None:
    """One fleet of N phones per seed (a phone's seed is fixed at boot), through adb."""
    from sim.fleet import SimFleet

    def work(fleet: Any, serial: str, q: queue.Queue[tuple[str, int]]) -> None:
        phone = fleet.phone(serial)
        driver = AdbDriver(fleet.device(serial), (phone.info.width, phone.info.height))
        while True:
            try:
                tid, s = q.get_nowait()
            except queue.Empty:
                return
            done(_episode(tid, s, phone, driver, cfg))

    for seed in sorted({s for _, s in jobs_list}):
        q: queue.Queue[tuple[str, int]] = queue.Queue()
        for j in jobs_list:
            if j[1] == seed:
                q.put(j)
        with SimFleet(devices, seed=seed) as fleet:
            threads = [threading.Thread(target=work, args=(fleet, s, q), daemon=True)
                       for s in fleet.serials]
            for t in threads:
                t.start()
            for t in threads:
                t.join()


# -- command line --------------------------------------------------------------------------------


def parse_ints(text: str, what: str) -> list[int]:
    """'0-4' or '0,2,3' or '1-2,5' -> a sorted list of distinct ints."""
    out: set[int] = set()
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                a, b = part.split("-", 1)
                lo, hi = int(a), int(b)
                if lo > hi:
                    raise ValueError
                out.update(range(lo, hi + 1))
            elif part:
                out.add(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad {what} list {text!r} (e.g. 0-4 or 0,2,3)") from None
    if not out or min(out) < 0:
        raise argparse.ArgumentTypeError(f"bad {what} list {text!r}: need non-negative numbers")
    return sorted(out)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench/mobile_eval.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--planner", choices=("oracle", "llm"), default="oracle")
    p.add_argument("--seeds", type=lambda s: parse_ints(s, "seed"), default=[0])
    p.add_argument("--tiers", type=lambda s: parse_ints(s, "tier"), default=[1, 2, 3])
    p.add_argument("--tasks", default="", help="comma-separated task ids or app rows (default all)")
    p.add_argument("--devices", type=int, default=1, help="phones driven in parallel (default 1)")
    p.add_argument("--transport", choices=("adb", "inprocess"), default="adb",
                   help="adb: the real path through an adb server (default); inprocess: call the "
                        "phone's input methods directly")
    p.add_argument("--out", type=Path, required=True, help="results directory")
    p.add_argument("--frames", action="store_true", help="save a JPEG per step")
    p.add_argument("--settle-s", type=float, default=SETTLE_S,
                   help=f"wait after each action that can navigate (default {SETTLE_S})")
    return p


@contextlib.contextmanager
def _progress(total: int) -> Iterator[Callable[[], None]]:
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is a dependency, but a bar is not worth a crash
        yield lambda: None
        return
    bar = tqdm(total=total, unit="episode", file=sys.stderr, dynamic_ncols=True)
    try:
        yield bar.update
    finally:
        bar.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.planner == "llm":
        print("bench/mobile_eval.py: --planner llm needs the agent loop (issue 6: planner, "
              "actuator and reflector actors), which is not in this checkout yet; "
              "use --planner oracle", file=sys.stderr)
        return 2
    if not 0 <= args.settle_s <= 10:
        print("bench/mobile_eval.py: --settle-s must be between 0 and 10 seconds", file=sys.stderr)
        return 2
    if not 1 <= args.devices <= 64:
        print("bench/mobile_eval.py: --devices must be 1..64", file=sys.stderr)
        return 2
    if any(t not in (1, 2, 3) for t in args.tiers):
        print("bench/mobile_eval.py: tiers are 1, 2 and 3", file=sys.stderr)
        return 2
    try:
        from models.grounding import Perception
    except ImportError as e:
        print(f"bench/mobile_eval.py: the oracle needs perception (models/grounding.py): {e}",
              file=sys.stderr)
        return 2
    wanted = {w.strip() for w in args.tasks.split(",") if w.strip()} or None
    chosen = [t for t in TASKS if t.tier in args.tiers
              and (wanted is None or t.task_id() in wanted or t.app in wanted)]
    if not chosen:
        print(f"bench/mobile_eval.py: no task matches --tasks {args.tasks!r} and --tiers", file=sys.stderr)
        return 2
    out_dir: Path = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = RunConfig(Perception(), package_map(), out_dir, args.frames, args.settle_s)
    jobs_list = episode_jobs([t.task_id() for t in chosen], args.seeds)
    results: list[EpisodeResult] = []
    lock = threading.Lock()
    t0 = time.perf_counter()
    with _progress(len(jobs_list)) as tick:
        def done(r: EpisodeResult) -> None:
            with lock:
                results.append(r)
                tick()

        if args.transport == "adb":
            run_adb(jobs_list, args.devices, cfg, done)
        else:
            jobs: queue.Queue[tuple[str, int]] = queue.Queue()
            for j in jobs_list:
                jobs.put(j)
            out: queue.Queue[EpisodeResult] = queue.Queue()
            threads = [threading.Thread(target=worker_inprocess, daemon=True,
                                        args=(jobs, out, cfg, i))
                       for i in range(args.devices)]
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads) or not out.empty():
                try:
                    done(out.get(timeout=0.2))
                except queue.Empty:
                    pass
    wall = time.perf_counter() - t0
    order = {t.task_id(): i for i, t in enumerate(TASKS)}
    results.sort(key=lambda r: (order[r.task_id], r.seed))
    table = table_by_app_and_tier(results, args.tiers)
    summ = summary(results, args.tiers)
    summ.update({"planner": args.planner, "transport": args.transport, "devices": args.devices,
                 "seeds": args.seeds, "wall_s": round(wall, 1)})
    (out_dir / "results.json").write_text(json.dumps({
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "episodes": [{"task": r.task_id, "app": r.app, "tier": r.tier, "seed": r.seed,
                      "SU": r.score.su, "PS": r.score.ps, "RE": r.score.re, "CR": r.score.cr,
                      "steps": r.score.steps, "reference_steps": r.score.reference_steps,
                      "error": r.error} for r in results],
        "summary": summ}, indent=1))
    print(table)
    errors = [r for r in results if r.error]
    for r in errors[:5]:
        print(f"runner error in {r.task_id} seed {r.seed}: {r.error}", file=sys.stderr)
    print(f"episodes: {len(results)} · wall {wall:.0f} s · trajectories under {out_dir / 'episodes'}")
    print(json.dumps(summ))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
