"""OCR on OpenVINO (`perception.ocr.runtime`): the same reads as onnxruntime on real and
simulated screens, chosen by "auto" only where it should be, its CPU charged to the
calling thread, its compiled models cached, and a clear error when it is missing."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from models import openvino_session
from models.ocr import CACHE_ENV, Ocr, OcrSettings, choose_runtime
from models.openvino_session import OpenVinoError
from runtime.cpu_ledger import CpuLedger, charging
from tests.fixtures.data import RicoDev
from tests.models.conftest import read_bgr

CPU, CUDA = "CPUExecutionProvider", "CUDAExecutionProvider"


@pytest.fixture(scope="module")
def engines() -> dict[str, Ocr]:
    """Both runtimes on the same recogniser runs (fixed runs of 6 lines: the same input
    shapes and padding), so any difference in what they read is the runtime's; no line
    cache: every line goes through the recogniser under test."""
    return {r: Ocr(OcrSettings(runtime=r, rec_cache=0, threads=1, rec_batch=6))
            for r in ("onnxruntime", "openvino")}


def _lines(ocr: Ocr, bgr: np.ndarray) -> list[tuple[str, tuple[int, ...]]]:
    return [(ln.text, tuple(round(v) for v in ln.box)) for ln in ocr.run_bgr(bgr).lines]


def test_openvino_reads_real_screens_as_onnxruntime_does(
        engines: dict[str, Ocr], rico_dev: RicoDev) -> None:
    assert engines["openvino"].runtime == "openvino"
    assert engines["onnxruntime"].runtime == "onnxruntime"
    read = 0
    for screen in rico_dev.screens[:6]:
        bgr = read_bgr(screen.image_path)
        want = _lines(engines["onnxruntime"], bgr)
        got = _lines(engines["openvino"], bgr)
        assert [t for t, _ in got] == [t for t, _ in want], screen.screen_id
        # boxes: the detector's probability map differs by < 1e-3, a pixel at most
        for (_, a), (_, b) in zip(got, want, strict=True):
            assert max(abs(x - y) for x, y in zip(a, b, strict=True)) <= 2
        read += len(want)
    assert read > 30  # the screens had text to compare


def test_openvino_reads_the_simulated_phone_as_onnxruntime_does(
        engines: dict[str, Ocr]) -> None:
    phone_mod = pytest.importorskip("sim.phone.phone")
    api = pytest.importorskip("sim.phone_api")
    phone = phone_mod.SimPhone(api.DeviceInfo(serial="ov-test"), seed=0)
    phone.open("com.android.settings")
    phone.settle()
    bgr = np.ascontiguousarray(np.asarray(phone.screenshot().convert("RGB"))[:, :, ::-1])
    want = [t for t, _ in _lines(engines["onnxruntime"], bgr)]
    assert want and [t for t, _ in _lines(engines["openvino"], bgr)] == want


def test_on_openvino_each_line_is_its_own_run_in_few_shapes(rico_dev: RicoDev) -> None:
    """OpenVINO prepares its kernels per input shape: a line a run, widths in steps of 32,
    keeps the shapes few; what it reads stays that of onnxruntime's planned batches but for
    the padding's effect on a rare space (which matching ignores) or letter."""
    ov = Ocr(OcrSettings(runtime="openvino", rec_cache=0))
    ort_default = Ocr(OcrSettings(runtime="onnxruntime", rec_cache=0))
    assert ov.single_line_runs and not ort_default.single_line_runs
    shapes: list[tuple[int, ...]] = []
    session = ov._rec.session.session
    run = session.run

    def spy(names: object, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        shapes.extend(x.shape for x in feed.values())
        return run(names, feed)

    session.run = spy
    same = total = 0
    for screen in rico_dev.screens[:6]:
        bgr = read_bgr(screen.image_path)
        want = ["".join(t.split()) for t, _ in _lines(ort_default, bgr)]
        got = {"".join(t.split()) for t, _ in _lines(ov, bgr)}
        same += sum(t in got for t in want)
        total += len(want)
    assert shapes and all(sh[0] == 1 and sh[3] % 32 == 0 for sh in shapes)
    assert len(set(shapes)) < len(shapes) / 2  # shapes recur
    assert same >= 0.95 * total


def test_auto_takes_openvino_on_the_cpu_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    assert choose_runtime("auto", [CPU]) == "openvino"
    assert choose_runtime("auto", [CUDA, CPU]) == "onnxruntime"  # a GPU stays onnxruntime's
    assert choose_runtime("onnxruntime", [CPU]) == "onnxruntime"
    assert choose_runtime("openvino", [CUDA, CPU]) == "openvino"  # asked for by name
    monkeypatch.setattr("models.ocr.openvino_available", lambda: False)
    assert choose_runtime("auto", [CPU]) == "onnxruntime"


def test_openvino_asked_for_but_missing_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino now fails
    assert not openvino_session.available()
    assert Ocr(OcrSettings(runtime="auto")).runtime == "onnxruntime"
    with pytest.raises(OpenVinoError, match="pip install openvino"):
        Ocr(OcrSettings(runtime="openvino"))


def test_a_read_on_openvino_is_charged_to_the_calling_thread(
        engines: dict[str, Ocr], rico_dev: RicoDev) -> None:
    """With one thread OpenVINO runs on the caller, so the ledger (thread CPU) sees all of
    a read's work; were it done in a pool thread, the ledger would see almost none."""
    bgr = read_bgr(rico_dev.screens[1].image_path)
    ledger = CpuLedger()
    p0 = time.process_time()
    with charging(ledger, "phone"):
        engines["openvino"].run_bgr(bgr)
    process = time.process_time() - p0
    stages = ledger.stages("phone")
    assert stages["detect"] > 0 and stages["recognize"] > 0
    assert ledger.total("phone") >= 0.8 * process


def test_two_threads_read_at_once_as_one_does(engines: dict[str, Ocr],
                                              rico_dev: RicoDev) -> None:
    ocr = engines["openvino"]
    frames = [read_bgr(s.image_path) for s in rico_dev.screens[2:4]]
    want = [_lines(ocr, f) for f in frames]
    got: dict[int, list[tuple[str, tuple[int, ...]]]] = {}
    threads = [threading.Thread(target=lambda i=i: got.__setitem__(i, _lines(ocr, frames[i])))
               for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [got[0], got[1]] == want


def test_the_compiled_models_are_cached_when_saving_is_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "ocr"))
    Ocr(OcrSettings(runtime="openvino", save_optimized=False))
    assert not (tmp_path / "ocr" / "openvino").exists()
    Ocr(OcrSettings(runtime="openvino"))
    blobs = list((tmp_path / "ocr" / "openvino").glob("*.blob"))
    assert len(blobs) >= 3  # det, cls, rec


def test_the_detector_runs_in_bf16_when_asked_where_the_cpu_has_it_the_recogniser_in_f32() -> None:
    import openvino as ov

    ocr = Ocr(OcrSettings(runtime="openvino", threads=1, det_precision="bf16"))
    native = "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")

    def hint(session: object) -> str:  # OpenVINO prints "<Type: 'bfloat16'>", "<Type: 'float32'>"
        assert isinstance(session, openvino_session.OpenVinoSession)
        return str(session._compiled.get_property("INFERENCE_PRECISION_HINT"))

    assert ("bfloat16" in hint(ocr._det.infer.session)) is native
    assert "float32" in hint(ocr._rec.session.session)  # in bf16 it misreads nearly every line
    f32 = Ocr(OcrSettings(runtime="openvino", threads=1))
    assert "float32" in hint(f32._det.infer.session)  # the default
