"""Google Play: search, an app page, and Install with a progress bar, then Open.

Installing takes ``INSTALL_S`` seconds of wall-clock time (the phone's ``now`` is frozen
per seed, so it cannot measure this); a download can be cancelled while it runs. The frame
is redrawn on the next input, so the bar moves between steps, not by itself. The state keeps when each install started and which were cancelled, so a
check can ask "was it downloaded" (started, not cancelled) or "is it installed" (done).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from sim.phone.app import App, Ctx, Screen
from sim.phone.widgets import (
    BottomNav,
    Button,
    Divider,
    IconButton,
    ListItem,
    Media,
    ProgressBar,
    Row,
    SearchBar,
    Tabs,
    Text,
)

PACKAGE = "com.android.vending"
INSTALL_S = 6.0


@dataclass(frozen=True)
class StoreApp:
    package: str
    name: str
    developer: str
    rating: str
    size: str
    downloads: str
    icon: str
    color: str
    keywords: tuple[str, ...] = ()


CATALOG: tuple[StoreApp, ...] = (
    StoreApp("com.whatsapp", "WhatsApp Messenger", "WhatsApp LLC", "4.3", "38 MB", "5B+", "chat",
             "#25D366", ("whatsapp", "messenger", "chat")),
    StoreApp("com.whatsapp.w4b", "WhatsApp Business", "WhatsApp LLC", "4.2", "41 MB", "1B+",
             "storefront", "#128C7E", ("whatsapp", "business")),
    StoreApp("com.instagram.android", "Instagram", "Instagram", "4.1", "52 MB", "5B+",
             "photo_camera", "#C13584", ("instagram", "photo")),
    StoreApp("com.instagram.barcelona", "Threads", "Instagram", "4.0", "60 MB", "100M+", "forum",
             "#000000", ("threads", "instagram")),
    StoreApp("org.telegram.messenger", "Telegram", "Telegram FZ-LLC", "4.2", "70 MB", "1B+", "send",
             "#229ED9", ("telegram", "messenger", "chat")),
    StoreApp("com.spotify.music", "Spotify: Music and Podcasts", "Spotify AB", "4.3", "35 MB",
             "1B+", "music_note", "#1DB954", ("spotify", "music")),
    StoreApp("com.duolingo", "Duolingo: Language Lessons", "Duolingo", "4.6", "30 MB", "500M+",
             "school", "#58CC02", ("duolingo", "language")),
    StoreApp("com.facebook.katana", "Facebook", "Meta Platforms, Inc.", "4.0", "65 MB", "5B+",
             "thumb_up", "#1877F2", ("facebook", "social")),
)
BY_PACKAGE = {a.package: a for a in CATALOG}


@dataclass
class PlayState:
    draft: str = ""
    searches: list[str] = field(default_factory=list)
    pages_opened: list[str] = field(default_factory=list)
    install_started: dict[str, float] = field(default_factory=dict)  # time.monotonic()
    cancelled: list[str] = field(default_factory=list)
    tab: int = 0


def search(query: str) -> list[StoreApp]:
    words = re.findall(r"[a-z0-9]+", query.lower())
    if not words:
        return []
    return [a for a in CATALOG if all(any(w in k for k in (*a.keywords, a.name.lower()))
                                      for w in words)]


def progress(st: PlayState, package: str, now: float | None = None) -> float | None:
    """0..1 while downloading, 1.0 once installed, None if never started (or cancelled)."""
    started = st.install_started.get(package)
    if started is None:
        return None
    t = time.monotonic() if now is None else now
    return min(1.0, max(0.0, (t - started) / INSTALL_S))


def _open_page(ctx: Ctx[PlayState], a: StoreApp) -> None:
    ctx.state.pages_opened.append(a.package)
    ctx.go("details", app=a.package)


def _app_row(ctx: Ctx[PlayState], a: StoreApp) -> ListItem:
    return ListItem(a.name, f"{a.developer} · {a.rating} stars · {a.size}", icon=a.icon,
                    icon_color=a.color, id=f"app:{a.package}", on_tap=lambda: _open_page(ctx, a))


def main(ctx: Ctx[PlayState]) -> Screen:
    st = ctx.state

    def tab(i: int) -> None:
        st.tab = i

    featured = ctx.shuffled([a for a in CATALOG if a.package not in ("com.whatsapp", "com.instagram.android")],
                            "featured")
    body = [
        Media("#01875F", "sports_esports", 150, "Editors' Choice: games of the week"),
        Text("Recommended for you" if st.tab == 0 else "Top free apps", "subtitle"),
        *[_app_row(ctx, a) for a in (featured if st.tab == 0 else featured[::-1])],
    ]
    return Screen(top=SearchBar(id="play_search", hint="Search apps & games",
                                on_tap=lambda: ctx.go("search"),
                                trailing=[IconButton("mic", lambda: ctx.toast("Microphone permission needed"),
                                                     "Voice search")]),
                  header=[Tabs(["For you", "Top charts", "Kids"], st.tab, tab)],
                  body=body,
                  bottom=BottomNav([("sports_esports", "Games"), ("apps", "Apps"), ("book", "Books")], 1,
                                   lambda i: None if i == 1 else ctx.toast("Loading...")))


def search_screen(ctx: Ctx[PlayState]) -> Screen:
    st = ctx.state

    def change(v: str) -> None:
        st.draft = v

    def submit() -> None:
        if st.draft.strip():
            st.searches.append(st.draft.strip())
            ctx.go("results", query=st.draft.strip())

    body: list = []
    for a in (search(st.draft)[:4] if st.draft.strip() else []):
        def pick(a: StoreApp = a) -> None:
            st.searches.append(st.draft.strip())
            _open_page(ctx, a)
        body.append(ListItem(a.name, a.developer, icon=a.icon, icon_color=a.color,
                             id=f"suggestion:{a.package}", on_tap=pick))
    return Screen(top=SearchBar(id="query", value=st.draft, on_change=change, on_submit=submit,
                                hint="Search apps & games",
                                leading=IconButton("arrow_back", ctx.back, "Navigate up")),
                  body=body, autofocus="query")


def results(ctx: Ctx[PlayState]) -> Screen:
    q = str(ctx.params.get("query", ""))
    found = search(q)
    body: list = [_app_row(ctx, a) for a in found] or [Text(f"No results for \"{q}\"", "body")]
    return Screen(title=q, back=True, body=body)


def details(ctx: Ctx[PlayState]) -> Screen:
    a = BY_PACKAGE[str(ctx.params["app"])]
    st = ctx.state
    frac = progress(st, a.package)

    def install() -> None:
        st.install_started[a.package] = time.monotonic()
        if a.package in st.cancelled:
            st.cancelled.remove(a.package)

    def cancel() -> None:
        st.install_started.pop(a.package, None)
        st.cancelled.append(a.package)

    if frac is None:
        action: list = [Row([Button("Install", install, full_width=True, id="install")])]
    elif frac < 1.0:
        action = [ProgressBar(frac, f"{int(frac * 100)}% of {a.size}" if frac > 0 else "Pending..."),
                  Row([Button("Cancel", cancel, variant="outlined", id="cancel")])]
    else:
        action = [Row([Button("Uninstall", cancel, variant="outlined"),
                       Button("Open", lambda: ctx.toast(f"{a.name} is not a simulated app"),
                              id="open")])]
    body = [
        ListItem(a.name, a.developer, icon=a.icon, icon_color=a.color),
        Text(f"{a.rating} stars · {a.downloads} downloads · {a.size}", "body2", muted=True),
        *action,
        Divider(),
        Text("About this app", "subtitle"),
        Text(f"{a.name} by {a.developer}.", "body2"),
    ]
    return Screen(title="", back=True, body=body,
                  actions=[IconButton("search", lambda: ctx.go("search"), "Search"),
                           IconButton("more_vert", lambda: ctx.toast("Share"), "More options")])


APP: App[PlayState] = App(
    package=PACKAGE, label="Play Store", icon="shop", state=PlayState,
    screens={"main": main, "search": search_screen, "results": results, "details": details},
    color="#01875F", activity="com.google.android.finsky.activities.MainActivity",
    examples={"results": {"query": "WhatsApp"}, "details": {"app": "com.whatsapp"}},
)
