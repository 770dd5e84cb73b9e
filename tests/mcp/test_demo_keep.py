"""``mobagent demo --keep``'s oracle: which task an instruction names, and the Ask otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from actors.planner import StepContext
from host.demo_keep import DemoOracle, match_task
from models.llm.prompts.shared import PastStep
from protocol.operations import Ask, Stop
from sim.eval.tasks import get_task

pytestmark = pytest.mark.anyio


def test_an_instruction_names_a_task_by_id_or_by_its_words() -> None:
    task = match_task("please run settings-1 now", 0)
    assert task is not None and task.task_id() == "settings-1"
    words = get_task("notes-2")(0).instruction
    found = match_task(words.upper() + "!", 0)
    assert found is not None and found.task_id() == "notes-2"
    assert match_task("make me a sandwich", 0) is None


async def test_an_unknown_instruction_asks_which_task_then_stops_without_one() -> None:
    phone: Any = object()  # never touched: no task is set up
    oracle = DemoOracle(phone, 0, ["settings-1 (Open settings)"])
    first = await oracle.decide(StepContext(instruction="make me a sandwich", screenshot=b""))
    assert isinstance(first.operation, Ask) and "settings-1" in first.operation.question
    past = PastStep(action=first.operation, result="answered: no idea")
    second = await oracle.decide(StepContext(instruction="make me a sandwich", screenshot=b"",
                                             history=(past,)))
    assert isinstance(second.operation, Stop)
