"""Locked features for ``[data] source = "locked"``: a frozen backbone's features of both sides of each pair.

The features are computed once per key and cached (:mod:`crl.data.features`): a hit never loads the backbone.
The backbones:

- ``minilm`` (``dataset = "wordnet"`` or ``"bible"``): sentence-transformers' normalised embedding of each text by
  all-MiniLM-L6-v2 (the packaged model, or the folder ``backbone_path``): tokenised at ``max_seq_length`` word
  pieces, mean-pooled, projected onto the unit sphere (:class:`crl.models.MiniLM` in :class:`crl.models.Encoder`,
  which equals ``SentenceTransformer.encode(..., normalize_embeddings=True)``). x = the query (WordNet: the
  definition; Bible: the KJV verse), y = its positive (the lemma list; the WEB verse). Keys: pairs linked by an
  identical query or positive text share one (:func:`crl.data.text.item_ids`), so many definitions that share a
  lemma list are never each other's negatives.
- ``efficientnet_minilm`` (``dataset = "cjk"``, :mod:`crl.data.cjk`): x = EfficientNet-Lite0's 1,280 global-pooled
  ImageNet features (:class:`crl.models.EfficientNetLite0`, the weights of ``crl[cjk]`` or the ``.pth`` file
  ``backbone_path``) of the character's glyph, rendered black on white at 224x224, read as RGB and normalised as
  the TensorFlow weights expect ((p - 127) / 128); y = the MiniLM embedding (as above) of its Unihan gloss. The
  split's pairs are :meth:`crl.data.cjk.GlyphPair.text_pair` views (query = the glyph image's SHA-256, positive =
  the gloss, group = the character), so keys join pairs sharing an image or a gloss, and the text metrics rank the
  distinct glosses for each distinct glyph.
- ``pixels`` and ``cnn`` (``dataset = "fashion_mnist"``): two fixed augmented views of each image (:data:`VIEWS`,
  the views of the fashion-mstar experiment: random resized crop of area 0.6-1, horizontal flip), drawn once from
  the generator of (``views_seed``, block of 64 images), then the view's raw pixels (784 numbers) or the
  representation h of any crl image checkpoint (``backbone_path``: its anchor tower's backbone before the
  projection head, :meth:`crl.models.SmallCNN.representation`). Keys: identical images share one.

The training split gives n = ``n_train`` pairs (0: all but the disjoint pool) and, with ``negatives_from =
"disjoint"``, the next P = ``disjoint_size`` items as the pool; the test split (``crl eval``, ``run.eval_every``)
gives all its pairs. The key of the cache is the backbone's name, the SHA-256 of its weights, the data set, the
split and the options that change a feature, including a SHA-256 of the split's own texts or images.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from crl.data import (
    FASHION_MNIST_ROOT,
    FeatureCache,
    FeatureKey,
    Features,
    ImageAugmentation,
    LockedFeaturePairs,
    cached_features,
    load_fashion_mnist,
)
from crl.data.cjk import cjk_data, glyph_images, split_glyph_pairs
from crl.data.text import WORDNET_ROOT, Split, SplitFractions, TextPair, WordnetPairs, item_ids, load_split
from crl.models import EfficientNetLite0, Encoder, MiniLM, load_efficientnet_lite0, normalise_pixels
from crl.models.efficientnet import packaged_weights
from crl.models.minilm import load_tokenizer, resolve_model_path, tokenize, weights_file
from crl.train.checkpoint import load_train_state, resolve_checkpoint
from crl.train.config import LockedData
from crl.train.model_kinds import build_model
from crl.train.streams import derive_generator

__all__ = [
    "VIEWS",
    "LockedSplit",
    "TrainShape",
    "batch_for",
    "locked_source",
    "locked_split",
    "text_pairs",
    "train_shape",
]

VIEWS = ImageAugmentation(crop_scale=(0.6, 1.0), max_shift=0, flip_p=0.5, erase_p=0.0, noise_std=0.0)
"""The two fixed views of each image: random resized crop (area 0.6-1), horizontal flip (p = 0.5)."""


def batch_for(n: int, cap: int) -> int:
    """b(n) of the recipe map (:func:`train_shape`): the largest power of two <= min(cap, n / 8)."""
    return 1 << int(math.log2(max(1, min(cap, n // 8))))


@dataclass(frozen=True)
class TrainShape:
    """How a cell with n pairs trains under the recipe map (:func:`train_shape`).

    Attributes:
        batch: b, anchors per step.
        steps: optimiser steps, E floor(n / b).
        epochs: E, passes over the n pairs (each a fresh permutation, its last incomplete batch dropped).
    """

    batch: int
    steps: int
    epochs: int

    @property
    def pairs(self) -> int:
        """Training pairs processed, b x steps = E b floor(n / b) (within one batch per epoch of E n)."""
        return self.batch * self.steps


def train_shape(n: int, epochs: int, cap: int) -> TrainShape:
    """The recipe map: a cell with n pairs (any m) trains E = ``epochs`` epochs at b(n) = the largest power of two
    <= min(cap, n / 8) (at least 8 steps per epoch), E floor(n / b(n)) steps.

    Doubling n is the same E epochs over twice the pairs (twice the pairs processed): from n >= 8 cap the batch stays
    at the cap and the steps double; from n < 8 cap the batch doubles (to at most the cap) and the steps per epoch
    stay within rounding (8 to 15). Doubling m changes nothing here: twice the negatives, the same (b, steps, E).
    Used by the m*(n) experiment's in-sample and disjoint arms (every committed cell of results/mstar_real follows
    it, E = 10, cap 256) and by ``crl advise`` for the pilot and check cells.

    Raises:
        ValueError: if n, epochs or cap is below 1.

    Examples:
        >>> train_shape(16000, 10, 256), train_shape(500, 10, 256).steps
        (TrainShape(batch=256, steps=620, epochs=10), 150)
    """
    for name, value in (("n", n), ("epochs", epochs), ("cap", cap)):
        if value < 1:
            raise ValueError(f"{name} = {value} must be >= 1")
    batch = batch_for(n, cap)
    return TrainShape(batch, epochs * max(1, n // batch), epochs)


_IMAGE_SHAPES = ((28, 28), (1, 28, 28))
_BLOCK_STREAM = "locked-views"


@dataclass(frozen=True)
class LockedSplit:
    """The locked features of one split: ``count`` items (n training pairs, then the pool), their keys, labels.

    Attributes:
        features: x (count, D_x) and y (count, D_y).
        keys: (count,) int64 item keys.
        labels: (count,) class labels (images), or ``None`` (texts).
        n_pairs: n, the training pairs among the items (all of them for the test split).
        computed: items whose features were computed now (0 on a cache hit).
    """

    features: Features
    keys: Tensor
    labels: Tensor | None
    n_pairs: int
    computed: int


@dataclass(frozen=True)
class _Items:
    """A split before features: its size, the data's hash, the options of the key, keys and labels of a prefix."""

    total: int
    data_sha256: str
    options: dict[str, str]
    keys: Callable[[int], Tensor]
    labels: Callable[[int], Tensor | None]


