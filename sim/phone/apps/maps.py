"""Google Maps: a map with a search bar and category chips, place pages, directions and
turn-by-turn navigation. The state records the place navigated to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sim.phone.app import App, Ctx, Screen
from sim.phone.widgets import (
    BottomNav,
    Button,
    Chip,
    Divider,
    IconButton,
    ListItem,
    Media,
    Row,
    SearchBar,
    Text,
    bind,
)

PACKAGE = "com.google.android.apps.maps"


@dataclass(frozen=True)
class Place:
    id: str
    name: str
    address: str
    category: str  # scenic, gas_station, food, transit, hotel, coffee
    distance_km: float
    rating: str
    keywords: tuple[str, ...] = ()


PLACES: tuple[Place, ...] = (
    Place("west-lake", "West Lake", "Xihu District, Hangzhou, Zhejiang", "scenic", 6.4, "4.7",
          ("west lake", "xihu", "hangzhou west lake")),
    Place("west-lake-square", "West Lake Cultural Square", "Xiacheng District, Hangzhou", "scenic",
          3.1, "4.3", ("west lake",)),
    Place("hz-west-station", "Hangzhou West Railway Station", "Yuhang District, Hangzhou", "transit",
          14.8, "4.4", ("hangzhou west",)),
    Place("hz-east-station", "Hangzhou East Railway Station", "Shangcheng District, Hangzhou",
          "transit", 9.2, "4.5", ("hangzhou",)),
    Place("sinopec", "Sinopec Gas Station", "Wensan Road, Hangzhou", "gas_station", 0.8, "4.1",
          ("gas", "petrol", "fuel")),
    Place("petrochina", "PetroChina Gas Station", "Tianmushan Road, Hangzhou", "gas_station", 1.3,
          "4.0", ("gas", "petrol", "fuel")),
    Place("shell", "Shell Gas Station", "Moganshan Road, Hangzhou", "gas_station", 2.2, "4.2",
          ("gas", "petrol", "fuel")),
    Place("noodle", "Kui Yuan Guan Noodles", "Jiefang Road, Hangzhou", "food", 2.9, "4.4",
          ("restaurant", "noodles")),
    Place("tea-house", "Lakeside Tea House", "Beishan Road, Hangzhou", "coffee", 5.9, "4.6",
          ("coffee", "tea")),
    Place("hotel", "Lakeview Hotel", "Nanshan Road, Hangzhou", "hotel", 6.0, "4.5", ("hotel",)),
)
PLACE = {p.id: p for p in PLACES}
CHIPS: tuple[tuple[str, str, str], ...] = (
    ("Restaurants", "restaurant", "food"),
    ("Gas", "local_gas_station", "gas_station"),
    ("Coffee", "local_cafe", "coffee"),
    ("Hotels", "hotel", "hotel"),
)


@dataclass
class MapsState:
    draft: str = ""
    searches: list[str] = field(default_factory=list)
    places_opened: list[str] = field(default_factory=list)
    directions_to: str | None = None
    navigating_to: str | None = None  # a place id while navigation runs
    navigations: list[str] = field(default_factory=list)  # every navigation started


def search(query: str) -> list[Place]:
    """Places whose name or keywords contain the query's words, best (whole-name) first."""
    q = " ".join(re.findall(r"[a-z0-9]+", query.lower()))
    if not q:
        return []
    words = q.split()
    scored = []
    for p in PLACES:
        hay = " ".join([p.name.lower(), p.address.lower(), *p.keywords])
        if all(w in hay for w in words) or any(k in q for k in p.keywords):
            exact = q in p.keywords or q == p.name.lower()
            scored.append((0 if exact else 1, p.distance_km, p))
    return [p for *_, p in sorted(scored, key=lambda t: (t[0], t[1]))]


def _open_place(ctx: Ctx[MapsState], p: Place) -> None:
    ctx.state.places_opened.append(p.id)
    ctx.go("place", id=p.id)


def _place_row(ctx: Ctx[MapsState], p: Place) -> ListItem:
    return ListItem(p.name, f"{p.address} · {p.distance_km:.1f} km", icon="place",
                    icon_color="#EA4335", id=f"place:{p.id}", on_tap=lambda: _open_place(ctx, p))


def _nav(ctx: Ctx[MapsState]) -> BottomNav:
    return BottomNav([("explore", "Explore"), ("commute", "Go"), ("bookmark_border", "Saved"),
                      ("add_circle_outline", "Contribute")], 0,
                     lambda i: None if i == 0 else ctx.toast("Sign in to use this"))


def main(ctx: Ctx[MapsState]) -> Screen:
    body = [
        Row([Chip(label, icon=icon, on_tap=bind(lambda c: ctx.go("category", category=c[1], label=c[0]),
                                                (label, cat))) for label, icon, cat in CHIPS]),
        Media("#A8D5A2", "map", 420, "Hangzhou", desc="Map"),
        Text("Latest in Hangzhou", "subtitle"),
        *[_place_row(ctx, PLACE[i]) for i in ctx.shuffled(["tea-house", "noodle", "hotel"], "latest")],
    ]
    return Screen(top=SearchBar(id="maps_search", hint="Search here", on_tap=lambda: ctx.go("search"),
                                trailing=[IconButton("mic", lambda: ctx.toast("Microphone permission needed"),
                                                     "Voice search")]),
                  body=body, bottom=_nav(ctx))


