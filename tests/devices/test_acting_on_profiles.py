"""The driver (devices/adb.py) and the preflight (devices/preflight.py) on the simulated phone's
real-phone profiles, through the real adb server: what the first hour on a rack needs."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from devices import preflight as pf
from devices.adb import AdbDevice, DeviceError
from sim.adb.server import SimAdbServer
from sim.phone_api import DeviceInfo
from sim.profiles import PROFILES
from sim.stand_in import RecordingPhone
from tests.fixtures.adb import AdbServer

pytestmark = [pytest.mark.anyio, pytest.mark.needs_adb]
REAL = [name for name, p in PROFILES.items() if p.real]
Make = Callable[..., tuple[RecordingPhone, AdbDevice]]


@pytest.fixture
def profiled(adb_server: AdbServer) -> Iterator[Make]:
    servers: list[SimAdbServer] = []

    def make(name: str, *, usb_security: bool = True, ime_warmup_s: float = 0.0,
             **state: object) -> tuple[RecordingPhone, AdbDevice]:
        phone = RecordingPhone(DeviceInfo.for_profile(f"act{len(servers)}", name))
        phone.device_state.usb_security = usb_security
        phone.faults.ime_warmup_s = ime_warmup_s
        for key, value in state.items():
            setattr(phone.device_state, key, value)
        sim = SimAdbServer(phone).start()
        servers.append(sim)
        return phone, AdbDevice(adb_server.connect(sim.port).serial)

    yield make
    for sim in servers:
        adb_server.disconnect(sim.port)
        sim.stop()


@pytest.mark.parametrize("name", REAL)
async def test_a_sleeping_locked_phone_is_woken_and_unlocked(profiled: Make, name: str) -> None:
    phone, dev = profiled(name, awake=False, locked=True)
    pre = await pf.ready_phone(dev)
    assert pre.ready, pre.summary
    assert phone.device_state.awake and not phone.device_state.locked


@pytest.mark.parametrize("name", ["pixel-14", "samsung-13"])
async def test_a_pin_is_reported_and_never_typed(profiled: Make, name: str) -> None:
    phone, dev = profiled(name, locked=True, pin="1234")
    pre = await pf.ready_phone(dev)
    assert not pre.ready and "keyguard" in pre.summary and "PIN" in pre.summary
    assert phone.device_state.locked and phone.device_state.typed == ""


@pytest.mark.parametrize("name", REAL)
async def test_launch_screenshot_and_foreground_app(profiled: Make, name: str) -> None:
    phone, dev = profiled(name)
    pkg = next(p for p in phone.packages() if p.startswith("com.mobagent.") and "launcher" not in p)
    await dev.start_app(pkg)  # resolve-activity + am start -n; monkey would exit 251 here
    assert await dev.current_app() == pkg
    shot = await dev.screenshot()  # the foldable's warning before the PNG is not an error
    assert shot.width > 0 and shot.height > 0


async def test_a_disabled_keyboard_that_starts_slowly_still_gets_the_text(profiled: Make) -> None:
    phone, dev = profiled("pixel-14", adb_keyboard="disabled", ime_warmup_s=0.4)
    await dev.type_text("héllo wörld")
    assert phone.calls_of("type_text") == [("héllo wörld",)]
    assert phone.device_state.adb_keyboard == "enabled"


async def test_xiaomi_input_refused_names_the_security_setting(profiled: Make) -> None:
    _phone, dev = profiled("xiaomi-hyperos", usb_security=False)
    with pytest.raises(DeviceError, match=r"USB debugging \(Security settings\)") as err:
        await dev.tap(10, 10)
    assert err.value.failure is not None and err.value.failure.kind == "inject_events_permission"
    assert "\tat " not in str(err.value)  # the cause and its fix, not stack frames
