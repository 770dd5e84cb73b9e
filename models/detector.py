"""Icon proposals behind one interface, plus Mobile-Agent's box filters.

- `OpenCvProposer`: the default; needs no weights (Canny edges -> dilate -> contours -> boxes).
- `OnnxYoloDetector`: any ONNX model with the Ultralytics export layout `[1, 4+C, N]`
  (cx, cy, w, h in letterboxed input pixels, then C class scores; no NMS inside), e.g. an
  OmniParser-type icon model the user brings.
- filters: `drop_large`, `dedupe` (IoU, by score), `filter_by_position` (halves, quadrants, centre).

All images are BGR uint8 numpy arrays; boxes are (x1, y1, x2, y2) in frame pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal, Protocol

import cv2
import msgspec
import numpy as np
import onnxruntime as ort

from models.providers import check_session
from models.providers import resolve as resolve_providers
from runtime.errors import MobagentError

Box = tuple[float, float, float, float]


class Proposal(msgspec.Struct, frozen=True):
    box: Box
    score: float = 1.0
    label: int = 0

    @property
    def center(self) -> tuple[float, float]:
        return ((self.box[0] + self.box[2]) / 2, (self.box[1] + self.box[3]) / 2)

    @property
    def area(self) -> float:
        return max(0.0, self.box[2] - self.box[0]) * max(0.0, self.box[3] - self.box[1])


class DetectorSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    kind: Literal["opencv", "onnx"] = "opencv"
    # ONNX (YOLO layout) detector
    onnx_path: str = ""
    input_size: int = 640
    score_thresh: float = 0.05
    nms_iou: float = 0.5
    max_detections: int = 300
    providers: tuple[str, ...] = ()  # for the ONNX detector alone; empty: perception.providers
    # classical proposer; sizes are in pixels at 1080 px screen width and scale with the frame
    canny_low: int = 20
    canny_high: int = 60
    dilate_px: int = 7
    min_side_px: int = 16
    max_side_px: int = 280
    max_aspect: float = 4.0
    max_proposals: int = 150


class Detector(Protocol):
    def detect(self, bgr: np.ndarray) -> list[Proposal]: ...


class DetectorError(MobagentError, RuntimeError):
    pass


# -- geometry ------------------------------------------------------------------------------


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of two (N, 4) and (M, 4) x1y1x2y2 arrays."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area_a = np.clip(a[:, 2] - a[:, 0], 0, None) * np.clip(a[:, 3] - a[:, 1], 0, None)
    area_b = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def nms(boxes: np.ndarray, scores: np.ndarray, iou_thresh: float) -> list[int]:
    """Indices kept by greedy non-maximum suppression, best score first."""
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if len(boxes) != len(scores):
        raise ValueError(f"{len(boxes)} boxes but {len(scores)} scores")
    order = list(np.argsort(-scores, kind="stable"))
    keep: list[int] = []
    while order:
        i = order.pop(0)
        keep.append(int(i))
        if not order:
            break
        ious = iou_matrix(boxes[i : i + 1], boxes[order])[0]
        order = [j for j, v in zip(order, ious, strict=True) if v <= iou_thresh]
    return keep


# -- Mobile-Agent's filters ------------------------------------------------------------------


def drop_large(props: Sequence[Proposal], width: int, height: int,
               max_area_frac: float = 0.05) -> list[Proposal]:
    """Drop boxes that cover more than `max_area_frac` of the screen."""
    limit = max_area_frac * width * height
    return [p for p in props if p.area <= limit]


def dedupe(props: Sequence[Proposal], iou_thresh: float = 0.5) -> list[Proposal]:
    """IoU dedupe, the higher score wins (the order of the result is by score)."""
    if not props:
        return []
    keep = nms(np.array([p.box for p in props]), np.array([p.score for p in props]), iou_thresh)
    return [props[i] for i in keep]


class PositionError(MobagentError, ValueError):
    pass


_VERTICAL = {"top": (0.0, 0.5), "upper": (0.0, 0.5), "bottom": (0.5, 1.0), "lower": (0.5, 1.0)}
_HORIZONTAL = {"left": (0.0, 0.5), "right": (0.5, 1.0)}
_CENTER = (0.25, 0.75)
_CENTER_WORDS = {"center", "centre", "middle"}


def position_region(position: str) -> tuple[tuple[float, float], tuple[float, float]]:
    """((x0, x1), (y0, y1)) as shares of the screen for "top", "bottom left", "center", ...

    One word gives a half (or the central square for "center"); two words give a quadrant
    ("top left") or a half crossed with the central band ("top center" / "center left").
    """
    words = position.lower().replace("-", " ").replace("_", " ").replace(",", " ").split()
    if not words or len(words) > 2:
        raise PositionError(f"unknown position {position!r}: use top, bottom, left, right, "
                            "center, or a pair such as 'top left'")
    xs: tuple[float, float] | None = None
    ys: tuple[float, float] | None = None
    centers = 0
    for w in words:
        if w in _VERTICAL and ys is None:
            ys = _VERTICAL[w]
        elif w in _HORIZONTAL and xs is None:
            xs = _HORIZONTAL[w]
        elif w in _CENTER_WORDS:
            centers += 1
        else:
            raise PositionError(f"unknown position {position!r}: {w!r} is not one of top, "
                                "bottom, left, right, center (or repeats an axis)")
    if centers:
        if xs is None and ys is None:
            xs = ys = _CENTER
        elif xs is None:
            xs = _CENTER
        else:
            ys = _CENTER
    return (xs or (0.0, 1.0)), (ys or (0.0, 1.0))


def drawn_rows(bgr: np.ndarray, min_frac: float = 0.05, black: int = 8) -> tuple[int, int]:
    """The rows ``[y0, y1)`` the app draws in: the frame without a pure-black band at its top
    or bottom edge at least ``min_frac`` of its height. A capture can be taller than the app's
    window (DroidBot's 1080x2340 frames of an app drawn 1920 high leave the rest black), and a
    person names positions by what they see drawn: an icon 1,100 px down is in the bottom half
    of a 1920-high app, not in the top half of the 2340-high frame."""
    h = bgr.shape[0]
    if h == 0:
        return 0, 0
    # The brightest pixel of each row, on every 4th row and column (cheap: a 1080x2340 frame
    # costs well under a millisecond); a dark-themed app is dark grey, not 0.
    small = bgr[::4, ::4]
    bright = small.max(axis=(1, 2)) if small.ndim == 3 else small.max(axis=1)
    lit = np.flatnonzero(bright > black)
    if lit.size == 0:
        return 0, h
    top, bottom = int(lit[0]) * 4, min(h, (int(lit[-1]) + 1) * 4)
    y0 = top if top >= min_frac * h else 0
    y1 = bottom if h - bottom >= min_frac * h else h
    return y0, y1


def filter_by_position(props: Sequence[Proposal], position: str | None, width: int,
                       height: int, rows: tuple[int, int] | None = None) -> list[Proposal]:
    """Keep the proposals whose centre lies in the named part of the screen; with ``rows``
    (``drawn_rows``), of the part of the screen the app draws in."""
    if not position or not position.strip():
        return list(props)
    (x0, x1), (y0, y1) = position_region(position)
    if width <= 0 or height <= 0:
        return []
    top, bottom = rows if rows is not None and rows[1] > rows[0] else (0, height)
    out = []
    for p in props:
        cx, cy = p.center
        fx, fy = cx / width, (cy - top) / (bottom - top)
        if x0 <= fx <= x1 and y0 <= fy <= y1:
            out.append(p)
    return out


# -- the classical proposer ------------------------------------------------------------------


class OpenCvProposer:
    """Icon-sized boxes from edges; no weights. Scores favour square, icon-sized boxes."""

    def __init__(self, settings: DetectorSettings | None = None) -> None:
        self.settings = settings or DetectorSettings()
        # Inner contours too: an icon inside a bordered card or toolbar is not "external".
        self.retrieval = cv2.RETR_LIST

    def detect(self, bgr: np.ndarray) -> list[Proposal]:
        s = self.settings
        if bgr.ndim != 3 or bgr.shape[0] < 4 or bgr.shape[1] < 4:
            return []
        h, w = bgr.shape[:2]
        scale = w / 1080.0
        gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
        edges = cv2.Canny(gray, s.canny_low, s.canny_high)
        k = max(1, int(round(s.dilate_px * scale)))
        edges = cv2.dilate(edges, cv2.getStructuringElement(cv2.MORPH_RECT, (k, k)))
        contours, _ = cv2.findContours(edges, self.retrieval, cv2.CHAIN_APPROX_SIMPLE)
        lo, hi = s.min_side_px * scale, s.max_side_px * scale
        props = []
        for c in contours:
            x, y, bw, bh = cv2.boundingRect(c)
            if bw < lo or bh < lo or bw > hi or bh > hi:
                continue
            aspect = max(bw, bh) / max(1, min(bw, bh))
            if aspect > s.max_aspect:
                continue
            # Icons are roughly square and mid-sized: prefer those when the list is cut.
            size_pref = 1.0 - abs(np.log((bw * bh) ** 0.5 / (72 * scale))) / 3
            score = float(np.clip(0.5 * size_pref + 0.5 / aspect, 0.01, 1.0))
            props.append(Proposal(box=(float(x), float(y), float(x + bw), float(y + bh)),
                                  score=score))
        props.sort(key=lambda p: -p.score)
        return dedupe(props, 0.7)[: s.max_proposals]


# -- the ONNX (Ultralytics layout) detector --------------------------------------------------


def letterbox(bgr: np.ndarray, size: int) -> tuple[np.ndarray, float, tuple[float, float]]:
    """Resize keeping the aspect ratio into size x size, pad with grey (114).

    Returns the NCHW float32 RGB tensor in [0, 1], the scale and the (left, top) padding.
    """
    h, w = bgr.shape[:2]
    scale = min(size / h, size / w)
    nh, nw = max(1, int(round(h * scale))), max(1, int(round(w * scale)))
    resized = cv2.resize(bgr, (nw, nh), interpolation=cv2.INTER_LINEAR)
    top, left = (size - nh) // 2, (size - nw) // 2
    canvas = np.full((size, size, 3), 114, dtype=np.uint8)
    canvas[top : top + nh, left : left + nw] = resized
    tensor = canvas[:, :, ::-1].transpose(2, 0, 1)[None].astype(np.float32) / 255.0
    return np.ascontiguousarray(tensor), scale, (float(left), float(top))


def decode_yolo(output: np.ndarray, scale: float, pad: tuple[float, float], width: int,
                height: int, score_thresh: float, iou_thresh: float,
                max_detections: int = 300) -> list[Proposal]:
    """Boxes from a `[1, 4+C, N]` (or `[1, N, 4+C]`) YOLO output, in frame pixels, after NMS."""
    out = np.asarray(output, dtype=np.float32)
    if out.ndim == 3:
        out = out[0]
    if out.ndim != 2 or min(out.shape) < 5:
        raise DetectorError(f"expected a [1, 4+C, N] YOLO output, got shape {np.shape(output)}")
    # Ultralytics puts the 4+C channels first; anchors outnumber channels in practice
    # (8400 at 640 px), which tells the two layouts apart.
    rows = out.T if out.shape[0] <= out.shape[1] else out
    cls_scores = rows[:, 4:]
    labels = cls_scores.argmax(axis=1)
    scores = cls_scores.max(axis=1)
    mask = scores >= score_thresh
    if not mask.any():
        return []
    rows, labels, scores = rows[mask], labels[mask], scores[mask]
    cx, cy, bw, bh = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
    boxes = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], axis=1)
    boxes[:, [0, 2]] = (boxes[:, [0, 2]] - pad[0]) / scale
    boxes[:, [1, 3]] = (boxes[:, [1, 3]] - pad[1]) / scale
    boxes[:, [0, 2]] = boxes[:, [0, 2]].clip(0, width)
    boxes[:, [1, 3]] = boxes[:, [1, 3]].clip(0, height)
    # Class-aware NMS: offset each class far apart so that one NMS pass keeps them separate.
    offset = labels[:, None].astype(np.float64) * (max(width, height) + 1)
    keep = nms(boxes + offset, scores, iou_thresh)[:max_detections]
    return [Proposal(box=tuple(float(v) for v in boxes[i]), score=float(scores[i]),  # type: ignore[arg-type]
                     label=int(labels[i])) for i in keep]


class OnnxYoloDetector:
    def __init__(self, settings: DetectorSettings, *, providers: Sequence[str] = (),
                 allow_cpu_fallback: bool = False) -> None:
        self.settings = settings
        path = Path(settings.onnx_path)
        if not path.is_file():
            raise DetectorError(f"detector model not found: {path}")
        providers = list(providers) or resolve_providers(
            settings.providers, allow_cpu_fallback=allow_cpu_fallback)
        try:
            self.session = ort.InferenceSession(str(path), providers=providers)
        except Exception as exc:  # onnxruntime raises its own exception types
            raise DetectorError(f"cannot load detector {path}: {exc}") from exc
        check_session(self.session, providers, f"detector {path.name}",
                      allow_cpu_fallback=allow_cpu_fallback)
        inp = self.session.get_inputs()[0]
        self.input_name = inp.name
        shape = inp.shape
        # A fixed input size in the model wins over the setting.
        self.size = int(shape[2]) if isinstance(shape[2], int) else settings.input_size

    def detect(self, bgr: np.ndarray) -> list[Proposal]:
        if bgr.ndim != 3 or bgr.shape[0] < 2 or bgr.shape[1] < 2:
            return []
        h, w = bgr.shape[:2]
        tensor, scale, pad = letterbox(bgr, self.size)
        out = self.session.run(None, {self.input_name: tensor})[0]
        s = self.settings
        return decode_yolo(out, scale, pad, w, h, s.score_thresh, s.nms_iou, s.max_detections)


def make_detector(settings: DetectorSettings | None = None, *, providers: Sequence[str] = (),
                  allow_cpu_fallback: bool = False) -> Detector:
    """``providers``: resolved ones for an ONNX detector; empty: its settings' own."""
    settings = settings or DetectorSettings()
    if settings.kind == "onnx":
        return OnnxYoloDetector(settings, providers=providers,
                                allow_cpu_fallback=allow_cpu_fallback)
    return OpenCvProposer(settings)
