"""A device's retained status with its own last will.

MQTT gives one will per connection, so each device gets a small connection of its own
whose will says ``offline``: if the host dies, every device it served goes ``offline``
too, and a late subscriber sees that (the status is retained). ``DevicePresence`` also
publishes ``offline`` on a clean close.
"""

from __future__ import annotations

from types import TracebackType
from typing import Literal

from runtime import topics
from runtime.bus import BrokerAddress, Bus, Protocol
from runtime.config import BusConfig
from runtime.messages import DeviceStatus

State = Literal["idle", "busy", "offline"]


class DevicePresence:
    """``async with DevicePresence(cfg, address, serial, host) as p: await p.set("busy")``."""

    def __init__(
        self,
        cfg: BusConfig,
        address: BrokerAddress,
        serial: str,
        host: str,
        *,
        protocol: Protocol | None = None,
    ) -> None:
        self.serial = topics.check_name(serial)
        self.host = host
        self.topic = topics.device_status(serial)
        self.state: State = "offline"
        self._bus = Bus(
            cfg, address,
            client_id=f"mobagent-dev-{host}-{serial}"[:100],
            persistent=False,  # nothing to receive: only the will matters
            will=(self.topic, DeviceStatus(state="offline", host=host, device=serial)),
            protocol=protocol,
        )

    async def __aenter__(self) -> DevicePresence:
        await self._bus.__aenter__()
        try:
            await self.set("idle")
        except BaseException:
            await self._bus.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        self.state = "offline"
        return await self._bus.__aexit__(et, exc, tb)

    async def set(self, state: State, *, episode_id: str = "", detail: str = "") -> None:
        """Publish the device's state, retained (QoS 1)."""
        self.state = state
        await self._bus.publish(self.topic, DeviceStatus(
            state=state, host=self.host, detail=detail, device=self.serial, episode_id=episode_id,
        ), retain=True)
