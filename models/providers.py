"""Which onnxruntime execution providers the perception models run on.

``perception.providers`` names them in order (``["CUDAExecutionProvider",
"CPUExecutionProvider"]``); empty means CUDA when this onnxruntime has it, else the CPU. A
provider asked for but missing is an error that names what exists (a GPU host whose CUDA
wheel or drivers are broken must not quietly run 10x slower on its CPU), unless
``allow_cpu_fallback`` is set: then the missing ones are dropped, with a warning, and the CPU
is used. OCR, the ONNX icon detector and CLIP all resolve their providers here.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnxruntime as ort
import structlog

from runtime.errors import MobagentError

log = structlog.get_logger(__name__)

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"


class ProviderError(MobagentError, RuntimeError):
    """An execution provider was asked for that this onnxruntime cannot give."""


def available() -> list[str]:
    return list(ort.get_available_providers())


def resolve(wanted: Sequence[str] = (), *, allow_cpu_fallback: bool = False,
            have: Sequence[str] | None = None) -> list[str]:
    """The providers to create sessions with, in order (``have``: the available ones, for
    tests; default onnxruntime's)."""
    have = list(available() if have is None else have)
    if not wanted:
        return [CUDA, CPU] if CUDA in have else [CPU]
    missing = [p for p in wanted if p not in have]
    if missing and not allow_cpu_fallback:
        raise ProviderError(
            f"the providers asked for (perception.providers) include {', '.join(missing)}, "
            f"which this onnxruntime does not have (it has {', '.join(have) or 'none'}). "
            "For CUDA install the gpu extra "
            "(docs/perception.md, GPU), or set perception.allow_cpu_fallback = true to run "
            "on the CPU instead")
    chosen = [p for p in wanted if p in have]
    if missing:
        log.warning("perception_provider_fallback", missing=missing, using=chosen or [CPU])
    if CPU not in chosen:
        chosen.append(CPU)  # onnxruntime's own last resort, made explicit
    return chosen


def check_session(session: ort.InferenceSession, wanted: Sequence[str], what: str, *,
                  allow_cpu_fallback: bool = False) -> None:
    """Fail when a session did not get an accelerator it was created with: onnxruntime
    lists CUDA as available when the wheel has it, yet falls back to the CPU (logging, not
    raising) when the CUDA libraries or the driver cannot be loaded."""
    got = set(session.get_providers())
    lost = [p for p in wanted if p != CPU and p not in got]
    if lost and not allow_cpu_fallback:
        raise ProviderError(
            f"{what}: onnxruntime could not start {', '.join(lost)} (the session runs on "
            f"{', '.join(session.get_providers())}); check the CUDA and cuDNN libraries that "
            "onnxruntime-gpu needs, or set perception.allow_cpu_fallback = true")
    if lost:
        log.warning("perception_provider_fallback", what=what, missing=lost,
                    using=session.get_providers())
