"""The device side of the ADB protocol for a simulated phone (see sim/phone_api.py)."""

from sim.adb.server import SimAdbServer
from sim.adb.wire import ProtocolError

__all__ = ["ProtocolError", "SimAdbServer"]
