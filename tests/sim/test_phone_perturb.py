"""Seeds: 0 is canonical; other seeds perturb the phone, the same way every time."""

from __future__ import annotations

from dataclasses import dataclass

from PIL import ImageChops

from sim.phone import SimPhone
from sim.phone.apps import notes
from sim.phone.system import SETTINGS_PACKAGE
from sim.phone_api import DeviceInfo

SEEDS = range(1, 9)


def launcher_labels(p: SimPhone) -> list[str]:
    p.key(3)
    return [e.text for e in p.find(kind="app_icon")]


@dataclass(frozen=True)
class Profile:
    """What a seed decided, as seen from outside."""

    launcher: tuple[str, ...]
    dark: bool
    font_scale: float
    popups: tuple[bool, ...]
    notes: tuple[str, ...]
    settings: tuple[str, ...]


def profile(seed: int) -> Profile:
    p = SimPhone(DeviceInfo("p"), seed=seed)
    p.clock = lambda: 0.0
    home = launcher_labels(p)
    popups = []
    for pkg in p.packages():
        if p.launch(pkg) and pkg not in ("com.android.launcher3",):
            popups.append(p.dialog_visible())
            p.key(3)
    p.open(notes.PACKAGE)
    p.settle()
    note_order = [e.text for e in p.find(kind="list_item")]
    p.open(SETTINGS_PACKAGE)
    p.settle()
    settings_order = [e.text for e in p.find(kind="list_item")]
    return Profile(tuple(home), p.system.dark_mode, p.system.font_scale, tuple(popups),
                   tuple(note_order), tuple(settings_order))


def test_seed_zero_is_canonical() -> None:
    p = SimPhone(DeviceInfo("p"), seed=0)
    assert launcher_labels(p)[:4] == [a.label for a in p.apps()][:4]
    assert not p.system.dark_mode and p.system.font_scale == 1.0
    for pkg in p.packages():
        p.launch(pkg)
        assert not p.dialog_visible() and not p.loading()
    p.open(notes.PACKAGE)
    assert [e.text for e in p.find(kind="list_item")] == [n.title for n in
                                                          p.state_as(notes.PACKAGE, notes.NotesState).notes]


def test_perturbations_are_deterministic_per_seed() -> None:
    for seed in (0, 3):
        assert profile(seed) == profile(seed)
        a = SimPhone(DeviceInfo("p"), seed=seed).screenshot()
        b = SimPhone(DeviceInfo("p"), seed=seed).screenshot()
        assert ImageChops.difference(a, b).getbbox() is None


def test_perturbations_differ_across_seeds() -> None:
    base = profile(0)
    profiles = [profile(s) for s in SEEDS]
    assert all(p.launcher != base.launcher for p in profiles)  # launcher positions shuffled
    assert len({p.launcher for p in profiles}) == len(profiles)
    assert any(p.dark for p in profiles) and not all(p.dark for p in profiles)  # some dark
    assert len({p.font_scale for p in profiles}) > 1  # font scales vary
    assert any(any(p.popups) for p in profiles)  # pop-up dialogs appear on some launches
    assert any(p.settings != base.settings for p in profiles)  # list orders shuffled
    assert any(p.notes != base.notes for p in profiles)
    shots = {SimPhone(DeviceInfo("p"), seed=s).screenshot().tobytes() for s in (0, 1, 2)}
    assert len(shots) == 3


def test_loading_spinners_appear_on_some_seeds() -> None:
    seen = False
    for seed in SEEDS:
        p = SimPhone(DeviceInfo("p"), seed=seed)
        p.clock = lambda: 0.0
        for pkg in p.packages():
            p.launch(pkg)
            if p.find(kind="progress"):
                seen = True
                p.settle()
                assert not p.find(kind="progress")
            p.key(3)
    assert seen


def test_on_the_step_clock_a_spinner_lasts_screen_reads_not_seconds() -> None:
    """Seed 1's spinners last 0.8 s: two reads of 0.5 s, however long the host takes."""
    p = SimPhone(DeviceInfo("p"), seed=1)
    p.use_step_clock()
    spinning = next((pkg for pkg in p.packages() if p.launch(pkg) and p.loading()), None)
    assert spinning is not None, "seed 1 shows no spinner on any launch"
    assert p.loading()
    p.screen_read()
    assert p.loading()  # 0.5 s of 0.8
    p.screen_read()
    assert not p.loading()
