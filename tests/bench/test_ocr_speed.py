"""bench/ocr_speed.py: set-ups in their own processes, ratios against ours."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from bench import ocr_speed


def test_it_times_each_set_up_in_its_own_process(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    screens = tmp_path / "screens"
    screens.mkdir()
    frame = np.full((1920, 1080, 3), 250, dtype=np.uint8)
    cv2.putText(frame, "Settings", (60, 400), cv2.FONT_HERSHEY_SIMPLEX, 2.0, (30, 30, 30), 4)
    cv2.imwrite(str(screens / "1.png"), frame)
    cv2.imwrite(str(screens / "2.jpg"), cv2.resize(frame, (540, 960)))  # another size: skipped
    (screens / "1.json").write_text('{"image": "1.png"}')  # rico-dev's per-screen metadata
    (screens / "2.json").write_text("{}")
    out = tmp_path / "speed.json"
    assert ocr_speed.main(["--data", str(tmp_path), "--rounds", "2", "--no-default",
                           "--json", str(out)]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last == json.loads(out.read_text())
    assert last["frames"] == 1 and last["rounds"] == 2
    ours, prev = last["ours (the defaults)"], last["previous defaults"]
    assert ours["ratio_vs_ours"] == 1.0 and len(prev["p50_s_rounds"]) == 2
    assert all(t > 0 for t in ours["p50_s_rounds"] + prev["p50_s_rounds"])
    assert "rapidocr defaults" not in last


def test_bad_data_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ocr_speed.main(["--data", str(tmp_path)]) == 2
    assert "no screens/ folder" in capsys.readouterr().err
    (tmp_path / "screens").mkdir()
    assert ocr_speed.main(["--data", str(tmp_path), "--rounds", "1", "--no-default"]) == 1
    assert "no 1080x1920 frames" in capsys.readouterr().err


def test_images_folder_and_cuda_asked_for_on_a_cpu_machine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import onnxruntime as ort

    frame = np.full((1920, 1080, 3), 250, dtype=np.uint8)
    cv2.putText(frame, "Settings", (60, 400), cv2.FONT_HERSHEY_SIMPLEX, 2.0, (30, 30, 30), 4)
    cv2.imwrite(str(tmp_path / "a.png"), frame)
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has CUDA")
    # CPU runs, CUDA fails with the provider error, not a silent CPU run
    assert ocr_speed.main(["--images", str(tmp_path), "--setups", "providers",
                           "--rounds", "1"]) == 1
    err = capsys.readouterr().err
    assert "CUDA failed" in err and "CUDAExecutionProvider" in err and "does not have" in err
