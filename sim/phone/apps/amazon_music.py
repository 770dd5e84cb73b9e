"""Amazon Music: home with playlists, Find (search), an artist page, playing a song.

The state records submitted searches, artist pages opened and what is playing (with the
playlist it came from, if any), which is what the Mobile-Eval tasks check.
"""

from __future__ import annotations

import re
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
    bind,
)

PACKAGE = "com.amazon.mp3"


@dataclass(frozen=True)
class Song:
    id: str
    title: str
    artist: str
    length: str


SONGS: tuple[Song, ...] = (
    Song("jc-sunny", "Sunny Day", "Jay Chou", "4:29"),
    Song("jc-rice", "Rice Field", "Jay Chou", "4:34"),
    Song("jc-mojito", "Mojito", "Jay Chou", "3:05"),
    Song("jc-blue", "Blue and White Porcelain", "Jay Chou", "3:59"),
    Song("jc-nunchucks", "Nunchucks", "Jay Chou", "4:35"),
    Song("ag-secret", "Secret Agent Man", "Johnny Rivers", "3:02"),
    Song("ag-double", "Double Agent", "The Spy Club", "3:41"),
    Song("ag-orange", "Agent Orange", "Depeche Mode", "5:05"),
    Song("ts-shake", "Shake It Off", "Taylor Swift", "3:39"),
    Song("ts-love", "Love Story", "Taylor Swift", "3:55"),
    Song("nj-come", "Come Away With Me", "Norah Jones", "3:18"),
    Song("le-nuvole", "Nuvole Bianche", "Ludovico Einaudi", "5:57"),
    Song("le-una", "Una Mattina", "Ludovico Einaudi", "3:22"),
    Song("rain", "Gentle Rain", "Calm Sounds", "4:10"),
    Song("lofi", "Lo-fi Evening", "Chillhop Crew", "2:48"),
    Song("acoustic", "Morning Coffee", "Acoustic Cafe", "3:12"),
    Song("wk-power", "Power Up", "Gym Beats", "3:30"),
    Song("wk-run", "Run the Track", "Gym Beats", "3:15"),
    Song("top-1", "Flowers", "Miley Cyrus", "3:20"),
    Song("top-2", "As It Was", "Harry Styles", "2:47"),
)
SONG = {s.id: s for s in SONGS}
ARTISTS = tuple(dict.fromkeys(s.artist for s in SONGS))


@dataclass(frozen=True)
class Playlist:
    id: str
    title: str
    subtitle: str
    songs: tuple[str, ...]
    relaxing: bool


PLAYLISTS: tuple[Playlist, ...] = (
    Playlist("relax-piano", "Relaxing Piano", "Calm piano for rest and focus",
             ("le-nuvole", "le-una", "nj-come"), True),
    Playlist("chill", "Chill Vibes", "Easy listening to unwind", ("lofi", "rain", "acoustic"), True),
    Playlist("workout", "Workout Beats", "High-energy tracks", ("wk-power", "wk-run"), False),
    Playlist("top50", "Top 50 Global", "The most played songs", ("top-1", "top-2", "ts-shake"), False),
)
PLAYLIST = {p.id: p for p in PLAYLISTS}


@dataclass
class MusicState:
    draft: str = ""
    searches: list[str] = field(default_factory=list)
    artists_opened: list[str] = field(default_factory=list)
    now_playing: str | None = None  # a song id
    playing_from: str | None = None  # the playlist id it was started from, if any
    played: list[str] = field(default_factory=list)  # every song started, in order


def find(query: str) -> tuple[list[str], list[Song]]:
    """Artists and songs whose name contains every word of the query."""
    words = re.findall(r"[a-z0-9]+", query.lower())
    if not words:
        return [], []
    artists = [a for a in ARTISTS if all(w in a.lower() for w in words)]
    songs = [s for s in SONGS if all(w in f"{s.title} {s.artist}".lower() for w in words)
             or s.artist in artists]
    return artists, songs


def play(ctx: Ctx[MusicState], song_id: str, playlist: str | None = None) -> None:
    ctx.state.now_playing = song_id
    ctx.state.playing_from = playlist
    ctx.state.played.append(song_id)


def _song_row(ctx: Ctx[MusicState], s: Song, playlist: str | None = None) -> ListItem:
    return ListItem(s.title, f"{s.artist} · {s.length}", icon="music_note", icon_color="#25D1DA",
                    id=f"song:{s.id}", on_tap=lambda: play(ctx, s.id, playlist),
                    trailing=IconButton("more_vert", lambda: ctx.toast("Added to library"),
                                        "More options"))


def _nav(ctx: Ctx[MusicState], selected: int) -> BottomNav:
    def pick(i: int) -> None:
        if i == 0:
            ctx.replace("main")
        elif i == 3:
            ctx.replace("find")
        else:
            ctx.toast("Sign in to see your library" if i == 2 else "Podcasts are loading")
    return BottomNav([("home", "Home"), ("podcasts", "Podcasts"), ("library_music", "Library"),
                      ("search", "Find")], selected, pick)


