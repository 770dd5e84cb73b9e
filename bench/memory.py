"""Prompt tokens per step with the agent's memory on and off, and the history bound.

    .venv/bin/python -m bench.memory [--task tiktok-3] [--bound 2000] [--synthetic 60]

**A scripted stand-in model, not a real one**: the loopback OpenAI server
(``tests/fixtures/openai_server.py``) answers each planner call with the task's next
reference operation in the ReAct format, with an Observation and a Thought of realistic
length (about 45 and 35 words), a ``Progress:`` line that grows with the steps done and a
``Memory:`` line every third step; the completion check says yes. The episode itself is
real: the simulated phone through adb, real OCR and grounding, the real openai client, the
real prompts. What is measured is what the prompts cost, not how well a model does.

Runs the task once per configuration (fresh phone, same seed):

- ``off``: agent.planning = "off", agent.notes = false, agent.history_thoughts = false
  (the history is one line per operation: the agent before issue 15);
- ``on``: planning "inline", notes and thoughts on, llm.max_prompt_tokens as configured
  (default 16000, which a short task never reaches);
- ``on, bound B``: the same with llm.max_prompt_tokens = ``--bound``.

For each run and step: the planner prompt's tokens by our estimate (``models.llm.budget``:
4 characters a token, 85 + 170 per 512-pixel image tile) and by the stand-in server's own
count (4 characters a token, 85 per image; what ``LlmUsage.prompt_tokens`` reports here).
``--synthetic N`` also builds the planner prompt after N synthetic steps (no phone) with the
bound and without it, so the bound can be seen holding far past any task's length.
"""

from __future__ import annotations

import argparse
import io
import math
import sys
from dataclasses import dataclass, field
from typing import Any

import anyio
import structlog
from PIL import Image

from actors.config import AgentSettings
from actors.episode import DeviceAgent
from actors.perception import PerceptionEngine
from actors.planner import LLMPolicy, RoleSetup
from bench.openai_loopback import (
    Behaviour,
    OpenAIServer,
    RecordedRequest,
    estimate_prompt_tokens,
)
from devices.adb import AdbDevice
from models.llm import LLMClient, LLMSettings, RoleModels
from models.llm.budget import (
    IMAGE_BASE,
    IMAGE_PER_TILE,
    MESSAGE_OVERHEAD,
    TILE,
    estimate_tokens,
    text_tokens,
)
from models.llm.families.react import react_planner_messages
from models.llm.prompts.planner import PlannerInput
from models.llm.prompts.shared import PastStep
from protocol.messages import Instruction
from protocol.operations import ClickText, format_operation
from sim.eval.tasks import get_task
from sim.fleet import SimFleet

OBSERVATION = ("The screen shows the app's main list with a search bar at the top, a row of "
               "tabs under it, several entries with their titles and small icons, and the "
               "navigation bar at the bottom; nothing is loading and no dialog is open, so "
               "the next control can be used right away.")
THOUGHT = ("To get on with the instruction the next control to use is the one named in the "
           "action below; it is visible on this screen, and using it moves the task one step "
           "closer to the goal without leaving the app.")


class _NoBus:
    async def publish(self, topic: str, msg: Any, *, qos: int = 1, retain: bool = False) -> None:
        return None


@dataclass
class StandIn:
    """The scripted stand-in model: the reference operations as ReAct replies."""

    actions: list[str]
    planner_calls: int = 0
    prompts: list[RecordedRequest] = field(default_factory=list)

    def __call__(self, req: RecordedRequest) -> Behaviour:
        if req.model != "plan-m":
            return Behaviour.reply("Complete: yes\nReason: the reference steps are done.")
        k = self.planner_calls
        self.planner_calls += 1
        self.prompts.append(req)
        action = self.actions[k] if k < len(self.actions) else "Stop"
        done = "; ".join(self.actions[:k + 1]) or "nothing yet"
        text = (f"Observation: {OBSERVATION}\nThought: {THOUGHT}\nAction: {action}\n"
                f"Progress: done so far: {done}. What remains: the rest of the instruction.")
        if k % 3 == 2:
            text += f"\nMemory: the value read on screen {k + 1} is {100 + k} (kept for later)"
        return Behaviour.reply(text)


def our_estimate(req: RecordedRequest) -> int:
    """models.llm.budget' rule applied to the request as sent."""
    texts = sum(text_tokens(t) for t in req.texts())
    images = sum(IMAGE_BASE + IMAGE_PER_TILE * math.ceil(w / TILE) * math.ceil(h / TILE)
                 for w, h in (i.size for i in req.images()))
    return texts + images + MESSAGE_OVERHEAD * len(req.messages)


