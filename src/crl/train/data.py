"""From ``[data]`` to pair sources: the training pairs, the held-out pairs and the labelled inputs for kNN/probes.

- Fashion-MNIST / digits with ``pairs = "augment"``: :class:`crl.data.TwoViewPairs` (fresh views every call);
  held-out pairs are one fixed draw of two views per test image (generator seeded by ``eval.seed``).
- ``pairs = "halves"``: :func:`crl.data.halves_pairs` (left half -> right half).
- ``source = "synthetic"``: :class:`crl.data.SyntheticPairs` from a :mod:`crl.synthetic` truth; negatives are
  then drawn from p- itself.
- ``source = "arrays"``: your own pairs (:mod:`crl.train.data_arrays`), held out by a file or a seeded split.
- ``source = "locked"``: a frozen backbone's cached features of both sides of each pair (:mod:`crl.train.locked`);
  held-out pairs are the test split's features, labelled inputs (images) the first view's features.

Class-level evaluation embeds the *anchor view* of each labelled image with f: the clean image for two views,
its left half for halves, x for arrays with labels.

Validation images (``[data] validation``, :func:`image_split`): a seeded set of training images (``"auto"``:
min(5000, 10% of them)) is left out of the training pairs; on it a run chooses the vectors it is used with,
backbone h or embedding z (:mod:`crl.train.vectors`), each validation image querying the training images T by
class. :func:`labelled_inputs` ``"train"`` is T, the training pairs' images.

Each kind of ``[data]`` config has one entry in :data:`DATA_KINDS` (a :class:`DataKind`: its training source,
held-out pairs, labelled inputs, ground truth and why it has no labels); a new data source is one entry there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

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
from crl.data.text import RetrievalTask, SplitFractions, TextPair, TextPairSource, load_split
from crl.data.text import Split as TextSplit
from crl.models.minilm import load_tokenizer, tokenize
from crl.synthetic import GaussianTwoTower, GroundTruth, VMFUniform
from crl.train.config import (
    ArraysData,
    BibleData,
    DataConfig,
    DigitsData,
    FashionMnistData,
    GcideData,
    ImageData,
    LockedData,
    SyntheticData,
    TextData,
    TextPairsData,
    TrainConfig,
    WordnetData,
)
from crl.train.data_arrays import read_split
from crl.train.locked import locked_source, locked_split
from crl.train.streams import derive_generator

__all__ = [
    "DATA_KINDS",
    "VALIDATION_CAP",
    "DataKind",
    "HeldOutSplit",
    "ImageSplit",
    "LabelledInputs",
    "ValidationSet",
    "auto_validation_size",
    "build_source",
    "data_kind",
    "heldout_pairs",
    "image_split",
    "labelled_inputs",
    "synthetic_truth",
    "text_pairs",
    "text_source",
    "text_task",
    "text_tokenize",
    "validation_set",
]

Split = Literal["train", "test"]


@dataclass(frozen=True)
class LabelledInputs:
    """Anchor-side inputs with class labels, for kNN and linear-probe accuracy."""

    inputs: Tensor
    labels: Tensor
    n_classes: int


@dataclass(frozen=True)
class ValidationSet:
    """Labelled inputs on which a run chooses its vectors: ``queries`` search ``gallery`` by class.

    Attributes:
        queries: the validation images (anchor views) with their classes.
        gallery: the training images they search.
        held_out: whether the queries were left out of the training pairs (``[data] validation`` > 0).
        seed: the seed that drew the queries (``[data] validation_seed``).
    """

    queries: LabelledInputs
    gallery: LabelledInputs
    held_out: bool
    seed: int


VALIDATION_CAP = 5000
"""The most validation images ``[data] validation = "auto"`` holds out."""

VALIDATION_SHARE = 10
"""``"auto"`` holds out at most one in this many training images (small sets such as the digits)."""


def auto_validation_size(n_images: int) -> int:
    """The validation images of ``validation = "auto"``: min(5000, floor(N / 10)) of N training images
    (Fashion-MNIST: 5,000 of 60,000; the digits: 143 of 1,438)."""
    return min(VALIDATION_CAP, n_images // VALIDATION_SHARE)


@dataclass(frozen=True)
class ImageSplit:
    """Which images of a data set's training split a run trains on, and which choose its vectors (indices into
    the training split, ascending).

    Attributes:
        train: T, the images of the training pairs (the gallery of ``crl eval`` and ``crl index build``).
        queries: the images that query ``gallery`` when the vectors are chosen: the validation images V, left
            out of T; with ``validation = 0``, :func:`auto_validation_size` (|T|) images of T.
        gallery: the images they search: T when V is held out, else T without the queries.
        held_out: whether the queries were left out of the training pairs.
        seed: ``[data] validation_seed``, the seed of the permutation that draws the queries.
    """

    train: Tensor
    queries: Tensor
    gallery: Tensor
    held_out: bool
    seed: int


def _drawn(count: int, size: int, seed: int) -> tuple[Tensor, Tensor]:
    """(``size`` positions of 0..count-1 drawn by the "validation-split" permutation of ``seed``, the others),
    each ascending."""
    order = torch.randperm(count, generator=derive_generator(seed, "validation-split"))
    return order[:size].sort().values, order[size:].sort().values


def image_split(
    n_images: int, *, validation: int | Literal["auto"], seed: int, n_train: int = 0, first: int = 0
) -> ImageSplit:
    """The split of the training split's images ``first``..N-1 by ``[data] validation`` (V),
    ``validation_seed``, ``n_train`` and ``first_image`` (indices stay those of the whole split).

    With N' = N - ``first`` images: V > 0 (``"auto"``: :func:`auto_validation_size` (N')): a permutation of
    0..N'-1 drawn from ``seed``'s "validation-split" stream puts its first V images in the validation set; T is
    the rest in order, its first ``n_train`` when that is > 0. V = 0: T is the first ``n_train`` (or all) images,
    and the vectors are chosen on :func:`auto_validation_size` (|T|) images of T drawn the same way, searching
    the rest of T.

    Raises:
        ValueError: if ``first`` leaves no image, V leaves no training image, or ``n_train`` exceeds the images
            left (naming the fields).
    """
    if first >= n_images:
        raise ValueError(
            f"[data] first_image = {first} leaves none of the {n_images} training images; use at most "
            f"{n_images - 1}"
        )
    local = _local_split(n_images - first, validation=validation, seed=seed, n_train=n_train)
    return ImageSplit(
        local.train + first, local.queries + first, local.gallery + first, held_out=local.held_out, seed=seed
    )


def _local_split(n_images: int, *, validation: int | Literal["auto"], seed: int, n_train: int) -> ImageSplit:
    """:func:`image_split` of images 0..N-1."""
    size = auto_validation_size(n_images) if validation == "auto" else validation
    if size >= n_images:
        raise ValueError(
            f"[data] validation = {validation!r} leaves none of the {n_images} training images to train on; use "
            f"at most {n_images - 1}, 'auto' ({auto_validation_size(n_images)} here) or 0"
        )
    every = torch.arange(n_images)
    held, rest = _drawn(n_images, size, seed) if size > 0 else (every[:0], every)
    if n_train > rest.numel():
        after = f" left after the {size} validation images" if size else ""
        raise ValueError(
            f"[data] n_train = {n_train} exceeds the {rest.numel()} training images{after}; use at most "
            f"{rest.numel()} (or 0 for all)" + (", or lower validation" if size else "")
        )
    train = rest[:n_train] if n_train > 0 else rest
    if size > 0:
        return ImageSplit(train, held, train, held_out=True, seed=seed)
    chosen, others = _drawn(train.numel(), auto_validation_size(train.numel()), seed)
    return ImageSplit(train, train[chosen], train[others], held_out=False, seed=seed)


def _load_images(config: FashionMnistData | DigitsData, split: Split) -> ImageSet:
    if isinstance(config, FashionMnistData):
        return load_fashion_mnist(split, root=config.root)
    return load_digits(split)


def _split_of(config: FashionMnistData | DigitsData, pool: ImageSet) -> ImageSplit:
    return image_split(
        len(pool),
        validation=config.validation,
        seed=config.validation_seed,
        n_train=config.n_train,
        first=config.first_image,
    )


def _images(config: FashionMnistData | DigitsData, split: Split) -> ImageSet:
    """The test split, or the training images T of the training pairs (:func:`image_split`)."""
    images = _load_images(config, split)
    return images.subset(_split_of(config, images).train) if split == "train" else images


def _augmentation(config: ImageData) -> ImageAugmentation:
    return ImageAugmentation(
        crop_scale=(config.crop_scale_min, 1.0),
        max_shift=config.max_shift,
        flip_p=config.flip_p,
        erase_p=config.erase_p,
        noise_std=config.noise_std,
    )


def synthetic_truth(config: SyntheticData) -> GroundTruth:
    """The ground truth of ``[data] truth``: vMF kernel with uniform anchors, or the Gaussian two-tower model."""
    if config.truth == "vmf":
        return VMFUniform(config.dim, config.kappa)
    return GaussianTwoTower(config.dim, config.rho)


def _synthetic_pairs(config: SyntheticData, count: int, generator: torch.Generator) -> SyntheticPairs:
    """``count`` float32 pairs drawn once from the truth of ``config``."""
    return SyntheticPairs(synthetic_truth(config), count, generator, dtype=torch.float32)


def text_pairs(config: TextData, split: TextSplit) -> list[TextPair]:
    """The pairs of one split (train, val or test) of a text source: the split is fixed by ``split_seed`` and
    the fractions (:func:`crl.data.text.split_pairs`), so the three splits are disjoint; ``n_train`` > 0 keeps the
    first n_train training pairs."""
    fractions = SplitFractions(config.val_fraction, config.test_fraction, config.split_seed)
    pairs = load_split(
        config.source,
        split,
        fractions,
        wordnet_root=getattr(config, "root", ""),
        wordnet_kind=getattr(config, "pairs", "gloss_lemmas"),
        cache_dir=getattr(config, "cache_dir", ""),
        path=getattr(config, "path", ""),
        gcide_root=getattr(config, "root", ""),
    )
    return pairs[: config.n_train] if split == "train" and config.n_train > 0 else pairs


def text_tokenize(config: TextData) -> Callable[[Sequence[str]], dict[str, Tensor]]:
    """texts -> their mapping batch, tokenised as training tokenises them (``[data] tokenizer``, truncated at
    ``max_seq_length`` word pieces)."""
    return partial(tokenize, load_tokenizer(config.tokenizer), max_seq_length=config.max_seq_length)


def text_source(config: TextData, split: TextSplit = "train") -> PairSource:
    """The tokenised pairs of one split of a text source (``split="test"``: the held-out test split)."""
    pairs = text_pairs(config, split)
    return TextPairSource(pairs, partial(tokenize, load_tokenizer(config.tokenizer)), config.max_seq_length)


HeldOutSplit = Literal["val", "test"]
"""The splits of a text source that are never trained on."""

_EMPTY_SPLIT_FIX: dict[HeldOutSplit, str] = {
    "val": "raise val_fraction (e.g. 0.05), or set run.eval_every = 0 (it scores the validation split)",
    "test": "raise test_fraction (e.g. 0.05), or evaluate files of your own (crl eval --queries --corpus --qrels)",
}


def text_task(config: TextData, split: HeldOutSplit) -> RetrievalTask:
    """The validation or test split of a text source as a retrieval task: its unique queries, its unique
    documents, and for each query every document one of its pairs names
    (:meth:`crl.data.text.RetrievalTask.from_pairs`).

    Raises:
        ValueError: if the split holds no pair, naming the fraction that sets its size and the fix.
    """
    pairs = text_pairs(config, split)
    if not pairs:
        fraction = f"{split}_fraction"
        raise ValueError(
            f"[data] {fraction} = {getattr(config, fraction)} leaves the {split} split of source = "
            f"{config.source!r} empty; {_EMPTY_SPLIT_FIX[split]}"
        )
    return RetrievalTask.from_pairs(pairs)


def _image_source(config: FashionMnistData | DigitsData, seed: int, split: Split) -> PairSource:
    """Two fresh augmented views of each image per call, or its left and right halves."""
    images = _images(config, split)
    if config.pairs == "halves":
        return halves_pairs(images)
    return TwoViewPairs(images, _augmentation(config))


def _image_heldout(config: FashionMnistData | DigitsData, eval_seed: int) -> PairedArrays:
    """The halves of each test image, or one fixed draw of two views of it (``eval.seed``'s generator)."""
    images = _images(config, "test")
    if config.pairs == "halves":
        return halves_pairs(images)
    views = TwoViewPairs(images, _augmentation(config))
    return views.materialise(derive_generator(eval_seed, "heldout-views"))


def _anchor_view(config: FashionMnistData | DigitsData, images: ImageSet) -> LabelledInputs:
    """The clean image (two views) or its left half (halves) with the image's class."""
    pixels = images.images if config.pairs == "augment" else split_halves(images.images)[0]
    inputs = pixels.squeeze(1) if pixels.shape[1] == 1 else pixels
    return LabelledInputs(inputs, images.labels, len(images.class_names))


def _image_labels(config: FashionMnistData | DigitsData, split: Split) -> LabelledInputs:
    """The anchor view of the test images, or of the training images T, with their classes."""
    return _anchor_view(config, _images(config, split))


def _image_validation(config: FashionMnistData | DigitsData) -> ValidationSet | None:
    """The anchor views of the split's queries and gallery (:func:`image_split`); ``None`` without queries."""
    pool = _load_images(config, "train")
    split = _split_of(config, pool)
    if split.queries.numel() == 0 or split.gallery.numel() == 0:
        return None
    return ValidationSet(
        _anchor_view(config, pool.subset(split.queries)),
        _anchor_view(config, pool.subset(split.gallery)),
        held_out=split.held_out,
        seed=split.seed,
    )


def _synthetic_source(config: SyntheticData, seed: int, split: Split) -> PairSource:
    """n_train pairs from the "data" stream of ``seed`` (n_heldout from its "heldout" stream for the test split)."""
    count = config.n_train if split == "train" else config.n_heldout
    stream = "data" if split == "train" else "heldout"
    return _synthetic_pairs(config, count, derive_generator(seed, stream))


def _synthetic_heldout(config: SyntheticData, eval_seed: int) -> PairedArrays:
    """n_heldout fresh pairs from the "heldout" stream of ``eval.seed``."""
    return _synthetic_pairs(config, config.n_heldout, derive_generator(eval_seed, "heldout"))


def _text_source(config: TextData, seed: int, split: Split) -> PairSource:
    """The tokenised pairs of the split (:func:`text_source`; the split is fixed by ``split_seed``, not ``seed``)."""
    return text_source(config, split)


def _text_heldout(config: TextData, eval_seed: int) -> PairedArrays:
    """Refused with a ``ValueError``: a text run is evaluated by retrieval with qrels (:func:`text_task`), not on
    held-out pairs."""
    raise ValueError(
        f"[data] source = {config.source!r}: a text run is evaluated by retrieval with qrels on its splits "
        "(crl.train.data.text_task: crl eval ranks the test split, run.eval_every the validation split), not on "
        "held-out pairs"
    )


def _no_labels(config: Any, split: Split) -> None:
    """No class labels (synthetic and text sources)."""
    return None


def _no_validation(config: Any) -> None:
    """No validation images to choose the vectors on (every source but images)."""
    return None


def _arrays_source(config: ArraysData, seed: int, split: Split) -> PairSource:
    """The training or held-out part of your arrays (:func:`crl.train.data_arrays.read_split`)."""
    return read_split(config, split)


def _arrays_heldout(config: ArraysData, eval_seed: int) -> PairedArrays:
    """The held-out part of your arrays: ``heldout_path``, or the ``split_seed`` split (``eval.seed`` unused)."""
    return read_split(config, "test")


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


def _source_has_no_labels(config: DataConfig) -> str:
    """Why a source without class labels gives none."""
    return f"[data] source = {config.source!r} has no class labels"


def _arrays_have_no_labels(config: ArraysData) -> str:
    """Why your arrays gave no labels, and the field that adds them."""
    return (
        "the run's arrays have no labels ([data] labels_key = ''); set labels_key to an (n,) integer array to "
        "get them"
    )


def _locked_source(config: LockedData, seed: int, split: Split) -> PairSource:
    """The locked features of the split (:func:`crl.train.locked.locked_source`; ``seed`` unused: they are fixed)."""
    return locked_source(config, split)


def _locked_heldout(config: LockedData, eval_seed: int) -> PairedArrays:
    """Every pair of the test split, as its locked features (``eval.seed`` unused: the views are locked)."""
    test = locked_source(config, "test")
    return PairedArrays(test.x, test.y, test.labels)


def _locked_labels(config: LockedData, split: Split) -> LabelledInputs | None:
    """The first view's features of the split's images with their classes (``None`` for texts)."""
    if config.dataset != "fashion_mnist":
        return None
    found = locked_split(config, split)
    assert found.labels is not None
    return LabelledInputs(found.features.x[: found.n_pairs], found.labels[: found.n_pairs], 10)


@dataclass(frozen=True)
class DataKind:
    """What crl does with one kind of ``[data]`` source; :data:`DATA_KINDS` holds one per kind.

    Attributes:
        source: ``source(config, seed, split)``, the pairs of a split (training pairs for ``"train"``).
        heldout: ``heldout(config, eval_seed)``, the fixed held-out pairs of ``crl eval`` and ``run.eval_every``.
        labelled: ``labelled(config, split)``, anchor-view inputs with class labels, or ``None`` without labels.
        truth: ``truth(config)``, the known ground truth of the pairs (synthetic sources), else ``None``.
        no_labels: ``no_labels(config)``, why ``labelled`` gave no labels, and the fix where there is one.
        validation: ``validation(config)``, the labelled images that choose a run's vectors, or ``None``.
    """

    source: Callable[[Any, int, Split], PairSource]
    heldout: Callable[[Any, int], PairedArrays]
    labelled: Callable[[Any, Split], LabelledInputs | None]
    truth: Callable[[Any], GroundTruth] | None = None
    no_labels: Callable[[Any], str] = _source_has_no_labels
    validation: Callable[[Any], ValidationSet | None] = _no_validation


_IMAGES = DataKind(_image_source, _image_heldout, _image_labels, validation=_image_validation)
_TEXT = DataKind(_text_source, _text_heldout, _no_labels)

DATA_KINDS: dict[type, DataKind] = {
    FashionMnistData: _IMAGES,
    DigitsData: _IMAGES,
    SyntheticData: DataKind(_synthetic_source, _synthetic_heldout, _no_labels, synthetic_truth),
    ArraysData: DataKind(_arrays_source, _arrays_heldout, _labelled_arrays, no_labels=_arrays_have_no_labels),
    WordnetData: _TEXT,
    BibleData: _TEXT,
    GcideData: _TEXT,
    TextPairsData: _TEXT,
    LockedData: DataKind(_locked_source, _locked_heldout, _locked_labels),
}
"""The data sources by the type of their ``[data]`` config: a new source is one entry here."""


def data_kind(config: DataConfig) -> DataKind:
    """The :class:`DataKind` of a ``[data]`` config."""
    return DATA_KINDS[type(config)]


def build_source(config: DataConfig, *, seed: int, split: Split = "train") -> PairSource:
    """The training pair source of ``[data]`` (``split="test"`` gives the held-out images' source).

    Synthetic training pairs are drawn once from the "data" stream of ``seed``.
    """
    return data_kind(config).source(config, seed, split)


def heldout_pairs(config: TrainConfig) -> PairedArrays:
    """The fixed held-out pairs: two views of each test image drawn with the ``eval.seed`` generator, the
    halves of each test image, n_heldout fresh synthetic pairs, or the held-out part of your arrays.

    Raises:
        ValueError: for text sources, which are evaluated by retrieval with qrels instead.
    """
    return data_kind(config.data).heldout(config.data, config.eval.seed)


def labelled_inputs(config: DataConfig, split: Split) -> LabelledInputs | None:
    """Anchor-view inputs and labels of a split (``None`` for synthetic data, text, and arrays without labels);
    for images, "train" is the images of the training pairs (without the validation images)."""
    return data_kind(config).labelled(config, split)


def validation_set(config: DataConfig) -> ValidationSet | None:
    """The labelled images on which a run chooses its vectors (:class:`ValidationSet`; images only, else
    ``None``)."""
    return data_kind(config).validation(config)
