"""Shared, session-scoped parts for the perception tests: one OCR engine, one OCR per Rico screen."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from models.ocr import Ocr, OcrResult, OcrSettings
from tests.fixtures.data import RicoDev

ROBOTO = Path("/usr/share/fonts/truetype/roboto/unhinted/RobotoTTF/Roboto-Regular.ttf")
MATERIAL = Path("/usr/share/fonts/truetype/material-design-icons-iconfont/MaterialIcons-Regular.ttf")


def read_bgr(path: Path) -> np.ndarray:
    img = cv2.imread(str(path))
    assert img is not None, f"cannot read {path}"
    return img


@pytest.fixture(scope="session")
def ocr_engine() -> Ocr:
    return Ocr(OcrSettings())


@pytest.fixture(scope="session")
def rico_ocr(rico_dev: RicoDev, ocr_engine: Ocr) -> dict[str, OcrResult]:
    """OCR of every dev screen, once per test session (about half a minute on 2 cores)."""
    return {s.screen_id: ocr_engine.run_bgr(read_bgr(s.image_path))
            for s in rico_dev.screens}


def font(size: int) -> ImageFont.FreeTypeFont:
    if not ROBOTO.is_file():
        pytest.skip(f"Roboto not installed at {ROBOTO} (Debian fonts-roboto)")
    return ImageFont.truetype(str(ROBOTO), size)


class Screen:
    """A synthetic phone screen drawn with Pillow; remembers where each text went."""

    def __init__(self, width: int = 1080, height: int = 1920) -> None:
        self.image = Image.new("RGB", (width, height), (250, 250, 250))
        self.draw = ImageDraw.Draw(self.image)
        self.boxes: dict[str, list[tuple[float, float, float, float]]] = {}

    def text(self, xy: tuple[int, int], text: str, size: int = 48,
             fill: tuple[int, int, int] = (33, 33, 33)) -> tuple[float, float, float, float]:
        f = font(size)
        x1, y1, x2, y2 = self.draw.textbbox(xy, text, font=f)
        self.draw.text(xy, text, font=f, fill=fill)
        box = (float(x1), float(y1), float(x2), float(y2))
        self.boxes.setdefault(text, []).append(box)
        return box

    def word_box(self, xy: tuple[int, int], line: str, word: str, size: int = 48
                 ) -> tuple[float, float, float, float]:
        """Where `word` lies inside `line` drawn at `xy`."""
        f = font(size)
        start = line.index(word)
        x0 = xy[0] + self.draw.textlength(line[:start], font=f)
        x1 = xy[0] + self.draw.textlength(line[: start + len(word)], font=f)
        full = self.draw.textbbox(xy, line, font=f)
        return (x0, float(full[1]), x1, float(full[3]))

    def icon(self, xy: tuple[int, int], name_or_char: str, size: int = 72,
             fill: tuple[int, int, int] = (60, 60, 60)) -> tuple[float, float, float, float]:
        if not MATERIAL.is_file():
            pytest.skip(f"Material icons font not installed at {MATERIAL}")
        f = ImageFont.truetype(str(MATERIAL), size)
        x1, y1, x2, y2 = self.draw.textbbox(xy, name_or_char, font=f)
        self.draw.text(xy, name_or_char, font=f, fill=fill)
        return (float(x1), float(y1), float(x2), float(y2))

    def array(self) -> np.ndarray:
        return np.asarray(self.image).copy()


def inside(point: tuple[float, float], box: tuple[float, float, float, float],
           slack: float = 0.0) -> bool:
    return (box[0] - slack <= point[0] <= box[2] + slack
            and box[1] - slack <= point[1] <= box[3] + slack)
