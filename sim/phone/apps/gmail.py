"""Gmail: an inbox, a compose screen with To / Subject / body fields, and send.

Like the real app, sending with neither subject nor body asks "Send this message without
a subject or text in the body?" first. The state keeps sent messages and the draft.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.phone.app import App, Ctx, Screen
from sim.phone.widgets import (
    BottomNav,
    Dialog,
    Divider,
    Fab,
    IconButton,
    ListItem,
    SearchBar,
    Text,
    TextField,
    bind,
)

PACKAGE = "com.google.android.gm"
ACCOUNT = "me.sim@gmail.com"


@dataclass(frozen=True)
class Mail:
    to: str
    subject: str
    body: str


@dataclass
class Draft:
    to: str = ""
    subject: str = ""
    body: str = ""


INBOX: tuple[tuple[str, str, str, str], ...] = (
    # sender, subject, snippet, time
    ("Google", "Security alert", "A new sign-in on Android", "9:41 AM"),
    ("Maria Garcia", "Lunch on Friday?", "Hey! Are you free for lunch this Friday...", "8:15 AM"),
    ("GitHub", "[mobagent] New issue opened", "A new issue was opened in your repository", "Yesterday"),
    ("Alex Chen", "Photos from the trip", "Here are the photos I promised you", "Yesterday"),
    ("Amazon", "Your order has shipped", "Your package is on its way and will arrive", "Mar 12"),
    ("Newsletter", "This week in tech", "The top stories of the week, in five minutes", "Mar 11"),
)


@dataclass
class GmailState:
    draft: Draft | None = None  # the open compose screen's fields
    sent: list[Mail] = field(default_factory=list)
    discarded: int = 0


def _discard(ctx: Ctx[GmailState]) -> None:
    if ctx.state.draft is not None and (ctx.state.draft.to or ctx.state.draft.body):
        ctx.state.discarded += 1
    ctx.state.draft = None


def send(ctx: Ctx[GmailState], confirmed: bool = False) -> None:
    d = ctx.state.draft
    if d is None:
        return
    if not d.to.strip():
        ctx.show_dialog(Dialog("Add at least one recipient.", buttons=[("OK", lambda: ctx.show_dialog(None))]))
        return
    if "@" not in d.to or "." not in d.to.split("@")[-1]:
        ctx.show_dialog(Dialog(f"The address \"{d.to}\" in the \"To\" field was not recognized.",
                               buttons=[("OK", lambda: ctx.show_dialog(None))]))
        return
    if not confirmed and not d.subject.strip() and not d.body.strip():
        def ok() -> None:
            ctx.show_dialog(None)
            send(ctx, confirmed=True)
        ctx.show_dialog(Dialog("Send this message without a subject or text in the body?",
                               buttons=[("Cancel", lambda: ctx.show_dialog(None)), ("OK", ok)]))
        return
    ctx.state.sent.append(Mail(d.to.strip(), d.subject, d.body))
    ctx.state.draft = None
    ctx.back()
    ctx.toast("Sent")


def inbox(ctx: Ctx[GmailState]) -> Screen:
    def compose() -> None:
        ctx.state.draft = Draft()
        ctx.go("compose")

    rows: list = []
    for sender, subject, snippet, when in ctx.shuffled(list(INBOX), "inbox"):
        rows.append(ListItem(sender, f"{subject} - {snippet}", avatar=sender,
                             trailing_text=when, lines=1,
                             on_tap=bind(lambda s: ctx.toast(f"Opened: {s}"), subject)))
    return Screen(top=SearchBar(id="mail_search", hint="Search in mail",
                                on_tap=lambda: ctx.toast("Search is offline"),
                                leading=IconButton("menu", lambda: ctx.toast("Menu"), "Open navigation drawer")),
                  header=[Text("Primary", "label", muted=True)],
                  body=rows, fab=Fab("edit", compose, "Compose", "Compose"),
                  bottom=BottomNav([("mail", "Mail"), ("videocam", "Meet")], 0,
                                   lambda i: None if i == 0 else ctx.toast("Meet is unavailable")))


def compose(ctx: Ctx[GmailState]) -> Screen:
    if ctx.state.draft is None:  # e.g. after a force-stop: an empty compose
        ctx.state.draft = Draft()
    d = ctx.state.draft

    def set_to(v: str) -> None:
        d.to = v

    def set_subject(v: str) -> None:
        d.subject = v

    def set_body(v: str) -> None:
        d.body = v

    def close() -> None:
        _discard(ctx)
        ctx.back()

    body = [
        Text(f"From  {ACCOUNT}", "body2", muted=True),
        Divider(0),
        TextField("to", d.to, set_to, hint="To", outlined=False),
        TextField("subject", d.subject, set_subject, hint="Subject", outlined=False),
        TextField("body", d.body, set_body, hint="Compose email", multiline=True, lines=6,
                  outlined=False),
    ]
    return Screen(title="Compose", back=True, body=body,
                  actions=[IconButton("attach_file", lambda: ctx.toast("Storage permission needed"),
                                      "Attach file"),
                           IconButton("send", lambda: send(ctx), "Send"),
                           IconButton("more_vert", close, "Discard")])


def _on_stop(st: GmailState) -> None:
    st.draft = None


APP: App[GmailState] = App(
    package=PACKAGE, label="Gmail", icon="mail", state=GmailState,
    screens={"main": inbox, "compose": compose}, color="#EA4335",
    activity=".ConversationListActivityGmail", on_stop=_on_stop,
)
