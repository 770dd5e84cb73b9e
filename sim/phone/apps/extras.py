"""Everyday apps that fill the launcher (so it has more than one page) and give the agent
wrong turns to take. Each is one simple screen."""

from __future__ import annotations

from dataclasses import dataclass

from sim.phone.app import App, Ctx, Screen
from sim.phone.widgets import ListItem, Media, Text, Widget


@dataclass
class Empty:
    """These apps keep no state worth checking."""


def simple_app(package: str, label: str, icon: str, color: str, rows: list[tuple[str, str]]) -> App[Empty]:
    def main(ctx: Ctx[Empty]) -> Screen:
        body: list[Widget] = [Media(color, icon, 160, desc=label)]
        body += [ListItem(t, subtitle=s, icon=icon) for t, s in rows]
        if not rows:
            body.append(Text(f"Nothing in {label} yet", muted=True, align="center"))
        return Screen(title=label, body=body)

    return App(package=package, label=label, icon=icon, color=color, state=Empty, screens={"main": main})


PHONE = simple_app("com.google.android.dialer", "Phone", "call", "#1A73E8",
                   [("Mom", "Mobile · Yesterday"), ("Alex", "Mobile · Monday")])
MESSAGES = simple_app("com.google.android.apps.messaging", "Messages", "sms", "#1967D2",
                      [("Alex", "See you at 7!"), ("Bank", "Your code is 482913")])
CAMERA = simple_app("com.android.camera2", "Camera", "photo_camera", "#5F6368", [])
PHOTOS = simple_app("com.google.android.apps.photos", "Photos", "photo_library", "#EA4335",
                    [("Today", "12 photos"), ("Last week", "48 photos")])
CLOCK = simple_app("com.google.android.deskclock", "Clock", "schedule", "#3C4043",
                   [("7:00 AM", "Alarm · Mon-Fri"), ("8:30 AM", "Alarm · Sat, Sun")])
CONTACTS = simple_app("com.google.android.contacts", "Contacts", "contacts", "#1A73E8",
                      [("Alex Chen", "+1 555 0100"), ("Mom", "+1 555 0199")])
CALCULATOR = simple_app("com.google.android.calculator", "Calculator", "calculate", "#188038", [])
FILES = simple_app("com.google.android.apps.nbu.files", "Files", "folder", "#1A73E8",
                   [("Downloads", "14 files"), ("Images", "203 files")])
RECORDER = simple_app("com.google.android.apps.recorder", "Recorder", "mic", "#D93025", [])
WALLET = simple_app("com.google.android.apps.walletnfcrel", "Wallet", "account_balance_wallet",
                    "#3C4043", [("Visa ···· 4242", "Default card")])
DRIVE = simple_app("com.google.android.apps.docs", "Drive", "cloud", "#F9AB00",
                   [("Project plan", "Modified 2 days ago"), ("Budget 2024", "Modified last week")])
NEWS = simple_app("com.google.android.apps.magazines", "News", "newspaper", "#4285F4",
                  [("Top stories", "Updated 10 min ago")])
PODCASTS = simple_app("com.google.android.apps.podcasts", "Podcasts", "podcasts", "#9334E6", [])
TRANSLATE = simple_app("com.google.android.apps.translate", "Translate", "translate", "#4285F4", [])

FIRST = [PHONE, MESSAGES, CAMERA, PHOTOS, CLOCK, CONTACTS, CALCULATOR, FILES]
LAST = [RECORDER, WALLET, DRIVE, NEWS, PODCASTS, TRANSLATE]