def _mini_player(ctx: Ctx[MusicState]) -> list:
    if ctx.state.now_playing is None:
        return []
    s = SONG[ctx.state.now_playing]

    def pause() -> None:
        ctx.state.now_playing = None
    return [Divider(), ListItem(f"Now playing: {s.title}", s.artist, icon="graphic_eq",
                                icon_color="#232F3E", id="mini_player",
                                trailing=IconButton("pause", pause, "Pause"))]


def main(ctx: Ctx[MusicState]) -> Screen:
    lists = ctx.shuffled(list(PLAYLISTS), "playlists")
    body = [
        Media("#232F3E", "headphones", 120, "Ad-free music, on any device"),
        Text("Playlists for you", "subtitle"),
        *[ListItem(p.title, p.subtitle, icon="queue_music", icon_color="#25D1DA",
                   id=f"playlist:{p.id}", on_tap=bind(lambda i: ctx.go("playlist", id=i), p.id))
          for p in lists],
        Text("Recently played", "subtitle"),
        *[_song_row(ctx, SONG[i]) for i in ("top-2", "ts-love")],
        *_mini_player(ctx),
    ]
    return Screen(title="Amazon Music", body=body, bottom=_nav(ctx, 0),
                  actions=[IconButton("settings", lambda: ctx.toast("Settings"), "Settings")])


def find_screen(ctx: Ctx[MusicState]) -> Screen:
    st = ctx.state

    def change(v: str) -> None:
        st.draft = v

    def go() -> None:
        q = st.draft.strip()
        if not q:
            return
        st.searches.append(q)
        ctx.go("results", query=q)

    def pick(text: str) -> None:
        change(text)
        go()

    # As in the app: ENTER or a suggestion submits the search; there is no search button.
    artists, songs = find(st.draft) if st.draft.strip() else ([], [])
    typed = " ".join(st.draft.split()).lower()
    hints = ([typed] if typed else []) + [a for a in artists if a.lower() != typed] + \
        [s.title for s in songs if s.title.lower() != typed]
    body = [
        *[ListItem(h, icon="search", trailing_icon="north_west", id=f"suggestion:{h}",
                   on_tap=bind(pick, h)) for h in list(dict.fromkeys(hints))[:5]],
        Text("Browse", "subtitle"),
        *[ListItem(g, icon="album", trailing_icon="chevron_right",
                   on_tap=lambda: ctx.toast("Coming soon")) for g in ("Pop", "Classical", "Jazz")],
        *_mini_player(ctx),
    ]
    return Screen(top=SearchBar(id="query", value=st.draft, on_change=change, on_submit=go,
                                hint="Search Amazon Music"),
                  body=body, bottom=_nav(ctx, 3))


def results(ctx: Ctx[MusicState]) -> Screen:
    q = str(ctx.params.get("query", ""))
    artists, songs = find(q)
    body: list = []
    if artists:
        body.append(Text("Artists", "subtitle"))
        for a in artists:
            def open_artist(a: str = a) -> None:
                ctx.state.artists_opened.append(a)
                ctx.go("artist", name=a)
            body.append(ListItem(a, "Artist", avatar=a, id=f"artist:{a}", on_tap=open_artist))
    body.append(Text("Songs", "subtitle"))
    if not songs:
        body.append(Text(f"No songs for \"{q}\"", "body", muted=True))
    body.extend(_song_row(ctx, s) for s in ctx.shuffled(songs, "songs/" + q))
    body.extend(_mini_player(ctx))
    return Screen(title=f"Results for \"{q}\"", back=True, body=body)


def artist(ctx: Ctx[MusicState]) -> Screen:
    name = str(ctx.params["name"])
    songs = [s for s in SONGS if s.artist == name]
    body = [
        Media("#37475A", "person", 180, name),
        Row([Button("Shuffle play", lambda: play(ctx, songs[0].id), icon="shuffle"),
             Button("Follow", lambda: ctx.toast(f"Following {name}"), variant="outlined")]),
        Text("Top songs", "subtitle"),
        *[_song_row(ctx, s) for s in songs],
        *_mini_player(ctx),
    ]
    return Screen(title=name, back=True, body=body)


def playlist(ctx: Ctx[MusicState]) -> Screen:
    p = PLAYLIST[str(ctx.params["id"])]
    body = [
        Media("#25D1DA", "queue_music", 160, p.title),
        Text(p.subtitle, "body2", muted=True),
        Row([Button("Play", lambda: play(ctx, p.songs[0], p.id), icon="play_arrow",
                    id="play_button"),
             Button("Shuffle", lambda: play(ctx, p.songs[-1], p.id), variant="outlined",
                    icon="shuffle")]),
        *[_song_row(ctx, SONG[i], p.id) for i in p.songs],
        *_mini_player(ctx),
    ]
    return Screen(title=p.title, back=True, body=body)


APP: App[MusicState] = App(
    package=PACKAGE, label="Amazon Music", icon="headphones", state=MusicState,
    screens={"main": main, "find": find_screen, "results": results, "artist": artist,
             "playlist": playlist},
    color="#25D1DA", activity=".activity.MusicHomeActivity",
    examples={"results": {"query": "Jay Chou"}, "artist": {"name": "Jay Chou"},
              "playlist": {"id": "relax-piano"}},
)
