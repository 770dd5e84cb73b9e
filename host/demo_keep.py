"""``mobagent demo --keep``: after the demo, its simulated phones and the oracle planner stay
up on the embedded broker, so ``mobagent mcp`` (or ``submit``, ``watch``, the dashboard)
can drive them with no phone and no API key.

The oracle only knows Mobile-Eval-sim tasks: an instruction that names a task id
(``settings-1``) or repeats a task's instruction runs that task's reference solution
(the phone is set up for it first). Any other instruction makes the agent ``Ask`` which
task to run: the question reaches an MCP client through elicitation, and an answer that
names a task runs it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec

from actors.planner import Choice, Completion, Decision, Policy, StepContext
from devices.discovery import FixedDevices
from host.oracle import OraclePolicy
from host.runner import AgentHostConfig, agent_host
from protocol.messages import Instruction
from protocol.operations import Ask, Operation, Stop, Wait, format_operation
from sim.eval.task import Task
from sim.eval.tasks import TASKS
from sim.fleet import SimFleet
from sim.phone import SimPhone


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def match_task(text: str, seed: int) -> Task | None:
    """The Mobile-Eval-sim task ``text`` names (its id) or repeats (its instruction)."""
    words = set(re.findall(r"[a-z0-9-]+", text.lower()))
    for cls in TASKS:
        if cls.task_id().lower() in words:
            return cls(seed)
    want = _norm(text)
    for cls in TASKS:
        task = cls(seed)
        if _norm(task.instruction) == want:
            return task
    return None


def _decision(op: Operation, thought: str) -> Decision:
    return Decision(observation="(oracle: no observation)", thought=thought,
                    action=format_operation(op), operation=op)


class DemoOracle:
    """The oracle for whatever instruction arrives (see the module's docstring)."""

    name = "oracle"

    def __init__(self, phone: SimPhone, seed: int, examples: Sequence[str]) -> None:
        self.phone, self.seed, self.examples = phone, seed, examples
        self.inner: OraclePolicy | None = None
        self.asked = False

    async def decide(self, ctx: StepContext) -> Decision:
        if self.inner is not None:
            return await self.inner.decide(ctx)
        task = match_task(ctx.task or ctx.instruction, self.seed)
        if task is None and self.asked and ctx.history:
            task = match_task(ctx.history[-1].result, self.seed)
        if task is None:
            if self.asked:
                return _decision(Stop(), "no Mobile-Eval-sim task was named: nothing to do")
            self.asked = True
            return _decision(Ask(question=(
                "This demo's oracle planner only knows the Mobile-Eval-sim tasks. Which one "
                f"should I run? For example: {'; '.join(self.examples)}")),
                "the instruction names no task the oracle knows")
        await anyio.to_thread.run_sync(task.setup, self.phone)
        self.inner = OraclePolicy(task, self.phone)
        return _decision(Wait(), f"set the phone up for {task.task_id()}: {task.instruction}")

    async def choose(self, ctx: StepContext, target: str, image: bytes, labels: Sequence[int],
                     texts: Sequence[str], points: Sequence[tuple[int, int]] = (),
                     reason: str = "", crops: Sequence[bytes] = ()) -> Choice:
        if self.inner is None:
            return Choice(None)
        return await self.inner.choose(ctx, target, image, labels, texts, points,
                                       reason=reason, crops=crops)

    async def check_completion(self, ctx: StepContext) -> Completion:
        return Completion(True, "oracle: the reference operations are done")


async def keep_serving(cfg: AgentHostConfig, *, phones: int, seed: int, out_dir: Path,
                       tasks: Sequence[type[Task]], broker_port: int = 1883,
                       out: object = None) -> None:
    """The demo's fleet and oracle on a broker clients can reach, until cancelled."""
    stream: Any = out or sys.stdout
    if not cfg.bus.url:  # the demo ran on a free port: clients need the configured one
        cfg = msgspec.structs.replace(cfg, broker=msgspec.structs.replace(
            cfg.broker, port=broker_port))
    fleet = await anyio.to_thread.run_sync(SimFleet(phones, seed=seed).start)
    examples = [f"{t.task_id()} ({t(seed).instruction})" for t in tasks[:3]]

    def policy_for(serial: str, _instr: Instruction) -> Policy:
        phone = fleet.phone(serial)
        assert isinstance(phone, SimPhone)
        return DemoOracle(phone, seed, examples)

    host = agent_host(cfg, policy_for, source=FixedDevices(fleet.serials),
                      record_dir=out_dir / "kept", progress=False)
    try:
        async with anyio.create_task_group() as tg:
            url = await tg.start(host.run)
            print(f"demo: kept running: {phones} simulated phones ({', '.join(fleet.serials)}) "
                  f"and the oracle planner on {url}\n"
                  f"  drive them from an MCP client: mobagent mcp --broker {url}\n"
                  f"  or: mobagent submit --broker {url} {fleet.serials[0]} 'settings-1'\n"
                  "Ctrl-C to stop", file=stream, flush=True)
    finally:
        await anyio.to_thread.run_sync(fleet.stop)
