"""int8 quantization of an ONNX model's bytes with onnxruntime.quantization (no OCR
knowledge: `models.ocr` makes dynamic files with it on first use, and
`models.export.ocr_int8` static ones from screenshots)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

# The fp32 files are at opset 11-12; per-channel QDQ needs DequantizeLinear's axis (13).
OPSET = 13
# Weights in 7 bits ([-64, 64]: onnxruntime's reduced int8 range), on every CPU.
# onnxruntime's uint8 x int8 kernels on AVX2, and on AVX-512 without VNNI, add pairs of
# products in int16 (VPMADDUBSW), which saturates past 32767 where 255 x 127 x 2 would be
# 64770; VNNI and Arm add in int32. So full-range int8 weights read differently by CPU
# (an AVX2-only EPYC read a test screen 0.56 alike fp32, an AVX-512 VNNI Xeon 0.6 or more).
# With 7-bit weights a pair is at most 255 x 64 x 2 = 32640 and fits: onnxruntime's
# quantization docs ("When and why do I need to try U8U8?") and ``reduce_range``.
REDUCE_RANGE = True
WEIGHT_MIN, WEIGHT_MAX = (-64, 64) if REDUCE_RANGE else (-128, 127)


def prepare(source: bytes, workdir: Path) -> Path:
    """The fp32 model at opset 13 with shapes inferred and onnxruntime's basic fusions done
    (Conv+BatchNorm folded), as onnxruntime.quantization recommends before quantizing."""
    import onnx
    from onnx import version_converter
    from onnxruntime.quantization.shape_inference import quant_pre_process

    model = onnx.load_from_string(source)
    if next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), OPSET) < OPSET:
        model = version_converter.convert_version(model, OPSET)
    raw = workdir / "raw.onnx"
    onnx.save(model, str(raw))
    pre = workdir / "pre.onnx"
    quant_pre_process(str(raw), str(pre), skip_symbolic_shape=True)
    return pre


def quantize_dynamic_bytes(source: bytes) -> bytes:
    """Weights-only int8 (activations quantized on the fly, per run)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        out = work / "int8.onnx"
        quantize_dynamic(str(prepare(source, work)), str(out), weight_type=QuantType.QInt8,
                         reduce_range=REDUCE_RANGE)
        return out.read_bytes()


def quantize_static_bytes(source: bytes, inputs: Sequence[np.ndarray],
                          op_types: Sequence[str] = ()) -> bytes:
    """Weights and activations int8, activation ranges from ``inputs`` (MinMax); only the
    operators ``op_types`` (empty: all onnxruntime can quantize)."""
    import onnxruntime as ort
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    if not inputs:
        raise ValueError("static quantization needs calibration inputs")

    class Reader(CalibrationDataReader):
        def __init__(self, name: str) -> None:
            self.name = name
            self.it: Iterator[np.ndarray] = iter(inputs)

        def get_next(self) -> dict[str, np.ndarray] | None:
            x = next(self.it, None)
            return None if x is None else {self.name: x}

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        pre = prepare(source, work)
        name = ort.InferenceSession(str(pre), providers=["CPUExecutionProvider"]) \
            .get_inputs()[0].name
        out = work / "int8.onnx"
        quantize_static(str(pre), str(out), Reader(name), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, reduce_range=REDUCE_RANGE,
                        op_types_to_quantize=list(op_types) or None)
        return out.read_bytes()


