"""Chrome: a new-tab page with a search box, a search screen with suggestions, a results
page that is deterministic for any query, and result pages. State: history and the URL."""

from __future__ import annotations

import random
import re
import zlib
from dataclasses import dataclass, field

from sim.phone.app import App, Ctx, Screen
from sim.phone.widgets import (
    Chip,
    Column,
    IconButton,
    ListItem,
    Row,
    SearchBar,
    Spacer,
    Tabs,
    Text,
    bind,
)

PACKAGE = "com.android.chrome"
SEARCH_URL = "https://www.google.com/search?q="


@dataclass
class ChromeState:
    url: str = ""  # the page being shown ('' on the new-tab page)
    history: list[str] = field(default_factory=list)  # every URL opened, oldest first
    searches: list[str] = field(default_factory=list)  # every query submitted
    query: str = ""  # the omnibox text while editing
    tab: int = 0  # results page tab


@dataclass(frozen=True)
class Result:
    site: str
    url: str
    title: str
    snippet: str


_SITES = [
    ("Wikipedia", "en.wikipedia.org/wiki/{slug}", "{Q} - Wikipedia",
     "{Q} is a topic with a long history. This article covers its origins, key facts and recent developments."),
    ("The Guardian", "www.theguardian.com/{slug}", "{Q}: latest news and analysis",
     "The latest news, comment and analysis on {q}, updated daily by our reporters."),
    ("Reddit", "www.reddit.com/r/{slug}", "What do you think about {q}? : r/AskReddit",
     "Community discussion: people share their experience with {q}, with tips and opinions."),
    ("YouTube", "www.youtube.com/results?search_query={slug}", "{Q} - YouTube",
     "Watch videos about {q}: reviews, tutorials and highlights."),
    ("Tripadvisor", "www.tripadvisor.com/{slug}", "THE 10 BEST {QU} (Updated 2024)",
     "Reviews and ratings for {q}, with photos from travellers."),
    ("Amazon.com", "www.amazon.com/s?k={slug}", "Amazon.com: {q}",
     "Shop {q} at Amazon. Free shipping on eligible orders."),
    ("BBC", "www.bbc.com/news/{slug}", "{Q} - BBC News",
     "All the latest on {q} from BBC News, with video and live updates."),
    ("Britannica", "www.britannica.com/topic/{slug}", "{Q} | Definition, Facts & History",
     "{Q}, explained: definition, history and facts, by the editors of Encyclopaedia Britannica."),
    ("Quora", "www.quora.com/{slug}", "What is the best thing about {q}? - Quora",
     "Answers from people with first-hand experience of {q}."),
    ("Medium", "medium.com/tag/{slug}", "A beginner's guide to {q} | Medium",
     "Everything you need to know to get started with {q}, in ten minutes."),
]


