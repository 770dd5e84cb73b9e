"""The oracle planner's script fixes (host/oracle.py), on synthetic step histories."""

from __future__ import annotations

import pytest

from actors.planner import StepContext
from host.oracle import MAX_SCROLLS, OraclePolicy
from models.llm.prompts.shared import PastStep
from protocol.operations import ClickText, OpenApp, Operation, PageDown, Stop, TypeText, Wait
from sim.eval.tasks import get_task

pytestmark = pytest.mark.anyio


async def _run(policy: OraclePolicy, outcomes: list[tuple[str, str | None]]) -> list[Operation]:
    """Ask the policy step by step; each issued operation gets the next (result, verdict)."""
    history: list[PastStep] = []
    issued: list[Operation] = []
    for step, (result, verdict) in enumerate([*outcomes, ("done", "ok")], 1):
        d = await policy.decide(StepContext("x", b"", history=tuple(history), step=step))
        assert d.operation is not None
        issued.append(d.operation)
        if isinstance(d.operation, Stop):
            break
        history.append(PastStep(action=d.operation, result=result, verdict=verdict))
    return issued


async def test_a_target_not_found_is_retried_once_after_a_wait() -> None:
    task = get_task("settings-1")(0)  # Open app (Settings), Click text (Display), (Dark mode)
    ops = await _run(OraclePolicy(task), [("done", "ok"), ("not found", None), ("done", "ok"),
                                          ("done", "ok"), ("done", "ok"), ("done", "ok")])
    assert ops == [OpenApp("Settings"), ClickText("Display"), Wait(), ClickText("Display"),
                   ClickText("Dark mode"), Stop()]


async def test_a_text_still_missing_is_looked_for_below_the_fold() -> None:
    """After the wait and the retry, a text target is looked for a screen further down."""
    task = get_task("settings-1")(0)
    ops = await _run(OraclePolicy(task), [("done", "ok"), ("not found", None), ("done", "ok"),
                                          ("not found", None), ("done", "ok"), ("done", "ok"),
                                          ("done", "ok"), ("done", "ok")])
    assert ops == [OpenApp("Settings"), ClickText("Display"), Wait(), ClickText("Display"),
                   PageDown(), ClickText("Display"), ClickText("Dark mode"), Stop()]


async def test_a_miss_that_scrolling_does_not_fix_moves_on() -> None:
    task = get_task("settings-1")(0)
    misses = [("not found", None), ("done", "ok")]  # a try, then the wait or the scroll
    ops = await _run(OraclePolicy(task), [("done", "ok"), *misses * (2 + MAX_SCROLLS),
                                          ("done", "ok"), ("done", "ok")])
    assert ops == [OpenApp("Settings"), ClickText("Display"), Wait(), ClickText("Display"),
                   *[PageDown(), ClickText("Display")] * MAX_SCROLLS,
                   ClickText("Dark mode"), Stop()]


async def test_an_unchanged_tap_is_repeated_but_typing_never_is() -> None:
    task = get_task("notes-3")(0)  # Open app, Click icon (add), Click text (Note), Type, Save
    ops = await _run(OraclePolicy(task), [("done", "ok"), ("done", "unchanged"), ("done", "ok"),
                                          ("done", "ok"), ("done", "unchanged"), ("done", "ok"),
                                          ("done", "ok")])
    ref = task.reference
    assert ops == [ref[0], ref[1], ref[1], ref[2], ref[3], ref[4], Stop()]
    assert isinstance(ref[3], TypeText)


async def test_a_frame_of_a_screen_that_is_gone_is_waited_out() -> None:
    """The frame showed a spinner that has since ended: wait, never aim a tap at it."""
    import io

    from sim.phone import SimPhone
    from sim.phone_api import DeviceInfo

    def png(phone: SimPhone) -> bytes:
        buf = io.BytesIO()
        phone.screenshot().save(buf, "PNG")
        return buf.getvalue()

    task = get_task("settings-1")(0)  # Open app (Settings), Click text (Display), ...
    phone = SimPhone(DeviceInfo("oracle"), seed=0)
    phone.key(3)
    policy = OraclePolicy(task, phone)
    first = await policy.decide(StepContext("x", png(phone), step=1))
    assert first.operation == OpenApp("Settings")
    home = png(phone)  # the frame the agent took before the app's screen came up
    phone.open("com.android.settings")
    history = (PastStep(action=OpenApp("Settings"), result="done", verdict="ok"),)
    waits = [await policy.decide(StepContext("x", home, history=history, step=s))
             for s in (2, 3, 4)]
    assert [d.operation for d in waits[:2]] == [Wait(), Wait()]  # twice at most, then on
    assert waits[2].operation == ClickText("Display")
    again = OraclePolicy(task, phone)
    await again.decide(StepContext("x", png(phone), step=1))
    fresh = await again.decide(StepContext("x", png(phone), history=history, step=2))
    assert fresh.operation == ClickText("Display")  # a current frame: no wait
