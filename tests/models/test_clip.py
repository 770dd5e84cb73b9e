"""CLIP as two ONNX towers: the torch-free tokenizer, the runtime on tiny graphs built here,
and (opt-in, when torch + open_clip are installed) equivalence with torch after export."""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from models.clip import (
    ClipConfig,
    ClipError,
    ClipMatcher,
    ClipModel,
    ClipTokenizer,
    bytes_to_unicode,
)
from models.detector import Proposal
from models.grounding import (
    IconSettings,
    Perception,
    PerceptionSettings,
    ground_icon_in,
)
from protocol.messages import Ambiguous, Grounded

MERGES = ["h e", "l l", "he ll", "hell o</w>", "w o", "r l", "wo rl", "worl d</w>",
          "i c", "ic o", "ico n</w>"]


def write_vocab(folder: Path, gz: bool = True) -> Path:
    text = "#version: 0.2\n" + "\n".join(MERGES) + "\n"
    path = folder / ("bpe_simple_vocab_16e6.txt.gz" if gz else "merges.txt")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return path


def test_byte_map_is_a_bijection() -> None:
    m = bytes_to_unicode()
    assert len(m) == 256 and len(set(m.values())) == 256


def test_tokenizer_applies_merges_in_rank_order(tmp_path: Path) -> None:
    tok = ClipTokenizer(write_vocab(tmp_path), context_length=8)
    base = 512  # 256 byte symbols, then the same with </w>
    assert tok.bpe("hello") == "hello</w>"
    assert tok.bpe("world") == "world</w>"
    assert tok.encode("Hello  World") == [tok.encoder["hello</w>"], tok.encoder["world</w>"]]
    assert tok.encoder["hello</w>"] == base + MERGES.index("hell o</w>")
    # an unknown word falls back to byte symbols: "zq" -> "z", "q</w>"
    assert tok.encode("zq") == [tok.encoder["z"], tok.encoder["q</w>"]]
    ids = tok(["hello world", "icon"])
    assert ids.shape == (2, 8) and ids.dtype == np.int64
    assert ids[0, :4].tolist() == [tok.sot, tok.encoder["hello</w>"], tok.encoder["world</w>"], tok.eot]
    assert ids[0, 4:].tolist() == [0, 0, 0, 0]
    long = tok("hello " * 20)[0]
    assert long[0] == tok.sot and long[-1] == tok.eot  # cut to the context, eot kept
    assert tok.sot == base + len(MERGES) and tok.eot == tok.sot + 1


def test_tokenizer_reads_plain_merges_and_reports_a_missing_file(tmp_path: Path) -> None:
    tok = ClipTokenizer(write_vocab(tmp_path, gz=False))
    assert tok.encode("icon") == [tok.encoder["icon</w>"]]
    with pytest.raises(ClipError):
        ClipTokenizer(tmp_path / "nothing.txt.gz")


REAL_VOCAB = None
if importlib.util.find_spec("open_clip") is not None:  # the real vocabulary ships with open_clip
    import open_clip

    REAL_VOCAB = Path(open_clip.__file__).parent / "bpe_simple_vocab_16e6.txt.gz"


@pytest.mark.skipif(REAL_VOCAB is None, reason="open_clip is not installed (optional extra)")
def test_tokenizer_matches_open_clip() -> None:
    import open_clip

    tok = ClipTokenizer(REAL_VOCAB)  # type: ignore[arg-type]
    texts = ["a photo of a cat", "More options", "navigate up!", "zoom-in 2x"]
    assert (tok(texts) == open_clip.tokenize(texts).numpy()).all()


# -- tiny towers built with the onnx helper ----------------------------------------------------

DIM = 4


