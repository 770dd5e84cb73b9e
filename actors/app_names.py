"""App names as a model writes them, matched against what a phone has: installed package
names (``pm list packages``) and the launcher labels read on the home screens and in the app
drawer. Pure functions; the actuator does the device calls.

A label on the launcher may be cut short ("Amazon Mu…"), and OCR may drop or swap a letter,
so a label matches a name when one is a prefix of the other (at least 4 characters) or
when their similarity is at least ``MATCH_RATIO``. A package matches a name when one of its
distinctive dot-separated words is the name without spaces ("com.google.android.youtube" is
"YouTube"); the generic words (com, android, google, apps...) name nothing.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable

MATCH_RATIO = 0.8
ELLIPSIS = ("…", "...")
_GENERIC = frozenset({
    "com", "org", "net", "io", "android", "google", "apps", "app", "mobile", "intl", "inc",
    "mobagent", "providers", "provider", "service", "services", "launcher3", "ui", "lite",
})


def norm(text: str) -> str:
    """Case, width and punctuation folded, spaces collapsed ("Play  Store!" -> "play store")."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s.]", " ", text).split())


def _squash(text: str) -> str:
    return re.sub(r"[\W_]+", "", norm(text))


def label_score(name: str, label: str) -> float:
    """How well a launcher label matches a wanted app name: 1.0 exact, 0 unrelated."""
    want, got = _squash(name), _squash(label.rstrip("".join(ELLIPSIS)))
    if not want or not got:
        return 0.0
    if want == got:
        return 1.0
    cut = label.rstrip().endswith(ELLIPSIS)
    if len(got) >= 4 and want.startswith(got) and cut:
        return 0.95  # an ellipsized label is the start of the name
    if len(want) >= 4 and got.startswith(want) and len(want) >= 0.6 * len(got):
        return 0.9  # "Play" for "Play Store" is too short to say; "Alibaba" for "Alibaba.com" is not
    return difflib.SequenceMatcher(None, want, got).ratio()


def best_label(name: str, labels: Iterable[str]) -> str | None:
    """The label that best matches ``name``, if any matches at least ``MATCH_RATIO``."""
    scored = [(label_score(name, lb), lb) for lb in labels]
    scored = [(s, lb) for s, lb in scored if s >= MATCH_RATIO]
    return max(scored, key=lambda t: t[0])[1] if scored else None


def package_words(package: str) -> list[str]:
    """The words of a package name that can name an app ("com.amazon.mp3" -> amazon, mp3)."""
    return [w for w in package.lower().split(".") if w not in _GENERIC and len(w) >= 2]


def packages_named(name: str, packages: Iterable[str]) -> list[str]:
    """Installed packages one of whose distinctive words is ``name`` (spaces dropped)."""
    want = _squash(name)
    if len(want) < 3:
        return []
    return sorted((p for p in packages if want in package_words(p)), key=len)


def closest(name: str, labels: Iterable[str], n: int = 5) -> list[str]:
    """Up to n labels nearest to ``name``, best first (for the model's feedback)."""
    uniq = {lb.rstrip("".join(ELLIPSIS)).strip(): None for lb in labels if lb.strip()}
    ranked = sorted(uniq, key=lambda lb: (-label_score(name, lb), lb.lower()))
    return ranked[:n]
