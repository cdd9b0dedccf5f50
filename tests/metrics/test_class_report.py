"""Class accuracy intervals and the pixel-baseline comparison of crl.metrics.class_report."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from crl.metrics.class_report import (
    PIXELS,
    centred_pixels,
    class_report,
    paired_difference,
    wilson_interval,
)
from crl.metrics.classification import knn_accuracy, linear_probe_accuracy


@pytest.mark.parametrize(("hits", "n"), [(0, 20), (7, 20), (861, 1000), (1000, 1000)])
def test_wilson_interval_matches_scipy(hits: int, n: int) -> None:
    """The Wilson score interval equals scipy's binomtest(...).proportion_ci(method='wilson')."""
    correct = torch.zeros(n, dtype=torch.bool)
    correct[:hits] = True
    ours = wilson_interval(correct, level=0.95)
    expected = stats.binomtest(hits, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert ours.accuracy == pytest.approx(hits / n)
    assert (ours.low, ours.high) == pytest.approx((expected.low, expected.high), abs=1e-12)


def test_paired_difference_is_the_normal_interval_of_item_differences() -> None:
    """delta +- z sd/sqrt(M) of c - b, computed here with numpy and scipy's normal quantile."""
    rng = np.random.default_rng(0)
    a, b = rng.random(500) < 0.8, rng.random(500) < 0.7
    ours = paired_difference(torch.from_numpy(a), torch.from_numpy(b), level=0.9)
    delta = a.astype(float) - b.astype(float)
    half = stats.norm.ppf(0.95) * delta.std(ddof=1) / math.sqrt(500)
    assert (ours.difference, ours.low, ours.high) == pytest.approx(
        (delta.mean(), delta.mean() - half, delta.mean() + half), abs=1e-12
    )


def test_bad_interval_input_is_named() -> None:
    with pytest.raises(ValueError, match="level"):
        wilson_interval(torch.ones(3, dtype=torch.bool), level=1.0)
    with pytest.raises(ValueError, match="correct is empty"):
        wilson_interval(torch.ones(0, dtype=torch.bool))
    with pytest.raises(ValueError, match="same"):
        paired_difference(torch.ones(3, dtype=torch.bool), torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="features is empty"):
        class_report({}, torch.zeros(2), torch.zeros(2), n_classes=2)


def _labelled(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(3, (n,), generator=generator)
    pixels = torch.randn(n, 12, generator=generator)
    return pixels, labels


def test_report_compares_every_set_with_pixels() -> None:
    """Features that encode the label beat noise pixels (intervals apart); the rows match the plain accuracies."""
    train_pixels, train_labels = _labelled(300, 0)
    test_pixels, test_labels = _labelled(400, 1)
    centres = torch.eye(3, 5) * 4
    good = (
        centres[train_labels] + torch.randn(300, 5, generator=torch.Generator().manual_seed(2)),
        centres[test_labels] + torch.randn(400, 5, generator=torch.Generator().manual_seed(3)),
    )
    pixels = centred_pixels(train_pixels, test_pixels)
    rows = class_report(
        {"embedding": good, PIXELS: pixels}, train_labels, test_labels, n_classes=3, probe_max_iter=100
    )
    assert [(row.features, row.method) for row in rows] == [
        (PIXELS, "knn"),
        (PIXELS, "probe"),
        ("embedding", "knn"),
        ("embedding", "probe"),
    ]
    by_key = {(row.features, row.method): row for row in rows}
    expected_knn = knn_accuracy(*good[:1], train_labels, good[1], test_labels, n_classes=3)
    expected_probe = linear_probe_accuracy(good[0], train_labels, good[1], test_labels, max_iter=100)
    assert by_key[("embedding", "knn")].interval.accuracy == pytest.approx(expected_knn)
    assert by_key[("embedding", "probe")].interval.accuracy == pytest.approx(expected_probe)
    for method in ("knn", "probe"):
        row, base = by_key[("embedding", method)], by_key[(PIXELS, method)]
        assert row.beats_pixels is True and base.vs_pixels is None and row.vs_pixels is not None
        assert row.vs_pixels.difference == pytest.approx(row.interval.accuracy - base.interval.accuracy)
        assert row.vs_pixels.low > 0


def test_centred_pixels_subtracts_the_train_mean() -> None:
    train, test = torch.arange(12.0).reshape(3, 2, 2), torch.ones(2, 2, 2)
    centred_train, centred_test = centred_pixels(train, test)
    mean = train.reshape(3, 4).mean(dim=0)
    assert torch.equal(centred_train, train.reshape(3, 4) - mean)
    assert torch.equal(centred_test, torch.ones(2, 4) - mean)


def test_the_baseline_against_itself_overlaps_with_zero_difference() -> None:
    train_pixels, train_labels = _labelled(100, 4)
    test_pixels, test_labels = _labelled(80, 5)
    pixels = centred_pixels(train_pixels, test_pixels)
    rows = class_report({"copy": pixels, PIXELS: pixels}, train_labels, test_labels, n_classes=3, probe=False)
    copy = rows[-1]
    assert copy.features == "copy" and copy.beats_pixels is None
    assert copy.vs_pixels is not None and copy.vs_pixels.difference == 0.0
