"""Icon proposals: NMS, Mobile-Agent's filters, the YOLO-layout ONNX detector, the OpenCV proposer."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from models.detector import (
    DetectorError,
    DetectorSettings,
    OnnxYoloDetector,
    OpenCvProposer,
    PositionError,
    Proposal,
    decode_yolo,
    dedupe,
    drawn_rows,
    drop_large,
    filter_by_position,
    iou_matrix,
    letterbox,
    nms,
    position_region,
)
from tests.fixtures.data import RicoDev
from tests.models.conftest import Screen, inside, read_bgr

# -- NMS -----------------------------------------------------------------------------------


def test_iou_of_known_boxes() -> None:
    m = iou_matrix(np.array([[0, 0, 10, 10]]), np.array([[0, 0, 10, 10], [5, 0, 15, 10],
                                                         [20, 20, 30, 30], [0, 0, 0, 0]]))
    assert m[0].tolist() == pytest.approx([1.0, 50 / 150, 0.0, 0.0])


def test_nms_keeps_the_best_of_each_cluster() -> None:
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60], [51, 50, 61, 60]])
    scores = np.array([0.6, 0.9, 0.3, 0.8])
    assert nms(boxes, scores, 0.5) == [1, 3]
    assert nms(boxes, scores, 0.99) == [1, 3, 0, 2]
    assert nms(np.zeros((0, 4)), np.zeros(0), 0.5) == []
    with pytest.raises(ValueError):
        nms(boxes, scores[:2], 0.5)


def test_nms_invariants_on_random_boxes() -> None:
    rng = np.random.default_rng(7)
    xy = rng.uniform(0, 200, (200, 2))
    wh = rng.uniform(5, 60, (200, 2))
    boxes = np.concatenate([xy, xy + wh], axis=1)
    scores = rng.uniform(0, 1, 200)
    keep = nms(boxes, scores, 0.4)
    kept = boxes[keep]
    iou = iou_matrix(kept, kept)
    np.fill_diagonal(iou, 0)
    assert iou.max() <= 0.4 + 1e-9
    # every dropped box overlaps a kept box with a higher score
    dropped = sorted(set(range(200)) - set(keep))
    for d in dropped:
        over = iou_matrix(boxes[d : d + 1], kept)[0]
        assert any(o > 0.4 and scores[k] >= scores[d] for o, k in zip(over, keep, strict=True))


# -- Mobile-Agent's filters --------------------------------------------------------------------


def grid(w: int = 800, h: int = 800) -> list[Proposal]:
    """A 4x4 grid of small boxes; label = row * 4 + column."""
    out = []
    for r in range(4):
        for c in range(4):
            cx, cy = (c + 0.5) * w / 4, (r + 0.5) * h / 4
            out.append(Proposal(box=(cx - 10, cy - 10, cx + 10, cy + 10), score=1.0, label=r * 4 + c))
    return out


def cells(rows: set[int], cols: set[int]) -> set[int]:
    return {r * 4 + c for r in rows for c in cols}


ALL, LO, HI, MID = {0, 1, 2, 3}, {0, 1}, {2, 3}, {1, 2}


@pytest.mark.parametrize("position,expected", [
    ("top", cells(LO, ALL)), ("bottom", cells(HI, ALL)), ("left", cells(ALL, LO)),
    ("right", cells(ALL, HI)), ("center", cells(MID, MID)), ("top left", cells(LO, LO)),
    ("left top", cells(LO, LO)), ("top-right", cells(LO, HI)), ("bottom left", cells(HI, LO)),
    ("bottom_right", cells(HI, HI)), ("top center", cells(LO, MID)),
    ("center left", cells(MID, LO)), ("middle right", cells(MID, HI)),
    ("Bottom Center", cells(HI, MID)), ("upper", cells(LO, ALL)), ("lower left", cells(HI, LO)),
])
def test_position_filter_halves_quadrants_and_pairs(position: str, expected: set[int]) -> None:
    kept = filter_by_position(grid(), position, 800, 800)
    assert {p.label for p in kept} == expected


def test_position_filter_edge_cases() -> None:
    assert filter_by_position([], "top left", 800, 800) == []
    assert filter_by_position([], None, 800, 800) == []
    assert len(filter_by_position(grid(), None, 800, 800)) == 16
    assert len(filter_by_position(grid(), "  ", 800, 800)) == 16
    assert filter_by_position(grid(), "top", 0, 0) == []
    for bad in ("top bottom", "left right", "somewhere", "top left center", "top top"):
        with pytest.raises(PositionError):
            filter_by_position(grid(), bad, 800, 800)
    # a centre exactly on the middle line belongs to both halves
    mid = [Proposal(box=(440, 440, 460, 460))]
    assert filter_by_position(mid, "top", 900, 900) == filter_by_position(mid, "bottom", 900, 900) == mid
    assert position_region("center") == ((0.25, 0.75), (0.25, 0.75))


def test_drop_large_and_dedupe() -> None:
    props = [Proposal(box=(0, 0, 500, 500), score=0.9), Proposal(box=(0, 0, 40, 40), score=0.5),
             Proposal(box=(2, 2, 42, 42), score=0.7), Proposal(box=(100, 100, 140, 140), score=0.2)]
    small = drop_large(props, 1080, 1920, 0.05)
    assert [p.score for p in small] == [0.5, 0.7, 0.2]
    assert [p.score for p in dedupe(small, 0.5)] == [0.7, 0.2]
    assert dedupe([], 0.5) == [] and drop_large([], 10, 10) == []


# -- the YOLO-layout ONNX detector -------------------------------------------------------------


def yolo_model(path: Path, rows: np.ndarray, size: int = 640) -> None:
    """An ONNX graph with the Ultralytics output layout [1, 4+C, N]: the given rows, plus the
    image's mean times zero (so the output depends on the input like a real network's)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    const = numpy_helper.from_array(rows.astype(np.float32)[None], name="rows")
    nodes = [
        helper.make_node("ReduceMean", ["images"], ["m"], keepdims=0),
        helper.make_node("Mul", ["m", "zero"], ["z"]),
        helper.make_node("Add", ["rows", "z"], ["output0"]),
    ]
    graph = helper.make_graph(
        nodes, "yolo_stub",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, list(rows.shape[:0]) + [1, *rows.shape])],
        initializer=[const, numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def to_input(box: tuple[float, float, float, float], scale: float, pad: tuple[float, float]
             ) -> list[float]:
    x1, y1, x2, y2 = (v * scale for v in box)
    return [(x1 + x2) / 2 + pad[0], (y1 + y2) / 2 + pad[1], x2 - x1, y2 - y1]


def test_onnx_yolo_detector_decodes_boxes(tmp_path: Path) -> None:
    w, h = 1080, 1920
    frame = np.full((h, w, 3), 200, dtype=np.uint8)
    _, scale, pad = letterbox(frame, 640)
    assert scale == pytest.approx(640 / 1920) and pad == (pytest.approx(140.0), 0.0)
    icon_a, icon_b, icon_c = (100, 200, 220, 320), (600, 1500, 700, 1600), (900, 50, 1000, 150)
    anchors = [
        to_input(icon_a, scale, pad) + [0.90, 0.10],
        to_input((104, 204, 224, 324), scale, pad) + [0.60, 0.05],  # duplicate of a: NMS drops it
        to_input(icon_b, scale, pad) + [0.10, 0.70],  # class 1
        to_input((602, 1502, 702, 1602), scale, pad) + [0.65, 0.0],  # class 0 on b: kept
        to_input(icon_c, scale, pad) + [0.02, 0.01],  # below the score threshold
    ] + [[320.0, 320.0, 10.0, 10.0, 0.0, 0.0]] * 11  # empty anchors, as a real head has

    rows = np.array(anchors, dtype=np.float32).T  # [4+C, N]
    path = tmp_path / "yolo.onnx"
    yolo_model(path, rows)
    det = OnnxYoloDetector(DetectorSettings(kind="onnx", onnx_path=str(path), score_thresh=0.05))
    props = det.detect(frame)
    assert len(props) == 3
    by_label = {(p.label, round(p.score, 2)): p for p in props}
    a = by_label[(0, 0.9)]
    assert a.box == pytest.approx(icon_a, abs=0.5)
    b = by_label[(1, 0.7)]
    assert b.box == pytest.approx(icon_b, abs=0.5)
    assert (0, 0.65) in by_label
    # the transposed layout [1, N, 4+C] decodes the same
    again = decode_yolo(rows.T[None], scale, pad, w, h, 0.05, 0.5)
    assert sorted(p.box for p in again) == sorted(p.box for p in props)


def test_onnx_detector_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(DetectorError, match="not found"):
        OnnxYoloDetector(DetectorSettings(kind="onnx", onnx_path=str(tmp_path / "none.onnx")))
    (tmp_path / "junk.onnx").write_bytes(b"junk")
    with pytest.raises(DetectorError, match="cannot load"):
        OnnxYoloDetector(DetectorSettings(kind="onnx", onnx_path=str(tmp_path / "junk.onnx")))
    with pytest.raises(DetectorError):
        decode_yolo(np.zeros((1, 3, 10)), 1.0, (0, 0), 10, 10, 0.1, 0.5)
    assert decode_yolo(np.zeros((1, 6, 10)), 1.0, (0, 0), 10, 10, 0.1, 0.5) == []


# -- the OpenCV proposer -----------------------------------------------------------------------


def test_opencv_proposer_covers_drawn_icons() -> None:
    s = Screen()
    s.text((60, 200), "Settings", size=52)
    drawn = [s.icon((40, 60), "\ue5c4"), s.icon((960, 60), "\ue5d4"), s.icon((500, 900), "\ue8b6"),
             s.icon((900, 1700), "\ue87d")]  # arrow_back, more_vert, search, favorite
    props = OpenCvProposer().detect(cv2.cvtColor(s.array(), cv2.COLOR_RGB2BGR))
    for box in drawn:
        assert any(inside(p.center, box, slack=4) for p in props), box
    assert OpenCvProposer().detect(np.zeros((2, 2, 3), dtype=np.uint8)) == []
    assert OpenCvProposer().detect(np.zeros((100, 100, 3), dtype=np.uint8)) == []


def test_opencv_proposer_recall_on_rico(rico_dev: RicoDev) -> None:
    covered = total = n_boxes = 0
    proposer = OpenCvProposer()
    for screen in rico_dev.screens:
        bgr = read_bgr(screen.image_path)
        props = dedupe(drop_large(proposer.detect(bgr), screen.width, screen.height, 0.05), 0.5)
        n_boxes += len(props)
        for t in screen.icon_targets:
            total += 1
            covered += any(inside(p.center, tuple(t["bbox"])) for p in props)
    recall, per_screen = covered / total, n_boxes / len(rico_dev.screens)
    print(f"\nicon proposal recall on rico-dev: {covered}/{total} = {recall:.3f}, "
          f"{per_screen:.0f} boxes per screen")
    assert recall >= 0.8 and per_screen <= 120


def test_drawn_rows_leave_out_a_black_band_below_the_app() -> None:
    """A DroidBot-style 1080x2340 capture of an app drawn 1920 high, the rest black: an icon
    1,100 px down sits in the app's bottom half, though in the frame's top half."""
    s = Screen(1080, 2340)
    s.draw.rectangle((0, 1920, 1080, 2340), fill=(0, 0, 0))
    s.draw.rectangle((0, 0, 1080, 200), fill=(18, 18, 18))  # a dark app bar is not a band
    bgr = cv2.cvtColor(s.array(), cv2.COLOR_RGB2BGR)
    assert drawn_rows(bgr) == (0, 1920)
    icon = Proposal(box=(880, 1060, 960, 1140))
    top = Proposal(box=(880, 300, 960, 380))
    # over the whole frame's height the icon counts as top: "bottom right" lost it
    assert filter_by_position([icon, top], "bottom right", 1080, 2340) == []
    assert filter_by_position([icon, top], "bottom right", 1080, 2340, drawn_rows(bgr)) == [icon]
    assert filter_by_position([icon, top], "top right", 1080, 2340, drawn_rows(bgr)) == [top]
    # a frame the app fills, or a thin dark strip, keeps every row
    full = np.full((1920, 1080, 3), 250, dtype=np.uint8)
    full[1880:] = 0  # 40 px: a navigation bar's worth, not a band
    assert drawn_rows(full) == (0, 1920)
    assert drawn_rows(np.zeros((960, 540, 3), dtype=np.uint8)) == (0, 960)