async def one_run(task_id: str, settings: AgentSettings, bound: int) -> tuple[list[int], list[int], str]:
    task = get_task(task_id)(0)
    with SimFleet(1, seed=0) as fleet, OpenAIServer() as srv:
        serial = fleet.serials[0]
        task.setup(fleet.phone(serial))  # type: ignore[arg-type]
        model = StandIn([format_operation(op) for op in task.reference])
        srv.policy = model
        llm_settings = LLMSettings(base_url=srv.base_url, api_key="bench", timeout_s=30,
                                   max_prompt_tokens=bound,
                                   models=RoleModels(planner="plan-m", chooser="choose-m",
                                                     reflector="reflect-m"))
        async with LLMClient(llm_settings) as llm:
            agent = DeviceAgent(_NoBus(), AdbDevice(serial), perception=PerceptionEngine(),
                                settings=settings, policy_for=lambda _i: LLMPolicy(
                                    llm, RoleSetup.from_settings(llm.settings)))
            out = await agent.run_episode(Instruction(id="bench", text=task.instruction))
        ours = [our_estimate(r) for r in model.prompts]
        server = [estimate_prompt_tokens(r.body) for r in model.prompts]
        ok = "succeeded" if out.status == "succeeded" and task.is_successful(
            fleet.phone(serial)) else f"{out.status} ({out.reason[:80]})"  # type: ignore[arg-type]
    return ours, server, ok


def synthetic(n: int, bound: int) -> tuple[int, int]:
    """The planner prompt after ``n`` synthetic steps: (unbounded, bounded) tokens."""
    buf = io.BytesIO()
    Image.new("RGB", (1080, 2400), (240, 240, 240)).save(buf, format="JPEG")
    shot = buf.getvalue()
    history = tuple(PastStep(action=ClickText(f"item {i}"), result="tap 540,1200", verdict="ok",
                               reason="20000 pixels changed", observation=OBSERVATION,
                               thought=THOUGHT, screenshot=shot) for i in range(n))
    notes = tuple(f"the value read on screen {i} is {100 + i}" for i in range(12))
    inp = PlannerInput(instruction="A long job with several sub-goals", screenshot=shot,
                       history=history, progress="done so far: " + "; ".join(
                           f"Click text (item {i})" for i in range(n)),
                       notes=notes, reply_progress=True, reply_memory=True)
    free = estimate_tokens(react_planner_messages(inp))
    inp = PlannerInput(**{**{f: getattr(inp, f) for f in inp.__struct_fields__},
                          "max_prompt_tokens": bound})
    return free, estimate_tokens(react_planner_messages(inp))


def _row(name: str, ours: list[int], server: list[int], ok: str) -> str:
    per = " ".join(f"{t:5d}" for t in ours)
    mean = sum(ours) / max(len(ours), 1)
    return (f"{name:14} {ok:10} steps {len(ours):2d}  mean {mean:6.0f}  max {max(ours or [0]):5d}"
            f"  (server count mean {sum(server) / max(len(server), 1):6.0f})\n"
            f"{'':14} per step: {per}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="tiktok-3")
    p.add_argument("--bound", type=int, default=2000, help="llm.max_prompt_tokens of the bounded run")
    p.add_argument("--synthetic", type=int, default=60, help="steps of the synthetic history (0: skip)")
    args = p.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))  # errors only
    base: dict[str, Any] = dict(settle_s=0.1, max_steps=40)
    off = AgentSettings(planning="off", notes=False, history_thoughts=False, **base)
    on = AgentSettings(planning="inline", notes=True, history_thoughts=True, **base)
    print(f"scripted stand-in model (not a real LLM) on task {args.task}, seed 0; planner "
          "prompt tokens per step by models.llm.budget")
    runs = [("memory off", off, 16000), ("memory on", on, 16000),
            (f"on, bound {args.bound}", on, args.bound)]
    results = {}
    for name, settings, bound in runs:
        ours, server, ok = anyio.run(one_run, args.task, settings, bound)
        results[name] = ours
        print(_row(name, ours, server, ok))
    off_mean = sum(results["memory off"]) / max(len(results["memory off"]), 1)
    on_mean = sum(results["memory on"]) / max(len(results["memory on"]), 1)
    print(f"on/off mean prompt tokens per step: {on_mean / off_mean:.2f}")
    bounded = results[f"on, bound {args.bound}"]
    print(f"bound {args.bound} held on every step: {all(t <= args.bound for t in bounded)}")
    if args.synthetic:
        free, fit = synthetic(args.synthetic, args.bound)
        print(f"synthetic {args.synthetic}-step history, memory on: {free} tokens unbounded, "
              f"{fit} with llm.max_prompt_tokens={args.bound}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