def slug(query: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", query.lower()).strip("_") or "search"


def results_for(query: str, seed: int = 0) -> list[Result]:
    """Eight results for a query; the same query and seed always give the same list."""
    q = " ".join(query.split())
    rng = random.Random(zlib.crc32(f"{seed}/{q.lower()}".encode()))
    picks = rng.sample(_SITES, 8)
    if not q.lower().startswith(("what", "how", "who")):
        picks.sort(key=lambda s: s[0] != "Wikipedia")  # encyclopedic first, as Google does
    fmt = {"q": q, "Q": q[:1].upper() + q[1:], "QU": q.upper(), "slug": slug(q)}
    return [Result(site, "https://" + url.format(**fmt), title.format(**fmt), snip.format(**fmt))
            for site, url, title, snip in picks]


def _open_url(ctx: Ctx[ChromeState], url: str) -> None:
    s = ctx.state
    s.url = url
    s.history.append(url)
    if url.startswith(SEARCH_URL):
        s.tab = 0
        ctx.go("results", q=url[len(SEARCH_URL):].replace("+", " "))
    else:
        ctx.go("page", url=url)


def _search(ctx: Ctx[ChromeState], query: str) -> None:
    q = query.strip()
    if not q:
        return
    ctx.state.searches.append(q)
    if re.fullmatch(r"(https?://)?[\w-]+(\.[\w-]+)+(/\S*)?", q):  # typed a URL
        _open_url(ctx, q if q.startswith("http") else "https://" + q)
    else:
        _open_url(ctx, SEARCH_URL + q.replace(" ", "+"))


def _omnibox(ctx: Ctx[ChromeState], text: str) -> SearchBar:
    def edit() -> None:
        ctx.state.query = "" if text.startswith("http") else text
        ctx.go("search")

    def new_tab() -> None:
        ctx.state.url = ""
        ctx.go("main")

    def menu() -> None:
        ctx.show_menu([("New tab", new_tab), ("History", lambda: ctx.go("history")),
                       ("Bookmarks", lambda: ctx.toast("No bookmarks yet")),
                       ("Settings", lambda: ctx.toast("Chrome settings are not available"))])

    return SearchBar(hint="Search or type URL", value=text, on_tap=edit, id="omnibox",
                     trailing=[IconButton("filter_none", desc="Switch tabs"),
                               IconButton("more_vert", menu, desc="More options")])


def main(ctx: Ctx[ChromeState]) -> Screen:
    shortcuts = [("YouTube", "https://m.youtube.com"), ("Wikipedia", "https://en.m.wikipedia.org"),
                 ("News", "https://news.google.com"), ("Weather", SEARCH_URL + "weather")]
    return Screen(
        top=_omnibox(ctx, ""),
        body=[
            Spacer(48),
            Text("Google", style="display", align="center", color="#4285F4"),
            Spacer(16),
            SearchBar(hint="Search Google or type URL", on_tap=lambda: ctx.go("search"), id="ntp_search",
                      trailing=[IconButton("mic", desc="Voice search"),
                                IconButton("photo_camera", desc="Search with your camera")]),
            Spacer(16),
            Row([Chip(name, lambda u=url: _open_url(ctx, u), icon="public")  # type: ignore[misc]
                 for name, url in shortcuts], align="center"),
            Spacer(24),
            Text("Discover", style="subtitle"),
            ListItem("5 easy habits for a calmer morning", subtitle="lifehacker.com · 2h", icon="article",
                     on_tap=lambda: _open_url(ctx, "https://lifehacker.com/calmer-morning")),
            ListItem("The best hiking trails near you", subtitle="outdoors.com · 5h", icon="article",
                     on_tap=lambda: _open_url(ctx, "https://outdoors.com/hiking-trails")),
        ],
    )


def search(ctx: Ctx[ChromeState]) -> Screen:
    s = ctx.state

    def set_query(v: str) -> None:
        s.query = v

    q = s.query.strip()
    suggestions = [q, f"{q} near me", f"{q} meaning", f"{q} today"] if q else []
    recent = [x for x in reversed(s.searches) if not q or x.lower().startswith(q.lower())][:4]
    body = [ListItem(x, icon="search", on_tap=lambda x=x: _search(ctx, x))  # type: ignore[misc]
            for x in suggestions]
    body += [ListItem(x, icon="history", on_tap=lambda x=x: _search(ctx, x))  # type: ignore[misc]
             for x in recent]
    return Screen(
        top=SearchBar("omnibox_edit", s.query, set_query, on_submit=lambda: _search(ctx, s.query),
                      hint="Search or type URL", leading=IconButton("arrow_back", ctx.back, "Navigate up"),
                      select_on_focus=True),
        body=body,
        autofocus="omnibox_edit",
    )


def results(ctx: Ctx[ChromeState]) -> Screen:
    s = ctx.state
    q = str(ctx.params.get("q", ""))

    def tab(i: int) -> None:
        s.tab = i

    cards = []
    for r in results_for(q, ctx.seed):
        cards.append(Column([
            Spacer(8),
            Text(f"{r.site} · {r.url.removeprefix('https://')}", style="caption", muted=True, max_lines=1),
            Text(r.title, style="subtitle", color="#1A0DAB" if not ctx.system.dark_mode else "#8AB4F8",
                 on_tap=lambda u=r.url: _open_url(ctx, u), max_lines=2),  # type: ignore[misc]
            Text(r.snippet, style="body2", muted=True, max_lines=3),
        ]))
    return Screen(
        top=_omnibox(ctx, q),
        header=[Tabs(["All", "Images", "News", "Videos", "Maps"], s.tab, tab)],
        body=cards,
    )


def page(ctx: Ctx[ChromeState]) -> Screen:
    url = str(ctx.params.get("url", ""))
    host = url.split("//", 1)[-1].split("/", 1)[0]
    words = url.rstrip("/").rsplit("/", 1)[-1].replace("_", " ").replace("-", " ").split("=")[-1]
    title = words[:1].upper() + words[1:] if words else host
    rng = random.Random(zlib.crc32(url.encode()))
    paras = [
        f"{title} has been discussed widely. Here is an overview of what matters most.",
        f"Experts point out {rng.randint(3, 9)} key facts about {title.lower()}, from its "
        f"background to what comes next.",
        "Readers also asked about prices, opening hours and the best time to visit.",
        f"Updated {rng.randint(1, 28)} March 2024.",
    ]
    return Screen(
        top=_omnibox(ctx, host),
        body=[Text(title, style="headline"), Text(host, style="caption", muted=True),
              *[Text(p) for p in paras]],
    )


def history(ctx: Ctx[ChromeState]) -> Screen:
    s = ctx.state

    def clear() -> None:
        s.history.clear()

    items = [ListItem(url.split("//", 1)[-1], icon="history", on_tap=bind(lambda u: _open_url(ctx, u), url))
             for url in reversed(s.history)]
    return Screen(title="History", back=True,
                  actions=[IconButton("delete", clear, desc="Clear browsing data")],
                  body=items or [Text("Your history is empty", muted=True, align="center")])


APP: App[ChromeState] = App(
    package=PACKAGE, label="Chrome", icon="public", color="#1E8E3E", state=ChromeState,
    activity="com.google.android.apps.chrome.Main",
    screens={"main": main, "search": search, "results": results, "page": page, "history": history},
)
