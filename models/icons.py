"""The offline icon matcher: Material Design icons rendered from Debian's font, no weights.

`fonts-material-design-icons-iconfont` (Apache-2.0) names 2,193 icons. For a description we
pick the icon names that fit it (a small synonym table, then the names' own words), render
them, and compare their shapes with each proposal crop: both are binarised, cropped tight,
padded square, scaled to 32x32 and blurred; the score is their normalised correlation at a
few scales. When no icon name fits the description, the matcher says it cannot judge
(returns None) instead of guessing.

A high score alone does not mean a crop looks like the description: the best of one or two
boxes (a position filter leaves few) can be any icon. So `judge` also scores each crop against
every other icon of the font that does not look like the description's (a template correlation
under `RELATED`), and reports by how much the description beats the best of them: a crop that
correlates more with "arrow_back" than with "thumb_up" is not a thumb up, whatever its score.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path

import cv2
import msgspec
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
# Icons whose templates correlate at least this much with one of the description's look like
# it (star / star_border, delete / delete_outline): they are not rivals.
RELATED = 0.8
# Boxes scoring under this for the description are not compared with the rivals (their
# margin is reported as score - 1): no pick rule grounds them, and it saves most of the work.
RIVAL_FLOOR = 0.5


class IconScores(msgspec.Struct, frozen=True):
    """A matcher's judgement of some boxes against a description."""

    scores: list[float]  # per box: how well it matches the description (0..1)
    # Per box: the description's score minus the best score of an unrelated description on
    # the same crop (in the matcher's units; negative: it looks more like something else);
    # None when the matcher has no rivals to compare with.
    margins: list[float] | None = None
    rivals: list[str] | None = None  # per box: that best unrelated description


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
        self._font_path = font
        self._font = ImageFont.truetype(str(font), 96)
        self._templates: dict[str, np.ndarray | None] = {}
        self._bank: tuple[list[str], np.ndarray] | None = None
        self._lock = threading.Lock()

    # -- which icons fit a description ---------------------------------------------------

    def icon_names(self, description: str) -> list[str]:
        """Icon names that fit the description, most specific first; [] when none does."""
        text = re.sub(r"[^a-z0-9 ]+", " ", description.lower()).strip()
        words = [w for w in text.split() if w]
        names: list[str] = []
        content = [w for w in words if w not in _STOP]
        joined = "_".join(content)
        # "thumbs up" is the icon thumb_up: try the words' singulars when the plural names none.
        singular = "_".join(w[:-1] if len(w) > 3 and w.endswith("s") else w for w in content)
        if joined not in self.codepoints and singular in self.codepoints:
            joined = singular
        # Spans of the description already named by a longer phrase: a shorter synonym inside
        # one does not apply ("up" in "thumb up" or "navigate up" is not the up arrow).
        taken: list[tuple[int, int]] = []
        phrase = " ".join(words)
        if joined in self.codepoints and len(content) >= 2:
            taken.append((0, len(phrase)))
        # Longer synonym phrases first ("flash off" before "flash").
        for key in sorted(SYNONYMS, key=len, reverse=True):
            for m in re.finditer(rf"\b{re.escape(key)}\b", phrase):
                if any(a <= m.start() and m.end() <= b and m.end() - m.start() < b - a
                       for a, b in taken):
                    continue
                names.extend(SYNONYMS[key])
                taken.append((m.start(), m.end()))
                break
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

    def all_templates(self) -> tuple[list[str], np.ndarray]:
        """Every icon of the font with a usable template: names and an (N, 1024) bank.

        Rendering all 2,193 takes about 10 s on a loaded 2-core machine, so the bank is kept
        on disk (``$XDG_CACHE_HOME/mobagent``), named by a hash of the font and code points.
        """
        with self._lock:
            if self._bank is not None:
                return self._bank
        path = self._bank_path()
        bank = None
        names = sorted(self.codepoints)
        if path is not None and path.is_file():
            try:
                data = np.load(path)
                saved = [str(n) for n in data["names"]]
                if data["bank"].shape == (len(saved), _SIZE * _SIZE) and \
                        set(saved) <= self.codepoints.keys():
                    names, bank = saved, data["bank"]
            except (OSError, ValueError, KeyError):
                bank = None  # a broken cache file is rebuilt
        if bank is None:
            names = [n for n in names if self.template(n) is not None]
            bank = np.stack([t for n in names if (t := self.template(n)) is not None])
            if path is not None:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
                    np.savez(tmp, names=np.array(names), bank=bank)
                    os.replace(tmp, path)
                except OSError:
                    pass  # no writable cache: rendered again next time
        with self._lock:
            self._bank = (names, bank.astype(np.float32))
            return self._bank

    def _bank_path(self) -> Path | None:
        try:
            digest = hashlib.sha1(self._font_path.read_bytes())
            digest.update(repr(sorted(self.codepoints.items())).encode())
            digest.update(f"size={_SIZE} v1".encode())
        except OSError:
            return None
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        return root / "mobagent" / f"material-icons-{digest.hexdigest()[:16]}.npz"

    def crop_descriptors(self, gray: np.ndarray, box: Box) -> np.ndarray | None:
        """The box's shape descriptors as columns (1024, D): both polarities, two scales."""
        h, w = gray.shape[:2]
        xa, ya = max(0, int(box[0])), max(0, int(box[1]))
        xb, yb = min(w, int(np.ceil(box[2]))), min(h, int(np.ceil(box[3])))
        descs = [d for mask in crop_masks(gray[ya:yb, xa:xb]) for scale in (1.0, 0.85)
                 if (d := shape_descriptor(mask, scale)) is not None]
        return np.stack(descs, axis=1) if descs else None

    def score(self, bgr: np.ndarray, boxes: Sequence[Box], description: str) -> list[float] | None:
        """Per box, the best correlation (0..1) with any fitting icon; None if none fits."""
        judged = self.judge(bgr, boxes, description, rivals=False)
        return None if judged is None else judged.scores

    def judge(self, bgr: np.ndarray, boxes: Sequence[Box], description: str, *,
              rivals: bool = True) -> IconScores | None:
        """Scores, and each crop's margin over the unrelated icons; None if no icon fits."""
        names = self.icon_names(description)
        pairs = [(t, k) for k, t in enumerate(self.template(n) for n in names) if t is not None]
        if not pairs:
            return None
        bank = np.stack([t for t, _ in pairs])  # (T, 1024)
        # The most specific names come first; later, looser ones ("remove" for "zoom out")
        # count a little less, so a plain bar elsewhere does not win over the real icon.
        weight = np.array([1.0 if k == 0 else 0.95 for _, k in pairs], dtype=np.float32)
        rival_names: list[str] = []
        rival_bank = np.zeros((0, bank.shape[1]), dtype=np.float32)
        if rivals:
            all_names, all_bank = self.all_templates()
            unrelated = (all_bank @ bank.T).max(axis=1) < RELATED
            unrelated &= ~np.isin(np.array(all_names), names)
            rival_names = [n for n, u in zip(all_names, unrelated, strict=True) if u]
            rival_bank = all_bank[unrelated]
        gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY) if bgr.ndim == 3 else bgr
        descs = [self.crop_descriptors(gray, b) for b in boxes]
        out = [0.0 if d is None else max(0.0, float(((bank @ d) * weight[:, None]).max()))
               for d in descs]
        if not rivals or not rival_names:
            return IconScores(scores=out)
        # Only boxes that could be picked are compared with the ~2,000 rivals, in one product.
        near = [i for i, (d, v) in enumerate(zip(descs, out, strict=True))
                if d is not None and v >= RIVAL_FLOOR]
        margins = [v - 1.0 for v in out]  # below the floor: never a pick anyway
        best_rivals = [""] * len(out)
        if near:
            cols = np.concatenate([descs[i] for i in near], axis=1)
            r = rival_bank @ cols  # (rivals, all columns)
            at = 0
            for i in near:
                k = descs[i].shape[1]  # type: ignore[union-attr]
                per = r[:, at : at + k].max(axis=1)
                at += k
                j = int(np.argmax(per))
                margins[i] = out[i] - max(0.0, float(per[j]))
                best_rivals[i] = rival_names[j].replace("_", " ")
        return IconScores(scores=out, margins=margins, rivals=best_rivals)
