"""TikTok: a full-screen vertical video feed. Swipe up for the next video; a heart to like,
a comment button that opens the comments with an "Add comment..." field and "Post".

Every video carries a caption with tags ("#petcat"); the feed order is fixed per seed
(``feed_order``) so that tasks know where the cat videos are. The state records likes and
posted comments per video id.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from sim.phone.app import App, Ctx, Screen
from sim.phone.canvas import Action, Element, Layout
from sim.phone.theme import hex_rgb
from sim.phone.widgets import Button, Divider, IconButton, ListItem, Row, Text, TextField, Widget

PACKAGE = "com.zhiliaoapp.musically"


@dataclass(frozen=True)
class Video:
    id: str
    user: str
    caption: str
    tags: tuple[str, ...]
    music: str
    likes: int
    comments: tuple[tuple[str, str], ...]
    color: str
    icon: str

    @property
    def is_cat(self) -> bool:
        return "cat" in self.tags


VIDEOS: tuple[Video, ...] = (
    Video("dance", "@dancequeen", "New dance challenge, try it!", ("dance", "fyp"), "Original sound - dancequeen",
          12400, (("@moves", "So smooth!"),), "#7B2CBF", "music_note"),
    Video("dog", "@goodboy.max", "My pet dog sees snow for the first time", ("petdog", "dog"),
          "Snowy Day - Lofi", 8830, (("@doglover", "Max is adorable"),), "#3A86FF", "pets"),
    Video("cat1", "@whiskers_daily", "My pet cat loves the sunny window", ("petcat", "cat"),
          "Sunny Afternoon - Chill", 20100, (("@meowfan", "Sunbathing queen"),), "#F4A261", "pets"),
    Video("cook", "@chef_lin", "5-minute garlic noodles", ("cooking", "food"), "Kitchen Beats",
          5600, (("@hungry", "Making this tonight"),), "#E76F51", "restaurant"),
    Video("cat2", "@meow.meow", "Pet cat vs cucumber", ("petcat", "cat", "funny"), "Funny Moments",
          45200, (("@lol", "The jump!"),), "#2A9D8F", "pets"),
    Video("travel", "@travelwithme", "Sunset over the rice terraces", ("travel", "nature"),
          "Golden Hour", 9100, (("@wander", "Where is this?"),), "#E9C46A", "landscape"),
    Video("cat3", "@kittylife", "Sleepy kitten compilation, pet cat edition", ("petcat", "cat", "kitten"),
          "Lullaby - Piano", 31000, (("@aww", "Too cute"),), "#8D99AE", "pets"),
    Video("fit", "@fitjoe", "Morning workout in 10 minutes", ("fitness", "workout"), "Pump It",
          3300, (("@gym", "Day 1 starts now"),), "#264653", "fitness_center"),
    Video("parrot", "@parrot.pete", "My pet parrot says hello", ("petbird", "parrot"), "Birdsong",
          7700, (("@birdy", "Hello Pete!"),), "#588157", "flutter_dash"),
    Video("cat4", "@catmom", "Pet cat learns to high five", ("petcat", "cat", "training"),
          "Happy Paws", 15800, (("@trainer", "Good kitty"),), "#BC6C25", "pets"),
)
VIDEO = {v.id: v for v in VIDEOS}


def feed_order(seed: int) -> list[str]:
    """Video ids in feed order: the canonical order on seed 0, shuffled otherwise with the
    first cat video never on top (so a task always needs at least one swipe)."""
    ids = [v.id for v in VIDEOS]
    if seed == 0:
        return ids
    rng = random.Random(seed * 31 + 7)
    while True:
        rng.shuffle(ids)
        if not VIDEO[ids[0]].is_cat:
            return ids


@dataclass
class TikTokState:
    feed: list[str] = field(default_factory=lambda: [v.id for v in VIDEOS])
    index: int = 0
    liked: list[str] = field(default_factory=list)  # video ids, in like order
    posted: list[tuple[str, str]] = field(default_factory=list)  # (video id, comment)
    seen: list[str] = field(default_factory=lambda: [VIDEOS[0].id])
    draft: str = ""


def _init(st: TikTokState, seed: int) -> None:
    st.feed = feed_order(seed)
    st.seen = [st.feed[0]]


def _count(n: int) -> str:
    return f"{n / 1000:.1f}K" if n >= 1000 else str(n)


@dataclass
class VideoFrame(Widget):
    """One full-screen video: the picture, the right-hand action column and the caption."""

    video: Video
    liked: bool
    n_comments: int
    on_like: Action
    on_comment: Action
    on_share: Action

    def place(self, lay: Layout, x: int, y: int, w: int) -> int:
        v = self.video
        h = max(lay.dp(400), lay.height - y - lay.dp(48))  # down to the navigation bar
        lay.rect((x, y, x + w, y + h), hex_rgb(v.color))
        icon_box = lay.icon(x + w // 2, y + h // 2 - lay.dp(60), v.icon, lay.dp(140), (255, 255, 255))
        lay.element(Element("image", "", icon_box, False, v.icon, "Video"))
        white = (255, 255, 255)
        # the action column on the right
        col_x = x + w - lay.dp(64)
        cy = y + h // 2 - lay.dp(40)
        items: list[tuple[str, str, Action | None, str, str]] = [
            ("favorite" if self.liked else "favorite_border", "Like", self.on_like,
             _count(v.likes + (1 if self.liked else 0)), "#FE2C55" if self.liked else "#FFFFFF"),
            ("comment", "Comment", self.on_comment, _count(self.n_comments), "#FFFFFF"),
            ("bookmark", "Favorites", None, "Save", "#FFFFFF"),
            ("share", "Share", self.on_share, "Share", "#FFFFFF"),
        ]
        size, _ = lay.style("caption")
        for icon, desc, action, label, colour in items:
            IconButton(icon, action, desc, color=colour, size=36, id=desc.lower()).place(lay, col_x, cy, lay.dp(48))
            lw = lay.text_width(label, size, "medium")
            tb = lay.text(col_x + lay.dp(24) - lw // 2, cy + lay.dp(50), label, size, "medium", white)
            lay.element(Element("text", label, tb))
            cy += lay.dp(86)
        # the caption at the bottom left
        s1, _ = lay.style("subtitle")
        s2, _ = lay.style("body2")
        max_w = w - lay.dp(96)
        ty = y + h - lay.dp(150)
        tb = lay.text(x + lay.dp(16), ty, v.user, s1, "medium", white)
        lay.element(Element("text", v.user, tb))
        ty += round(s1 * 1.5)
        for line in lay.wrap(v.caption, s2, "regular", max_w, 2):
            tb = lay.text(x + lay.dp(16), ty, line, s2, "regular", white)
            lay.element(Element("text", line, tb))
            ty += round(s2 * 1.4)
        tags = " ".join("#" + t for t in v.tags)
        tb = lay.text(x + lay.dp(16), ty, tags, s2, "medium", white)
        lay.element(Element("text", tags, tb))
        ty += round(s2 * 1.4)
        ib = lay.icon(x + lay.dp(26), ty + lay.dp(10), "music_note", lay.dp(18), white)
        lay.element(Element("icon", "", ib, False, "music_note", "Sound"))
        mt = lay.ellipsize(v.music, s2, "regular", max_w - lay.dp(30))
        tb = lay.text(x + lay.dp(42), ty, mt, s2, "regular", white)
        lay.element(Element("text", mt, tb))
        return h


def feed(ctx: Ctx[TikTokState]) -> Screen:
    st = ctx.state
    v = VIDEO[st.feed[st.index]]

    def like() -> None:
        if v.id in st.liked:
            st.liked.remove(v.id)
        else:
            st.liked.append(v.id)

    def swipe(direction: str) -> None:
        if direction == "up" and st.index + 1 < len(st.feed):
            st.index += 1
            st.seen.append(st.feed[st.index])
        elif direction == "down" and st.index > 0:
            st.index -= 1

    n_comments = len(v.comments) + sum(1 for vid, _ in st.posted if vid == v.id)
    top = Row([Text("Following", "subtitle", color="#DDDDDD", padding=4,
                    on_tap=lambda: ctx.toast("Follow accounts to see their videos")),
               Text("For You", "subtitle", color="#FFFFFF", padding=4)], align="center")
    return Screen(full_screen=True, background="#000000", on_swipe=swipe,
                  body=[VideoFrame(v, v.id in st.liked, n_comments, like,
                                   lambda: ctx.go("comments", id=v.id),
                                   lambda: ctx.toast("Link copied"))],
                  header=[top])


def comments(ctx: Ctx[TikTokState]) -> Screen:
    st = ctx.state
    v = VIDEO[str(ctx.params["id"])]

    def change(text: str) -> None:
        st.draft = text

    def post() -> None:
        text = st.draft.strip()
        if not text:
            ctx.toast("Write a comment first")
            return
        st.posted.append((v.id, text))
        st.draft = ""
        ctx.toast("Comment posted")

    n = len(v.comments) + sum(1 for i, _ in st.posted if i == v.id)
    rows: list = [Text(f"{n} comment{'' if n == 1 else 's'}", "subtitle", align="center")]
    for user, text in v.comments:
        rows.append(ListItem(user, text, avatar=user.lstrip("@")))
    for vid, text in st.posted:
        if vid == v.id:
            rows.append(ListItem("@me", text, avatar="m"))
    rows.append(Divider())
    rows.append(TextField("comment", st.draft, change, hint="Add comment...", on_submit=post))
    rows.append(Row([Button("Post", post, id="post")], align="right"))
    return Screen(title="Comments", back=True, body=rows)


APP: App[TikTokState] = App(
    package=PACKAGE, label="TikTok", icon="music_video", state=TikTokState,
    screens={"main": feed, "comments": comments}, color="#010101",
    activity="com.ss.android.ugc.aweme.splash.SplashActivity", init=_init,
    examples={"comments": {"id": "cat1"}},
)
