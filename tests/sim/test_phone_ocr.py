"""OCR does real work on the rendered screens: rapidocr reads the launcher's app labels."""

from __future__ import annotations

import numpy as np
import pytest

from sim.phone import SimPhone
from sim.phone_api import DeviceInfo


def test_rapidocr_reads_launcher_labels() -> None:
    rapidocr = pytest.importorskip("rapidocr_onnxruntime")
    p = SimPhone(DeviceInfo("ocr"), seed=0)
    p.key(3)
    labels = {e.text for e in p.find(kind="app_icon")}
    img = p.screenshot().resize((540, 1200))  # half size: faster, and labels stay legible
    result, _ = rapidocr.RapidOCR()(np.asarray(img))
    read = {str(r[1]).strip() for r in result or []}
    found = labels & read
    assert len(found) >= 0.75 * len(labels), (sorted(labels - read), sorted(read))
