"""``[data] source = "arrays"``: your own pairs from an .npz file (or a folder of .npy files), split into training
and held-out pairs.

The held-out pairs are those of ``heldout_path`` when it is set, else a fraction ``heldout_fraction`` of the
pairs drawn by a permutation seeded with ``split_seed`` (the same split for ``crl train`` and ``crl eval``; both
parts keep the file's order). ``n_train`` then keeps the first n training pairs. x and y are read as float32;
labels (``labels_key``) must be integers.
"""

from __future__ import annotations

import math
from typing import Literal

import torch

from crl.data import PairedArrays, read_arrays
from crl.train.config import ArraysData
from crl.train.streams import derive_generator

__all__ = ["read_pairs", "read_split"]


def read_pairs(config: ArraysData, path: str) -> PairedArrays:
    """The pairs (x, y as float32, labels when ``labels_key`` is set) stored at ``path`` under the config's keys.

    Raises:
        FileNotFoundError: if the file or folder does not exist.
        ValueError: if a key is missing (naming the config field and the keys present), or the arrays do not
            pair up.
    """
    keys = {"x_key": config.x_key, "y_key": config.y_key}
    if config.labels_key:
        keys["labels_key"] = config.labels_key
    try:
        arrays = read_arrays(path, list(keys.values()))
    except KeyError as error:
        given = ", ".join(f"{field} = {key!r}" for field, key in keys.items())
        raise ValueError(f"[data] {given}: {error.args[0]}; set the keys to names the file holds") from None
    try:
        return PairedArrays(
            torch.from_numpy(arrays[config.x_key]).float(),
            torch.from_numpy(arrays[config.y_key]).float(),
            torch.from_numpy(arrays[config.labels_key]) if config.labels_key else None,
        )
    except (ValueError, TypeError) as error:
        raise ValueError(f"[data] path = {path!r}: {error}") from None


def _fraction_split(pairs: PairedArrays, config: ArraysData) -> tuple[PairedArrays, PairedArrays]:
    n = pairs.n_pairs
    n_heldout = math.ceil(config.heldout_fraction * n)
    if n_heldout >= n:
        raise ValueError(
            f"[data] heldout_fraction = {config.heldout_fraction} of {n} pairs leaves no training pairs; "
            "lower it or pass heldout_path"
        )
    order = torch.randperm(n, generator=derive_generator(config.split_seed, "heldout-split"))
    heldout, train = order[:n_heldout].sort().values, order[n_heldout:].sort().values
    return pairs.subset(train), pairs.subset(heldout)


def _check_same_items(train: PairedArrays, heldout: PairedArrays, config: ArraysData) -> None:
    if (train.anchor_shape, train.positive_shape) != (heldout.anchor_shape, heldout.positive_shape):
        raise ValueError(
            f"[data] heldout_path = {config.heldout_path!r} holds x {heldout.anchor_shape} and y "
            f"{heldout.positive_shape} per pair, but path = {config.path!r} holds x {train.anchor_shape} and y "
            f"{train.positive_shape}; held-out pairs must have the training pairs' shapes"
        )


def read_split(config: ArraysData, split: Literal["train", "test"]) -> PairedArrays:
    """The training pairs (the first ``n_train`` when set) or the held-out pairs of ``config``.

    Raises:
        FileNotFoundError / ValueError: see :func:`read_pairs`; also when ``n_train`` exceeds the training pairs
            or the held-out file's pairs have other shapes.
    """
    pairs = read_pairs(config, config.path)
    if config.heldout_path:
        heldout = read_pairs(config, config.heldout_path)
        _check_same_items(pairs, heldout, config)
        train = pairs
    else:
        train, heldout = _fraction_split(pairs, config)
    if split == "test":
        return heldout
    if config.n_train > train.n_pairs:
        raise ValueError(
            f"[data] n_train = {config.n_train} exceeds the {train.n_pairs} training pairs of "
            f"{config.path!r}; use at most {train.n_pairs} (or 0 for all)"
        )
    return train.subset(slice(0, config.n_train)) if config.n_train > 0 else train
