"""Alibaba.com: search products, a product page, add to cart (with a quantity sheet), cart.

Content is a fixed catalog; seeds shuffle the recommendations and the result order. The
state records what a task checks: submitted searches, opened product pages, the cart.
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
    Spacer,
    Text,
    bind,
)

PACKAGE = "com.alibaba.intl.android.apps.poseidon"


@dataclass(frozen=True)
class Product:
    id: str
    title: str
    price: str
    min_order: str
    tags: tuple[str, ...]
    supplier: str
    add_to_cart: bool = True  # some listings only take inquiries


CATALOG: tuple[Product, ...] = (
    Product("cap-embroidered", "Custom Embroidered Baseball Cap", "US$1.85-3.20", "50 pieces",
            ("cap", "hat", "baseball", "apparel"), "Shenzhen Sunrise Headwear"),
    Product("cap-dad", "Cotton Dad Hat Unisex Adjustable Cap", "US$1.20-2.10", "100 pieces",
            ("cap", "hat", "apparel"), "Yiwu Lucky Caps Co."),
    Product("cap-trucker", "Mesh Trucker Cap with Logo", "US$0.95-1.60", "200 pieces",
            ("cap", "hat", "trucker", "apparel"), "Guangzhou Topwin Garments"),
    Product("cap-snapback", "Flat Brim Snapback Cap", "US$2.30-3.90", "30 pieces",
            ("cap", "hat", "snapback", "apparel"), "Xiamen Ever Bright Caps"),
    Product("beanie", "Winter Knit Beanie Hat", "US$0.80-1.40", "100 pieces",
            ("hat", "beanie", "winter", "apparel"), "Hebei Warm Knitting"),
    Product("earbuds", "Wireless Bluetooth Earbuds", "US$4.50-7.80", "10 pieces",
            ("earbuds", "bluetooth", "headphones", "electronics"), "Shenzhen Audio Tech"),
    Product("bottle", "Stainless Steel Water Bottle", "US$2.10-3.60", "50 pieces",
            ("bottle", "water", "sports"), "Zhejiang Cool Cup"),
    Product("yoga-mat", "Non-Slip Yoga Mat 6mm", "US$3.20-5.00", "20 pieces",
            ("yoga", "mat", "sports"), "Jiangsu Fit Life"),
    Product("phone-case", "Shockproof Phone Case", "US$0.60-1.10", "100 pieces",
            ("phone", "case", "electronics"), "Dongguan Case Maker", add_to_cart=False),
    Product("lamp", "LED Desk Lamp with USB Charging", "US$5.90-8.40", "10 pieces",
            ("lamp", "led", "home"), "Ningbo Bright Home"),
    Product("tote", "Canvas Tote Bag", "US$0.70-1.30", "300 pieces",
            ("bag", "tote", "canvas", "apparel"), "Wenzhou Green Bags"),
)
BY_ID = {p.id: p for p in CATALOG}
CATEGORIES = ("Apparel", "Electronics", "Sports", "Home")


@dataclass
class AlibabaState:
    draft: str = ""  # the search box while typing
    searches: list[str] = field(default_factory=list)  # submitted queries, in order
    viewed: list[str] = field(default_factory=list)  # product ids whose page was opened
    cart: list[str] = field(default_factory=list)  # product ids, once confirmed
    recent: list[str] = field(default_factory=lambda: ["yoga mat", "phone case"])


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def search(query: str) -> list[Product]:
    """Products whose tags or title words match any word of the query (plurals folded)."""
    words = {_stem(w) for w in re.findall(r"[a-z0-9]+", query.lower())}
    if not words:
        return []
    out = []
    for p in CATALOG:
        keys = {_stem(t) for t in p.tags} | {_stem(w) for w in re.findall(r"[a-z0-9]+", p.title.lower())}
        if words & keys:
            out.append(p)
    return out


def submit(ctx: Ctx[AlibabaState], query: str) -> None:
    q = query.strip()
    if not q:
        ctx.toast("Enter a keyword")
        return
    ctx.state.searches.append(q)
    if q.lower() not in ctx.state.recent:
        ctx.state.recent.insert(0, q.lower())
    ctx.go("results", query=q)


def _nav(ctx: Ctx[AlibabaState], selected: int) -> BottomNav:
    def pick(i: int) -> None:
        if i == 0:
            ctx.replace("main")
        elif i == 2:
            ctx.go("cart")
        else:
            ctx.toast("Sign in to continue")
    return BottomNav([("home", "Home"), ("chat", "Messenger"), ("shopping_cart", "Cart"),
                      ("person", "My Alibaba")], selected, pick)


def _product_row(ctx: Ctx[AlibabaState], p: Product) -> ListItem:
    return ListItem(p.title, f"{p.price} · Min. order: {p.min_order}", icon="inventory_2",
                    icon_color="#FF6A00", lines=1, id=f"product:{p.id}",
                    on_tap=lambda: _open_product(ctx, p))


def _open_product(ctx: Ctx[AlibabaState], p: Product) -> None:
    ctx.state.viewed.append(p.id)
    ctx.go("product", id=p.id)


def main(ctx: Ctx[AlibabaState]) -> Screen:
    recommended = ctx.shuffled([p for p in CATALOG if "cap" not in p.tags], "recommended")[:5]
    body = [
        Row([Chip(c, on_tap=bind(lambda q: ctx.go("results", query=q), c.lower())) for c in CATEGORIES]),
        Media("#FF6A00", "local_shipping", 120, "Ready to ship · Fast dispatch"),
        Text("Recommended for you", "subtitle"),
        *[_product_row(ctx, p) for p in recommended],
    ]
    return Screen(top=SearchBar(id="home_search", hint="Search products",
                                on_tap=lambda: ctx.go("search"),
                                trailing=[IconButton("photo_camera", lambda: ctx.toast(
                                    "Camera permission needed"), "Image search")]),
                  body=body, bottom=_nav(ctx, 0))


def search_screen(ctx: Ctx[AlibabaState]) -> Screen:
    st = ctx.state

    def change(v: str) -> None:
        st.draft = v

    def go() -> None:
        submit(ctx, st.draft)

    body = [
        Row([Button("Search", go, variant="filled", id="search_button")], align="right"),
        Text("Recent searches", "subtitle"),
        Row([Chip(r, on_tap=bind(lambda q: submit(ctx, q), r)) for r in st.recent[:4]]),
    ]
    return Screen(top=SearchBar(id="query", value=st.draft, on_change=change, on_submit=go,
                                hint="Search products",
                                leading=IconButton("arrow_back", ctx.back, "Navigate up")),
                  body=body, autofocus="query")


def results(ctx: Ctx[AlibabaState]) -> Screen:
    q = str(ctx.params.get("query", ""))
    found = ctx.shuffled(search(q), "results/" + q)
    body: list = [Text(f"{len(found)} products for \"{q}\"", "body2", muted=True)]
    if not found:
        body.append(Text("No matching products. Try another keyword.", "body"))
    for p in found:
        body.append(_product_row(ctx, p))
        body.append(Divider())
    return Screen(title=q, back=True, body=body,
                  actions=[IconButton("tune", lambda: ctx.toast("Filters"), "Filter")])


def product(ctx: Ctx[AlibabaState]) -> Screen:
    p = BY_ID[str(ctx.params["id"])]
    st = ctx.state

    def add() -> None:
        ctx.go("quantity", id=p.id)

    buttons = [Button("Chat now", lambda: ctx.toast("Supplier is offline"), variant="outlined")]
    if p.add_to_cart:
        buttons.append(Button("Add to cart", add, variant="tonal", id="add_to_cart"))
    buttons.append(Button("Start order", lambda: ctx.toast("Sign in to start an order")))
    body = [
        Media("#F4A261", "checkroom" if "apparel" in p.tags else "inventory_2", 220, ""),
        Text(p.title, "title"),
        Text(p.price, "subtitle", color="#FF6A00"),
        Text(f"Min. order: {p.min_order}", "body2", muted=True),
        Text(f"Supplier: {p.supplier}", "body2", muted=True),
        Spacer(8),
        Row(buttons),
        Divider(),
        Text("Product details", "subtitle"),
        Text("Customizable logo, color and size. Samples available. Lead time 7-15 days.",
             "body2"),
    ]
    in_cart = sum(1 for i in st.cart if i == p.id)
    if in_cart:
        body.insert(4, Text(f"In your cart: {in_cart}", "body2", color="#2E7D32"))
    return Screen(title="Item information", back=True, body=body,
                  actions=[IconButton("share", lambda: ctx.toast("Link copied"), "Share"),
                           IconButton("shopping_cart", lambda: ctx.go("cart"), "Cart")])


def quantity(ctx: Ctx[AlibabaState]) -> Screen:
    """The sheet 'Add to cart' opens: the minimum order is preselected; Confirm adds it."""
    p = BY_ID[str(ctx.params["id"])]

    def confirm() -> None:
        ctx.state.cart.append(p.id)
        ctx.back()
        ctx.toast("Added to cart")

    body = [
        Text(p.title, "subtitle"),
        Text(p.price, "body", color="#FF6A00"),
        Text(f"Quantity: {p.min_order} (minimum order)", "body2"),
        Spacer(16),
        Button("Confirm", confirm, full_width=True, id="confirm"),
    ]
    return Screen(title="Select quantity", back=True, body=body)


def cart(ctx: Ctx[AlibabaState]) -> Screen:
    items = [BY_ID[i] for i in dict.fromkeys(ctx.state.cart)]
    body: list = []
    if not items:
        body.append(Text("Your cart is empty", "body", muted=True, align="center"))
    for p in items:
        n = ctx.state.cart.count(p.id)
        body.append(ListItem(p.title, f"{p.price} · x{n}", icon="inventory_2",
                             icon_color="#FF6A00"))
    return Screen(title="Cart", back=True, body=body, bottom=_nav(ctx, 2))


APP: App[AlibabaState] = App(
    package=PACKAGE, label="Alibaba.com", icon="storefront", state=AlibabaState,
    screens={"main": main, "search": search_screen, "results": results, "product": product,
             "quantity": quantity, "cart": cart},
    color="#FF6A00", activity=".HomeActivity",
    examples={"results": {"query": "caps"}, "product": {"id": "cap-trucker"},
              "quantity": {"id": "cap-trucker"}},
)