def tiny_towers(folder: Path, w_img: np.ndarray, emb: np.ndarray, size: int = 8) -> None:
    """image: mean colour per channel @ w_img [3, DIM]; text: mean of token embeddings."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    img = helper.make_graph(
        [helper.make_node("ReduceMean", ["image"], ["pooled"], axes=[2, 3], keepdims=0),
         helper.make_node("MatMul", ["pooled", "w"], ["embedding"])],
        "image_tower",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["n", 3, size, size])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["n", DIM])],
        initializer=[numpy_helper.from_array(w_img.astype(np.float32), "w")])
    txt = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["tokens"]),
         helper.make_node("ReduceMean", ["tokens"], ["embedding"], axes=[1], keepdims=0)],
        "text_tower",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n", 77])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["n", DIM])],
        initializer=[numpy_helper.from_array(emb.astype(np.float32), "table")])
    for graph, name in ((img, "image.onnx"), (txt, "text.onnx")):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, folder / name)


@pytest.fixture
def tiny_clip(tmp_path: Path) -> tuple[ClipModel, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    w_img = rng.normal(size=(3, DIM))
    write_vocab(tmp_path)
    tok = ClipTokenizer(tmp_path / "bpe_simple_vocab_16e6.txt.gz")
    emb = rng.normal(size=(len(tok.encoder), DIM)) * 0.01
    # "hello" points where a pure red crop's image embedding points
    red = (np.array([1.0, 0, 0]) - np.array(ClipConfig().mean)) / np.array(ClipConfig().std)
    emb[tok.encoder["hello</w>"]] = (red @ w_img) * 50
    tiny_towers(tmp_path, w_img, emb)
    (tmp_path / "clip.json").write_text('{"image_size": 8, "batch": 3}')
    return ClipModel.from_dir(tmp_path), w_img, emb


def test_image_tower_matches_a_numpy_reference(tiny_clip: tuple[ClipModel, np.ndarray, np.ndarray]) -> None:
    model, w_img, _ = tiny_clip
    rng = np.random.default_rng(1)
    crops = [rng.integers(0, 255, (h, w, 3), dtype=np.uint8) for h, w in ((8, 8), (20, 12), (5, 9),
                                                                          (8, 8), (30, 30))]
    got = model.encode_images(crops)  # 5 crops in batches of 3
    x = model.preprocess(crops)
    ref = x.mean(axis=(2, 3)) @ w_img
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    assert got.shape == (5, DIM)
    np.testing.assert_allclose(got, ref, atol=1e-5)


def test_text_tower_and_ranking(tiny_clip: tuple[ClipModel, np.ndarray, np.ndarray]) -> None:
    model, _, emb = tiny_clip
    ids = model.tokenizer(["hello"])
    ref = emb[ids[0]].mean(axis=0)
    np.testing.assert_allclose(model.encode_texts(["hello"])[0], ref / np.linalg.norm(ref), atol=1e-5)
    red = np.zeros((16, 16, 3), dtype=np.uint8)
    red[..., 0] = 255
    blue = np.zeros((16, 16, 3), dtype=np.uint8)
    blue[..., 2] = 255
    probs = model.rank([blue, red, blue], "hello")
    assert probs.sum() == pytest.approx(1.0, abs=1e-5) and int(np.argmax(probs)) == 1
    assert model.rank([], "hello").shape == (0,)


def test_clip_matcher_drives_icon_grounding(tiny_clip: tuple[ClipModel, np.ndarray, np.ndarray]) -> None:
    model, _, _ = tiny_clip
    frame = np.zeros((400, 400, 3), dtype=np.uint8)  # BGR
    frame[:] = (255, 0, 0)  # blue everywhere
    frame[300:340, 300:340] = (0, 0, 255)  # one red square
    props = [Proposal(box=(20, 20, 60, 60)), Proposal(box=(300, 300, 340, 340)),
             Proposal(box=(100, 200, 140, 240))]
    result = ground_icon_in(frame, props, "hello", ClipMatcher(model))
    assert isinstance(result, Grounded) and result.point == (320, 320)
    # a description the towers cannot separate gets marked candidates, not a guess
    result = ground_icon_in(frame, [props[0], props[2]], "hello", ClipMatcher(model))
    assert isinstance(result, Ambiguous)


def test_clip_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(ClipError, match="not found"):
        ClipModel.from_dir(tmp_path / "missing")
    with pytest.raises(ClipError, match="vocabulary"):
        ClipModel.from_dir(tmp_path)
    write_vocab(tmp_path)
    with pytest.raises(ClipError, match="tower not found"):
        ClipModel.from_dir(tmp_path)
    (tmp_path / "clip.json").write_text('{"image_size": "big"}')
    with pytest.raises(ClipError, match="clip.json"):
        ClipModel.from_dir(tmp_path)


def test_the_clip_matcher_without_a_folder_says_so() -> None:
    p = Perception(PerceptionSettings(icons=IconSettings(matcher="clip")))
    with pytest.raises(ClipError, match="needs perception.clip_dir"):
        _ = p.matcher


# -- opt-in: export a random-weight open_clip model and compare with torch ---------------------

HAVE_TORCH_CLIP = all(importlib.util.find_spec(m) is not None for m in ("torch", "open_clip"))


@pytest.mark.skipif(not HAVE_TORCH_CLIP, reason="torch/open_clip not installed (extra clip-export)")
def test_exported_towers_match_torch(tmp_path: Path) -> None:
    import open_clip
    import torch

    from models.export.clip import export_model

    torch.manual_seed(0)
    ref, _, preprocess = open_clip.create_model_and_transforms("ViT-B-32", pretrained=None)
    out = export_model(ref, preprocess, tmp_path / "clip")
    model = ClipModel.from_dir(out)
    rng = np.random.default_rng(0)
    crops = [rng.integers(0, 255, (64, 80, 3), dtype=np.uint8) for _ in range(3)]
    x = model.preprocess(crops)
    texts = ["an icon of search", "more options"]
    with torch.no_grad():
        want_img = ref.encode_image(torch.from_numpy(x)).numpy()
        want_txt = ref.encode_text(open_clip.tokenize(texts)).numpy()
    got_img = model.image.run(None, {model.image.get_inputs()[0].name: x})[0]
    got_txt = model.text.run(None, {model.text.get_inputs()[0].name: model.tokenizer(texts)})[0]
    np.testing.assert_allclose(got_img, want_img, atol=1e-4)
    np.testing.assert_allclose(got_txt, want_txt, atol=1e-4)
