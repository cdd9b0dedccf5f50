"""Paired arrays held in memory: n pairs (x_i, y_i) with optional labels, the generic paired data set.

``PairedArrays`` is both a map-style ``torch.utils.data.Dataset`` (item i is ``(x_i, y_i)`` or
``(x_i, y_i, label_i)``) and a pair source for the trainer (``crl.data.source.PairSource``: ``n_pairs``,
``anchor_shape``, ``positive_shape``, ``pairs``/``anchors``/``positives`` by index).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

from crl._validate import Integers, check, missing_file

GenerateNegatives = Callable[[tuple[int, ...], torch.Generator], Tensor]
"""``generate(shape, generator)`` returns samples y' ~ p- of shape (*shape, *positive_shape); the same
signature as ``crl.negatives.Generate`` (data sits below negatives, so it does not import it)."""


class PairedArrays(Dataset[tuple[Tensor, ...]]):
    """n pairs (x_i, y_i), positives index-matched: y_i is the positive of x_i.

    Args:
        x: (n, *anchor_shape) anchors.
        y: (n, *positive_shape) positives.
        labels: optional (n,) integer class labels (for class-level evaluation, e.g. same-class positives).

    Raises:
        ValueError / TypeError: if x, y, labels disagree in length, are empty, or hold NaN/inf.
    """

    def __init__(self, x: Tensor, y: Tensor, labels: Tensor | None = None) -> None:
        for name, values in (("x", x), ("y", y)):
            if not isinstance(values, Tensor) or values.dim() < 1 or values.shape[0] < 1:
                shape = tuple(values.shape) if isinstance(values, Tensor) else type(values).__name__
                raise ValueError(f"{name}: expected a tensor (n, ...) with n >= 1 pairs, got {shape}.")
            if values.is_floating_point() and not bool(torch.isfinite(values).all()):
                raise ValueError(f"{name}: contains NaN or inf; clean the data before pairing it.")
        if x.shape[0] != y.shape[0]:
            raise ValueError(
                f"x/y: {x.shape[0]} anchors but {y.shape[0]} positives; pairs are index-matched."
            )
        if labels is not None:
            if not isinstance(labels, Tensor) or labels.shape != (x.shape[0],):
                shape = tuple(labels.shape) if isinstance(labels, Tensor) else type(labels).__name__
                raise ValueError(f"labels: expected shape ({x.shape[0]},), one per pair, got {shape}.")
            check("labels", labels, Integers(allow_bool=True))
            labels = labels.long()
        self.x = x
        self.y = y
        self.labels = labels

    def __len__(self) -> int:
        """n, the number of pairs."""
        return self.x.shape[0]

    def __getitem__(self, index: int) -> tuple[Tensor, ...]:
        """``(x_i, y_i)``, or ``(x_i, y_i, label_i)`` when labels were given."""
        if self.labels is None:
            return self.x[index], self.y[index]
        return self.x[index], self.y[index], self.labels[index]

    @property
    def n_pairs(self) -> int:
        """n, the number of pairs."""
        return self.x.shape[0]

    @property
    def anchor_shape(self) -> tuple[int, ...]:
        """Shape of one anchor x_i."""
        return tuple(self.x.shape[1:])

    @property
    def positive_shape(self) -> tuple[int, ...]:
        """Shape of one positive y_i."""
        return tuple(self.y.shape[1:])

    @property
    def generate_negatives(self) -> GenerateNegatives | None:
        """``None``: negatives are other pairs' positives (the pool)."""
        return None

    def pairs(self, indices: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """``(x[indices], y[indices])``; fixed pairs use no randomness, so ``generator`` is not consumed."""
        return self.x[indices], self.y[indices]

    def anchors(self, indices: Tensor, generator: torch.Generator) -> Tensor:
        """``x[indices]``."""
        return self.x[indices]

    def positives(self, indices: Tensor, generator: torch.Generator) -> Tensor:
        """``y[indices]``."""
        return self.y[indices]

    def subset(self, indices: Tensor | slice) -> PairedArrays:
        """The pairs (and labels) at ``indices``, e.g. ``subset(slice(0, n))`` for the first n."""
        labels = None if self.labels is None else self.labels[indices]
        return PairedArrays(self.x[indices], self.y[indices], labels)


def read_arrays(path: str | Path, keys: Sequence[str]) -> dict[str, np.ndarray]:
    """Named numeric arrays from a ``.npz`` file (``np.savez``) or a folder of ``<key>.npy`` files, without pickle.

    Args:
        path: the ``.npz`` file, or a folder holding one ``.npy`` file per key.
        keys: the names of the arrays to read.

    Raises:
        FileNotFoundError: if ``path`` (or a key's ``.npy`` file in a folder) does not exist.
        KeyError: if an ``.npz`` lacks a key (the message lists the keys present).
        ValueError: if an array holds Python objects (pickle is refused) or the file is not an array file.
    """
    path = Path(path)
    if path.is_dir():
        return {key: _read_npy(path / f"{key}.npy") for key in keys}
    if not path.is_file():
        raise FileNotFoundError(
            f"array file {str(path)!r} {missing_file(path)}; pass an .npz file (np.savez) or a folder of .npy files"
        )
    if path.suffix != ".npz":
        raise ValueError(
            f"{path}: expected an .npz file (np.savez) or a folder of <key>.npy files; an .npy file holds one "
            "array, so put x and y in one .npz or in one folder"
        )
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [key for key in keys if key not in archive.files]
            if missing:
                raise KeyError(f"{path}: no array named {missing}; the file holds {sorted(archive.files)}.")
            return {key: np.array(archive[key]) for key in keys}
    except ValueError as error:
        raise ValueError(
            f"{path}: cannot read without pickle ({error}); store numeric arrays only."
        ) from error


def _read_npy(path: Path) -> np.ndarray:
    """One array from an ``.npy`` file, without pickle."""
    if not path.is_file():
        raise FileNotFoundError(f"array file {str(path)!r} {missing_file(path)}; save it with np.save")
    try:
        return np.asarray(np.load(path, allow_pickle=False))
    except ValueError as error:
        raise ValueError(
            f"{path}: cannot read without pickle ({error}); store numeric arrays only."
        ) from error


def load_paired_npz(
    path: str | Path, *, x_key: str = "x", y_key: str = "y", labels_key: str | None = None
) -> PairedArrays:
    """Paired arrays from a ``.npz`` file (``np.savez``) or a folder of ``.npy`` files, read without pickle.

    Args:
        path: the ``.npz`` file (or a folder with ``<x_key>.npy``, ``<y_key>.npy``, ...).
        x_key, y_key: names of the anchor and positive arrays (same first dimension n).
        labels_key: name of an (n,) integer label array, or ``None``.

    Raises:
        KeyError: if a key is missing (the message lists the keys present).
        ValueError: if an array holds Python objects (pickle is refused) or the arrays do not pair up.
    """
    keys = [x_key, y_key] + ([labels_key] if labels_key is not None else [])
    arrays = read_arrays(path, keys)
    tensors = [torch.from_numpy(arrays[key]) for key in keys]
    return PairedArrays(tensors[0], tensors[1], tensors[2] if labels_key is not None else None)
