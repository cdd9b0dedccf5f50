"""Pair makers: how an image (or a synthetic truth) becomes a pair (x, y) with y the positive of x.

- ``halves_pairs``: x = left half, y = right half of the same image (two "modalities", fixed pairs).
- ``TwoViewPairs``: x, y = two random augmentations of the same image (two views, SimCLR); fresh views on
  every call, so an index gives new views each epoch.
- ``SyntheticPairs``: n pairs materialised from a ground truth with ``sample(n, generator) -> (x, y)``.

Items of grey-scale images (C = 1) drop the channel axis and are (H, W), the input shape of
``crl.models.SmallCNN`` and of the trainer's pair sources; images with C > 1 keep (C, H, W).
All three satisfy the ``PairSource`` protocol (``crl.data.source``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor

from crl.data.arrays import GenerateNegatives, PairedArrays
from crl.data.augment import ImageAugmentation
from crl.data.images import ImageSet

Augment = Callable[[Tensor, torch.Generator], Tensor]
"""``augment(images (N, C, H, W), generator) -> (N, C, H, W)``, e.g. an ``ImageAugmentation``."""


class PairSampler(Protocol):
    """Anything that samples n pairs, e.g. a ``crl.synthetic`` ground truth."""

    def sample(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """n pairs (x, y), each (n, ...)."""
        ...


def split_halves(images: Tensor) -> tuple[Tensor, Tensor]:
    """Left and right halves of images (N, C, H, W): columns [0, W//2) and [W//2, W).

    ``torch.cat(split_halves(images), dim=-1)`` is ``images`` again.
    """
    if not isinstance(images, Tensor) or images.dim() != 4 or images.shape[-1] < 2:
        shape = tuple(images.shape) if isinstance(images, Tensor) else type(images).__name__
        raise ValueError(f"images: expected (N, C, H, W) with W >= 2 to split in halves, got {shape}.")
    middle = images.shape[-1] // 2
    return images[..., :middle], images[..., middle:]


def halves_pairs(images: ImageSet) -> PairedArrays:
    """Pairs x_i = left half, y_i = right half of image i, with the images' labels.

    For 28x28 Fashion-MNIST: x, y are (N, 28, 14). Positives are index-matched: ``positive_index = arange(N)``
    for ``crl.metrics.retrieval``.
    """
    _check_image_set(images)
    left, right = split_halves(images.images)
    return PairedArrays(_as_items(left), _as_items(right), images.labels)


class TwoViewPairs:
    """Pairs of two random augmentations of the same image; every call draws fresh views.

    Args:
        images: the images and labels.
        augmentation: ``augment(images, generator)``; default ``ImageAugmentation()``.

    ``pairs(indices, g)`` draws x = augment(img[indices], g) and then y = augment(img[indices], g): the two
    views are independent draws, and the result is a deterministic function of the generator's state.
    """

    def __init__(self, images: ImageSet, augmentation: Augment | None = None) -> None:
        _check_image_set(images)
        if augmentation is not None and not callable(augmentation):
            raise TypeError(f"augmentation: expected a callable (images, generator), got {augmentation!r}.")
        self.images = images
        self.augmentation: Augment = ImageAugmentation() if augmentation is None else augmentation

    def __len__(self) -> int:
        """n, the number of images (pairs)."""
        return len(self.images)

    @property
    def labels(self) -> Tensor:
        """(n,) class labels of the images."""
        return self.images.labels

    @property
    def n_pairs(self) -> int:
        """n, the number of images (pairs)."""
        return len(self.images)

    @property
    def anchor_shape(self) -> tuple[int, ...]:
        """Shape of one view: (H, W) for grey-scale images, else (C, H, W)."""
        c, h, w = self.images.image_shape
        return (h, w) if c == 1 else (c, h, w)

    @property
    def positive_shape(self) -> tuple[int, ...]:
        """Same as ``anchor_shape``."""
        return self.anchor_shape

    @property
    def generate_negatives(self) -> GenerateNegatives | None:
        """``None``: negatives are views of other images (the pool)."""
        return None

    def pairs(self, indices: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """Two independent views of the images at ``indices``, each (k, *anchor_shape)."""
        batch = self.images.images[indices]
        first = self.augmentation(batch, generator)
        return _as_items(first), _as_items(self.augmentation(batch, generator))

    def anchors(self, indices: Tensor, generator: torch.Generator) -> Tensor:
        """One view of the images at ``indices``."""
        return _as_items(self.augmentation(self.images.images[indices], generator))

    def positives(self, indices: Tensor, generator: torch.Generator) -> Tensor:
        """One view of the images at ``indices`` (same law as ``anchors``)."""
        return self.anchors(indices, generator)

    def materialise(self, generator: torch.Generator, *, batch_size: int = 4096) -> PairedArrays:
        """One fixed draw of views for every image (e.g. an evaluation set), in batches of ``batch_size``."""
        if batch_size < 1:
            raise ValueError(f"batch_size: got {batch_size}; pass a positive int.")
        xs, ys = [], []
        for start in range(0, self.n_pairs, batch_size):
            x, y = self.pairs(torch.arange(start, min(start + batch_size, self.n_pairs)), generator)
            xs.append(x)
            ys.append(y)
        return PairedArrays(torch.cat(xs), torch.cat(ys), self.labels)


class SyntheticPairs(PairedArrays):
    """n pairs (x_i, y_i) drawn once from a ground truth: ``truth.sample(n, generator)``.

    Works with any object that has ``sample(n, generator) -> (x, y)`` (``crl.synthetic``'s ``GroundTruth``);
    when the truth also has ``sample_negatives(shape, generator)``, that is the ``generate_negatives`` of this
    source, so a trainer draws y' ~ p- exactly instead of from the pool.

    Args:
        truth: the pair sampler.
        n: number of pairs, >= 1.
        generator: the random stream for the draw.
        dtype: convert x and y to this dtype (e.g. ``torch.float32`` for training); ``None`` keeps the truth's.
    """

    def __init__(
        self, truth: PairSampler, n: int, generator: torch.Generator, *, dtype: torch.dtype | None = None
    ) -> None:
        if not callable(getattr(truth, "sample", None)):
            raise TypeError(
                f"truth: expected an object with sample(n, generator), got {type(truth).__name__}."
            )
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n: got {n!r}; pass the number of pairs as an int >= 1.")
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator: expected a torch.Generator, got {type(generator).__name__}.")
        x, y = truth.sample(n, generator)
        if x.shape[0] != n or y.shape[0] != n:
            raise ValueError(f"truth: sample({n}) returned {x.shape[0]} anchors and {y.shape[0]} positives.")
        if dtype is not None:
            x, y = x.to(dtype), y.to(dtype)
        super().__init__(x, y)
        self.truth = truth
        self.dtype = dtype

    @property
    def generate_negatives(self) -> GenerateNegatives | None:
        """``truth.sample_negatives`` (cast to ``dtype``) when the truth has it, else ``None`` (the pool)."""
        sample_negatives = getattr(self.truth, "sample_negatives", None)
        if not callable(sample_negatives):
            return None
        dtype = self.dtype

        def generate(shape: tuple[int, ...], generator: torch.Generator) -> Tensor:
            negatives: Tensor = sample_negatives(shape, generator)
            return negatives if dtype is None else negatives.to(dtype)

        return generate


def _as_items(batch: Tensor) -> Tensor:
    """(k, 1, H, W) -> (k, H, W); (k, C, H, W) with C > 1 unchanged."""
    return batch.squeeze(1) if batch.shape[1] == 1 else batch


def _check_image_set(images: ImageSet) -> None:
    if not isinstance(images, ImageSet):
        raise TypeError(
            f"images: expected a crl.data.ImageSet (from load_fashion_mnist / load_digits), "
            f"got {type(images).__name__}."
        )
