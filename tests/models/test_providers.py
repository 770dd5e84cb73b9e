"""Execution-provider selection (models/providers.py), on this CPU-only machine."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from models.grounding import Perception, PerceptionSettings
from models.ocr import Ocr, OcrSettings
from models.providers import CPU, CUDA, ProviderError, check_session, resolve

CPU_ONLY = [CPU]
WITH_CUDA = [CUDA, CPU]


def test_empty_means_cuda_when_present_else_cpu() -> None:
    assert resolve((), have=CPU_ONLY) == [CPU]
    assert resolve((), have=WITH_CUDA) == [CUDA, CPU]


def test_cuda_asked_for_but_missing_is_an_error_naming_what_exists() -> None:
    with pytest.raises(ProviderError) as err:
        resolve((CUDA, CPU), have=CPU_ONLY)
    assert CUDA in str(err.value) and "it has CPUExecutionProvider" in str(err.value)
    assert "allow_cpu_fallback" in str(err.value)


def test_fallback_drops_the_missing_and_keeps_the_cpu() -> None:
    assert resolve((CUDA,), allow_cpu_fallback=True, have=CPU_ONLY) == [CPU]
    assert resolve((CUDA, CPU), allow_cpu_fallback=True, have=WITH_CUDA) == [CUDA, CPU]
    assert resolve((CUDA,), have=WITH_CUDA) == [CUDA, CPU]


def test_perception_fails_at_construction_not_at_first_read() -> None:
    if CUDA in ort.get_available_providers():
        pytest.skip("this onnxruntime has CUDA")
    with pytest.raises(ProviderError):
        Perception(PerceptionSettings(providers=(CUDA,)))
    p = Perception(PerceptionSettings(providers=(CUDA,), allow_cpu_fallback=True))
    assert p.providers == [CPU]


def test_ocr_sessions_run_on_the_resolved_providers() -> None:
    ocr = Ocr(OcrSettings(), providers=[CPU])
    assert ocr.providers == [CPU]
    assert ocr.run_bgr(np.full((200, 300, 3), 255, np.uint8)).lines == ()


def test_a_model_s_own_providers_win_over_perception_s() -> None:
    p = Perception(PerceptionSettings(providers=(CPU,),
                                      ocr=OcrSettings(providers=("NoSuchExecutionProvider",))))
    with pytest.raises(ProviderError):
        _ = p.ocr_engine


class _Session:
    def __init__(self, got: list[str]) -> None:
        self._got = got

    def get_providers(self) -> list[str]:
        return self._got


def test_a_session_that_silently_lost_cuda_is_an_error() -> None:
    # onnxruntime lists CUDA when its wheel has it, yet builds a CPU-only session (logging,
    # not raising) when the CUDA libraries cannot load; a session stands in for that here.
    with pytest.raises(ProviderError, match="could not start CUDAExecutionProvider"):
        check_session(_Session([CPU]), [CUDA, CPU], "OCR model det.onnx")  # type: ignore[arg-type]
    check_session(_Session([CPU]), [CUDA, CPU], "x", allow_cpu_fallback=True)  # type: ignore[arg-type]
    check_session(_Session([CUDA, CPU]), [CUDA, CPU], "x")  # type: ignore[arg-type]


def test_a_host_asking_for_missing_cuda_stops_with_a_config_error() -> None:
    from actors.perception import PerceptionEngine
    from runtime.config import ConfigError

    if CUDA in ort.get_available_providers():
        pytest.skip("this onnxruntime has CUDA")
    with pytest.raises(ConfigError, match="CUDAExecutionProvider"):
        PerceptionEngine(settings=PerceptionSettings(providers=(CUDA, CPU)))
