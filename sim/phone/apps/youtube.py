"""YouTube: a home feed, search (magnifier at the top right), results, and a video page
with a like button and a "Comments" section whose sheet has "Add a comment..." and a send
icon. The state records searches, videos opened, likes and posted comments.
"""

from __future__ import annotations

import random
import re
import zlib
from dataclasses import dataclass, field

from sim.phone.app import App, Ctx, Screen
from sim.phone.widgets import (
    BottomNav,
    Button,
    Divider,
    IconButton,
    ListItem,
    Media,
    Row,
    SearchBar,
    Text,
    TextField,
    Widget,
)

PACKAGE = "com.google.android.youtube"


@dataclass(frozen=True)
class Video:
    id: str
    title: str
    channel: str
    views: str
    age: str
    likes: str
    topic: str  # what a task matches on, e.g. 'stephen curry'
    color: str
    comments: tuple[tuple[str, str], ...] = ()


VIDEOS: tuple[Video, ...] = (
    Video("sc-threes", "Stephen Curry Top 10 Threes", "NBA", "4.1M views", "2 weeks ago",
          "52K", "stephen curry", "#1D428A", (("@dubnation", "Greatest shooter ever"),)),
    Video("sc-62", "Stephen Curry 62 Points", "House of Highlights", "2.7M views",
          "1 month ago", "38K", "stephen curry", "#FFC72C", (("@hooper", "Chef cooked"),)),
    Video("sc-workout", "Stephen Curry Workout", "Warriors", "980K views", "3 months ago",
          "21K", "stephen curry", "#006BB6", (("@gymrat", "Insane drills"),)),
    Video("nba-top10", "Top 10 NBA Plays of the Night", "NBA", "1.2M views", "1 day ago", "17K",
          "nba", "#C8102E", (("@fan", "Number 3 was crazy"),)),
    Video("lofi", "Lo-fi Beats to Study and Relax", "Chillhop Music", "12M views", "1 year ago",
          "300K", "music", "#6D597A", (("@student", "Exam week vibes"),)),
    Video("ramen", "How to Make Ramen at Home", "Cooking Lab", "860K views", "5 months ago", "19K",
          "cooking", "#E76F51", (("@chef", "Looks delicious"),)),
    Video("lakers", "Lakers vs Warriors Game Highlights", "NBA", "3.3M views", "3 days ago", "45K",
          "lakers", "#552583", (("@lakeshow", "What a game"),)),
)
VIDEO = {v.id: v for v in VIDEOS}


@dataclass
class YouTubeState:
    draft: str = ""
    searches: list[str] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)
    liked: list[str] = field(default_factory=list)
    subscribed: list[str] = field(default_factory=list)  # channel names
    posted: list[tuple[str, str]] = field(default_factory=list)  # (video id, text)
    comment_draft: str = ""


def search(query: str) -> list[Video]:
    words = re.findall(r"[a-z0-9]+", query.lower())
    if not words:
        return []
    hits = [v for v in VIDEOS if all(w in f"{v.title} {v.topic} {v.channel}".lower() for w in words)]
    return hits or [v for v in VIDEOS if any(w in f"{v.title} {v.topic}".lower() for w in words)]


def suggestions(draft: str) -> list[str]:
    """Query completions for what is typed: the text itself, then known queries it starts."""
    q = " ".join(re.findall(r"[a-z0-9]+", draft.lower()))
    if not q:
        return []
    pool = sorted({v.topic for v in VIDEOS} | {v.title.lower() for v in VIDEOS}
                  | {f"{v.topic} highlights" for v in VIDEOS})
    return [q, *[p for p in pool if p.startswith(q) and p != q]][:6]


def _open(ctx: Ctx[YouTubeState], v: Video) -> None:
    ctx.state.opened.append(v.id)
    ctx.go("watch", id=v.id)


def _video_card(ctx: Ctx[YouTubeState], v: Video) -> list:
    return [Media(v.color, "play_circle", 190, "", desc=v.title, on_tap=lambda: _open(ctx, v)),
            ListItem(v.title, f"{v.channel} · {v.views} · {v.age}", avatar=v.channel,
                     id=f"video:{v.id}", on_tap=lambda: _open(ctx, v),
                     trailing=IconButton("more_vert", lambda: ctx.toast("Saved to Watch later"),
                                         "Action menu"))]


def _nav(ctx: Ctx[YouTubeState]) -> BottomNav:
    return BottomNav([("home", "Home"), ("bolt", "Shorts"), ("add_circle_outline", "Create"),
                      ("subscriptions", "Subscriptions"), ("account_circle", "You")], 0,
                     lambda i: ctx.replace("main") if i == 0 else ctx.toast("Sign in to continue"))


FEED = ("nba-top10", "lofi", "ramen", "lakers")


def home_feed(seed: int) -> list[Video]:
    """The home feed in the seed's order (``Ctx.shuffled(..., "feed")`` on this app)."""
    feed = [VIDEO[i] for i in FEED]
    if seed:
        random.Random(zlib.crc32(f"{seed}/{PACKAGE}/order/feed".encode())).shuffle(feed)
    return feed


