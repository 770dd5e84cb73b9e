"""System UI drawn around apps: status bar, navigation bar, top app bar, bottom
navigation, floating action button, dialogs, toasts, the loading spinner and the soft
keyboards (a Gboard-like QWERTY and the ADB Keyboard's small bar)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from sim.phone.canvas import Action, Box, Element, Layout
from sim.phone.system import SystemSettings
from sim.phone.widgets import BottomNav, Dialog, Fab, IconButton, Widget
from sim.phone.widgets import bind as _bind

STATUS_DP = 32
NAV_DP = 48
TOP_BAR_DP = 64
BOTTOM_NAV_DP = 80
KEYBOARD_DP = 264
ADB_KEYBOARD_DP = 56

LETTERS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
SYMBOLS = ("1234567890", "@#$_&-+()/", "*\"':;!?")


def status_bar(lay: Layout, sysset: SystemSettings, now: datetime, on_wallpaper: bool) -> int:
    t = lay.theme
    h = lay.dp(STATUS_DP)
    fg = (255, 255, 255) if on_wallpaper or t.dark else (29, 27, 32)
    size = lay.dp(14)  # the status bar ignores the font scale, as on Android
    clock = now.strftime("%H:%M")
    box = lay.text(lay.dp(20), (h - round(size * 1.3)) // 2, clock, size, "medium", fg)
    lay.element(Element("status", clock, box, desc="Clock"))
    x = lay.width - lay.dp(16)
    isz = lay.dp(18)
    cy = h // 2
    if sysset.battery_percentage:
        pct = f"{sysset.battery_level}%"
        pw = lay.text_width(pct, size, "medium")
        x -= pw
        b = lay.text(x, (h - round(size * 1.3)) // 2, pct, size, "medium", fg)
        lay.element(Element("status", pct, b, desc="Battery"))
        x -= lay.dp(2)
    icons: list[tuple[str, str]] = [("battery_5_bar", "Battery")]
    if sysset.airplane_mode:
        icons.append(("airplanemode_active", "Airplane mode"))
    else:
        icons.append(("signal_cellular_alt", "Signal"))
        if sysset.wifi:
            icons.append(("wifi", "Wi-Fi"))
    if sysset.bluetooth:
        icons.append(("bluetooth", "Bluetooth"))
    for name, desc in icons:
        x -= isz + lay.dp(4)
        b = lay.icon(x + isz // 2, cy, name, isz, fg)
        lay.element(Element("status", "", b, icon=name, desc=desc))
    if sysset.show_network_speed:
        speed = "0 KB/s" if sysset.airplane_mode else "2.4 KB/s"
        ss = lay.dp(11)
        x -= lay.text_width(speed, ss, "medium") + lay.dp(8)
        b = lay.text(x, (h - round(ss * 1.3)) // 2, speed, ss, "medium", fg)
        lay.element(Element("status", speed, b, desc="Network speed"))
    return h


def nav_bar(lay: Layout, back: Action, home: Action, recents: Action, on_wallpaper: bool) -> Box:
    """The three-button navigation bar; its buttons work even while an app is loading."""
    t = lay.theme
    h = lay.dp(NAV_DP)
    top = lay.height - h
    if not on_wallpaper:
        lay.rect((0, top, lay.width, lay.height), t.nav_bg)
    fg = (255, 255, 255) if on_wallpaper or t.dark else (60, 60, 64)
    cy = top + h // 2
    third = lay.width // 3
    s = lay.dp(8)
    w2 = max(2, lay.dp(2))
    # back: a left-pointing triangle, home: a ring, overview: a square, as AOSP draws them
    bx = third // 2 + lay.dp(20)
    lay.poly([(bx + s, cy - s), (bx + s, cy + s), (bx - s, cy)], None, fg, w2)
    hx = third + third // 2
    lay.ellipse((hx - s - 2, cy - s - 2, hx + s + 2, cy + s + 2), None, fg, w2)
    rx = 2 * third + third // 2 - lay.dp(20)
    lay.rect((rx - s, cy - s, rx + s, cy + s), None, lay.dp(2), fg, w2)
    for i, (desc, action) in enumerate((("Back", back), ("Home", home), ("Overview", recents))):
        lay.element(Element("nav_button", "", (i * third, top, (i + 1) * third, lay.height), True,
                            desc=desc), action)
    return (0, top, lay.width, lay.height)


def top_bar(lay: Layout, y: int, title: str, back: Action | None, actions: list[IconButton],
            large: bool) -> int:
    t = lay.theme
    h = lay.dp(TOP_BAR_DP)
    lay.rect((0, y, lay.width, y + h + (lay.dp(48) if large else 0)), t.bg)
    x = lay.dp(4)
    if back is not None:
        IconButton("arrow_back", back, "Navigate up").place(lay, x, y + lay.dp(8), lay.dp(48))
        x += lay.dp(52)
    else:
        x = lay.dp(16)
    right = lay.width - lay.dp(4) - lay.dp(48) * len(actions)
    for i, a in enumerate(actions):
        a.place(lay, right + i * lay.dp(48), y + lay.dp(8), lay.dp(48))
    if large:
        size, weight = lay.style("headline")
        tb = lay.text(lay.dp(16), y + h, lay.ellipsize(title, size, weight, lay.width - lay.dp(32)),
                      size, weight, t.text)
        if title:
            lay.element(Element("title", title, tb))
        return h + lay.dp(56)
    size, weight = lay.style("title")
    tb = lay.text(x, y + (h - round(size * 1.3)) // 2,
                  lay.ellipsize(title, size, weight, right - x - lay.dp(8)), size, weight, t.text)
    if title:
        lay.element(Element("title", title, tb))
    return h


def bottom_nav(lay: Layout, bottom: int, nav: BottomNav) -> int:
    t = lay.theme
    h = lay.dp(BOTTOM_NAV_DP)
    top = bottom - h
    lay.rect((0, top, lay.width, bottom), t.surface)
    n = max(1, len(nav.items))
    iw = lay.width // n
    size, weight = lay.style("caption")
    for i, (icon, label) in enumerate(nav.items):
        cx = i * iw + iw // 2
        if i == nav.selected:
            lay.rect((cx - lay.dp(32), top + lay.dp(12), cx + lay.dp(32), top + lay.dp(44)),
                     t.primary_container, lay.dp(16))
        lay.icon(cx, top + lay.dp(28), icon, lay.dp(24),
                 t.on_primary_container if i == nav.selected else t.text_muted)
        lw = lay.text_width(label, size, "medium")
        lay.text(cx - lw // 2, top + lay.dp(50), label, size, "medium",
                 t.text if i == nav.selected else t.text_muted)
        lay.element(Element("nav_item", label, (i * iw, top, (i + 1) * iw, bottom), True, icon, label,
                            checked=i == nav.selected), _bind(nav.on_select, i))
    return h


def fab(lay: Layout, bottom: int, f: Fab) -> None:
    t = lay.theme
    s = lay.dp(56)
    size, weight = lay.style("label")
    w = s if not f.label else lay.dp(64) + lay.text_width(f.label, size, weight)
    right = lay.width - lay.dp(16)
    box = (right - w, bottom - lay.dp(16) - s, right, bottom - lay.dp(16))
    lay.rect((box[0] + 2, box[1] + 4, box[2] + 2, box[3] + 4), t.divider, lay.dp(16))  # shadow
    lay.rect(box, t.primary_container, lay.dp(16))
    if f.label:
        lay.icon(box[0] + lay.dp(28), (box[1] + box[3]) // 2, f.icon, lay.dp(24), t.on_primary_container)
        lay.text(box[0] + lay.dp(52), (box[1] + box[3]) // 2 - round(size * 0.65), f.label, size, weight,
                 t.on_primary_container)
    else:
        lay.icon((box[0] + box[2]) // 2, (box[1] + box[3]) // 2, f.icon, lay.dp(24), t.on_primary_container)
    lay.element(Element("fab", f.label, box, True, f.icon, f.desc or f.label or f.icon), f.on_tap)


def dialog(lay: Layout, d: Dialog) -> Box:
    """A centred Material 3 dialog over a scrim (or an overflow menu); returns its box."""
    t = lay.theme
    # what is under a modal dialog is still seen but takes no taps
    lay.elements[:] = [replace(e, clickable=False) for e in lay.elements]
    lay.hits.clear()
    if d.menu:
        return _menu(lay, d)
    lay.dim(0.4)
    pad = lay.dp(24)
    w = min(lay.width - 2 * lay.dp(40), lay.dp(360))
    x0 = (lay.width - w) // 2
    # lay out into a scratch Layout first to learn the height, then for real
    scratch = Layout(lay.metrics, lay.theme, lay.width, lay.height)
    height = _dialog_content(scratch, d, x0, 0, w, pad)
    y0 = max(lay.dp(48), (lay.height - height) // 2)
    box = (x0, y0, x0 + w, y0 + height)
    lay.rect(box, t.surface, lay.dp(28))
    _dialog_content(lay, d, x0, y0, w, pad)
    return box


def _menu(lay: Layout, d: Dialog) -> Box:
    t = lay.theme
    size, weight = lay.style("body")
    row_h = lay.dp(48)
    w = max([lay.text_width(text, size, weight) for text, _ in d.buttons] + [lay.dp(112)]) + lay.dp(24)
    w = min(w + lay.dp(24), lay.width - lay.dp(16))
    x0 = lay.width - lay.dp(8) - w
    y0 = lay.dp(STATUS_DP) + lay.dp(8)
    box = (x0, y0, x0 + w, y0 + lay.dp(16) + row_h * len(d.buttons))
    lay.rect((box[0] + 2, box[1] + 4, box[2] + 2, box[3] + 4), t.divider, lay.dp(4))  # shadow
    lay.rect(box, t.key_bg, lay.dp(4), t.divider, 1)
    y = y0 + lay.dp(8)
    for text, action in d.buttons:
        row = (x0, y, x0 + w, y + row_h)
        lay.text(x0 + lay.dp(12), y + (row_h - round(size * 1.3)) // 2, text, size, weight, t.text)
        lay.element(Element("menu_item", text, row, True, desc=text), action)
        y += row_h
    return box


def _dialog_content(lay: Layout, d: Dialog, x0: int, y0: int, w: int, pad: int) -> int:
    t = lay.theme
    y = y0 + pad
    if d.icon:
        lay.icon(x0 + w // 2, y + lay.dp(12), d.icon, lay.dp(24), t.primary)
        y += lay.dp(40)
    size, weight = lay.style("title")
    for ln in lay.wrap(d.title, size, weight, w - 2 * pad):
        tw = lay.text_width(ln, size, weight)
        tx = x0 + (w - tw) // 2 if d.icon else x0 + pad
        tb = lay.text(tx, y, ln, size, weight, t.text)
        lay.element(Element("title", ln, tb))
        y += round(size * 1.35)
    if d.message:
        y += lay.dp(12)
        s2, w2 = lay.style("body2")
        for ln in lay.wrap(d.message, s2, w2, w - 2 * pad):
            tb = lay.text(x0 + pad, y, ln, s2, w2, t.text_muted)
            if ln:
                lay.element(Element("text", ln, tb))
            y += round(s2 * 1.45)
    for wdg in d.body:
        y += _place(wdg, lay, x0 + pad - lay.dp(16), y, w - 2 * pad + lay.dp(32))
    y += lay.dp(20)
    if d.buttons:
        size, weight = lay.style("label")
        x = x0 + w - pad + lay.dp(12)
        h = lay.dp(40)
        for text, action in reversed(list(d.buttons)):
            bw = lay.text_width(text, size, weight) + lay.dp(24)
            x -= bw
            box = (x, y, x + bw, y + h)
            lay.text(x + lay.dp(12), y + (h - round(size * 1.3)) // 2, text, size, weight, t.primary)
            lay.element(Element("button", text, box, True, desc=text), action)
            x -= lay.dp(8)
        y += h
    return y + pad - lay.dp(8) - y0


def _place(w: Widget, lay: Layout, x: int, y: int, width: int) -> int:
    return w.place(lay, x, y, width)


def toast(lay: Layout, message: str, bottom: int) -> None:
    size, weight = lay.style("body2")
    tw = lay.text_width(message, size, weight)
    w = min(lay.width - lay.dp(48), tw + lay.dp(32))
    h = lay.dp(44)
    x0 = (lay.width - w) // 2
    box = (x0, bottom - lay.dp(64) - h, x0 + w, bottom - lay.dp(64))
    lay.rect(box, (50, 50, 54), h // 2)
    tb = lay.text(x0 + lay.dp(16), box[1] + (h - round(size * 1.3)) // 2,
                  lay.ellipsize(message, size, weight, w - lay.dp(32)), size, weight, (240, 240, 240))
    lay.element(Element("toast", message, tb))


def spinner(lay: Layout, area: Box) -> None:
    t = lay.theme
    lay.rect(area, t.bg)
    cx, cy = (area[0] + area[2]) // 2, (area[1] + area[3]) // 2
    r = lay.dp(24)
    box = (cx - r, cy - r, cx + r, cy + r)
    lay.arc(box, 0, 360, t.primary_container, lay.dp(4))
    lay.arc(box, -90, 150, t.primary, lay.dp(4))
    lay.element(Element("progress", "", box, desc="Loading"))


def keyboard(lay: Layout, bottom: int, shift: bool, symbols: bool, type_char: Callable[[str], None],
             delete: Action, enter: Action, toggle_shift: Action, toggle_symbols: Action,
             enter_icon: str) -> int:
    """A Gboard-like QWERTY keyboard whose keys type into the focused field."""
    t = lay.theme
    h = lay.dp(KEYBOARD_DP)
    top = bottom - h
    lay.rect((0, top, lay.width, bottom), t.keyboard_bg)
    # the suggestion strip
    strip = lay.dp(44)
    for i, name in enumerate(("apps", "sentiment_satisfied", "content_paste", "settings", "mic")):
        x = lay.dp(28) + i * (lay.width - lay.dp(56)) // 4
        lay.icon(x, top + strip // 2, name, lay.dp(22), t.text_muted)
    key_h = lay.dp(50)
    gap = lay.dp(6)
    y = top + strip
    rows = SYMBOLS if symbols else LETTERS
    key_w = (lay.width - gap * 11) // 10
    size = lay.dp(22)  # key caps ignore the font scale

    def key(box: Box, label: str, icon: str | None, action: Action, special: bool, desc: str) -> None:
        lay.rect(box, t.key_special if special else t.key_bg, lay.dp(6))
        cx, cy = (box[0] + box[2]) // 2, (box[1] + box[3]) // 2
        if icon:
            lay.icon(cx, cy, icon, lay.dp(22), t.text)
        else:
            lw = lay.text_width(label, size, "regular")
            lay.text(cx - lw // 2, cy - round(size * 0.68), label, size, "regular", t.text)
        lay.element(Element("key", label, box, True, icon, desc), action)

    for r, row in enumerate(rows):
        n = len(row)
        x = (lay.width - (n * key_w + (n - 1) * gap)) // 2
        if r == 2:
            sw = key_w + key_w // 2
            key((gap, y, gap + sw, y + key_h), "", "keyboard_capslock" if shift else "north",
                toggle_shift, True, "Shift")
            key((lay.width - gap - sw, y, lay.width - gap, y + key_h), "", "backspace", delete, True,
                "Delete")
        for ch in row:
            cap = ch.upper() if shift else ch
            key((x, y, x + key_w, y + key_h), cap, None, lambda c=cap: type_char(c), False, cap)  # type: ignore[misc]
            x += key_w + gap
        y += key_h + gap
    # bottom row: ?123 , space . enter
    x = gap
    sym_w = key_w + key_w // 2
    key((x, y, x + sym_w, y + key_h), "ABC" if symbols else "?123", None, toggle_symbols, True, "Symbols")
    x += sym_w + gap
    key((x, y, x + key_w, y + key_h), ",", None, lambda: type_char(","), True, ",")
    x += key_w + gap
    space_w = lay.width - 2 * gap - 2 * sym_w - 2 * key_w - 4 * gap
    key((x, y, x + space_w, y + key_h), "", None, lambda: type_char(" "), False, "Space")
    x += space_w + gap
    key((x, y, x + key_w, y + key_h), ".", None, lambda: type_char("."), True, ".")
    x += key_w + gap
    lay.rect((x, y, x + sym_w, y + key_h), t.primary_container, lay.dp(6))
    key((x, y, x + sym_w, y + key_h), "", enter_icon, enter, True, "Enter")
    return h


def adb_keyboard(lay: Layout, bottom: int) -> int:
    """The ADB Keyboard IME's view: a plain bar, it has no keys."""
    h = lay.dp(ADB_KEYBOARD_DP)
    top = bottom - h
    lay.rect((0, top, lay.width, bottom), (48, 48, 48))
    size = lay.dp(16)
    label = "ADB Keyboard {ON}"
    tw = lay.text_width(label, size, "regular")
    tb = lay.text((lay.width - tw) // 2, top + (h - round(size * 1.3)) // 2, label, size, "regular",
                  (230, 230, 230))
    lay.element(Element("keyboard", label, tb))
    return h
