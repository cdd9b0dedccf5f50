"""Class accuracy of several feature sets with intervals, each compared with the raw-pixel baseline.

A representation is worth its training only if it classifies better than its input. This module scores feature
sets (the embedding f(x), the backbone features h before the projection head, as SimCLR evaluates, and the raw
centred pixels) by the weighted kNN monitor and the linear probe of :mod:`crl.metrics.classification`, and
reports for each:

- the accuracy acc = (1/M) sum_q c_q over the M test items (c_q = 1 when item q is classified correctly) with its
  Wilson score interval at ``level``;
- against the pixel baseline of the same method, the paired difference delta = (1/M) sum_q (c_q - b_q) with a
  normal interval delta +- z se, se = sd(c - b) / sqrt(M) (both classifiers score the same test items, so the
  pairing removes the items' shared difficulty);
- ``beats_pixels``: True when the accuracy's interval lies wholly above the baseline's interval (the margin the
  two intervals exclude), False when it lies wholly below, None when they overlap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Literal

from torch import Tensor

from crl.metrics.classification import knn_predictions, linear_probe_predictions

__all__ = [
    "PIXELS",
    "AccuracyInterval",
    "ClassRow",
    "PairedDifference",
    "centred_pixels",
    "class_report",
    "paired_difference",
    "wilson_interval",
]

PIXELS = "pixels"
"""The name of the raw-pixel feature set, the baseline of every other set."""

Method = Literal["knn", "probe"]


@dataclass(frozen=True)
class AccuracyInterval:
    """An accuracy over M test items and its Wilson score interval [low, high] at ``level``."""

    accuracy: float
    low: float
    high: float
    level: float
    n_test: int


@dataclass(frozen=True)
class PairedDifference:
    """delta = accuracy - baseline accuracy on the same test items, with its normal interval at ``level``."""

    difference: float
    low: float
    high: float
    level: float


@dataclass(frozen=True)
class ClassRow:
    """One feature set scored by one method.

    Attributes:
        features: the feature set ("embedding", "backbone", "pixels", ...).
        method: "knn" or "probe".
        interval: its accuracy and interval.
        vs_pixels: the paired difference with the pixel baseline of the same method (None for the baseline).
        beats_pixels: interval wholly above the baseline's (True), wholly below (False), overlapping (None).
        correct: (M,) bool, whether each test item was classified correctly (for paired bootstraps).
    """

    features: str
    method: Method
    interval: AccuracyInterval
    vs_pixels: PairedDifference | None
    beats_pixels: bool | None
    correct: Tensor = field(repr=False, compare=False)


def _z(level: float) -> float:
    """The two-sided standard normal quantile z with P(|Z| <= z) = level."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level = {level} must lie strictly between 0 and 1 (e.g. 0.95)")
    return NormalDist().inv_cdf(0.5 + level / 2)


def wilson_interval(correct: Tensor, *, level: float = 0.95) -> AccuracyInterval:
    """Wilson's score interval of p = mean(correct) over M Bernoulli outcomes:
    (p + z^2/2M +- z sqrt(p(1-p)/M + z^2/4M^2)) / (1 + z^2/M).

    Raises:
        ValueError: if ``correct`` is empty or ``level`` is outside (0, 1).
    """
    n = int(correct.numel())
    if n == 0:
        raise ValueError("correct is empty; pass one 0/1 outcome per test item")
    z = _z(level)
    p = float(correct.double().mean())
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return AccuracyInterval(p, centre - half, centre + half, level, n)


def paired_difference(correct: Tensor, baseline: Tensor, *, level: float = 0.95) -> PairedDifference:
    """mean(c - b) +- z sd(c - b) / sqrt(M) for two classifiers' 0/1 outcomes on the same M test items.

    Raises:
        ValueError: if the two have different shapes or fewer than 2 items.
    """
    if correct.shape != baseline.shape or correct.numel() < 2:
        raise ValueError(
            f"correct {tuple(correct.shape)} and baseline {tuple(baseline.shape)} must be outcomes of the same "
            ">= 2 test items"
        )
    delta = correct.double() - baseline.double()
    mean = float(delta.mean())
    half = _z(level) * float(delta.std()) / math.sqrt(delta.numel())
    return PairedDifference(mean, mean - half, mean + half, level)


def centred_pixels(train_inputs: Tensor, test_inputs: Tensor) -> tuple[Tensor, Tensor]:
    """Flattened raw inputs minus the train mean: x - mean_train(x), for the pixel baseline (float32)."""
    train = train_inputs.reshape(train_inputs.shape[0], -1).float()
    test = test_inputs.reshape(test_inputs.shape[0], -1).float()
    mean = train.mean(dim=0)
    return train - mean, test - mean


def _beats(interval: AccuracyInterval, baseline: AccuracyInterval) -> bool | None:
    if interval.low > baseline.high:
        return True
    if interval.high < baseline.low:
        return False
    return None


def class_report(
    features: Mapping[str, tuple[Tensor, Tensor]],
    train_labels: Tensor,
    test_labels: Tensor,
    *,
    n_classes: int,
    knn_k: int = 20,
    knn_temperature: float = 0.07,
    probe: bool = True,
    probe_max_iter: int = 200,
    level: float = 0.95,
) -> list[ClassRow]:
    """Score every feature set (name -> (train features, test features)) by kNN and, with ``probe``, the probe.

    When ``features`` holds :data:`PIXELS`, every other row is compared with it (same method); the pixel rows
    come first.

    Raises:
        ValueError: if ``features`` is empty.
    """
    if not features:
        raise ValueError("features is empty; pass at least one name -> (train, test) feature set")
    methods: tuple[Method, ...] = ("knn", "probe") if probe else ("knn",)
    names = sorted(features, key=lambda name: name != PIXELS)
    outcomes: dict[tuple[str, Method], Tensor] = {}
    for name in names:
        train, test = features[name]
        for method in methods:
            predicted = (
                knn_predictions(
                    train,
                    train_labels,
                    test,
                    k=min(knn_k, train.shape[0]),
                    temperature=knn_temperature,
                    n_classes=n_classes,
                )
                if method == "knn"
                else linear_probe_predictions(
                    train, train_labels, test, max_iter=probe_max_iter, n_classes=n_classes
                )
            )
            outcomes[(name, method)] = predicted == test_labels
    return [_row(name, method, outcomes, level) for name in names for method in methods]


def _row(name: str, method: Method, outcomes: Mapping[tuple[str, Method], Tensor], level: float) -> ClassRow:
    correct = outcomes[(name, method)]
    interval = wilson_interval(correct, level=level)
    baseline = outcomes.get((PIXELS, method))
    if name == PIXELS or baseline is None:
        return ClassRow(name, method, interval, None, None, correct)
    difference = paired_difference(correct, baseline, level=level)
    return ClassRow(
        name, method, interval, difference, _beats(interval, wilson_interval(baseline, level=level)), correct
    )
