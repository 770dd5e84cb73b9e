"""The home screen: a wallpaper, an "At a glance" date, pages of app icons with labels,
page dots and a search pill. Apps spill onto further pages, so swiping is sometimes needed."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime

from PIL import Image

from sim.phone.app import App
from sim.phone.canvas import Element, Layout
from sim.phone.theme import hex_rgb

LAUNCHER_PACKAGE = "com.android.launcher3"
LAUNCHER_COMPONENT = "com.android.launcher3/com.android.launcher3.uioverrides.QuickstepLauncher"
COLUMNS = 4
ROWS = 5
PER_PAGE = COLUMNS * ROWS


def page_count(n_apps: int) -> int:
    return max(1, -(-n_apps // PER_PAGE))


@functools.lru_cache(maxsize=8)
def wallpaper(width: int, height: int, dark: bool) -> Image.Image:
    """A vertical gradient, dark enough that white labels read well (for people and OCR)."""
    top, bottom = ((18, 32, 64), (52, 28, 74)) if dark else ((36, 76, 140), (92, 60, 130))
    col = Image.new("RGB", (1, 256))
    col.putdata([tuple(round(a + (b - a) * i / 255) for a, b in zip(top, bottom, strict=True))
                 for i in range(256)])
    return col.resize((width, height), Image.Resampling.BILINEAR)


def layout_launcher(lay: Layout, apps: Sequence[App[object]], page: int, now: datetime,
                    top: int, bottom: int, launch: Callable[[str], None],
                    search: Callable[[], None]) -> None:
    white = (255, 255, 255)
    w = lay.width
    y = top + lay.dp(24)
    if page == 0:  # "At a glance"
        size = lay.sp(22)
        date = now.strftime("%A, %b %-d")
        tb = lay.text(lay.dp(24), y, date, size, "regular", white)
        lay.element(Element("text", date, tb, id="glance"))
        s2 = lay.sp(14)
        tb2 = lay.text(lay.dp(24), y + round(size * 1.4), "18°C  Partly cloudy", s2, "regular", white)
        lay.element(Element("text", "18°C  Partly cloudy", tb2))
    grid_top = top + lay.dp(120)
    # the search pill and page dots sit at the bottom
    pill_h = lay.dp(56)
    pill = (lay.dp(16), bottom - lay.dp(16) - pill_h, w - lay.dp(16), bottom - lay.dp(16))
    dots_y = pill[1] - lay.dp(24)
    cell_w = w // COLUMNS
    cell_h = min(lay.dp(112), (dots_y - lay.dp(16) - grid_top) // ROWS)
    icon_d = lay.dp(56)
    label_size = lay.sp(12)
    for i, app in enumerate(apps[page * PER_PAGE:(page + 1) * PER_PAGE]):
        r, c = divmod(i, COLUMNS)
        cx = c * cell_w + cell_w // 2
        cy = grid_top + r * cell_h + lay.dp(8) + icon_d // 2
        lay.ellipse((cx - icon_d // 2, cy - icon_d // 2, cx + icon_d // 2, cy + icon_d // 2),
                    hex_rgb(app.color))
        lay.icon(cx, cy, app.icon, lay.dp(30), white)
        label = lay.ellipsize(app.label, label_size, "regular", cell_w - lay.dp(8))
        lw = lay.text_width(label, label_size, "regular")
        lay.text(cx - lw // 2, cy + icon_d // 2 + lay.dp(6), label, label_size, "regular", white)
        box = (c * cell_w + lay.dp(4), cy - icon_d // 2 - lay.dp(4), (c + 1) * cell_w - lay.dp(4),
               cy + icon_d // 2 + lay.dp(8) + round(label_size * 1.4))
        pkg = app.package
        lay.element(Element("app_icon", app.label, box, True, app.icon, app.label, pkg),
                    lambda pkg=pkg: launch(pkg))  # type: ignore[misc]
    n = page_count(len(apps))
    r = lay.dp(4)
    span = (n - 1) * lay.dp(16)
    for i in range(n):
        dx = w // 2 - span // 2 + i * lay.dp(16)
        lay.ellipse((dx - r, dots_y - r, dx + r, dots_y + r), white if i == page else (150, 150, 170))
    lay.element(Element("page_indicator", f"Page {page + 1} of {n}",
                        (w // 2 - span // 2 - r, dots_y - r, w // 2 + span // 2 + r, dots_y + r),
                        desc=f"Page {page + 1} of {n}"))
    lay.rect(pill, (238, 240, 244), pill_h // 2)
    lay.icon(pill[0] + lay.dp(28), (pill[1] + pill[3]) // 2, "search", lay.dp(24), (68, 71, 70))
    lay.icon(pill[2] - lay.dp(28), (pill[1] + pill[3]) // 2, "mic", lay.dp(24), (68, 71, 70))
    lay.element(Element("search_bar", "", pill, True, "search", "Search"), search)
