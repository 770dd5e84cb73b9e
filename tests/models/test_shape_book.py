"""Input shapes kept on disk (`models/shape_book.py`): each new shape a model runs is written
once, a second process reads them back and prepares them when perception starts, and a
damaged or unwritable book costs nothing but the preparation."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import numpy as np
import pytest

from actors.perception import PREPARE_ENV, PerceptionEngine
from models.grounding import Perception, PerceptionSettings
from models.ocr import CACHE_ENV, Ocr, OcrSettings, shape_book_path
from models.openvino_session import OpenVinoSession
from models.shape_book import ShapeBook, shape_of


def _feed(*dims: int) -> dict[str, np.ndarray]:
    return {"x": np.zeros(dims, np.float32)}


def test_a_new_shape_is_written_once_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "book" / "shapes.jsonl"
    book = ShapeBook(path)
    for dims in ((1, 3, 48, 96), (1, 3, 48, 128), (1, 3, 48, 96)):
        book.note(_feed(*dims))
    assert len(path.read_text().splitlines()) == 2
    again = ShapeBook(path, seeds=[shape_of(_feed(1, 3, 48, 128)), shape_of(_feed(1, 3, 40, 96))])
    # recorded first, in the order first run; a seed already recorded is not repeated
    assert again.to_prepare() == [shape_of(_feed(1, 3, 48, 96)), shape_of(_feed(1, 3, 48, 128)),
                                  shape_of(_feed(1, 3, 40, 96))]


def test_a_damaged_line_is_skipped_and_a_read_only_book_still_counts(tmp_path: Path) -> None:
    path = tmp_path / "shapes.jsonl"
    path.write_text('[["x", [1, 3, 48, 96]]]\n[["x", [1, 3,\nnot json\n')
    assert ShapeBook(path).to_prepare() == [shape_of(_feed(1, 3, 48, 96))]
    book = ShapeBook(Path("/proc/self/no-such-dir/shapes.jsonl"))  # unwritable, even as root
    book.note(_feed(1, 3, 48, 160))  # kept in memory, no error
    book.note(_feed(1, 3, 48, 192))
    assert len(book) == 2


@pytest.fixture()
def ocr_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "ocr"))
    return tmp_path / "ocr"


def test_a_second_process_prepares_the_shapes_the_first_ran(ocr_cache: Path) -> None:
    first = Ocr(OcrSettings(runtime="openvino", threads=1))
    rec = first._rec.session.session
    assert isinstance(rec, OpenVinoSession)
    seeds = len(rec.shapes.to_prepare())  # a fresh install's: the recogniser's widths
    assert seeds > 20 and len(rec.shapes) == 0
    rec.run(None, _feed(1, 3, 48, 1600))  # wider than any seed
    rec.run(None, _feed(2, 3, 48, 96))  # two lines in a run
    det = first._det.infer.session
    det.run(None, _feed(1, 3, 320, 448))
    book = shape_book_path(first_rec_model(first))
    assert book.parent == ocr_cache / "openvino" and len(book.read_text().splitlines()) == 2

    second = Ocr(OcrSettings(runtime="openvino", threads=1))
    prepared = second.prepare()
    # the wide line it ran, then the seeds (its run of two lines is recorded, but this
    # engine reads a line a run)
    assert prepared["rec"] == (seeds + 1, 0)
    # the one it ran, then the common screens' whole frames
    assert prepared["det"] == (1 + len(second._det_seeds()), 0) and len(second._det_seeds()) >= 3
    stop = threading.Event()
    stop.set()
    assert second.prepare(stop) == {"det": (0, 0), "rec": (0, 0)}  # told to stop: nothing


def first_rec_model(ocr: Ocr) -> bytes:
    from models.ocr import resolve_model

    src, _kind = resolve_model(ocr.settings.models, "rec", ocr.settings.rec_quant)
    return src.read_bytes() if isinstance(src, Path) else src


def test_with_prepare_off_the_models_wait_for_the_first_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PREPARE_ENV, "0")
    perception = Perception(PerceptionSettings(ocr=OcrSettings(runtime="openvino", threads=1)))
    engine = PerceptionEngine(perception)
    engine.start_preparing()
    assert engine.prepared.is_set() and engine.prepare_report is None
    assert perception._ocr is None


def test_a_book_shared_with_batching_engines_prepares_single_lines_only(ocr_cache: Path) -> None:
    batching = Ocr(OcrSettings(runtime="openvino", threads=1, rec_batch=6))
    batching._rec.session.session.run(None, _feed(6, 3, 48, 320))
    single = Ocr(OcrSettings(runtime="openvino", threads=1))
    rec = single._rec.session.session
    assert isinstance(rec, OpenVinoSession)
    assert single.prepare()["rec"] == (len(rec.shapes.to_prepare()) - 1, 0)


def test_nothing_is_recorded_when_preparing_is_off(ocr_cache: Path) -> None:
    ocr = Ocr(OcrSettings(runtime="openvino", threads=1, prepare_shapes=False))
    ocr._rec.session.session.run(None, _feed(1, 3, 48, 96))
    assert not list(ocr_cache.glob("openvino/shapes-*"))


def test_the_perception_service_prepares_when_it_starts(
        ocr_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PREPARE_ENV, "1")  # the suite's conftest turns it off elsewhere
    perception = Perception(PerceptionSettings(ocr=OcrSettings(runtime="openvino", threads=1)))
    engine = PerceptionEngine(perception)
    assert perception._ocr is None  # nothing loaded until it starts

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(engine.prepared_while_running)
            assert await engine.wait_prepared(120)
            tg.cancel_scope.cancel()

    anyio.run(main)
    report = engine.prepare_report
    assert report is not None and report.shapes > 20 and report.failed == 0
    assert perception._ocr is not None  # the models were loaded off the first step's path
