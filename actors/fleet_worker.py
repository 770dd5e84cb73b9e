"""The agent loop as the fleet's per-phone worker: ``runtime.fleet`` calls ``run_episode``.

runtime/ cannot import actors/, so this adapter lives here: one ``DeviceAgent`` per phone,
kept in the handle's per-phone state (reset when the phone returns), with the fleet's
Cancel forwarded to the agent's control inbox.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from actors.episode import DeviceAgent
from runtime import topics
from runtime.fleet import DeviceHandle, EpisodeControl
from runtime.messages import Cancel, EpisodeFinished, Instruction

RunEpisode = Callable[[DeviceHandle, Instruction, EpisodeControl], Awaitable[EpisodeFinished]]


def agent_worker(make_agent: Callable[[DeviceHandle], DeviceAgent]) -> RunEpisode:
    """A fleet ``run_episode`` that runs each instruction on the phone's ``DeviceAgent``."""

    async def run_episode(handle: DeviceHandle, instr: Instruction,
                          control: EpisodeControl) -> EpisodeFinished:
        agent = handle.state.get("agent")
        if not isinstance(agent, DeviceAgent):
            agent = handle.state["agent"] = make_agent(handle)
        async with anyio.create_task_group() as tg:

            async def forward_cancel() -> None:
                await control.wait_cancelled()
                await agent.handle(topics.device_control(handle.serial),
                                   Cancel(reason=control.reason))

            tg.start_soon(forward_cancel)
            outcome = await agent.run_episode(instr)
            tg.cancel_scope.cancel()
        return EpisodeFinished(instruction_id=instr.id, status=outcome.status,
                               reason=outcome.reason, steps=outcome.steps)

    return run_episode
