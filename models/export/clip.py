"""Write an open_clip model's image and text towers to ONNX for `models/clip.py`.

    python -m models.export.clip --model ViT-B-32 --pretrained <tag or path> --out DIR

Needs the optional extra `clip-export` (open_clip_torch, torch, onnx); the runtime does not.
The folder gets image.onnx, text.onnx, clip.json and the BPE vocabulary.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any


def export(model_name: str, pretrained: str | None, out: Path, opset: int = 17) -> Path:
    try:
        import open_clip
    except ImportError as exc:
        raise SystemExit(
            "exporting CLIP needs the optional extra: pip install 'mobagent[clip-export]'"
        ) from exc

    model, _, preprocess = open_clip.create_model_and_transforms(
        model_name, pretrained=pretrained or None)
    return export_model(model, preprocess, out, opset)


def export_model(model: Any, preprocess: Any, out: Path, opset: int = 17) -> Path:
    """Write an already-built open_clip model (anything with encode_image/encode_text)."""
    import torch

    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    size = _image_size(model, preprocess)
    context = int(getattr(model, "context_length", 77) or 77)

    class ImageTower(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, x: Any) -> Any:
            return self.m.encode_image(x)

    class TextTower(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, ids: Any) -> Any:
            return self.m.encode_text(ids)

    with torch.no_grad():
        torch.onnx.export(ImageTower(model), (torch.zeros(1, 3, size, size),),
                          str(out / "image.onnx"), input_names=["image"],
                          output_names=["embedding"], opset_version=opset,
                          dynamic_axes={"image": {0: "n"}, "embedding": {0: "n"}}, dynamo=False)
        torch.onnx.export(TextTower(model), (torch.zeros(1, context, dtype=torch.long),),
                          str(out / "text.onnx"), input_names=["ids"],
                          output_names=["embedding"], opset_version=opset,
                          dynamic_axes={"ids": {0: "n"}, "embedding": {0: "n"}}, dynamo=False)
    mean, std = _norm(preprocess)
    (out / "clip.json").write_text(json.dumps({
        "image_size": size, "mean": mean, "std": std, "context_length": context}, indent=1))
    try:
        import open_clip

        vocab = Path(open_clip.__file__).parent / "bpe_simple_vocab_16e6.txt.gz"
        if vocab.is_file():
            shutil.copy(vocab, out / vocab.name)
    except ImportError:
        pass  # the caller supplies a vocabulary
    return out


def _image_size(model: Any, preprocess: Any) -> int:
    size = getattr(getattr(model, "visual", None), "image_size", 224)
    if isinstance(size, tuple | list):
        size = size[0]
    return int(size)


def _norm(preprocess: Any) -> tuple[list[float], list[float]]:
    for t in getattr(preprocess, "transforms", []):
        if hasattr(t, "mean") and hasattr(t, "std"):
            return [float(v) for v in t.mean], [float(v) for v in t.std]
    from models.clip import OPENAI_MEAN, OPENAI_STD

    return list(OPENAI_MEAN), list(OPENAI_STD)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default="ViT-B-32", help="open_clip model name")
    p.add_argument("--pretrained", default="",
                   help="open_clip pretrained tag or a checkpoint path; empty: random weights")
    p.add_argument("--out", type=Path, default=Path("clip-onnx"))
    p.add_argument("--opset", type=int, default=17)
    args = p.parse_args(argv)
    out = export(args.model, args.pretrained, args.out, args.opset)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
