"""Colours (light and dark, Material 3 flavoured) and the dp/sp metrics of one screen."""

from __future__ import annotations

from dataclasses import dataclass

RGB = tuple[int, int, int]


def hex_rgb(value: str) -> RGB:
    """'#RRGGBB' -> (r, g, b); a clear error for anything else."""
    v = value.lstrip("#")
    if len(v) != 6:
        raise ValueError(f"colour {value!r} is not #RRGGBB")
    try:
        return (int(v[0:2], 16), int(v[2:4], 16), int(v[4:6], 16))
    except ValueError:
        raise ValueError(f"colour {value!r} is not #RRGGBB") from None


@dataclass(frozen=True)
class Theme:
    dark: bool
    bg: RGB
    surface: RGB  # cards, search bars, dialogs
    surface_high: RGB  # top app bar when scrolled, chips
    text: RGB
    text_muted: RGB
    primary: RGB
    on_primary: RGB
    primary_container: RGB
    on_primary_container: RGB
    outline: RGB
    divider: RGB
    scrim: RGB
    keyboard_bg: RGB
    key_bg: RGB
    key_special: RGB
    nav_bg: RGB
    toggle_off_track: RGB
    toggle_off_thumb: RGB


LIGHT = Theme(
    dark=False, bg=(254, 247, 255), surface=(243, 237, 247), surface_high=(236, 230, 240),
    text=(29, 27, 32), text_muted=(73, 69, 79), primary=(103, 80, 164), on_primary=(255, 255, 255),
    primary_container=(234, 221, 255), on_primary_container=(33, 0, 93), outline=(121, 116, 126),
    divider=(202, 196, 208), scrim=(0, 0, 0), keyboard_bg=(232, 234, 237), key_bg=(255, 255, 255),
    key_special=(200, 204, 212), nav_bg=(243, 237, 247), toggle_off_track=(231, 224, 236),
    toggle_off_thumb=(121, 116, 126),
)
DARK = Theme(
    dark=True, bg=(20, 18, 24), surface=(33, 31, 38), surface_high=(43, 41, 48),
    text=(230, 224, 233), text_muted=(202, 196, 208), primary=(208, 188, 255), on_primary=(56, 30, 114),
    primary_container=(79, 55, 139), on_primary_container=(234, 221, 255), outline=(147, 143, 153),
    divider=(73, 69, 79), scrim=(0, 0, 0), keyboard_bg=(32, 33, 36), key_bg=(60, 64, 67),
    key_special=(45, 48, 52), nav_bg=(33, 31, 38), toggle_off_track=(54, 52, 59),
    toggle_off_thumb=(147, 143, 153),
)


@dataclass(frozen=True)
class Metrics:
    """Android's units: 1 dp = density/160 px; sp is dp times the user's font scale."""

    density: int = 420
    font_scale: float = 1.0

    def dp(self, v: float) -> int:
        return round(v * self.density / 160)

    def sp(self, v: float) -> int:
        return round(v * self.density / 160 * self.font_scale)


# Text styles: (size in sp, weight), after Material 3's type scale.
TEXT_STYLES: dict[str, tuple[float, str]] = {
    "display": (36, "regular"),
    "headline": (28, "regular"),
    "title": (22, "regular"),
    "subtitle": (16, "medium"),
    "body": (16, "regular"),
    "body2": (14, "regular"),
    "label": (14, "medium"),
    "caption": (12, "regular"),
}