def search_screen(ctx: Ctx[MapsState]) -> Screen:
    st = ctx.state

    def change(v: str) -> None:
        st.draft = v

    def record() -> None:
        if st.draft.strip():
            st.searches.append(st.draft.strip())

    def submit() -> None:  # ENTER: the best match's page, as the app shows a sure hit
        record()
        hits = search(st.draft)
        if hits:
            _open_place(ctx, hits[0])
        elif st.draft.strip():
            ctx.toast(f"No results for {st.draft.strip()}")

    found = search(st.draft)[:5] if st.draft.strip() else []
    body: list = []
    if not st.draft.strip():
        body.append(Text("Recent", "subtitle"))
        body.append(ListItem("Home", "Set your home address", icon="home"))
    for p in found:
        def pick(p: Place = p) -> None:
            record()
            _open_place(ctx, p)
        body.append(ListItem(p.name, p.address, icon="place", id=f"suggestion:{p.id}", on_tap=pick))
    return Screen(top=SearchBar(id="query", value=st.draft, on_change=change, on_submit=submit,
                                hint="Search here",
                                leading=IconButton("arrow_back", ctx.back, "Navigate up")),
                  body=body, autofocus="query")


def category(ctx: Ctx[MapsState]) -> Screen:
    cat = str(ctx.params["category"])
    found = sorted((p for p in PLACES if p.category == cat), key=lambda p: p.distance_km)
    body: list = [Text(f"Nearby · {len(found)} results", "body2", muted=True)]
    for p in found:
        body.append(_place_row(ctx, p))
        body.append(Divider())
    return Screen(title=str(ctx.params.get("label", cat)), back=True, body=body)


def place(ctx: Ctx[MapsState]) -> Screen:
    p = PLACE[str(ctx.params["id"])]

    def directions() -> None:
        ctx.state.directions_to = p.id
        ctx.go("directions", id=p.id)

    body = [
        Media("#A8D5A2", "place", 200, "", desc="Map"),
        Text(p.name, "title"),
        Text(f"{p.rating} stars · {p.distance_km:.1f} km", "body2", muted=True),
        Text(p.address, "body2"),
        Row([Button("Directions", directions, icon="directions", id="directions"),
             Button("Save", lambda: ctx.toast("Saved"), variant="outlined", icon="bookmark_border"),
             Button("Share", lambda: ctx.toast("Link copied"), variant="outlined", icon="share")]),
        Divider(),
        Text("Popular times", "subtitle"),
        Text("Usually a little busy", "body2", muted=True),
    ]
    return Screen(title=p.name, back=True, body=body)


def directions(ctx: Ctx[MapsState]) -> Screen:
    p = PLACE[str(ctx.params["id"])]
    minutes = max(3, round(p.distance_km * 3.2))

    def start() -> None:
        ctx.state.navigating_to = p.id
        ctx.state.navigations.append(p.id)
        ctx.replace("navigation", id=p.id)

    body = [
        ListItem("Your location", icon="my_location"),
        ListItem(p.name, p.address, icon="place", icon_color="#EA4335"),
        Row([Chip("Drive", selected=True, icon="directions_car"), Chip("Transit", icon="directions_bus"),
             Chip("Walk", icon="directions_walk")]),
        Media("#A8D5A2", "route", 240, "", desc="Route"),
        Text(f"{minutes} min ({p.distance_km:.1f} km)", "title"),
        Text("Fastest route now due to traffic conditions", "body2", muted=True),
        Row([Button("Start", start, icon="navigation", id="start"),
             Button("Steps", lambda: ctx.toast("Head north"), variant="outlined")]),
    ]
    return Screen(title="Directions", back=True, body=body)


def navigation(ctx: Ctx[MapsState]) -> Screen:
    p = PLACE[str(ctx.params["id"])]

    def stop() -> None:
        ctx.state.navigating_to = None
        ctx.back()

    body = [
        Media("#0B8043", "turn_right", 120, "Head north toward Wensan Road"),
        Media("#A8D5A2", "navigation", 380, "", desc="Map"),
        Text(f"Navigating to {p.name}", "subtitle"),
        Text(f"{max(3, round(p.distance_km * 3.2))} min · {p.distance_km:.1f} km", "body2", muted=True),
        Row([Button("Exit", stop, variant="tonal", id="exit_navigation")]),
    ]
    return Screen(title="Navigation", body=body)


APP: App[MapsState] = App(
    package=PACKAGE, label="Maps", icon="map", state=MapsState,
    screens={"main": main, "search": search_screen, "category": category, "place": place,
             "directions": directions, "navigation": navigation},
    color="#34A853", activity="com.google.android.maps.MapsActivity",
    examples={"category": {"category": "gas_station", "label": "Gas"}, "place": {"id": "west-lake"},
              "directions": {"id": "west-lake"}, "navigation": {"id": "west-lake"}},
)
