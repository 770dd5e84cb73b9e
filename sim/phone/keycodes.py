"""Android key codes the phone acts on (android.view.KeyEvent)."""

from __future__ import annotations

HOME = 3
BACK = 4
DPAD_CENTER = 23
SPACE = 62
TAB = 61
ENTER = 66
DEL = 67
FORWARD_DEL = 112
APP_SWITCH = 187
NUMPAD_ENTER = 160
A = 29
CTRL_LEFT, CTRL_RIGHT = 113, 114
MOVE_HOME, MOVE_END = 122, 123
DPAD_LEFT, DPAD_RIGHT = 21, 22
CURSOR_MOVES = (MOVE_HOME, MOVE_END, DPAD_LEFT, DPAD_RIGHT)

_PUNCT = {55: ",", 56: ".", 62: " ", 68: "`", 69: "-", 70: "=", 71: "[", 72: "]", 73: "\\", 74: ";",
          75: "'", 76: "/", 77: "@", 81: "+"}


def char_for(keycode: int) -> str | None:
    """The character a key types (KEYCODE_0..9, A..Z, punctuation), or None."""
    if 7 <= keycode <= 16:
        return str(keycode - 7)
    if 29 <= keycode <= 54:
        return chr(ord("a") + keycode - 29)
    return _PUNCT.get(keycode)
