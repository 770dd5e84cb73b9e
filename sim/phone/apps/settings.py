"""Settings: a long scrolling list of sections; Network (Wi-Fi, airplane mode), Display
(dark mode, font size), "Notifications & status bar" (network speed in the status bar).
Its state is the phone's SystemSettings, so the toggles change the whole phone."""

from __future__ import annotations

from sim.phone.app import App, Ctx, Screen
from sim.phone.system import SETTINGS_PACKAGE, SystemSettings
from sim.phone.widgets import (
    Chip,
    Divider,
    IconButton,
    ListItem,
    Row,
    SearchBar,
    Text,
    ToggleRow,
    Widget,
    bind,
)

# (title, subtitle, icon, icon colour, screen or '' for a generic page)
SECTIONS = [
    ("Network & internet", "Wi-Fi, mobile, data usage, hotspot", "wifi", "#1A73E8", "network"),
    ("Connected devices", "Bluetooth, pairing", "devices", "#188038", "devices"),
    ("Apps", "Recent apps, default apps", "apps", "#E37400", ""),
    ("Notifications & status bar", "Notification history, status bar icons", "notifications",
     "#D93025", "notifications"),
    ("Battery", "85% - Should last until about 11:30 PM", "battery_full", "#188038", ""),
    ("Storage", "54% used - 58.9 GB free", "storage", "#9334E6", ""),
    ("Sound & vibration", "Volume, haptics, Do Not Disturb", "volume_up", "#12B5CB", ""),
    ("Display", "Dark mode, font size, brightness", "brightness_6", "#E37400", "display"),
    ("Wallpaper & style", "Colours, themed icons, app grid", "palette", "#D01884", ""),
    ("Accessibility", "Display, interaction, audio", "accessibility", "#1A73E8", ""),
    ("Security & privacy", "App security, device lock, permissions", "security", "#188038", ""),
    ("Location", "On - 3 apps have access to location", "location_on", "#12B5CB", ""),
    ("Safety & emergency", "Emergency SOS, medical info, alerts", "emergency", "#D93025", ""),
    ("Passwords & accounts", "Saved passwords, autofill, synced accounts", "key", "#9334E6", ""),
    ("Digital Wellbeing & parental controls", "Screen time, app timers, bedtime schedules",
     "self_improvement", "#188038", ""),
    ("Google", "Services & preferences", "account_circle", "#1A73E8", ""),
    ("System", "Languages, gestures, time, backup", "info", "#5F6368", ""),
    ("About phone", "MobAgent Sim", "smartphone", "#5F6368", "about"),
]
FONT_SCALES = (("Small", 0.85), ("Default", 1.0), ("Large", 1.15), ("Largest", 1.3))


def main(ctx: Ctx[SystemSettings]) -> Screen:
    items = []
    for title, sub, icon, colour, screen in ctx.shuffled(SECTIONS, "sections"):
        target, name = screen or "page", title
        items.append(ListItem(title, subtitle=sub, icon=icon, icon_color=colour,
                              on_tap=lambda t=target, n=name: ctx.go(t, title=n)))  # type: ignore[misc]
    return Screen(title="Settings", large_title=True,
                  body=[SearchBar(hint="Search Settings", on_tap=lambda: ctx.go("search"), id="settings_search"),
                        *items])


# What the search box finds: (title, where it lives, screen)
SEARCHABLE = [
    ("Wi-Fi", "Network & internet", "network"),
    ("Airplane mode", "Network & internet", "network"),
    ("Bluetooth", "Connected devices", "devices"),
    ("Dark mode", "Display", "display"),
    ("Font size", "Display", "display"),
    ("Brightness level", "Display", "display"),
    ("Network speed in status bar", "Notifications & status bar", "notifications"),
    ("Battery percentage", "Notifications & status bar", "notifications"),
    ("Notifications on lock screen", "Notifications & status bar", "notifications"),
    *[(title, "Settings", screen or "page") for title, _, _, _, screen in SECTIONS],
]


def search(ctx: Ctx[SystemSettings]) -> Screen:
    s = ctx.state

    def typed(v: str) -> None:
        s.search_query = v

    def leave() -> None:
        s.search_query = ""
        ctx.back()

    def open_hit(title: str, screen: str) -> None:
        s.search_query = ""
        ctx.replace(screen, title=title)

    q = s.search_query.strip().lower()
    hits = [(t, where, screen) for t, where, screen in SEARCHABLE if q and q in t.lower()]
    body: list[Widget] = [ListItem(t, subtitle=where, icon="settings",
                                   on_tap=bind(lambda ts: open_hit(*ts), (t, screen)))
                          for t, where, screen in hits]
    if q and not hits:
        body.append(Text("No results", muted=True, align="center"))
    return Screen(top=SearchBar("settings_query", s.search_query, typed, hint="Search Settings",
                                leading=IconButton("arrow_back", leave, "Navigate up")),
                  body=body, autofocus="settings_query")


