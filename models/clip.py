"""CLIP as two ONNX towers (image, text) with a tokenizer that needs no torch.

A model folder (written by `python -m models.export.clip`) holds:
- `image.onnx`: float32 [N, 3, S, S] (normalised RGB) -> [N, D]
- `text.onnx`: int64 [N, L] token ids -> [N, D]
- `bpe_simple_vocab_16e6.txt.gz` (or `merges.txt`): CLIP's BPE merges
- `clip.json` (optional): image_size, mean, std, context_length

Any CLIP-family model with this two-tower interface works (ViT-B/32, MobileCLIP-class models).
"""

from __future__ import annotations

import functools
import gzip
import html
import json
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import cv2
import msgspec
import numpy as np
import onnxruntime as ort

from models.icons import IconScores
from models.providers import check_session
from models.providers import resolve as resolve_providers
from runtime.errors import MobagentError

Box = tuple[float, float, float, float]

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)
VOCAB_NAMES = ("bpe_simple_vocab_16e6.txt.gz", "bpe_simple_vocab_16e6.txt", "merges.txt")


class ClipError(MobagentError, RuntimeError):
    pass


class ClipConfig(msgspec.Struct, frozen=True, kw_only=True):
    image_size: int = 224
    mean: tuple[float, float, float] = OPENAI_MEAN
    std: tuple[float, float, float] = OPENAI_STD
    context_length: int = 77
    batch: int = 16  # crops per image-tower run
    temperature: float = 100.0  # CLIP's logit scale, for the softmax over crops


# -- the tokenizer (CLIP's byte-level BPE) ---------------------------------------------------


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """CLIP/GPT-2's reversible map from bytes to printable unicode characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs], strict=True))


# CLIP splits on contractions, letter runs, single digits and other symbol runs.
_TOKEN_PAT = re.compile(
    r"<start_of_text>|<end_of_text>|'s|'t|'re|'ve|'m|'ll|'d|[^\W\d_]+|\d|[^\s\w]+|_+",
    re.IGNORECASE)


class ClipTokenizer:
    """CLIP's BPE tokenizer, loaded from a merges file (open_clip's gzipped vocab or plain text)."""

    def __init__(self, merges_path: str | Path, context_length: int = 77,
                 max_merges: int = 49152 - 256 - 2) -> None:
        path = Path(merges_path)
        if not path.is_file():
            raise ClipError(f"BPE vocabulary not found: {path}")
        raw = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
        lines = raw.decode("utf-8").split("\n")
        # The first line is a version header ("#version: 0.2"), as in open_clip's file.
        if lines and lines[0].startswith("#"):
            lines = lines[1:]
        merges = [tuple(m.split()) for m in lines[:max_merges] if len(m.split()) == 2]
        self.byte_encoder = bytes_to_unicode()
        vocab = list(self.byte_encoder.values())
        vocab = vocab + [v + "</w>" for v in vocab]
        vocab.extend("".join(m) for m in merges)
        vocab.extend(["<start_of_text>", "<end_of_text>"])
        self.encoder = {tok: i for i, tok in enumerate(vocab)}
        self.bpe_ranks = {m: i for i, m in enumerate(merges)}
        self.sot = self.encoder["<start_of_text>"]
        self.eot = self.encoder["<end_of_text>"]
        self.context_length = context_length
        # The token determines the merges: a per-instance functools cache.
        self.bpe = functools.cache(self._bpe)

    def _bpe(self, token: str) -> str:
        word = list(token[:-1]) + [token[-1] + "</w>"]
        while len(word) > 1:
            pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
            best = min(pairs, key=lambda p: self.bpe_ranks.get(p, float("inf")))
            if best not in self.bpe_ranks:
                break
            merged: list[str] = []
            i = 0
            while i < len(word):
                if i < len(word) - 1 and (word[i], word[i + 1]) == best:
                    merged.append(word[i] + word[i + 1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        return " ".join(word)

    def encode(self, text: str) -> list[int]:
        text = " ".join(html.unescape(html.unescape(text)).split()).strip().lower()
        ids: list[int] = []
        for token in _TOKEN_PAT.findall(text):
            token = "".join(self.byte_encoder[b] for b in token.encode("utf-8"))
            ids.extend(self.encoder[t] for t in self.bpe(token).split(" ") if t in self.encoder)
        return ids

    def __call__(self, texts: str | Sequence[str]) -> np.ndarray:
        """int64 [N, context_length]: <sot> ids <eot> then zeros; long texts are cut."""
        if isinstance(texts, str):
            texts = [texts]
        out = np.zeros((len(texts), self.context_length), dtype=np.int64)
        for i, t in enumerate(texts):
            ids = [self.sot, *self.encode(t)][: self.context_length - 1] + [self.eot]
            out[i, : len(ids)] = ids
        return out


# -- the towers ------------------------------------------------------------------------------


def _session(path: Path, providers: Sequence[str], *,
             allow_cpu_fallback: bool = False) -> ort.InferenceSession:
    """A tower's session on ``providers`` (resolved ones; empty: CUDA when present, else CPU)."""
    if not path.is_file():
        raise ClipError(f"CLIP tower not found: {path}")
    chosen = list(providers) or resolve_providers()
    try:
        session = ort.InferenceSession(str(path), providers=chosen)
    except Exception as exc:  # onnxruntime raises its own exception types
        raise ClipError(f"cannot load {path}: {exc}") from exc
    check_session(session, chosen, f"CLIP tower {path.name}", allow_cpu_fallback=allow_cpu_fallback)
    return session


