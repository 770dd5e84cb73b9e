"""The offline icon matcher: Material Design icons rendered from Debian's font, no weights.

`fonts-material-design-icons-iconfont` (Apache-2.0) names 2,193 icons. For a description we
pick the icon names that fit it (a small synonym table, then the names' own words), render
them, and compare their shapes with each proposal crop: both are binarised, cropped tight,
padded square, scaled to 32x32 and blurred; the score is their normalised correlation at a
few scales. When no icon name fits the description, the matcher says it cannot judge
(returns None) instead of guessing.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFont

Box = tuple[float, float, float, float]

FONT_PATHS = (
    "/usr/share/fonts/truetype/material-design-icons-iconfont/MaterialIcons-Regular.ttf",
)
CODEPOINT_PATHS = (
    "/usr/share/fonts/truetype/material-design-icons-iconfont/codepoints",
    "/usr/share/fonts-material-design-icons-iconfont/scss/_variables.scss",
)

# Descriptions apps and LLMs use -> Material icon names. Checked before the names' own words.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "navigate up": ("arrow_back", "menu"),
    "back": ("arrow_back", "arrow_back_ios", "chevron_left"),
    "go back": ("arrow_back", "arrow_back_ios"),
    "up": ("arrow_back", "keyboard_arrow_up"),
    "more options": ("more_vert", "more_horiz"),
    "more": ("more_vert", "more_horiz"),
    "options": ("more_vert", "more_horiz", "settings"),
    "overflow": ("more_vert",),
    "menu": ("menu",),
    "open menu": ("menu",),
    "close menu": ("close", "arrow_back"),
    "drawer": ("menu",),
    "hamburger": ("menu",),
    "search": ("search",),
    "magnifier": ("search",),
    "find": ("search",),
    "plus": ("add", "add_circle"),
    "add": ("add", "add_circle"),
    "new": ("add", "create"),
    "compose": ("create", "edit", "add"),
    "edit": ("edit", "create"),
    "write": ("create", "edit"),
    "heart": ("favorite", "favorite_border"),
    "like": ("favorite", "favorite_border", "thumb_up"),
    "favorite": ("favorite", "favorite_border", "star"),
    "favourite": ("favorite", "favorite_border", "star"),
    "star": ("star", "star_border"),
    "close": ("close", "clear"),
    "cancel": ("close", "clear", "cancel"),
    "dismiss": ("close", "clear"),
    "x": ("close", "clear"),
    "delete": ("delete", "delete_outline"),
    "trash": ("delete",),
    "remove": ("remove", "delete"),
    "minus": ("remove",),
    "share": ("share",),
    "send": ("send",),
    "settings": ("settings",),
    "gear": ("settings",),
    "home": ("home",),
    "refresh": ("refresh",),
    "reload": ("refresh",),
    "camera": ("camera_alt", "photo_camera"),
    "photo": ("photo_camera", "image"),
    "gallery": ("photo_library", "image"),
    "microphone": ("mic",),
    "mic": ("mic",),
    "voice": ("mic",),
    "play": ("play_arrow",),
    "pause": ("pause",),
    "next": ("skip_next", "arrow_forward", "chevron_right"),
    "previous": ("skip_previous", "arrow_back", "chevron_left"),
    "forward": ("arrow_forward",),
    "location": ("place", "my_location", "location_on"),
    "my location": ("my_location", "gps_fixed"),
    "map": ("map", "place"),
    "zoom in": ("zoom_in", "add"),
    "zoom out": ("zoom_out", "remove"),
    "increase": ("keyboard_arrow_up", "add", "expand_less"),
    "decrease": ("keyboard_arrow_down", "remove", "expand_more"),
    "page up": ("keyboard_arrow_up", "expand_less"),
    "page down": ("keyboard_arrow_down", "expand_more"),
    "expand": ("expand_more",),
    "collapse": ("expand_less",),
    "arrow": ("arrow_forward", "arrow_back", "chevron_right", "keyboard_arrow_right"),
    "check": ("check", "done"),
    "done": ("done", "check"),
    "ok": ("done", "check"),
    "confirm": ("done", "check"),
    "notifications": ("notifications", "notifications_none"),
    "bell": ("notifications",),
    "cart": ("shopping_cart",),
    "basket": ("shopping_cart", "shopping_basket"),
    "profile": ("account_circle", "person"),
    "account": ("account_circle", "person"),
    "user": ("person", "account_circle"),
    "contacts": ("contacts", "person"),
    "call": ("call", "phone"),
    "phone": ("call", "phone"),
    "dial": ("dialpad", "call"),
    "message": ("message", "chat", "sms"),
    "chat": ("chat", "message"),
    "email": ("email", "mail"),
    "mail": ("mail", "email"),
    "calendar": ("event", "calendar_today"),
    "clock": ("access_time", "schedule"),
    "alarm": ("alarm",),
    "timer": ("timer",),
    "info": ("info", "info_outline"),
    "help": ("help", "help_outline"),
    "filter": ("filter_list",),
    "sort": ("sort",),
    "download": ("file_download", "get_app"),
    "upload": ("file_upload",),
    "attach": ("attach_file",),
    "bookmark": ("bookmark", "bookmark_border"),
    "lock": ("lock",),
    "flash": ("flash_on", "flash_auto"),
    "flash off": ("flash_off",),
    "switch camera": ("switch_camera", "flip_camera_android"),
    "back camera": ("camera_rear", "switch_camera"),
    "front camera": ("camera_front", "switch_camera"),
    "grid": ("grid_on",),
    "grid lines off": ("grid_off",),
    "timer off": ("timer_off",),
    "volume": ("volume_up",),
    "mute": ("volume_off",),
    "wifi": ("wifi",),
    "bluetooth": ("bluetooth",),
    "brightness": ("brightness_medium",),
    "list": ("list", "view_list"),
    "apps": ("apps",),
    "keyboard": ("keyboard",),
    "emoji": ("insert_emoticon", "mood"),
    "download done": ("file_download_done",),
}

_STOP = {"the", "a", "an", "icon", "button", "image", "of", "to", "on", "at", "in", "for",
         "with", "and", "symbol", "sign", "shaped", "like", "that", "is", "logo"}

_SIZE = 32


def _find(paths: Sequence[str]) -> Path | None:
    for p in paths:
        if Path(p).is_file():
            return Path(p)
    return None


def load_codepoints(path: Path) -> dict[str, int]:
    """Icon name -> code point, from the font's `codepoints` file or the package's SCSS map."""
    names: dict[str, int] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = re.match(r'\s*"?([a-z0-9_]+)"?\s*:?\s+([0-9a-fA-F]{4,5}),?\s*$', line)
        if m:
            names[m.group(1)] = int(m.group(2), 16)
    return names


def shape_descriptor(mask: np.ndarray, scale: float = 1.0) -> np.ndarray | None:
    """A 32x32 zero-mean, unit-norm blurred silhouette of a binary mask (None when empty)."""
    ys, xs = np.nonzero(mask)
    if len(xs) < 4:
        return None
    x0, x1, y0, y1 = xs.min(), xs.max() + 1, ys.min(), ys.max() + 1
    tight = mask[y0:y1, x0:x1].astype(np.uint8) * 255
    side = int(max(x1 - x0, y1 - y0) / scale) + 2
    canvas = np.zeros((side, side), dtype=np.uint8)
    oy, ox = (side - (y1 - y0)) // 2, (side - (x1 - x0)) // 2
    canvas[max(0, oy) : max(0, oy) + (y1 - y0), max(0, ox) : max(0, ox) + (x1 - x0)] = \
        tight[: side - max(0, oy), : side - max(0, ox)]
    resized = cv2.resize(canvas, (_SIZE, _SIZE), interpolation=cv2.INTER_AREA)
    small = cv2.GaussianBlur(resized.astype(np.float32), (5, 5), 1.2)
    small = small - float(small.mean())
    norm = float(np.linalg.norm(small))
    if norm < 1e-6:
        return None
    return (small / norm).reshape(-1)


def crop_masks(gray: np.ndarray) -> list[np.ndarray]:
    """Foreground candidates of an icon crop: Otsu's split, the minority at the border first.

    Both polarities are returned, because an icon may be light-on-dark (a FAB) or dark-on-light.
    """
    if gray.size == 0 or gray.shape[0] < 4 or gray.shape[1] < 4:
        return []
    if int(gray.max()) - int(gray.min()) < 20:
        return []  # flat crop: no shape
    _, binary = cv2.threshold(gray, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
    fg = binary > 0
    border = np.concatenate([fg[0], fg[-1], fg[:, 0], fg[:, -1]])
    if border.mean() > 0.5:
        fg = ~fg
    return [fg, ~fg]


class MaterialIconMatcher:
    """Scores proposal boxes against a description with rendered Material icons."""

    def __init__(self, font_path: str | Path | None = None,
                 codepoints_path: str | Path | None = None) -> None:
        font = Path(font_path) if font_path else _find(FONT_PATHS)
        points = Path(codepoints_path) if codepoints_path else _find(CODEPOINT_PATHS)
        if font is None or points is None:
            raise FileNotFoundError(
                "Material icons font or code points not found; install Debian's "
                "fonts-material-design-icons-iconfont or pass font_path/codepoints_path")
        self.codepoints = load_codepoints(points)
        if not self.codepoints:
            raise ValueError(f"no icon code points in {points}")
        self._font = ImageFont.truetype(str(font), 96)
        self._templates: dict[str, np.ndarray | None] = {}
        self._lock = threading.Lock()

    # -- which icons fit a description ---------------------------------------------------

    def icon_names(self, description: str) -> list[str]:
        """Icon names that fit the description, most specific first; [] when none does."""
        text = re.sub(r"[^a-z0-9 ]+", " ", description.lower()).strip()
        words = [w for w in text.split() if w]
        names: list[str] = []
        phrase = " ".join(words)
        # Longer synonym phrases first ("flash off" before "flash").
        for key in sorted(SYNONYMS, key=len, reverse=True):
            if re.search(rf"\b{re.escape(key)}\b", phrase):
                names.extend(SYNONYMS[key])
        content = [w for w in words if w not in _STOP]
        joined = "_".join(content)
        if joined in self.codepoints:
            names.insert(0, joined)
        for w in content:
            if w in self.codepoints:
                names.append(w)
        # Names made only of the description's words ("my_location", "zoom_in").
        if len(content) >= 2:
            cs = set(content)
            names.extend(n for n in self.codepoints if set(n.split("_")) <= cs and "_" in n)
        return [n for n in dict.fromkeys(names) if n in self.codepoints][:8]

    def template(self, name: str) -> np.ndarray | None:
        with self._lock:
            if name in self._templates:
                return self._templates[name]
        img = Image.new("L", (128, 128), 0)
        ImageDraw.Draw(img).text((16, 16), chr(self.codepoints[name]), fill=255, font=self._font)
        desc = shape_descriptor(np.asarray(img) > 127)
        with self._lock:
            self._templates[name] = desc
        return desc

    # -- scoring ---------------------------------------------------------------------------

    def score(self, bgr: np.ndarray, boxes: Sequence[Box], description: str) -> list[float] | None:
        """Per box, the best correlation (0..1) with any fitting icon; None if none fits."""
        names = self.icon_names(description)
        pairs = [(t, k) for k, t in enumerate(self.template(n) for n in names) if t is not None]
        if not pairs:
            return None
        bank = np.stack([t for t, _ in pairs])  # (T, 1024)
        # The most specific names come first; later, looser ones ("remove" for "zoom out")
        # count a little less, so a plain bar elsewhere does not win over the real icon.
        weight = np.array([1.0 if k == 0 else 0.95 for _, k in pairs], dtype=np.float32)
        gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY) if bgr.ndim == 3 else bgr
        h, w = gray.shape[:2]
        out = []
        for x1, y1, x2, y2 in boxes:
            xa, ya = max(0, int(x1)), max(0, int(y1))
            xb, yb = min(w, int(np.ceil(x2))), min(h, int(np.ceil(y2)))
            crop = gray[ya:yb, xa:xb]
            best = 0.0
            for mask in crop_masks(crop):
                for scale in (1.0, 0.85):
                    d = shape_descriptor(mask, scale)
                    if d is not None:
                        best = max(best, float(((bank @ d) * weight).max()))
            out.append(max(0.0, best))
        return out
