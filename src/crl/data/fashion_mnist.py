"""Fashion-MNIST (Zalando, MIT licence) from the Debian package ``dataset-fashion-mnist``.

70,000 real 28x28 grey-scale product photos in 10 classes: a train split of 60,000 (6,000 per class) and a
test split of 10,000. The package installs the four IDX files into ``/usr/share/datasets/fashion-mnist``;
nothing is ever downloaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import torch

from crl.data.idx import read_idx
from crl.data.images import ImageSet

FASHION_MNIST_ROOT = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
_PREFIX = {"train": "train", "test": "t10k"}


def load_fashion_mnist(
    split: Literal["train", "test"] = "train", *, root: str | Path | None = None
) -> ImageSet:
    """Load one split of Fashion-MNIST as float32 images in [0, 1].

    Args:
        split: "train" (60,000 images) or "test" (10,000 images).
        root: folder with ``{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]``; default
            ``/usr/share/datasets/fashion-mnist``.

    Returns:
        An ``ImageSet`` with images (N, 1, 28, 28) = pixel / 255 and labels (N,) in 0..9.

    Raises:
        FileNotFoundError: if the files are missing (the message says how to install them).
        ValueError: for a bad split, malformed files, or images and labels that do not match.
    """
    if split not in _PREFIX:
        raise ValueError(f"split: got {split!r}; expected 'train' or 'test'.")
    folder = FASHION_MNIST_ROOT if root is None else Path(root)
    images = read_idx(_find(folder, f"{_PREFIX[split]}-images-idx3-ubyte"))
    labels = read_idx(_find(folder, f"{_PREFIX[split]}-labels-idx1-ubyte"))
    _check_arrays(images, labels, folder, split)
    return ImageSet(
        torch.from_numpy(images).unsqueeze(1).float().div_(255.0),
        torch.from_numpy(labels.astype(np.int64)),
        FASHION_MNIST_CLASSES,
    )


def _find(folder: Path, stem: str) -> Path:
    """``stem.gz`` or ``stem`` inside ``folder``."""
    for candidate in (folder / f"{stem}.gz", folder / stem):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"Fashion-MNIST file {stem}[.gz] not found in {folder}. Install the data with "
        "`apt-get install dataset-fashion-mnist` (files go to /usr/share/datasets/fashion-mnist) "
        "or pass root= to a folder that holds the IDX files."
    )


def _check_arrays(images: np.ndarray, labels: np.ndarray, folder: Path, split: str) -> None:
    if images.dtype != np.uint8 or images.ndim != 3 or images.shape[1:] != (28, 28):
        raise ValueError(
            f"{folder}: {split} images are {images.dtype} of shape {images.shape}, expected uint8 (N, 28, 28)."
        )
    if labels.dtype != np.uint8 or labels.ndim != 1:
        raise ValueError(
            f"{folder}: {split} labels are {labels.dtype} of shape {labels.shape}, expected uint8 (N,)."
        )
    if labels.shape[0] != images.shape[0]:
        raise ValueError(
            f"{folder}: {split} has {images.shape[0]} images but {labels.shape[0]} labels; the files are from "
            "different splits or corrupt."
        )
    if labels.shape[0] == 0 or int(labels.max()) >= len(FASHION_MNIST_CLASSES):
        top = int(labels.max()) if labels.size else None
        raise ValueError(
            f"{folder}: {split} labels must be 0..9 and non-empty, got {labels.size} with max {top}."
        )
