"""Save a PNG of every screen of every app on the simulated phone, for review.

    python -m sim.gallery --out DIR [--seed S] [--scale 0.5] [--app PACKAGE ...]

Screens are opened directly (the test API's ``open``), with the parameters a screen gets
by default; the launcher's pages and a focused field with the keyboard are added.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from PIL import Image

from sim.phone import SimPhone
from sim.phone_api import DeviceInfo


def _save(img: Image.Image, path: Path, scale: float) -> None:
    if scale != 1.0:
        img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))),
                         Image.Resampling.LANCZOS)
    img.save(path, optimize=True)


def _phone(seed: int, width: int, height: int, density: int) -> SimPhone:
    phone = SimPhone(DeviceInfo("gallery", width=width, height=height, density=density), seed=seed)
    phone.clock = lambda: 0.0  # no spinner or toast ever expires or starts mid-gallery
    return phone


def make_gallery(out: Path, seed: int = 0, scale: float = 1.0, packages: list[str] | None = None,
                 width: int = 1080, height: int = 2400, density: int = 420) -> tuple[list[Path], list[str]]:
    """Write the PNGs; returns (files written, 'package/screen: error' for screens that failed)."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    failed: list[str] = []
    phone = _phone(seed, width, height, density)
    known = {a.package for a in phone.apps()}
    for pkg in packages or []:
        if pkg not in known:
            raise ValueError(f"no app {pkg!r} on the phone ({', '.join(sorted(known))})")
    if not packages:
        for page in range(8):
            phone.key(3)
            if page:
                for _ in range(page):
                    phone.swipe(width * 9 // 10, height // 2, width // 10, height // 2, 200)
            if phone.launcher_page != page:
                break
            path = out / f"launcher_page{page + 1}.png"
            _save(phone.screenshot(), path, scale)
            written.append(path)
    for app in phone.apps():
        if packages and app.package not in packages:
            continue
        for screen in app.screens:
            p = _phone(seed, width, height, density)
            try:
                p.open(app.package, screen, **app.examples.get(screen, {}))
                p.settle()
                img = p.screenshot()
            except Exception as e:  # a screen that cannot draw by itself is reported, not fatal
                failed.append(f"{app.package}/{screen}: {type(e).__name__}: {e}")
                continue
            if p.crashes:  # the screen raised: the phone fell back to the launcher
                last = p.crashes[-1].strip().splitlines()[-1]
                failed.append(f"{app.package}/{screen}: {last} (give it App.examples params?)")
                continue
            path = out / f"{app.label.lower().replace(' ', '_').replace('.', '')}_{screen}.png"
            _save(img, path, scale)
            written.append(path)
            fields = [e for e in p.elements() if e.editable]
            if fields and screen == app.home and not p.keyboard_visible():
                p.tap_element(fields[0])
                if p.keyboard_visible():
                    kpath = path.with_name(path.stem + "_keyboard.png")
                    _save(p.screenshot(), kpath, scale)
                    written.append(kpath)
    return written, failed


def make_doc_screens(out: Path, scale: float = 0.5) -> list[Path]:
    """The few representative screens kept in docs/screens/ for readers."""
    from sim.phone.apps import chrome, notes
    from sim.phone.system import SETTINGS_PACKAGE

    out.mkdir(parents=True, exist_ok=True)
    shots: list[tuple[str, SimPhone]] = []
    p = _phone(0, 1080, 2400, 420)
    shots.append(("launcher.png", p))
    p = _phone(0, 1080, 2400, 420)
    p.launch(notes.PACKAGE)
    p.tap_element(p.find(kind="fab")[0])
    p.tap_element(p.find(id="title")[0])
    p.type_text("Groceries for the weekend")
    shots.append(("notes_editor_keyboard.png", p))
    p = _phone(0, 1080, 2400, 420)
    p.open(SETTINGS_PACKAGE)
    shots.append(("settings.png", p))
    p = _phone(0, 1080, 2400, 420)
    p.system.dark_mode = True
    p.system.show_network_speed = True
    p.open(SETTINGS_PACKAGE, "notifications")
    shots.append(("settings_status_bar_dark.png", p))
    p = _phone(0, 1080, 2400, 420)
    p.launch(chrome.PACKAGE)
    p.tap_element(p.find(id="ntp_search")[0])
    p.type_text("pet cat")
    p.key(66)
    shots.append(("chrome_results.png", p))
    written = []
    for name, phone in shots:
        if phone.crashes:
            raise RuntimeError(f"{name}: the phone crashed: {phone.crashes[-1]}")
        path = out / name
        _save(phone.screenshot(), path, scale)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.gallery", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="folder for the PNGs")
    ap.add_argument("--docs", action="store_true",
                    help="only the few representative screens kept in docs/screens/ (half size)")
    ap.add_argument("--seed", type=int, default=0, help="perturbation seed (0: canonical)")
    ap.add_argument("--scale", type=float, default=1.0, help="resize factor, e.g. 0.5")
    ap.add_argument("--app", action="append", help="only this package (repeatable)")
    args = ap.parse_args(argv)
    if args.seed < 0:
        ap.error("--seed must be >= 0")
    if not 0.05 <= args.scale <= 2.0:
        ap.error("--scale must be between 0.05 and 2")
    if args.docs:
        print(f"wrote {len(make_doc_screens(args.out))} PNGs to {args.out}")
        return 0
    try:
        written, failed = make_gallery(args.out, args.seed, args.scale, args.app)
    except (ValueError, OSError) as e:
        print(f"gallery: {e}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} PNGs to {args.out}")
    for f in failed:
        print(f"failed: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