def home(ctx: Ctx[YouTubeState]) -> Screen:
    feed = home_feed(ctx.seed)
    body = [row for v in feed for row in _video_card(ctx, v)]
    return Screen(title="YouTube", body=body, bottom=_nav(ctx),
                  actions=[IconButton("cast", lambda: ctx.toast("No devices found"), "Cast"),
                           IconButton("notifications_none", lambda: ctx.toast("No notifications"),
                                      "Notifications"),
                           IconButton("search", lambda: ctx.go("search"), "Search")])


def search_screen(ctx: Ctx[YouTubeState]) -> Screen:
    st = ctx.state

    def change(v: str) -> None:
        st.draft = v

    def submit() -> None:
        q = st.draft.strip()
        if q:
            st.searches.append(q)
            ctx.go("results", query=q)

    # As in the app: no search button; ENTER on the keyboard or a suggestion submits.
    body: list[Widget] = []
    shown = suggestions(st.draft) if st.draft.strip() else ["lofi music", "ramen recipe"]
    for text in shown:
        def pick(p: str = text) -> None:
            change(p)
            submit()
        body.append(ListItem(text, icon="search" if st.draft.strip() else "history",
                             trailing_icon="north_west", id=f"suggestion:{text}", on_tap=pick))
    return Screen(top=SearchBar(id="query", value=st.draft, on_change=change, on_submit=submit,
                                hint="Search YouTube",
                                leading=IconButton("arrow_back", ctx.back, "Navigate up")),
                  body=body, autofocus="query")


def results(ctx: Ctx[YouTubeState]) -> Screen:
    q = str(ctx.params.get("query", ""))
    found = search(q)
    body: list = [row for v in found for row in _video_card(ctx, v)]
    if not body:
        body = [Text(f"No results for \"{q}\"", "body")]
    return Screen(top=SearchBar(id="results_bar", value=q, hint="Search YouTube",
                                on_tap=lambda: ctx.go("search"),
                                leading=IconButton("arrow_back", ctx.back, "Navigate up")),
                  body=body)


def watch(ctx: Ctx[YouTubeState]) -> Screen:
    v = VIDEO[str(ctx.params["id"])]
    st = ctx.state
    liked = v.id in st.liked
    subscribed = v.channel in st.subscribed

    def like() -> None:
        if liked:
            st.liked.remove(v.id)
        else:
            st.liked.append(v.id)

    def subscribe() -> None:
        if subscribed:
            st.subscribed.remove(v.channel)
        else:
            st.subscribed.append(v.channel)

    n_comments = len(v.comments) + sum(1 for i, _ in st.posted if i == v.id)
    top_comment = v.comments[0][1] if v.comments else ""
    body = [
        Media("#000000", "play_arrow", 210, "", desc="Video player", full_bleed=True),
        Text(v.title, "subtitle"),
        Text(f"{v.views} · {v.age}", "body2", muted=True),
        Row([Button(f"{v.likes}", like, variant="filled" if liked else "tonal",
                    icon="thumb_up", id="like"),
             Button("Share", lambda: ctx.toast("Link copied"), variant="tonal", icon="share"),
             Button("Save", lambda: ctx.toast("Saved"), variant="tonal", icon="playlist_add")]),
        ListItem(v.channel, "1.2M subscribers", avatar=v.channel,
                 trailing=IconButton("notifications_active" if subscribed else "add_alert",
                                     subscribe, "Subscribe")),
        Row([Button("Subscribed" if subscribed else "Subscribe", subscribe,
                    variant="outlined" if subscribed else "filled", id="subscribe")]),
        Divider(),
        ListItem("Comments", f"{n_comments} · {top_comment}", trailing_icon="unfold_more",
                 id="comments", on_tap=lambda: ctx.go("comments", id=v.id)),
        Divider(),
        Text("Up next", "subtitle"),
        *[row for o in VIDEOS if o.topic == v.topic and o.id != v.id for row in _video_card(ctx, o)],
    ]
    return Screen(title="", back=True, body=body)


def comments(ctx: Ctx[YouTubeState]) -> Screen:
    v = VIDEO[str(ctx.params["id"])]
    st = ctx.state

    def change(text: str) -> None:
        st.comment_draft = text

    def send() -> None:
        text = st.comment_draft.strip()
        if text:
            st.posted.append((v.id, text))
            st.comment_draft = ""
            ctx.toast("Comment posted")

    rows: list = []
    for user, text in v.comments:
        rows.append(ListItem(user, text, avatar=user.lstrip("@"), lines=2))
    for vid, text in st.posted:
        if vid == v.id:
            rows.append(ListItem("@me", text, avatar="m", lines=2))
    rows.append(Divider())
    rows.append(TextField("comment", st.comment_draft, change, hint="Add a comment...",
                          multiline=True, lines=2, on_submit=send))
    rows.append(Row([IconButton("send", send, "Send", id="send")], align="right"))
    return Screen(title="Comments", back=True, body=rows)


APP: App[YouTubeState] = App(
    package=PACKAGE, label="YouTube", icon="smart_display", state=YouTubeState,
    screens={"main": home, "search": search_screen, "results": results, "watch": watch,
             "comments": comments},
    color="#FF0000", activity="com.google.android.apps.youtube.app.watchwhile.WatchWhileActivity",
    examples={"results": {"query": "Stephen Curry"}, "watch": {"id": "sc-threes"},
              "comments": {"id": "sc-threes"}},
)
