"""Amazon Music, TikTok and YouTube tasks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from protocol.operations import ClickIcon, ClickText, Enter, OpenApp, Operation, PageDown, TypeText
from sim.eval.checks import Check, field_focused, fresh_start, in_app, on_screen, same_text
from sim.eval.task import Milestone, Task, norm_text
from sim.phone.apps import amazon_music, tiktok, youtube
from sim.phone.apps.amazon_music import MusicState
from sim.phone.apps.tiktok import TikTokState
from sim.phone.apps.youtube import YouTubeState

if TYPE_CHECKING:
    from sim.phone import SimPhone

# --- Amazon Music ---------------------------------------------------------------------------

MUSIC = amazon_music.PACKAGE
RELAXING = {s for p in amazon_music.PLAYLISTS if p.relaxing for s in p.songs}


def _music(phone: SimPhone) -> MusicState:
    return phone.state_as(MUSIC, MusicState)


def searched(words: str) -> Check:
    return lambda phone: any(norm_text(words) in norm_text(q) for q in _music(phone).searches)


def playing_agent_song(phone: SimPhone) -> bool:
    s = _music(phone).now_playing
    return s is not None and "agent" in amazon_music.SONG[s].title.lower()


def playing_relaxing(phone: SimPhone) -> bool:
    return _music(phone).now_playing in RELAXING


def _music_search(query: str) -> list[Milestone]:
    return [
        Milestone("Amazon Music open", in_app(MUSIC), (OpenApp("Amazon Music"),)),
        Milestone("Find tab", on_screen(MUSIC, "find"), (ClickText("Find"),)),
        Milestone("search box focused", field_focused(MUSIC, "query"),
                  (ClickText("Search Amazon Music"),)),
        Milestone("searched", searched(query), (TypeText(query), Enter())),
    ]


class MusicSearchJayChou(Task):
    app, tier = "Amazon Music", 1

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def is_successful(self, phone: SimPhone) -> bool:
        return searched("jay chou")(phone)

    def milestones(self) -> Sequence[Milestone]:
        return _music_search("Jay Chou")


class MusicPlayAgent(Task):
    app, tier = "Amazon Music", 2

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def is_successful(self, phone: SimPhone) -> bool:
        return playing_agent_song(phone)

    def milestones(self) -> Sequence[Milestone]:
        return [*_music_search("agent"),
                Milestone("an agent song plays", playing_agent_song, (ClickText("Secret Agent Man"),))]


class MusicRelax(Task):
    app, tier = "Amazon Music", 3

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def is_successful(self, phone: SimPhone) -> bool:
        return playing_relaxing(phone)

    def milestones(self) -> Sequence[Milestone]:
        return [
            Milestone("Amazon Music open", in_app(MUSIC), (OpenApp("Amazon Music"),)),
            Milestone("a relaxing playlist", on_screen(MUSIC, "playlist"),
                      (ClickText("Relaxing Piano"),)),
            Milestone("relaxing music plays", playing_relaxing, (ClickText("Play"),)),
        ]


# --- TikTok ---------------------------------------------------------------------------------

TIKTOK = tiktok.PACKAGE
CAT_COMMENT = "Ohhhh, so cute cat!"


def _tt(phone: SimPhone) -> TikTokState:
    return phone.state_as(TIKTOK, TikTokState)


def cats_liked(n: int) -> Check:
    return lambda phone: sum(1 for v in _tt(phone).liked if tiktok.VIDEO[v].is_cat) >= n


def cat_commented(phone: SimPhone) -> bool:
    return any(tiktok.VIDEO[v].is_cat and same_text(t, CAT_COMMENT) for v, t in _tt(phone).posted)


def on_cat_video(k: int) -> Check:
    """The feed shows the k-th cat video (1-based) or a later one."""
    def check(phone: SimPhone) -> bool:
        st = _tt(phone)
        cats = [i for i, v in enumerate(st.feed) if tiktok.VIDEO[v].is_cat]
        return phone.foreground() == TIKTOK and len(cats) >= k and st.index >= cats[k - 1]
    return check


class _TikTokTask(Task):
    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def cat_positions(self) -> list[int]:
        return [i for i, v in enumerate(tiktok.feed_order(self.seed)) if tiktok.VIDEO[v].is_cat]

    def swipes_to_cat(self, k: int) -> tuple[Operation, ...]:
        """Page downs from cat k-1 (or the top) to cat k; at least one step for the milestone."""
        pos = self.cat_positions()
        start = pos[k - 2] if k >= 2 else 0
        return tuple(PageDown() for _ in range(pos[k - 1] - start))


class TikTokLikeCat(_TikTokTask):
    app, tier = "TikTok", 1

    def is_successful(self, phone: SimPhone) -> bool:
        return cats_liked(1)(phone)

    def milestones(self) -> Sequence[Milestone]:
        return [Milestone("TikTok open", in_app(TIKTOK), (OpenApp("TikTok"),)),
                Milestone("a cat video", on_cat_video(1), self.swipes_to_cat(1)),
                Milestone("liked", cats_liked(1), (ClickIcon("heart", "right"),))]


class TikTokCommentCat(_TikTokTask):
    app, tier = "TikTok", 2

    def is_successful(self, phone: SimPhone) -> bool:
        return cat_commented(phone)

    def milestones(self) -> Sequence[Milestone]:
        return [Milestone("TikTok open", in_app(TIKTOK), (OpenApp("TikTok"),)),
                Milestone("a cat video", on_cat_video(1), self.swipes_to_cat(1)),
                Milestone("comments open", on_screen(TIKTOK, "comments"),
                          (ClickIcon("comment", "right"),)),
                Milestone("comment box focused", field_focused(TIKTOK, "comment"),
                          (ClickText("Add comment..."),)),
                Milestone("commented", cat_commented, (TypeText(CAT_COMMENT), ClickText("Post")))]


class TikTokLikeThreeCats(_TikTokTask):
    app, tier = "TikTok", 3

    def is_successful(self, phone: SimPhone) -> bool:
        return cats_liked(3)(phone)

    def milestones(self) -> Sequence[Milestone]:
        out = [Milestone("TikTok open", in_app(TIKTOK), (OpenApp("TikTok"),))]
        for k in (1, 2, 3):
            out.append(Milestone(f"cat video {k}", on_cat_video(k), self.swipes_to_cat(k)))
            out.append(Milestone(f"{k} cats liked", cats_liked(k), (ClickIcon("heart", "right"),)))
        return out


# --- YouTube --------------------------------------------------------------------------------

YT = youtube.PACKAGE
CURRY_COMMENT = "Oh, chef, your basketball spirit has always inspired me"
CURRY_VIDEO = "Stephen Curry Top 10 Threes"


def _yt(phone: SimPhone) -> YouTubeState:
    return phone.state_as(YT, YouTubeState)


def searched_curry(phone: SimPhone) -> bool:
    return any("stephen curry" in norm_text(q) for q in _yt(phone).searches)


def curry_video_open(phone: SimPhone) -> bool:
    return phone.current_screen() in (f"{YT}/watch", f"{YT}/comments") and \
        youtube.VIDEO[str(phone.screen_params().get("id"))].topic == "stephen curry"


def curry_commented(text: str | None) -> Check:
    def check(phone: SimPhone) -> bool:
        return any(youtube.VIDEO[v].topic == "stephen curry" and (text is None or same_text(t, text))
                   for v, t in _yt(phone).posted)
    return check


def curry_liked(phone: SimPhone) -> bool:
    return any(youtube.VIDEO[v].topic == "stephen curry" for v in _yt(phone).liked)


def _yt_search() -> list[Milestone]:
    return [Milestone("YouTube open", in_app(YT), (OpenApp("YouTube"),)),
            Milestone("search box focused", field_focused(YT, "query"),
                      (ClickIcon("search", "top right"),)),
            Milestone("searched", searched_curry, (TypeText("Stephen Curry"), Enter()))]


class YouTubeSearchCurry(Task):
    app, tier = "YouTube", 1

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def is_successful(self, phone: SimPhone) -> bool:
        return searched_curry(phone)

    def milestones(self) -> Sequence[Milestone]:
        return _yt_search()


class YouTubeCommentCurry(Task):
    app, tier = "YouTube", 2

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def is_successful(self, phone: SimPhone) -> bool:
        return curry_commented(CURRY_COMMENT)(phone)

    def milestones(self) -> Sequence[Milestone]:
        return [*_yt_search(),
                Milestone("a Curry video", curry_video_open, (ClickText(CURRY_VIDEO),)),
                Milestone("comments open", on_screen(YT, "comments"), (ClickText("Comments"),)),
                Milestone("comment box focused", field_focused(YT, "comment"),
                          (ClickText("Add a comment..."),)),
                Milestone("commented", curry_commented(CURRY_COMMENT),
                          (TypeText(CURRY_COMMENT), ClickIcon("send", "right")))]


class YouTubeLoveCurry(Task):
    """"Show my love": a like or a comment on a Stephen Curry video both count."""

    app, tier = "YouTube", 3

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def is_successful(self, phone: SimPhone) -> bool:
        return curry_liked(phone) or curry_commented(None)(phone)

    def milestones(self) -> Sequence[Milestone]:
        return [*_yt_search(),
                Milestone("a Curry video", curry_video_open, (ClickText(CURRY_VIDEO),)),
                Milestone("liked", self.is_successful, (ClickIcon("thumb up", "left"),))]


TASKS: list[type[Task]] = [MusicSearchJayChou, MusicPlayAgent, MusicRelax, TikTokLikeCat,
                           TikTokCommentCat, TikTokLikeThreeCats, YouTubeSearchCurry,
                           YouTubeCommentCurry, YouTubeLoveCurry]
