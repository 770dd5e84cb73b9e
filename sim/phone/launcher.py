"""The home screen and the app drawer.

The home screens (a wallpaper, an "At a glance" date, pages of app icons with labels, page
dots and a search pill) hold only some of the apps, chosen per seed (``home_pages``); as on
a phone, every app is in the app drawer, opened by swiping up on the home screen: a sheet
with a "Search apps" pill and all apps in alphabetical order, scrolled by swiping, closed by
a swipe down at its top, BACK or HOME."""

from __future__ import annotations

import functools
import random
import zlib
from collections.abc import Callable, Sequence
from datetime import datetime

from PIL import Image

from sim.phone.app import App
from sim.phone.canvas import Element, Layout
from sim.phone.theme import Theme, hex_rgb

LAUNCHER_PACKAGE = "com.android.launcher3"
LAUNCHER_COMPONENT = "com.android.launcher3/com.android.launcher3.uioverrides.QuickstepLauncher"
COLUMNS = 4
ROWS = 5
PER_PAGE = COLUMNS * ROWS


HOME_SEED0 = 12  # seed 0: the first apps of the canonical order, on one page


def page_count(n_apps: int) -> int:
    return max(1, -(-n_apps // PER_PAGE))


def home_pages(packages: Sequence[str], seed: int) -> list[list[str]]:
    """Which apps the home screens hold, page by page: on seed 0 the first ``HOME_SEED0`` of
    the canonical order; on other seeds 8 to 28 apps drawn and ordered by the seed (so an
    app may be on page 1, on page 2, or only in the drawer)."""
    if seed == 0:
        chosen = list(packages[:HOME_SEED0])
    else:
        rng = random.Random(zlib.crc32(f"home/{seed}".encode()))
        chosen = rng.sample(list(packages), min(len(packages), rng.randint(8, 28)))
    return [chosen[i:i + PER_PAGE] for i in range(0, len(chosen), PER_PAGE)] or [[]]


def drawer_order(apps: Sequence[App[object]]) -> list[App[object]]:
    return sorted(apps, key=lambda a: a.label.casefold())


@functools.lru_cache(maxsize=8)
def wallpaper(width: int, height: int, dark: bool) -> Image.Image:
    """A vertical gradient, dark enough that white labels read well (for people and OCR)."""
    top, bottom = ((18, 32, 64), (52, 28, 74)) if dark else ((36, 76, 140), (92, 60, 130))
    col = Image.new("RGB", (1, 256))
    col.putdata([tuple(round(a + (b - a) * i / 255) for a, b in zip(top, bottom, strict=True))
                 for i in range(256)])
    return col.resize((width, height), Image.Resampling.BILINEAR)


def _app_icon(lay: Layout, app: App[object], cx: int, cy: int, cell_w: int, label_rgb: tuple[int, int, int],
              launch: Callable[[str], None]) -> None:
    icon_d = lay.dp(56)
    label_size = lay.sp(12)
    lay.ellipse((cx - icon_d // 2, cy - icon_d // 2, cx + icon_d // 2, cy + icon_d // 2),
                hex_rgb(app.color))
    lay.icon(cx, cy, app.icon, lay.dp(30), (255, 255, 255))
    label = lay.ellipsize(app.label, label_size, "regular", cell_w - lay.dp(8))
    lw = lay.text_width(label, label_size, "regular")
    lay.text(cx - lw // 2, cy + icon_d // 2 + lay.dp(6), label, label_size, "regular", label_rgb)
    box = (cx - cell_w // 2 + lay.dp(4), cy - icon_d // 2 - lay.dp(4), cx + cell_w // 2 - lay.dp(4),
           cy + icon_d // 2 + lay.dp(8) + round(label_size * 1.4))
    pkg = app.package
    lay.element(Element("app_icon", app.label, box, True, app.icon, app.label, pkg),
                lambda pkg=pkg: launch(pkg))  # type: ignore[misc]


def layout_drawer(lay: Layout, apps: Sequence[App[object]], theme: Theme, scroll: int, top: int,
                  bottom: int, launch: Callable[[str], None], search: Callable[[], None]) -> int:
    """The app drawer scrolled by ``scroll`` px; returns its largest scroll."""
    w = lay.width
    pill_h = lay.dp(52)
    pill = (lay.dp(16), top + lay.dp(12), w - lay.dp(16), top + lay.dp(12) + pill_h)
    grid_top = pill[3] + lay.dp(16)
    cell_w = w // COLUMNS
    cell_h = lay.dp(72) + round(lay.sp(12) * 1.4) + lay.dp(16)
    rows = -(-len(apps) // COLUMNS)
    max_scroll = max(0, grid_top + rows * cell_h + lay.dp(16) - bottom)
    scroll = min(scroll, max_scroll)
    lay.clip = (0, grid_top, w, bottom)
    for i, app in enumerate(apps):
        r, c = divmod(i, COLUMNS)
        cy = grid_top + r * cell_h + lay.dp(8) + lay.dp(28) - scroll
        if cy + cell_h < grid_top or cy - cell_h > bottom:
            continue
        _app_icon(lay, app, c * cell_w + cell_w // 2, cy, cell_w, theme.text, launch)
    lay.clip = None
    lay.rect(pill, theme.surface_high, pill_h // 2)
    muted = theme.text_muted
    lay.icon(pill[0] + lay.dp(28), (pill[1] + pill[3]) // 2, "search", lay.dp(24), muted)
    size = lay.sp(16)
    lay.text(pill[0] + lay.dp(56), (pill[1] + pill[3]) // 2 - round(size * 0.65), "Search apps",
             size, "regular", muted)
    lay.element(Element("search_bar", "Search apps", pill, True, "search", "Search apps"), search)
    return max_scroll


def layout_launcher(lay: Layout, apps: Sequence[App[object]], page: int, now: datetime,
                    top: int, bottom: int, launch: Callable[[str], None],
                    search: Callable[[], None], n_pages: int = 0) -> None:
    """Home page ``page`` holding ``apps`` (at most ``PER_PAGE``), of ``n_pages`` pages."""
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
    for i, app in enumerate(apps[:PER_PAGE]):
        r, c = divmod(i, COLUMNS)
        cy = grid_top + r * cell_h + lay.dp(8) + icon_d // 2
        _app_icon(lay, app, c * cell_w + cell_w // 2, cy, cell_w, white, launch)
    n = n_pages or 1
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