@dataclass(frozen=True)
class _Backbone:
    """A frozen backbone: its name and weights' SHA-256 (the key), and ``compute(start, stop)`` (loads on first use)."""

    name: str
    weights_sha256: str
    compute: Callable[[int, int], Features]


def _sha256_of_file(path: Path) -> str:
    """SHA-256 of a file's bytes, remembered per (path, size, mtime) within the process."""
    stat = path.stat()
    return _file_digest(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def text_pairs(config: LockedData, split: str) -> list[TextPair]:
    """The pairs of a split of a locked text data set, in the order of its features (item i is pair i); parsed
    once per process for each data set, split and split rule (a grid's cells at many n read the same split)."""
    fractions = SplitFractions(config.val_fraction, config.test_fraction, config.split_seed)
    split_name: Split = "test" if split == "test" else "train"
    if config.dataset == "cjk":
        return list(_glyph_split(split_name, fractions, config.root))
    return list(_split_pairs(config.dataset, split_name, fractions, config.root, config.wordnet_pairs))


@functools.lru_cache(maxsize=4)
def _glyph_split(split: Split, fractions: SplitFractions, root: str) -> tuple[TextPair, ...]:
    """The text views of one split of the CJK glyph pairs (:mod:`crl.data.cjk`), kept for the process."""
    return tuple(pair.text_pair() for pair in split_glyph_pairs(cjk_data(root).pairs, fractions)[split])


@functools.lru_cache(maxsize=4)
def _split_pairs(
    dataset: str, split: Split, fractions: SplitFractions, root: str, wordnet_kind: WordnetPairs
) -> tuple[TextPair, ...]:
    """:func:`crl.data.text.load_split` of one split, kept for the process."""
    found = load_split(
        dataset,
        split,
        fractions,
        wordnet_root=root or WORDNET_ROOT,
        wordnet_kind=wordnet_kind,
        cache_dir=root,
        gcide_root=root,
    )
    return tuple(found)


def _text_items(config: LockedData, pairs: list[TextPair]) -> _Items:
    digest = hashlib.sha256()
    for pair in pairs:
        digest.update(f"{pair.query}\t{pair.positive}\n".encode())
    options = {
        "max_seq_length": str(config.max_seq_length),
        "split_fractions": f"{config.val_fraction},{config.test_fraction}",
        "split_seed": str(config.split_seed),
        "wordnet_pairs": config.wordnet_pairs if config.dataset == "wordnet" else "",
    }
    return _Items(
        len(pairs), digest.hexdigest(), options, lambda count: item_ids(pairs[:count]), lambda count: None
    )


@dataclass(frozen=True)
class _TextEmbedder:
    """A MiniLM text backbone: its name and weights' SHA-256, and ``embed(texts)`` (loads on first use)."""

    name: str
    weights_sha256: str
    embed: Callable[[list[str]], Tensor]


def _minilm_embedder(model_path: str, max_seq_length: int) -> _TextEmbedder:
    """sentence-transformers' normalised MiniLM embedding of texts (the packaged all-MiniLM-L6-v2 for '')."""
    folder = resolve_model_path(model_path)
    name = "all-MiniLM-L6-v2" if model_path in ("", "minilm") else folder.name

    @functools.cache
    def loaded() -> tuple[nn.Module, object]:
        return Encoder(MiniLM(folder)).eval(), load_tokenizer(folder)

    @torch.no_grad()
    def embed(texts: list[str]) -> Tensor:
        encoder, tokenizer = loaded()
        return encoder(tokenize(tokenizer, texts, max_seq_length)).float()

    return _TextEmbedder(name, _sha256_of_file(weights_file(folder)), embed)


def _minilm(config: LockedData, pairs: list[TextPair]) -> _Backbone:
    """sentence-transformers' normalised MiniLM embedding of each query (x) and positive (y)."""
    text = _minilm_embedder(config.backbone_path, config.max_seq_length)

    def compute(start: int, stop: int) -> Features:
        chunk = pairs[start:stop]
        return Features(text.embed([p.query for p in chunk]), text.embed([p.positive for p in chunk]))

    return _Backbone(text.name, text.weights_sha256, compute)


def _efficientnet_minilm(config: LockedData, pairs: list[TextPair]) -> _Backbone:
    """EfficientNet-Lite0's features of each pair's glyph (x; the character is the pair's group) and the MiniLM
    embedding of its gloss (y)."""
    weights = Path(config.backbone_path) if config.backbone_path else packaged_weights()
    text = _minilm_embedder("", config.max_seq_length)
    image_sha256 = _sha256_of_file(weights)

    @functools.cache
    def loaded() -> EfficientNetLite0:
        return load_efficientnet_lite0(weights)

    @torch.no_grad()
    def compute(start: int, stop: int) -> Features:
        chunk = pairs[start:stop]
        pixels = glyph_images([p.group for p in chunk], config.root)
        glyphs = loaded().features(normalise_pixels(pixels)).float()
        return Features(glyphs, text.embed([p.positive for p in chunk]))

    combined = hashlib.sha256(f"{image_sha256}+{text.weights_sha256}".encode()).hexdigest()
    return _Backbone(f"efficientnet-lite0+{text.name}", combined, compute)


def _image_keys(images: Tensor, count: int) -> Tensor:
    """Identical images share a key: the index of their distinct pixel pattern."""
    _, inverse = torch.unique(images[:count].reshape(count, -1), dim=0, return_inverse=True)
    return inverse.to(torch.int64)


def _image_items(config: LockedData, images: Tensor, labels: Tensor) -> _Items:
    data = images.contiguous()
    digest = hashlib.sha256(data.view(-1).view(torch.uint8).numpy().data).hexdigest()
    options = {"views_seed": str(config.views_seed), "views": repr(VIEWS), "block": "64"}
    return _Items(
        data.shape[0], digest, options, lambda count: _image_keys(data, count), lambda count: labels[:count]
    )


def _views(config: LockedData, images: Tensor, start: int, stop: int) -> tuple[Tensor, Tensor]:
    """The two fixed views of images start..stop-1 (one aligned block: its own generator)."""
    generator = derive_generator(config.views_seed, f"{_BLOCK_STREAM}/{start}")
    block = images[start:stop]
    return VIEWS(block, generator), VIEWS(block, generator)


def _pixels(config: LockedData, images: Tensor) -> _Backbone:
    def compute(start: int, stop: int) -> Features:
        first, second = _views(config, images, start, stop)
        return Features(first.reshape(first.shape[0], -1), second.reshape(second.shape[0], -1))

    return _Backbone("pixels", hashlib.sha256(b"identity of the view's pixels").hexdigest(), compute)


def _tower_digest(tower: nn.Module, architecture: str) -> str:
    digest = hashlib.sha256(architecture.encode("utf-8"))
    for name, tensor in sorted(tower.state_dict().items()):
        values = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{values.dtype}:{tuple(values.shape)}".encode())
        digest.update(values.reshape(-1).view(torch.uint8).numpy().data)
    return digest.hexdigest()


def _cnn(config: LockedData, images: Tensor) -> _Backbone:
    """The representation h of the anchor tower of a crl image checkpoint."""
    path = resolve_checkpoint(config.backbone_path)
    state = load_train_state(path)
    if tuple(state.anchor_shape) not in _IMAGE_SHAPES:
        raise ValueError(
            f"[data] backbone_path = {config.backbone_path!r}: the checkpoint was trained on inputs of shape "
            f"{tuple(state.anchor_shape)}, not 28x28 images; pass a checkpoint of a Fashion-MNIST run"
        )
    model = build_model(
        state.config.model,
        state.config.loss,
        tuple(state.anchor_shape),
        tuple(state.positive_shape),
        derive_generator(0, "locked-backbone"),
    )
    model.load_state_dict(state.model)
    tower = model.anchor_encoder.backbone
    assert isinstance(tower, nn.Module)
    tower.eval()
    represent = getattr(tower, "representation", tower)

    @torch.no_grad()
    def compute(start: int, stop: int) -> Features:
        first, second = _views(config, images, start, stop)
        shape = state.anchor_shape
        return Features(
            represent(first.reshape(-1, *shape)).float(), represent(second.reshape(-1, *shape)).float()
        )

    architecture = state.config.model.model_dump_json()
    return _Backbone(f"cnn-{state.config.model.encoder}", _tower_digest(tower, architecture), compute)


def _split_source(config: LockedData, split: str) -> tuple[_Items, Callable[[], _Backbone]]:
    """The items of the split and how to get its backbone."""
    if config.dataset == "fashion_mnist":
        images = load_fashion_mnist(
            "test" if split == "test" else "train", root=config.root or FASHION_MNIST_ROOT
        )
        items = _image_items(config, images.images, images.labels)
        maker = _pixels if config.backbone == "pixels" else _cnn
        return items, functools.partial(maker, config, images.images)
    pairs = text_pairs(config, split)
    texts = _efficientnet_minilm if config.backbone == "efficientnet_minilm" else _minilm
    return _text_items(config, pairs), functools.partial(texts, config, pairs)


def _counts(config: LockedData, split: str, total: int) -> tuple[int, int]:
    """(n, n + P) of the split: the test split is all pairs; the training split n = n_train (0: all but P)."""
    if split == "test":
        return total, total
    pool = config.disjoint_size
    n = config.n_train or total - pool
    if n < 1 or n + pool > total:
        raise ValueError(
            f"[data] n_train = {config.n_train} and disjoint_size = {pool} need {max(n, 1) + pool} items, but the "
            f"{config.dataset} training split has {total}; lower n_train or disjoint_size"
        )
    return n, n + pool


def locked_split(config: LockedData, split: str = "train") -> LockedSplit:
    """The locked features of a split, from the cache or computed (and cached) now.

    Raises:
        ValueError: if the split is too small for n_train + disjoint_size, the data is missing (naming the
            Debian package), or a cnn checkpoint is not one of 28x28 images.
    """
    items, backbone_of = _split_source(config, split)
    n, count = _counts(config, split, items.total)
    backbone = backbone_of()
    key = FeatureKey(
        backbone.name,
        backbone.weights_sha256,
        config.dataset,
        split,
        {**items.options, "data_sha256": items.data_sha256},
    )
    cache = FeatureCache(os.path.expanduser(config.cache_dir) if config.cache_dir else "")
    features, computed = cached_features(cache, key, count, items.total, backbone.compute)
    return LockedSplit(features, items.keys(count), items.labels(count), n, computed)


def locked_source(config: LockedData, split: str = "train") -> LockedFeaturePairs:
    """The pair source of the split (training: n pairs and the disjoint pool; test: every pair)."""
    found = locked_split(config, split)
    labels = None if found.labels is None else found.labels[: found.n_pairs]
    return LockedFeaturePairs(
        found.features.x, found.features.y, found.keys, n_pairs=found.n_pairs, labels=labels
    )