def _l2(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


class ClipModel:
    def __init__(self, image_onnx: str | Path, text_onnx: str | Path, tokenizer: ClipTokenizer,
                 config: ClipConfig | None = None, providers: Sequence[str] = (),
                 allow_cpu_fallback: bool = False) -> None:
        self.config = config or ClipConfig()
        self.image = _session(Path(image_onnx), providers, allow_cpu_fallback=allow_cpu_fallback)
        self.text = _session(Path(text_onnx), providers, allow_cpu_fallback=allow_cpu_fallback)
        self.tokenizer = tokenizer
        shape = self.image.get_inputs()[0].shape
        self.image_size = int(shape[2]) if isinstance(shape[2], int) else self.config.image_size

    @classmethod
    def from_dir(cls, folder: str | Path, providers: Sequence[str] = (),
                 allow_cpu_fallback: bool = False) -> ClipModel:
        folder = Path(folder)
        if not folder.is_dir():
            raise ClipError(f"CLIP model folder not found: {folder}")
        config = ClipConfig()
        if (folder / "clip.json").is_file():
            try:
                config = msgspec.convert(json.loads((folder / "clip.json").read_text()), ClipConfig)
            except (ValueError, msgspec.ValidationError) as exc:
                raise ClipError(f"bad {folder / 'clip.json'}: {exc}") from exc
        vocab = next((folder / n for n in VOCAB_NAMES if (folder / n).is_file()), None)
        if vocab is None:
            raise ClipError(f"no BPE vocabulary ({', '.join(VOCAB_NAMES)}) in {folder}")
        tok = ClipTokenizer(vocab, config.context_length)
        return cls(folder / "image.onnx", folder / "text.onnx", tok, config, providers,
                   allow_cpu_fallback)

    def preprocess(self, rgb_crops: Sequence[np.ndarray]) -> np.ndarray:
        """Resize (shorter side) + centre-crop + normalise, as CLIP's transform does."""
        s = self.image_size
        mean = np.array(self.config.mean, dtype=np.float32)
        std = np.array(self.config.std, dtype=np.float32)
        batch = np.zeros((len(rgb_crops), 3, s, s), dtype=np.float32)
        for i, crop in enumerate(rgb_crops):
            if crop.size == 0:
                continue
            h, w = crop.shape[:2]
            k = s / min(h, w)
            nh, nw = max(s, int(round(h * k))), max(s, int(round(w * k)))
            resized = cv2.resize(crop, (nw, nh), interpolation=cv2.INTER_CUBIC)
            y0, x0 = (nh - s) // 2, (nw - s) // 2
            patch = resized[y0 : y0 + s, x0 : x0 + s].astype(np.float32) / 255.0
            batch[i] = ((patch - mean) / std).transpose(2, 0, 1)
        return batch

    def encode_images(self, rgb_crops: Sequence[np.ndarray]) -> np.ndarray:
        if not rgb_crops:
            return np.zeros((0, 0), dtype=np.float32)
        name = self.image.get_inputs()[0].name
        outs = []
        for i in range(0, len(rgb_crops), self.config.batch):
            x = self.preprocess(rgb_crops[i : i + self.config.batch])
            outs.append(self.image.run(None, {name: x})[0])
        return _l2(np.concatenate(outs).astype(np.float32))

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        name = self.text.get_inputs()[0].name
        ids = self.tokenizer(list(texts))
        if self.text.get_inputs()[0].type == "tensor(int32)":
            ids = ids.astype(np.int32)
        return _l2(self.text.run(None, {name: ids})[0].astype(np.float32))

    def rank(self, rgb_crops: Sequence[np.ndarray], description: str) -> np.ndarray:
        """Softmax over crops of their similarity to the description (sums to 1)."""
        if not rgb_crops:
            return np.zeros(0, dtype=np.float32)
        img = self.encode_images(rgb_crops)
        txt = self.encode_texts([f"an icon of {description}"])[0]
        logits = self.config.temperature * (img @ txt)
        e = np.exp(logits - logits.max())
        return (e / e.sum()).astype(np.float32)


# Unrelated descriptions each crop is also compared with: a softmax over crops gives a lone
# crop 1.0 whatever it shows, so a crop must also be nearer the description than these.
RIVAL_ICONS = (
    "arrow back", "arrow forward", "menu", "more options", "search", "close", "add", "edit",
    "delete", "share", "settings", "home", "heart", "star", "thumb up", "thumb down", "camera",
    "microphone", "play", "pause", "refresh", "download", "upload", "bookmark", "lock",
    "notifications", "person", "shopping cart", "location pin", "phone", "email", "calendar",
    "clock", "info", "help", "filter", "sort", "check mark", "chevron", "list", "grid", "send",
    "attach", "image", "folder", "wifi", "bluetooth", "volume", "flash", "map", "chat",
)
# A rival prompt this close (cosine of the text embeddings) to the description means the
# same thing ("heart" for "like"): not a rival.
RIVAL_SAME = 0.9


class ClipMatcher:
    """The `IconMatcher` interface over a `ClipModel`."""

    def __init__(self, model: ClipModel, rivals: Sequence[str] = RIVAL_ICONS) -> None:
        self.model = model
        self.rival_icons = tuple(rivals)

    @classmethod
    def from_dir(cls, folder: str | Path, providers: Sequence[str] = (),
                 allow_cpu_fallback: bool = False) -> ClipMatcher:
        return cls(ClipModel.from_dir(folder, providers, allow_cpu_fallback))

    def score(self, bgr: np.ndarray, boxes: Sequence[Box], description: str) -> list[float] | None:
        return self.judge(bgr, boxes, description).scores

    def judge(self, bgr: np.ndarray, boxes: Sequence[Box], description: str) -> IconScores:
        """Softmax over crops, and per crop CLIP's zero-shot split between the description and
        the unrelated ones: the description's probability minus the best rival's (a softmax
        over the prompts, so in the same 0..1 units whatever the model). No CLIP weights were
        measured here: `icons.rival_margin` was chosen for the Material matcher."""
        crops = self._crops(bgr, boxes)
        if not crops:
            return IconScores(scores=[])
        img = self.model.encode_images(crops)
        prompts = [f"an icon of {description}", *(f"an icon of {r}" for r in self.rival_icons
                                                  if r.lower() != description.lower())]
        txt = self.model.encode_texts(prompts)
        sims = img @ txt.T  # (crops, prompts)
        logits = self.model.config.temperature * sims[:, 0]
        e = np.exp(logits - logits.max())
        scores = [float(v) for v in e / e.sum()]
        keep = [k for k in range(1, len(prompts)) if float(txt[0] @ txt[k]) < RIVAL_SAME]
        if not keep:
            return IconScores(scores=scores)
        per_crop = self.model.config.temperature * sims[:, [0, *keep]]
        p = np.exp(per_crop - per_crop.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        best = p[:, 1:].argmax(axis=1)
        margins = [float(p[i, 0] - p[i, 1 + b]) for i, b in enumerate(best)]
        names = [prompts[keep[b]].removeprefix("an icon of ") for b in best]
        return IconScores(scores=scores, margins=margins, rivals=names)

    def _crops(self, bgr: np.ndarray, boxes: Sequence[Box]) -> list[np.ndarray]:
        h, w = bgr.shape[:2]
        crops = []
        for x1, y1, x2, y2 in boxes:
            xa, ya = max(0, int(x1)), max(0, int(y1))
            xb, yb = min(w, int(np.ceil(x2))), min(h, int(np.ceil(y2)))
            crop = bgr[ya:yb, xa:xb]
            crops.append(cv2.cvtColor(crop, cv2.COLOR_BGR2RGB) if crop.size else crop)
        return crops
