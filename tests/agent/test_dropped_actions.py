"""One action a step (issue 39): a reply with several actions runs the first; its Plan event
records the others, and the next prompt (and only the next) tells the model they were not
run. End to end through the episode on a real broker and a rendered SimPhone."""

from __future__ import annotations

from dataclasses import replace

import pytest

from actors.perception import PerceptionEngine
from actors.planner import Decision, ScriptedPolicy, StepContext
from devices.adb import AdbDevice
from protocol.messages import ActionDone, Plan
from protocol.operations import Back
from tests.agent.conftest import SimDevice, fast_settings, run_episode
from tests.fixtures.mosquitto import MosquittoBroker

pytestmark = [pytest.mark.anyio, pytest.mark.needs_adb, pytest.mark.needs_mosquitto]

DROPPED = ("TYPE [weather for New York city]", "PRESS_ENTER")


class _TwoActionsFirst(ScriptedPolicy):
    """Step 1 answers three actions (the first runs); records every step's feedback."""

    def __init__(self) -> None:
        super().__init__([Back(), Back()])
        self.feedback: list[tuple[str, ...]] = []

    async def decide(self, ctx: StepContext) -> Decision:
        self.feedback.append(ctx.feedback)
        d = await super().decide(ctx)
        return replace(d, dropped=DROPPED) if len(self.feedback) == 1 else d


async def test_the_dropped_actions_are_told_in_the_next_prompt_only(
    sim_device: SimDevice, mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
) -> None:
    sim_device.phone.open("com.android.settings")
    policy = _TwoActionsFirst()
    run = await run_episode(mosquitto, AdbDevice(sim_device.serial), policy,
                            fast_settings(completion_check=False), shared_perception,
                            "Go back twice.")
    assert len(policy.feedback) >= 3, policy.feedback
    first, second, third = policy.feedback[:3]
    said = [f for f in second if "Not run:" in f]
    assert not [f for f in first if "Not run:" in f]
    # the step after the reply: how many it had, which one ran, each one that did not
    assert len(said) == 1, second
    assert "3 actions" in said[0] and "BACK" in said[0].upper(), said[0]
    assert all(d in said[0] for d in DROPPED), said[0]
    assert not [f for f in third if "Not run:" in f], third  # said once
    plans = run.of(Plan)
    assert plans[0].dropped == DROPPED and not plans[1].dropped
    # the first action ran, the others did not: two Backs in all, one a step
    assert sum(1 for a in run.of(ActionDone) if a.ok) == 2
