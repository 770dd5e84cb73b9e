"""Phone-wide settings (what the Settings app edits) and the seed's perturbations."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

SETTINGS_PACKAGE = "com.android.settings"


@dataclass
class SystemSettings:
    """The Settings app's state; the phone reads it for theme, status bar and font scale."""

    dark_mode: bool = False
    airplane_mode: bool = False
    wifi: bool = True
    bluetooth: bool = False
    show_network_speed: bool = False  # "Network speed in status bar"
    notifications_on_lock_screen: bool = True
    battery_percentage: bool = True
    font_scale: float = 1.0
    brightness: int = 60  # percent
    ringtone: str = "Chime"
    battery_level: int = 85
    search_query: str = ""  # the Settings app's search box


@dataclass(frozen=True)
class Perturbation:
    """What a seed changes. Seed 0 is the canonical phone: nothing changes."""

    seed: int
    shuffle_launcher: bool = False
    dark_theme: bool = False
    font_scale: float = 1.0
    popup_chance: float = 0.0  # per app launch: a "Rate this app" or permission dialog
    loading_chance: float = 0.0  # per app launch / navigation: a spinner that ignores taps
    loading_s: float = 0.6
    now: datetime = datetime(2024, 3, 15, 10, 30)

    @classmethod
    def from_seed(cls, seed: int) -> Perturbation:
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, not {seed!r}")
        if seed == 0:
            return cls(seed=0)
        rng = random.Random(seed * 7919 + 17)
        return cls(
            seed=seed,
            shuffle_launcher=True,
            dark_theme=rng.random() < 0.5,
            font_scale=rng.choice((0.9, 1.0, 1.15, 1.3)),
            popup_chance=rng.choice((0.25, 0.5)),
            loading_chance=rng.choice((0.3, 0.5)),
            loading_s=rng.choice((0.4, 0.8)),
            now=datetime(2024, 3, 15, 10, 30) + timedelta(days=rng.randrange(0, 300),
                                                          minutes=rng.randrange(0, 24 * 60)),
        )
