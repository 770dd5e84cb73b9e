"""TrueType fonts for the rendered phone: Roboto text and Material Design icon glyphs.

Debian's fonts-roboto and fonts-material-design-icons-iconfont are the sources; Noto and
DejaVu are fallbacks. Fonts are loaded once per (face, size) and cached, because
FreeType face creation costs far more than drawing a string.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

FontT = ImageFont.FreeTypeFont

_FONT_DIRS = (Path("/usr/share/fonts/truetype"), Path("/usr/share/fonts"), Path("/usr/local/share/fonts"))
_WEIGHTS = {
    "regular": ("Roboto-Regular.ttf", "NotoSans-Regular.ttf", "DejaVuSans.ttf"),
    "medium": ("Roboto-Medium.ttf", "NotoSans-Medium.ttf", "NotoSans-Bold.ttf", "DejaVuSans-Bold.ttf"),
    "bold": ("Roboto-Bold.ttf", "NotoSans-Bold.ttf", "DejaVuSans-Bold.ttf"),
    "light": ("Roboto-Light.ttf", "NotoSans-Light.ttf", "DejaVuSans-ExtraLight.ttf", "DejaVuSans.ttf"),
}
# Wide-coverage faces for characters Roboto lacks (Arabic, Hebrew, symbols...).
_FALLBACKS = ("DejaVuSans.ttf", "NotoSans-Regular.ttf", "NotoSansSymbols2-Regular.ttf")
_ICON_FONT = "MaterialIcons-Regular.ttf"
_ICON_CODEPOINTS = (
    Path("/usr/share/fonts-material-design-icons-iconfont/scss/_variables.scss"),
    Path("/usr/share/fonts-material-design-icons-iconfont/codepoints"),
    Path("/usr/share/fonts/truetype/material-design-icons-iconfont/codepoints"),
)


class FontError(RuntimeError):
    """A needed font file is not installed (see scripts/bootstrap for the Debian packages)."""


@functools.cache
def _index() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for root in _FONT_DIRS:
        if root.is_dir():
            for p in sorted(root.rglob("*.ttf")):
                found.setdefault(p.name, p)
    return found


def _find(names: tuple[str, ...]) -> Path:
    idx = _index()
    for n in names:
        if n in idx:
            return idx[n]
    raise FontError(f"none of the fonts {', '.join(names)} is installed "
                    "(Debian: fonts-roboto fonts-noto-core fonts-dejavu-core)")


@functools.cache
def text_font(size: int, weight: str = "regular") -> FontT:
    """Roboto (or a fallback) at a pixel size; weight is regular, medium, bold or light."""
    if weight not in _WEIGHTS:
        raise ValueError(f"unknown font weight {weight!r} ({', '.join(_WEIGHTS)})")
    return ImageFont.truetype(str(_find(_WEIGHTS[weight])), max(1, size))


@functools.cache
def fallback_font(size: int) -> FontT:
    return ImageFont.truetype(str(_find(_FALLBACKS)), max(1, size))


@functools.cache
def icon_font(size: int) -> FontT:
    try:
        path = _find((_ICON_FONT,))
    except FontError:
        raise FontError("MaterialIcons-Regular.ttf is not installed "
                        "(Debian: fonts-material-design-icons-iconfont)") from None
    return ImageFont.truetype(str(path), max(1, size))


@functools.cache
def icon_codepoints() -> dict[str, str]:
    """Material icon name -> its character, from the package's codepoints table."""
    for path in _ICON_CODEPOINTS:
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            pairs = re.findall(r'"?([a-z0-9_]+)"?\s*:?\s+([0-9a-f]{4,5})\b', text)
            table = {name: chr(int(cp, 16)) for name, cp in pairs}
            if table:
                return table
    raise FontError("the Material icon codepoints table is not installed "
                    "(Debian: fonts-material-design-icons-iconfont)")


def icon_char(name: str) -> str:
    """The glyph for a Material icon name such as 'search' or 'more_vert'."""
    try:
        return icon_codepoints()[name]
    except KeyError:
        raise ValueError(f"unknown Material icon name {name!r}") from None


def _glyph_bytes(ch: str) -> bytes:
    img = Image.new("L", (48, 48))
    ImageDraw.Draw(img).text((4, 4), ch, font=text_font(32), fill=255)
    return img.tobytes()


@functools.cache
def _notdef() -> bytes:
    return _glyph_bytes("\U0010fffd")  # a private-use character no font covers


@functools.cache
def _roboto_covers(ch: str) -> bool:
    # Roboto draws missing characters as its .notdef box; a covered glyph looks different.
    return ch.isspace() or _glyph_bytes(ch) != _notdef()


def font_for(text: str, size: int, weight: str = "regular") -> FontT:
    """Roboto when it has every character of text, else a wider-coverage face."""
    if text.isascii() or all(_roboto_covers(c) for c in text):
        return text_font(size, weight)
    return fallback_font(size)
