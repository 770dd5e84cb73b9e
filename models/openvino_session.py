"""OCR's ONNX models on OpenVINO's CPU runtime, behind the part of onnxruntime's session
that the OCR engine and rapidocr's wrappers call.

The same ONNX files, read by OpenVINO instead of onnxruntime: on the PP-OCRv4 detector and
recogniser OpenVINO's CPU kernels take 0.63-0.72x and 0.48-0.57x of onnxruntime's CPU time
for the same outputs, once an input shape has been seen (probabilities within 1e-3;
docs/perception.md, "The runtime"). Nothing but the runtime changes: the pre- and
post-processing stay rapidocr's and ours.

With ``threads = 1`` a run executes on the calling thread (so `runtime.cpu_ledger` charges
all of it); with more, OpenVINO's own pool threads do the work, as onnxruntime's do.

Each run's input shape goes into the model's ``ShapeBook`` (``models/shape_book.py``), and
``prepare`` runs every shape in it once, so that a new process meets its shapes prepared.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import structlog

from models.shape_book import Shape, ShapeBook
from runtime.errors import MobagentError

log = structlog.get_logger(__name__)

DEVICE = "CPU"


class OpenVinoError(MobagentError, RuntimeError):
    """OpenVINO is missing, or it could not read or compile a model."""


def available() -> bool:
    """Whether the ``openvino`` package can be imported here."""
    try:
        import openvino  # noqa: F401
    except ImportError:
        return False
    return True


class NodeArg(msgspec.Struct, frozen=True):
    """A model input's or output's name and shape, as onnxruntime's ``NodeArg`` gives them
    (a dimension OpenVINO does not know is None)."""

    name: str
    shape: list[int | None]


class ModelMeta(msgspec.Struct, frozen=True):
    """The ONNX file's metadata (its ``metadata_props``), as onnxruntime's ``ModelMetadata``
    gives them: PP-OCRv4's recogniser carries its character list there."""

    custom_metadata_map: dict[str, str]


class OpenVinoSession:
    """One compiled model. Thread-safe: each thread runs its own infer request (an
    OpenVINO request may not be run from two threads at once)."""

    def __init__(self, model: Path | bytes, *, threads: int = 0, cache_dir: Path | None = None,
                 what: str = "model", shapes: ShapeBook | None = None,
                 precision: str = "f32") -> None:
        try:
            import openvino as ov
        except ImportError as exc:
            raise OpenVinoError(
                f"{what}: perception.ocr.runtime = \"openvino\" needs the package 'openvino': "
                "pip install openvino (or runtime = \"onnxruntime\")") from exc
        core = ov.Core()
        if cache_dir is not None:
            # OpenVINO keeps the compiled blob, keyed by the model, the device and its
            # settings, so a later process skips the compilation (about 0.2 s a model).
            try:
                cache_dir.mkdir(parents=True, exist_ok=True)
                core.set_property({"CACHE_DIR": str(cache_dir)})
            except OSError as exc:
                log.info("ocr_openvino_cache_unusable", path=str(cache_dir), error=str(exc))
        config: dict[str, Any] = {"PERFORMANCE_HINT": "LATENCY",
                                  "INFERENCE_PRECISION_HINT": precision}
        if threads > 0:
            config["INFERENCE_NUM_THREADS"] = threads
        try:
            read = core.read_model(str(model)) if isinstance(model, Path) \
                else core.read_model(model=model, weights=b"")
            self._compiled = core.compile_model(read, DEVICE, config)
        except Exception as exc:  # OpenVINO raises its own untyped errors
            where = model if isinstance(model, Path) else "(given as bytes)"
            raise OpenVinoError(f"cannot load the {what} {where} on OpenVINO: {exc}") from exc
        self._inputs = [_node(port) for port in self._compiled.inputs]
        self._outputs = [_node(port) for port in self._compiled.outputs]
        self._output_index = {o.name: i for i, o in enumerate(self._outputs)}
        self._meta = ModelMeta(custom_metadata_map=_framework_meta(read))
        self._local = threading.local()
        self.shapes = shapes if shapes is not None else ShapeBook(None)

    def _request(self) -> Any:
        request = getattr(self._local, "request", None)
        if request is None:
            request = self._local.request = self._compiled.create_infer_request()
        return request

    def run(self, output_names: Sequence[str] | None,
            feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """The outputs named (None: all, in the model's order) for the inputs fed by name."""
        self.shapes.note(feed)
        result = self._request().infer(dict(feed))  # copies out: the request is reused
        names = [o.name for o in self._outputs] if output_names is None else output_names
        return [np.asarray(result[self._output_index[name]]) for name in names]

    def prepare(self, stop: threading.Event | None = None, *,
                batch: int | None = None) -> tuple[int, int]:
        """Run each shape of the book once on zeros (OpenVINO prepares its kernels per input
        shape), until ``stop`` is set; with ``batch``, only shapes of that many items (a
        book shared with engines that batch otherwise); how many were prepared, and how
        many failed (a shape the model refuses: skipped)."""
        done = failed = 0
        inputs = {i.name for i in self._inputs}
        for shape in self.shapes.to_prepare():
            if stop is not None and stop.is_set():
                break
            if {name for name, _dims in shape} != inputs:
                continue  # another model's file under the same name, or a changed model
            if batch is not None and any(dims[:1] != (batch,) for _name, dims in shape):
                continue
            try:
                self._request().infer({name: np.zeros(dims, np.float32) for name, dims in shape})
                done += 1
            except Exception as exc:  # OpenVINO raises its own untyped errors
                failed += 1
                log.debug("shape_prepare_failed", shape=_text(shape), error=str(exc))
        return done, failed

    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    def get_modelmeta(self) -> ModelMeta:
        return self._meta

    def get_providers(self) -> list[str]:
        return [f"OpenVINO:{DEVICE}"]


def _text(shape: Shape) -> str:
    return " ".join(f"{name}{list(dims)}" for name, dims in shape)


def _node(port: Any) -> NodeArg:
    shape = port.get_partial_shape()
    dims = [d.get_length() if d.is_static else None for d in shape]
    return NodeArg(name=port.get_any_name(), shape=dims)


def _framework_meta(model: Any) -> dict[str, str]:
    """The ONNX ``metadata_props`` that OpenVINO's ONNX reader keeps under ``framework``."""
    if not model.has_rt_info(["framework"]):
        return {}
    props = model.get_rt_info(["framework"]).value
    return {str(k): str(v) for k, v in props.items()} if isinstance(props, dict) else {}
