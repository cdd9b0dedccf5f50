"""Paired data sets: the pair-source protocol (``PairSource``, ``Batch``), real images (Fashion-MNIST, digits),
pair makers, torch-only augmentations, arrays, locked features and their disk cache.

Nothing here downloads anything: Fashion-MNIST comes from the Debian package ``dataset-fashion-mnist`` and the
digits ship inside scikit-learn. :mod:`crl.data.cjk` (CJK glyph <-> English gloss pairs from Debian's
``unicode-data`` and ``fonts-wqy-zenhei``) is imported by its own name, so that only its users load Pillow.
"""

from crl.data.arrays import GenerateNegatives, PairedArrays, load_paired_npz, read_arrays
from crl.data.augment import (
    ImageAugmentation,
    gaussian_noise,
    horizontal_flip,
    random_erasing,
    random_horizontal_flip,
    random_resized_crop,
    random_shift,
)
from crl.data.digits import DIGITS_CLASSES, load_digits
from crl.data.fashion_mnist import FASHION_MNIST_CLASSES, FASHION_MNIST_ROOT, load_fashion_mnist
from crl.data.features import FeatureCache, FeatureKey, Features, cached_features
from crl.data.idx import read_idx
from crl.data.images import ImageSet
from crl.data.locked import LockedFeaturePairs
from crl.data.pairs import PairSampler, SyntheticPairs, TwoViewPairs, halves_pairs, split_halves
from crl.data.source import Batch, PairSource, batch_rows, move_batch, slice_rows

__all__ = [
    "DIGITS_CLASSES",
    "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_ROOT",
    "Batch",
    "FeatureCache",
    "FeatureKey",
    "Features",
    "GenerateNegatives",
    "ImageAugmentation",
    "ImageSet",
    "LockedFeaturePairs",
    "PairSampler",
    "PairSource",
    "PairedArrays",
    "SyntheticPairs",
    "TwoViewPairs",
    "batch_rows",
    "cached_features",
    "gaussian_noise",
    "halves_pairs",
    "horizontal_flip",
    "load_digits",
    "load_fashion_mnist",
    "load_paired_npz",
    "move_batch",
    "random_erasing",
    "random_horizontal_flip",
    "random_resized_crop",
    "random_shift",
    "read_arrays",
    "read_idx",
    "slice_rows",
    "split_halves",
]
