"""Enter, Clear and Open app on the real adb path against a real SimPhone, and the fresh
frame after a failed action (issue 15)."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from actors.actuator import ActionFailed, ActuatorEngine
from actors.capture import CaptureEngine
from actors.perception import PerceptionEngine
from actors.planner import Decision, ScriptedPolicy, StepContext
from devices.adb import ADB_KEYBOARD, KEY_ENTER, AdbDevice
from protocol.messages import ActionDone
from protocol.operations import Clear, Enter, OpenApp
from sim.phone.apps import amazon_music, youtube
from sim.phone.apps.youtube import YouTubeState
from tests.agent.conftest import SimDevice, fast_settings, run_episode
from tests.fixtures.mosquitto import MosquittoBroker

pytestmark = [pytest.mark.anyio, pytest.mark.needs_adb]
SIZE = (1080, 2400)


def _reader(dev: AdbDevice, perception: PerceptionEngine):  # type: ignore[no-untyped-def]
    cap = CaptureEngine(dev)

    async def read_screen() -> list[tuple[str, tuple[int, int, int, int]]]:
        c = await cap.capture()
        return [(ln.text, (ln.box.left, ln.box.top, ln.box.right, ln.box.bottom))
                for ln in await perception.read_lines(c)]

    return read_screen


async def test_enter_submits_a_youtube_search_over_adb(sim_device: SimDevice) -> None:
    """`input keyevent 66` is what submits: the search screen has no search button."""
    phone = sim_device.phone
    phone.open(youtube.PACKAGE, "search")
    assert phone.focused_field() == "query"
    assert not phone.find("Search", kind="button")
    dev = AdbDevice(sim_device.serial)
    await dev.type_text("Stephen Curry")
    assert phone.state_as(youtube.PACKAGE, YouTubeState).searches == []  # typing alone: no search
    act = ActuatorEngine(dev)
    res = await act.perform(Enter(), point=None, size=SIZE)
    assert res.detail == "key ENTER"
    assert phone.state_as(youtube.PACKAGE, YouTubeState).searches == ["Stephen Curry"]
    assert phone.current_screen() == f"{youtube.PACKAGE}/results"
    await dev.key(KEY_ENTER)  # nothing focused now: another ENTER searches nothing
    assert phone.state_as(youtube.PACKAGE, YouTubeState).searches == ["Stephen Curry"]


async def test_clear_empties_the_field_and_the_old_text_stays_until_then(sim_device: SimDevice) -> None:
    phone = sim_device.phone
    phone.open(youtube.PACKAGE, "search")
    dev = AdbDevice(sim_device.serial)
    await dev.type_text("Stephen Curry")
    await dev.key(KEY_ENTER)
    phone.key(4)  # BACK: the search screen again, its box keeps the query
    phone.key(4)
    phone.open(youtube.PACKAGE, "search")
    st = phone.state_as(youtube.PACKAGE, YouTubeState)
    assert st.draft == "Stephen Curry"
    await dev.type_text(" lofi")  # typed text goes after the old one
    assert st.draft == "Stephen Curry lofi"
    act = ActuatorEngine(dev)
    await act.perform(Clear(), point=None, size=SIZE)  # Android 14: Ctrl+A, DEL
    assert st.draft == ""
    await dev.type_text("lofi music")
    assert st.draft == "lofi music"


async def test_clear_without_select_all_deletes_from_the_end(sim_device: SimDevice) -> None:
    """Before Android 13 there is no `input keycombination`: MOVE_END and DELs instead."""
    phone = sim_device.phone
    phone.info.sdk = 30
    phone.open(youtube.PACKAGE, "search")
    dev = AdbDevice(sim_device.serial)
    await dev.type_text("a fairly long query to delete")
    await dev.clear_text()
    assert phone.state_as(youtube.PACKAGE, YouTubeState).draft == ""


async def test_clear_through_the_adb_keyboard(sim_device: SimDevice) -> None:
    phone = sim_device.phone
    phone.open(youtube.PACKAGE, "search")
    dev = AdbDevice(sim_device.serial)
    user_ime = phone.current_ime()
    await dev.type_text("héllo")  # non-ASCII: through the ADB Keyboard
    assert phone.state_as(youtube.PACKAGE, YouTubeState).draft == "héllo"
    # ... and the user's keyboard is back after it (as Open-AutoGLM's Type does), with its
    # action key on the screen, which submits the search when tapped
    assert phone.current_ime() == user_ime != ADB_KEYBOARD
    assert [k for k in phone.find(kind="key") if k.desc == "Enter"]
    await dev.clear_text()  # its ADB_CLEAR_TEXT broadcast, the ADB Keyboard for the moment
    assert phone.state_as(youtube.PACKAGE, YouTubeState).draft == ""
    assert phone.current_ime() == user_ime
    await dev.type_text("你好")
    (key,) = [k for k in phone.find(kind="key") if k.desc == "Enter"]
    await dev.tap(*key.center)
    assert phone.state_as(youtube.PACKAGE, YouTubeState).searches[-1:] == ["你好"]


async def test_open_app_from_the_drawer_then_by_the_learnt_package(
    sim_device: SimDevice, shared_perception: PerceptionEngine,
) -> None:
    """No package map and a package name that does not say "Amazon Music": on seed 0 the
    app is not on the home screen, so the drawer is read; the second time it starts by
    package."""
    phone = sim_device.phone
    assert all(amazon_music.PACKAGE not in page for page in phone.home_screen_apps())
    dev = AdbDevice(sim_device.serial)
    act = ActuatorEngine(dev, packages={})
    read = _reader(dev, shared_perception)
    res = await act.perform(OpenApp("Amazon Music"), point=None, size=SIZE, read_screen=read)
    assert "app drawer" in res.detail, res.detail
    assert phone.foreground() == amazon_music.PACKAGE
    phone.key(3)
    res = await act.perform(OpenApp("amazon music"), point=None, size=SIZE, read_screen=read)
    assert res.detail == f"started {amazon_music.PACKAGE}"


async def test_open_app_matches_a_misspelt_label_and_a_package_name(
    sim_device: SimDevice, shared_perception: PerceptionEngine,
) -> None:
    phone = sim_device.phone
    dev = AdbDevice(sim_device.serial)
    act = ActuatorEngine(dev, packages={})
    read = _reader(dev, shared_perception)
    res = await act.perform(OpenApp("Mesages"), point=None, size=SIZE, read_screen=read)
    assert "labelled 'Messages'" in res.detail and phone.foreground().endswith(".messaging")
    # "YouTube" is a word of com.google.android.youtube (and of a widget package that has
    # no launcher activity, which is skipped)
    res = await act.perform(OpenApp("YouTube"), point=None, size=SIZE, read_screen=read)
    assert res.detail.startswith(f"started {youtube.PACKAGE}")


async def test_an_unknown_app_lists_the_closest_labels(
    sim_device: SimDevice, shared_perception: PerceptionEngine,
) -> None:
    dev = AdbDevice(sim_device.serial)
    act = ActuatorEngine(dev, packages={})
    with pytest.raises(ActionFailed) as err:
        await act.perform(OpenApp("Amazon Video"), point=None, size=SIZE,
                          read_screen=_reader(dev, shared_perception))
    msg = str(err.value)
    assert "closest installed apps: Amazon Music" in msg, msg
    assert sim_device.phone.foreground() == "com.android.launcher3"


class _FramesSeen(ScriptedPolicy):
    def __init__(self, *a: object, **kw: object) -> None:
        super().__init__(*a, **kw)  # type: ignore[arg-type]
        self.frames: list[bytes] = []

    async def decide(self, ctx: StepContext) -> Decision:
        self.frames.append(ctx.screenshot)
        return await super().decide(ctx)


@pytest.mark.needs_mosquitto
async def test_a_failed_open_app_is_followed_by_a_fresh_frame(
    sim_device: SimDevice, mosquitto: MosquittoBroker, shared_perception: PerceptionEngine,
) -> None:
    """The launcher fallback pressed HOME, swiped and opened the drawer before it failed:
    the next step must see the home screen, not the app it started on."""
    phone = sim_device.phone
    phone.open("com.android.settings")
    policy = _FramesSeen([OpenApp("Nonexistent Thing")])
    run = await run_episode(mosquitto, AdbDevice(sim_device.serial), policy,
                            fast_settings(completion_check=False, packages={}),
                            shared_perception, "Open an app that is not there.")
    done = run.of(ActionDone)
    assert len(done) == 1 and not done[0].ok and "closest installed apps" in done[0].detail
    assert len(policy.frames) == 2
    assert policy.frames[0] != policy.frames[1]
    await anyio.lowlevel.checkpoint()
    assert phone.foreground() == "com.android.launcher3"
