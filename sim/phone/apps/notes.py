"""Notes: a list of notes, a floating "+" for a new one, an editor with Title and Note
fields and a Save button."""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.phone.app import App, Ctx, Screen
from sim.phone.widgets import (
    Button,
    Dialog,
    Fab,
    IconButton,
    ListItem,
    Row,
    SearchBar,
    Text,
    TextField,
)

PACKAGE = "com.mobagent.notes"


@dataclass
class Note:
    title: str
    body: str = ""


@dataclass
class NotesState:
    notes: list[Note] = field(default_factory=list)
    draft_title: str = ""  # the editor's fields, saved into notes by Save
    draft_body: str = ""
    editing: int | None = None  # index of the note being edited; None: a new note
    query: str = ""


def _sample(state: NotesState, seed: int) -> None:
    state.notes = [
        Note("Shopping list", "Milk, eggs, bread, coffee"),
        Note("Meeting notes", "Discuss the Q3 roadmap with the team"),
        Note("Books to read", "The Pragmatic Programmer; Dune"),
    ]


def _open_editor(ctx: Ctx[NotesState], index: int | None) -> None:
    s = ctx.state
    s.editing = index
    note = s.notes[index] if index is not None and 0 <= index < len(s.notes) else Note("")
    s.draft_title, s.draft_body = note.title, note.body
    ctx.go("edit")


def main(ctx: Ctx[NotesState]) -> Screen:
    s = ctx.state
    order = ctx.shuffled(list(range(len(s.notes))), "notes")
    items = [ListItem(s.notes[i].title or "(untitled)", subtitle=s.notes[i].body, icon="description",
                      on_tap=lambda i=i: _open_editor(ctx, i), id=f"note{i}")  # type: ignore[misc]
             for i in order]
    body = [SearchBar(hint="Search your notes", on_tap=lambda: ctx.go("search")), *items]
    if not s.notes:
        body.append(Text("No notes yet. Tap + to add one.", muted=True, align="center"))
    return Screen(
        title="Notes",
        actions=[IconButton("more_vert", desc="More options")],
        body=body,
        fab=Fab("add", lambda: _open_editor(ctx, None), desc="New note"),
    )


def edit(ctx: Ctx[NotesState]) -> Screen:
    s = ctx.state

    def set_title(v: str) -> None:
        s.draft_title = v

    def set_body(v: str) -> None:
        s.draft_body = v

    def save() -> None:
        note = Note(s.draft_title.strip(), s.draft_body)
        if s.editing is not None and 0 <= s.editing < len(s.notes):
            s.notes[s.editing] = note
        else:
            s.notes.append(note)
            s.editing = len(s.notes) - 1
        ctx.toast("Note saved")
        ctx.back()

    def delete() -> None:
        def really() -> None:
            if s.editing is not None and 0 <= s.editing < len(s.notes):
                del s.notes[s.editing]
            s.editing = None
            ctx.show_dialog(None)
            ctx.back()

        ctx.show_dialog(Dialog("Delete this note?", "It will be removed from your notes.",
                               (("Cancel", lambda: ctx.show_dialog(None)), ("Delete", really))))

    actions = [IconButton("check", save, desc="Save")]
    if s.editing is not None:
        actions.insert(0, IconButton("delete", delete, desc="Delete"))
    return Screen(
        title="Edit note" if s.editing is not None else "New note",
        back=True,
        actions=actions,
        body=[
            TextField("title", s.draft_title, set_title, hint="Title", label="Title"),
            TextField("body", s.draft_body, set_body, hint="Note", label="Note", multiline=True, lines=6),
            Row([Button("Save", save, icon="save")], align="right"),
        ],
    )


def search(ctx: Ctx[NotesState]) -> Screen:
    s = ctx.state

    def set_query(v: str) -> None:
        s.query = v

    q = s.query.lower()
    hits = [(i, n) for i, n in enumerate(s.notes) if q and (q in n.title.lower() or q in n.body.lower())]
    return Screen(
        top=SearchBar("notes_search", s.query, set_query, hint="Search your notes",
                      leading=IconButton("arrow_back", ctx.back, "Navigate up")),
        body=[ListItem(n.title, subtitle=n.body, icon="description",
                       on_tap=lambda i=i: _open_editor(ctx, i)) for i, n in hits]  # type: ignore[misc]
        or [Text("No matching notes" if q else "Type to search", muted=True, align="center")],
        autofocus="notes_search",
    )


APP: App[NotesState] = App(
    package=PACKAGE, label="Notes", icon="sticky_note_2", color="#F9AB00", state=NotesState,
    screens={"main": main, "edit": edit, "search": search}, init=_sample,
    activities={".EditActivity": "edit"},
)
