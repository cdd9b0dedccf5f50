"""From ``[data]`` to pair sources: the training pairs, the held-out pairs and the labelled inputs for kNN/probes.

- Fashion-MNIST / digits with ``pairs = "augment"``: :class:`crl.data.TwoViewPairs` (fresh views every call);
  held-out pairs are one fixed draw of two views per test image (generator seeded by ``eval.seed``).
- ``pairs = "halves"``: :func:`crl.data.halves_pairs` (left half -> right half).
- ``source = "synthetic"``: :class:`crl.data.SyntheticPairs` from a :mod:`crl.synthetic` truth; negatives are
  then drawn from p- itself.
- ``source = "arrays"``: your own pairs (:mod:`crl.train.data_arrays`), held out by a file or a seeded split.

Class-level evaluation embeds the *anchor view* of each labelled image with f: the clean image for two views,
its left half for halves, x for arrays with labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from crl.data import (
    ImageAugmentation,
    ImageSet,
    PairedArrays,
    PairSource,
    SyntheticPairs,
    TwoViewPairs,
    halves_pairs,
    load_digits,
    load_fashion_mnist,
    split_halves,
)
from crl.train.build import derive_generator
from crl.train.config import (
    ArraysData,
    DataConfig,
    DigitsData,
    FashionMnistData,
    SyntheticData,
    TrainConfig,
)
from crl.train.config_kinds import ImageData, TextData
from crl.train.data_arrays import read_split

__all__ = ["LabelledInputs", "build_source", "heldout_pairs", "labelled_inputs", "text_source"]

Split = Literal["train", "test"]


@dataclass(frozen=True)
class LabelledInputs:
    """Anchor-side inputs with class labels, for kNN and linear-probe accuracy."""

    inputs: Tensor
    labels: Tensor
    n_classes: int


def _load_images(config: FashionMnistData | DigitsData, split: Split) -> ImageSet:
    if isinstance(config, FashionMnistData):
        return load_fashion_mnist(split, root=config.root)
    return load_digits(split)


def _images(config: FashionMnistData | DigitsData, split: Split) -> ImageSet:
    images = _load_images(config, split)
    if split == "train" and config.n_train > 0:
        if config.n_train > len(images):
            raise ValueError(
                f"data.n_train = {config.n_train} exceeds the {len(images)} training images of "
                f"{config.source!r}; use at most {len(images)} (or 0 for all)"
            )
        images = images.subset(slice(0, config.n_train))
    return images


def _augmentation(config: ImageData) -> ImageAugmentation:
    return ImageAugmentation(
        crop_scale=(config.crop_scale_min, 1.0),
        max_shift=config.max_shift,
        flip_p=config.flip_p,
        erase_p=config.erase_p,
        noise_std=config.noise_std,
    )


def _truth(config: SyntheticData) -> object:
    if config.truth == "vmf":
        from crl.synthetic.vmf import VMFUniform

        return VMFUniform(config.dim, config.kappa)
    from crl.synthetic.gaussian import GaussianTwoTower

    return GaussianTwoTower(config.dim, config.rho)


def _synthetic_pairs(config: SyntheticData, count: int, generator: torch.Generator) -> SyntheticPairs:
    """``count`` float32 pairs drawn once from the truth of ``config``."""
    return SyntheticPairs(_truth(config), count, generator, dtype=torch.float32)  # type: ignore[arg-type]


def text_source(config: TextData, split: Split = "train") -> PairSource:
    """The tokenised pairs of one split of a text source (``split="test"``: the held-out test split)."""
    from crl.data.text import SplitFractions, TextPairSource, load_split
    from crl.models.minilm import load_tokenizer

    fractions = SplitFractions(config.val_fraction, config.test_fraction, config.split_seed)
    pairs = load_split(
        config.source,
        split,
        fractions,
        wordnet_root=getattr(config, "root", ""),
        wordnet_kind=getattr(config, "pairs", "gloss_lemmas"),
        cache_dir=getattr(config, "cache_dir", ""),
        path=getattr(config, "path", ""),
    )
    if split == "train" and config.n_train > 0:
        pairs = pairs[: config.n_train]
    return TextPairSource(pairs, load_tokenizer(config.tokenizer), config.max_seq_length)


def build_source(config: DataConfig, *, seed: int, split: Split = "train") -> PairSource:
    """The training pair source of ``[data]`` (``split="test"`` gives the held-out images' source).

    Synthetic training pairs are drawn once from the "data" stream of ``seed``.
    """
    if isinstance(config, TextData):
        return text_source(config, split)
    if isinstance(config, ArraysData):
        return read_split(config, split)
    if isinstance(config, SyntheticData):
        count = config.n_train if split == "train" else config.n_heldout
        stream = "data" if split == "train" else "heldout"
        return _synthetic_pairs(config, count, derive_generator(seed, stream))
    images = _images(config, split)
    if config.pairs == "halves":
        return halves_pairs(images)
    return TwoViewPairs(images, _augmentation(config))


def heldout_pairs(config: TrainConfig) -> PairedArrays:
    """The fixed held-out pairs: two views of each test image drawn with the ``eval.seed`` generator, the
    halves of each test image, n_heldout fresh synthetic pairs, or the held-out part of your arrays."""
    if isinstance(config.data, TextData):
        raise ValueError(
            f"[data] source = {config.data.source!r}: text runs are evaluated by retrieval with qrels "
            "(crl.data.text.evaluation, benchmarks/text_retrieval.py), not by crl eval or run.eval_every (set it to 0)"
        )
    if isinstance(config.data, ArraysData):
        return read_split(config.data, "test")
    if isinstance(config.data, SyntheticData):
        heldout = derive_generator(config.eval.seed, "heldout")
        return _synthetic_pairs(config.data, config.data.n_heldout, heldout)
    images = _images(config.data, "test")
    if config.data.pairs == "halves":
        return halves_pairs(images)
    views = TwoViewPairs(images, _augmentation(config.data))
    return views.materialise(derive_generator(config.eval.seed, "heldout-views"))


def labelled_inputs(config: DataConfig, split: Split) -> LabelledInputs | None:
    """Anchor-view inputs and labels of a split (``None`` for synthetic data, and arrays without labels)."""
    if isinstance(config, SyntheticData | TextData):
        return None
    if isinstance(config, ArraysData):
        return _labelled_arrays(config, split)
    images = _images(config, split)
    pixels = images.images if config.pairs == "augment" else split_halves(images.images)[0]
    inputs = pixels.squeeze(1) if pixels.shape[1] == 1 else pixels
    return LabelledInputs(inputs, images.labels, len(images.class_names))


def _labels_of(pairs: PairedArrays, config: ArraysData) -> Tensor:
    """The labels of pairs read with ``labels_key`` set, checked to be class indices >= 0."""
    if pairs.labels is None or int(pairs.labels.min()) < 0:
        raise ValueError(f"[data] labels_key = {config.labels_key!r}: labels must be class indices >= 0")
    return pairs.labels


def _labelled_arrays(config: ArraysData, split: Split) -> LabelledInputs | None:
    """x and labels of a split of your arrays (``None`` without ``labels_key``); the classes 0..C-1 are those
    of both splits, so train and test agree on C.

    Raises:
        ValueError: if a label is negative.
    """
    if not config.labels_key:
        return None
    train, test = read_split(config, "train"), read_split(config, "test")
    train_labels, test_labels = _labels_of(train, config), _labels_of(test, config)
    n_classes = int(max(train_labels.max(), test_labels.max())) + 1
    if split == "train":
        return LabelledInputs(train.x, train_labels, n_classes)
    return LabelledInputs(test.x, test_labels, n_classes)
