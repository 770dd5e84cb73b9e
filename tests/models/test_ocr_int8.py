"""int8 OCR models and the saved onnxruntime graphs: made once into the OCR cache, reused,
read a real screen as the fp32 models do, and an absent static file falls back by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from structlog.testing import capture_logs

from models.export.ocr_int8 import build, screenshots
from models.ocr import (
    CACHE_ENV,
    Ocr,
    OcrSettings,
    model_source,
    ocr_cache_dir,
    optimized_path,
    quantized_path,
)
from models.quantize import WEIGHT_MAX, WEIGHT_MIN
from tests.fixtures.data import RicoDev
from tests.models.conftest import read_bgr


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "ocr"))
    return tmp_path / "ocr"


def _texts(ocr: Ocr, bgr: np.ndarray) -> list[str]:
    return [ln.text for ln in ocr.run_bgr(bgr).lines]


def _weight_range(path: Path) -> tuple[int, int]:
    """The smallest and largest int8 weight of a quantized model file."""
    import onnx
    from onnx import numpy_helper

    values = [numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer
              if t.data_type == onnx.TensorProto.INT8]
    assert values, f"{path.name} has no int8 weights"
    return min(int(v.min()) for v in values), max(int(v.max()) for v in values)


def _reads_alike_on_every_cpu(path: Path) -> None:
    """7-bit weights: onnxruntime's u8 x s8 kernels on AVX2 and AVX-512 without VNNI add
    pairs of products in int16, and these never saturate there (models/quantize.py), so
    the model reads the same on those CPUs as on this one, whatever this one is."""
    low, high = _weight_range(path)
    assert WEIGHT_MIN <= low and high <= WEIGHT_MAX, (low, high)
    assert 255 * max(-low, high) * 2 <= 32767


def _shared(a: list[str], b: list[str]) -> float:
    """The share of a's lines that b read to the same text."""
    return sum(t in set(b) for t in a) / max(1, len(a))


def test_the_cache_lives_under_the_user_cache_and_is_keyed_by_the_source(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert ocr_cache_dir() == cache
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", "/x")
    assert ocr_cache_dir() == Path("/x/mobagent/ocr")
    a = quantized_path("ppocrv4", "rec", "static", b"one model")
    assert a != quantized_path("ppocrv4", "rec", "static", b"another model")
    assert a != quantized_path("ppocrv4", "rec", "dynamic", b"one model")
    assert "ppocrv4-rec-" in a.name and "int8-static" in a.name
    assert optimized_path(b"one model") != optimized_path(b"another model")


def test_an_absent_static_model_falls_back_to_fp32_and_names_the_command(cache: Path) -> None:
    with capture_logs() as logs:
        ocr = Ocr(OcrSettings(det_quant="static", rec_quant="static"))
    assert ocr.model_kinds == {"det": "fp32", "rec": "fp32", "cls": "fp32"}
    missing = [e for e in logs if e["event"] == "ocr_int8_missing"]
    assert {e["part"] for e in missing} == {"det", "rec"}
    assert all("python -m models.export.ocr_int8" in e["fix"] and e["using"] == "fp32"
               for e in missing)
    assert not list(cache.glob("*int8-static*"))


def test_the_optimized_graph_is_saved_once_and_loaded_again(
        cache: Path, rico_dev: RicoDev, monkeypatch: pytest.MonkeyPatch) -> None:
    bgr = read_bgr(rico_dev.screens[0].image_path)
    onnx = OcrSettings(runtime="onnxruntime")  # the saved graphs are onnxruntime's
    first = Ocr(onnx)
    saved = sorted(cache.glob("opt-*.onnx"))
    assert len(saved) == 3  # det, cls, rec
    stamps = [p.stat().st_mtime_ns for p in saved]
    loaded: list[object] = []
    real = ort.InferenceSession

    def spy(source: object, *args: object, **kw: object) -> ort.InferenceSession:
        loaded.append(source)
        return real(source, *args, **kw)

    monkeypatch.setattr(ort, "InferenceSession", spy)
    second = Ocr(onnx)
    assert sorted(map(str, loaded)) == sorted(map(str, saved))  # all three from the cache
    assert [p.stat().st_mtime_ns for p in saved] == stamps  # not written again
    assert _texts(second, bgr) == _texts(first, bgr)
    # A damaged file is optimised again, not fatal.
    saved[0].write_bytes(b"not a model")
    monkeypatch.setattr(ort, "InferenceSession", real)
    with capture_logs() as logs:
        third = Ocr(onnx)
    assert any(e["event"] == "ocr_optimized_unusable" for e in logs)
    assert _texts(third, bgr) == _texts(first, bgr)


def test_no_saved_graph_when_turned_off(cache: Path) -> None:
    Ocr(OcrSettings(save_optimized=False, runtime="onnxruntime"))
    Ocr(OcrSettings(save_optimized=False, runtime="openvino"))
    assert not list(cache.glob("opt-*.onnx"))
    assert not list(cache.glob("openvino/*"))


def test_dynamic_int8_is_made_on_first_use_and_reads_like_fp32(
        cache: Path, rico_dev: RicoDev) -> None:
    bgr = read_bgr(rico_dev.screens[0].image_path)
    fp32 = Ocr(OcrSettings(rec_cache=0))
    int8 = Ocr(OcrSettings(det_quant="dynamic", rec_cache=0))
    assert int8.model_kinds["det"] == "int8-dynamic"
    path = quantized_path("ppocrv4", "det", "dynamic")
    assert path.is_file() and path.stat().st_size < 0.5 * len(model_source("ppocrv4", "det"))
    _reads_alike_on_every_cpu(path)
    a = _texts(fp32, bgr)
    assert len(a) >= 10 and _shared(a, _texts(int8, bgr)) >= 0.7


def test_static_int8_built_from_screens_reads_a_real_screen_like_fp32(
        cache: Path, rico_dev: RicoDev) -> None:
    """Calibrated on two dev screens, read on a third: most lines read to the same text."""
    calib = cache.parent / "calib"
    calib.mkdir()
    for s in rico_dev.screens[1:3]:
        (calib / s.image_path.name).write_bytes(s.image_path.read_bytes())
    assert len(screenshots(calib, 0)) == 2
    paths = build("ppocrv4", ["det", "rec"], "static", [calib], n_screens=2)
    assert set(paths) == {"det", "rec"} and all(p.is_file() for p in paths.values())
    for path in paths.values():
        _reads_alike_on_every_cpu(path)
    assert paths["rec"].with_suffix(".json").is_file()
    int8 = Ocr(OcrSettings(det_quant="static", rec_quant="static", rec_cache=0))
    assert int8.model_kinds == {"det": "int8-static", "rec": "int8-static", "cls": "fp32"}
    bgr = read_bgr(rico_dev.screens[0].image_path)
    a = _texts(Ocr(OcrSettings(rec_cache=0)), bgr)
    b = _texts(int8, bgr)
    assert len(a) >= 10 and _shared(a, b) >= 0.6, (a, b)


def test_an_unwritable_cache_still_loads(rico_dev: RicoDev,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The optimised graph cannot be written (/proc refuses new files): loaded as before."""
    monkeypatch.setenv(CACHE_ENV, "/proc/self")
    ocr = Ocr(OcrSettings())
    assert _texts(ocr, read_bgr(rico_dev.screens[0].image_path))
    assert not list(Path("/proc/self").glob("*opt-*"))
