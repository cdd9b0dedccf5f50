"""scikit-learn's bundled UCI handwritten digits: 1,797 real 8x8 images in 10 classes, a quick sanity set.

There is no official split; ``load_digits`` makes a seeded one.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch

from crl.data.images import ImageSet

DIGITS_CLASSES = tuple(str(digit) for digit in range(10))


def load_digits(
    split: Literal["train", "test", "all"] = "train", *, test_fraction: float = 0.2, seed: int = 0
) -> ImageSet:
    """One split of the digits as float32 images in [0, 1] (pixel / 16).

    The split is a function of ``seed`` alone (numpy ``default_rng(seed).permutation``), so that a "train"
    call and a "test" call with the same seed and fraction are disjoint and together cover all 1,797 images.
    The test split has round(test_fraction * 1797) images; both keep the original order.

    Args:
        split: "train", "test", or "all" (no split).
        test_fraction: share of the images in the test split, strictly between 0 and 1.
        seed: seed of the split.

    Returns:
        An ``ImageSet`` with images (N, 1, 8, 8) and labels (N,) in 0..9.
    """
    if split not in ("train", "test", "all"):
        raise ValueError(f"split: got {split!r}; expected 'train', 'test' or 'all'.")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction: got {test_fraction}; pass a fraction strictly between 0 and 1.")
    # Deferred: scikit-learn takes seconds to import, and only this data set needs it.
    from sklearn.datasets import load_digits as sklearn_load_digits

    bunch = sklearn_load_digits()
    images = torch.from_numpy(np.asarray(bunch.images, dtype=np.float32) / 16.0).unsqueeze(1)
    labels = torch.from_numpy(np.asarray(bunch.target, dtype=np.int64))
    every = ImageSet(images, labels, DIGITS_CLASSES)
    if split == "all":
        return every
    n = len(every)
    n_test = round(test_fraction * n)
    if not 0 < n_test < n:
        raise ValueError(f"test_fraction: {test_fraction} leaves an empty split of {n} images; use e.g. 0.2.")
    order = np.random.default_rng(seed).permutation(n)
    chosen = order[:n_test] if split == "test" else order[n_test:]
    return every.subset(torch.from_numpy(np.sort(chosen)))
