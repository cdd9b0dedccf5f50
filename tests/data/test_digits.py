"""crl.data.digits: the scikit-learn digits with a seeded split."""

from collections import Counter

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits as sklearn_load_digits

from crl.data.digits import load_digits
from crl.data.images import ImageSet


def test_all_images_match_sklearn_scaled_to_unit_interval() -> None:
    """split='all' must be sklearn's 1,797 images / 16 as (N, 1, 8, 8) with the same labels."""
    reference = sklearn_load_digits()
    every = load_digits("all")
    assert every.images.shape == (1797, 1, 8, 8) and every.images.dtype == torch.float32
    np.testing.assert_allclose(every.images[:, 0].numpy(), reference.images / 16.0, rtol=0, atol=1e-7)
    np.testing.assert_array_equal(every.labels.numpy(), reference.target)


def test_split_is_a_disjoint_cover_and_depends_only_on_the_seed() -> None:
    """Train and test must partition the images; the same seed gives the same split, another seed another."""
    every = load_digits("all")
    train, test = load_digits("train", seed=3), load_digits("test", seed=3)
    assert len(test) == round(0.2 * 1797) and len(train) + len(test) == 1797

    def rows(images: ImageSet) -> Counter:
        return Counter(tuple(row) for row in images.images.flatten(1).mul(16).round().int().tolist())

    assert rows(train) + rows(test) == rows(every)
    assert torch.equal(load_digits("test", seed=3).images, test.images)
    assert not torch.equal(load_digits("test", seed=4).images, test.images)


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 0.0001])
def test_bad_test_fraction_raises(fraction: float) -> None:
    """A fraction outside (0, 1), or one that empties a split, must raise."""
    with pytest.raises(ValueError, match="test_fraction"):
        load_digits("test", test_fraction=fraction)