def network(ctx: Ctx[SystemSettings]) -> Screen:
    s = ctx.state

    def wifi(v: bool) -> None:
        s.wifi = v

    def airplane(v: bool) -> None:
        s.airplane_mode = v

    return Screen(title="Network & internet", back=True, body=[
        ToggleRow("Wi-Fi", s.wifi and not s.airplane_mode, wifi,
                  subtitle="Off" if s.airplane_mode else ("HomeNet" if s.wifi else "Off"), icon="wifi"),
        ListItem("SIMs", subtitle="No SIM" if s.airplane_mode else "Carrier", icon="sim_card"),
        ToggleRow("Airplane mode", s.airplane_mode, airplane, icon="airplanemode_active"),
        ListItem("Hotspot & tethering", subtitle="Off", icon="wifi_tethering"),
        ListItem("Data Saver", subtitle="Off", icon="data_saver_off"),
        ListItem("VPN", subtitle="None", icon="vpn_key"),
        ListItem("Private DNS", subtitle="Automatic", icon="dns"),
    ])


def devices(ctx: Ctx[SystemSettings]) -> Screen:
    s = ctx.state

    def bt(v: bool) -> None:
        s.bluetooth = v

    return Screen(title="Connected devices", back=True, body=[
        ToggleRow("Bluetooth", s.bluetooth, bt, icon="bluetooth"),
        ListItem("Pair new device", icon="add"),
        ListItem("Connection preferences", subtitle="NFC, Android Auto", icon="settings"),
    ])


def display(ctx: Ctx[SystemSettings]) -> Screen:
    s = ctx.state

    def dark(v: bool) -> None:
        s.dark_mode = v

    scale = next((n for n, v in FONT_SCALES if abs(v - s.font_scale) < 0.01), f"{s.font_scale:.2f}x")
    return Screen(title="Display", back=True, body=[
        Text("Appearance", style="label", color="#1A73E8"),
        ToggleRow("Dark mode", s.dark_mode, dark, subtitle="Use a dark background", icon="dark_mode"),
        ListItem("Font size", subtitle=scale, icon="format_size", on_tap=lambda: ctx.go("font")),
        ListItem("Brightness level", subtitle=f"{s.brightness}%", icon="brightness_6"),
        Divider(),
        Text("Other display controls", style="label", color="#1A73E8"),
        ListItem("Screen timeout", subtitle="After 30 seconds of inactivity", icon="timer"),
        ListItem("Auto-rotate screen", subtitle="Off", icon="screen_rotation"),
    ])


def font(ctx: Ctx[SystemSettings]) -> Screen:
    s = ctx.state

    def pick(v: float) -> None:
        s.font_scale = v

    return Screen(title="Font size", back=True, body=[
        Text("Make the text on your screen smaller or larger.", muted=True),
        Row([Chip(n, lambda v=v: pick(v), selected=abs(v - s.font_scale) < 0.01)  # type: ignore[misc]
             for n, v in FONT_SCALES]),
    ])


def notifications(ctx: Ctx[SystemSettings]) -> Screen:
    s = ctx.state

    def speed(v: bool) -> None:
        s.show_network_speed = v

    def pct(v: bool) -> None:
        s.battery_percentage = v

    def lock(v: bool) -> None:
        s.notifications_on_lock_screen = v

    return Screen(title="Notifications & status bar", back=True, body=[
        ListItem("App notifications", subtitle="Control notifications from apps", icon="apps"),
        ListItem("Notification history", icon="history"),
        ToggleRow("Notifications on lock screen", s.notifications_on_lock_screen, lock,
                  icon="lock"),
        Divider(),
        Text("Status bar", style="label", color="#1A73E8"),
        ToggleRow("Network speed in status bar", s.show_network_speed, speed,
                  subtitle="Show current network speed", icon="speed"),
        ToggleRow("Battery percentage", s.battery_percentage, pct, icon="battery_full"),
    ])


def about(ctx: Ctx[SystemSettings]) -> Screen:
    return Screen(title="About phone", back=True, body=[
        ListItem("Device name", subtitle="MobAgent Sim"),
        ListItem("Phone number", subtitle="Unknown"),
        ListItem("Android version", subtitle="14"),
        ListItem("Model", subtitle="MobAgent_Sim"),
        ListItem("Build number", subtitle="UQ1A.240205.004"),
    ])


def page(ctx: Ctx[SystemSettings]) -> Screen:
    """Sections with no behaviour of their own: a plausible page to take wrong turns into."""
    title = str(ctx.params.get("title", "Settings"))
    return Screen(title=title, back=True, body=[
        ListItem("Preferences", subtitle=f"{title} options", icon="tune"),
        ListItem("Advanced", subtitle="More settings", icon="expand_more"),
    ])


APP: App[SystemSettings] = App(
    package=SETTINGS_PACKAGE, label="Settings", icon="settings", color="#5F6368", state=SystemSettings,
    activity=".Settings",
    screens={"main": main, "search": search, "network": network, "devices": devices, "display": display, "font": font,
             "notifications": notifications, "about": about, "page": page},
    activities={".Settings$NetworkDashboardActivity": "network", ".DisplaySettings": "display",
                ".Settings$NotificationDashboardActivity": "notifications"},
)
