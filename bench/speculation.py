"""Speculative OCR: how much grounding time hides behind the LLM's latency.

    .venv/bin/python -m bench.speculation [--llm-delay 1.5] [--task settings-1]

One Mobile-Eval-sim task through the real actors and the real openai client, against the
loopback OpenAI server answering the task's reference operations after ``--llm-delay``
seconds (a stand-in for a real model's latency). Run twice, with a fresh Perception each
time (the simulator is deterministic, so a shared cache would cheat): speculative OCR off,
then on. Prints the summed ``perception`` phase (time the step waited for grounding) and
the summed step time of each run, and their ratios.
"""

from __future__ import annotations

import argparse
import sys

import anyio

from actors.config import AgentSettings
from actors.episode import DeviceAgent
from actors.perception import PerceptionEngine
from actors.planner import LLMPolicy, RoleSetup
from bench.openai_loopback import Behaviour, OpenAIServer, planner_reply
from devices.adb import AdbDevice
from models.llm import LLMClient, LLMSettings
from protocol.messages import Instruction, Msg, StepTiming
from protocol.operations import format_operation
from sim.eval.tasks import get_task
from sim.fleet import SimFleet


class _NoBus:
    async def publish(self, topic: str, msg: Msg, *, qos: int = 1, retain: bool = False) -> None:
        return None


async def one_run(task_id: str, delay: float, speculate: bool) -> tuple[float, float, str]:
    task = get_task(task_id)(0)
    timings: list[StepTiming] = []
    with SimFleet(1, seed=0) as fleet, OpenAIServer() as srv:
        serial = fleet.serials[0]
        task.setup(fleet.phone(serial))  # type: ignore[arg-type]
        srv.script(*(Behaviour.reply(planner_reply(format_operation(op)), delay_s=delay)
                     for op in task.reference),
                   Behaviour.reply(planner_reply("Stop"), delay_s=delay),
                   Behaviour.reply("Complete: yes\nReason: done.", delay_s=delay))
        settings = LLMSettings(base_url=srv.base_url, api_key="bench", timeout_s=30)
        async with LLMClient(settings) as llm:
            agent = DeviceAgent(
                _NoBus(), AdbDevice(serial), perception=PerceptionEngine(),
                settings=AgentSettings(speculative_ocr=speculate),
                policy_for=lambda _i: LLMPolicy(llm, RoleSetup.from_settings(llm.settings)),
            )
            agent.observers.append(lambda m: timings.append(m) if isinstance(m, StepTiming)
                                   else None)
            out = await agent.run_episode(Instruction(id="bench", text=task.instruction))
    perception = sum(t.phases.get("perception", 0.0) for t in timings)
    total = sum(t.total_s for t in timings)
    return perception, total, out.status


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--llm-delay", type=float, default=1.5)
    p.add_argument("--task", default="settings-1")
    args = p.parse_args(argv)
    off = anyio.run(one_run, args.task, args.llm_delay, False)
    on = anyio.run(one_run, args.task, args.llm_delay, True)
    print(f"task {args.task}, LLM delay {args.llm_delay}s per call")
    print(f"speculation off: perception {off[0]:.2f}s of {off[1]:.2f}s ({off[2]})")
    print(f"speculation on:  perception {on[0]:.2f}s of {on[1]:.2f}s ({on[2]})")
    if off[0] > 0 and off[1] > 0:
        print(f"on/off: perception {on[0] / off[0]:.2f}, episode {on[1] / off[1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
