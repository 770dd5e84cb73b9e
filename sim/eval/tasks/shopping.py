"""Alibaba.com and Google Play tasks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from protocol.operations import ClickText, OpenApp, TypeText
from sim.eval.checks import Check, field_focused, fresh_start, in_app, on_screen
from sim.eval.task import Milestone, Task
from sim.phone.apps import alibaba, play_store
from sim.phone.apps.alibaba import AlibabaState
from sim.phone.apps.play_store import PlayState

if TYPE_CHECKING:
    from sim.phone import SimPhone

ALI = alibaba.PACKAGE
CAP_TITLE = "Mesh Trucker Cap with Logo"  # the cap the reference solution opens


def _ali(phone: SimPhone) -> AlibabaState:
    return phone.state_as(ALI, AlibabaState)


def searched_caps(phone: SimPhone) -> bool:
    return any(any("cap" in p.tags for p in alibaba.search(q)) and "cap" in q.lower()
               for q in _ali(phone).searches)


def viewed_cap(phone: SimPhone) -> bool:
    return any("cap" in alibaba.BY_ID[i].tags for i in _ali(phone).viewed)


def cap_in_cart(phone: SimPhone) -> bool:
    return any("cap" in alibaba.BY_ID[i].tags for i in _ali(phone).cart)


def _search_caps() -> list[Milestone]:
    return [
        Milestone("Alibaba.com open", in_app(ALI), (OpenApp("Alibaba.com"),)),
        Milestone("search box focused", field_focused(ALI, "query"),
                  (ClickText("Search products"),)),
        Milestone("caps searched", searched_caps, (TypeText("caps"), ClickText("Search"))),
    ]


class AlibabaFindCaps(Task):
    app, tier = "Alibaba.com", 1

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def is_successful(self, phone: SimPhone) -> bool:
        return searched_caps(phone)

    def milestones(self) -> Sequence[Milestone]:
        return _search_caps()


class AlibabaCapToCart(Task):
    app, tier = "Alibaba.com", 2

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def is_successful(self, phone: SimPhone) -> bool:
        return cap_in_cart(phone)

    def milestones(self) -> Sequence[Milestone]:
        return [*_search_caps(),
                Milestone("a cap's item page", viewed_cap, (ClickText(CAP_TITLE),)),
                Milestone("quantity sheet", on_screen(ALI, "quantity"), (ClickText("Add to cart"),)),
                Milestone("cap in the cart", cap_in_cart, (ClickText("Confirm"),))]


class AlibabaBuyCap(Task):
    app, tier = "Alibaba.com", 3

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def is_successful(self, phone: SimPhone) -> bool:
        return viewed_cap(phone)

    def milestones(self) -> Sequence[Milestone]:
        return [*_search_caps(),
                Milestone("a cap's item page", viewed_cap, (ClickText(CAP_TITLE),))]


# --- Google Play ----------------------------------------------------------------------------

PLAY = play_store.PACKAGE


def downloading(package: str) -> Check:
    """The download was started and not cancelled (it finishes by itself)."""
    def check(phone: SimPhone) -> bool:
        return package in phone.state_as(PLAY, PlayState).install_started
    return check


def page_opened(package: str) -> Check:
    return lambda phone: phone.current_screen() == f"{PLAY}/details" and \
        phone.screen_params().get("app") == package


class _PlayDownload(Task):
    target = ""  # package
    query = ""
    row = ""  # the suggestion the reference taps

    def setup(self, phone: SimPhone) -> None:
        fresh_start(phone)

    def is_successful(self, phone: SimPhone) -> bool:
        return downloading(self.target)(phone)

    def milestones(self) -> Sequence[Milestone]:
        return [
            Milestone("Play Store open", in_app(PLAY), (OpenApp("Play Store"),)),
            Milestone("search box focused", field_focused(PLAY, "query"),
                      (ClickText("Search apps & games"),)),
            Milestone("app page", page_opened(self.target), (TypeText(self.query), ClickText(self.row))),
            Milestone("downloading", downloading(self.target), (ClickText("Install"),)),
        ]


class PlayDownloadWhatsApp(_PlayDownload):
    app, tier = "Google Play", 1
    target, query, row = "com.whatsapp", "WhatsApp", "WhatsApp Messenger"


class PlayDownloadInstagram(_PlayDownload):
    app, tier = "Google Play", 2
    target, query, row = "com.instagram.android", "Instagram", "Instagram"


class PlayWantWhatsApp(_PlayDownload):
    app, tier = "Google Play", 3
    target, query, row = "com.whatsapp", "WhatsApp", "WhatsApp Messenger"


TASKS: list[type[Task]] = [AlibabaFindCaps, AlibabaCapToCart, AlibabaBuyCap,
                           PlayDownloadWhatsApp, PlayDownloadInstagram, PlayWantWhatsApp]
