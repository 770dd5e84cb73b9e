"""The episode's control inbox: approvals for their step, answers in order, steers once."""

from __future__ import annotations

import anyio
import pytest

from actors.control import ControlInbox
from protocol.messages import Answer, Approve

pytestmark = pytest.mark.anyio


async def test_an_approval_is_for_its_step_or_any_step() -> None:
    inbox = ControlInbox()
    inbox.add(Approve(step=3, approved=False, note="not that one"))
    inbox.add(Approve(step=0, note="any"))
    got = await inbox.approval(2, timeout_s=1)
    assert got is not None and got.note == "any"
    got = await inbox.approval(3, timeout_s=1)
    assert got is not None and not got.approved
    assert await inbox.approval(3, timeout_s=0.05) is None


async def test_a_waiting_episode_wakes_when_the_answer_arrives() -> None:
    inbox = ControlInbox()
    got: list[Answer | None] = []
    async with anyio.create_task_group() as tg:
        async def wait() -> None:
            got.append(await inbox.answer(timeout_s=5))
        tg.start_soon(wait)
        await anyio.sleep(0.05)
        inbox.add(Answer(text="first"))
        inbox.add(Answer(text="second"))
    assert [a.text for a in got if a] == ["first"]
    second = await inbox.answer(timeout_s=1)
    assert second is not None and second.text == "second"


async def test_steers_are_taken_once_and_clear_forgets_the_rest() -> None:
    inbox = ControlInbox()
    inbox.add("left")
    inbox.add("then up")
    assert inbox.take_steers() == ["left", "then up"]
    assert inbox.take_steers() == []
    inbox.add(Answer(text="stale"))
    inbox.clear()
    assert await inbox.answer(timeout_s=0.05) is None
