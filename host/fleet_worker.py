"""The agent loop as the fleet's per-phone worker: ``host.fleet`` calls ``run_episode``.

The fleet stays generic over its work, so this adapter lives here: one ``DeviceAgent`` per phone,
kept in the handle's per-phone state (reset when the phone returns; the phone is registered
with the host's services while it is there and unregistered when its group ends), with the fleet's
Cancel and the episode's control messages (Approve, Answer, Steer, which the fleet routes to
the running episode) forwarded to the agent's control inbox. The agent runs with
``announce=False``: the fleet publishes the episode's start and its one outcome.

For the step actors to talk over the bus, build the agents with the host's
``AgentServices`` (``DeviceAgent(..., services=services)``) and run ``services.actors()``
next to the fleet (``run_fleet(bus, fleet, extra_actors=services.actors())``); without
them each agent runs a private loopback set in-process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from actors.episode import DeviceAgent, EpisodeOutcome
from host.fleet import DeviceHandle, EpisodeControl
from protocol.messages import Cancel, Instruction
from runtime import topics

RunEpisode = Callable[[DeviceHandle, Instruction, EpisodeControl], Awaitable[EpisodeOutcome]]


def serve_phone(agent: DeviceAgent, handle: DeviceHandle) -> None:
    """Register the phone with the host's services (which own its per-device state) for
    as long as this phone generation lasts; a loopback agent's private services already
    serve it."""
    if agent.services.is_loopback:
        return
    entry = agent.services.register(agent.device, agent.settings)
    handle.closers.append(lambda: agent.services.unregister(handle.serial, entry))


class AgentWork:
    """A fleet ``run_episode`` that runs each instruction on the phone's ``DeviceAgent``.

    Between episodes the phone's agent streams frames (``agent.stream_interval_s``), so a
    dashboard or ``watch`` shows an idle phone's screen too; the fleet runs that in the
    phone's group (``between_episodes``), which ends when the phone goes.
    """

    def __init__(self, make_agent: Callable[[DeviceHandle], DeviceAgent]) -> None:
        self.make_agent = make_agent

    def agent(self, handle: DeviceHandle) -> DeviceAgent:
        """The phone generation's agent, made and registered on first use."""
        agent = handle.state.get("agent")
        if not isinstance(agent, DeviceAgent):
            agent = self.make_agent(handle)
            handle.state["agent"] = agent
            serve_phone(agent, handle)
        return agent

    async def between_episodes(self, handle: DeviceHandle) -> None:
        await self.agent(handle).stream_frames()

    async def __call__(self, handle: DeviceHandle, instr: Instruction,
                       control: EpisodeControl) -> EpisodeOutcome:
        agent = self.agent(handle)
        topic = topics.device_control(handle.serial)
        async with anyio.create_task_group() as tg:

            async def forward_cancel() -> None:
                await control.wait_cancelled()
                await agent.handle(topic, Cancel(reason=control.reason))

            async def forward_control() -> None:
                async for msg in control.inbox:
                    await agent.handle(topic, msg)

            tg.start_soon(forward_cancel)
            tg.start_soon(forward_control)
            outcome = await agent.run_episode(instr, announce=False)
            tg.cancel_scope.cancel()
        return outcome


def agent_worker(make_agent: Callable[[DeviceHandle], DeviceAgent]) -> AgentWork:
    """The fleet's work for the agent: ``make_agent`` builds each phone generation's agent."""
    return AgentWork(make_agent)
